import NIOConcurrencyHelpers

/// Runs `body` in a task of its own and answers its result, or nil when it takes longer than `limit`: the task is then
/// cancelled and left to end by itself, so the caller never waits on an operation that does not respond to
/// cancellation.
package func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let answered = NIOLockedValueBox(false)
    return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
        // Whichever comes first answers; the other finds `answered` set.
        @Sendable func answer(_ value: T?) -> Bool {
            let first = answered.withLockedValue { was in
                defer { was = true }
                return !was
            }
            if first { continuation.resume(returning: value) }
            return first
        }
        let work = Task { _ = answer(await body()) }
        Task {
            try? await Task.sleep(for: limit)
            if answer(nil) { work.cancel() }
        }
    }
}
