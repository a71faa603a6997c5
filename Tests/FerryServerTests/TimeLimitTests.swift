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
}
