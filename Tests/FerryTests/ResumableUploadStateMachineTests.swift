import FerryCore
import Foundation
import Testing

@testable import Ferry

/// Every transition of the resumable upload's state machine, valid and not, without I/O: waiters are strings.
@Suite("Resumable upload state machine")
struct ResumableUploadStateMachineTests {
    typealias Machine = ResumableUploadTask.StateMachine<String>

    static let result = UploadResult(
        bucket: "b", key: "k", etag: "e", size: 42, uploadId: "u", checksumAlgorithm: nil, checksum: nil,
        verification: .none, partsResumed: 0, partsSent: 1)
    static let refused = FerryError(.server, "Access Denied", httpStatus: 403, serverCode: "AccessDenied")
    static let expired = FerryError(.credentialsExpired, "The credentials expired; resume with fresh ones.")
    static let stopped = FerryError.cancelledError()

    /// The states a machine can be in, each reached through transitions only.
    enum Situation: String, CaseIterable, CustomTestStringConvertible {
        case initial, running, runningPauseAsked, runningCancelAsked, stopping, stoppingCancelAsked, paused
        case cancelling, succeeded, failed
        var testDescription: String { rawValue }

        func make() -> Machine {
            var machine = Machine()
            switch self {
            case .initial:
                break
            case .running:
                _ = machine.start()
            case .runningPauseAsked:
                _ = machine.start()
                _ = machine.pause()
            case .runningCancelAsked:
                _ = machine.start()
                _ = machine.cancel()
            case .stopping:
                _ = machine.start()
                machine.uploadFailed(ResumableUploadStateMachineTests.refused)
            case .stoppingCancelAsked:
                _ = machine.start()
                machine.uploadFailed(ResumableUploadStateMachineTests.expired)
                _ = machine.cancel()
            case .paused:
                _ = machine.start()
                _ = machine.pause()
                machine.uploadFailed(ResumableUploadStateMachineTests.stopped)
                _ = machine.stopSettled()
            case .cancelling:
                _ = machine.start()
                _ = machine.pause()
                machine.uploadFailed(ResumableUploadStateMachineTests.stopped)
                _ = machine.stopSettled()
                _ = machine.cancel()
            case .succeeded:
                _ = machine.start()
                _ = machine.uploadSucceeded(ResumableUploadStateMachineTests.result)
            case .failed:
                _ = machine.start()
                machine.uploadFailed(ResumableUploadStateMachineTests.refused)
                _ = machine.stopSettled()
            }
            return machine
        }

        var phase: Machine.Phase {
            switch self {
            case .initial: .initial
            case .running, .runningPauseAsked, .runningCancelAsked: .running
            case .stopping, .stoppingCancelAsked: .stopping
            case .paused: .paused
            case .cancelling: .cancelling
            case .succeeded, .failed: .finished
            }
        }
    }

    /// Events by name, the error by its server code or code.
    static func names(_ events: [UploadEvent]) -> [String] {
        events.map { event in
            switch event {
            case .started: "started"
            case .progress: "progress"
            case .retrying: "retrying"
            case .retryResumed: "retryResumed"
            case .credentialsExpired: "credentialsExpired"
            case .paused: "paused"
            case .resumed: "resumed"
            case .completed: "completed"
            case .failed(let error): "failed \(error.serverCode ?? error.code.description)"
            case .cancelled: "cancelled"
            }
        }
    }

    static func describe(_ outcome: Result<UploadResult, FerryError>) -> String {
        switch outcome {
        case .success(let result): "success \(result.size)"
        case .failure(let error): "failure \(error.serverCode ?? error.code.description)"
        }
    }

    static func describe(_ action: Machine.RunEndAction) -> String {
        switch action {
        case .pause(let events): "pause \(names(events))"
        case .cleanUp(let events): "cleanUp \(names(events))"
        case .finish(let finish): "finish \(names(finish.events)) \(describe(finish.outcome)) \(finish.waiters)"
        case .none: "none"
        }
    }

    static func describe(_ action: Machine.PauseAction) -> String {
        switch action {
        case .stopRunner: "stopRunner"
        case .waitForRunner: "waitForRunner"
        case .none: "none"
        }
    }

    static func describe(_ action: Machine.CancelAction) -> String {
        switch action {
        case .stopRunner: "stopRunner"
        case .waitForRunner: "waitForRunner"
        case .cleanUp: "cleanUp"
        case .waitForCleanup: "waitForCleanup"
        case .none: "none"
        }
    }

    static func isRun(_ action: Machine.RunAction) -> Bool {
        if case .run = action { true } else { false }
    }

    // MARK: start

    @Test("start runs a new upload once; in any other state it does nothing", arguments: Situation.allCases)
    func start(_ situation: Situation) {
        var machine = situation.make()
        let action = machine.start()
        if situation == .initial {
            #expect(Self.isRun(action))
            #expect(machine.phase == .running)
        } else {
            #expect(!Self.isRun(action))
            #expect(machine.phase == situation.phase)
        }
    }

    // MARK: pause

    @Test("pause stops a running runner, waits for one already stopping, and does nothing otherwise", arguments: Situation.allCases)
    func pause(_ situation: Situation) {
        var machine = situation.make()
        let expected: String =
            switch situation {
            case .running, .runningPauseAsked: "stopRunner"
            case .runningCancelAsked, .stopping, .stoppingCancelAsked: "waitForRunner"
            case .initial, .paused, .cancelling, .succeeded, .failed: "none"
            }
        #expect(Self.describe(machine.pause()) == expected)
        #expect(machine.phase == situation.phase)
    }

    @Test("a pause asked for after a cancel does not undo the cancel: the runner's end cleans up")
    func pauseAfterCancelKeepsCancel() {
        var machine = Situation.runningCancelAsked.make()
        #expect(Self.describe(machine.pause()) == "waitForRunner")
        machine.uploadFailed(Self.stopped)
        #expect(Self.describe(machine.stopSettled()) == "cleanUp []")
        #expect(machine.phase == .cancelling)
    }

    // MARK: resume

    @Test("resume runs a paused upload again; in any other state it does nothing", arguments: Situation.allCases)
    func resume(_ situation: Situation) {
        var machine = situation.make()
        let action = machine.resume()
        if situation == .paused {
            #expect(Self.isRun(action))
            #expect(machine.phase == .running)
            // A new run: a pause stops it again.
            #expect(Self.describe(machine.pause()) == "stopRunner")
        } else {
            #expect(!Self.isRun(action))
            #expect(machine.phase == situation.phase)
        }
    }

    // MARK: cancel

    @Test("cancel stops a runner, cleans up an upload without one, waits for a clean-up under way, and leaves a finished upload", arguments: Situation.allCases)
    func cancel(_ situation: Situation) {
        var machine = situation.make()
        let expected: (String, Machine.Phase) =
            switch situation {
            case .running, .runningPauseAsked, .runningCancelAsked: ("stopRunner", .running)
            case .stopping, .stoppingCancelAsked: ("waitForRunner", .stopping)
            case .initial, .paused: ("cleanUp", .cancelling)
            case .cancelling: ("waitForCleanup", .cancelling)
            case .succeeded, .failed: ("none", .finished)
            }
        #expect(Self.describe(machine.cancel()) == expected.0)
        #expect(machine.phase == expected.1)
    }

    @Test("a cancel overrides a pause asked for earlier")
    func cancelAfterPause() {
        var machine = Situation.runningPauseAsked.make()
        #expect(Self.describe(machine.cancel()) == "stopRunner")
        machine.uploadFailed(Self.stopped)
        #expect(Self.describe(machine.stopSettled()) == "cleanUp []")
    }

    // MARK: The runner's end

    @Test("the upload succeeding finishes it with completed, whatever stop was asked for; elsewhere it is ignored", arguments: Situation.allCases)
    func uploadSucceeded(_ situation: Situation) {
        var machine = situation.make()
        let action = machine.uploadSucceeded(Self.result)
        switch situation {
        case .running, .runningPauseAsked, .runningCancelAsked:
            #expect(Self.describe(action) == "finish [\"completed\"] success 42 []")
            #expect(machine.phase == .finished)
        default:
            #expect(Self.describe(action) == "none")
            #expect(machine.phase == situation.phase)
        }
    }

    @Test("the upload failing while it runs moves it to stopping; elsewhere it is ignored", arguments: Situation.allCases)
    func uploadFailed(_ situation: Situation) {
        var machine = situation.make()
        machine.uploadFailed(Self.refused)
        switch situation {
        case .running, .runningPauseAsked, .runningCancelAsked:
            #expect(machine.phase == .stopping)
        default:
            #expect(machine.phase == situation.phase)
            #expect(Self.describe(machine.stopSettled()).hasPrefix("finish") == (situation == .stopping))
        }
    }

    /// How a run that failed settles, by why it was asked to stop, what it failed with, and whether a cancel came
    /// while it flushed its checkpoint.
    struct Settling: CustomTestStringConvertible, Sendable {
        var asked: Machine.Stop?
        var error: FerryError
        var cancelDuringFlush: Bool
        var expected: String
        var phase: Machine.Phase
        var testDescription: String {
            "asked \(asked.map { "\($0)" } ?? "nothing"), \(error.code)\(cancelDuringFlush ? ", cancel during flush" : "")"
        }
    }

    static let settlings: [Settling] = [
        Settling(asked: .pause, error: stopped, cancelDuringFlush: false, expected: "pause [\"paused\"]", phase: .paused),
        Settling(asked: .pause, error: stopped, cancelDuringFlush: true, expected: "cleanUp [\"paused\"]", phase: .cancelling),
        // A pause that failed for a reason of its own is still a pause: it was decided before.
        Settling(asked: .pause, error: refused, cancelDuringFlush: false, expected: "pause [\"paused\"]", phase: .paused),
        Settling(asked: .cancel, error: stopped, cancelDuringFlush: false, expected: "cleanUp []", phase: .cancelling),
        Settling(
            asked: nil, error: expired, cancelDuringFlush: false, expected: "pause [\"credentialsExpired\", \"paused\"]",
            phase: .paused),
        Settling(
            asked: nil, error: expired, cancelDuringFlush: true, expected: "cleanUp [\"credentialsExpired\", \"paused\"]",
            phase: .cancelling),
        Settling(
            asked: nil, error: refused, cancelDuringFlush: false, expected: "finish [\"failed AccessDenied\"] failure AccessDenied []",
            phase: .finished),
        // The failure stands: a cancel during the flush finds an upload that already failed.
        Settling(
            asked: nil, error: refused, cancelDuringFlush: true, expected: "finish [\"failed AccessDenied\"] failure AccessDenied []",
            phase: .finished),
        // Cancelled from outside (not by pause or cancel): it ends without a failed event.
        Settling(asked: nil, error: stopped, cancelDuringFlush: false, expected: "finish [] failure cancelled []", phase: .finished),
    ]

    @Test("a failed run settles once its checkpoint is flushed: paused, cleaned up for a cancel, or failed", arguments: ResumableUploadStateMachineTests.settlings)
    func stopSettled(_ settling: Settling) {
        var machine = Machine()
        _ = machine.start()
        switch settling.asked {
        case .pause: _ = machine.pause()
        case .cancel: _ = machine.cancel()
        case nil: break
        }
        machine.uploadFailed(settling.error)
        if settling.cancelDuringFlush { #expect(Self.describe(machine.cancel()) == "waitForRunner") }
        #expect(Self.describe(machine.stopSettled()) == settling.expected)
        #expect(machine.phase == settling.phase)
        // It settles once.
        #expect(Self.describe(machine.stopSettled()) == "none")
    }

    @Test("a pause that arrives while a failure's checkpoint is flushed does not turn the failure into a pause")
    func pauseDuringFlushKeepsFailure() {
        var machine = Machine()
        _ = machine.start()
        machine.uploadFailed(Self.refused)
        #expect(Self.describe(machine.pause()) == "waitForRunner")
        #expect(Self.describe(machine.stopSettled()) == "finish [\"failed AccessDenied\"] failure AccessDenied []")
    }

    @Test("settling applies only to a run that is stopping", arguments: Situation.allCases.filter { $0.phase != .stopping })
    func stopSettledElsewhere(_ situation: Situation) {
        var machine = situation.make()
        #expect(Self.describe(machine.stopSettled()) == "none")
        #expect(machine.phase == situation.phase)
    }

    // MARK: Clean-up

    @Test("the clean-up after a cancel ends the upload as cancelled; without one under way it does nothing", arguments: Situation.allCases)
    func cleanedUp(_ situation: Situation) {
        var machine = situation.make()
        let finish = machine.cleanedUp()
        if situation == .cancelling {
            #expect(finish.map { Self.names($0.events) } == ["cancelled"])
            #expect(finish.map { Self.describe($0.outcome) } == "failure cancelled")
            #expect(machine.phase == .finished)
            #expect(machine.cleanedUp().map(\.waiters) == nil)
        } else {
            #expect(finish.map(\.waiters) == nil)
            #expect(machine.phase == situation.phase)
        }
    }

    // MARK: Waiters

    @Test("asking for the result: a finished upload answers at once, any other gives a new waiter number", arguments: Situation.allCases)
    func resultRequested(_ situation: Situation) {
        var machine = situation.make()
        let first = machine.resultRequested()
        let second = machine.resultRequested()
        switch (situation, first, second) {
        case (.succeeded, .finished(let outcome), .finished):
            #expect(Self.describe(outcome) == "success 42")
        case (.failed, .finished(let outcome), .finished):
            #expect(Self.describe(outcome) == "failure AccessDenied")
        case (_, .wait(let a), .wait(let b)):
            #expect(situation.phase != .finished)
            #expect(a != b)
        default:
            Issue.record("unexpected answers \(first), \(second) in \(situation)")
        }
    }

    @Test("waiters are answered, in the order they came, when the upload ends")
    func waitersAnsweredAtEnd() {
        var machine = Situation.running.make()
        for name in ["a", "b", "c"] {
            guard case .wait(let number) = machine.resultRequested() else { Issue.record("no number"); return }
            guard case .wait = machine.waiterArrived(number, name, callerCancelled: false) else {
                Issue.record("\(name) did not wait")
                return
            }
        }
        #expect(machine.waiterCount == 3)
        #expect(Self.describe(machine.uploadSucceeded(Self.result)) == "finish [\"completed\"] success 42 [\"a\", \"b\", \"c\"]")
        #expect(machine.waiterCount == 0)
    }

    @Test("the waiters of a cancelled upload get the cancellation")
    func waitersOfCancelledUpload() {
        var machine = Situation.paused.make()
        guard case .wait(let number) = machine.resultRequested() else { Issue.record("no number"); return }
        _ = machine.waiterArrived(number, "a", callerCancelled: false)
        #expect(Self.describe(machine.cancel()) == "cleanUp")
        let finish = machine.cleanedUp()
        #expect(finish?.waiters == ["a"])
        #expect(finish.map { Self.describe($0.outcome) } == "failure cancelled")
    }

    @Test("a waiter that arrives after the end is answered at once; one whose caller was cancelled gets the cancellation")
    func waiterArrived() {
        var finished = Situation.succeeded.make()
        if case .answer(let waiter, let outcome) = finished.waiterArrived(0, "late", callerCancelled: false) {
            #expect(waiter == "late")
            #expect(Self.describe(outcome) == "success 42")
        } else {
            Issue.record("a late waiter was not answered")
        }
        var running = Situation.running.make()
        guard case .wait(let number) = running.resultRequested() else { Issue.record("no number"); return }
        if case .cancel(let waiter) = running.waiterArrived(number, "gone", callerCancelled: true) {
            #expect(waiter == "gone")
        } else {
            Issue.record("a cancelled caller was made to wait")
        }
        #expect(running.waiterCount == 0)
    }

    @Test("a cancelled caller's waiter is let go; the upload pauses when it was the last one and the upload runs")
    func callerCancelled() {
        var machine = Situation.running.make()
        var numbers: [Int] = []
        for name in ["a", "b"] {
            guard case .wait(let number) = machine.resultRequested() else { Issue.record("no number"); return }
            _ = machine.waiterArrived(number, name, callerCancelled: false)
            numbers.append(number)
        }
        let first = machine.callerCancelled(numbers[0])
        #expect(first.waiter == "a" && !first.pause)
        // The same caller again: nothing.
        let again = machine.callerCancelled(numbers[0])
        #expect(again.waiter == nil && !again.pause)
        let last = machine.callerCancelled(numbers[1])
        #expect(last.waiter == "b" && last.pause)
        // A caller cancelled before it could wait, with no one waiting.
        let early = machine.callerCancelled(nil)
        #expect(early.waiter == nil && early.pause)
    }

    @Test("a cancelled caller does not pause an upload that is not running", arguments: Situation.allCases.filter { $0.phase != .running })
    func callerCancelledElsewhere(_ situation: Situation) {
        var machine = situation.make()
        let action = machine.callerCancelled(nil)
        #expect(action.waiter == nil && !action.pause)
    }

    // MARK: Whole lives

    @Test("pause, resume, expire, resume with credentials, complete")
    func life() {
        var machine = Machine()
        #expect(Self.isRun(machine.start()))
        #expect(Self.describe(machine.pause()) == "stopRunner")
        machine.uploadFailed(Self.stopped)
        #expect(Self.describe(machine.stopSettled()) == "pause [\"paused\"]")
        #expect(Self.isRun(machine.resume()))
        machine.uploadFailed(Self.expired)
        #expect(Self.describe(machine.stopSettled()) == "pause [\"credentialsExpired\", \"paused\"]")
        #expect(Self.isRun(machine.resume()))
        #expect(Self.describe(machine.uploadSucceeded(Self.result)) == "finish [\"completed\"] success 42 []")
        #expect(Self.describe(machine.cancel()) == "none")
        #expect(!Self.isRun(machine.resume()))
    }
}
