import FerryStorage

/// Bounds the pictures a node makes on demand: identical requests at once share one ffmpeg run (killed when every one
/// of them has gone away), at most `limit` runs go at once, at most `maxWaiting` more wait for a turn, and anything
/// past that is refused with `requestRateExceeded` (S3's 503 `SlowDown` with `Retry-After`) without starting
/// anything. Without it, a burst of distinct picture requests would start one ffmpeg each.
package actor PreviewGate {
    private let limit: Int
    private let maxWaiting: Int
    private var active = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    /// Runs under way by key, with how many callers still wait for each.
    private var inFlight: [String: (task: Task<Void, any Error>, callers: Int)] = [:]

    /// A gate letting `limit` runs go at once (at least 1) and `maxWaiting` more wait.
    package init(limit: Int, maxWaiting: Int) {
        self.limit = max(1, limit)
        self.maxWaiting = max(0, maxWaiting)
    }

    /// Runs `make` for `key`, or, when a run for `key` is under way, waits for it and shares its outcome.
    ///
    /// A run holds its turn until it ends. It goes on while any caller waits for it, and is cancelled (its ffmpeg
    /// killed) when the last one is.
    package func run(key: String, _ make: @escaping @Sendable () async throws -> Void) async throws {
        if let running = inFlight[key] { return try await join(key, running.task) }
        if active < limit {
            active += 1
        } else if waiting.count < maxWaiting {
            // Queued before this suspends; the turn is handed over by the run that ends (``endTurn()``). A caller
            // that went away meanwhile passes it on without running anything.
            await withCheckedContinuation { waiting.append($0) }
            if Task.isCancelled {
                endTurn()
                throw CancellationError()
            }
        } else {
            throw FerryDomainError(
                .requestRateExceeded, "The server is making as many pictures as it can; ask again in a moment.",
                retryAfterSeconds: 1)
        }
        // Someone else's run for the same picture may have started while this one waited.
        if let running = inFlight[key] {
            endTurn()
            return try await join(key, running.task)
        }
        let task = Task { try await make() }
        inFlight[key] = (task, 0)
        defer {
            inFlight[key] = nil
            endTurn()
        }
        try await join(key, task)
    }

    /// Waits for the run of `key` as one of its callers.
    private func join(_ key: String, _ task: Task<Void, any Error>) async throws {
        inFlight[key]?.callers += 1
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            Task { await self.leave(key, task) }
        }
    }

    /// A caller of the run of `key` went away; the run is cancelled when it was the last.
    private func leave(_ key: String, _ task: Task<Void, any Error>) {
        guard let entry = inFlight[key], entry.task == task else { return }
        inFlight[key]?.callers = entry.callers - 1
        if entry.callers <= 1 { task.cancel() }
    }

    /// How many callers wait for the run of `key` (0 when none is under way).
    package func callers(of key: String) -> Int { inFlight[key]?.callers ?? 0 }

    /// Runs under way and callers waiting for a turn.
    package var load: (running: Int, waiting: Int) { (active, waiting.count) }

    private func endTurn() {
        if waiting.isEmpty {
            active -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
