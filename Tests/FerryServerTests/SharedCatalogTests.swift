import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

@testable import FerryStorage

@Suite("Nodes sharing a PostgreSQL catalog", .serialized, .timeLimit(.minutes(10)))
struct SharedCatalogTests {
    /// Runs two in-process servers (each with its own data directory) on one PostgreSQL database.
    static func withTwoNodes<T: Sendable>(_ body: @Sendable (TestServer, TestServer) async throws -> T) async throws -> T {
        try await PostgresServer.withDatabase { url in
            let configure: @Sendable (inout FerryServerConfiguration) -> Void = { configuration in
                configuration.catalogURL = url
                configuration.rootCredentials = nil
            }
            return try await TestServer.with(configure: configure) { first in
                try await TestServer.with(configure: configure) { second in try await body(first, second) }
            }
        }
    }

    @Test("nodes started together migrate once; the second finds the first's root key and token key in the catalog")
    func sharedKeys() async throws {
        try await PostgresServer.withDatabase { url in
            var configuration = FerryServerConfiguration(dataDirectory: TemporaryDirectory.make("ferry-node"))
            configuration.catalogURL = url
            var other = configuration
            other.dataDirectory = TemporaryDirectory.make("ferry-node")
            async let a = FerryServer.open(configuration: configuration, environment: [:])
            async let b = FerryServer.open(configuration: other, environment: [:])
            let (first, second) = try await (a, b)
            #expect(first.rootCredentials == second.rootCredentials)
            #expect([first.rootCredentialsGenerated, second.rootCredentialsGenerated].filter { $0 }.count == 1)
            #expect(first.mediaCatalog is PostgresCatalog)
            #expect(try await PostgresCatalog.withConnection(url: url) { try await $0.schemaVersions() } == PostgresCatalog.migrations.map(\.version).sorted())
            // Nothing of the keys is on either node's disk.
            for node in [first, second] {
                let files = try FileManager.default.contentsOfDirectory(atPath: node.configuration.dataDirectory)
                #expect(!files.contains("root-credentials.json") && !files.contains("token-key"), "\(files)")
            }
        }
    }

    @Test("a node starting on PostgreSQL logs no warning: nothing asks for a connection before the pool runs")
    func quietStart() async throws {
        let log = LogRecorder()
        try await PostgresServer.withDatabase { url in
            try await TestServer.with(configure: { $0.catalogURL = url; $0.logger = log.logger() }) { server in
                let created = try await server.client().createBucket("quiet")
                #expect(created.status == 200)
            }
        }
        let warnings = log.records.filter { $0.level >= .warning }.map(\.message)
        #expect(warnings.isEmpty, "\(warnings)")
    }

    @Test("what one node issues and records, another serves: STS credentials, access keys, videos")
    func anyNodeAnswers() async throws {
        try await Self.withTwoNodes { first, second in
            let root = Credentials(accessKeyId: first.root.accessKeyId, secretAccessKey: first.root.secretAccessKey)
            let a = MediaServiceClient(endpoint: URL(string: first.endpoint)!, credentials: root)
            let b = MediaServiceClient(endpoint: URL(string: second.endpoint)!, credentials: root)
            // A temporary credential from the first node signs requests to the second.
            let temporary = try await a.assumeRole(durationSeconds: 900)
            let viaToken = MediaServiceClient(endpoint: URL(string: second.endpoint)!, credentials: temporary)
            let ticket = try await viaToken.createUploadVideo(.init(title: "Shared", fileName: "shared.mp4"))
            #expect(try await a.getVideoInfo(videoId: ticket.id).title == "Shared")
            // An access key made on one node works on the other; disabled on the other, it stops on the first.
            let key = try await b.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:ListVideos"])]))
            let scoped = MediaServiceClient(endpoint: URL(string: first.endpoint)!, credentials: key)
            #expect(try await scoped.listVideos().total == 0)
            try await a.disableAccessKey(key.accessKeyId)
            await #expect(throws: FerryError.self) { try await scoped.listVideos() }
            // The upload credential from the second node writes the video's key on... the second node, whose store holds
            // it, and the catalog (shared) follows.
            #expect(try await second.client(ticket.auth.credentials).put(ticket.address.bucket, ticket.address.fileName, [1, 2, 3]).status == 200)
            #expect(try await a.getVideoInfo(videoId: ticket.id).status == "UploadSucc")
            #expect(try await first.server.mediaCatalog.jobs(videoId: ticket.id).map(\.kind) == [.probe])
        }
    }
}
