@testable import FerryServer
import Foundation
import Synchronization
import Testing

@Suite("Time limits on operations that may not answer", .timeLimit(.minutes(10)))
struct TimeLimitTests {
    @Test("an answer within the limit is returned; past it the caller gets nil at once, even from work that ignores cancellation")
    func timeLimit() async {
        #expect(await withTimeLimit(.seconds(5)) { 42 } == 42)
        let started = ContinuousClock.now
        let stubbornEnded = Mutex(false)
        let stubborn: Int? = await withTimeLimit(.milliseconds(200)) {
            // Ignores cancellation for ten seconds, as a query waiting on a stuck connection pool would.
            while ContinuousClock.now - started < .seconds(10) { try? await Task.sleep(for: .milliseconds(50)) }
            stubbornEnded.withLock { $0 = true }
            return 1
        }
        #expect(stubborn == nil)
        // The caller had its nil while the work it gave up on was still running.
        #expect(!stubbornEnded.withLock { $0 })
    }

    @Test("a cancelled caller gets nil at once and the work is cancelled, even when the limit is far off")
    func cancelledCaller() async {
        let workCancelled = Mutex(false)
        let caller = Task {
            await withTimeLimit(.seconds(3600)) { () -> Int in
                do {
                    try await Task.sleep(for: .seconds(3600))
                } catch {
                    workCancelled.withLock { $0 = true }
                }
                return 1
            }
        }
        caller.cancel()
        // Without the cancellation reaching it, this would wait an hour (past the suite's time limit).
        #expect(await caller.value == nil)
        while !workCancelled.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
        // Cancelled before it was called: nil, and the work is cancelled as it starts.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await withTimeLimit(.seconds(3600)) { () -> Bool in
                (try? await Task.sleep(for: .seconds(3600))) != nil
            }
        }
        #expect(await early.value == nil)
    }
}
