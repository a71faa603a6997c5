import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where a `ferry upload` run is killed.
enum KillPoint: CustomStringConvertible {
    /// After this many seconds, whatever it is doing.
    case after(TimeInterval)
    /// Once it has printed the `started` event (the checkpoint is written, no part sent yet).
    case started
    /// Once its progress reaches this fraction of the file (1.0: the last byte is sent, the upload not completed).
    case progress(Double)
    /// Never: the run must finish.
    case never

    var description: String {
        switch self {
        case .after(let seconds): "after \(seconds) s"
        case .started: "at started"
        case .progress(let fraction): "at \(Int(fraction * 100))%"
        case .never: "never"
        }
    }
}

@Suite("Torture: ferry upload killed with SIGKILL and run again", .serialized, .timeLimit(.minutes(20)))
struct ClientKillTests {
    static let partSize = 5_242_880

    /// Runs `ferry upload …` and kills it with SIGKILL at `point`.
    static func run(_ arguments: [String], home: String, killAt point: KillPoint) async throws -> CapturedRun {
        try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
            process.arguments = arguments
            var env = ProcessInfo.processInfo.environment
            for name in ["FERRY_DATA_DIR", "FERRY_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] { env[name] = nil }
            env.merge(Torture.environment) { $1 }
            env["HOME"] = home
            process.environment = env
            switch point {
            case .after(let seconds): return try process.runCapturing(signal: SIGKILL, signalAfter: seconds)
            case .never: return try process.runCapturing()
            case .started: return try process.runCapturing(interruptWhen: { $0.contains(#""event":"started""#) }, signal: SIGKILL)
            case .progress(let fraction):
                return try process.runCapturing(
                    interruptWhen: { line in
                        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                            object["event"] as? String == "progress", let bytes = object["bytes"] as? Double,
                            let total = object["total"] as? Double, total > 0
                        else { return false }
                        return bytes / total >= fraction
                    }, signal: SIGKILL)
            }
        }
    }

    /// Parts the proxy saw stored (200), as "uploadId/partNumber".
    static func storedParts(_ log: [Entry]) -> Set<String> {
        Set(log.filter { $0.method == "PUT" && $0.outcome == "200" }.compactMap(partName))
    }

    static func partName(_ entry: Entry) -> String? {
        let items = Match.Request(method: entry.method, path: entry.path, query: entry.query).queryItems
        guard let number = items.first(where: { $0.name == "partNumber" })?.value,
            let uploadId = items.first(where: { $0.name == "uploadId" })?.value
        else { return nil }
        return uploadId + "/" + number
    }

    /// Kills runs of `arguments` at each point in turn, then runs it to completion, and checks that no rerun sent
    /// again more parts than the two a run has in flight.
    static func killAndRerun(
        _ arguments: [String], home: String, proxy: FaultProxy, points: [KillPoint]
    ) async throws -> CapturedRun {
        for point in points + [.never] {
            let storedBefore = storedParts(proxy.log)
            let logged = proxy.log.count
            let run = try await run(arguments, home: home, killAt: point)
            let sent = proxy.log.dropFirst(logged).filter { $0.method == "PUT" }.compactMap(partName)
            let resent = sent.filter { storedBefore.contains($0) }
            #expect(resent.count <= 2, "killed \(point): the next run sent \(resent.count) stored parts again: \(resent)")
            if case .never = point {
                #expect(run.status == 0, "\(run.errorOutput)")
                return run
            }
            #expect(run.status == -1 || run.status == 9 || run.status == 137 || run.status == 0, "killed \(point): \(run.status)")
            // Let requests the proxy still holds reach the server before the next run starts.
            try await Task.sleep(for: .milliseconds(300))
        }
        throw TortureError("unreachable")
    }

    static func withServer<T: Sendable>(_ body: @Sendable (FerryExecutable.Server, FaultProxy, String) async throws -> T) async throws -> T {
        let data = TemporaryDirectory.make("ferry-torture-client")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server", arguments: ["--min-part-size", "1024", "--media-workers", "0"],
            environment: Torture.environment)
        let proxy = try await FaultProxy.start(upstream: server.endpoint)
        do {
            let result = try await body(server, proxy, data)
            try await proxy.shutdown()
            await server.stop()
            return result
        } catch {
            try? await proxy.shutdown()
            await server.stop()
            throw error
        }
    }

    static func makeFile(_ path: String, size: Int, seed: UInt64) throws -> [UInt8] {
        var random = SeededGenerator(seed: seed)
        let bytes = Torture.randomBytes(size, using: &random)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return bytes
    }

    @Test("object upload: killed before it starts, while creating the upload, before the first part, mid-way and after the last byte; each rerun continues, and one upload is left, completed")
    func objectUpload() async throws {
        let seed = tortureSeed()
        print("ClientKillTests.objectUpload seed \(seed)")
        try await Self.withServer { server, proxy, data in
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: Torture.root)
            try await s3.createBucket("kills")
            let bytes = try Self.makeFile(data + "/big.bin", size: 8 * Self.partSize + 12345, seed: seed)
            let home = data + "/home"
            let arguments = [
                "upload", data + "/big.bin", "--endpoint", proxy.endpoint, "--bucket", "kills", "--key", "big.bin", "--json",
                "--parallel", "2", "--part-size", String(Self.partSize), "--record-dir", data + "/records",
            ]
            // Each part takes a while, so that kills land between parts and with parts in flight.
            proxy.inject(.delay(seconds: 0.12), when: .method("PUT") && .query(contains: "partNumber"), times: 10_000)
            // The first CreateMultipartUpload is held until after the client is killed; the server then creates an
            // upload that no checkpoint names.
            proxy.inject(.delay(seconds: 1.0), when: .method("POST") && .query(contains: "uploads"), times: 1)
            var random = SeededGenerator(seed: seed)
            let points: [KillPoint] = [
                .after(0.6), .after(0.02), .started, .progress(Double.random(in: 0.2...0.5, using: &random)),
                .progress(Double.random(in: 0.6...0.9, using: &random)), .progress(1.0),
            ]
            let last = try await Self.killAndRerun(arguments, home: home, proxy: proxy, points: points)
            #expect(last.output.contains(#""event":"completed""#))
            #expect(try await s3.get("kills", "big.bin").body == bytes)
            // No upload was left open: not the one created for the killed first run, not any other.
            #expect(try await Torture.openUploads(s3, bucket: "kills").isEmpty)
            let creates = proxy.log.filter { $0.method == "POST" && $0.query.contains("uploads") }
            print("ClientKillTests.objectUpload: \(creates.count) CreateMultipartUpload for \(points.count + 1) runs")
            #expect(Torture.files(under: data + "/records").filter { !$0.hasPrefix(".") }.isEmpty)
        }
    }

    @Test("media upload: killed while the video is being created and mid-upload; the reruns finish the same video, and there is exactly one")
    func mediaUpload() async throws {
        let seed = tortureSeed()
        print("ClientKillTests.mediaUpload seed \(seed)")
        try await Self.withServer { server, proxy, data in
            let bytes = try Self.makeFile(data + "/clip.mp4", size: 6 * Self.partSize + 777, seed: seed)
            let home = data + "/home"
            let arguments = [
                "upload", data + "/clip.mp4", "--endpoint", proxy.endpoint, "--json", "--parallel", "2",
                "--part-size", String(Self.partSize), "--record-dir", data + "/records",
            ]
            proxy.inject(.delay(seconds: 0.12), when: .method("PUT") && .query(contains: "partNumber"), times: 10_000)
            // CreateUploadVideo reaches the service only after the client was killed: the video exists, no journal
            // names it.
            proxy.inject(.delay(seconds: 1.0), when: .path(contains: "CreateUploadVideo"), times: 1)
            let last = try await Self.killAndRerun(
                arguments, home: home, proxy: proxy, points: [.after(0.6), .started, .progress(0.5), .progress(1.0)])
            let media = try #require(last.output.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.first { $0["event"] as? String == "media" })
            let videoId = try #require(media["VideoId"] as? String)
            let client = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: Torture.root.accessKeyId, secretAccessKey: Torture.root.secretAccessKey))
            let (videos, total) = try await client.listVideos()
            #expect(total == 1, "one file became \(total) videos: \(videos.map(\.status))")
            #expect(videos.first?.videoId == videoId)
            #expect(videos.first?.status == "UploadSucc")
            let source = try await client.getMezzanineInfo(videoId: videoId)
            #expect(try await S3TestClient.fetch(source.fileURL).body == bytes)
            let creates = proxy.log.filter { $0.path.contains("CreateUploadVideo") }.count
            print("ClientKillTests.mediaUpload: \(creates) CreateUploadVideo for 5 runs, 1 video")
        }
    }
}
