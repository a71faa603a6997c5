import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

extension TestServer {
    /// A publish signature signed with the root key (or `secret`), valid for `lifetime` seconds from now.
    func publishSignature(
        lifetime: Int = 3600, secretId: String? = nil, secret: String? = nil, classId: Int? = nil,
        sourceContext: String? = nil, procedure: String? = nil
    ) -> String {
        let now = Int(Date().timeIntervalSince1970)
        return PublishSignature(
            secretId: secretId ?? root.accessKeyId, currentTimeStamp: min(now, now + lifetime - 3600), expireTime: now + lifetime,
            procedure: procedure, classId: classId, sourceContext: sourceContext
        ).sign(secretKey: secret ?? root.secretAccessKey)
    }
}

/// Collects a publish's events while it runs.
final class PublishEventLog: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var _events: [PublishEvent] = []
    var events: [PublishEvent] { lock.withLock { _events } }

    static func collect(_ task: PublishTask) -> (PublishEventLog, Task<Void, Never>) {
        let log = PublishEventLog()
        let collector = Task { for await event in task.events { log.lock.withLock { log._events.append(event) } } }
        return (log, collector)
    }

    var progress: [(sent: Int64, total: Int64)] {
        events.compactMap { if case .progress(let sent, let total) = $0 { (sent, total) } else { nil } }
    }
    var completions: [PublishResult] {
        events.compactMap { if case .completed(let result) = $0 { result } else { nil } }
    }
}

@Suite("Video publisher (TXUGCPublish)", .timeLimit(.minutes(10)))
struct VideoPublisherTests {
    @Test("published without a cover, the result carries the cover the service took from the video")
    func coverTakenFromTheVideo() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let records = TemporaryDirectory.make("ferry-publish-cover")
        defer { try? FileManager.default.removeItem(atPath: records) }
        try await TestServer.with(configure: {
            $0.mediaProcessing.workers = 1
            $0.mediaProcessing.pollInterval = .milliseconds(50)
        }) { server in
            let publisher = Self.publisher(server.endpoint, records: records)
            let task = try publisher.publish(PublishParameters(signature: server.publishSignature(), videoPath: CommandLineTests.sample))
            let result = await task.result
            #expect(result.retCode == 0, "\(result.descMsg)")
            let cover = try #require(result.coverURL)
            // The commit waits a while for the cover, then answers its URL anyway: a loaded machine may make it later.
            let deadline = ContinuousClock.now + .seconds(60)
            while try await S3TestClient.fetchRaw("HEAD", cover, headers: []).status != 200, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
            }
            let picture = try await MediaFixtures.probe(cover)
            #expect(picture.codec("video") == "mjpeg" && picture.width == 320 && picture.height == 240)
        }
    }

    @Test("a NoTranscode video the probe cannot read is published without a cover, the commit not waiting for one")
    func noCoverFromAnUnreadableVideo() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let records = TemporaryDirectory.make("ferry-publish-unreadable")
        defer { try? FileManager.default.removeItem(atPath: records) }
        let file = records + "/noise.mp4"
        try Data((0..<50_000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: file))
        try await TestServer.with(configure: {
            $0.mediaProcessing.workers = 1
            $0.mediaProcessing.pollInterval = .milliseconds(50)
        }) { server in
            // The commit comes once the probe has failed: the video is Normal (played as it is), without a picture.
            let mediaAPI = MediaServiceClient(
                endpoint: try #require(URL(string: server.endpoint)),
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            let publisher = Self.publisher(server.endpoint, records: records + "/records")
            let task = try publisher.publish(PublishParameters(
                signature: server.publishSignature(procedure: "NoTranscode"), videoPath: file))
            let result = await task.result
            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(result.coverURL == nil, "\(result.coverURL ?? "")")
            let info = try await mediaAPI.getVideoInfo(videoId: try #require(result.videoId))
            #expect(info.status == "Normal" && info.coverURL == nil, "\(info)")
        }
    }

    static let kib = 1024
    static let partSize = 256 * 1024

    static func publisher(_ endpoint: String, records: String) -> VideoPublisher {
        var configuration = VideoPublisher.Configuration()
        configuration.recordDirectory = URL(fileURLWithPath: records)
        configuration.client.transport = AsyncHTTPClientTransport()
        configuration.client.retryPolicy = RetryPolicy(
            maxRetryCount: 2, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        configuration.partSize = Int64(partSize)
        configuration.client.smallestPartSize = Int64(partSize)
        configuration.concurrency = 1
        return VideoPublisher(endpoint: URL(string: endpoint)!, userID: "carol_ios", configuration: configuration)
    }

    static func makeFile(_ name: String, size: Int, in directory: String) throws -> URL {
        let random = try makeRandomFile(size: size, in: directory)
        let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
        try FileManager.default.moveItem(at: random, to: url)
        return url
    }

    static func publishRecords(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
            $0.hasSuffix(".ferry-publish.json")
        }
    }

    /// Stalls the first request `match` picks, and returns a wait that ends once the proxy has that request.
    static func stall(_ match: Match, at proxy: FaultProxy) -> @Sendable () async -> Void {
        let arrived = Signals()
        // The matcher runs as the request arrives (under the proxy's lock, so it only signals).
        proxy.inject(.stall(seconds: 60), when: Match { request in
            guard match.matches(request) else { return false }
            arrived.signal()
            return true
        })
        return { await arrived.wait(for: 1) }
    }

    static func isPart(_ entry: Entry) -> Int? {
        guard entry.method == "PUT" else { return nil }
        for item in entry.query.split(separator: "&") where item.hasPrefix("partNumber=") {
            return Int(item.dropFirst("partNumber=".count))
        }
        return nil
    }

    /// Publishes through a proxy that stalls part `stallPart`, and cancels once that part is on its way: the parts
    /// before it are on the server and in the checkpoint.
    static func publishAndCancel(
        _ publisher: VideoPublisher, _ parameters: PublishParameters, proxy: FaultProxy, stallPart: Int
    ) async throws -> (PublishResult, PublishEventLog) {
        let stalled = stall(.partNumber(stallPart), at: proxy)
        let task = try publisher.publish(parameters)
        let (log, collector) = PublishEventLog.collect(task)
        await stalled()
        await task.cancel()
        let result = await task.result
        await collector.value
        proxy.clearFaults()
        return (result, log)
    }

    @Test(
        "the seed's flow: publish video and cover, progress to the total, complete; the catalog, the video URL and the cover URL agree with what was sent"
    )
    func publishEndToEnd() async throws {
        let directory = TemporaryDirectory.make("ferry-publish")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("holiday.mp4", size: 3 * 1024 * 1024 + 123, in: directory)
        let cover = try Self.makeFile("cover.jpg", size: 20 * Self.kib, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let publisher = Self.publisher(server.endpoint, records: records)
            var parameters = PublishParameters(
                signature: server.publishSignature(classId: 7, sourceContext: "from-test"), videoPath: video.path)
            parameters.coverPath = cover.path
            let task = try publisher.publish(parameters)
            let (log, collector) = PublishEventLog.collect(task)
            let result = await task.result
            await collector.value

            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(result.code == .ok)
            #expect(result.descMsg == "OK")
            let videoId = try #require(result.videoId)
            let total = Int64(3 * 1024 * 1024 + 123 + 20 * Self.kib)
            // onPublishProgress: never backwards, always against the total, ends at the total.
            let progress = log.progress
            #expect(progress.count >= 4)
            #expect(progress.allSatisfy { $0.total == total && $0.sent <= total })
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.sent < $1.sent })
            #expect(progress.last?.sent == total)
            // onPublishComplete: exactly once, last, with the same result.
            #expect(log.completions == [result])
            if case .completed = log.events.last {} else { Issue.record("the last event is not completed") }

            // What the server stored.
            let stored = try #require(try await server.server.catalog.video(videoId))
            #expect(stored.status == "UploadSucc")
            #expect(stored.size == Int64(3 * 1024 * 1024 + 123))
            #expect(stored.title == "holiday.mp4")
            #expect(stored.key == "video/\(videoId)/source.mp4")
            #expect(stored.cateId == 7)
            #expect(stored.userData == "from-test")
            // The cover's key is kept (no URL naming the Host the device sent); readers get a playback URL of it.
            #expect(stored.coverURL == nil && stored.snapshotKey == "video/\(videoId)/cover.jpg")
            let info = try await server.media().getVideoInfo(videoId: videoId)
            let described = try #require(info.coverURL)
            #expect(described.contains("/_ferry/play/\(videoId)/cover.jpg"), "\(described)")
            #expect(Data(try await S3TestClient.fetch(described).body) == (try Data(contentsOf: cover)))
            let served = try await S3TestClient.fetch(try #require(result.videoURL))
            #expect(served.status == 200)
            #expect(Data(served.body) == (try Data(contentsOf: video)))
            let coverServed = try await S3TestClient.fetch(try #require(result.coverURL))
            #expect(coverServed.status == 200)
            #expect(Data(coverServed.body) == (try Data(contentsOf: cover)))
            // The media API sees the same video.
            #expect(try await server.media().getVideoInfo(videoId: videoId).status == "UploadSucc")
            // Done: no resume record is left.
            #expect(Self.publishRecords(records).isEmpty)
        }
    }

    @Test(
        "cancel mid-upload gives 1017 and keeps the upload; publishing again with the same parameters resumes: same video, only the missing parts sent"
    )
    func cancelAndResume() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-resume")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 8 * Self.partSize
        let video = try Self.makeFile("resume.mov", size: size, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let publisher = Self.publisher(proxy.endpoint, records: records)
            let parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)

            let (cancelled, firstLog) = try await Self.publishAndCancel(
                publisher, parameters, proxy: proxy, stallPart: 4)
            #expect(cancelled.retCode == 1017)
            #expect(cancelled.code == .userCancelled)
            #expect(cancelled.videoId == nil)
            #expect(firstLog.completions == [cancelled])
            #expect(firstLog.progress.allSatisfy { $0.sent < Int64(size) })
            #expect(Self.publishRecords(records).count == 1)
            let (videos, count) = try await server.server.catalog.videos(
                status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
            #expect(count == 1)
            let firstId = try #require(videos.first?.videoId)
            #expect(videos.first?.status == "Uploading")

            // Publish again, same parameters.
            proxy.clearLog()
            let task = try publisher.publish(parameters)
            let (log, collector) = PublishEventLog.collect(task)
            let result = await task.result
            await collector.value
            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(result.videoId == firstId)
            let sentParts = proxy.log.compactMap(Self.isPart)
            #expect(sentParts == [4, 5, 6, 7, 8])
            #expect(!proxy.log.contains { $0.method == "POST" && $0.query.contains("uploads") })
            // Progress starts from what was already uploaded and ends at the total.
            #expect((log.progress.first?.sent ?? 0) >= Int64(3 * Self.partSize))
            #expect(log.progress.last?.sent == Int64(size))
            let stored = try #require(try await server.server.catalog.video(firstId))
            #expect(stored.status == "UploadSucc")
            #expect(stored.size == Int64(size))
            #expect(
                Data(try await S3TestClient.fetch(try #require(result.videoURL)).body) == (try Data(contentsOf: video)))
            #expect(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).total
                    == 1)
            #expect(Self.publishRecords(records).isEmpty)
            try await proxy.shutdown()
        }
    }

    @Test("resumeValidity holds for the uploaded parts too: with 10 days, a publish cancelled 7 days ago resumes its parts (the engine's own checkpoints last 6 days)")
    func resumeValidityHoldsForParts() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-validity")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 8 * Self.partSize
        let video = try Self.makeFile("old.mov", size: size, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            var configuration = Self.publisher(proxy.endpoint, records: records).configuration
            configuration.resumeValidity = 10 * 24 * 3600
            let publisher = VideoPublisher(endpoint: URL(string: proxy.endpoint)!, userID: "carol_ios", configuration: configuration)
            let parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            let (cancelled, _) = try await Self.publishAndCancel(publisher, parameters, proxy: proxy, stallPart: 4)
            #expect(cancelled.retCode == 1017)

            // 7 days pass for the device's records: the publish record and the parts' checkpoint.
            var aged = 0
            for folder in [records, records + "/parts"] {
                for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(".json") {
                    let url = URL(fileURLWithPath: folder + "/" + name)
                    var record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
                    let createdAt = try #require(record["createdAt"] as? Double)
                    record["createdAt"] = createdAt - 7 * 24 * 3600
                    try JSONSerialization.data(withJSONObject: record).write(to: url)
                    aged += 1
                }
            }
            #expect(aged == 2)

            proxy.clearLog()
            let result = await (try publisher.publish(parameters)).result
            #expect(result.retCode == 0, "\(result.descMsg)")
            // The parts stored before the cancel were kept: only the missing ones went.
            #expect(proxy.log.compactMap(Self.isPart) == [4, 5, 6, 7, 8])
            try await proxy.shutdown()
        }
    }

    @Test("a file changed after a cancelled publish starts over: a new video, every part sent, the new bytes served")
    func changedFileStartsOver() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-changed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 6 * Self.partSize
        let video = try Self.makeFile("changed.mp4", size: size, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let publisher = Self.publisher(proxy.endpoint, records: records)
            let parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            let (cancelled, _) = try await Self.publishAndCancel(publisher, parameters, proxy: proxy, stallPart: 3)
            #expect(cancelled.retCode == 1017)
            let firstId = try #require(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).videos
                    .first?.videoId)

            // New content at the same path, with a different modification time.
            let replacement = try makeRandomFile(size: size, in: directory)
            try FileManager.default.removeItem(at: video)
            try FileManager.default.moveItem(at: replacement, to: video)
            try FileManager.default.setAttributes(
                [.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: video.path)

            proxy.clearLog()
            let result = try await publisher.publish(parameters).result
            #expect(result.retCode == 0, "\(result.descMsg)")
            let newId = try #require(result.videoId)
            #expect(newId != firstId)
            #expect(proxy.log.compactMap(Self.isPart) == [1, 2, 3, 4, 5, 6])
            let stored = try #require(try await server.server.catalog.video(newId))
            #expect(stored.status == "UploadSucc")
            #expect(stored.size == Int64(size))
            #expect(
                Data(try await S3TestClient.fetch(try #require(result.videoURL)).body) == (try Data(contentsOf: video)))
            #expect(Self.publishRecords(records).isEmpty)
            try await proxy.shutdown()
        }
    }

    @Test(
        "parameter errors are thrown synchronously, before any request: 1012 empty signature, 1013 empty video path, 1008 missing file or cover"
    )
    func parameterErrors() throws {
        let directory = TemporaryDirectory.make("ferry-publish-params")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("ok.mp4", size: 10, in: directory)
        // Nothing listens on this endpoint: a request would fail, but none is made.
        let publisher = Self.publisher("http://127.0.0.1:9", records: directory + "/records")
        func code(_ parameters: PublishParameters) -> PublishCode? {
            do {
                _ = try publisher.publish(parameters)
                return nil
            } catch {
                // One error type: the seed's retCode is a view of the FerryError, whose kind agrees with it.
                #expect(!error.message.isEmpty)
                #expect(error.code == (error.publishCode == .fileNotExist ? .fileNotFound : .invalidArgument))
                return error.publishCode
            }
        }
        #expect(code(PublishParameters(signature: "", videoPath: video.path)) == .invalidSignature)
        #expect(code(PublishParameters(signature: "  ", videoPath: video.path)) == .invalidSignature)
        #expect(code(PublishParameters(signature: "sig", videoPath: "")) == .invalidVideoPath)
        #expect(code(PublishParameters(signature: "sig", videoPath: directory + "/missing.mp4")) == .fileNotExist)
        #expect(code(PublishParameters(signature: "sig", videoPath: directory)) == .fileNotExist)
        #expect(
            code(PublishParameters(signature: "sig", videoPath: video.path, coverPath: directory + "/none.jpg"))
                == .fileNotExist)
        #expect(PublishCode.invalidSignature.rawValue == 1012)
        #expect(PublishCode.invalidVideoPath.rawValue == 1013)
        #expect(PublishCode.fileNotExist.rawValue == 1008)
        #expect(Self.publishRecords(directory + "/records").isEmpty)
    }

    @Test(
        "the service's refusals: an expired signature is 1020, a bad or unknown one 1001 with the service's message; nothing is created"
    )
    func signatureRefusals() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-refused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("refused.mp4", size: 1000, in: directory)
        try await TestServer.with { server in
            let publisher = Self.publisher(server.endpoint, records: directory + "/records")
            func publish(_ signature: String) async throws -> (PublishResult, PublishEventLog) {
                let task = try publisher.publish(PublishParameters(signature: signature, videoPath: video.path))
                let (log, collector) = PublishEventLog.collect(task)
                let result = await task.result
                await collector.value
                return (result, log)
            }
            let (expired, expiredLog) = try await publish(server.publishSignature(lifetime: -10))
            #expect(expired.retCode == 1020)
            #expect(expired.code == .signatureExpired)
            #expect(expired.descMsg.contains("expired"))
            #expect(expiredLog.completions == [expired])
            // The retCode is a view of the result's FerryError, which keeps what the service said.
            let expiredError = try #require(expired.error)
            #expect(expiredError.publishCode == .signatureExpired)
            #expect(expiredError.code == .credentialsExpired)
            #expect(expiredError.serverCode == "SignatureExpired")
            #expect(expiredError.httpStatus == 403)
            #expect(expiredError.message == expired.descMsg)

            let (bad, _) = try await publish(server.publishSignature(secret: "not-the-secret"))
            #expect(bad.retCode == 1001)
            #expect(bad.descMsg == "The signature does not verify.")
            #expect(bad.error?.code == .server)
            #expect(bad.error?.serverCode == "InvalidSignature")
            let (unknown, _) = try await publish(server.publishSignature(secretId: "FKIANOSUCHKEY000", secret: "x"))
            #expect(unknown.retCode == 1001)
            #expect(unknown.descMsg == "The signature does not verify.")
            let (garbage, _) = try await publish("bm90IGEgc2lnbmF0dXJl")
            #expect(garbage.retCode == 1001)
            #expect(garbage.descMsg.hasPrefix("The signature cannot be read"))
            #expect(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).total
                    == 0)
        }
    }

    @Test("cancel while applying gives 1017 at once, with completed as the only event")
    func cancelWhileApplying() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("cancel.mp4", size: 1000, in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let stalled = Self.stall(.path(contains: "ApplyUploadUGC"), at: proxy)
            let publisher = Self.publisher(proxy.endpoint, records: directory + "/records")
            let task = try publisher.publish(
                PublishParameters(signature: server.publishSignature(), videoPath: video.path))
            let (log, collector) = PublishEventLog.collect(task)
            await stalled()
            await task.cancel()
            let result = await task.result
            await collector.value
            #expect(result.retCode == 1017)
            #expect(result.error?.code == .cancelled)
            #expect(log.events.count == 1)
            #expect(log.completions == [result])
            try await proxy.shutdown()
        }
    }

    @Test(
        "a failure at each step carries the seed's code: 1003 video, 1004 cover (publishing again then sends only the cover), 1005 commit"
    )
    func stepFailures() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-steps")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("steps.mp4", size: 4 * Self.partSize, in: directory)
        let cover = try Self.makeFile("steps.png", size: 3000, in: directory)
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let publisher = Self.publisher(proxy.endpoint, records: directory + "/records")
            var parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            parameters.coverPath = cover.path

            // The video: storage refuses a part.
            proxy.inject(.status(403, code: "AccessDenied"), when: .partNumber(2), times: .max)
            let videoFailed = try await publisher.publish(parameters).result
            #expect(videoFailed.retCode == 1003, "\(videoFailed.descMsg)")
            #expect(videoFailed.code == .videoUploadFailed)
            #expect(!videoFailed.descMsg.isEmpty)
            // Storage's refusal, reported at the video's step: the kind, status and code are storage's.
            #expect(videoFailed.error?.publishCode == .videoUploadFailed)
            #expect(videoFailed.error?.code == .server)
            #expect(videoFailed.error?.httpStatus == 403)
            #expect(videoFailed.error?.serverCode == "AccessDenied")
            proxy.clearFaults()

            // The cover: storage keeps failing it; the video is stored by then.
            proxy.inject(
                .status(500, code: "InternalError"), when: .method("PUT") && .path(contains: "/cover."), times: .max)
            let coverFailed = try await publisher.publish(parameters).result
            #expect(coverFailed.retCode == 1004, "\(coverFailed.descMsg)")
            #expect(coverFailed.code == .coverUploadFailed)
            let (videos, count) = try await server.server.catalog.videos(
                status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
            #expect(count == 1)
            let videoId = try #require(videos.first?.videoId)
            #expect(videos.first?.status == "UploadSucc")
            proxy.clearFaults()

            // The commit: the service keeps failing.
            proxy.inject(.status(500, code: "InternalError"), when: .path(contains: "CommitUploadUGC"), times: .max)
            proxy.clearLog()
            let commitFailed = try await publisher.publish(parameters).result
            #expect(commitFailed.retCode == 1005, "\(commitFailed.descMsg)")
            #expect(commitFailed.code == .finishRequestFailed)
            #expect(commitFailed.error?.httpStatus == 500)
            // The video was already stored: only the cover went again.
            #expect(!proxy.log.contains { $0.method == "PUT" && $0.path.contains("/source.") })
            #expect(proxy.log.contains { $0.method == "PUT" && $0.path.contains("/cover.") })
            proxy.clearFaults()

            let done = try await publisher.publish(parameters).result
            #expect(done.retCode == 0, "\(done.descMsg)")
            #expect(done.videoId == videoId)
            #expect(
                Data(try await S3TestClient.fetch(try #require(done.coverURL)).body) == (try Data(contentsOf: cover)))
            #expect(
                Data(try await S3TestClient.fetch(try #require(done.videoURL)).body) == (try Data(contentsOf: video)))
            try await proxy.shutdown()
        }
    }

    @Test(
        "an upload credential that expires mid-upload is renewed from the service for the same video, and the publish completes"
    )
    func credentialRenewal() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-renew")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("renew.mp4", size: 4 * Self.partSize, in: directory)
        try await TestServer.with(minPartSize: 1024, configure: { $0.uploadAuthLifetime = 1 }) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            // Part 2 reaches the server after the credential has expired.
            proxy.inject(.delay(seconds: 2.5), when: .partNumber(2))
            let publisher = Self.publisher(proxy.endpoint, records: directory + "/records")
            let result = try await publisher.publish(
                PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            ).result
            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(proxy.log.filter { $0.path.contains("ApplyUploadUGC") }.count >= 2)
            #expect(proxy.log.contains { Self.isPart($0) == 2 && $0.outcome != "200" })
            #expect(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).total
                    == 1)
            #expect(
                Data(try await S3TestClient.fetch(try #require(result.videoURL)).body) == (try Data(contentsOf: video)))
            try await proxy.shutdown()
        }
    }

    @Test(
        "with enableResume false nothing is recorded and a cancel aborts the server's upload; publishing again starts a new video"
    )
    func resumeDisabled() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-noresume")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("once.mp4", size: 4 * Self.partSize, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let publisher = Self.publisher(proxy.endpoint, records: records)
            var parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            parameters.enableResume = false
            let (cancelled, _) = try await Self.publishAndCancel(publisher, parameters, proxy: proxy, stallPart: 2)
            #expect(cancelled.retCode == 1017)
            #expect(!FileManager.default.fileExists(atPath: records))
            let open = try await server.server.store.listMultipartUploads(
                bucket: "ferry-media", prefix: "", delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 100)
            #expect(open.uploads.isEmpty)
            proxy.clearLog()
            let result = try await publisher.publish(parameters).result
            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(proxy.log.compactMap(Self.isPart) == [1, 2, 3, 4])
            #expect(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).total
                    == 2)
            try await proxy.shutdown()
        }
    }

    @Test(
        "published without a cover, a publish whose commit failed is finished by publishing again: the video is not sent again, also when the run that sent it stopped before recording so"
    )
    func commitFailedWithoutCover() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-plain")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("plain.mp4", size: 3 * Self.partSize, in: directory)
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let records = directory + "/records"
            let publisher = Self.publisher(proxy.endpoint, records: records)
            let parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            proxy.inject(.status(500, code: "InternalError"), when: .path(contains: "CommitUploadUGC"), times: .max)
            let failed = try await publisher.publish(parameters).result
            #expect(failed.retCode == 1005, "\(failed.descMsg)")
            proxy.clearFaults()
            // As if the run had stopped between storing the video and recording it: only the service knows.
            let files = try FileManager.default.contentsOfDirectory(atPath: records).filter { $0.hasSuffix(".json") }
            #expect(files.count == 1)
            for file in files {
                let url = URL(fileURLWithPath: records).appendingPathComponent(file)
                var record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
                #expect(record["videoUploaded"] as? Bool == true)
                record["videoUploaded"] = false
                try JSONSerialization.data(withJSONObject: record).write(to: url)
            }

            proxy.clearLog()
            let done = try await publisher.publish(parameters).result
            #expect(done.retCode == 0, "\(done.descMsg)")
            #expect(!proxy.log.contains { $0.method == "PUT" && $0.path.contains("/source.") })
            let (videos, count) = try await server.server.catalog.videos(
                status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
            #expect(count == 1 && done.videoId == videos.first?.videoId)
            #expect(
                Data(try await S3TestClient.fetch(try #require(done.videoURL)).body) == (try Data(contentsOf: video)))
            try await proxy.shutdown()
        }
    }

    @Test("a resume record whose video was deleted on the service starts over with a new video")
    func deletedVideoStartsOver() async throws {
        let directory = TemporaryDirectory.make("ferry-publish-deleted")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try Self.makeFile("deleted.mp4", size: 4 * Self.partSize, in: directory)
        let records = directory + "/records"
        try await TestServer.with(minPartSize: 1024) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let publisher = Self.publisher(proxy.endpoint, records: records)
            let parameters = PublishParameters(signature: server.publishSignature(), videoPath: video.path)
            let (cancelled, _) = try await Self.publishAndCancel(publisher, parameters, proxy: proxy, stallPart: 3)
            #expect(cancelled.retCode == 1017)
            #expect(Self.publishRecords(records).count == 1)
            let firstId = try #require(
                try await server.server.catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
                    .videos.first?.videoId)
            try await server.media().deleteVideos([firstId])

            proxy.clearLog()
            let result = try await publisher.publish(parameters).result
            #expect(result.retCode == 0, "\(result.descMsg)")
            #expect(result.videoId != nil && result.videoId != firstId)
            #expect(proxy.log.compactMap(Self.isPart) == [1, 2, 3, 4])
            #expect(try await server.server.catalog.video(firstId)?.status == "Deleted")
            #expect(Self.publishRecords(records).isEmpty)
            try await proxy.shutdown()
        }
    }
}
