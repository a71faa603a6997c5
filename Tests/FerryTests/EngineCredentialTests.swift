import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Hands out temporary credentials; after `expireAfter` calls the token it hands out has expired, until `renew`.
final class ExpiringTokens: CredentialProvider, @unchecked Sendable {
    // Every access to the mutable state holds `lock`.
    private let lock = NSLock()
    private let server: TestServer
    private var calls = 0
    private let expireAfter: Int
    private let refreshes: Bool
    private var renewed = false

    init(server: TestServer, expireAfter: Int, refreshes: Bool) {
        self.server = server
        self.expireAfter = expireAfter
        self.refreshes = refreshes
    }

    static let policy = AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "tokens")])

    func issue(validFor seconds: TimeInterval) -> Credentials {
        let issued = server.server.credentials.tokens.issue(
            parent: server.root.accessKeyId, policy: Self.policy, expiration: Date().addingTimeInterval(seconds))
        return Credentials(
            accessKeyId: issued.accessKeyId, secretAccessKey: issued.secretAccessKey, sessionToken: issued.sessionToken,
            expiration: Date().addingTimeInterval(seconds))
    }

    private var expired: Credentials?

    func credentials() async throws -> Credentials {
        let (call, renewed) = lock.withLock {
            calls += 1
            return (calls, self.renewed)
        }
        if call <= expireAfter || renewed { return issue(validFor: 600) }
        // The token given out now has already expired; a provider that refreshes hands out a fresh one next time.
        if refreshes && call > expireAfter + 1 { return issue(validFor: 600) }
        return lock.withLock {
            if expired == nil { expired = issue(validFor: -1) }
            return expired!
        }
    }
}

@Suite("Engine: expiring credentials", .timeLimit(.minutes(10)))
struct EngineCredentialTests {
    static let mib = 1024 * 1024

    @Test("a session token that expires mid-upload is refreshed from the provider and the upload completes")
    func refreshes() async throws {
        let directory = TemporaryDirectory.make("ferry-refresh")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 26 * Self.mib, in: directory)
        try await TestServer.with { server in
            try await server.client().createBucket("tokens")
            var configuration = ObjectStorageClient.Configuration()
            configuration.transport = AsyncHTTPClientTransport()
            let provider = ExpiringTokens(server: server, expireAfter: 3, refreshes: true)
            let client = ObjectStorageClient(endpoint: URL(string: server.endpoint)!, credentialProvider: provider, configuration: configuration)
            var request = ResumableUploadRequest(bucket: "tokens", key: "refreshed.bin", fileURL: file)
            request.concurrency = 1
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            let result = try await upload.result
            await collector.value
            #expect(result.size == Int64(26 * Self.mib))
            #expect(log.count { if case .credentialsExpired = $0 { true } else { false } } == 0)
            let back = URL(fileURLWithPath: directory + "/back")
            try await server.engine().download(bucket: "tokens", key: "refreshed.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        }
    }

    @Test("with no fresher credentials the upload pauses with credentialsExpired; resume(with:) completes it")
    func pausesUntilResumedWithCredentials() async throws {
        let directory = TemporaryDirectory.make("ferry-expired")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 26 * Self.mib, in: directory)
        try await TestServer.with { server in
            try await server.client().createBucket("tokens")
            let provider = ExpiringTokens(server: server, expireAfter: 3, refreshes: false)
            let client = ObjectStorageClient(endpoint: URL(string: server.endpoint)!, credentialProvider: provider)
            var request = ResumableUploadRequest(bucket: "tokens", key: "expired.bin", fileURL: file)
            request.concurrency = 1
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            try await log.waitForPause()
            #expect(log.pauses > 0, "the upload did not pause")
            #expect(log.count { if case .credentialsExpired = $0 { true } else { false } } == 1)
            // The upload waits; its multipart upload is still open on the server.
            #expect(try await server.engine().listMultipartUploads(bucket: "tokens").count == 1)
            await upload.resume(with: provider.issue(validFor: 600))
            let result = try await upload.result
            await collector.value
            #expect(result.size == Int64(26 * Self.mib))
            let progress = log.progress
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.totalBytesSent <= $1.totalBytesSent })
            #expect(progress.last?.totalBytesSent == result.size)
        }
    }
}
