import Crypto
import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Three stateless `ferry serve` nodes over one SeaweedFS and one PostgreSQL, behind HAProxy with the repository's
/// configuration: every request may reach any node.
struct ScaleOutCluster {
    let seaweed: SeaweedFSServer
    let postgres: PostgresServer
    let nodes: [FerryExecutable.Server]
    let proxy: HAProxyServer
    let data: String
    static let root = SigV4Credentials(accessKeyId: "FKIASCALEOUT00000", secretAccessKey: "scale-out-secret-0123456789")

    static func start(nodes count: Int = 3, environment extra: [String: String] = [:]) async throws -> ScaleOutCluster {
        let data = TemporaryDirectory.make("ferry-scale-out")
        let backends = try await SharedBackends.start(bucket: "ferry-cluster", prefix: "c1/")
        let (seaweed, postgres) = (backends.seaweed, backends.postgres)
        var nodes: [FerryExecutable.Server] = []
        do {
            for index in 0..<count {
                nodes.append(
                    try await FerryExecutable.Server.start(
                        dataDirectory: data + "/node\(index + 1)", arguments: backends.serveArguments,
                        environment: backends.serveEnvironment.merging(extra) { $1 }.merging([
                            "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey,
                        ]) { $1 }, logFile: data + "/node\(index + 1).log"))
            }
            let proxy = try await HAProxyServer.start(nodes: nodes.map(\.port))
            return ScaleOutCluster(seaweed: seaweed, postgres: postgres, nodes: nodes, proxy: proxy, data: data)
        } catch {
            // Nothing started for the test outlives it.
            for node in nodes { await node.stop(signal: SIGKILL) }
            await backends.destroy()
            try? FileManager.default.removeItem(atPath: data)
            throw error
        }
    }

    func stop() async {
        await proxy.stop()
        // Killed, not asked: a node whose catalog went away and came back did not exit on SIGTERM (seen once).
        for node in nodes { await node.stop(signal: SIGKILL) }
        await seaweed.destroy()
        await postgres.destroy()
        try? FileManager.default.removeItem(atPath: data)
    }

    /// A test client of one node, or of the load balancer.
    func client(_ endpoint: String) -> S3TestClient { S3TestClient(endpoint: endpoint, credentials: Self.root) }

    /// The engine, through the load balancer.
    func engine(retry: RetryPolicy = RetryPolicy()) -> ObjectStorageClient {
        var configuration = ObjectStorageClient.Configuration()
        configuration.retryPolicy = retry
        return ObjectStorageClient(
            endpoint: URL(string: proxy.endpoint)!,
            credentials: Credentials(accessKeyId: Self.root.accessKeyId, secretAccessKey: Self.root.secretAccessKey),
            configuration: configuration)
    }
}

@Suite("Scale-out: three nodes over SeaweedFS and PostgreSQL behind HAProxy", .serialized, .timeLimit(.minutes(20)))
struct ScaleOutTests {
    static func md5(_ url: URL) throws -> Insecure.MD5.Digest {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = Insecure.MD5()
        while let chunk = try handle.read(upToCount: 4 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hasher.finalize()
    }

    @Test("parts of one upload sent to different nodes complete on a third; writes on one node are seen by the others")
    func anyNodeServesAnyRequest() async throws {
        let cluster = try await ScaleOutCluster.start()
        do {
            let nodes = cluster.nodes.map { cluster.client($0.endpoint) }
            #expect(try await nodes[0].createBucket("shared").status == 200)
            let uploadId = try await nodes[0].createMultipartUpload("shared", "video.mp4")
            let parts = (0..<3).map { index in [UInt8](repeating: UInt8(index + 1), count: index == 2 ? 1000 : 5 << 20) }
            var etags: [(Int, String)] = []
            for (index, part) in parts.enumerated() {
                let reply = try await nodes[(index + 1) % 3].uploadPart("shared", "video.mp4", uploadId: uploadId, number: index + 1, part)
                #expect(reply.status == 200, "\(reply.text)")
                etags.append((index + 1, reply.header("etag") ?? ""))
            }
            let listed = try await nodes[2].send("GET", S3TestClient.path("shared", "video.mp4"), query: [("uploadId", uploadId)])
            #expect(listed.text.components(separatedBy: "<Part>").count - 1 == 3)
            let completed = try await nodes[2].complete("shared", "video.mp4", uploadId: uploadId, xml: S3TestClient.completeXML(etags))
            #expect(completed.status == 200, "\(completed.text)")
            // The Complete retried on another node finds the completion.
            let retried = try await nodes[1].complete("shared", "video.mp4", uploadId: uploadId, xml: S3TestClient.completeXML(etags))
            #expect(retried.status == 200, "\(retried.text)")
            for node in nodes {
                #expect(try await node.get("shared", "video.mp4").body == parts.flatMap { $0 })
            }
            // An overwrite on one node, seen by the others; a delete on a third, seen by all.
            #expect(try await nodes[0].put("shared", "note.txt", Array("one".utf8)).status == 200)
            #expect(try await nodes[1].put("shared", "note.txt", Array("two".utf8)).status == 200)
            #expect(try await nodes[2].get("shared", "note.txt").text == "two")
            #expect(try await nodes[2].send("DELETE", S3TestClient.path("shared", "note.txt")).status == 204)
            #expect(try await nodes[0].get("shared", "note.txt").status == 404)
            // A listing on any node shows the object.
            let listing = try await nodes[1].send("GET", S3TestClient.path("shared"), query: [("list-type", "2")])
            #expect(listing.text.contains("<Key>video.mp4</Key>"))
            // The store's key never reaches a node's log.
            for index in 1...3 {
                let log = try String(contentsOfFile: cluster.data + "/node\(index).log", encoding: .utf8)
                #expect(log.contains("listening"))
                #expect(!log.contains(SeaweedFSServer.credentials.secretAccessKey))
            }
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    @Test("a 1 GiB engine upload through HAProxy spreads its parts over three nodes, survives SIGKILL of one, and completes byte-identical")
    func engineUploadSurvivesANodeKill() async throws {
        let cluster = try await ScaleOutCluster.start()
        do {
            #expect(try await cluster.client(cluster.proxy.endpoint).createBucket("big").status == 200)
            let file = try makeRandomFile(size: 1 << 30)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            let engine = cluster.engine(retry: RetryPolicy(maxRetryCount: 20, baseDelay: .milliseconds(200), maxDelay: .seconds(2)))
            var request = ResumableUploadRequest(bucket: "big", key: "one-gib.bin", fileURL: file)
            request.partSize = 8 << 20
            let upload = try await engine.upload(request)
            for await event in upload.events {
                if case .progress(let progress) = event, progress.totalBytesSent >= 300 << 20 { break }
            }
            await cluster.nodes[1].stop(signal: SIGKILL)
            let result = try await upload.result
            #expect(result.size == 1 << 30)
            let served = try await cluster.proxy.successfulResponses()
            #expect(served.count == 3 && served.values.allSatisfy { $0 > 0 }, "2xx responses by node: \(served)")

            // Read back through a surviving node, streamed to disk, and compared by MD5.
            let back = file.deletingLastPathComponent().appendingPathComponent("back.bin")
            try await engine.download(bucket: "big", key: "one-gib.bin", to: back)
            #expect(try Self.md5(back) == Self.md5(file))
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    @Test("PostgreSQL stopped as a crash would for a few seconds mid-upload: requests fail retryably, and the upload completes byte-identical once it is back")
    func catalogOutage() async throws {
        let cluster = try await ScaleOutCluster.start(nodes: 2)
        do {
            let proxy = cluster.client(cluster.proxy.endpoint)
            #expect(try await proxy.createBucket("pgo").status == 200)
            let kept = [UInt8](repeating: 7, count: 100_000)
            #expect(try await proxy.put("pgo", "kept.bin", kept).status == 200)
            let file = try makeRandomFile(size: 96 << 20)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            // The nodes' connections to PostgreSQL come back some seconds after it does (about 14 s here): the engine is
            // given a minute of retries.
            let engine = cluster.engine(retry: RetryPolicy(maxRetryCount: 120, baseDelay: .milliseconds(200), maxDelay: .seconds(1)))
            var request = ResumableUploadRequest(bucket: "pgo", key: "during-outage.bin", fileURL: file)
            request.partSize = 5 << 20
            request.concurrency = 2
            let upload = try await engine.upload(request)
            for await event in upload.events {
                if case .progress(let progress) = event, progress.totalBytesSent >= 20 << 20 { break }
            }
            await cluster.postgres.stopServer(mode: "immediate")
            // A node asked directly while the catalog is down answers with a retryable status, never a success.
            let refused = try await cluster.client(cluster.nodes[0].endpoint).put("pgo", "refused.bin", [1, 2, 3])
            #expect(refused.status == 503 && refused.errorCode == "SlowDown", "\(refused.status) \(refused.text)")
            try await Task.sleep(for: .seconds(3))
            try await cluster.postgres.startServer()
            let result = try await upload.result
            #expect(result.size == 96 << 20)
            let back = file.deletingLastPathComponent().appendingPathComponent("back.bin")
            try await engine.download(bucket: "pgo", key: "during-outage.bin", to: back)
            #expect(try Self.md5(back) == Self.md5(file))
            #expect(try await proxy.get("pgo", "kept.bin").body == kept)
            #expect(try await proxy.get("pgo", "refused.bin").status == 404)
            // After the outage each node still exits when asked: within the shutdown bound (30 s for requests in
            // flight, then cancellation, then at most 10 s more). A node that reached the bound says which services
            // were still running; that line is printed.
            for (index, node) in cluster.nodes.enumerated() {
                let asked = ContinuousClock.now
                let graceful = await node.stopGracefully(within: .seconds(45))
                let log = (try? String(contentsOfFile: cluster.data + "/node\(index + 1).log", encoding: .utf8)) ?? ""
                #expect(
                    graceful,
                    """
                    node \(index + 1) did not exit within 45 s of SIGTERM after the outage; the end of its log:
                    \(log.split(separator: "\n").suffix(40).joined(separator: "\n"))
                    """)
                let overrun = log.split(separator: "\n").filter { $0.contains("shutdown did not finish") }
                print("node \(index + 1) exited \(ContinuousClock.now - asked) after SIGTERM. \(overrun.joined())")
            }
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    @Test("20 UploadQueue uploads with STS through HAProxy, one node killed mid-run: each file is one video, processed once, one FileUploadComplete each")
    func queueUploadsAcrossNodes() async throws {
        try await HTTPReceiver.with { receiver in
            let cluster = try await ScaleOutCluster.start(
                environment: ["FERRY_WEBHOOK_URL": receiver.url("/events"), "FERRY_WEBHOOK_SECRET": "scale-out-webhook-secret"])
            do {
                let directory = TemporaryDirectory.make("ferry-scale-queue")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let video = try await MediaFixtures.make(.landscape480, seconds: 2, in: directory)
                let root = Credentials(
                    accessKeyId: ScaleOutCluster.root.accessKeyId, secretAccessKey: ScaleOutCluster.root.secretAccessKey)
                let endpoint = URL(string: cluster.proxy.endpoint)!
                let media = MediaServiceClient(endpoint: endpoint, credentials: root)
                let sts = try await media.assumeRole(durationSeconds: 3600)

                var configuration = UploadQueue.Configuration()
                configuration.recordDirectoryPath = URL(fileURLWithPath: directory + "/records")
                configuration.objectStorage.retryPolicy = RetryPolicy(maxRetryCount: 30, baseDelay: .milliseconds(100), maxDelay: .seconds(1))
                configuration.maxConcurrentUploads = 4
                configuration.transcode = false
                let queue = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: sts), configuration: configuration)
                let (log, collector) = QueueLog.collect(queue)
                var files: [URL] = []
                for index in 0..<20 {
                    let copy = URL(fileURLWithPath: directory + "/clip-\(index).mp4")
                    try FileManager.default.copyItem(atPath: video, toPath: copy.path)
                    files.append(copy)
                    _ = await queue.addFile(copy, info: MediaInfo(title: "clip \(index)"))
                }
                await queue.start()
                try await log.wait("five uploads", timeout: .seconds(120), until: { _ in log.finished().count >= 5 })
                await cluster.nodes[2].stop(signal: SIGKILL)
                try await log.wait("every upload", timeout: .seconds(300), until: { _ in log.finished().count == 20 })
                collector.cancel()

                let videoIds = Set(log.finished().compactMap { $0.1.videoId })
                #expect(videoIds.count == 20)
                // Every video is processed (probe and cover, no transcode) to Normal, by the surviving nodes.
                let deadline = ContinuousClock.now + .seconds(240)
                var statuses: [String: String] = [:]
                while ContinuousClock.now < deadline {
                    for id in videoIds where statuses[id] != "Normal" {
                        statuses[id] = try? await media.getVideoInfo(videoId: id).status
                    }
                    if statuses.values.filter({ $0 == "Normal" }).count == 20 { break }
                    try await Task.sleep(for: .milliseconds(500))
                }
                #expect(statuses.values.filter { $0 == "Normal" }.count == 20, "\(statuses)")
                let listed = try await media.listVideos(pageNo: 1, pageSize: 100)
                #expect(listed.videos.count == 20, "one video per file, no duplicates")

                // Events: one FileUploadComplete and one SnapshotComplete per video, counted by event id (delivery is at
                // least once: a repeat carries the same id). When the killed node held the delivery lease, another node
                // takes delivery over once the lease (30 s) expires.
                var completions: [String: Set<String>] = [:]
                var snapshots: [String: Set<String>] = [:]
                let eventsDeadline = ContinuousClock.now + .seconds(120)
                repeat {
                    try await Task.sleep(for: .seconds(1))
                    completions = [:]
                    snapshots = [:]
                    for request in await receiver.recorder.requests where request.path == "/events" {
                        guard let event = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
                            let id = event["id"] as? String, let type = event["type"] as? String,
                            let videoId = (event["payload"] as? [String: Any])?["VideoId"] as? String
                        else { continue }
                        if type == "FileUploadComplete" { completions[videoId, default: []].insert(id) }
                        if type == "SnapshotComplete" { snapshots[videoId, default: []].insert(id) }
                    }
                } while (Set(completions.keys) != videoIds || Set(snapshots.keys) != videoIds) && ContinuousClock.now < eventsDeadline
                #expect(Set(completions.keys) == videoIds)
                #expect(completions.values.allSatisfy { $0.count == 1 }, "\(completions)")
                #expect(Set(snapshots.keys) == videoIds)
                #expect(snapshots.values.allSatisfy { $0.count == 1 }, "\(snapshots)")
            } catch {
                await cluster.stop()
                throw error
            }
            await cluster.stop()
        }
    }
}
