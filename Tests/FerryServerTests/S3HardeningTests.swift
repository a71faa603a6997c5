import Ferry
import Crypto
import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Object API: scoped listing, malformed keys, policies", .timeLimit(.minutes(10)))
struct S3HardeningTests {
    @Test("a key scoped to a prefix lists within it only; a listing outside it, or of the whole bucket, is AccessDenied")
    func scopedListing() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("uploads")
            for key in ["users/42/a.mp4", "users/42/b/c.mp4", "users/43/secret.mp4", "top.txt"] { try await s3.put("uploads", key, [1]) }
            _ = try await s3.createMultipartUpload("uploads", "users/43/open.mp4")
            let policy = AccessPolicy(statements: [
                .init(actions: ["s3:ListBucket", "s3:ListBucketMultipartUploads", "s3:GetObject"], bucket: "uploads", keyPrefix: "users/42/")
            ])
            let scoped = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(600))
            let user = server.client(scoped)
            let inside = try await user.send("GET", "/uploads", query: [("list-type", "2"), ("prefix", "users/42/")])
            #expect(inside.status == 200)
            #expect(inside.text.contains("users/42/a.mp4") && inside.text.contains("users/42/b/c.mp4"))
            #expect(!inside.text.contains("users/43"))
            let deeper = try await user.send("GET", "/uploads", query: [("prefix", "users/42/b/")])
            #expect(deeper.status == 200 && deeper.text.contains("users/42/b/c.mp4"))
            for query in [
                [("list-type", "2")], [("list-type", "2"), ("prefix", "users/")], [("list-type", "2"), ("prefix", "users/43/")],
                [("prefix", "users/4")], [("uploads", "")], [("uploads", ""), ("prefix", "users/43/")],
            ] {
                let reply = try await user.send("GET", "/uploads", query: query)
                #expect(reply.errorCode == "AccessDenied", "\(query): \(reply.text)")
            }
            let uploads = try await user.send("GET", "/uploads", query: [("uploads", ""), ("prefix", "users/42/")])
            #expect(uploads.status == 200 && !uploads.text.contains("users/43"))
            // The root key lists everything.
            #expect(try await s3.send("GET", "/uploads", query: [("list-type", "2")]).text.contains("users/43/secret.mp4"))
        }
    }

    @Test("a key scoped to a prefix, even with s3:*, cannot delete the bucket or set its lifecycle or CORS (they reach other keys' objects); it can head it")
    func scopedBucketActions() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("shared")
            try await s3.put("shared", "u2/secret", [7])
            let other = try await s3.createMultipartUpload("shared", "u2/big")
            let policy = AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "shared", keyPrefix: "u1/")])
            let scoped = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(600))
            let user = server.client(scoped)
            let lifecycle = Array("""
                <LifecycleConfiguration><Rule><ID>all</ID><Filter><Prefix></Prefix></Filter><Status>Enabled</Status>\
                <Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>
                """.utf8)
            let cors = Array("""
                <CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>\
                </CORSConfiguration>
                """.utf8)
            let refused: [(String, [(name: String, value: String)], [UInt8])] = [
                ("PUT", [("lifecycle", "")], lifecycle), ("GET", [("lifecycle", "")], []), ("DELETE", [("lifecycle", "")], []),
                ("PUT", [("cors", "")], cors), ("GET", [("cors", "")], []), ("DELETE", [("cors", "")], []),
                ("DELETE", [], []),
            ]
            for (method, query, body) in refused {
                let headers = body.isEmpty ? [] : [(name: "content-md5", value: Data(Insecure.MD5.hash(data: body)).base64EncodedString())]
                let reply = try await user.send(method, "/shared", query: query, headers: headers, body: body)
                #expect(reply.errorCode == "AccessDenied", "\(method) \(query): \(reply.status) \(reply.text)")
            }
            #expect(try await user.send("HEAD", "/shared").status == 200)
            #expect(try await user.send("GET", "/shared", query: [("location", "")]).status == 200)
            // Within its prefix it still writes and reads.
            #expect(try await user.send("PUT", "/shared/u1/mine", body: [1]).status == 200)
            // Nothing of the bucket or the other keys changed.
            #expect(try await s3.get("shared", "u2/secret").body == [7])
            #expect(try await s3.send("GET", "/shared", query: [("lifecycle", "")]).errorCode == "NoSuchLifecycleConfiguration")
            #expect(try await s3.send("GET", "/shared/u2/big", query: [("uploadId", other)]).status == 200)
        }
    }

    @Test("ListBuckets with a key limited to buckets shows the buckets it may list (aws s3 ls works); without s3:ListAllMyBuckets it is AccessDenied")
    func scopedListBuckets() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            for bucket in ["shared", "other", "third"] { try await s3.createBucket(bucket) }
            func names(_ policy: AccessPolicy) async throws -> (status: Int, names: [String]) {
                let credentials = server.server.credentials.tokens.issue(
                    parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(600))
                let reply = try await server.client(credentials).send("GET", "/")
                guard reply.status == 200 else { return (reply.status, []) }
                return (200, try S3XML.decode(ListAllMyBucketsResult.self, from: Data(reply.body)).buckets.bucket.map(\.name))
            }
            // A key on one bucket's prefix, one on a whole bucket, one on two buckets.
            #expect(try await names(AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "shared", keyPrefix: "u1/")])) == (200, ["shared"]))
            #expect(try await names(AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "other")])) == (200, ["other"]))
            let two = AccessPolicy(statements: [
                .init(actions: ["s3:ListAllMyBuckets", "s3:ListBucket"], bucket: "other"), .init(actions: ["s3:ListBucket"], bucket: "third"),
            ])
            #expect(try await names(two) == (200, ["other", "third"]))
            // ListAllMyBuckets for every bucket lists them all; none at all is refused.
            #expect(try await names(AccessPolicy(statements: [.init(actions: ["s3:ListAllMyBuckets"])])) == (200, ["other", "shared", "third"]))
            #expect(try await names(AccessPolicy(statements: [.init(actions: ["s3:GetObject", "s3:ListBucket"], bucket: "shared")])).status == 403)
        }
    }

    @Test("an x-amz-* header the signature does not cover is refused (403, nothing done): a presigned PUT cannot become a copy of another object, nor add tags or metadata")
    func unsignedAmzHeaders() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("uploads")
            try await s3.createBucket("private")
            #expect(try await s3.put("private", "payroll.csv", Array("secret".utf8)).status == 200)
            let url = try s3.presignedURL("PUT", "/uploads/avatar.png")
            for header in [
                ("x-amz-copy-source", "/private/payroll.csv"), ("x-amz-tagging", "a=b"), ("x-amz-meta-note", "x"),
                ("X-Amz-Copy-Source", "private/payroll.csv"),
            ] {
                let refused = try await S3TestClient.fetchRaw("PUT", url, headers: [header], body: Array("png".utf8))
                #expect(refused.status == 403, "\(header): \(refused.text)")
                #expect(refused.text.contains("<Code>AccessDenied</Code>") && refused.text.contains("not signed"), "\(refused.text)")
                #expect(refused.text.contains(header.0.lowercased()))
            }
            #expect(try await s3.get("uploads", "avatar.png").status == 404)
            // Header-signed requests: a header added after signing is refused the same way.
            let copied = try await s3.send(
                "PUT", "/uploads/copy.csv", mutateSigned: { $0.append(("x-amz-copy-source", "/private/payroll.csv")) })
            #expect(copied.status == 403 && copied.text.contains("not signed"), "\(copied.text)")
            #expect(try await s3.get("uploads", "copy.csv").status == 404)
            // Signed, the same headers work; an unsigned x-amz-content-sha256 is accepted, as S3 does.
            let signedCopy = try await s3.send("PUT", "/uploads/copy.csv", headers: [("x-amz-copy-source", "/private/payroll.csv")])
            #expect(signedCopy.status == 200, "\(signedCopy.text)")
            let plain = try await S3TestClient.fetchRaw(
                "PUT", url, headers: [("x-amz-content-sha256", "UNSIGNED-PAYLOAD")], body: Array("png".utf8))
            #expect(plain.status == 200, "\(plain.text)")
            #expect(try await s3.get("uploads", "avatar.png").body == Array("png".utf8))
        }
    }

    @Test("a malformed percent escape in a key is 400 InvalidURI, not a signature error, and changes nothing")
    func malformedEscape() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("esc")
            // Sent on a socket as written: an HTTP client would escape the stray `%` first.
            for path in ["/esc/a%zz", "/esc/%", "/esc/a%4", "/esc/%00", "/esc/a%C2%85b"] {
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let headers = signer.sign(
                    method: "PUT", path: path, query: [], headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", "1")],
                    payloadHash: SigV4.unsignedPayload, date: Date()).headers
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", path, headers).utf8) + [1])
                let (answer, _) = await RawSocket.receive(socket) { RawSocket.isCompleteResponse($0) }
                let text = String(decoding: answer, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 400"), "\(path): \(text)")
                #expect(text.contains("<Code>InvalidURI</Code>"), "\(path): \(text)")
            }
            #expect(!(try await s3.send("GET", "/esc", query: [("list-type", "2")]).text.contains("<Key>")))
        }
    }

    @Test("policy statements may leave out keyPrefix (the whole bucket) and bucket (every bucket)")
    func optionalPolicyFields() throws {
        let policy = try JSONDecoder().decode(
            AccessPolicy.self, from: Data(#"{"statements":[{"actions":["s3:GetObject"],"bucket":"media"},{"actions":["s3:PutObject"]}]}"#.utf8))
        #expect(policy.allows(action: "s3:GetObject", bucket: "media", key: "any/key"))
        #expect(!policy.allows(action: "s3:GetObject", bucket: "other", key: "k"))
        #expect(policy.allows(action: "s3:PutObject", bucket: "other", key: "k"))
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode(AccessPolicy.self, from: Data(#"{"statements":[{"bucket":"media"}]}"#.utf8))
        }
    }
}
