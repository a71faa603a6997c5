import FerryCore
@testable import FerryServer
@testable import FerryStorage
import FerryTestSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Connection limits: idle connections, slow bodies, too many connections", .serialized, .timeLimit(.minutes(10)))
struct ConnectionLimitsTests {
    static func configure(_ configuration: inout FerryServerConfiguration) {
        configuration.connectionLimits.idleTimeout = .seconds(1)
        configuration.connectionLimits.bodyWindow = .seconds(1)
        configuration.connectionLimits.maxConnections = 4
    }

    /// The server's sockets on `port` in TCP state `state` (hex, as /proc/net/tcp writes it: 01 ESTABLISHED, 08
    /// CLOSE_WAIT — the peer closed, the server has not, so it still holds a descriptor for a connection that is
    /// gone). Counted by port, so other tests' servers and files running alongside do not change it.
    static func serverSockets(port: Int, state: String) -> Int {
        serverSockets(port: port).count { $0.state == state }
    }

    /// The server's sockets on `port`: each one's TCP state and the bytes it holds that the client has not taken
    /// (`tx_queue`: sent and not acknowledged, or not sent yet).
    static func serverSockets(port: Int) -> [(state: String, queued: Int)] {
        let localPort = String(format: ":%04X", port)
        var sockets: [(state: String, queued: Int)] = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to the end: the file reports no size, and a read by size stops after the first page.
            guard let handle = FileHandle(forReadingAtPath: table) else { continue }
            defer { try? handle.close() }
            let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl, local_address, rem_address, st, tx_queue:rx_queue, …
                guard fields.count > 4, fields[1].hasSuffix(localPort) else { continue }
                let queued = fields[4].split(separator: ":").first.flatMap { Int($0, radix: 16) } ?? 0
                sockets.append((String(fields[3]), queued))
            }
        }
        return sockets
    }

    @Test("a connection that sends nothing, or only part of a request head, is closed after the idle timeout")
    func idleConnectionsClose() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            let silent = try RawSocket.connect(port: server.port)
            defer { close(silent) }
            let partial = try RawSocket.connect(port: server.port)
            defer { close(partial) }
            try RawSocket.write(partial, Array("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8))
            let started = ContinuousClock.now
            for socket in [silent, partial] {
                let (bytes, error) = await RawSocket.receive(socket, timeout: .seconds(10)) { _ in false }
                #expect(error == nil && bytes.isEmpty, "the server kept the connection (error \(String(describing: error)))")
            }
            // The idle timeout here is 1 s; the bound leaves a loaded machine room and is far below the default's.
            #expect(ContinuousClock.now - started < .seconds(10))
            // A kept-alive connection between requests is idle too.
            let kept = try RawSocket.connect(port: server.port)
            defer { close(kept) }
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let head = signer.sign(
                method: "GET", path: "/", query: [], headers: [("host", "127.0.0.1:\(server.port)")],
                payloadHash: SigV4.emptyPayloadHash, date: Date()).headers
            try RawSocket.write(kept, Array(RawSocket.requestHead("GET", "/", head).utf8))
            let (answer, _) = await RawSocket.receive(kept, until: RawSocket.isCompleteResponse)
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            let (rest, error) = await RawSocket.receive(kept, timeout: .seconds(5)) { _ in false }
            #expect(rest.isEmpty && error == nil, "a kept-alive idle connection was not closed")
        }
    }

    @Test("a body that trickles slower than the minimum is cut off and leaves nothing behind")
    func slowBodyIsCutOff() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            try await server.client().createBucket("slow")
            let body = [UInt8](repeating: 1, count: 100)
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let head = signer.sign(
                method: "PUT", path: "/slow/k", query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(body.count))],
                payloadHash: SigV4.unsignedPayload, date: Date()).headers
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", "/slow/k", head).utf8))
            var closed = false
            for index in 0..<10 {
                // One byte every 300 ms: far below a kilobyte a second.
                if (try? RawSocket.write(socket, [body[index]])) == nil {
                    closed = true
                    break
                }
                try await Task.sleep(for: .milliseconds(300))
            }
            let (_, error) = await RawSocket.receive(socket, timeout: .seconds(5)) { _ in false }
            #expect(closed || error == nil || error == ECONNRESET, "the trickling connection stayed open")
            #expect(try await server.client().get("slow", "k").status == 404)
            // The request's temporary file goes as the request ends, a moment after its connection.
            let deadline = ContinuousClock.now + .seconds(30)
            var temporary = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/objects/tmp")
            while !temporary.isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                temporary = try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/objects/tmp")
            }
            #expect(temporary.isEmpty, "a temporary file was left: \(temporary)")
        }
    }

    @Test("a request refused before its body ended is answered with Connection: close and closed, not read to its end")
    func refusedBodyIsNotRead() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            // Unsigned, announcing 100 MB: refused at its headers.
            let head = "PUT /any/k HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 100000000\r\n\r\n"
            try RawSocket.write(socket, Array(head.utf8) + [UInt8](repeating: 1, count: 2048))
            let (answer, _) = await RawSocket.receive(socket, until: RawSocket.isCompleteResponse)
            let text = String(decoding: answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 403"), "\(text)")
            #expect(text.lowercased().contains("connection: close"), "\(text)")
            // The client goes on sending, fast enough for the body window (40 KiB/s): the connection is closed all
            // the same, a body window (1 s here) after the answer, long before 100 MB.
            let started = ContinuousClock.now
            var closed = false
            while !closed, ContinuousClock.now - started < .seconds(8) {
                if (try? RawSocket.write(socket, [UInt8](repeating: 1, count: 4096))) == nil { closed = true }
                let (_, error) = await RawSocket.receive(socket, timeout: .milliseconds(100)) { _ in false }
                if error != ETIMEDOUT { closed = true }
            }
            #expect(closed, "the refused request's body was read on")
            #expect(ContinuousClock.now - started < .seconds(6))
            // A refused request whose body had fully arrived keeps its connection usable as before.
            #expect(try await server.client().createBucket("after").status == 200)
        }
    }

    /// A 64 MiB object stored in `bucket` (larger than every buffer between the two ends: the server's and the
    /// client's socket, NIO's), and a raw connection that has asked for it (``askForBig(_:bucket:bodySize:)``) and read
    /// nothing yet.
    static func download(
        from server: TestServer, bucket: String, size: Int = 64 << 20, bodySize: Int? = nil
    ) async throws -> (socket: Int32, size: Int) {
        let s3 = server.client()
        try await s3.createBucket(bucket)
        #expect(try await s3.put(bucket, "big", [UInt8](repeating: 3, count: size)).status == 200)
        return (try askForBig(server, bucket: bucket, bodySize: bodySize), size)
    }

    /// A raw connection that has asked for `bucket`/big; with `bodySize`, by a GET carrying a body of that many bytes,
    /// of which the first 1100 have been sent (the route answers without reading it).
    static func askForBig(_ server: TestServer, bucket: String, bodySize: Int? = nil) throws -> Int32 {
        let head = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
            method: "GET", path: "/\(bucket)/big", query: [], headers: [("host", "127.0.0.1:\(server.port)")],
            payloadHash: SigV4.emptyPayloadHash, date: Date()
        ).headers
        let socket = try RawSocket.connect(port: server.port)
        guard let bodySize else {
            try RawSocket.write(socket, Array(RawSocket.requestHead("GET", "/\(bucket)/big", head).utf8))
            return socket
        }
        let request = RawSocket.requestHead("GET", "/\(bucket)/big", head + [("content-length", String(bodySize))])
        try RawSocket.write(socket, Array(request.utf8) + [UInt8](repeating: 1, count: 1100))
        return socket
    }

    /// Expects the server to have let go of `socket` (closed, not read to its end): what it still holds of an answer
    /// of `size` bytes comes, then the end.
    static func expectLetGo(_ socket: Int32, size: Int) async {
        let (bytes, error) = await RawSocket.receive(socket, timeout: .seconds(20)) { _ in false }
        #expect(error == nil || error == ECONNRESET, "the connection was held (error \(String(describing: error)))")
        #expect(bytes.count < size, "the whole answer arrived: the stalled reader was not let go")
    }

    /// Reads `socket` at `rate` bytes a millisecond for `duration`, or until nothing comes for 5 s: the bytes read, the
    /// first 4 KiB of them, and whether the connection ended first. The reader is a thread of its own: on the
    /// cooperative pool, other suites' work could hold it past a body window, and the server would rightly let it go.
    static func readSlowly(
        _ socket: Int32, bytesPerMillisecond rate: Int, for duration: Duration
    ) async throws -> (received: Int, firstBytes: [UInt8], closed: Bool) {
        var wait = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        defer {
            wait = timeval(tv_sec: 0, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        }
        return try await runBlocking {
            var received = 0
            var firstBytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            let started = ContinuousClock.now
            while ContinuousClock.now - started < duration {
                let n = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
                if n <= 0 { return (received, firstBytes, true) }
                if firstBytes.count < 4096 { firstBytes += buffer[..<min(n, 4096)] }
                received += n
                let ahead = started + .milliseconds(received / rate) - ContinuousClock.now
                if ahead > .zero {
                    Thread.sleep(forTimeInterval: Double(ahead.components.seconds) + Double(ahead.components.attoseconds) / 1e18)
                }
            }
            return (received, firstBytes, false)
        }
    }

    @Test("a client that stops reading an answer is let go after a body window; one that reads gets every byte")
    func stalledReaderIsLetGo() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            let (socket, size) = try await Self.download(from: server, bucket: "stall")
            defer { close(socket) }
            let s3 = server.client()
            // Read nothing for ten body windows (a loaded machine may hold the server up for a few): it lets go.
            try await Task.sleep(for: .seconds(10))
            await Self.expectLetGo(socket, size: size)
            // A client that reads gets the whole object.
            #expect(try await s3.get("stall", "big").body.count == size)
        }
    }

    @Test("a client that sends a body with its GET and stops reading the answer is let go: a body the route never reads is timed by the clock")
    func stalledReaderWithUnreadBodyIsLetGo() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            // A body announced and begun, which the route answers without reading; the client then reads nothing and
            // sends nothing more. Nothing asks for the rest of the body, and the answer never ends.
            // Sent in pieces, each read on its own: the server's buffer of request parts fills, and it asks for no more.
            let (socket, size) = try await Self.download(from: server, bucket: "unread", bodySize: 1_000_000_000)
            defer { close(socket) }
            for _ in 0..<31 {
                try await Task.sleep(for: .milliseconds(50))
                try RawSocket.write(socket, [UInt8](repeating: 1, count: 1100))
            }
            try await Task.sleep(for: .seconds(10))
            await Self.expectLetGo(socket, size: size)
        }
    }

    @Test("a GET answered while its body came, whose body then ends, is let go when its client stops reading, and a client that reads gets every byte")
    func answerUnderWayWhenBodyEnds() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            // The answer fills the connection while the body comes; then the body ends, and the client reads nothing.
            let (stalled, size) = try await Self.download(from: server, bucket: "ends", bodySize: 2048)
            defer { close(stalled) }
            try await Task.sleep(for: .milliseconds(300))
            try RawSocket.write(stalled, [UInt8](repeating: 1, count: 948))
            try await Task.sleep(for: .seconds(10))
            await Self.expectLetGo(stalled, size: size)
            // A client that reads such an answer steadily gets all of it before the connection closes: its last bytes
            // are not dropped with the connection.
            let smaller = 8 << 20
            #expect(try await server.client().put("ends", "big", [UInt8](repeating: 4, count: smaller)).status == 200)
            let reader = try Self.askForBig(server, bucket: "ends", bodySize: 2048)
            defer { close(reader) }
            try RawSocket.write(reader, [UInt8](repeating: 1, count: 948))
            let read = try await Self.readSlowly(reader, bytesPerMillisecond: 2000, for: .seconds(60))
            let answer = String(decoding: read.firstBytes, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
            let headLength = (answer.range(of: "\r\n\r\n")?.upperBound).map { answer.utf8.distance(from: answer.startIndex, to: $0) }
            #expect(read.received == smaller + (headLength ?? 0) && read.closed, "\(read.received) bytes, closed \(read.closed)")
        }
    }

    @Test("downloads whose clients stop reading hold one chunk each of the server's memory, not the object read ahead")
    func stalledDownloadsHoldOneChunk() async throws {
        // The default body window (30 s): the stalled clients keep their connections while they are counted.
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("stalled")
            #expect(try await s3.put("stalled", "big", [UInt8](repeating: 5, count: 16 << 20)).status == 200)
            let before = ReadBuffers.pool.inUse
            var sockets: [Int32] = []
            defer { for socket in sockets { close(socket) } }
            for _ in 0..<20 {
                let head = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
                    method: "GET", path: "/stalled/big", query: [], headers: [("host", "127.0.0.1:\(server.port)")],
                    payloadHash: SigV4.emptyPayloadHash, date: Date()
                ).headers
                let socket = try RawSocket.connect(port: server.port)
                var small: Int32 = 4096
                setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
                try RawSocket.write(socket, Array(RawSocket.requestHead("GET", "/stalled/big", head).utf8))
                sockets.append(socket)
            }
            // Once the kernel's buffers are full, every answer waits with what it has read.
            var held = 0
            for _ in 0..<20 {
                try await Task.sleep(for: .milliseconds(250))
                held = ReadBuffers.pool.inUse - before
            }
            // A chunk waiting in the connection's buffer, and at most one more being handed over; other suites'
            // downloads running meanwhile may add a few.
            #expect(held <= 20 * 2 + 8, "\(held) chunks of \(BlobFiles.readChunk) bytes held for 20 stalled downloads")
            for socket in sockets { close(socket) }
            sockets = []
            #expect(try await s3.get("stalled", "big").body.count == 16 << 20)
        }
    }

    @Test("a client that reads an answer slowly but steadily keeps its connection through many body windows")
    func slowReaderKeepsItsConnection() async throws {
        // Body windows of 3 s: the suites running beside this one (ffmpeg, large files) can hold up this process for
        // a second now and then, and a 1 s window then cut the reader off in CI.
        try await TestServer.with(configure: {
            Self.configure(&$0)
            $0.connectionLimits.bodyWindow = .seconds(3)
        }) { server in
            let (socket, size) = try await Self.download(from: server, bucket: "slow")
            defer { close(socket) }
            // 200 KB/s for 5 body windows: the connection stays full throughout (the kernel's buffers hold a few MB),
            // and the connection's own buffer drains too seldom to say the client reads (it takes more once a third
            // of the kernel's send buffer is free: seconds apart at this rate; a reader was cut off when that was
            // the measure).
            let (received, firstBytes, closedEarly) = try await Self.readSlowly(socket, bytesPerMillisecond: 200, for: .seconds(15))
            #expect(!closedEarly, "the slow reader was cut off after \(received) bytes")
            #expect(String(decoding: firstBytes.prefix(12), as: UTF8.self) == "HTTP/1.1 200")
            let headerEnd = try #require(firstBytes.indices.first { firstBytes[$0...].starts(with: Array("\r\n\r\n".utf8)) })
            let answerSize = headerEnd + 4 + size
            // The rest at full speed: every byte of the answer arrives.
            let (rest, error) = await RawSocket.receive(socket, timeout: .seconds(120)) { received + $0.count >= answerSize }
            #expect(error == nil, "the connection failed after \(received + rest.count) bytes")
            #expect(received + rest.count == answerSize, "the answer was cut short")
        }
    }

    @Test("a client that reads a whole answer slowly gets every byte: its connection is not idle while the end is sent")
    func slowReaderGetsTheEnd() async throws {
        // Body windows of 3 s, as for the slow reader above: the suites beside this one can hold up this process for a
        // second now and then.
        try await TestServer.with(configure: {
            Self.configure(&$0)
            $0.connectionLimits.bodyWindow = .seconds(3)
        }) { server in
            let (socket, size) = try await Self.download(from: server, bucket: "tail", size: 16 << 20)
            defer { close(socket) }
            // 800 KB/s: the answer's last bytes wait in the server's buffers for seconds, many idle timeouts (1 s
            // here), after the route has handed over its end. Once the answer has left the server the connection is
            // idle, and closed after the idle timeout.
            // While it reads, the server's side of the connection is watched: it must not close while it still holds
            // bytes of the answer (FIN_WAIT1, 04, with a send queue): the kernel would be left to send them for a
            // connection the server let go, and under load they were lost.
            let watching = Task {
                var queuedAtClose = 0
                while !Task.isCancelled {
                    for socket in Self.serverSockets(port: server.port) where socket.state == "04" {
                        queuedAtClose = max(queuedAtClose, socket.queued)
                    }
                    try? await Task.sleep(for: .milliseconds(100))
                }
                return queuedAtClose
            }
            let (received, firstBytes, closed) = try await Self.readSlowly(socket, bytesPerMillisecond: 800, for: .seconds(60))
            watching.cancel()
            let queuedAtClose = await watching.value
            let headerEnd = try #require(firstBytes.indices.first { firstBytes[$0...].starts(with: Array("\r\n\r\n".utf8)) })
            #expect(received == headerEnd + 4 + size, "the answer was cut short")
            #expect(closed, "the idle connection was not closed")
            // At most a segment in flight (64 KiB on loopback) when the server closed.
            #expect(queuedAtClose <= 65536, "the server closed the connection with \(queuedAtClose) bytes of the answer unsent")
        }
    }

    @Test("connections beyond the limit are closed at once; the others keep working; descriptors come back")
    func connectionLimit() async throws {
        try await TestServer.with(configure: Self.configure) { server in
            var sockets: [Int32] = []
            for _ in 0..<4 { sockets.append(try RawSocket.connect(port: server.port)) }
            // The table is read right: the four connections are there on the server's side.
            #expect(Self.serverSockets(port: server.port, state: "01") >= 4)
            // Connections are accepted in order: the fifth comes after the four.
            let extra = try RawSocket.connect(port: server.port)
            let (bytes, error) = await RawSocket.receive(extra, timeout: .seconds(3)) { _ in false }
            #expect(bytes.isEmpty && (error == nil || error == ECONNRESET), "the fifth connection was kept")
            close(extra)
            for socket in sockets { close(socket) }
            // Once those are gone (the server notices each close), new connections are served again.
            var served = false
            for _ in 0..<30 where !served {
                served = (try? await server.client().createBucket("again").status) == 200
                if !served { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(served)
            // Every connection the clients closed is closed by the server too: it holds no descriptor for them.
            var tries = 0
            while Self.serverSockets(port: server.port, state: "08") > 0 && tries < 300 {
                try await Task.sleep(for: .milliseconds(100))
                tries += 1
            }
            #expect(Self.serverSockets(port: server.port, state: "08") == 0)
        }
    }
}

extension ConnectionLimitsTests {
    @Test("connections beyond the limit of one client address are closed at once; other addresses are served; a closed one frees its slot")
    func perAddressLimit() async throws {
        try await TestServer.with(configure: {
            Self.configure(&$0)
            $0.connectionLimits.maxConnections = 8
            $0.connectionLimits.maxConnectionsPerAddress = 2
        }) { server in
            var first = [try RawSocket.connect(port: server.port), try RawSocket.connect(port: server.port)]
            defer { for socket in first { close(socket) } }
            let extra = try RawSocket.connect(port: server.port)
            let (bytes, error) = await RawSocket.receive(extra, timeout: .seconds(3)) { _ in false }
            #expect(bytes.isEmpty && (error == nil || error == ECONNRESET), "a third connection from 127.0.0.1 was kept")
            close(extra)

            // Another client address gets its own two.
            let other = try RawSocket.connect(port: server.port, from: "127.0.0.2")
            defer { close(other) }
            try RawSocket.write(other, Array(RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1")]).utf8))
            let (answer, _) = await RawSocket.receive(other, timeout: .seconds(5)) { RawSocket.isCompleteResponse($0) }
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200"), "127.0.0.2 was not served")

            // Once one of 127.0.0.1's connections is gone, it is served again.
            close(first.removeFirst())
            var served = false
            for _ in 0..<30 where !served {
                served = (try? await server.client().createBucket("again").status) == 200
                if !served { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(served)
        }
    }

    @Test("the connection counter counts per address and forgets an address with no connection")
    func counterPerAddress() {
        var limits = ConnectionLimits()
        limits.maxConnections = 3
        limits.maxConnectionsPerAddress = 2
        let counter = ConnectionGuard.Counter()
        #expect(counter.enter(address: "192.0.2.1", limits: limits) && counter.enter(address: "192.0.2.1", limits: limits))
        #expect(!counter.enter(address: "192.0.2.1", limits: limits))
        #expect(counter.enter(address: "192.0.2.2", limits: limits))
        #expect(!counter.enter(address: "192.0.2.3", limits: limits), "the server's limit holds too")
        #expect(counter.current == 3 && counter.addresses == 2)
        counter.leave(address: "192.0.2.2")
        counter.leave(address: "192.0.2.1")
        #expect(counter.current == 1 && counter.addresses == 1)
        #expect(counter.enter(address: "192.0.2.1", limits: limits))
    }

    @Test("a connection opened while fewer than 16 are open reads up to 256 KiB at a time, one opened while 16 or more are open up to 64 KiB")
    func crowdedReadSize() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let listener = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let address = try #require(listener.localAddress)
        let counter = ConnectionGuard.Counter()
        /// The largest read of a connection opened now; nil when its reads are not sized by the handler (which starts
        /// them at 16 KiB: NIO's own start at 2 KiB, up to 64 KiB).
        func largestRead() async throws -> Int? {
            let channel = try await ClientBootstrap(group: group).connect(to: address).get()
            let largest = try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(ReceiveBufferSizing(connections: counter))
                let sizes = try channel.syncOptions?.getOption(ChannelOptions.recvAllocator) as? AdaptiveRecvByteBufferAllocator
                return sizes.flatMap { $0.initial == 16 * 1024 ? $0.maximum : nil }
            }.get()
            try await channel.close()
            return largest
        }
        for index in 0..<15 { #expect(counter.enter(address: "192.0.2.\(index)", limits: ConnectionLimits())) }
        #expect(try await largestRead() == 256 * 1024)
        #expect(counter.enter(address: "192.0.2.15", limits: ConnectionLimits()))
        #expect(try await largestRead() == 64 * 1024)
        counter.leave(address: "192.0.2.15")
        #expect(try await largestRead() == 256 * 1024)
        try await listener.close()
        try await group.shutdownGracefully()
    }

    @Test("limits per client address count an IPv4 address by itself and an IPv6 address by its /64")
    func limitGroups() {
        #expect(ClientAddress.limitGroup(of: "192.0.2.1") == "192.0.2.1")
        #expect(ClientAddress.limitGroup(of: "::ffff:192.0.2.1") == "192.0.2.1")
        let group = ClientAddress.limitGroup(of: "2001:db8:1:2:aaaa::1")
        #expect(group == "2001:db8:1:2::/64")
        #expect(ClientAddress.limitGroup(of: "2001:db8:1:2:ffff:ffff:ffff:fffe") == group)
        #expect(ClientAddress.limitGroup(of: "2001:db8:1:3::1") != group)
        #expect(ClientAddress.limitGroup(of: nil) == nil)
    }

    @Test("the client behind trusted proxies is the nearest X-Forwarded-For address that is not one of them; other peers' headers are not believed")
    func trustedProxies() throws {
        let proxies = try TrustedProxies(["10.0.0.0/8", " 192.0.2.10 ", "fd00::/8"])
        // Not a trusted peer: its header is not believed.
        #expect(proxies.client(peer: "198.51.100.1", forwardedFor: ["203.0.113.5"]) == "198.51.100.1")
        // The proxy's own hop is the last entry; what the client wrote before it is ignored.
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["1.2.3.4, 203.0.113.5"]) == "203.0.113.5")
        // Several proxies, over several header lines, IPv6 in brackets.
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["203.0.113.5", "192.0.2.10,10.9.9.9"]) == "203.0.113.5")
        #expect(proxies.client(peer: "::ffff:10.1.2.3", forwardedFor: ["[2001:db8::7]", "fd00::1"]) == "2001:db8::7")
        // An entry that is not an address ends the walk at the hop after it.
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["203.0.113.5, unknown, 192.0.2.10"]) == "192.0.2.10")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["203.0.113.5;drop"]) == "10.1.2.3")
        // Only trusted proxies, or no header: the farthest one.
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["10.7.7.7"]) == "10.7.7.7")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: []) == "10.1.2.3")
        // A long chain is looked at only as far as maxHops.
        let chain = (0..<100).map { "10.0.0.\($0 % 250)" }.joined(separator: ",")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["203.0.113.5," + chain]) == "10.0.0.\(99 - TrustedProxies.maxHops + 1)")
        // An IPv4-mapped network names IPv4 peers; an entry with a port is not believed.
        let mapped = try TrustedProxies(["::ffff:10.0.0.0/104"])
        #expect(mapped.client(peer: "10.9.8.7", forwardedFor: ["203.0.113.5"]) == "203.0.113.5")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["203.0.113.5:4711"]) == "10.1.2.3")
        #expect(throws: (any Error).self) { try TrustedProxies(["10.0.0.0/33"]) }
        #expect(throws: (any Error).self) { try TrustedProxies(["proxy.internal"]) }
    }
}

@Suite("Data directories and listening", .timeLimit(.minutes(10)))
struct DataDirectoryTests {
    @Test("a second server on a data directory in use is refused, naming the owner's pid and address")
    func oneOwner() async throws {
        try await TestServer.with { server in
            var configuration = FerryServerConfiguration(dataDirectory: server.dataDirectory)
            configuration.port = 0
            let refused = #expect(throws: DataDirectoryInUse.self) { try FerryServer(configuration: configuration, environment: [:]) }
            #expect(refused?.pid == getpid())
            #expect(refused?.endpoint == server.endpoint)
            #expect(refused?.description.hasSuffix("send requests to it with --endpoint \(server.endpoint).") == true)
        }
        // A process that does not listen (a restore) is not offered as an endpoint; a lock file found is made private.
        let directory = TemporaryDirectory.make("ferry-lock")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(!DataDirectoryInUse(directory: directory, pid: 7).description.contains("--endpoint"))
        #expect(FileManager.default.createFile(atPath: directory + "/lock", contents: Data(), attributes: [.posixPermissions: 0o644]))
        let lock = try DataDirectoryLock(directory: directory)
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/lock")[.posixPermissions] as? Int
        #expect(mode == 0o600, "\(String(mode ?? 0, radix: 8))")
        withExtendedLifetime(lock) {}
    }

    @Test("a server that cannot listen fails at once with the reason")
    func cannotListen() async throws {
        let started = ContinuousClock.now
        await #expect(throws: (any Error).self) {
            try await TestServer.with(configure: { $0.host = "192.0.2.1" }) { _ in }
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}
