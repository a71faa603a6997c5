import FerryCore

extension ResumableUploadTask {
    /// The life of a resumable upload as a value: which state it is in, who waits for its result, and what the task
    /// must do after each event (start or stop its runner, report events, clean up after a cancel, answer the
    /// waiters). No I/O and no waiting: ``ResumableUploadTask`` feeds it events and performs the actions it returns.
    ///
    /// - `initial` —start→ `running`
    /// - `running` —upload succeeded→ `finished`; —upload failed→ `stopping`
    /// - `stopping` —stop settled→ `paused` (a pause, or credentials that expired), `cancelling` (a cancel), or
    ///   `finished` (a failure of its own)
    /// - `paused` —resume→ `running`; —cancel→ `cancelling`
    /// - `cancelling` —cleaned up→ `finished`
    ///
    /// Why a failed run stopped (a pause, a cancel, or a failure of its own) is decided when it fails, before its
    /// checkpoint is flushed: a pause or cancel that arrives during the flush cannot turn a failure into a pause.
    ///
    /// `Waiter` is what a caller awaiting the result is resumed through (a continuation in the task; anything in
    /// tests).
    struct StateMachine<Waiter> {
        /// Why the runner was asked to stop.
        enum Stop: Equatable, Sendable {
            case pause, cancel
        }

        /// The state without its data, for tests and logs.
        enum Phase: Equatable, Sendable {
            case initial, running, stopping, paused, cancelling, finished
        }

        private enum State {
            /// Made; the runner has not started.
            case initial
            /// The runner is sending; `stop` is why it was asked to stop, if it was.
            case running(stop: Stop?)
            /// The runner failed and is flushing its checkpoint; why it stopped is decided (`decided`); a cancel
            /// that arrived since is remembered.
            case stopping(decided: Stop?, error: FerryError, cancelRequested: Bool)
            /// No runner; the upload id and checkpoint stay.
            case paused
            /// Cancelled: the server's upload is being aborted and the checkpoint deleted (when asked for).
            case cancelling
            /// Done; the result is final.
            case finished(Result<UploadResult, FerryError>)
        }

        private var state: State = .initial
        /// Callers awaiting the result, by a number of their own.
        private var waiters: [Int: Waiter] = [:]
        private var nextWaiter = 0

        init() {}

        /// Where the upload is.
        var phase: Phase {
            switch state {
            case .initial: .initial
            case .running: .running
            case .stopping: .stopping
            case .paused: .paused
            case .cancelling: .cancelling
            case .finished: .finished
            }
        }

        /// How many callers wait for the result.
        var waiterCount: Int { waiters.count }

        // MARK: Actions

        /// What ``start()`` and ``resume()`` ask for.
        enum RunAction {
            /// Start the runner (after ``resume()``, report `resumed` first).
            case run
            /// Nothing: the event does not apply in this state.
            case none
        }

        /// What ``pause()`` asks for.
        enum PauseAction {
            /// Cancel the runner and wait for it to end.
            case stopRunner
            /// The runner is stopping already: wait for it to end.
            case waitForRunner
            /// Nothing to pause.
            case none
        }

        /// What ``cancel()`` asks for.
        enum CancelAction {
            /// Cancel the runner and wait for it to end; its end asks for the clean-up.
            case stopRunner
            /// The runner is stopping already: wait for it to end; its end asks for the clean-up.
            case waitForRunner
            /// No runner: clean up now (abort the upload and delete the checkpoint when asked for), then call
            /// ``cleanedUp()``.
            case cleanUp
            /// A clean-up is under way: wait for it.
            case waitForCleanup
            /// Already finished.
            case none
        }

        /// The upload's end: report `events`, finish the event stream, answer every waiter with `outcome`.
        struct Finish {
            var events: [UploadEvent]
            var outcome: Result<UploadResult, FerryError>
            var waiters: [Waiter]
        }

        /// What the runner's end asks for.
        enum RunEndAction {
            /// The upload stopped and waits: report `events` (`paused`, after `credentialsExpired` when that was why).
            case pause(events: [UploadEvent])
            /// A cancel stopped it: report `events`, then clean up and call ``cleanedUp()``.
            case cleanUp(events: [UploadEvent])
            /// The upload ended.
            case finish(Finish)
            /// Nothing: the event does not apply in this state.
            case none
        }

        /// What asking for the result gives.
        enum ResultRequest {
            /// The upload has ended: this is the result.
            case finished(Result<UploadResult, FerryError>)
            /// Wait with this number (pass it to ``waiterArrived(_:_:callerCancelled:)``).
            case wait(number: Int)
        }

        /// What to do with a waiter that arrived.
        enum WaiterAction {
            /// It waits; the upload's end answers it.
            case wait
            /// The upload ended meanwhile: answer it now.
            case answer(Waiter, Result<UploadResult, FerryError>)
            /// Its caller was cancelled before it could wait: throw `CancellationError` to it, then call
            /// ``callerCancelled(_:)`` with no number.
            case cancel(Waiter)
        }

        /// What a cancelled caller asks for.
        struct CallerCancelledAction {
            /// The waiter to throw `CancellationError` to, if it was still waiting.
            var waiter: Waiter?
            /// No one is left waiting and the upload runs: pause it.
            var pause: Bool
        }

        // MARK: Control

        /// The task was made: start the runner.
        mutating func start() -> RunAction {
            guard case .initial = state else { return .none }
            state = .running(stop: nil)
            return .run
        }

        /// ``ResumableUploadTask/pause()``: a running upload's runner is stopped; anything else is left as it is.
        /// A cancel asked for earlier wins over the pause.
        mutating func pause() -> PauseAction {
            switch state {
            case .running(stop: nil), .running(stop: .pause):
                state = .running(stop: .pause)
                return .stopRunner
            case .running(stop: .cancel), .stopping:
                return .waitForRunner
            case .initial, .paused, .cancelling, .finished:
                return .none
            }
        }

        /// ``ResumableUploadTask/resume()``: a paused upload runs again; anything else is left as it is.
        mutating func resume() -> RunAction {
            guard case .paused = state else { return .none }
            state = .running(stop: nil)
            return .run
        }

        /// ``ResumableUploadTask/cancel()``.
        mutating func cancel() -> CancelAction {
            switch state {
            case .running:
                state = .running(stop: .cancel)
                return .stopRunner
            case .stopping(let decided, let error, _):
                state = .stopping(decided: decided, error: error, cancelRequested: true)
                return .waitForRunner
            case .initial, .paused:
                state = .cancelling
                return .cleanUp
            case .cancelling:
                return .waitForCleanup
            case .finished:
                return .none
            }
        }

        // MARK: The runner

        /// The runner uploaded the file: the upload ends with `result`, whatever stop was asked for meanwhile.
        mutating func uploadSucceeded(_ result: UploadResult) -> RunEndAction {
            guard case .running = state else { return .none }
            return .finish(end(.success(result), events: [.completed(result)]))
        }

        /// The runner failed (a pause or cancel stops it with a cancellation error too): why it stopped is decided
        /// now. Call ``stopSettled()`` once its checkpoint is flushed.
        mutating func uploadFailed(_ error: FerryError) {
            guard case .running(let stop) = state else { return }
            state = .stopping(decided: stop, error: error, cancelRequested: stop == .cancel)
        }

        /// The failed runner flushed its checkpoint: the upload pauses, is cleaned up for a cancel, or fails.
        mutating func stopSettled() -> RunEndAction {
            guard case .stopping(let decided, let error, let cancelRequested) = state else { return .none }
            var events: [UploadEvent]
            switch decided {
            case .cancel:
                events = []
            case .pause:
                events = [.paused]
            case nil:
                guard error.code == .credentialsExpired else {
                    return .finish(end(.failure(error), events: error.code == .cancelled ? [] : [.failed(error)]))
                }
                events = [.credentialsExpired, .paused]
            }
            if cancelRequested {
                state = .cancelling
                return .cleanUp(events: events)
            }
            state = .paused
            return .pause(events: events)
        }

        /// The clean-up after a cancel is done: the upload ends as cancelled. Nil when no clean-up was under way.
        mutating func cleanedUp() -> Finish? {
            guard case .cancelling = state else { return nil }
            return end(.failure(FerryError.cancelledError()), events: [.cancelled])
        }

        // MARK: Waiters

        /// A caller asks for the result.
        mutating func resultRequested() -> ResultRequest {
            if case .finished(let outcome) = state { return .finished(outcome) }
            let number = nextWaiter
            nextWaiter += 1
            return .wait(number: number)
        }

        /// The caller numbered `number` is ready to wait through `waiter`.
        mutating func waiterArrived(_ number: Int, _ waiter: Waiter, callerCancelled: Bool) -> WaiterAction {
            if case .finished(let outcome) = state { return .answer(waiter, outcome) }
            if callerCancelled { return .cancel(waiter) }
            waiters[number] = waiter
            return .wait
        }

        /// A caller awaiting the result (`number`), or one cancelled before it could wait (nil), was cancelled. When no
        /// one is left waiting, a running upload pauses. A number no longer waiting changes nothing.
        mutating func callerCancelled(_ number: Int?) -> CallerCancelledAction {
            var waiter: Waiter?
            if let number {
                guard let removed = waiters.removeValue(forKey: number) else {
                    return CallerCancelledAction(waiter: nil, pause: false)
                }
                waiter = removed
            }
            var running = false
            if case .running = state { running = true }
            return CallerCancelledAction(waiter: waiter, pause: running && waiters.isEmpty)
        }

        /// Moves to `finished` and hands over the waiters.
        private mutating func end(_ outcome: Result<UploadResult, FerryError>, events: [UploadEvent]) -> Finish {
            state = .finished(outcome)
            let answered = waiters.sorted { $0.key < $1.key }.map(\.value)
            waiters = [:]
            return Finish(events: events, outcome: outcome, waiters: answered)
        }
    }
}
