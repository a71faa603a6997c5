import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import FerryServer

#if canImport(Glibc)
import Glibc
#endif

/// Answers read from one connection: status lines, headers and Content-Length bodies, one after the other.
struct WireAnswers {
    struct Answer {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
        var closes: Bool { header("connection")?.lowercased() == "close" }
    }

    /// Final answers in order (interim 1xx ones are in ``interim``).
    var answers: [Answer] = []
    var interim: [Int] = []
    /// Bytes after the last complete answer.
    var rest: [UInt8] = []

    /// Splits `bytes`; an answer whose framing is not a Content-Length (or none) stops the split there.
    init(_ bytes: [UInt8]) {
        var index = 0
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while let end = Self.find(separator, in: bytes, from: index) {
            let head = String(decoding: bytes[index..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let statusLine = head[0].split(separator: " ")
            guard statusLine.count >= 2, let status = Int(statusLine[1]) else { break }
            let headers = head.dropFirst().compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
            let bodyStart = end + separator.count
            if (100..<200).contains(status) {
                interim.append(status)
                index = bodyStart
                continue
            }
            guard headers.allSatisfy({ $0.0.lowercased() != "transfer-encoding" }), bytes.count >= bodyStart + length else { break }
            answers.append(Answer(status: status, headers: headers, body: Array(bytes[bodyStart..<bodyStart + length])))
            index = bodyStart + length
        }
        rest = Array(bytes[index...])
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        return (start...(bytes.count - needle.count)).first { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
    }
}

@Suite("HTTP framing: one answer per request, pipelined requests answered one at a time", .timeLimit(.minutes(5)))
struct HTTPFramingTests {
    /// Everything the server sends on a new connection carrying `bytes` until it closes it (or `timeout`).
    static func exchange(_ server: TestServer, _ bytes: [UInt8], timeout: Duration = .seconds(10)) async throws
        -> (answers: WireAnswers, closed: Bool)
    {
        let socket = try RawSocket.connect(port: server.port)
        defer { close(socket) }
        try RawSocket.write(socket, bytes)
        let (received, error) = await RawSocket.receive(socket, timeout: timeout) { _ in false }
        return (WireAnswers(received), error != ETIMEDOUT)
    }

    /// A signed request head for the S3 API (the body unsigned).
    static func signedHead(
        _ server: TestServer, _ method: String, _ path: String, extra: [(name: String, value: String)] = []
    ) -> String {
        let headers = [("host", "127.0.0.1:\(server.port)")] + extra.map { ($0.name.lowercased(), $0.value) }
        let signed = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
            method: method, path: path, query: [], headers: headers, payloadHash: "UNSIGNED-PAYLOAD", date: Date())
        return RawSocket.requestHead(method, path, signed.headers)
    }

    static let health = RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1")])

    @Test(
        "a body the parser refuses after its request was answered ends the connection with no second answer (which a proxy would hand to its next client)",
        arguments: ["zz\r\n", "3\r\nabcXX", "3\r\nabc\r\n0\r\nX-T: a\u{0}b\r\n\r\n", "ffffffffffffffffffff\r\n"])
    func noSecondAnswer(_ body: String) async throws {
        try await TestServer.with { server in
            let chunked = RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1"), ("Transfer-Encoding", "chunked")])
            let (wire, closed) = try await Self.exchange(server, Array((chunked + body).utf8))
            #expect(wire.answers.map(\.status) == [200], "\(wire.answers.map(\.status))")
            // Answered before its body came: the answer says the connection ends, so a proxy does not reuse it.
            #expect(wire.answers.first?.closes == true)
            #expect(wire.rest.isEmpty, "after the answer: \(String(decoding: wire.rest, as: UTF8.self))")
            #expect(closed)
            // The same behind a signed GET of an object.
            try await server.client().createBucket("framing")
            #expect(try await server.client().put("framing", "k", Array("value".utf8)).status == 200)
            let get = Self.signedHead(server, "GET", "/framing/k", extra: [("Transfer-Encoding", "chunked")])
            let (object, _) = try await Self.exchange(server, Array((get + body).utf8))
            #expect(object.answers.map(\.status) == [200] && object.answers.first?.body == Array("value".utf8))
            #expect(object.rest.isEmpty)
        }
    }

    @Test("a head the parser refuses gets one 400 that says Connection: close")
    func refusedHeadSaysClose() async throws {
        try await TestServer.with { server in
            let (wire, closed) = try await Self.exchange(
                server, Array("GET /_ferry/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\u{0}b\r\n\r\n".utf8))
            #expect(wire.answers.map(\.status) == [400] && wire.answers.first?.closes == true, "\(wire.answers.map(\.headers))")
            #expect(closed)
        }
    }

    @Test("a refusal pipelined before a request whose body is still coming is not taken for that request's: both are answered, in order, and the connection stays open")
    func pipelinedRefusalBeforeBody() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("pipe")
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            let missing = Self.signedHead(server, "GET", "/pipe/missing")
            let put = Self.signedHead(server, "PUT", "/pipe/stored", extra: [("Content-Length", "10")])
            try RawSocket.write(socket, Array((missing + put + "12345").utf8))
            let (first, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { WireAnswers($0).answers.count == 1 }
            let answered = WireAnswers(first)
            #expect(answered.answers.map(\.status) == [404])
            #expect(answered.answers.first?.closes == false, "the GET's 404 said close: \(answered.answers.map(\.headers))")
            try RawSocket.write(socket, Array(("67890" + Self.health).utf8))
            let (rest, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { WireAnswers($0).answers.count == 2 }
            #expect(WireAnswers(rest).answers.map(\.status) == [200, 200], "\(String(decoding: rest, as: UTF8.self))")
            #expect(try await server.client().get("pipe", "stored").text == "1234567890")
        }
    }

    @Test("a request that expects 100-continue, pipelined behind another, gets its 100 once it is reached; the answer before it keeps the connection")
    func pipelinedExpectContinue() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("pipe")
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            let put = Self.signedHead(server, "PUT", "/pipe/continued", extra: [("Content-Length", "5"), ("Expect", "100-continue")])
            try RawSocket.write(socket, Array((Self.health + put).utf8))
            let (first, _) = await RawSocket.receive(socket, timeout: .seconds(10)) {
                let wire = WireAnswers($0)
                return wire.answers.count == 1 && wire.interim == [100]
            }
            let answered = WireAnswers(first)
            #expect(answered.answers.map(\.status) == [200] && answered.answers.first?.closes == false)
            #expect(answered.interim == [100], "no 100 Continue for the PUT: \(String(decoding: first, as: UTF8.self))")
            try RawSocket.write(socket, Array("hello".utf8))
            let (rest, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { WireAnswers($0).answers.count == 1 }
            #expect(WireAnswers(rest).answers.map(\.status) == [200])
            #expect(try await server.client().get("pipe", "continued").text == "hello")
        }
    }

    @Test("each pipelined request's version and Connection decide its own answer: HTTP/1.1 keeps the connection, the HTTP/1.0 behind it closes it, and a request that asks close gets Connection: close")
    func pipelinedVersions() async throws {
        try await TestServer.with { server in
            let http10 = "GET /_ferry/health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
            let (wire, closed) = try await Self.exchange(server, Array((Self.health + http10 + Self.health).utf8))
            #expect(wire.answers.map(\.status) == [200, 200], "\(wire.answers.map(\.status))")
            #expect(wire.answers.map(\.closes) == [false, true])
            #expect(closed)
            for close in ["close", "Close", "keep-alive, CLOSE", "TE, close"] {
                let asksClose = RawSocket.requestHead("GET", "/_ferry/health", [("Host", "127.0.0.1"), ("Connection", close)])
                let (closing, ended) = try await Self.exchange(server, Array((asksClose + Self.health).utf8))
                #expect(closing.answers.map(\.status) == [200] && closing.answers.first?.closes == true, "\(close)")
                #expect(closing.rest.isEmpty, "\(close): \(String(decoding: closing.rest, as: UTF8.self))")
                #expect(ended, "\(close): the connection stayed open")
            }
        }
    }

    @Test("an HTTP/1.0 request with Transfer-Encoding gets a bare 400 and a closed connection (RFC 9112 §6.1), and what follows it is not run")
    func http10TransferEncoding() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("pipe")
            let put = Self.signedHead(server, "PUT", "/pipe/smuggled", extra: [("Content-Length", "2")]) + "hi"
            let request = "POST /_ferry/health HTTP/1.0\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + put
            let (wire, closed) = try await Self.exchange(server, Array(request.utf8))
            #expect(wire.answers.map(\.status) == [400] && wire.answers.first?.closes == true)
            #expect(closed)
            #expect(try await server.client().get("pipe", "smuggled").status == 404)
        }
    }

    @Test("many pipelined requests sent a few bytes at a time are answered in order, each once, and the connection stays open")
    func pipelinedInFragments() async throws {
        try await TestServer.with { server in
            try await server.client().createBucket("pipe")
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            var expected: [Int] = []
            var bytes: [UInt8] = []
            for index in 0..<12 {
                switch index % 3 {
                case 0:
                    bytes += Array(Self.health.utf8)
                    expected.append(200)
                case 1:
                    bytes += Array(Self.signedHead(server, "GET", "/pipe/none-\(index)").utf8)
                    expected.append(404)
                default:
                    bytes += Array((Self.signedHead(server, "PUT", "/pipe/k\(index)", extra: [("Content-Length", "3")]) + "abc").utf8)
                    expected.append(200)
                }
            }
            for start in stride(from: 0, to: bytes.count, by: 7) {
                try RawSocket.write(socket, Array(bytes[start..<min(start + 7, bytes.count)]))
            }
            let (received, _) = await RawSocket.receive(socket, timeout: .seconds(20)) { WireAnswers($0).answers.count == expected.count }
            let wire = WireAnswers(received)
            #expect(wire.answers.map(\.status) == expected)
            #expect(wire.answers.allSatisfy { !$0.closes }, "\(wire.answers.map(\.headers))")
            #expect(try await server.client().get("pipe", "k11").text == "abc")
        }
    }
}

extension HTTPFramingTests {
    @Test(
        "a JSON route's body declared larger than 1 MiB is refused from its headers, before a byte of it is sent or invited with 100 Continue, also when its length is past what an Int holds",
        arguments: ["/_ferry/v1/GetVideoInfo", "/_ferry/ugc/ApplyUploadUGC", "/_ferry/console/session", "/s3/multipart"],
        ["2097152", "9223372036854775808", "18446744073709551615"])
    func largeJSONBodyRefusedAtHeaders(_ path: String, _ length: String) async throws {
        try await TestServer.with { server in
            for expect in [[], [("Expect", "100-continue")]] {
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                let head = RawSocket.requestHead(
                    "POST", path, [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Content-Length", length)] + expect)
                try RawSocket.write(socket, Array(head.utf8))
                let (received, _) = await RawSocket.receive(socket, timeout: .seconds(5)) { WireAnswers($0).answers.count == 1 }
                let text = String(decoding: received, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 413"), "\(expect): \(text.prefix(300))")
                let answer = try #require(WireAnswers(received).answers.first, "no answer before the body: \(text)")
                #expect(answer.status == 413, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
                #expect(answer.closes)
            }
        }
    }
}
