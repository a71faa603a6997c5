import FerryTransport
import Foundation
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
    @Test("parts share the link: a wait that runs out halves the parts sent at once, down to one, which then has the whole link; parts that run out together halve them once")
    func fewerPartsOnASlowLink() async throws {
        let waits = AnswerWaits(shortest: .milliseconds(200), lanes: 4)
        waits.answered(after: .milliseconds(10))
        #expect(waits.parallelParts == 4)
        // Parts whose bodies go out and whose answers never come (a link too slow for them all at once): four sent
        // together halve the lanes once, then the two sent together once more.
        for (parts, after) in [(4, 2), (2, 1)] {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<parts {
                    group.addTask {
                        _ = try? await waits.watch(bodyCount: 1, progress: { _ in }) { sent in
                            sent(1)
                            try await Task.sleep(for: .seconds(30))
                            return TransportResponse(status: 200, headers: [], body: [])
                        }
                    }
                }
            }
            #expect(waits.parallelParts == after)
        }
        // A timeout from the transport itself counts the same.
        let narrowed = AnswerWaits(shortest: .seconds(60), lanes: 8)
        _ = try? await narrowed.watch(bodyCount: 1, progress: { _ in }) { _ in throw TransportError(isTimeout: true, "read timeout") }
        _ = try? await narrowed.watch(bodyCount: 1, progress: { _ in }) { _ in throw TransportError("refused") }
        #expect(narrowed.parallelParts == 4)

        // Then one part is sent at a time; the others wait for its lane.
        let concurrency = Concurrency()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    _ = try? await waits.watch(bodyCount: 1, progress: { _ in }) { sent in
                        concurrency.enter()
                        defer { concurrency.leave() }
                        sent(1)
                        try await Task.sleep(for: .milliseconds(50))
                        return TransportResponse(status: 200, headers: [], body: [])
                    }
                }
            }
        }
        #expect(concurrency.most == 1 && concurrency.entered == 3)
    }

    @Test("once twice as many parts as are sent at once are stored in time in a row, one more is sent at once, up to the upload's own number; refusals add none; a wait that runs out starts the count again")
    func moreLanesOnceTheLinkKeepsUp() async throws {
        let waits = AnswerWaits(shortest: .seconds(60), lanes: 4)
        let timeout: @Sendable (@escaping @Sendable (Int) -> Void) async throws -> TransportResponse = { _ in
            throw TransportError(isTimeout: true, "read timeout")
        }
        let answered: @Sendable (@escaping @Sendable (Int) -> Void) async throws -> TransportResponse = { sent in
            sent(1)
            return TransportResponse(status: 200, headers: [], body: [])
        }
        _ = try? await waits.watch(bodyCount: 1, progress: { _ in }, timeout)
        _ = try? await waits.watch(bodyCount: 1, progress: { _ in }, timeout)
        #expect(waits.parallelParts == 1)
        // Refusals in time (503 SlowDown asks for less) add none.
        for _ in 0..<4 {
            _ = try await waits.watch(bodyCount: 1, progress: { _ in }) { sent in
                sent(1)
                return TransportResponse(status: 503, headers: [], body: [])
            }
        }
        #expect(waits.parallelParts == 1)
        var widths: [Int] = []
        for _ in 0..<14 {
            _ = try await waits.watch(bodyCount: 1, progress: { _ in }, answered)
            widths.append(waits.parallelParts)
        }
        // 2 answers at one lane, 4 at two, 6 at three; then the upload's four, and no more.
        #expect(widths == [1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4])
        // A wait that runs out halves them and starts the count again.
        _ = try await waits.watch(bodyCount: 1, progress: { _ in }, answered)
        _ = try? await waits.watch(bodyCount: 1, progress: { _ in }, timeout)
        _ = try await waits.watch(bodyCount: 1, progress: { _ in }, answered)
        _ = try? await waits.watch(bodyCount: 1, progress: { _ in }, timeout)
        #expect(waits.parallelParts == 1)
        _ = try await waits.watch(bodyCount: 1, progress: { _ in }, answered)
        #expect(waits.parallelParts == 1)
    }

    /// Counts sends running at once.
    final class Concurrency: @unchecked Sendable {
        private let lock = NSLock()
        private var now = 0
        private var highest = 0
        private var count = 0
        var most: Int { lock.withLock { highest } }
        var entered: Int { lock.withLock { count } }
        func enter() { lock.withLock { now += 1; count += 1; highest = max(highest, now) } }
        func leave() { lock.withLock { now -= 1 } }
    }
}
