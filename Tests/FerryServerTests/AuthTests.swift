import FerryCore
import FerryServer
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

@Suite("Authentication and authorization", .timeLimit(.minutes(10)))
struct AuthTests {
    @Test("a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, no signature AccessDenied")
    func rejectsBadCredentials() async throws {
        try await TestServer.inMemory { server in
            try await server.client().createBucket("auth")
            let wrongSecret = server.client(SigV4Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: "wrong"))
            let tampered = try await wrongSecret.send("GET", "/auth", query: [("list-type", "2")])
            #expect(tampered.status == 403)
            #expect(tampered.errorCode == "SignatureDoesNotMatch")
            #expect(!tampered.text.contains(server.root.secretAccessKey))
            let unknown = try await server.client(SigV4Credentials(accessKeyId: "FKIAUNKNOWN", secretAccessKey: "x"))
                .send("GET", "/auth", query: [("list-type", "2")])
            #expect(unknown.errorCode == "InvalidAccessKeyId")
            let anonymous = try await server.client().sendRaw("GET", "/auth", query: [("list-type", "2")], headers: [])
            #expect(anonymous.status == 403)
            #expect(anonymous.errorCode == "AccessDenied")
            // A Signature Version 2 URL is signed, with a mechanism Ferry does not take: InvalidRequest saying so.
            let version2 = try await server.client().sendRaw(
                "GET", "/auth/k",
                query: [("AWSAccessKeyId", server.root.accessKeyId), ("Signature", "c2lnbmF0dXJl"), ("Expires", "4102444800")],
                headers: [])
            #expect(version2.status == 400 && version2.errorCode == "InvalidRequest")
            #expect(version2.text.contains("Please use AWS4-HMAC-SHA256"))
            // A header changed after signing.
            let changed = try await server.client().send(
                "PUT", S3TestClient.path("auth", "k"), headers: [("x-amz-meta-a", "1")], body: [1],
                mutateSigned: { headers in
                    if let i = headers.firstIndex(where: { $0.name == "x-amz-meta-a" }) { headers[i].value = "2" }
                })
            #expect(changed.errorCode == "SignatureDoesNotMatch")
        }
    }

    @Test("requests signed more than 15 minutes away from the server clock are RequestTimeTooSkewed, which names both times as S3 does")
    func skew() async throws {
        try await TestServer.inMemory { server in
            let sent = Date().addingTimeInterval(-16 * 60)
            let reply = try await server.client().send("GET", "/", date: sent)
            #expect(reply.status == 403)
            #expect(reply.errorCode == "RequestTimeTooSkewed")
            #expect(reply.text.contains("<RequestTime>\(SigV4.timestamp(sent))</RequestTime>"), "\(reply.text)")
            #expect(reply.text.contains("<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>"))
            let serverTime = try #require(reply.text.firstMatch(of: /<ServerTime>([^<]*)<\/ServerTime>/)?.1)
            let told = try #require(S3Date.parseXML(String(serverTime)))
            #expect(abs(told.timeIntervalSinceNow) < 60, "\(serverTime)")
            #expect(try await server.client().send("GET", "/", date: Date().addingTimeInterval(-10 * 60)).status == 200)
        }
    }

    @Test("presigned URLs work until they expire and may not live longer than 7 days")
    func presigned() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("pre")
            try await s3.put("pre", "k", [9, 8, 7])
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let host = "127.0.0.1:\(server.port)"
            let fresh = try signer.presign(method: "GET", path: "/pre/k", query: [], host: host, expires: 60, date: Date())
            let ok = try await s3.sendRaw("GET", "/pre/k", query: fresh, headers: [])
            #expect(ok.status == 200)
            #expect(ok.body == [9, 8, 7])
            let old = try signer.presign(
                method: "GET", path: "/pre/k", query: [], host: host, expires: 60, date: Date().addingTimeInterval(-120))
            let expired = try await s3.sendRaw("GET", "/pre/k", query: old, headers: [])
            #expect(expired.status == 403)
            #expect(expired.errorCode == "AccessDenied")
            #expect(expired.text.contains("Request has expired"), "\(expired.text)")
            // Dated an hour ahead of the server's clock: not valid yet, and the answer says so rather than "expired".
            let early = try signer.presign(
                method: "GET", path: "/pre/k", query: [], host: host, expires: 60, date: Date().addingTimeInterval(3600))
            let notYet = try await s3.sendRaw("GET", "/pre/k", query: early, headers: [])
            #expect(notYet.status == 403)
            #expect(notYet.errorCode == "AccessDenied")
            #expect(notYet.text.contains("Request is not valid yet"), "\(notYet.text)")
            var tooLong = fresh
            if let i = tooLong.firstIndex(where: { $0.name == "X-Amz-Expires" }) { tooLong[i].value = "604801" }
            let rejected = try await s3.sendRaw("GET", "/pre/k", query: tooLong, headers: [])
            #expect(rejected.errorCode == "AuthorizationQueryParametersError")
            // A presigned PUT that sends its body's SHA-256 in x-amz-content-sha256 has its body checked against it.
            let put = try signer.presign(method: "PUT", path: "/pre/hashed", query: [], host: host, expires: 60, date: Date())
            let body: [UInt8] = [1, 2, 3]
            let damaged = try await s3.sendRaw(
                "PUT", "/pre/hashed", query: put, headers: [("x-amz-content-sha256", SigV4.hexSHA256([1, 2, 4]))], body: body)
            #expect(damaged.errorCode == "XAmzContentSHA256Mismatch", "\(damaged.status) \(damaged.text)")
            #expect(try await s3.get("pre", "hashed").status == 404)
            let whole = try await s3.sendRaw(
                "PUT", "/pre/hashed", query: put, headers: [("x-amz-content-sha256", SigV4.hexSHA256(body))], body: body)
            #expect(whole.status == 200, "\(whole.text)")
            #expect(try await s3.get("pre", "hashed").body == body)
        }
    }

    @Test("a root key (FERRY_ACCESS_KEY_ID) with a stored access key's id is refused at start: it would take that key's place, past its policy and quota", arguments: JobQueueImplementation.allCases)
    func rootKeyWithAStoredKeysId(_ implementation: JobQueueImplementation) async throws {
        let directory = TemporaryDirectory.make("ferry-root-conflict")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let taken = StoredAccessKey(
            accessKeyId: "FKIATAKEN0000000", secretAccessKey: "taken-secret",
            policy: AccessPolicy(statements: [.init(actions: ["s3:GetObject"])]), status: .active, description: "scoped",
            createdAt: Date())
        func start(_ url: String?) async throws {
            var configuration = FerryServerConfiguration(dataDirectory: directory + "/data")
            configuration.catalogURL = url
            func environment(_ id: String) -> [String: String] {
                ["FERRY_ACCESS_KEY_ID": id, "FERRY_SECRET_ACCESS_KEY": "root-secret"]
            }
            await #expect(throws: RootKeyConflict.self) {
                _ = try await FerryServer.open(configuration: configuration, environment: environment(taken.accessKeyId))
            }
            let server = try await FerryServer.open(configuration: configuration, environment: environment("FKIAROOT00000000"))
            #expect(server.rootCredentials.accessKeyId == "FKIAROOT00000000")
        }
        switch implementation {
        case .sqlite:
            try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
            try await SQLiteCatalog(path: directory + "/data/catalog.sqlite").insertAccessKey(taken)
            try await start(nil)
        case .postgres:
            try await PostgresServer.withDatabase { url in
                try await PostgresCatalog.withConnection(url: url) { try await $0.insertAccessKey(taken) }
                try await start(url)
            }
        }
    }

    @Test("session tokens: allowed within their policy, AccessDenied outside it, ExpiredToken after expiry")
    func sessionTokens() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("uploads")
            try await s3.createBucket("other")
            try await s3.put("uploads", "private/secret.txt", [1])
            let policy = AccessPolicy(statements: [.init(actions: ["s3:PutObject", "s3:GetObject"], bucket: "uploads", keyPrefix: "users/42/")])
            let temporary = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(600))
            let user = server.client(temporary)
            #expect(try await user.put("uploads", "users/42/movie.mp4", [1, 2]).status == 200)
            #expect(try await user.get("uploads", "users/42/movie.mp4").body == [1, 2])
            #expect(try await user.put("uploads", "users/43/movie.mp4", [1]).errorCode == "AccessDenied")
            #expect(try await user.get("uploads", "private/secret.txt").errorCode == "AccessDenied")
            #expect(try await user.put("other", "users/42/x", [1]).errorCode == "AccessDenied")
            #expect(try await user.send("DELETE", S3TestClient.path("uploads", "users/42/movie.mp4")).errorCode == "AccessDenied")
            #expect(try await user.send("GET", "/uploads", query: [("list-type", "2")]).errorCode == "AccessDenied")
            // Scopes compare bytes: a key canonically equivalent to the scope's prefix is another key, outside it.
            let accented = AccessPolicy(statements: [.init(actions: ["s3:PutObject"], bucket: "uploads", keyPrefix: "\u{E9}/")])
            let scoped = server.client(server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: accented, expiration: Date().addingTimeInterval(600)))
            #expect(try await scoped.put("uploads", "\u{E9}/ok", [1]).status == 200)
            #expect(try await scoped.put("uploads", "e\u{301}/escape", [1]).errorCode == "AccessDenied")
            #expect(AccessPolicy(statements: [.init(actions: ["s3:GetObject"], key: "\u{E9}")])
                .allows(action: "s3:GetObject", bucket: "b", key: "e\u{301}") == false)
            // Nor does another key's multipart upload open to it by the equivalent spelling of its key (hunt82): the
            // upload is another key's, not found, and the object stays as it was.
            let decomposedScope = AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "uploads", keyPrefix: "e")])
            let decomposed = server.client(server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: decomposedScope, expiration: Date().addingTimeInterval(600)))
            #expect(try await s3.put("uploads", "\u{E9}t\u{E9}", Array("owner".utf8)).status == 200)
            let ownersUpload = try await s3.createMultipartUpload("uploads", "\u{E9}t\u{E9}")
            let equivalent = S3TestClient.path("uploads", "e\u{301}te\u{301}")
            let part = try await decomposed.send(
                "PUT", equivalent, query: [("partNumber", "1"), ("uploadId", ownersUpload)], body: Array("other".utf8))
            #expect(part.errorCode == "NoSuchUpload", "\(part.status) \(part.text)")
            #expect(try await decomposed.send("GET", equivalent, query: [("uploadId", ownersUpload)]).errorCode == "NoSuchUpload")
            let complete = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>"
            #expect(try await decomposed.send(
                "POST", equivalent, query: [("uploadId", ownersUpload)], body: Array(complete.utf8)).errorCode == "NoSuchUpload")
            #expect(try await decomposed.send("DELETE", equivalent, query: [("uploadId", ownersUpload)]).errorCode == "NoSuchUpload")
            #expect(try await s3.send("GET", S3TestClient.path("uploads", "\u{E9}t\u{E9}"), query: [("uploadId", ownersUpload)]).status == 200)
            #expect(try await s3.get("uploads", "\u{E9}t\u{E9}").body == Array("owner".utf8))

            let expired = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(-1))
            let late = try await server.client(expired).put("uploads", "users/42/late", [1])
            #expect(late.status == 400)
            #expect(late.errorCode == "ExpiredToken")

            var forged = temporary
            forged.sessionToken = temporary.sessionToken!.replacingOccurrences(of: "FT1.", with: "FT1.e")
            #expect(try await server.client(forged).put("uploads", "users/42/x", [1]).errorCode == "InvalidToken")
            // The same bytes spelled otherwise (padding added) are another token, not read leniently.
            forged.sessionToken = temporary.sessionToken! + "="
            #expect(try await server.client(forged).put("uploads", "users/42/x", [1]).errorCode == "InvalidToken")
            #expect(
                ["QQ", "QR", "QQ==", "Q+", "Q/"].map { SessionTokenCodec.unbase64url($0) } == [Data("A".utf8), nil, nil, nil, nil])
            let noPolicy = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: AccessPolicy(statements: []), expiration: Date().addingTimeInterval(600))
            #expect(try await server.client(noPolicy).get("uploads", "users/42/movie.mp4").errorCode == "AccessDenied")
        }
    }
}
