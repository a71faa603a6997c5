import Crypto
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A malformed or hostile request and what the server must answer.
struct Hostile: Sendable, CustomStringConvertible {
    var name: String
    /// The expected status; for raw socket requests 0 also accepts a closed connection.
    var status: Int
    /// The expected S3 (or media API) error code; nil when the answer has none.
    var code: String?
    var send: @Sendable (TestServer) async throws -> (status: Int, code: String?)

    var description: String { name }
}

@Suite("Torture: malformed and hostile requests", .serialized, .timeLimit(.minutes(20)))
struct HostileRequestTests {
    static let bucket = "hostile"
    static let canary = [UInt8](repeating: 42, count: 100_000)

    static func signed(
        _ method: String, _ path: String, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = [],
        body: [UInt8] = [], payload: S3TestClient.Payload = .signed, date: Date = Date()
    ) -> @Sendable (TestServer) async throws -> (status: Int, code: String?) {
        { server in
            let reply = try await server.client().send(method, path, query: query, headers: headers, body: body, payload: payload, date: date)
            return (reply.status, reply.errorCode ?? mediaCode(reply))
        }
    }

    /// Sends bytes on a socket of its own and reads the answer: (status, code), or (0, nil) when the server closed the
    /// connection without one.
    static func raw(_ bytes: @escaping @Sendable (TestServer) -> [UInt8], halfClose: Bool = false)
        -> @Sendable (TestServer) async throws -> (status: Int, code: String?)
    {
        { server in
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            try? RawSocket.write(socket, bytes(server))
            if halfClose { shutdown(socket, Int32(SHUT_WR)) }
            let (answer, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { RawSocket.isCompleteResponse($0) }
            let text = String(decoding: answer, as: UTF8.self)
            guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)) else { return (0, nil) }
            let code = text.range(of: "<Code>").flatMap { start in
                text.range(of: "</Code>").map { String(text[start.upperBound..<$0.lowerBound]) }
            }
            return (status, code)
        }
    }

    static func mediaCode(_ reply: S3TestClient.Reply) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])?["code"] as? String
    }

    static func media(_ action: String, _ json: String) -> @Sendable (TestServer) async throws -> (status: Int, code: String?) {
        { server in
            let body = Array(json.utf8)
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1", service: "ferry")
            let path = "/_ferry/v1/" + action
            let headers = signer.sign(
                method: "POST", path: path, query: [], headers: [("host", "127.0.0.1:\(server.port)"), ("content-type", "application/json")],
                payloadHash: SigV4.hexSHA256(body), date: Date()).headers
            let reply = try await server.client().sendRaw("POST", path, headers: headers, body: body)
            return (reply.status, mediaCode(reply))
        }
    }

    /// A signed request sent on a socket as written: a path no HTTP client would send unchanged (`%zz`).
    /// `signedPath` is the canonical form the signature covers when it differs from what is sent.
    static func rawSigned(_ method: String, _ path: String, signedPath: String? = nil, body: [UInt8] = [])
        -> @Sendable (TestServer) async throws -> (status: Int, code: String?)
    {
        raw { server in
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let headers = signer.sign(
                method: method, path: signedPath ?? path, query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(body.count))],
                payloadHash: SigV4.unsignedPayload, date: Date()).headers
            return Array(RawSocket.requestHead(method, path, headers).utf8) + body
        }
    }

    /// A presigned GET of the canary; `expires` beyond 7 days is written into a URL signed for 600 seconds.
    static func presigned(expires: Int, date: Date, tamper: Bool = false) -> @Sendable (TestServer) async throws -> (status: Int, code: String?) {
        { server in
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let query = try signer.presign(
                method: "GET", path: "/\(bucket)/canary", query: [], host: "127.0.0.1:\(server.port)", expires: min(expires, 600), date: date)
            var url = server.endpoint + "/\(bucket)/" + (tamper ? "canary2" : "canary") + "?"
            url += query.map { SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true) }
                .joined(separator: "&")
            url = url.replacingOccurrences(of: "X-Amz-Expires=\(min(expires, 600))", with: "X-Amz-Expires=\(expires)")
            let reply = try await S3TestClient.fetch(url)
            return (reply.status, reply.errorCode)
        }
    }

    static var table: [Hostile] {
        let b = bucket
        let entityBomb = """
            <?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\
            <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><Tagging><TagSet><Tag><Key>&lol3;</Key><Value>v</Value></Tag></TagSet></Tagging>
            """
        let manyKeys = "<Delete>" + (0...1000).map { "<Object><Key>k\($0)</Key></Object>" }.joined() + "</Delete>"
        return [
            Hostile(name: "garbage request line", status: 0, code: nil, send: raw { _ in Array("\u{01}\u{02}GARBAGE\r\n\r\n".utf8) }),
            Hostile(name: "request head of 200 KiB", status: 0, code: nil, send: raw { _ in
                Array("GET /\(b)/canary HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 200 << 10))\r\n\r\n".utf8)
            }),
            Hostile(name: "unsigned request", status: 403, code: "AccessDenied", send: raw { server in
                Array("GET /\(b)/canary HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n".utf8)
            }),
            Hostile(name: "truncated body", status: 0, code: nil, send: raw(
                { server in
                    let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                    let headers = signer.sign(
                        method: "PUT", path: "/\(b)/truncated", query: [],
                        headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", "100000")],
                        payloadHash: SigV4.unsignedPayload, date: Date()).headers
                    return Array(RawSocket.requestHead("PUT", "/\(b)/truncated", headers).utf8) + [UInt8](repeating: 1, count: 1000)
                }, halfClose: true)),
            Hostile(name: "clock skewed by 20 minutes", status: 403, code: "RequestTimeTooSkewed",
                    send: signed("GET", "/\(b)/canary", date: Date().addingTimeInterval(-1200))),
            Hostile(name: "expired presigned URL", status: 403, code: "AccessDenied",
                    send: presigned(expires: 60, date: Date().addingTimeInterval(-120))),
            Hostile(name: "tampered presigned URL", status: 403, code: "SignatureDoesNotMatch",
                    send: presigned(expires: 600, date: Date(), tamper: true)),
            Hostile(name: "presigned URL living longer than 7 days", status: 400, code: "AuthorizationQueryParametersError",
                    send: presigned(expires: 604_801, date: Date())),
            Hostile(name: "wrong signature", status: 403, code: "SignatureDoesNotMatch", send: { server in
                let reply = try await S3TestClient(
                    endpoint: server.endpoint,
                    credentials: SigV4Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: "wrong")
                ).get(b, "canary")
                return (reply.status, reply.errorCode)
            }),
            Hostile(name: "bad aws-chunked framing", status: 400, code: "InvalidRequest", send: signed(
                "PUT", "/\(b)/chunked", headers: [("content-encoding", "aws-chunked"), ("x-amz-decoded-content-length", "5")],
                body: Array("zz;\r\nhello\r\n0\r\n\r\n".utf8), payload: .hash("STREAMING-UNSIGNED-PAYLOAD-TRAILER"))),
            Hostile(name: "entity-expansion XML", status: 400, code: "MalformedXML",
                    send: signed("PUT", "/\(b)/canary", query: [("tagging", "")], body: Array(entityBomb.utf8))),
            Hostile(name: "DeleteObjects with 1001 keys", status: 400, code: "MalformedXML", send: signed(
                "POST", "/\(b)", query: [("delete", "")], headers: [("content-md5", Data(md5(Array(manyKeys.utf8))).base64EncodedString())],
                body: Array(manyKeys.utf8))),
            Hostile(name: "part number 10001", status: 400, code: "InvalidArgument",
                    send: signed("PUT", "/\(b)/mpu", query: [("partNumber", "10001"), ("uploadId", "x")], body: [1])),
            Hostile(name: "part number beyond 64 bits", status: 400, code: "InvalidArgument",
                    send: signed("PUT", "/\(b)/mpu", query: [("partNumber", "99999999999999999999"), ("uploadId", "x")], body: [1])),
            Hostile(name: "GET partNumber 0", status: 400, code: "InvalidArgument",
                    send: signed("GET", "/\(b)/canary", query: [("partNumber", "0")])),
            Hostile(name: "max-keys beyond 64 bits", status: 400, code: "InvalidArgument",
                    send: signed("GET", "/\(b)", query: [("list-type", "2"), ("max-keys", "99999999999999999999")])),
            Hostile(name: "max-keys negative", status: 400, code: "InvalidArgument",
                    send: signed("GET", "/\(b)", query: [("max-keys", "-1")])),
            Hostile(name: "max-uploads beyond 64 bits", status: 400, code: "InvalidArgument",
                    send: signed("GET", "/\(b)", query: [("uploads", ""), ("max-uploads", "18446744073709551616")])),
            // A first position past 2^63 is past the object's end, as any larger than its size.
            Hostile(name: "Range beyond 64 bits", status: 416, code: "InvalidRange",
                    send: signed("GET", "/\(b)/canary", headers: [("range", "bytes=99999999999999999999-")])),
            Hostile(name: "Range past the end", status: 416, code: "InvalidRange",
                    send: signed("GET", "/\(b)/canary", headers: [("range", "bytes=100000-")])),
            Hostile(name: "Content-Length beyond 64 bits", status: 0, code: nil, send: raw { server in
                Array("PUT /\(b)/huge HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nContent-Length: 99999999999999999999\r\n\r\n".utf8)
            }),
            Hostile(name: "object larger than 5 GiB in one PUT", status: 400, code: "EntityTooLarge", send: raw { server in
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let headers = signer.sign(
                    method: "PUT", path: "/\(b)/huge", query: [],
                    headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(6 << 30))],
                    payloadHash: SigV4.unsignedPayload, date: Date()).headers
                return Array(RawSocket.requestHead("PUT", "/\(b)/huge", headers).utf8)
            }),
            Hostile(name: "traversal key", status: 400, code: "InvalidArgument", send: raw { server in
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let headers = signer.sign(
                    method: "PUT", path: "/\(b)/a/../../etc/passwd", query: [],
                    headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", "1")], payloadHash: SigV4.unsignedPayload,
                    date: Date()).headers
                return Array(RawSocket.requestHead("PUT", "/\(b)/a/../../etc/passwd", headers).utf8) + [1]
            }),
            Hostile(name: "encoded traversal key", status: 400, code: "InvalidArgument", send: rawSigned("PUT", "/\(b)/a/%2E%2E/b", signedPath: "/\(b)/a/../b", body: [1])),
            Hostile(name: "NUL in a key", status: 400, code: "InvalidURI", send: rawSigned("PUT", "/\(b)/a%00b", body: [1])),
            Hostile(name: "malformed percent escape", status: 400, code: "InvalidURI", send: rawSigned("PUT", "/\(b)/a%zz", body: [1])),
            Hostile(name: "key of 1025 bytes", status: 400, code: "KeyTooLongError",
                    send: signed("PUT", "/\(b)/" + String(repeating: "k", count: 1025), body: [1])),
            Hostile(name: "metadata over 2 KiB", status: 400, code: "MetadataTooLarge",
                    send: signed("PUT", "/\(b)/meta", headers: [("x-amz-meta-m", String(repeating: "m", count: 2100))], body: [1])),
            Hostile(name: "copy source outside the bucket namespace", status: 400, code: "InvalidArgument",
                    send: signed("PUT", "/\(b)/copy", headers: [("x-amz-copy-source", "/\(b)/../../etc/passwd")])),
            Hostile(name: "ACL sub-resource (not implemented)", status: 501, code: "NotImplemented",
                    send: signed("PUT", "/\(b)/canary", query: [("acl", "")], body: Array("<AccessControlPolicy/>".utf8))),
            Hostile(name: "bucket policy delete (not implemented)", status: 501, code: "NotImplemented",
                    send: signed("DELETE", "/\(b)", query: [("policy", "")])),
            Hostile(name: "Transfer-Encoding: chunked PUT", status: 501, code: "NotImplemented", send: raw { server in
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let headers = signer.sign(
                    method: "PUT", path: "/\(b)/te", query: [],
                    headers: [("host", "127.0.0.1:\(server.port)"), ("transfer-encoding", "chunked")],
                    payloadHash: SigV4.unsignedPayload, date: Date()).headers
                return Array(RawSocket.requestHead("PUT", "/\(b)/te", headers).utf8) + Array("1\r\nx\r\n0\r\n\r\n".utf8)
            }),
            Hostile(name: "invalid bucket name", status: 400, code: "InvalidBucketName", send: signed("PUT", "/192.168.1.1")),
            Hostile(name: "media: PageNo that overflows the offset", status: 400, code: "InvalidParameter",
                    send: media("ListVideos", #"{"PageNo":4611686018427387904}"#)),
            Hostile(name: "media: malformed JSON", status: 400, code: "MalformedJSON", send: media("CreateUploadVideo", #"{"Title":"#)),
            Hostile(name: "media: AssumeRole for 2^63-1 seconds", status: 400, code: "InvalidParameter",
                    send: media("AssumeRole", #"{"DurationSeconds":9223372036854775807}"#)),
        ]
    }

    static func md5(_ bytes: [UInt8]) -> [UInt8] { Array(Insecure.MD5.hash(data: bytes)) }

    @Test("each is refused with its status and code; the server keeps serving and nothing is left on disk")
    func table() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket(Self.bucket)
            #expect(try await s3.put(Self.bucket, "canary", Self.canary).status == 200)
            let tmp = server.dataDirectory + "/objects/tmp"
            let blobsBefore = Torture.files(under: server.dataDirectory + "/objects").count
            for entry in Self.table {
                let answer = try await entry.send(server)
                if entry.status == 0 {
                    #expect(answer.status == 0 || (400..<500).contains(answer.status), "\(entry): \(answer)")
                } else {
                    #expect(answer.status == entry.status, "\(entry): \(answer)")
                    if let code = entry.code { #expect(answer.code == code, "\(entry): \(answer)") }
                }
                // Still serving, unchanged, and nothing half-written remains.
                #expect(try await s3.get(Self.bucket, "canary").body == Self.canary, "\(entry): the canary changed")
                var clean = false
                for _ in 0..<1500 {
                    if Torture.files(under: tmp).isEmpty { clean = true; break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(clean, "\(entry): temporary files left behind")
            }
            #expect(Set(try await Torture.listAll(s3, bucket: Self.bucket).keys) == ["canary"])
            #expect(try await Torture.openUploads(s3, bucket: Self.bucket).isEmpty)
            #expect(Torture.files(under: server.dataDirectory + "/objects").count == blobsBefore)
        }
    }
}
