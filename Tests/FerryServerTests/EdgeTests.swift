import Crypto
@testable import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import FerryServer

#if canImport(Glibc)
import Glibc
#endif

/// An answer read off a socket.
private struct RawAnswer {
    var status: Int
    var head: String
    var body: String

    func header(_ name: String) -> String? {
        head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
    }

    /// The code of whichever envelope the body is in: S3's `<Code>`, the JSON `code` (media, publish, console, form)
    /// or the part-signing endpoints' `error.code`.
    var code: String? {
        if let start = body.range(of: "<Code>"), let end = body.range(of: "</Code>") {
            return String(body[start.upperBound..<end.lowerBound])
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return nil }
        if let error = object["error"] as? [String: Any] { return error["code"] as? String }
        return object["code"] as? String
    }
}

/// Sends `head` (and `body`) on a connection of its own and reads the answer.
private func exchange(port: Int, _ head: String, body: [UInt8] = []) async throws -> RawAnswer {
    let socket = try RawSocket.connect(port: port)
    defer { close(socket) }
    try RawSocket.write(socket, Array(head.utf8) + body)
    let (bytes, _) = await RawSocket.receive(socket, timeout: .seconds(20)) { RawSocket.isCompleteResponse($0) }
    let text = String(decoding: bytes, as: UTF8.self)
    guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)),
        let end = text.range(of: "\r\n\r\n")
    else { return RawAnswer(status: 0, head: "", body: text) }
    return RawAnswer(status: status, head: String(text[..<end.lowerBound]), body: String(text[end.upperBound...]))
}

private func request(
    _ method: String, _ target: String, host: String?, extra: [(name: String, value: String)] = [], body: [UInt8] = []
) -> String {
    var headers: [(name: String, value: String)] = []
    if let host { headers.append(("Host", host)) }
    headers += extra
    headers.append(("Content-Length", String(body.count)))
    return RawSocket.requestHead(method, target, headers)
}

@Suite("Edge: routing, dialects and hostile requests", .timeLimit(.minutes(10)))
struct EdgeTests {
    /// One route of each group, with the code its dialect gives a request whose Host is not an authority.
    static let groups: [(method: String, path: String, code: String)] = [
        ("GET", "/", "InvalidArgument"),
        ("PUT", "/bucket/key", "InvalidArgument"),
        ("POST", "/_ferry/v1/GetVideoInfo", "InvalidParameter"),
        ("POST", "/_ferry/ugc/ApplyUploadUGC", "InvalidParameter"),
        ("POST", "/_ferry/form", "InvalidArgument"),
        ("GET", "/_ferry/play/video/master.m3u8", "InvalidArgument"),
        ("GET", "/_ferry/console/session", "InvalidParameter"),
        ("POST", "/_ferry/console/api/ListVideos", "InvalidParameter"),
        ("POST", "/s3/multipart", "InvalidParameter"),
    ]

    @Test("large XML bodies (10,000-part CompleteMultipartUploads) are decoded on the one document thread, never on the threads other requests run on: while that thread is busy they wait and other requests are answered")
    func largeDocumentsWaitForTheirThread() async throws {
        try await TestServer.with { server in
            // A device's upload credential, its own: other tests' requests, signed by keys of their own, count apart.
            let ticket = try await QuotaTests.rootMedia(server).createUploadVideo(.init(title: "t", fileName: "v.mp4"))
            let s3 = server.client(ticket.auth.credentials)
            let (bucket, key) = (ticket.address.bucket, ticket.address.fileName)
            let uploadId = try await s3.createMultipartUpload(bucket, key)
            let xml = S3TestClient.completeXML((1...10_000).map { ($0, "\"d41d8cd98f00b204e9800998ecf8427e\"") })
            #expect(xml.utf8.count > ObjectAPI.inlineDocumentSize)
            let held = DispatchSemaphore(value: 0)
            let holding = NIOLockedValueBox(false)
            let busy = Task {
                try await ObjectAPI.documentThread.runIfActive {
                    holding.withLockedValue { $0 = true }
                    held.wait()
                }
            }
            defer { held.signal() }
            while !holding.withLockedValue({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
            let answered = NIOLockedValueBox(0)
            let completes = (0..<3).map { _ in
                Task {
                    defer { answered.withLockedValue { $0 += 1 } }
                    return try await s3.complete(bucket, key, uploadId: uploadId, xml: xml)
                }
            }
            // Five seconds: decoded where their requests run, they would be answered in about one each (a debug
            // build).
            for _ in 0..<10 {
                #expect(try await S3TestClient.fetchRaw("GET", server.endpoint + "/_ferry/health").status == 200)
                #expect(try await server.client().send("HEAD", "/" + bucket).status == 200)
                try await Task.sleep(for: .milliseconds(500))
            }
            // Whatever the machine's speed, none can have been answered.
            #expect(answered.withLockedValue { $0 } == 0)
            held.signal()
            try await busy.value
            var answers: [S3TestClient.Reply] = []
            for complete in completes { answers.append(try await complete.value) }
            #expect(answers.allSatisfy { $0.status == 400 && $0.errorCode == "InvalidPart" }, "\(answers.map(\.text))")
        }
    }

    @Test("large XML bodies are admitted to the document thread 32 at a time, 8 of one credential: one more is refused requestRateExceeded (503 SlowDown) with Retry-After 1, and each that leaves makes room")
    func largeDocumentsAdmitted() throws {
        let count = AdmissionCount(limit: 32, perCredential: 8)
        for _ in 0..<8 { try count.admit("device") }
        do {
            try count.admit("device")
            Issue.record("a ninth body of one credential was admitted")
        } catch let error as FerryDomainError {
            #expect(error.code == .requestRateExceeded && error.retryAfterSeconds == 1 && !error.isKeyRateRefusal)
        }
        for index in 0..<24 { try count.admit("other-\(index)") }
        #expect(throws: FerryDomainError.self) { try count.admit("another") }
        count.leave("device")
        try count.admit("another")
        #expect(throws: FerryDomainError.self) { try count.admit("device") }
        count.leave("other-0")
        try count.admit("device")
    }

    @Test("a Host that is not an RFC 3986 authority is a 400 in every group's envelope, and the server keeps serving")
    func invalidHosts() async throws {
        try await TestServer.with { server in
            let hosts = [
                "a b", "user@evil.example", "127.0.0.1:99999", "[::1", "x/y", "%41.example", "h:",
                ":80", "host:8o", String(repeating: "a", count: 300), "ünïcode.example", "a,b", "[zz::1]",
            ]
            for (method, path, code) in Self.groups {
                for host in hosts {
                    let answer = try await exchange(port: server.port, request(method, path, host: host))
                    #expect(answer.status == 400, "\(method) \(path) Host: \(host.prefix(20)) → \(answer.status) \(answer.body.prefix(200))")
                    #expect(answer.code == code, "\(method) \(path) Host: \(host.prefix(20)) → \(answer.body.prefix(200))")
                    #expect(answer.header("x-amz-request-id")?.count == 16)
                }
                // Two Host headers, and none at all.
                let twice = try await exchange(
                    port: server.port, request(method, path, host: "127.0.0.1", extra: [("Host", "evil.example")]))
                #expect(twice.status == 400 && twice.code == code, "\(path): \(twice.status) \(twice.body.prefix(200))")
                let none = try await exchange(port: server.port, request(method, path, host: nil))
                #expect(none.status == 400 && none.code == code, "\(path): \(none.status) \(none.body.prefix(200))")
            }
            // A control character is refused by the HTTP parser itself, before any route: a bare 400 (or a closed
            // connection), never a crash.
            let control = try await exchange(port: server.port, request("GET", "/", host: "exa\u{7F}mple"))
            #expect(control.status == 400 || control.status == 0)
            let health = try await exchange(port: server.port, request("GET", "/_ferry/health", host: "127.0.0.1"))
            #expect(health.status == 200)
            // A valid Host still works, IPv6 and names with ports included.
            for host in ["127.0.0.1:\(server.port)", "localhost", "[::1]:80", "media.example.com:443", "a_b.example"] {
                let answer = try await exchange(port: server.port, request("POST", "/_ferry/v1/GetVideoInfo", host: host))
                #expect(answer.status == 403 || answer.status == 400, "\(host): \(answer.status) \(answer.body)")
                #expect(answer.code != "InvalidParameter", "\(host) was refused: \(answer.body)")
            }
        }
    }

    @Test("a head over the parser's limits is answered 431 with a line saying the limit, another head the parser refuses 400 with its fault; the server keeps serving")
    func parserRefusalsSayWhy() async throws {
        try await TestServer.with { server in
            // 1,001 header fields of 20 KB in all: under the size limit, over the count.
            let many = (0..<1001).map { (name: "X-Field-\($0)", value: "v") }
            let ranges = (0..<12_000).map { "\($0 * 10)-\($0 * 10 + 1)" }.joined(separator: ",")
            let overLimit: [(String, String)] = [
                ("path", request("GET", "/bucket/" + String(repeating: "k", count: 90 * 1024), host: "127.0.0.1")),
                ("query", request("GET", "/bucket?prefix=" + String(repeating: "p", count: 90 * 1024), host: "127.0.0.1")),
                ("one header", request("GET", "/bucket/key", host: "127.0.0.1", extra: [("X-Big", String(repeating: "v", count: 90 * 1024))])),
                ("many headers", request("GET", "/bucket/key", host: "127.0.0.1", extra: many)),
                ("ranges", request("GET", "/bucket/key", host: "127.0.0.1", extra: [("Range", "bytes=" + ranges)])),
            ]
            for (what, head) in overLimit {
                let answer = try await exchange(port: server.port, head)
                #expect(answer.status == 431, "\(what): \(answer.status) \(answer.head)")
                #expect(answer.header("content-type") == "text/plain; charset=utf-8", "\(what): \(answer.head)")
                #expect(answer.body.contains("80 KiB, in at most 1,000 header fields"), "\(what): \(answer.body)")
                #expect(answer.header("connection") == "close", "\(what): \(answer.head)")
            }
            let malformed = try await exchange(port: server.port, "GET /bucket/key HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\n\r\n")
            #expect(malformed.status == 400, "\(malformed.head)")
            #expect(malformed.body.contains("could not be parsed (invalid character in header)"), "\(malformed.body)")
            let health = try await exchange(port: server.port, request("GET", "/_ferry/health", host: "127.0.0.1"))
            #expect(health.status == 200)
            let counted = ["group": "unrouted", "method": "other", "status": "431"]
            #expect(PrometheusText.sample(server.server.metrics.render(), "ferry_http_requests_total", counted) == 5)
        }
    }

    /// What the server answers to `request` (sent on a connection of its own) until it closes the connection, 20 s at
    /// most (less than the body window: a connection the server leaves open shows as no answer).
    static func answersUntilClosed(_ server: TestServer, _ request: String) async throws -> String {
        let socket = try RawSocket.connect(port: server.port)
        defer { close(socket) }
        try RawSocket.write(socket, Array(request.utf8))
        let (bytes, _) = await RawSocket.receive(socket, timeout: .seconds(20)) { _ in false }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a request whose Transfer-Encoding is not chunked alone gets one bare 400 and a closed connection, never a route's answer followed by the parser's")
    func unreadableFraming() async throws {
        try await TestServer.with { server in
            for (method, coding) in [("HEAD", "identity"), ("GET", "gzip, chunked"), ("PUT", "chunked, chunked"), ("POST", "x")] {
                let text = try await Self.answersUntilClosed(
                    server, RawSocket.requestHead(method, "/_ferry/health", [("Host", "127.0.0.1"), ("Transfer-Encoding", coding)]))
                #expect(text.hasPrefix("HTTP/1.1 400 "), "\(method) \(coding): \(text)")
                #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "\(method) \(coding): more than one answer: \(text)")
            }
            // `chunked` in any case is read as it is.
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            try RawSocket.write(
                socket,
                Array(RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1"), ("Transfer-Encoding", "Chunked")]).utf8)
                    + Array("0\r\n\r\n".utf8))
            let (bytes, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { RawSocket.isCompleteResponse($0) }
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200 "))
            #expect(try await server.client().createBucket("still-serving").status == 200)
        }
    }

    @Test("a CONNECT request gets a bare 501 and a closed connection at once, on every route (never a route's answer once the body window ends)")
    func connectIsRefusedAtOnce() async throws {
        try await TestServer.with { server in
            for target in ["/_ferry/health", "/_ferry/v1/GetVideoInfo", "/bucket/key", "127.0.0.1:80"] {
                let text = try await Self.answersUntilClosed(server, RawSocket.requestHead("CONNECT", target, [("Host", "127.0.0.1")]))
                #expect(text.hasPrefix("HTTP/1.1 501 "), "\(target): \(text)")
                #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "\(target): more than one answer: \(text)")
            }
            // Pipelined behind a request, the CONNECT is refused once that request is answered.
            let text = try await Self.answersUntilClosed(
                server,
                RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1")])
                    + RawSocket.requestHead("CONNECT", "a:1", [("Host", "a:1")]))
            #expect(text.hasPrefix("HTTP/1.1 200 ") && text.contains("HTTP/1.1 501 "), "\(text)")
            #expect(try await server.client().createBucket("still-serving").status == 200)
        }
    }

    @Test("an HTTP/1.0 request's connection closes after its answer unless it asked to be kept alive")
    func http10Closes() async throws {
        try await TestServer.with { server in
            for keepAlive in [false, true] {
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                let head = "GET /_ferry/health HTTP/1.0\r\nHost: 127.0.0.1\r\n" + (keepAlive ? "Connection: keep-alive\r\n" : "")
                try RawSocket.write(socket, Array((head + "\r\n").utf8))
                // Read to the end of the connection: EOF (error nil) once the server closes it, else the time limit.
                let (bytes, error) = await RawSocket.receive(socket, timeout: .seconds(keepAlive ? 2 : 10)) { _ in false }
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 200 ") || text.hasPrefix("HTTP/1.0 200 "), "\(text)")
                if keepAlive {
                    #expect(error == ETIMEDOUT, "a kept-alive HTTP/1.0 connection was closed")
                } else {
                    #expect(error == nil, "the connection stayed open after the answer")
                    #expect(text.lowercased().contains("connection: close"), "\(text)")
                }
            }
            // A refusal that leaves the body unread still reaches the client whole, then the end of the connection
            // (not a reset, which could lose the answer).
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            let head = "PUT /b/k HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n"
            try RawSocket.write(socket, Array(head.utf8) + [UInt8](repeating: 7, count: 65536))
            let (bytes, error) = await RawSocket.receive(socket, timeout: .seconds(10)) { _ in false }
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 403 ") && text.contains("<Code>AccessDenied</Code>"), "\(text)")
            #expect(error == nil, "the connection ended with error \(error ?? 0)")
        }
    }

    @Test("two Authorization headers are refused before any signature is checked")
    func repeatedAuthorization() async throws {
        try await TestServer.with { server in
            let authorization = "AWS4-HMAC-SHA256 Credential=\(server.root.accessKeyId)/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"
            for (path, code) in [("/bucket", "InvalidRequest"), ("/_ferry/v1/ListVideos", "InvalidRequest")] {
                let answer = try await exchange(
                    port: server.port,
                    request(
                        "POST", path, host: "127.0.0.1:\(server.port)",
                        extra: [("Authorization", authorization), ("Authorization", authorization)]))
                #expect(answer.status == 400, "\(path): \(answer.body)")
                #expect(answer.code == code, "\(path): \(answer.body)")
                #expect(answer.body.contains("one Authorization header"))
            }
        }
    }

    @Test("XML bodies nested 100,000 deep are MalformedXML, from the root key and from a device's upload credential")
    func deepXML() async throws {
        try await TestServer.with { server in
            let root = server.client()
            #expect(try await root.createBucket("deep").status == 200)
            let deep = Array((String(repeating: "<a>", count: 100_000) + String(repeating: "</a>", count: 100_000)).utf8)
            let uploadId = try await root.createMultipartUpload("deep", "k")
            let requests: [(String, String, [(name: String, value: String)])] = [
                ("POST", "/deep/k", [("uploadId", uploadId)]), ("POST", "/deep", [("delete", "")]),
                ("PUT", "/deep", [("cors", "")]), ("PUT", "/deep/k", [("tagging", "")]),
            ]
            let md5 = Data(Insecure.MD5.hash(data: deep)).base64EncodedString()
            for (method, path, query) in requests {
                let reply = try await root.send(method, path, query: query, headers: [("Content-MD5", md5)], body: deep)
                #expect(reply.status == 400, "\(method) \(path): \(reply.text.prefix(300))")
                #expect(reply.errorCode == "MalformedXML", "\(method) \(path) \(query): \(reply.text.prefix(300))")
            }
            // A device holds only an upload credential for one video's key: that is enough to send the body.
            let media = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            let ticket = try await media.createUploadVideo(.init(title: "t", fileName: "v.mp4"))
            let device = server.client(ticket.auth.credentials)
            let path = S3TestClient.path(ticket.address.bucket, ticket.address.fileName)
            let started = try await device.send("POST", path, query: [("uploads", "")])
            #expect(started.status == 200, "\(started.text)")
            let id = try #require(started.text.range(of: "<UploadId>").flatMap { start in
                started.text.range(of: "</UploadId>").map { String(started.text[start.upperBound..<$0.lowerBound]) }
            })
            let refused = try await device.send("POST", path, query: [("uploadId", id)], body: deep)
            #expect(refused.status == 400 && refused.errorCode == "MalformedXML", "\(refused.text.prefix(300))")
            #expect(try await root.send("GET", "/deep").status == 200, "the server stopped answering")
        }
    }

    @Test("an XML body whose root is not the operation's document is MalformedXML and changes nothing")
    func wrongRoot() async throws {
        try await TestServer.with { server in
            let root = server.client()
            #expect(try await root.createBucket("roots").status == 200)
            #expect(try await root.put("roots", "k", Array("body".utf8)).status == 200)
            let uploadId = try await root.createMultipartUpload("roots", "m")
            let part = try await root.send("PUT", "/roots/m", query: [("partNumber", "1"), ("uploadId", uploadId)], body: Array("p".utf8))
            let etag = try #require(part.header("ETag"))
            let requests: [(String, String, [(name: String, value: String)], String)] = [
                ("PUT", "/roots/k", [("tagging", "")], "<Foo><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Foo>"),
                ("POST", "/roots", [("delete", "")], "<Remove><Object><Key>k</Key></Object></Remove>"),
                (
                    "POST", "/roots/m", [("uploadId", uploadId)],
                    "<Tagging><Part><PartNumber>1</PartNumber><ETag>\(etag)</ETag></Part></Tagging>"
                ),
                ("PUT", "/roots", [("cors", "")], "<Rules><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></Rules>"),
                ("PUT", "/roots2", [], "<Configuration><LocationConstraint>us-east-1</LocationConstraint></Configuration>"),
            ]
            for (method, path, query, document) in requests {
                let body = Array(document.utf8)
                let md5 = Data(Insecure.MD5.hash(data: body)).base64EncodedString()
                let reply = try await root.send(method, path, query: query, headers: [("Content-MD5", md5)], body: body)
                #expect(reply.status == 400, "\(method) \(path): \(reply.text.prefix(300))")
                #expect(reply.errorCode == "MalformedXML", "\(method) \(path) \(query): \(reply.text.prefix(300))")
            }
            let tags = try await root.send("GET", "/roots/k", query: [("tagging", "")])
            #expect(tags.status == 200 && !tags.text.contains("<Key>a</Key>"), "\(tags.text)")
            #expect(try await root.get("roots", "k").status == 200)
            #expect(try await root.send("GET", "/roots/m", query: [("uploadId", uploadId)]).status == 200)
            #expect(try await root.send("GET", "/roots", query: [("cors", "")]).errorCode == "NoSuchCORSConfiguration")
            #expect(try await root.send("HEAD", "/roots2").status == 404)
        }
    }

    @Test("JSON bodies nested 100,000 deep are refused by every JSON group with its envelope")
    func deepJSON() async throws {
        try await TestServer.with { server in
            let deep = Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1", service: "ferry")
            let host = "127.0.0.1:\(server.port)"
            let headers = signer.sign(
                method: "POST", path: "/_ferry/v1/ListVideos", query: [], headers: [("host", host)],
                payloadHash: SigV4.hexSHA256(deep), date: Date()).headers
            let media = try await exchange(
                port: server.port,
                request("POST", "/_ferry/v1/ListVideos", host: host, extra: headers.filter { $0.name != "host" }, body: deep),
                body: deep)
            #expect(media.status == 400 && media.code == "InvalidParameter", "\(media.status) \(media.body.prefix(300))")
            let publish = try await exchange(
                port: server.port, request("POST", "/_ferry/ugc/ApplyUploadUGC", host: host, body: deep), body: deep)
            #expect(publish.status == 400 && publish.code == "InvalidParameter", "\(publish.body.prefix(300))")
            let signIn = try await exchange(
                port: server.port,
                request("POST", "/_ferry/console/session", host: host, extra: [("Content-Type", "application/json")], body: deep),
                body: deep)
            #expect(signIn.status == 400 && signIn.code == "InvalidParameter", "\(signIn.body.prefix(300))")
            let health = try await exchange(port: server.port, request("GET", "/_ferry/health", host: host))
            #expect(health.status == 200)
        }
    }

    @Test("every answer carries its request id: routes, refusals, console files, health, unrouted requests")
    func requestIds() async throws {
        try await TestServer.with { server in
            let host = "127.0.0.1:\(server.port)"
            for (method, path) in [
                ("GET", "/"), ("GET", "/console/"), ("GET", "/_ferry/health"), ("PROPFIND", "/x"), ("GET", "/_ferry/nowhere"),
                ("POST", "/_ferry/v1/Nothing"), ("GET", "/s3/multipart/u/1/2/3"),
            ] {
                let answer = try await exchange(port: server.port, request(method, path, host: host))
                #expect(answer.status != 0, "\(method) \(path)")
                let id = answer.header("x-amz-request-id")
                #expect(id?.count == 16 && id?.allSatisfy(\.isHexDigit) == true, "\(method) \(path): \(answer.head)")
            }
        }
    }

    @Test("requests no group routes reach S3's catch-all: other methods, paths below fixed segments, the bucket s3")
    func unrouted() async throws {
        try await TestServer.with { server in
            let host = "127.0.0.1:\(server.port)"
            let propfind = try await exchange(port: server.port, request("PROPFIND", "/bucket/key", host: host))
            #expect(propfind.status == 403 || propfind.status == 405, "\(propfind.body)")
            #expect(propfind.body.contains("<Error>"), "\(propfind.body)")
            let client = server.client()
            // `/s3/…` beside `/s3/multipart` is S3's: a path of a bucket named `s3` (which S3 refuses to create).
            for path in ["/s3", "/s3/photo.jpg", "/s3/albums/2026/photo.jpg"] {
                let reply = try await client.send("GET", path)
                #expect(reply.status == 404 && reply.errorCode == "NoSuchBucket", "\(path): \(reply.text)")
            }
            // Ferry's own namespace answers in JSON.
            let nowhere = try await exchange(port: server.port, request("GET", "/_ferry/nowhere/at/all", host: host))
            #expect(nowhere.status == 404 && nowhere.code == "NotFound")
        }
    }

    @Test("a public endpoint is http(s)://host[:port], its scheme's default port left out as clients leave it out of Host; anything else (a path too) stops the server from opening")
    func publicEndpoints() throws {
        for good in ["https://media.example.com", "http://127.0.0.1:9000", "http://[::1]:8080/", "https://cdn.example//"] {
            let endpoint = try PublicEndpoint(parsing: good)
            #expect(!endpoint.base.hasSuffix("/"))
        }
        #expect(try PublicEndpoint(parsing: "http://h:1").authority == "h:1")
        for (given, authority) in [
            ("https://h:443", "h"), ("http://h:80/", "h"), ("http://h:443", "h:443"), ("https://h:80", "h:80"),
            ("https://[::1]:443", "[::1]"), ("https://h:8443", "h:8443"),
        ] {
            let endpoint = try PublicEndpoint(parsing: given)
            #expect(endpoint.authority == authority && endpoint.base == endpoint.scheme + "://" + authority, "\(given)")
        }
        #expect(throws: InvalidPublicEndpoint.self) { _ = try PublicEndpoint(parsing: "https://cdn.example/ferry") }
        for bad in [
            "media.example.com", "ftp://h", "http://", "http://user@h", "http://h?x=1", "http://h#f", "http://h:99999",
            "http://a b", "javascript:alert(1)", "http://h/p?q", "https://cdn.example/ferry", "http://h:443/p",
        ] {
            #expect(throws: InvalidPublicEndpoint.self, "\(bad)") { _ = try PublicEndpoint(parsing: bad) }
        }
        // A refusal quotes what it was given without its user and password.
        do {
            _ = try PublicEndpoint(parsing: "https://admin:hunter2@cdn.example/ferry")
            Issue.record("a public endpoint with a password and a path was taken")
        } catch {
            #expect("\(error)".contains("https://<redacted>@cdn.example/ferry") && !"\(error)".contains("hunter2"), "\(error)")
        }
        #expect(HTTPTarget.quoted("http://u:p@h:1/x?c@d") == "http://<redacted>@h:1/x?c@d")
        #expect(HTTPTarget.quoted("s3://k:s%zz@host") == "s3://<redacted>@host")
        // Without a scheme, with a slash in the password, or a password longer than what is quoted: still redacted.
        #expect(HTTPTarget.quoted("admin:hunter2@127.0.0.1:9000") == "<redacted>@127.0.0.1:9000")
        #expect(HTTPTarget.quoted("https://u:pa/ss@h") == "https://<redacted>@h")
        let token = String(repeating: "t", count: 300)
        #expect(HTTPTarget.quoted("https://admin:\(token)@h") == "https://<redacted>@h")
        #expect(HTTPTarget.quoted("http://h:1") == "http://h:1")
        let directory = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = FerryServerConfiguration(dataDirectory: directory)
        configuration.publicEndpoint = "http://h:99999"
        #expect(throws: InvalidPublicEndpoint.self) { _ = try FerryServer(configuration: configuration) }
    }

    @Test("behind a trusted proxy that says the client came over https (X-Forwarded-Proto), the URLs built on the request's Host are https; the header from anyone else changes nothing")
    func forwardedHTTPS() async throws {
        for trusted in [true, false] {
            try await TestServer.with(configure: { if trusted { $0.trustedProxies = ["127.0.0.0/8"] } }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("proto").status == 200)
                for (proto, https) in [("https", trusted), ("http", false), ("https, http", false), ("http, https", trusted)] {
                    let created = try await s3.send(
                        "POST", "/_ferry/uploads/s3/proto/a",
                        headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "1"), ("X-Forwarded-Proto", proto)],
                        payload: .unsigned)
                    let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                    let expected = (https ? "https" : "http") + "://127.0.0.1:\(server.port)/_ferry/uploads/"
                    #expect(location.hasPrefix(expected), "trusted \(trusted), \(proto): \(location)")
                }
            }
        }
    }

    @Test("with a public endpoint set, the object URLs of S3 answers (a completed upload's, a POST upload's Location) name it; without one, the endpoint the request reached")
    func objectLocations() async throws {
        for configured in ["https://media.example.com", nil] {
            try await TestServer.with(configure: { $0.publicEndpoint = configured }) { server in
                let s3 = server.client()
                let base = configured ?? "http://127.0.0.1:\(server.port)"
                #expect(try await s3.createBucket("places").status == 200)
                let uploadId = try await s3.createMultipartUpload("places", "a b/c.mp4")
                let part = try await s3.uploadPart("places", "a b/c.mp4", uploadId: uploadId, number: 1, [1, 2, 3])
                let etag = try #require(part.header("ETag"))
                let completed = try await s3.complete(
                    "places", "a b/c.mp4", uploadId: uploadId, xml: S3TestClient.completeXML([(1, etag)]))
                #expect(completed.status == 200, "\(completed.text)")
                #expect(completed.text.contains("<Location>\(base)/places/a%20b/c.mp4</Location>"), "\(completed.text)")

                let fields = try S3BrowserTests.signedFields(
                    [["starts-with", "$key", ""], ["success_action_status": "201"]], credentials: server.root,
                    extra: [("key", "d.mp4"), ("success_action_status", "201")], bucket: "places")
                let posted = try await S3BrowserTests.post(
                    server.endpoint, bucket: "places", S3BrowserTests.PostForm(fields: fields, file: [4, 5]))
                #expect(posted.status == 201, "\(posted.text)")
                #expect(posted.header("Location") == "\(base)/places/d.mp4")
                #expect(posted.text.contains("<Location>\(base)/places/d.mp4</Location>"), "\(posted.text)")
            }
        }
    }

    @Test("an IPv6 address in a URL keeps its brackets in the Host header and the URLs the SDK and the CLI build")
    func ipv6Authorities() {
        #expect(HTTPTarget.authority(of: URL(string: "http://[::1]:8080/x")!) == "[::1]:8080")
        #expect(HTTPTarget.authority(of: URL(string: "https://[fd00::1]")!) == "[fd00::1]")
        #expect(HTTPTarget.authority(of: URL(string: "http://127.0.0.1:9000")!) == "127.0.0.1:9000")
        #expect(HTTPTarget.bracketed("::1") == "[::1]" && HTTPTarget.bracketed("[::1]") == "[::1]")
        #expect(HTTPTarget.bracketed("example.com") == "example.com")
        let client = ObjectStorageClient(
            endpoint: URL(string: "http://[::1]:9000")!, credentials: Credentials(accessKeyId: "a", secretAccessKey: "b"))
        #expect(client.hostHeader == "[::1]:9000")
    }

    @Test("Host values: what RFC 3986 allows in an http authority, and nothing else")
    func authorities() {
        for good in ["localhost", "127.0.0.1", "127.0.0.1:9000", "[::1]", "[::1]:443", "a-b.c_d.example~x:0", "h:65535"] {
            #expect(Authority.isValid(good), "\(good)")
        }
        for bad in [
            "", " ", "a b", "h:65536", "h:-1", "h:", ":1", "[::1", "[]", "[::1]x", "[g::1]", "u@h", "h/p", "h?q", "h#f",
            "%41", "é.example", "h:123456", "a\tb", String(repeating: "a", count: 261),
        ] {
            #expect(!Authority.isValid(bad), "\(bad)")
        }
    }

    @Test("trace context: a traceparent of the W3C form only; a tracestate of the W3C grammar, rewritten without empty members, else dropped")
    func traceContextFields() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        #expect(RequestTracingMiddleware.isTraceParent(parent))
        for bad in ["not-a-traceparent", "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "00-0af7-b7ad-01", ""] {
            #expect(!RequestTracingMiddleware.isTraceParent(bad), "\(bad)")
        }
        #expect(RequestTracingMiddleware.traceState("vendor=opaque, other@tenant=1") == "vendor=opaque,other@tenant=1")
        #expect(RequestTracingMiddleware.traceState("a=1,,\tb=2 ,") == "a=1,b=2")
        #expect(RequestTracingMiddleware.traceState("0tenant@sys=x") == "0tenant@sys=x")
        for bad in [
            "", " , ", "a=", "A=1", "1a=1", "t@s@x=1", "t@systemnamelonger=1", "a=b=c", "a", "a=\u{0332}",
            String(repeating: "a\u{0332}", count: 100) + "@x=y", String(repeating: "k=v,", count: 33), "k=" + String(repeating: "v", count: 600),
        ] {
            #expect(RequestTracingMiddleware.traceState(bad) == nil, "\(bad.prefix(40))")
        }
    }

    @Test("the access log redacts signatures, credentials, tokens, playback tokens and resumable upload capabilities")
    func accessLogRedaction() {
        let redacted = AccessLogMiddleware.redacted(
            path: "/b/k",
            query: "X-Amz-Signature=abc123&X-Amz-Credential=AKID%2F20260101&X-Amz-Security-Token=tok&partNumber=1&token=qiniu")
        #expect(!redacted.contains("abc123") && !redacted.contains("AKID") && !redacted.contains("tok&") && !redacted.contains("qiniu"))
        #expect(redacted.contains("partNumber=1"))
        // Names are compared as authentication reads them: percent-decoded.
        let encoded = AccessLogMiddleware.redacted(
            path: "/b/k", query: "X-Amz-Signatur%65=abc123&X-Amz-Credentia%6C=AKID&%74oken=tok&x=1")
        #expect(encoded == "/b/k?X-Amz-Signatur%65=<redacted>&X-Amz-Credentia%6C=<redacted>&%74oken=<redacted>&x=1")
        let play = AccessLogMiddleware.redacted(path: "/_ferry/play/video/master.m3u8", query: "token=eyJSECRET.x.y")
        #expect(play == "/_ferry/play/video/master.m3u8?token=<redacted>")
        let grant = AccessLogMiddleware.redacted(path: "/_ferry/uploads/grant/eyJTECRET.MAC", query: nil)
        #expect(grant == "/_ferry/uploads/grant/<redacted>")
        let upload = AccessLogMiddleware.redacted(path: "/_ferry/uploads/0123456789abcdef0123456789abcdef", query: nil)
        #expect(upload == "/_ferry/uploads/<redacted>")
        let signed = AccessLogMiddleware.redacted(path: "/_ferry/uploads/s3/bucket/key.bin", query: nil)
        #expect(signed == "/_ferry/uploads/s3/bucket/key.bin")
        // However the path is spelled: the router skips empty segments, a client may percent-encode or change case.
        for spelled in [
            "//_ferry/uploads/0123abcd", "/_ferry//uploads/0123abcd", "/_ferry/uploads//0123abcd", "/_ferry/%75ploads/0123abcd",
            "/_FERRY/uploads/0123abcd", "/_ferry/uploads/0123abcd/x",
        ] {
            #expect(AccessLogMiddleware.redacted(path: spelled, query: nil) == "/_ferry/uploads/<redacted>", "\(spelled)")
        }
        // An object key that holds those words is an object's path, logged as it is.
        #expect(AccessLogMiddleware.redacted(path: "/b/_ferry/uploads/k", query: nil) == "/b/_ferry/uploads/k")
        #expect(AccessLogMiddleware.redacted(path: "//_ferry/uploads/grant/eyJT", query: nil) == "/_ferry/uploads/grant/<redacted>")
        #expect(AccessLogMiddleware.redacted(path: "/_ferry//uploads/S3/b/k", query: nil) == "/_ferry//uploads/S3/b/k")
        // A credential's name with more around it (a refused request still names the value).
        let padded = AccessLogMiddleware.redacted(path: "/b/k", query: "X-Amz-Signature%00=abc123&xTokenx=t0k&AWSAccessKeyId2=AK&x=1")
        #expect(padded == "/b/k?X-Amz-Signature%00=<redacted>&xTokenx=<redacted>&AWSAccessKeyId2=<redacted>&x=1", "\(padded)")
        // A token where a client put it by mistake: after a `;`, under another name, in the path.
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2In0.c2lnbmF0dXJl"
        let semicolon = AccessLogMiddleware.redacted(path: "/_ferry/play/v/master.m3u8", query: "a=1;token=" + jwt + "&b=2")
        #expect(semicolon == "/_ferry/play/v/master.m3u8?a=<redacted>&b=2", "\(semicolon)")
        #expect(AccessLogMiddleware.redacted(path: "/p", query: "t=" + jwt) == "/p?t=<redacted>")
        let inPath = AccessLogMiddleware.redacted(path: "/_ferry/play/v/" + jwt + "/master.m3u8", query: nil)
        #expect(inPath == "/_ferry/play/v/<redacted>/master.m3u8", "\(inPath)")
        // Every spelling a verification hunt found logged whole: bare, encoded, glued, with more parts or a spaced
        // header; a session token under another name; a signature behind an encoded separator.
        let spaced = "eyAiYWxnIjogIkhTMjU2IiB9.eyJzdWIiOiJ2In0.c2lnbmF0dXJl"
        let session = "FT1.eyJrIjoiRlNJQSJ9Zm9vYmFyYmF6cXV4.bWFjbWFjbWFjbWFj"
        for (query, secret) in [
            (jwt, "c2lnbmF0dXJl"), (jwt + ";a=1", "c2lnbmF0dXJl"), ("a=1&" + jwt, "c2lnbmF0dXJl"), (jwt + "=x", "c2lnbmF0dXJl"),
            ("a=1%26token%3D" + jwt, "c2lnbmF0dXJl"), ("a=Bearer%20" + jwt, "c2lnbmF0dXJl"),
            ("a=%65" + jwt.dropFirst(), "c2lnbmF0dXJl"), ("a=" + jwt.replacingOccurrences(of: ".", with: "%2E"), "c2lnbmF0dXJl"),
            ("a=x" + jwt, "c2lnbmF0dXJl"), ("a=" + jwt + ".more", "c2lnbmF0dXJl"), ("a=" + spaced, "c2lnbmF0dXJl"),
            ("foo=" + session, "bWFjbWFjbWFjbWFj"), ("a=1%26X-Amz-Signature%3Dabc123def", "abc123def"),
        ] {
            let logged = AccessLogMiddleware.redacted(path: "/_ferry/play/v/master.m3u8", query: query)
            #expect(!logged.contains(secret), "\(query) → \(logged)")
        }
        for path in [
            "/_ferry/play/v/%65" + jwt.dropFirst() + "/master.m3u8", "/_ferry/play/v/" + jwt.replacingOccurrences(of: ".", with: "%2E") + "/x",
            "/_ferry/play/v/" + session + "/x",
        ] {
            #expect(!AccessLogMiddleware.redacted(path: path, query: nil).contains("c2lnbmF0dXJl"), "\(path)")
            #expect(!AccessLogMiddleware.redacted(path: path, query: nil).contains("bWFjbWFjbWFjbWFj"), "\(path)")
        }
        // An upload's capability in paths the router refuses is no more logged than in those it takes.
        for (path, query) in [
            ("/_ferry/./uploads/0123456789abcdef", nil), ("/_ferry/uploads;0123456789abcdef", nil),
            ("/_ferry/uploads", "id=0123456789abcdef"),
        ] as [(String, String?)] {
            let logged = AccessLogMiddleware.redacted(path: path, query: query)
            #expect(!logged.contains("0123456789abcdef"), "\(path) \(query ?? "") → \(logged)")
        }
        // An upload token (`AccessKey:sign:policy`) where a client put it by mistake: a bare query, a path segment.
        let uploadToken = "FKIA6J2VBMZZAVABER5C:wTpbhM0uQmFjbWFjbWFjbWFjbWE=:eyJzY29wZSI6ImIiLCJkZWFkbGluZSI6MX0="
        for (path, query) in [
            ("/_ferry/form", uploadToken), ("/_ferry/form/" + uploadToken, nil), ("/bucket/" + uploadToken, nil),
            ("/_ferry/form", "t=" + uploadToken.replacingOccurrences(of: ":", with: "%3A")),
        ] as [(String, String?)] {
            let logged = AccessLogMiddleware.redacted(path: path, query: query)
            #expect(!logged.contains("wTpbhM0u"), "\(path) \(query ?? "") → \(logged)")
        }
        // Keys with colons are keys, however their words run.
        for key in ["/b/docs:v1:framework-notes-2026-final.pdf", "/b/team:review:eyeballs-and-frameworks-notes.txt", "/b/a:b:c"] {
            #expect(AccessLogMiddleware.redacted(path: key, query: nil) == key)
        }
        // Names and values that only look alike stay.
        #expect(AccessLogMiddleware.redacted(path: "/b/my.holiday.eyJ-video.mp4", query: "prefix=tokens/") == "/b/my.holiday.eyJ-video.mp4?prefix=tokens/")
    }
}
