import NIOConcurrencyHelpers

/// Runs `body` in a task of its own and answers its result, or nil when it takes longer than `limit` or the caller is
/// cancelled: the task is then cancelled and left to end by itself, so the caller never waits on an operation that
/// does not respond to cancellation.
package func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let race = TimeLimitRace<T>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            race.wait(continuation, work: Task { race.answer(await body()) })
            Task {
                try? await Task.sleep(for: limit)
                race.answer(nil)
            }
        }
    } onCancel: {
        race.answer(nil)
    }
}

/// Whichever comes first answers a ``withTimeLimit(_:_:)`` caller (the body, the limit, the caller's cancellation) and
/// cancels the body's task; the others find the answer given.
private final class TimeLimitRace<T: Sendable>: @unchecked Sendable {
    // Every access to the fields below holds `lock`.
    private let lock = NIOLock()
    private var waiting: CheckedContinuation<T?, Never>?
    private var work: Task<Void, Never>?
    /// The answer, once one came (possibly before the caller waits).
    private var given: T??

    /// The caller waits for its answer, given at once when one came already.
    func wait(_ continuation: CheckedContinuation<T?, Never>, work: Task<Void, Never>) {
        let given: T?? = lock.withLock {
            (self.waiting, self.work) = (continuation, work)
            return self.given
        }
        if let given {
            work.cancel()
            continuation.resume(returning: given)
        }
    }

    func answer(_ value: T?) {
        let (waiting, work): (CheckedContinuation<T?, Never>?, Task<Void, Never>?) = lock.withLock {
            guard given == nil else { return (nil, nil) }
            given = .some(value)
            return (self.waiting, self.work)
        }
        waiting?.resume(returning: value)
        work?.cancel()
    }
}
