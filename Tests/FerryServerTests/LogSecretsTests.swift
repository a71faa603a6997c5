import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import JWTKit
import Testing

@Suite("Secrets never reach the log", .serialized, .timeLimit(.minutes(10)))
struct LogSecretsTests {
    @Test("a debug-level run with keys, session tokens, presigned URLs, uploads and webhooks logs none of their secrets")
    func debugLogHasNoSecrets() async throws {
        let data = TemporaryDirectory.make("ferry-log-secrets")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let rootSecret = "root-secret-never-logged-0123456789"
        let webhookSecret = "webhook-secret-never-logged-9876543210"
        let log = data + "/serve.log"
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server",
            arguments: [
                "--log-level", "debug", "--webhook-url", "http://hook-user:hook-password-never-logged@127.0.0.1:9/hook?token=hook-token-never-logged",
            ],
            environment: [
                "FERRY_ACCESS_KEY_ID": "FKIALOGTEST00000", "FERRY_SECRET_ACCESS_KEY": rootSecret,
                "FERRY_WEBHOOK_SECRET": webhookSecret,
            ],
            logFile: log)
        let endpoint = URL(string: server.endpoint)!
        let root = Credentials(accessKeyId: "FKIALOGTEST00000", secretAccessKey: rootSecret)
        var secrets = [rootSecret, webhookSecret, "hook-password-never-logged", "hook-token-never-logged"]

        // Keys, temporary credentials and upload credentials, used for real.
        let media = MediaServiceClient(endpoint: endpoint, credentials: root)
        let key = try await media.createAccessKey(policy: .fullAccess, description: "log test")
        let session = try await media.assumeRole(durationSeconds: 900)
        secrets += [key.secretAccessKey, session.secretAccessKey, try #require(session.sessionToken)]
        let ticket = try await media.createUploadVideo(.init(title: "Log", fileName: "log.mp4"))
        secrets += [ticket.auth.accessKeySecret, ticket.auth.securityToken]
        let uploader = try ticket.objectStorageClient()
        let file = data + "/clip.mp4"
        try Data(repeating: 7, count: 100_000).write(to: URL(fileURLWithPath: file))
        let upload = try await uploader.upload(
            file: URL(fileURLWithPath: file), bucket: ticket.address.bucket, key: ticket.address.fileName)
        _ = try await upload.result

        // Signed requests of each kind, with their signatures noted.
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: session.sigV4)
        #expect(try await s3.createBucket("logged").status == 200)
        #expect(try await s3.put("logged", "k", [1, 2, 3]).status == 200)
        let presigned = try S3TestClient(endpoint: server.endpoint, credentials: key.sigV4).presignedURL("GET", "/logged/k")
        #expect(try await S3TestClient.fetchRaw("GET", presigned).status == 200)
        let query = URLComponents(string: presigned)?.queryItems ?? []
        secrets += query.filter { $0.name == "X-Amz-Signature" }.compactMap(\.value)
        let bad = S3TestClient(
            endpoint: server.endpoint,
            credentials: SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: "wrong-secret-also-never-logged"))
        #expect(try await bad.put("logged", "x", [1]).status == 403)
        secrets.append("wrong-secret-also-never-logged")

        // A signing key and playback tokens, valid and refused.
        let signing = try await media.createSigningKey()
        let keys = await JWTKeyCollection().add(
            ecdsa: try ES256PrivateKey(pem: signing.privateKey), kid: JWKIdentifier(string: signing.keyId))
        let token = try await SignedPlaybackTests.token(keys, kid: signing.keyId, video: ticket.id)
        let play = server.endpoint + "/_ferry/play/\(ticket.id)/master.m3u8?token="
        #expect(try await S3TestClient.fetch(play + token).status == 404)
        #expect(try await S3TestClient.fetch(play + token + "x").status == 403)
        secrets += [token, String(try #require(token.split(separator: ".").last))]
        secrets += signing.privateKey.split(separator: "\n").dropFirst().prefix(1).map(String.init)

        // Console sign-ins refused: a secret pasted into the access key id field, and a wrong secret for a real key.
        let sessionURL = server.endpoint + "/_ferry/console/session"
        for (id, secret) in [(rootSecret, rootSecret), ("FKIALOGTEST00000", "wrong-console-secret-never-logged")] {
            let body = try JSONSerialization.data(withJSONObject: ["AccessKeyId": id, "SecretAccessKey": secret])
            let reply = try await S3TestClient.fetchRaw(
                "POST", sessionURL, headers: [("Content-Type", "application/json")], body: [UInt8](body))
            #expect(reply.status == 401)
        }
        secrets.append("wrong-console-secret-never-logged")

        await server.stop()
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("debug"), "the log was written at debug level")
        #expect(text.contains("request"), "requests were logged")
        for secret in secrets {
            #expect(!text.contains(secret), "the log contains a secret or token: \(secret.prefix(6))…")
        }
    }
}
