import AsyncHTTPClient
import FerryCore
import FerryTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Tests of the fault-injecting proxy itself, in front of the in-process Ferry server.
@Suite("FaultProxy", .timeLimit(.minutes(10)))
struct FaultProxyTests {
    /// Bytes that differ from position to position, so truncation or reordering shows.
    static func pattern(_ count: Int, seed: UInt32 = 7) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    @Test("requests pass through unchanged: bytes, encoded paths, Host-signed SigV4, HEAD, queries, log")
    func passThrough() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                #expect(try await s3.createBucket("pass").status == 200)
                let body = Self.pattern(6 * 1024 * 1024 + 123)
                // Reserved characters: any re-encoding of the path by the proxy breaks the signature.
                let key = "dir/a b+c%d=e&f~g.bin"
                let put = try await s3.put("pass", key, body)
                #expect(put.status == 200)
                let get = try await s3.get("pass", key)
                #expect(get.status == 200)
                #expect(get.body.count == body.count)
                #expect(get.body == body)
                let head = try await s3.send("HEAD", S3TestClient.path("pass", key))
                #expect(head.status == 200)
                #expect(head.header("Content-Length") == String(body.count))
                #expect(head.body.isEmpty)
                // The object really is on the server.
                let direct = try await server.client().get("pass", key)
                #expect(direct.body == body)
                #expect(put.header("ETag") != nil)
                #expect(put.header("ETag") == direct.header("ETag"))
                let created = try await s3.send("POST", S3TestClient.path("pass", "mp"), query: [("uploads", "")])
                #expect(created.status == 200)

                let encodedPath = S3TestClient.path("pass", key)
                #expect(
                    proxy.log == [
                        Entry(method: "PUT", path: "/pass", query: "", outcome: "200"),
                        Entry(method: "PUT", path: encodedPath, query: "", outcome: "200"),
                        Entry(method: "GET", path: encodedPath, query: "", outcome: "200"),
                        Entry(method: "HEAD", path: encodedPath, query: "", outcome: "200"),
                        Entry(method: "POST", path: "/pass/mp", query: "uploads=", outcome: "200"),
                    ])
            }
        }
    }

    @Test("status fault answers an S3 error without forwarding, once, then requests go through")
    func statusFault() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                try await server.client().createBucket("status")
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.status(503, code: "SlowDown"), when: .method("PUT"))
                let body = Self.pattern(300_000)
                let first = try await s3.put("status", "k", body)
                #expect(first.status == 503)
                #expect(first.errorCode == "SlowDown")
                #expect(first.header("Content-Type") == "application/xml")
                // Not forwarded: the server has nothing.
                #expect(try await server.client().get("status", "k").errorCode == "NoSuchKey")
                #expect(proxy.pendingFaults.isEmpty)
                // The same (kept-alive) connection carries the retry.
                let second = try await s3.put("status", "k", body)
                #expect(second.status == 200)
                #expect(try await s3.get("status", "k").body == body)
                #expect(proxy.log.map(\.outcome) == ["503", "200", "200"])
                #expect(proxy.log.map(\.method) == ["PUT", "PUT", "GET"])

                // `times` applies a rule that many times; clearFaults removes rules.
                proxy.inject(.status(500, code: "InternalError"), when: .method("GET"), times: 2)
                #expect(try await s3.get("status", "k").errorCode == "InternalError")
                #expect(try await s3.get("status", "k").status == 500)
                #expect(try await s3.get("status", "k").status == 200)
                proxy.inject(.status(500, code: "InternalError"), times: .max)
                #expect(try await s3.get("status", "k").status == 500)
                proxy.clearFaults()
                #expect(try await s3.get("status", "k").status == 200)
            }
        }
    }

    @Test("dropAfterRequestBytes resets the connection mid-upload and the server stores nothing")
    func dropRequest() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                try await server.client().createBucket("drop")
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.dropAfterRequestBytes(1000), when: .method("PUT"))
                let body = Self.pattern(2 * 1024 * 1024)
                await #expect(throws: (any Error).self) { try await s3.put("drop", "k", body) }
                #expect(proxy.log.map(\.outcome) == ["dropped"])
                // Give the server a moment to see the truncated body, then check it kept nothing.
                try await Task.sleep(for: .milliseconds(200))
                #expect(try await server.client().get("drop", "k").errorCode == "NoSuchKey")
                // The proxy keeps working.
                #expect(try await s3.put("drop", "k", body).status == 200)
                #expect(try await server.client().get("drop", "k").body == body)
            }
        }
    }

    @Test("a dropped request looks like a TCP reset to the client, not an HTTP response")
    func dropIsReset() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                proxy.inject(.dropAfterRequestBytes(1000))
                let socket = try RawSocket.connect(port: proxy.port)
                defer { close(socket) }
                let head = "PUT /b/k HTTP/1.1\r\nHost: 127.0.0.1:\(proxy.port)\r\nContent-Length: 100000\r\n\r\n"
                try? RawSocket.write(socket, Array(head.utf8) + [UInt8](repeating: 1, count: 5000))
                let (bytes, error) = await RawSocket.receive(socket) { _ in false }
                #expect(bytes.isEmpty)
                #expect(error == ECONNRESET)
                #expect(proxy.log.map(\.outcome) == ["dropped"])
            }
        }
    }

    @Test("dropAfterRequestBytes beyond the body: the server acts, the client never hears")
    func dropResponseLost() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                try await server.client().createBucket("lost")
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("PUT"))
                let body = Self.pattern(10_000)
                await #expect(throws: (any Error).self) { try await s3.put("lost", "k", body) }
                #expect(proxy.log.map(\.outcome) == ["dropped"])
                #expect(try await server.client().get("lost", "k").body == body)
            }
        }
    }

    @Test("dropResponseMidBody cuts a download short")
    func dropResponse() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let direct = server.client()
                try await direct.createBucket("cut")
                let body = Self.pattern(1024 * 1024)
                try await direct.put("cut", "k", body)
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.dropResponseMidBody(afterBytes: 1000), when: .method("GET"))
                do {
                    let reply = try await s3.get("cut", "k")
                    #expect(reply.body.count < body.count, "the download was not cut")
                } catch {
                    // A connection error is the expected outcome.
                }
                #expect(proxy.log.map(\.outcome) == ["dropped"])
                #expect(try await s3.get("cut", "k").body == body)
                #expect(proxy.log.map(\.outcome) == ["dropped", "200"])

                // The client received exactly the head and 1000 body bytes, then EOF.
                proxy.inject(.dropResponseMidBody(afterBytes: 1000), when: .method("GET"))
                let headers = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
                    method: "GET", path: "/cut/k", query: [], headers: [("host", "127.0.0.1:\(proxy.port)")],
                    payloadHash: SigV4.hexSHA256([]), date: Date()).headers
                let socket = try RawSocket.connect(port: proxy.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(RawSocket.requestHead("GET", "/cut/k", headers).utf8))
                let (bytes, error) = await RawSocket.receive(socket) { _ in false }
                #expect(error == nil, "expected EOF")
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 200"))
                let headEnd = try #require(text.range(of: "\r\n\r\n"))
                let headBytes = text.utf8.distance(from: text.startIndex, to: headEnd.upperBound)
                #expect(Array(bytes[headBytes...]) == Array(body[..<1000]))
            }
        }
    }

    @Test("stall holds a request until the client's timeout fires")
    func stall() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                try await server.client().createBucket("stall")
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.stall(seconds: 30), when: .method("PUT"))
                let start = ContinuousClock.now
                await #expect(throws: HTTPClientError.deadlineExceeded) {
                    _ = try await timedSend(s3, "PUT", "/stall/k", body: [1, 2, 3], timeout: .seconds(1))
                }
                let elapsed = ContinuousClock.now - start
                #expect(elapsed >= .milliseconds(900))
                #expect(elapsed < .seconds(10))
                #expect(proxy.log.map(\.outcome) == ["stalled"])
                #expect(try await server.client().get("stall", "k").errorCode == "NoSuchKey")
                // Spent: the next request goes through.
                #expect(try await timedSend(s3, "PUT", "/stall/k", body: [1, 2, 3], timeout: .seconds(10)) == 200)
            }
        }
    }

    @Test("shutdown ends a stall at once")
    func shutdownEndsStall() async throws {
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.stall(seconds: 120))
            let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
            let start = ContinuousClock.now
            let pending = Task { try await s3.get("b", "k") }
            for _ in 0..<500 where proxy.log.first?.outcome != "stalled" {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(proxy.log.map(\.outcome) == ["stalled"])
            try await proxy.shutdown()
            let result = await pending.result
            if case .success(let reply) = result {
                Issue.record("the stalled request got a response: \(reply.status)")
            }
            #expect(ContinuousClock.now - start < .seconds(10))
        }
    }

    @Test("delay slows a request down, then forwards it")
    func delay() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.delay(seconds: 0.6))
                let start = ContinuousClock.now
                let created = try await s3.createBucket("slow")
                #expect(created.status == 200)
                #expect(ContinuousClock.now - start >= .milliseconds(600))
                #expect(proxy.log.map(\.outcome) == ["200"])
                let bucket = try await server.client().send("HEAD", "/slow")
                #expect(bucket.status == 200)
            }
        }
    }

    @Test("rules match by method and query, apply in order and are spent")
    func multipartRules() async throws {
        try await TestServer.with(minPartSize: 1024) { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                #expect(try await server.client().createBucket("multi").status == 200)
                let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
                proxy.inject(.status(503, code: "SlowDown"), when: .query(contains: "uploadId") && .partNumber(2))
                proxy.inject(.status(500, code: "InternalError"), when: .query(contains: "uploads"))
                let path = S3TestClient.path("multi", "video")
                let failed = try await s3.send("POST", path, query: [("uploads", "")])
                #expect(failed.status == 500)
                #expect(failed.errorCode == "InternalError")
                let id = try await s3.createMultipartUpload("multi", "video")
                let part1 = Self.pattern(2048, seed: 1)
                let part2 = Self.pattern(1000, seed: 2)
                let etag1 = try #require(try await s3.uploadPart("multi", "video", uploadId: id, number: 1, part1).header("ETag"))
                let slow = try await s3.uploadPart("multi", "video", uploadId: id, number: 2, part2)
                #expect(slow.status == 503)
                #expect(slow.errorCode == "SlowDown")
                let etag2 = try #require(try await s3.uploadPart("multi", "video", uploadId: id, number: 2, part2).header("ETag"))
                let done = try await s3.complete(
                    "multi", "video", uploadId: id, xml: S3TestClient.completeXML([(1, etag1), (2, etag2)]))
                #expect(done.status == 200)
                #expect(try await s3.get("multi", "video").body == part1 + part2)
                #expect(proxy.log.map(\.outcome) == ["500", "200", "200", "503", "200", "200", "200"])
                #expect(proxy.log[3].query.contains("partNumber=2"))
            }
        }
    }

    @Test("Match predicates")
    func matches() {
        let part = Match.Request(method: "PUT", path: "/b/k", query: "partNumber=2&uploadId=a%2Bb")
        let create = Match.Request(method: "POST", path: "/b/k", query: "uploads")
        let plain = Match.Request(method: "GET", path: "/b/k", headers: ["Range": "bytes=0-1"])
        #expect(Match.any.matches(plain))
        #expect(Match.method("put").matches(part))
        #expect(!Match.method("PUT").matches(create))
        #expect(Match.partNumber(2).matches(part))
        #expect(!Match.partNumber(3).matches(part))
        #expect(!Match.partNumber(2).matches(create))
        #expect(Match.query(contains: "uploadId").matches(part))
        #expect(!Match.query(contains: "uploads").matches(part))
        #expect(Match.query(contains: "uploads").matches(create))
        #expect(!Match.query(contains: "uploadId").matches(create))
        #expect(Match.query("uploadId", equals: "a+b").matches(part))
        #expect((Match.method("PUT") && .partNumber(2)).matches(part))
        #expect(!(Match.method("GET") && .partNumber(2)).matches(part))
        #expect((Match.method("GET") || .partNumber(2)).matches(part))
        #expect((!Match.method("GET")).matches(part))
        #expect(Match.and(.method("PUT"), .path("/b/k"), .path(contains: "/b")).matches(part))
        #expect(Match.header("range").matches(plain))
        #expect(Match.header("Range", "bytes=0-1").matches(plain))
        #expect(!Match.header("Range").matches(part))
    }

    @Test("Expect: 100-continue is answered and the connection is kept alive")
    func expectContinue() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                try await server.client().createBucket("cont")
                let body = Self.pattern(50_000)
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let host = "127.0.0.1:\(proxy.port)"
                let put = signer.sign(
                    method: "PUT", path: "/cont/k", query: [],
                    headers: [("host", host), ("content-length", String(body.count))],
                    payloadHash: SigV4.hexSHA256(body), date: Date()).headers
                let socket = try RawSocket.connect(port: proxy.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", "/cont/k", put + [("Expect", "100-continue")]).utf8))
                let (interim, error) = await RawSocket.receive(socket) { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
                #expect(error == nil)
                #expect(String(decoding: interim, as: UTF8.self).hasPrefix("HTTP/1.1 100 Continue\r\n"))
                try RawSocket.write(socket, body)
                let (final, _) = await RawSocket.receive(socket, until: RawSocket.isCompleteResponse)
                #expect(String(decoding: final, as: UTF8.self).hasPrefix("HTTP/1.1 200"))

                // Same connection, next request.
                let head = signer.sign(
                    method: "HEAD", path: "/cont/k", query: [], headers: [("host", host)],
                    payloadHash: SigV4.hexSHA256([]), date: Date()).headers
                try RawSocket.write(socket, Array(RawSocket.requestHead("HEAD", "/cont/k", head).utf8))
                let (second, _) = await RawSocket.receive(socket) { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
                let text = String(decoding: second, as: UTF8.self).lowercased()
                #expect(text.hasPrefix("http/1.1 200"))
                #expect(text.contains("content-length: \(body.count)"))
                #expect(try await server.client().get("cont", "k").body == body)
                #expect(proxy.log.map(\.outcome) == ["200", "200"])
            }
        }
    }

    @Test("Expect: 100-continue is answered only once the request is authenticated; a refused one is closed after its 403")
    func expectContinueAfterAuthentication() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("cont")
            let body = Self.pattern(20_000)
            let host = "127.0.0.1:\(server.port)"
            let wrong = SigV4Signer(
                credentials: SigV4Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: "not-the-secret"),
                region: "us-east-1")
            let put = wrong.sign(
                method: "PUT", path: "/cont/k", query: [],
                headers: [("host", host), ("content-length", String(body.count))],
                payloadHash: SigV4.hexSHA256(body), date: Date()).headers
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", "/cont/k", put + [("Expect", "100-continue")]).utf8))
            // The 403 comes without a 100 and without the body having been sent, and the server closes.
            let (answer, _) = await RawSocket.receive(socket) { bytes in
                let text = String(decoding: bytes, as: UTF8.self)
                return text.contains("</Error>")
            }
            let text = String(decoding: answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 403"), "\(text)")
            #expect(!text.contains("100 Continue"))
            #expect(text.lowercased().contains("connection: close"))
            let (rest, error) = await RawSocket.receive(socket) { _ in false }
            #expect(rest.isEmpty && error == nil, "the connection stays open after a refused 100-continue request")
            #expect(try await server.client().get("cont", "k").status == 404)
        }
    }

    @Test("Expect: 100-continue is answered only when the body is read: a PUT to a missing bucket gets its 404 without a 100")
    func expectContinueAfterChecks() async throws {
        try await TestServer.with { server in
            let body = Self.pattern(20_000)
            let host = "127.0.0.1:\(server.port)"
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            for (path, status) in [("/no-such-bucket/k", "404"), ("/no-such-bucket/k?partNumber=1&uploadId=none", "404")] {
                let (bare, query) = path.contains("?") ? (String(path.prefix { $0 != "?" }), [("partNumber", "1"), ("uploadId", "none")]) : (path, [])
                let put = signer.sign(
                    method: "PUT", path: bare, query: query,
                    headers: [("host", host), ("content-length", String(body.count))],
                    payloadHash: SigV4.hexSHA256(body), date: Date()).headers
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", path, put + [("Expect", "100-continue")]).utf8))
                let (answer, _) = await RawSocket.receive(socket) { String(decoding: $0, as: UTF8.self).contains("</Error>") }
                let text = String(decoding: answer, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 \(status)") && !text.contains("100 Continue"), "\(path): \(text)")
                #expect(text.lowercased().contains("connection: close"), "\(path)")
            }
        }
    }

    @Test("an HTTP-chunked PUT without a declared length answers 501 naming Transfer-Encoding, as S3 does")
    func chunkedWithoutLength() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("chunks")
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let put = signer.sign(
                method: "PUT", path: "/chunks/k", query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("transfer-encoding", "chunked")],
                payloadHash: SigV4.unsignedPayload, date: Date()).headers
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            try RawSocket.write(socket, Array((RawSocket.requestHead("PUT", "/chunks/k", put) + "3\r\nbar\r\n0\r\n\r\n").utf8))
            let (answer, _) = await RawSocket.receive(socket, until: RawSocket.isCompleteResponse)
            let text = String(decoding: answer, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 501"), "\(text)")
            #expect(text.contains("<Header>Transfer-Encoding</Header>"))
            #expect(try await server.client().get("chunks", "k").status == 404)
        }
    }

    @Test("the request head goes upstream byte for byte and the body streams before the client has sent it all")
    func streamsUnchanged() async throws {
        // A raw upstream that records what it receives.
        let (listener, port) = try boundSocket()
        defer { close(listener) }
        #expect(listen(listener, 4) == 0)
        #expect(fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK) == 0)
        try await FaultProxy.with(upstream: "http://127.0.0.1:\(port)") { proxy in
            let target = "/b/dir%2Fa%20b+c?x-id=PutObject&partNumber=1&uploadId=a%2Bb%3D&flag"
            let head = "PUT \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(proxy.port)\r\nX-Amz-Meta-Case: MiXeD\r\n"
                + "Content-Length: \(64 * 1024 * 1024)\r\n\r\n"
            let client = try RawSocket.connect(port: proxy.port)
            defer { close(client) }
            let sent = FaultProxyTests.pattern(1024 * 1024)
            // Written from a thread of its own: the proxy that must drain it runs on the same cooperative pool.
            let request = Array(head.utf8) + sent
            let writing = Task { try await runBlocking { try RawSocket.write(client, request) } }
            var upstream: Int32 = -1
            for _ in 0..<1000 where upstream < 0 {
                upstream = accept(listener, nil, nil)
                if upstream < 0 { try await Task.sleep(for: .milliseconds(10)) }
            }
            try #require(upstream >= 0, "the proxy did not connect upstream")
            defer { close(upstream) }
            // Only 1 of the announced 64 MiB was sent: the proxy must pass it on without waiting for the rest.
            let (received, _) = await RawSocket.receive(upstream) { $0.count >= request.count }
            #expect(received.count == request.count)
            #expect(received == request, "the request was altered on the way")
            try await writing.value
            #expect(proxy.log == [Entry(method: "PUT", path: "/b/dir%2Fa%20b+c", query: String(target.split(separator: "?")[1]), outcome: "pending")])
        }
    }

    @Test("an unreachable upstream gives 502")
    func badGateway() async throws {
        await #expect(throws: FaultProxyError.self) { try await FaultProxy.start(upstream: "not a url") }
        // A port that is bound (so nobody else gets it) but not listening: connecting is refused.
        let (reserved, unused) = try boundSocket()
        defer { close(reserved) }
        try await FaultProxy.with(upstream: "http://127.0.0.1:\(unused)") { proxy in
            let s3 = S3TestClient(
                endpoint: proxy.endpoint, credentials: SigV4Credentials(accessKeyId: "AK", secretAccessKey: "SK"))
            let reply = try await s3.get("b", "k")
            #expect(reply.status == 502)
            #expect(proxy.log.map(\.outcome) == ["502"])
        }
    }
}

// MARK: Helpers

/// Signs with the client's credentials and sends with a request timeout (S3TestClient always allows 120 s); returns
/// the status.
private func timedSend(
    _ s3: S3TestClient, _ method: String, _ path: String, body: [UInt8] = [], timeout: TimeAmount
) async throws -> Int {
    let url = URL(string: s3.endpoint)!
    let signer = SigV4Signer(credentials: s3.credentials, region: s3.region)
    let headers = signer.sign(
        method: method, path: path, query: [], headers: [("host", "\(url.host!):\(url.port!)")],
        payloadHash: SigV4.hexSHA256(body), date: Date()).headers
    var request = HTTPClientRequest(url: s3.endpoint + path)
    request.method = HTTPMethod(rawValue: method)
    for header in headers where header.name.lowercased() != "host" {
        request.headers.add(name: header.name, value: header.value)
    }
    if !body.isEmpty || method == "PUT" { request.body = .bytes(ByteBuffer(bytes: body)) }
    let response = try await HTTPClient.shared.execute(request, timeout: timeout)
    _ = try await response.body.collect(upTo: 1 << 30)
    return Int(response.status.code)
}

/// A socket bound to 127.0.0.1 and a free port, not listening; returns it and the port.
private func boundSocket() throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        throw POSIXError(.EADDRINUSE)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}


