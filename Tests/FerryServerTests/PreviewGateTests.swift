import FerryMedia
import FerryStorage
import Foundation
import Synchronization
import Testing

/// Pictures made on demand are bounded per node: identical requests share one run, runs and waiters are capped.
@Suite("Preview gate: one run per picture, a bounded number at once, the rest refused", .timeLimit(.minutes(1)))
struct PreviewGateTests {
    /// Runs that block until let go, counting how many run at once.
    final class Runs: Sendable {
        private let state = Mutex((started: [String](), running: 0, peak: 0))
        private let release: AsyncStream<Void>
        private let releaser: AsyncStream<Void>.Continuation

        init() { (release, releaser) = AsyncStream<Void>.makeStream() }

        func run(_ key: String) async throws {
            state.withLock {
                $0.started.append(key)
                $0.running += 1
                $0.peak = max($0.peak, $0.running)
            }
            defer { state.withLock { $0.running -= 1 } }
            var iterator = release.makeAsyncIterator()
            _ = await iterator.next()
        }

        /// Lets one blocked run end.
        func letOneGo() { releaser.yield() }
        var started: [String] { state.withLock { $0.started } }
        var peak: Int { state.withLock { $0.peak } }
    }

    /// Waits until `condition` holds (the gate is an actor: its callers arrive in their own time).
    static func until(_ condition: @Sendable () async -> Bool) async throws {
        for _ in 0..<3000 where !(await condition()) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(await condition())
    }

    @Test("identical requests at once share one run and its outcome, a failure included")
    func identicalRequestsShareOneRun() async throws {
        let gate = PreviewGate(limit: 2, maxWaiting: 0)
        let runs = Runs()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<5 { group.addTask { try await gate.run(key: "a") { try await runs.run("a") } } }
            try await Self.until { runs.started.count == 1 }
            // The one run holds one turn: another picture still gets the second.
            group.addTask { try await gate.run(key: "b") { try await runs.run("b") } }
            try await Self.until { runs.started.count == 2 }
            #expect(await gate.load == (running: 2, waiting: 0))
            runs.letOneGo()
            runs.letOneGo()
            try await group.waitForAll()
        }
        #expect(runs.started.sorted() == ["a", "b"])
        #expect(await gate.load == (running: 0, waiting: 0))

        struct Refused: Error {}
        final class Attempts: Sendable { let count = Mutex(0) }
        let attempts = Attempts()
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    do {
                        try await gate.run(key: "bad") {
                            attempts.count.withLock { $0 += 1 }
                            // Fails once every caller shares it (a caller arriving after it ended would start another).
                            try await Self.until { await gate.callers(of: "bad") == 3 }
                            throw Refused()
                        }
                        return false
                    } catch {
                        return error is Refused
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(outcomes == [true, true, true])
        #expect(attempts.count.withLock { $0 } == 1)
    }

    @Test("at most the limit of runs at once, a bounded number waiting for a turn, and one more refused without running")
    func boundedRunsAndWaiters() async throws {
        let gate = PreviewGate(limit: 2, maxWaiting: 3)
        let runs = Runs()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<5 { group.addTask { try await gate.run(key: "p\(index)") { try await runs.run("p\(index)") } } }
            try await Self.until { await gate.load == (running: 2, waiting: 3) }
            #expect(runs.started.count == 2)
            // A sixth picture: refused at once, as S3's 503 SlowDown with Retry-After, and nothing runs for it.
            do {
                try await gate.run(key: "p5") { try await runs.run("p5") }
                Issue.record("the sixth picture was let in")
            } catch let error as FerryDomainError {
                #expect(error.code == .requestRateExceeded && error.retryAfterSeconds == 1)
                // The node's own limit, not a key's request rate: not counted as throttled.
                #expect(!error.isKeyRateRefusal)
                #expect(FerryDomainError.requestRateExceeded(retryAfter: 1).isKeyRateRefusal)
            }
            // Waiters get their turns as runs end, never more than two at once.
            for _ in 0..<5 { runs.letOneGo() }
            try await group.waitForAll()
        }
        #expect(runs.started.count == 5 && !runs.started.contains("p5"))
        #expect(runs.peak == 2)
        #expect(await gate.load == (running: 0, waiting: 0))
    }

    @Test("a shared run goes on while any caller waits for it, and is cancelled when the last caller is")
    func cancelledWhenEveryCallerIsGone() async throws {
        let gate = PreviewGate(limit: 1, maxWaiting: 0)
        final class Seen: Sendable { let value = Mutex((started: 0, cancelled: false)) }
        let seen = Seen()
        let make: @Sendable () async throws -> Void = {
            seen.value.withLock { $0.started += 1 }
            // Runs until cancelled, as ffmpeg runs until the pipeline's runner kills it.
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
            seen.value.withLock { $0.cancelled = true }
            throw CancellationError()
        }
        let first = Task { try await gate.run(key: "k", make) }
        try await Self.until { seen.value.withLock { $0.started } == 1 }
        let second = Task { try await gate.run(key: "k", make) }
        try await Self.until { await gate.callers(of: "k") == 2 }
        // One of two callers goes away: the run goes on for the other.
        first.cancel()
        try await Self.until { await gate.callers(of: "k") == 1 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(!seen.value.withLock { $0.cancelled })
        #expect(await gate.load == (running: 1, waiting: 0))
        #expect(await gate.callers(of: "k") == 1)
        // The last one goes: the run is cancelled and its turn comes back.
        second.cancel()
        try await Self.until { seen.value.withLock { $0.cancelled } }
        _ = await first.result
        _ = await second.result
        try await Self.until { await gate.load == (running: 0, waiting: 0) }
        #expect(seen.value.withLock { $0.started } == 1)
    }
}
