import Ferry
import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// GetServiceStatus on a server in this process: who may ask, and what it reports.
@Suite("Service status: GetServiceStatus and its series", .timeLimit(.minutes(10)))
struct ServiceStatusTests {
    /// Sends `method /_ferry/v1/GetServiceStatus` signed for the media API with `credentials`.
    static func status(
        _ server: TestServer, _ credentials: SigV4Credentials? = nil, method: String = "POST"
    ) async throws -> S3TestClient.Reply {
        let body: [UInt8] = method == "POST" ? Array("{}".utf8) : []
        let signer = SigV4Signer(credentials: credentials ?? server.root, region: "us-east-1", service: "ferry")
        let path = "/_ferry/v1/GetServiceStatus"
        var fields = [(name: "host", value: "127.0.0.1:\(server.port)")]
        if method == "POST" { fields.append((name: "content-type", value: "application/json")) }
        let headers = signer.sign(
            method: method, path: path, query: [], headers: fields, payloadHash: SigV4.hexSHA256(body), date: Date()).headers
        return try await server.client().sendRaw(method, path, headers: headers, body: body)
    }

    static func media(_ server: TestServer) -> MediaServiceClient {
        MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
    }

    /// GetServiceStatus as the root key, asked again (for up to 60 s) until both backends answered within the
    /// status's two seconds, which a loaded machine can miss.
    static func answeredStatus(
        _ server: TestServer
    ) async throws -> (reply: S3TestClient.Reply, status: MediaContract.ServiceStatusAnswer) {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let reply = try await status(server)
            let status = try MediaContract.decode(MediaContract.ServiceStatusAnswer.self, from: Data(reply.body))
            let answered = status.catalog.healthy && status.store.healthy && status.jobQueue != nil && status.webhookBacklog != nil
            if answered || ContinuousClock.now > deadline { return (reply, status) }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test("the root key gets this node, the queue depth with a queued job, the webhook backlog with a pending event, both backends healthy and the disk")
    func rootSeesTheService() async throws {
        try await TestServer.with(configure: { $0.mediaProcessing.workers = 0 }) { server in
            let before = try await Self.answeredStatus(server).status
            #expect(before.jobQueue == MediaContract.JobQueueStatus(queued: 0, running: 0, failed: 0))
            #expect(before.webhookBacklog == MediaContract.WebhookBacklogStatus(pending: 0))

            let catalog = server.server.mediaCatalog
            try await catalog.enqueue([MediaJob(videoId: "v-status", kind: .probe, runAt: Date().addingTimeInterval(-30))])
            // One not due for an hour (as a first stream's retirement waits): scheduled, not queued.
            try await catalog.enqueue([MediaJob(videoId: "v-later", kind: .retireFirstStream, runAt: Date().addingTimeInterval(3600))])
            let event = WebhookEvent(
                id: "evt-status", type: .fileUploadComplete, payload: WebhookPayload(videoId: "v-status", size: 1),
                createdAt: Date().addingTimeInterval(-20), attempts: 0)
            try await catalog.insertWebhookEvent(event, body: Array("{}".utf8))

            let (reply, status) = try await Self.answeredStatus(server)
            #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
            #expect(status.version == FerryCoreVersion.string)
            #expect(status.node == server.server.node)
            let node = try #require(status.nodes.first { $0.name == server.server.node }, "\(status.nodes)")
            #expect(status.nodes.count == 1)
            #expect(node.role == "all" && node.version == FerryCoreVersion.string && !node.stale)
            let queue = try #require(status.jobQueue)
            #expect(queue.queued == 1 && queue.scheduled == 1 && queue.running == 0 && queue.failed == 0)
            #expect((queue.oldestQueuedAgeSeconds ?? 0) >= 29)
            let webhooks = try #require(status.webhookBacklog)
            #expect(webhooks.pending == 1 && (webhooks.oldestPendingAgeSeconds ?? 0) >= 19)
            #expect(status.catalog.healthy && status.catalog.error == nil && status.catalog.latencyMs >= 0)
            #expect(status.store.healthy && status.store.error == nil)
            let disk = try #require(status.diskFree)
            #expect(disk.freeBytes > 0 && disk.freeBytes <= disk.totalBytes)
            #expect(disk.reserveBytes == 64 << 20 && !disk.refusesUploads)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])
            #expect(object["RequestId"] is String)

            // A signed GET answers the same.
            let viaGet = try await Self.status(server, method: "GET")
            #expect(viaGet.status == 200, "\(String(decoding: viaGet.body, as: UTF8.self))")
            let again = try MediaContract.decode(MediaContract.ServiceStatusAnswer.self, from: Data(viaGet.body))
            #expect(again.jobQueue?.queued == 1 && again.nodes.map(\.name) == [server.server.node])
        }
    }

    @Test("a key that is not the root key is refused with Forbidden, even one allowed every media action; other methods are 405")
    func othersAreRefused() async throws {
        try await TestServer.with(configure: { $0.mediaProcessing.workers = 0 }) { server in
            let key = try await Self.media(server).createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["media:*", "s3:*"])]), description: "not root")
            let reply = try await Self.status(
                server, SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey))
            #expect(reply.status == 403)
            let refusal = try MediaContract.decode(MediaContract.ErrorAnswer.self, from: Data(reply.body))
            #expect(refusal.code == "Forbidden")
            #expect(!String(decoding: reply.body, as: UTF8.self).contains("Nodes"))
            let get = try await Self.status(
                server, SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey), method: "GET")
            #expect(get.status == 403)
            // Unsigned: refused before anything is read.
            let unsigned = try await S3TestClient.fetch(server.endpoint + "/_ferry/v1/GetServiceStatus")
            #expect(unsigned.status == 403 || unsigned.status == 401)
            let put = try await Self.status(server, method: "PUT")
            #expect(put.status == 405)
            let below = try await S3TestClient.fetchRaw("POST", server.endpoint + "/_ferry/v1/GetServiceStatus/x")
            #expect(below.status == 404)
        }
    }

    @Test("/metrics reports the nodes with a fresh heartbeat and the data directory's free bytes")
    func statusSeries() async throws {
        try await TestServer.with(configure: { $0.mediaProcessing.workers = 0 }) { server in
            // The catalog may miss a scrape's two seconds on a loaded machine: the series is set by one it answered in.
            let deadline = ContinuousClock.now + .seconds(60)
            var text = ""
            repeat {
                if !text.isEmpty { try await Task.sleep(for: .milliseconds(200)) }
                text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            } while PrometheusText.sample(text, "ferry_nodes_seen", [:]) == nil && ContinuousClock.now < deadline
            let nodes = text.split(separator: "\n").first { $0.hasPrefix("ferry_nodes_seen ") }
            #expect(nodes.flatMap { Double($0.split(separator: " ")[1]) } == 1, "\(text)")
            let free = text.split(separator: "\n").first { $0.hasPrefix("ferry_data_dir_free_bytes ") }
                .flatMap { Double($0.split(separator: " ")[1]) }
            #expect((free ?? 0) > 0, "\(text)")
        }
    }

    @Test("/_ferry/health answers 503 while the node cannot write its blobs, 200 again once it can")
    func healthOfTheBlobStorage() async throws {
        try await TestServer.with { server in
            let health = server.endpoint + "/_ferry/health"
            #expect(try await S3TestClient.fetch(health).status == 200)
            let blobs = server.dataDirectory + "/objects/blobs"
            try FileManager.default.moveItem(atPath: blobs, toPath: blobs + ".moved")
            // An answer serves for a second.
            try await Task.sleep(for: .milliseconds(1100))
            let broken = try await S3TestClient.fetch(health)
            #expect(broken.status == 503 && broken.text == "object store unavailable\n", "\(broken.status) \(broken.text)")
            try FileManager.default.moveItem(atPath: blobs + ".moved", toPath: blobs)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await S3TestClient.fetch(health).status == 200)
        }
    }
}
