import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// awscli with temporary credentials from the media service's AssumeRole (AWS_SESSION_TOKEN set).
@Suite("awscli with AssumeRole credentials", .serialized, .timeLimit(.minutes(10)))
struct AWSCLISessionTokenTests {
    @Test("uploads inside the policy succeed and outside it are denied")
    func assumeRole() async throws {
        let data = TemporaryDirectory.make("ferry-sts")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let root = Credentials(accessKeyId: "FKIASTSROOT000000", secretAccessKey: "sts-root-secret-0123456789")
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server",
            environment: ["FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey])
        let endpoint = URL(string: server.endpoint)!
        try await ObjectStorageClient(endpoint: endpoint, credentials: root).createBucket("sts-cli")
        let temporary = try await MediaServiceClient(endpoint: endpoint, credentials: root).assumeRole(
            durationSeconds: 900,
            policy: AccessPolicy(statements: [.init(actions: ["s3:PutObject", "s3:GetObject"], bucket: "sts-cli", keyPrefix: "allowed/")]))
        let file = data + "/clip.bin"
        try Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: file))
        let env = [
            "AWS_ACCESS_KEY_ID": temporary.accessKeyId, "AWS_SECRET_ACCESS_KEY": temporary.secretAccessKey,
            "AWS_SESSION_TOKEN": temporary.sessionToken ?? "", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": data + "/none", "AWS_SHARED_CREDENTIALS_FILE": data + "/none", "AWS_EC2_METADATA_DISABLED": "true",
        ]
        let url = server.endpoint
        let inside = try await runBlocking {
            try PeerProcess.run("aws", ["--endpoint-url", url, "s3", "cp", file, "s3://sts-cli/allowed/clip.bin"], environment: env)
        }
        #expect(inside.status == 0, "\(inside.errorOutput)")
        let outside = try await runBlocking {
            try PeerProcess.run("aws", ["--endpoint-url", url, "s3", "cp", file, "s3://sts-cli/denied/clip.bin"], environment: env)
        }
        #expect(outside.status != 0)
        #expect(outside.errorOutput.contains("AccessDenied"), "\(outside.errorOutput)")
        let back = try await runBlocking {
            try PeerProcess.run("aws", ["--endpoint-url", url, "s3", "cp", "s3://sts-cli/allowed/clip.bin", data + "/back.bin"], environment: env)
        }
        #expect(back.status == 0)
        #expect(FileManager.default.contentsEqual(atPath: file, andPath: data + "/back.bin"))
        let stored = try await ObjectStorageClient(endpoint: endpoint, credentials: root).headObject(bucket: "sts-cli", key: "allowed/clip.bin")
        #expect(stored.size == 200_000)
        await server.stop()
    }
}
