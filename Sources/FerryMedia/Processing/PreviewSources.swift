import FerryStorage
import Foundation

/// The copies of videos' sources that pictures are taken from when a video has no rendition to read a part of (played
/// as uploaded, or not yet transcoded): one copy per stored source (a video id and its ETag), shared by every picture
/// of it on the node, instead of a whole copy per picture (a 574 MB copy for a 64-pixel still).
///
/// A copy is made once, by a task of its own; a picture waits for it within the picture's time limit, and a picture
/// that runs out of time leaves the copy going for the next one. Copies no picture uses are kept for
/// ``keep`` after their last use, and at most ``maxIdle`` of them (the oldest go first, one still being made is
/// stopped); the ones in use number at most the picture runs at once, so the disk they take is bounded.
actor PreviewSources {
    private struct Copy {
        var path: String
        var making: Task<Void, any Error>
        var ready = false
        /// Why it could not be made (its file is gone); it goes once no picture waits for it.
        var failure: (any Error)?
        var users = 0
        var lastUsed = ContinuousClock.now
    }

    /// Where the copies are (`<preview work>/sources`).
    let directory: String
    /// How long a copy no picture uses is kept.
    let keep: Duration
    /// Copies no picture uses that are kept at most.
    let maxIdle: Int
    private var copies: [String: Copy] = [:]

    init(directory: String, keep: Duration = .seconds(60), maxIdle: Int = 2) {
        self.directory = directory
        self.keep = keep
        self.maxIdle = maxIdle
    }

    /// The path of the copy called `name` (made by `make`, which writes the file at the path it is given, when there
    /// is none yet), once it is whole; it is the caller's until ``release(_:)``.
    ///
    /// - Throws: ``WaitExpired`` when the copy is not whole within `limit` (it goes on being made); what `make` threw
    ///   (the next picture makes it again); `CancellationError` when the caller is cancelled.
    func lease(_ name: String, within limit: Duration, make: @escaping @Sendable (String) async throws -> Void)
        async throws -> String
    {
        if copies[name] == nil {
            try PrivateFiles.directory(directory)
            let path = directory + "/" + name
            let making = Task { try await make(path) }
            copies[name] = Copy(path: path, making: making)
            Task { await self.settle(name, making) }
        }
        copies[name]?.users += 1
        copies[name]?.lastUsed = .now
        let deadline = ContinuousClock.now + limit
        do {
            // Polled: a wait on the copy's task could not end before the task does.
            while true {
                guard let copy = copies[name] else { throw CancellationError() }
                if let failure = copy.failure { throw failure }
                if copy.ready { return copy.path }
                guard ContinuousClock.now < deadline else { throw WaitExpired() }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            release(name)
            throw error
        }
    }

    /// The caller is done with the copy called `name`.
    func release(_ name: String) {
        guard copies[name] != nil else { return }
        copies[name]?.users -= 1
        copies[name]?.lastUsed = .now
        trim()
        let keep = self.keep
        Task {
            try? await Task.sleep(for: keep)
            self.trim()
        }
    }

    private func settle(_ name: String, _ making: Task<Void, any Error>) async {
        let outcome = await making.result
        guard let copy = copies[name], copy.making == making else { return }
        switch outcome {
        case .success: copies[name]?.ready = true
        case .failure(let error):
            copies[name]?.failure = error
            try? FileManager.default.removeItem(atPath: copy.path)
        }
        trim()
    }

    /// Drops the copies no picture uses that failed, are past ``keep``, or are beyond ``maxIdle`` (the oldest first).
    private func trim() {
        let idle = copies.filter { $0.value.users <= 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }
        let now = ContinuousClock.now
        for (index, (name, copy)) in idle.enumerated()
        where copy.failure != nil || now - copy.lastUsed >= keep || idle.count - index > maxIdle {
            copy.making.cancel()
            copies[name] = nil
            try? FileManager.default.removeItem(atPath: copy.path)
        }
    }

    /// A copy was not whole within the time a picture may take.
    struct WaitExpired: Error {}
}
