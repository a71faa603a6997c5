import Testing

@testable import Ferry

@Suite("Answer waits: how long a part waits for its answer once its body is sent")
struct AnswerWaitsTests {
    @Test("no wait before a part is answered; then the shortest wait or four times the longest measured one, at most 300 s")
    func measure() {
        let waits = AnswerWaits(shortest: .seconds(60))
        #expect(waits.deadline == nil)
        waits.answered(after: .milliseconds(100))
        #expect(waits.deadline == .seconds(60))
        waits.answered(after: .seconds(20))
        #expect(waits.deadline == .seconds(80))
        waits.answered(after: .seconds(5))
        #expect(waits.deadline == .seconds(80))
        waits.answered(after: .seconds(100))
        #expect(waits.deadline == .seconds(300))
    }

    @Test("each wait that runs out doubles the shortest wait for the rest of the upload, up to 300 s: a server or link that slowed down is not cut off at the same limit again")
    func runningOut() {
        let waits = AnswerWaits(shortest: .seconds(30))
        waits.answered(after: .milliseconds(100))
        var seen: [Duration] = []
        for _ in 0..<6 {
            let deadline = waits.deadline ?? .zero
            seen.append(deadline)
            waits.ranOut(deadline)
        }
        #expect(seen == [.seconds(30), .seconds(60), .seconds(120), .seconds(240), .seconds(300), .seconds(300)])
        // An answer measured later does not lower it.
        waits.answered(after: .seconds(1))
        #expect(waits.deadline == .seconds(300))
    }
}
