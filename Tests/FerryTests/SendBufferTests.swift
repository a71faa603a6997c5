import FerryTestSupport
import FerryTransport
import Foundation
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

@testable import FerryAsyncHTTPClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How far ahead of the server a request body's progress may run on a link that is slow but keeps taking bytes.
@Suite("Send buffers: progress on a slow link counts what has nearly crossed it", .timeLimit(.minutes(10)))
struct SendBufferTests {
    #if os(Linux)
    @Test("a body sent to a server that reads 1 MB/s is counted at most 1.75 MiB ahead of what the server has read: not all at once as the connection queues it (8 MiB ahead), nor 4 MiB ahead as the kernel grows the socket's buffer")
    func progressKeepsCloseToTheServer() async throws {
        let length = 8 << 20
        let server = try SlowReader(bytesPerSecond: 1_000_000)
        defer { server.close() }
        let lead = Lead()
        var request = TransportRequest(
            method: "PUT", url: "http://127.0.0.1:\(server.port)/bucket/key", headers: [],
            body: [UInt8](repeating: 0x61, count: length), timeout: .seconds(60))
        request.headers = [(name: "Content-Type", value: "application/octet-stream")]
        let response = try await AsyncHTTPClientTransport().send(
            request, bodyProgress: { lead.handed($0, received: server.bodyBytes) }, responseSink: nil)
        #expect(response.status == 200)
        #expect(server.bodyBytes == length)
        #expect(lead.total == length)
        // The socket's 512 KiB at most, up to two 512 KiB slices in the connection (the one being written, and the last,
        // counted once handed over), and the server's receive buffer of 128 KiB.
        #expect(lead.most <= 7 << 18, "progress ran \(lead.most) bytes ahead of the server")
        #expect(lead.most > 0)
    }

    @Test("on a 40 KB/s link the connection's send buffer follows the link (about two seconds of it): a body is counted at most 512 KiB ahead of the server (373 KiB seen), where a buffer of 256 KiB whatever the link kept it 691 KiB ahead; its opening is counted in steps of 32 KiB, the socket's opening size, not 128 KiB that waited 20 s each on a link three parts shared")
    func sendBufferFollowsTheLink() async throws {
        let length = 3 << 19
        let server = try SlowReader(bytesPerSecond: 40_000)
        defer { server.close() }
        let lead = Lead()
        let url = "http://127.0.0.1:\(server.port)/bucket/key"
        // A link no earlier test measured (ports are reused rarely): the opening is the pace's own.
        let fresh = LinkPace.of(url).size == nil
        let request = TransportRequest(
            method: "PUT", url: url, headers: [],
            body: [UInt8](repeating: 0x63, count: length), timeout: .seconds(300))
        let response = try await AsyncHTTPClientTransport().send(
            request, bodyProgress: { lead.handed($0, received: server.bodyBytes) }, responseSink: nil)
        #expect(response.status == 200)
        #expect(server.bodyBytes == length)
        // The socket's buffer (Linux keeps twice the size set), up to 80 KiB in the connection and the server's
        // receive buffer of 128 KiB.
        #expect(lead.most <= 1 << 19, "progress ran \(lead.most) bytes ahead of the server")
        #expect(lead.most > 0)
        if fresh { #expect(lead.largestOpeningStep == 32 * 1024) }
    }

    @Test("a body on a slow link goes in slices small enough for the connection to take one every few seconds: a link of 80 KB/s is not taken for a stopped one by a 6 s idle write limit (in 512 KiB slices, the connection holds three and takes more 13 s later)")
    func slowLinkIsNotSilent() async throws {
        // The socket asks for more once about a third of its buffer is free: every 2–3 s at 80 KB/s, whatever the
        // slices.
        // About 40 s at that pace; the request's whole time is far longer (a loaded machine's reader falls behind):
        // only the idle write limit is under test.
        let length = 3 << 20
        let server = try SlowReader(bytesPerSecond: 80_000)
        defer { server.close() }
        var transport = AsyncHTTPClientTransport()
        transport.idleWriteTimeout = .seconds(6)
        let request = TransportRequest(
            method: "PUT", url: "http://127.0.0.1:\(server.port)/bucket/key", headers: [],
            body: [UInt8](repeating: 0x62, count: length), timeout: .seconds(300))
        let response = try await transport.send(request, bodyProgress: { _ in }, responseSink: nil)
        #expect(response.status == 200)
        #expect(server.bodyBytes == length)
    }
    #endif

    @Test("a body's pieces go out in slices of the pace's size across piece boundaries, empty pieces skipped; each slice is counted once the connection has taken it (after a settle), the last when it is handed over, and the body is finished once")
    func countedSlices() async throws {
        let record = SliceRecord()
        let pieces = [ByteBuffer(), ByteBuffer(repeating: 1, count: 200 * 1024), ByteBuffer(), ByteBuffer(repeating: 2, count: 3)]
        let body = CountedBody(
            pieces: AsyncStream { continuation in
                for piece in pieces { continuation.yield(piece) }
                continuation.finish()
            },
            length: Int64(200 * 1024 + 3), progress: { record.note("progress \($0)") },
            settle: { record.note("settle") }, finished: { record.note("finished") })
        var slices: [Int] = []
        for try await slice in body { slices.append(slice.readableBytes) }
        #expect(slices == [32 * 1024, 32 * 1024, 32 * 1024, 32 * 1024, 32 * 1024, 32 * 1024, 8 * 1024, 3])
        #expect(record.notes == Array(repeating: ["settle", "progress 32768"], count: 6).flatMap { $0 } + [
            "settle", "progress 8192", "progress 3", "finished",
        ])
    }

    /// What a counted body reported, in order.
    final class SliceRecord: @unchecked Sendable {
        private let lock = NSLock()
        private var kept: [String] = []
        func note(_ text: String) { lock.withLock { kept.append(text) } }
        var notes: [String] { lock.withLock { kept } }
    }

    @Test("slices are 32 KiB (or the size an earlier body measured on the link) for a body's first 512 KiB, then what the connection took in about a second, in powers of two from 16 KiB to 512 KiB")
    func slicesFollowTheLink() {
        let start = ContinuousClock.now
        var pace = SlicePace(largest: 512 * 1024)
        #expect(pace.size == 32 * 1024 && !pace.measured)
        // The opening goes at once, whatever the link: no measure from it.
        for _ in 0..<16 { pace.taken(32 * 1024, now: start) }
        #expect(pace.size == 32 * 1024 && !pace.measured)
        // 20 KB/s: 16 KiB slices.
        var now = start
        for _ in 0..<3 {
            now += .seconds(1)
            pace.taken(20_000, now: now)
        }
        #expect(pace.size == 16 * 1024 && pace.measured)
        // 100 KB/s: 64 KiB.
        for _ in 0..<3 {
            now += .seconds(1)
            pace.taken(100_000, now: now)
        }
        #expect(pace.size == 64 * 1024)
        // A fast link: 2 MiB taken in no time sets the largest.
        for _ in 0..<5 { pace.taken(512 * 1024, now: now) }
        #expect(pace.size == 512 * 1024)
        // The next body on the link starts from what was measured, within the bounds.
        #expect(SlicePace(largest: 512 * 1024, starting: 512 * 1024).size == 512 * 1024)
        #expect(SlicePace(largest: 512 * 1024, starting: 16 * 1024).size == 16 * 1024)
        #expect(SlicePace(largest: 512 * 1024, starting: 1).size == 16 * 1024)
        // Requests to one service share its link's pace; another service has its own.
        let link = LinkPace.of("http://127.0.0.1:9/bucket/a")
        link.remember(32 * 1024)
        #expect(LinkPace.of("http://127.0.0.1:9/other/b?partNumber=2").size == 32 * 1024)
        #expect(LinkPace.of("http://127.0.0.1:10/bucket/a").size == nil)
    }

    @Test("the connections to one server share the largest send buffer size they asked for in the ten seconds before the last measure: two seconds of their drain, rounded up to 4 KiB, from 32 KiB to 256 KiB; a server with no measure in the last minute starts at 32 KiB")
    func sendSizesFollowTheFastestConnection() {
        let sizes = SendSizes()
        let now = NIODeadline.now()
        let (first, second) = (ObjectIdentifier(SendSizes.self), ObjectIdentifier(SendWindow.self))
        #expect(sizes.size(draining: 20_000) == 40_960)
        #expect(sizes.size(draining: 1_000) == 32 * 1024)
        #expect(sizes.size(draining: .max) == 256 * 1024)
        #expect(sizes.size(draining: -1) == 32 * 1024)
        #expect(sizes.size(for: "a", now: now) == 32 * 1024)
        sizes.note(sizes.size(draining: 20_000), from: first, server: "a", now: now)
        #expect(sizes.size(for: "a", now: now) == 40_960)
        // A starved connection does not shrink the others' buffers: the fastest sets the size.
        sizes.note(sizes.size(draining: 3_000), from: second, server: "a", now: now + .seconds(1))
        #expect(sizes.size(for: "a", now: now) == 40_960)
        // Past ten seconds an old measure no longer counts.
        sizes.note(sizes.size(draining: 3_000), from: second, server: "a", now: now + .seconds(11))
        #expect(sizes.size(for: "a", now: now + .seconds(11)) == 32 * 1024)
        sizes.note(sizes.size(draining: 10_000_000), from: first, server: "a", now: now + .seconds(12))
        #expect(sizes.size(for: "a", now: now + .seconds(12)) == 256 * 1024)
        // A closed connection's measure is forgotten; the size stays until the next measure.
        sizes.forget(first, server: "a")
        #expect(sizes.size(for: "a", now: now + .seconds(12)) == 256 * 1024)
        sizes.note(sizes.size(draining: 50_000), from: second, server: "a", now: now + .seconds(13))
        #expect(sizes.size(for: "a", now: now + .seconds(13)) == 102_400)
        // A measure over a minute old is not a new connection's start.
        #expect(sizes.size(for: "a", now: now + .seconds(74)) == 32 * 1024)
        #expect(sizes.size(for: "b", now: now) == 32 * 1024)
    }

    @Test("a connection's send buffer is measured while its channel is unwritable, from the bytes the server acknowledged then: a fast link grows it within its first measure, a slow one shrinks it by half at most per measure, idle time does not count, the first measure after the connection opens or pauses counts only for a fast link, the next connection to the server starts at its size, and a closed connection's measure is forgotten")
    func sendWindowMeasuresAcknowledgedBytes() throws {
        let sizes = SendSizes()
        let link = FakeLink()
        func open(_ server: String) throws -> (SendWindow, EmbeddedChannel) {
            let window = SendWindow(
                server: server, sizes: sizes, clock: { link.now },
                acked: { _ in link.acked })
            let channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(window)
            return (window, channel)
        }
        /// The channel is unwritable for `time`, while the server acknowledges `bytes`.
        func busy(_ channel: EmbeddedChannel, _ time: TimeAmount, acked bytes: UInt64) {
            channel.isWritable = false
            channel.pipeline.fireChannelWritabilityChanged()
            link.now = link.now + time
            link.acked += bytes
            channel.isWritable = true
            channel.pipeline.fireChannelWritabilityChanged()
        }
        let (window, channel) = try open("s")
        #expect(window.size == 32 * 1024)
        // The first measure: 100 KB/s would grow it to 196 KiB (less than eight times its size), which the first
        // measure does not.
        busy(channel, .seconds(2), acked: 200_000)
        #expect(window.size == 32 * 1024)
        // 20 KB/s, with idle time between the busy times that does not count: two seconds of it, 40 KiB.
        busy(channel, .seconds(1), acked: 20_000)
        link.now = link.now + .seconds(10)
        busy(channel, .seconds(1), acked: 20_000)
        #expect(window.size == 40_960)
        // Less than two seconds of a slow link is not a measure.
        busy(channel, .seconds(1), acked: 1_000)
        #expect(window.size == 40_960)
        // Eight buffers' worth before two seconds have passed is a measure: a fast link, the largest size.
        busy(channel, .milliseconds(100), acked: 400_000)
        #expect(window.size == 256 * 1024)
        // The link slows to 5 KB/s: halved per measure, down to 32 KiB.
        busy(channel, .seconds(2), acked: 10_000)
        #expect(window.size == 128 * 1024)
        busy(channel, .seconds(2), acked: 10_000)
        #expect(window.size == 64 * 1024)
        busy(channel, .seconds(2), acked: 10_000)
        #expect(window.size == 32 * 1024)
        busy(channel, .seconds(2), acked: 200_000)
        #expect(window.size == 200_704)
        #expect(try channel.syncOptions?.getOption(ChannelOptions.socketOption(.so_sndbuf)) == 200_704)
        // A new connection to the server starts at its size; one a minute after the last measure, at 32 KiB.
        #expect(try open("s").0.size == 200_704)
        link.now = link.now + .seconds(61)
        #expect(try open("s").0.size == 32 * 1024)
        // A pause (nothing written for over a second while the connection could take bytes) starts afresh, and the
        // first measure after it does not shrink.
        try channel.writeOutbound(ByteBuffer(repeating: 1, count: 16))
        busy(channel, .seconds(2), acked: 2_000)
        #expect(window.size == 200_704)
        busy(channel, .seconds(2), acked: 2_000)
        #expect(window.size == 100_352)
        // A fast link grows a new connection's buffer within its first measure: eight buffers' worth in 0.1 s.
        let (fast, fastChannel) = try open("f")
        #expect(fast.size == 32 * 1024)
        busy(fastChannel, .milliseconds(100), acked: 600_000)
        #expect(fast.size == 256 * 1024)
        // Once it closes, its measure no longer holds up the size of the server's other connections.
        let (slow, slowChannel) = try open("f")
        #expect(slow.size == 256 * 1024)
        _ = try fastChannel.finish()
        busy(slowChannel, .seconds(2), acked: 40_000)
        busy(slowChannel, .seconds(2), acked: 40_000)
        #expect(sizes.size(for: "f", now: link.now) == 40_960)
        #expect(slow.size == 128 * 1024)
        // Where the kernel does not count acknowledged bytes, the buffer keeps the largest size.
        let uncounted = SendWindow(server: "t", sizes: sizes, clock: { link.now }, acked: { _ in nil })
        try EmbeddedChannel().pipeline.syncOperations.addHandler(uncounted)
        #expect(uncounted.size == 256 * 1024)
    }

    #if os(Linux)
    @Test("an installed window opens its socket's buffer at 32 KiB (Linux keeps twice that) and has the kernel close the connection once sent bytes, or keepalive probes sent after 30 s without a byte from the server, go unacknowledged for 120 s")
    func installedWindowSetsTheSocket() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let address = try #require(server.localAddress)
        let client = try await ClientBootstrap(group: group).connect(to: address).get()
        try await SendWindow.install(on: client).get()
        let provider = try #require(client as? any SocketOptionProvider)
        let buffer: CInt = try await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_SNDBUF)).get()
        #expect(buffer == 2 * 32 * 1024)
        let userTimeout: CInt = try await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_USER_TIMEOUT)).get()
        #expect(userTimeout == 120_000)
        // Probed while an answer is awaited with nothing in flight: after 30 s without a byte, every 10 s.
        let keepalive: CInt = try await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_KEEPALIVE)).get()
        #expect(keepalive == 1)
        let idle: CInt = try await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPIDLE)).get()
        #expect(idle == 30)
        let interval: CInt = try await provider.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPINTVL)).get()
        #expect(interval == 10)
        try await client.close()
        try await server.close()
        try await group.shutdownGracefully()
    }
    #endif

    /// A link's time and the bytes its server acknowledged, as a test moves them.
    final class FakeLink: @unchecked Sendable {
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var acked: UInt64 = 1
    }

    @Test("a body that has not moved for the idle write limit is cut off, unless another body on its link moved within the limit: then once the others have stopped too")
    func bodyWatchCountsTheLink() async throws {
        let link = LinkPace()
        let mover = Task {
            let until = ContinuousClock.now + .seconds(3)
            while ContinuousClock.now < until {
                link.moved()
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        let start = ContinuousClock.now
        await #expect(throws: TransportError.self) {
            try await BodyWatch(link: link).waitForStall(limit: .seconds(1), every: .milliseconds(100))
        }
        #expect(ContinuousClock.now - start >= .milliseconds(3500))
        await mover.value
        let alone = ContinuousClock.now
        await #expect(throws: TransportError.self) {
            try await BodyWatch(link: LinkPace()).waitForStall(limit: .seconds(1), every: .milliseconds(100))
        }
        #expect(ContinuousClock.now - alone >= .seconds(1))
        #expect(ContinuousClock.now - alone < .seconds(3))
        // A body that keeps moving is not cut off, and one handed over whole ends the watch.
        let moving = BodyWatch(link: LinkPace())
        let handing = Task {
            for _ in 0..<15 {
                moving.moved()
                try? await Task.sleep(for: .milliseconds(100))
            }
            moving.finish()
        }
        try await moving.waitForStall(limit: .seconds(1), every: .milliseconds(100))
        await handing.value
    }

    /// The most handed-over bytes were ahead of the server's read ones.
    final class Lead: @unchecked Sendable {
        private let lock = NSLock()
        private var handedOver = 0
        private var highest = 0
        private var openingStep = 0
        func handed(_ count: Int, received: Int) {
            lock.withLock {
                if handedOver < 512 * 1024 { openingStep = max(openingStep, count) }
                handedOver += count
                highest = max(highest, handedOver - received)
            }
        }

        var most: Int { lock.withLock { highest } }
        /// The largest count reported in the body's first 512 KiB.
        var largestOpeningStep: Int { lock.withLock { openingStep } }
        var total: Int { lock.withLock { handedOver } }
    }
}

#if os(Linux)
/// A server on 127.0.0.1 that takes one request, reads its body at a set rate through a small receive buffer (a slow
/// link that keeps taking bytes), and answers 200 once the body is read.
final class SlowReader: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    // Only touched while holding `lock`.
    private var body = 0

    /// Body bytes read so far.
    var bodyBytes: Int { lock.withLock { body } }

    init(bytesPerSecond: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 64 * 1024
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var local = sockaddr_in()
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
        }
        port = Int(UInt16(bigEndian: local.sin_port))
        listener = fd
        let thread = Thread { [self] in serve(bytesPerSecond: bytesPerSecond) }
        thread.start()
    }

    func close() { shutdown(listener, Int32(SHUT_RDWR)); Glibc.close(listener) }

    private func serve(bytesPerSecond: Int) {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { Glibc.close(connection) }
        let chunk = 16 * 1024
        var buffer = [UInt8](repeating: 0, count: chunk)
        var head: [UInt8] = []
        var expected: Int?
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, chunk, 0) }
            guard count > 0 else { return }
            if let expected {
                let now = lock.withLock { body += count; return body }
                if now >= expected { break }
            } else {
                head += buffer[0..<count]
                let text = String(decoding: head, as: UTF8.self)
                if let end = text.range(of: "\r\n\r\n") {
                    let fields = text[..<end.lowerBound].lowercased().split(separator: "\r\n")
                    let length = fields.first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                    expected = length
                    let already = text.utf8.distance(from: end.upperBound, to: text.endIndex)
                    let now = lock.withLock { body += already; return body }
                    if now >= length { break }
                }
            }
            usleep(UInt32(count * 1_000_000 / bytesPerSecond))
        }
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, answer.count, Int32(MSG_NOSIGNAL)) }
    }
}
#endif
