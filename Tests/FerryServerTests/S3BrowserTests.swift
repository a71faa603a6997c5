import Crypto
import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Testing

@Suite("S3 for browsers: bucket CORS and POST policy uploads", .timeLimit(.minutes(10)))
struct S3BrowserTests {
    static let cors = """
        <CORSConfiguration>
          <CORSRule><AllowedOrigin>https://app.example</AllowedOrigin><AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod>
            <AllowedHeader>content-type</AllowedHeader><AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule>
          <CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>
        </CORSConfiguration>
        """

    @Test("Put/Get/DeleteBucketCors; preflights follow the rules; cross-origin responses carry the CORS headers")
    func cors() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("web")
            try await s3.put("web", "k", [1])
            #expect(try await s3.send("GET", "/web", query: [("cors", "")]).errorCode == "NoSuchCORSConfiguration")
            let preflightWithout = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/web/k",
                headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT")])
            #expect(preflightWithout.status == 403)

            let body = Array(Self.cors.utf8)
            let bad = Array("<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>".utf8)
            #expect(try await s3.send("PUT", "/web", query: [("cors", "")], headers: [("Content-MD5", contentMD5(bad))], body: bad).errorCode == "InvalidRequest")
            #expect(try await s3.send("PUT", "/web", query: [("cors", "")], headers: [("Content-MD5", contentMD5(body))], body: body).status == 200)
            let stored = try await s3.send("GET", "/web", query: [("cors", "")])
            #expect(stored.text.contains("<AllowedOrigin>https://app.example</AllowedOrigin>"))

            let allowed = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/web/k",
                headers: [
                    ("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT"),
                    ("Access-Control-Request-Headers", "Content-Type, X-Amz-Date"),
                ])
            #expect(allowed.status == 200)
            #expect(allowed.header("Access-Control-Allow-Origin") == "https://app.example")
            #expect(allowed.header("Access-Control-Allow-Methods") == "PUT, GET")
            #expect(allowed.header("Access-Control-Allow-Headers") == "content-type, x-amz-date")
            #expect(allowed.header("Access-Control-Max-Age") == "600")
            let wrongHeader = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/web/k",
                headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT"), ("Access-Control-Request-Headers", "authorization-x")])
            #expect(wrongHeader.status == 403)
            let otherOrigin = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/web/k",
                headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "PUT")])
            #expect(otherOrigin.status == 403)
            let anyOrigin = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/web/k",
                headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "GET")])
            #expect(anyOrigin.status == 200)
            #expect(anyOrigin.header("Access-Control-Allow-Origin") == "*")
            #expect(try await S3TestClient.fetchRaw("OPTIONS", server.endpoint + "/web/k", headers: [("Access-Control-Request-Method", "GET")]).status == 400)

            // An ordinary signed request from an allowed origin gets the headers; the object is not touched by a preflight.
            let get = try await s3.get("web", "k", headers: [("Origin", "https://app.example")])
            #expect(get.header("Access-Control-Allow-Origin") == "https://app.example")
            #expect(get.header("Access-Control-Expose-Headers") == "ETag")
            #expect(try await s3.get("web", "k").header("Access-Control-Allow-Origin") == nil)

            #expect(try await s3.send("DELETE", "/web", query: [("cors", "")]).status == 204)
            #expect(try await s3.send("GET", "/web", query: [("cors", "")]).errorCode == "NoSuchCORSConfiguration")
            #expect(try await s3.get("web", "k").body == [1])
        }
    }

    /// A POST policy form: fields in order, then the file.
    struct PostForm {
        var fields: [(String, String)]
        var file: [UInt8]
        var filename = "clip.mp4"
        /// Fields after the file (an HTML form's submit button), which S3 ignores.
        var after: [(String, String)] = []

        func body(boundary: String) -> [UInt8] {
            var out = ""
            for (name, value) in fields {
                out += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n"
            }
            out += "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(filename)\"\r\nContent-Type: video/mp4\r\n\r\n"
            var tail = ""
            for (name, value) in after {
                tail += "\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)"
            }
            return Array(out.utf8) + file + Array((tail + "\r\n--\(boundary)--\r\n").utf8)
        }
    }

    /// Signs `conditions` as a SigV4 POST policy and returns the form fields that carry it.
    static func signedFields(
        _ conditions: [Any], credentials: SigV4Credentials, expires: Date = Date().addingTimeInterval(600),
        extra: [(String, String)], bucket: String
    ) throws -> [(String, String)] {
        let now = Date()
        let scope = SigV4Scope(date: now, region: "us-east-1", service: "s3")
        let credential = "\(credentials.accessKeyId)/\(scope.string)"
        let timestamp = SigV4.timestamp(now)
        let all: [Any] = conditions + [
            ["bucket": bucket], ["x-amz-algorithm": SigV4.algorithm], ["x-amz-credential": credential],
            ["x-amz-date": timestamp],
        ]
        let document: [String: Any] = ["expiration": S3Date.xml(expires), "conditions": all]
        let policy = try JSONSerialization.data(withJSONObject: document).base64EncodedString()
        let signature = SigV4.signature(
            signingKey: SigV4.signingKey(secretAccessKey: credentials.secretAccessKey, scope: scope), stringToSign: policy)
        return extra + [
            ("x-amz-algorithm", SigV4.algorithm), ("x-amz-credential", credential), ("x-amz-date", timestamp),
            ("policy", policy), ("x-amz-signature", signature),
        ]
    }

    static func post(_ endpoint: String, bucket: String, _ form: PostForm) async throws -> S3TestClient.Reply {
        let boundary = "ferry-boundary-\(UUID().uuidString)"
        return try await S3TestClient.fetchRaw(
            "POST", endpoint + "/" + bucket, headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")],
            body: form.body(boundary: boundary))
    }

    @Test("a browser POST with a SigV4 policy stores the file; every condition, every size range and the signature are enforced")
    func postPolicy() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("uploads")
            let file = Array(repeating: UInt8(7), count: 5000)
            let conditions: [Any] = [
                ["starts-with", "$key", "user/42/"], ["content-length-range", 1, 10_000], ["eq", "$Content-Type", "video/mp4"],
                ["starts-with", "$x-amz-meta-title", ""], ["success_action_status": "201"],
            ]
            let fields = try Self.signedFields(
                conditions, credentials: server.root,
                extra: [("key", "user/42/${filename}"), ("Content-Type", "video/mp4"), ("x-amz-meta-title", "Clip"), ("success_action_status", "201")],
                bucket: "uploads")
            let stored = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: fields, file: file))
            #expect(stored.status == 201, "\(stored.text)")
            #expect(stored.text.contains("<Key>user/42/clip.mp4</Key>"))
            let get = try await s3.get("uploads", "user/42/clip.mp4")
            #expect(get.body == file)
            #expect(get.header("Content-Type") == "video/mp4")
            #expect(get.header("x-amz-meta-title") == "Clip")
            #expect(get.header("ETag") == "\"\(Insecure_md5Hex(file))\"")

            // Each of these is refused and stores nothing.
            func refused(_ form: PostForm, _ code: String, _ why: String) async throws {
                let reply = try await Self.post(server.endpoint, bucket: "uploads", form)
                #expect(reply.errorCode == code, "\(why): \(reply.status) \(reply.text)")
                #expect(try await s3.get("uploads", "user/42/other.mp4").status == 404, "\(why) stored the file")
                #expect(try await s3.get("uploads", "elsewhere/other.mp4").status == 404, "\(why) stored the file")
            }
            var outside = fields
            outside[0] = ("key", "elsewhere/other.mp4")
            try await refused(PostForm(fields: outside, file: file), "AccessDenied", "a key outside the policy")
            var other = fields
            other[0] = ("key", "user/42/other.mp4")
            try await refused(PostForm(fields: other + [("x-amz-meta-extra", "1")], file: file), "AccessDenied", "a field no condition names")
            try await refused(PostForm(fields: other, file: Array(repeating: 1, count: 10_001)), "EntityTooLarge", "a file over the range")
            try await refused(PostForm(fields: other, file: []), "EntityTooSmall", "a file under the range")
            var tampered = other
            tampered[tampered.count - 1] = ("x-amz-signature", String(repeating: "0", count: 64))
            try await refused(PostForm(fields: tampered, file: file), "SignatureDoesNotMatch", "a wrong signature")
            let expired = try Self.signedFields(
                conditions, credentials: server.root, expires: Date().addingTimeInterval(-60),
                extra: [("key", "user/42/other.mp4"), ("Content-Type", "video/mp4"), ("x-amz-meta-title", "Clip"), ("success_action_status", "201")],
                bucket: "uploads")
            try await refused(PostForm(fields: expired, file: file), "AccessDenied", "an expired policy")
            let otherBucket = try Self.signedFields(
                conditions, credentials: server.root,
                extra: [("key", "user/42/other.mp4"), ("Content-Type", "video/mp4"), ("x-amz-meta-title", "Clip"), ("success_action_status", "201")],
                bucket: "elsewhere")
            try await refused(PostForm(fields: otherBucket, file: file), "AccessDenied", "a policy for another bucket")
            try await refused(PostForm(fields: [("key", "user/42/other.mp4")], file: file), "AccessDenied", "no policy at all")
            // Conditions compare bytes, as keys are compared: the canonically equivalent spelling of a key, or of a
            // prefix, is another key (`e` + U+0301 for `é`).
            for (condition, key) in [(["eq", "$key", "caf\u{E9}.mp4"], "cafe\u{301}.mp4"), (["starts-with", "$key", "\u{E9}/"], "e\u{301}/x.mp4")] {
                let equivalent = try Self.signedFields(
                    [condition, ["content-length-range", 1, 10_000]], credentials: server.root, extra: [("key", key)],
                    bucket: "uploads")
                let reply = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: equivalent, file: file))
                #expect(reply.errorCode == "AccessDenied", "\(condition): \(reply.status) \(reply.text)")
                #expect(try await s3.get("uploads", key).status == 404)
            }
            // Every content-length-range holds, in any order; ranges that meet nowhere refuse the policy.
            for ranges in [[[0, 1_000_000_000], [0, 10]], [[0, 10], [0, 1_000_000_000]]] {
                let narrowed = try Self.signedFields(
                    [["starts-with", "$key", "user/42/"]] + ranges.map { ["content-length-range", $0[0], $0[1]] },
                    credentials: server.root, extra: [("key", "user/42/other.mp4")], bucket: "uploads")
                try await refused(PostForm(fields: narrowed, file: file), "EntityTooLarge", "a file over one of \(ranges)")
            }
            let disjoint = try Self.signedFields(
                [["starts-with", "$key", "user/42/"], ["content-length-range", 0, 10], ["content-length-range", 20, 30]],
                credentials: server.root, extra: [("key", "user/42/other.mp4")], bucket: "uploads")
            try await refused(
                PostForm(fields: disjoint, file: Array(repeating: 1, count: 25)), "InvalidPolicyDocument", "disjoint ranges")
            let v2 = [("key", "user/42/other.mp4"), ("AWSAccessKeyId", server.root.accessKeyId), ("policy", "e30="), ("signature", "abc")]
            try await refused(PostForm(fields: v2, file: file), "NotImplemented", "a Signature Version 2 form")

            // A digest the form declares is checked: a wrong one is BadDigest and stores nothing; a right one stores.
            let md5 = Data(Insecure.MD5.hash(data: file)).base64EncodedString()
            let sha256 = Data(SHA256.hash(data: file)).base64EncodedString()
            for (field, value, code) in [
                ("Content-MD5", Data(Insecure.MD5.hash(data: [1])).base64EncodedString(), "BadDigest"),
                ("x-amz-checksum-sha256", Data(SHA256.hash(data: [1])).base64EncodedString(), "BadDigest"),
                ("x-amz-checksum-crc32", "AAAAAA==", "BadDigest"),
                // An algorithm not computed cannot be checked: refused, not ignored.
                ("x-amz-checksum-sha512", Data(SHA512.hash(data: [1])).base64EncodedString(), "InvalidRequest"),
                ("Content-MD5", md5, nil), ("x-amz-checksum-sha256", sha256, nil),
            ] as [(String, String, String?)] {
                let key = "digest/" + field + (code == nil ? "-right" : "-wrong")
                let digestFields = try Self.signedFields(
                    [["starts-with", "$key", "digest/"], ["eq", "$" + field, value]], credentials: server.root,
                    extra: [("key", key), (field, value)], bucket: "uploads")
                let reply = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: digestFields, file: file))
                if let code {
                    #expect(reply.errorCode == code, "\(field): \(reply.status) \(reply.text)")
                    #expect(try await s3.get("uploads", key).status == 404)
                } else {
                    #expect(reply.status == 204, "\(field): \(reply.text)")
                    #expect(try await s3.get("uploads", key).body == file)
                }
            }

            // Fields after the file are ignored, as S3 ignores them (an HTML form's submit button), within the limits
            // on fields; the file's bytes end where its part does.
            let submitted = try Self.signedFields(
                [["starts-with", "$key", "after/"]], credentials: server.root, extra: [("key", "after/1.bin")],
                bucket: "uploads")
            let afterFile = try await Self.post(
                server.endpoint, bucket: "uploads", PostForm(fields: submitted, file: file, after: [("submit", "Upload")]))
            #expect(afterFile.status == 204, "\(afterFile.text)")
            #expect(try await s3.get("uploads", "after/1.bin").body == file)
            var flooded = submitted
            flooded[0] = ("key", "after/2.bin")
            let tooMany = try await Self.post(
                server.endpoint, bucket: "uploads",
                PostForm(fields: flooded, file: file, after: (0..<250).map { ("f\($0)", "x") }))
            #expect(tooMany.errorCode == "MalformedPOSTRequest", "\(tooMany.status) \(tooMany.text)")
            #expect(try await s3.get("uploads", "after/2.bin").status == 404)

            // A `tagging` field needs s3:PutObjectTagging beside s3:PutObject (lifecycle rules expire by tags).
            let writer = try await server.server.credentials.createTestKey(
                catalog: server.server.catalog,
                policy: AccessPolicy(statements: [.init(actions: ["s3:PutObject"], bucket: "uploads", keyPrefix: "tags/")]))
            let tagSet = "<Tagging><TagSet><Tag><Key>expire</Key><Value>yes</Value></Tag></TagSet></Tagging>"
            let tagging = try Self.signedFields(
                [["starts-with", "$key", "tags/"], ["eq", "$tagging", tagSet]], credentials: writer,
                extra: [("key", "tags/1.bin"), ("tagging", tagSet)], bucket: "uploads")
            let taggedReply = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: tagging, file: file))
            #expect(taggedReply.errorCode == "AccessDenied", "\(taggedReply.status) \(taggedReply.text)")
            #expect(try await s3.get("uploads", "tags/1.bin").status == 404)
            let untagged = try Self.signedFields(
                [["starts-with", "$key", "tags/"]], credentials: writer, extra: [("key", "tags/2.bin")], bucket: "uploads")
            let untaggedReply = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: untagged, file: file))
            #expect(untaggedReply.status == 204, "\(untaggedReply.text)")

            // The default answer is 204; a redirect answers 303 with the object in its query.
            let redirect = try Self.signedFields(
                [["starts-with", "$key", ""], ["success_action_redirect": "https://app.example/done"]], credentials: server.root,
                extra: [("key", "r.bin"), ("success_action_redirect", "https://app.example/done")], bucket: "uploads")
            let redirected = try await Self.post(server.endpoint, bucket: "uploads", PostForm(fields: redirect, file: [1]))
            #expect(redirected.status == 303)
            #expect(redirected.header("Location")?.hasPrefix("https://app.example/done?bucket=uploads&key=r.bin&etag=") == true)
        }
    }
}
