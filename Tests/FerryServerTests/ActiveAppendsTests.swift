import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import FerryServer

/// How a later IETF request for an upload stops the appends under way to it (``ActiveAppends``), and how an append's
/// body (``TolerantBody``) counts what arrived.
@Suite("Resumable uploads: appends stopped by a later request")
struct ActiveAppendsTests {
    struct ConnectionClosed: Error {}

    /// An append of `declared` bytes to upload "u" whose connection `close` ends its body as a closed socket does.
    static func append(_ appends: ActiveAppends, declared: Int64?, stoppable: Bool = true) -> (
        active: ActiveAppends.Append, body: TolerantBody<AsyncThrowingStream<ByteBuffer, any Error>>,
        bytes: AsyncThrowingStream<ByteBuffer, any Error>.Continuation, closed: NIOLockedValueBox<Int>
    ) {
        let (stream, bytes) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
        let closed = NIOLockedValueBox(0)
        let active = appends.begin("u", stoppable: stoppable) {
            closed.withLockedValue { $0 += 1 }
            bytes.finish(throwing: ConnectionClosed())
        }
        let body = TolerantBody(base: stream, declaredLength: declared) { active.ended() }
        return (active, body, bytes, closed)
    }

    /// A request's stop of upload "u" under way (IETF; with `settling`, its settling, as tus waits); whether it has
    /// returned. Its limit is far longer than a test's pause on a loaded machine: a stop that waits returns when the
    /// append ends, not on its limit.
    static func stopping(
        _ appends: ActiveAppends, grace: Duration = .milliseconds(250), upTo limit: Duration = .seconds(120),
        settling: Bool = false
    ) -> NIOLockedValueBox<Bool> {
        let returned = NIOLockedValueBox(false)
        Task {
            if settling {
                await appends.settle("u", grace: grace, upTo: limit)
            } else {
                await appends.stop("u", grace: grace, upTo: limit)
            }
            returned.withLockedValue { $0 = true }
        }
        return returned
    }

    /// Whether `returned` is true within `limit`.
    static func returns(_ returned: NIOLockedValueBox<Bool>, within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while !returned.withLockedValue({ $0 }) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test("an append whose body arrived whole is not stopped: its connection stays open, its end is not a cut, and the later request waits until it is answered")
    func wholeBodyIsWaitedFor() async throws {
        let appends = ActiveAppends()
        let (active, body, bytes, closed) = Self.append(appends, declared: 10)
        var reading = body.makeAsyncIterator()
        bytes.yield(ByteBuffer(bytes: Array(0..<10)))
        #expect(try await reading.next()?.readableBytes == 10)
        let stop = Self.stopping(appends)
        #expect(await !Self.returns(stop, within: .milliseconds(300)), "the request did not wait for the append")
        #expect(closed.withLockedValue { $0 } == 0, "the connection of a whole body was closed")
        // Its connection failing now, after the whole body, does not make it cut short.
        bytes.finish(throwing: ConnectionClosed())
        #expect(try await reading.next() == nil)
        #expect(body.interrupted.withLockedValue { $0 } == false)
        active.end()
        #expect(await Self.returns(stop, within: .seconds(5)), "the request went on waiting after the append ended")
    }

    @Test("an append whose body has not arrived whole is stopped: its connection is closed, it ends as cut short with what arrived, and the request goes on once it ended")
    func partBodyIsStopped() async throws {
        let appends = ActiveAppends()
        let (active, body, bytes, closed) = Self.append(appends, declared: 10)
        var reading = body.makeAsyncIterator()
        bytes.yield(ByteBuffer(bytes: Array(0..<4)))
        #expect(try await reading.next()?.readableBytes == 4)
        let stop = Self.stopping(appends)
        #expect(try await reading.next() == nil)
        #expect(closed.withLockedValue { $0 } == 1)
        #expect(body.interrupted.withLockedValue { $0 } == true)
        #expect(await !Self.returns(stop, within: .milliseconds(200)), "the request did not wait for the record")
        active.end()
        #expect(await Self.returns(stop, within: .seconds(5)))
        // With nothing under way, a request does not wait at all.
        #expect(await Self.returns(Self.stopping(appends), within: .seconds(1)))
    }

    @Test("an append whose body arrives whole within the moment a later request gives it is not stopped either: the request waits for its answer")
    func bodyArrivingWithinTheGraceIsWaitedFor() async throws {
        let appends = ActiveAppends()
        let (active, body, bytes, closed) = Self.append(appends, declared: 10)
        var reading = body.makeAsyncIterator()
        // A grace far longer than the body takes to arrive, however loaded the machine: the wait ends when it is whole.
        let stop = Self.stopping(appends, grace: .seconds(30))
        try await Task.sleep(for: .milliseconds(50))
        bytes.yield(ByteBuffer(bytes: Array(0..<10)))
        #expect(try await reading.next()?.readableBytes == 10)
        #expect(await !Self.returns(stop, within: .milliseconds(600)), "the request did not wait for the append")
        #expect(closed.withLockedValue { $0 } == 0, "the connection of a body that arrived whole was closed")
        active.end()
        #expect(await Self.returns(stop, within: .seconds(5)))
    }

    @Test("a body with no declared length is whole once its end arrives")
    func undeclaredBodyIsWholeAtItsEnd() async throws {
        let appends = ActiveAppends()
        let (active, body, bytes, closed) = Self.append(appends, declared: nil)
        var reading = body.makeAsyncIterator()
        bytes.yield(ByteBuffer(bytes: Array(0..<10)))
        bytes.finish()
        #expect(try await reading.next()?.readableBytes == 10)
        #expect(try await reading.next() == nil)
        let stop = Self.stopping(appends)
        #expect(await !Self.returns(stop, within: .milliseconds(600)))
        #expect(closed.withLockedValue { $0 } == 0)
        #expect(body.interrupted.withLockedValue { $0 } == false)
        active.end()
        #expect(await Self.returns(stop, within: .seconds(5)))
    }

    @Test("tus stops no append: a request goes on after the grace while one still receives its body (its connection open), and waits until one whose body was cut short is answered")
    func tusSettles() async throws {
        let appends = ActiveAppends()
        let (receiving, receivingBody, receivingBytes, receivingClosed) = Self.append(appends, declared: 10)
        var reading = receivingBody.makeAsyncIterator()
        receivingBytes.yield(ByteBuffer(bytes: Array(0..<4)))
        #expect(try await reading.next()?.readableBytes == 4)
        #expect(await Self.returns(Self.stopping(appends, settling: true), within: .seconds(5)))
        #expect(receivingClosed.withLockedValue { $0 } == 0, "a tus request closed an append's connection")

        // Its client's connection is reset: the body ends cut short, and the next request waits for its record.
        receivingBytes.finish(throwing: ConnectionClosed())
        #expect(try await reading.next() == nil)
        #expect(receivingBody.interrupted.withLockedValue { $0 } == true)
        let settle = Self.stopping(appends, grace: .seconds(30), settling: true)
        #expect(await !Self.returns(settle, within: .milliseconds(300)), "the request did not wait for the record")
        receiving.end()
        #expect(await Self.returns(settle, within: .seconds(5)))
    }

    @Test("an IETF request stops no tus append still receiving its body (its connection stays open) and does not wait for it; it waits for one whose body ended")
    func ietfLeavesTusAppends() async throws {
        let appends = ActiveAppends()
        let (tus, tusBody, tusBytes, tusClosed) = Self.append(appends, declared: 10, stoppable: false)
        var reading = tusBody.makeAsyncIterator()
        tusBytes.yield(ByteBuffer(bytes: Array(0..<4)))
        #expect(try await reading.next()?.readableBytes == 4)
        #expect(await Self.returns(Self.stopping(appends), within: .seconds(5)), "the IETF request waited for a tus append")
        #expect(tusClosed.withLockedValue { $0 } == 0, "an IETF request closed a tus append's connection")
        tusBytes.yield(ByteBuffer(bytes: Array(4..<10)))
        #expect(try await reading.next()?.readableBytes == 6)
        let stop = Self.stopping(appends)
        #expect(await !Self.returns(stop, within: .milliseconds(300)), "the request did not wait for the ended tus append")
        tus.end()
        #expect(await Self.returns(stop, within: .seconds(5)))
        #expect(tusBody.interrupted.withLockedValue { $0 } == false)
    }

    @Test("a request that waited its limit goes on; another request's longer wait for the same upload is not cut short by it")
    func eachWaitKeepsItsLimit() async throws {
        let appends = ActiveAppends()
        let (active, _, bytes, _) = Self.append(appends, declared: 10)
        bytes.yield(ByteBuffer(bytes: Array(0..<10)))
        let short = Self.stopping(appends, upTo: .milliseconds(100))
        let long = Self.stopping(appends, upTo: .seconds(30))
        #expect(await Self.returns(short, within: .seconds(5)), "the short wait passed its limit")
        #expect(await !Self.returns(long, within: .milliseconds(300)), "the long wait ended with the short one")
        active.end()
        #expect(await Self.returns(long, within: .seconds(5)))
    }
}
