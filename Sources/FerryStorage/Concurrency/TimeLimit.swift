import NIOConcurrencyHelpers

/// Runs `body` in a task of its own and answers its result, or nil when it takes longer than `limit` or the caller is
/// cancelled: the task is then cancelled and left to end by itself, so the caller never waits on an operation that
/// does not respond to cancellation.
package func withTimeLimit<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let race = TimeLimitRace<T>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            race.wait(
                continuation, work: Task { race.answer(await body()) },
                timer: Task {
                    try? await Task.sleep(for: limit)
                    race.answer(nil)
                })
        }
    } onCancel: {
        race.answer(nil)
    }
}

/// Whichever comes first answers a ``withTimeLimit(_:_:)`` caller (the body, the limit, the caller's cancellation) and
/// cancels the body's task and the timer; the others find the answer given.
private final class TimeLimitRace<T: Sendable>: @unchecked Sendable {
    // Every access to the fields below holds `lock`.
    private let lock = NIOLock()
    private var waiting: CheckedContinuation<T?, Never>?
    private var tasks: [Task<Void, Never>] = []
    /// The answer, once one came before the caller waited; nil again once handed over.
    private var early: T??
    private var answered = false

    /// The caller waits for its answer, given at once when one came already.
    func wait(_ continuation: CheckedContinuation<T?, Never>, work: Task<Void, Never>, timer: Task<Void, Never>) {
        let early: T?? = lock.withLock {
            if answered {
                defer { self.early = nil }
                return self.early
            }
            (waiting, tasks) = (continuation, [work, timer])
            return nil
        }
        if let early {
            work.cancel()
            timer.cancel()
            continuation.resume(returning: early)
        }
    }

    func answer(_ value: T?) {
        let (waiting, tasks): (CheckedContinuation<T?, Never>?, [Task<Void, Never>]) = lock.withLock {
            guard !answered else { return (nil, []) }
            answered = true
            if self.waiting == nil { early = .some(value) }
            defer { (self.waiting, self.tasks) = (nil, []) }
            return (self.waiting, self.tasks)
        }
        waiting?.resume(returning: value)
        for task in tasks { task.cancel() }
    }
}
