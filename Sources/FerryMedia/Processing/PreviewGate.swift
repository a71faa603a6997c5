import FerryStorage

/// Bounds the pictures a node makes on demand: identical requests at once share one ffmpeg run, at most `limit` runs
/// go at once, at most `maxWaiting` more wait for a turn, and anything past that is refused with
/// `requestRateExceeded` (S3's 503 `SlowDown` with `Retry-After`) without starting anything. Without it, a burst of
/// distinct picture requests would start one ffmpeg each.
package actor PreviewGate {
    private let limit: Int
    private let maxWaiting: Int
    private var active = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var inFlight: [String: Task<Void, any Error>] = [:]

    /// A gate letting `limit` runs go at once (at least 1) and `maxWaiting` more wait.
    package init(limit: Int, maxWaiting: Int) {
        self.limit = max(1, limit)
        self.maxWaiting = max(0, maxWaiting)
    }

    /// Runs `make` for `key`, or, when a run for `key` is under way, waits for it and shares its outcome.
    ///
    /// A run holds its turn until it ends, whoever still waits for it: a caller that goes away does not stop it (each
    /// run has its own time limit).
    package func run(key: String, _ make: @escaping @Sendable () async throws -> Void) async throws {
        if let running = inFlight[key] { return try await running.value }
        if active < limit {
            active += 1
        } else if waiting.count < maxWaiting {
            // Queued before this suspends; the turn is handed over by the run that ends (``endTurn()``).
            await withCheckedContinuation { waiting.append($0) }
        } else {
            throw FerryDomainError(
                .requestRateExceeded, "The server is making as many pictures as it can; ask again in a moment.",
                retryAfterSeconds: 1)
        }
        // Someone else's run for the same picture may have started while this one waited.
        if let running = inFlight[key] {
            endTurn()
            return try await running.value
        }
        let task = Task { try await make() }
        inFlight[key] = task
        defer {
            inFlight[key] = nil
            endTurn()
        }
        try await task.value
    }

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
