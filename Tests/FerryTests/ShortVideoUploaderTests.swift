import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Collects a short-video uploader's events.
final class ShortVideoLog: Sendable {
    private let record = EventRecord<ShortVideoEvent>()
    var events: [ShortVideoEvent] { record.events }

    static func collect(_ uploader: ShortVideoUploader, onEvent: @escaping @Sendable (ShortVideoEvent) async -> Void = { _ in }) -> (ShortVideoLog, Task<Void, Never>) {
        let log = ShortVideoLog()
        let task = Task {
            for await event in uploader.events {
                log.record.append(event)
                await onEvent(event)
            }
            log.record.end()
        }
        return (log, task)
    }

    /// Waits until an event satisfies `predicate` (false when the events end or `limit` passes first).
    func wait(within limit: Duration = .seconds(120), for predicate: @escaping @Sendable (ShortVideoEvent) -> Bool) async -> Bool {
        await record.wait(within: limit) { $0.contains(where: predicate) }
    }

    var progress: [(Int64, Int64)] {
        events.compactMap { if case .progress(let sent, let total) = $0 { (sent, total) } else { nil } }
    }
    func count(_ predicate: (ShortVideoEvent) -> Bool) -> Int { events.filter(predicate).count }
}

@Suite("ShortVideoUploader (VODUploadSVideoClient)", .timeLimit(.minutes(10)))
struct ShortVideoUploaderTests {
    static let mib = 1024 * 1024

    @Test("video + cover with an STS credential that has expired: tokenExpired → refresh, a retry, both stored, the video's cover is the image")
    func uploadsVideoAndCover() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 12 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 200_000, ext: "jpg", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.status(500, code: "InternalError"), when: .partNumber(2))
            let uploader = ShortVideoUploader(
                endpoint: URL(string: proxy.endpoint)!, configuration: UploadQueueTests.configuration(records: directory + "/records"))
            let (log, collector) = ShortVideoLog.collect(uploader) { event in
                if case .tokenExpired = event { await uploader.refresh(credentials: server.stsToken()) }
            }
            let result = try await uploader.upload(
                video: video, cover: cover, info: MediaInfo(title: "Short", tags: "game", desc: "desc", cateId: 10),
                credentials: server.stsToken(validFor: -5))
            try await proxy.shutdown()
            // The last event is delivered just before `upload` returns; the collector sees it a moment later.
            #expect(await log.wait { if case .succeeded = $0 { true } else { false } })
            collector.cancel()

            #expect(log.count { if case .tokenExpired = $0 { true } else { false } } == 1)
            #expect(log.count { if case .retry = $0 { true } else { false } } == 1)
            #expect(log.count { if case .retryResumed = $0 { true } else { false } } == 1)
            #expect(log.count { if case .succeeded(let r) = $0 { r == result } else { false } } == 1)
            let total = Int64(12 * Self.mib + 200_000)
            let progress = log.progress
            #expect(progress.allSatisfy { $0.1 == total })
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.0 < $1.0 })
            #expect(progress.last?.0 == total)

            let info = try await server.media().getVideoInfo(videoId: result.videoId)
            #expect(info.status == "UploadSucc")
            #expect(info.size == Int64(12 * Self.mib))
            // The cover is the image, given by a URL a player reads as it is (the image's address needs a signature).
            let coverURL = try #require(info.coverURL)
            #expect(coverURL != result.imageURL && coverURL.contains("X-Amz-Signature="), "\(coverURL)")
            #expect(Data(try await S3TestClient.fetch(coverURL).body) == (try Data(contentsOf: cover)))
            let image = try await server.media().getImageInfo(imageId: result.imageId)
            #expect(image.imageType == "cover")
            #expect(Data(try await S3TestClient.fetch(image.url).body) == (try Data(contentsOf: cover)))
            #expect(info.title == "Short")
            let source = try await server.media().getMezzanineInfo(videoId: result.videoId)
            #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: video)))
            #expect(Data(try await server.storedBytes(at: result.imageURL)) == (try Data(contentsOf: cover)))
        }
    }

    @Test("a file that fails on the device's side (its connection dropped until retries ran out) throws its own code, not the server's")
    func deviceFailureKeepsItsCode() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-network")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 64 * 1024, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 1024, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.dropAfterRequestBytes(10), when: .method("PUT"), times: .max)
            var configuration = UploadQueueTests.configuration(records: directory + "/records")
            configuration.maxRetryCount = 2
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            do {
                _ = try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Dropped"), credentials: server.stsToken())
                Issue.record("the upload succeeded through a connection that always drops")
            } catch let error as FerryError {
                #expect(error.code == .network || error.code == .timeout, "\(error)")
                #expect(error.serverCode == nil, "\(error)")
            }
            try await proxy.shutdown()
        }
    }

    /// The checkpoints in `records`.
    static func checkpoints(_ records: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []).filter { $0.hasSuffix(".ferry-checkpoint.json") }
    }

    @Test("one STS expiry met by both files is one tokenExpired event, and one refresh continues both")
    func oneExpiryOneEvent() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-one-expiry")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 12 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 200_000, ext: "jpg", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            // Both files' upload credentials expire (the cover's one PUT, the video's second part), and so does the
            // STS credential with which the queue would renew them: each file waits for the app's.
            proxy.inject(.status(403, code: "ExpiredToken"), when: .partNumber(2))
            proxy.inject(.status(403, code: "ExpiredToken"), when: .method("PUT") && .not(.query(contains: "partNumber")))
            proxy.inject(.status(403, code: "ExpiredToken"), when: .path(contains: "RefreshUpload"), times: 2)
            var configuration = UploadQueueTests.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            // The app answers once both files are waiting: each has met its expiry and its refused renewal (every
            // fault is spent), and the last refusal has had a second to reach the uploader.
            let (log, collector) = ShortVideoLog.collect(uploader) { event in
                guard case .tokenExpired = event else { return }
                let deadline = ContinuousClock.now + .seconds(120)
                while !proxy.pendingFaults.isEmpty || proxy.log.contains(where: { $0.outcome == "pending" }),
                    ContinuousClock.now < deadline
                {
                    try? await Task.sleep(for: .milliseconds(50))
                }
                try? await Task.sleep(for: .seconds(1))
                await uploader.refresh(credentials: server.stsToken())
            }
            let result = try await uploader.upload(
                video: video, cover: cover, info: MediaInfo(title: "Once"), credentials: server.stsToken())
            #expect(await log.wait { if case .succeeded = $0 { true } else { false } })
            collector.cancel()
            #expect(proxy.pendingFaults.isEmpty, "both files did not meet the expiry: \(proxy.pendingFaults)")
            #expect(log.count { if case .tokenExpired = $0 { true } else { false } } == 1, "\(log.events)")
            #expect(try await server.media().getVideoInfo(videoId: result.videoId).status == "UploadSucc")
            try await proxy.shutdown()
        }
    }

    @Test("a credential that has expired already, given after tokenExpired while the files upload, ends the upload with credentialsExpired and keeps what was sent; the same call with a fresh one continues the same video")
    func expiredRefreshEndsUpload() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-stale-refresh")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 16 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 200_000, ext: "jpg", in: directory)
        let records = directory + "/records"
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            // The video's upload credential expires at its third part, and the STS credential with which the queue
            // would renew it too: the queue asks the app for a new one.
            proxy.inject(.status(403, code: "ExpiredToken"), when: .partNumber(3))
            proxy.inject(.status(403, code: "ExpiredToken"), when: .path(contains: "RefreshUploadVideo"))
            var configuration = UploadQueueTests.configuration(records: records)
            configuration.partConcurrency = 1
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            // The app server hands out a stale credential.
            let (log, collector) = ShortVideoLog.collect(uploader) { event in
                if case .tokenExpired = event { await uploader.refresh(credentials: server.stsToken(validFor: -5)) }
            }
            let running = Task {
                try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Stale"), credentials: server.stsToken())
            }
            let ended = await log.wait(within: .seconds(60)) { if case .failed = $0 { true } else { false } }
            #expect(ended, "the upload went on waiting: \(log.events)")
            if !ended { await uploader.cancel() }
            do {
                _ = try await running.value
                Issue.record("the upload succeeded with an expired credential")
            } catch let error as FerryError {
                #expect(error.code == .credentialsExpired, "\(error)")
            }
            #expect(log.count { if case .tokenExpired = $0 { true } else { false } } >= 1)
            // What was sent stays: the video's multipart upload and its checkpoint.
            #expect(try await server.engine().listMultipartUploads(bucket: "ferry-media").count == 1)
            #expect(!Self.checkpoints(records).isEmpty)

            proxy.clearFaults()
            let result = try await uploader.upload(
                video: video, cover: cover, info: MediaInfo(title: "Stale"), credentials: server.stsToken())
            collector.cancel()
            let listed = try await server.media().listVideos()
            #expect(listed.total == 1 && listed.videos.first?.videoId == result.videoId, "\(listed.videos.map(\.videoId))")
            #expect(try await server.media().getVideoInfo(videoId: result.videoId).status == "UploadSucc")
            try await proxy.shutdown()
        }
    }

    @Test("when one file fails, the other is paused, not cancelled: its multipart upload and checkpoint stay, and the same call again continues it as the same video")
    func failureKeepsTheOtherFile() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-keep-other")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 32 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 200_000, ext: "jpg", in: directory)
        let records = directory + "/records"
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 1), when: .query(contains: "partNumber"), times: .max)
            // The cover (one PUT) never gets through.
            proxy.inject(.dropAfterRequestBytes(10), when: .method("PUT") && .not(.query(contains: "partNumber")), times: .max)
            var configuration = UploadQueueTests.configuration(records: records)
            configuration.partConcurrency = 1
            configuration.maxRetryCount = 4
            // Its four retries wait up to a second each (two in all, on average): the video's upload is under way,
            // with a checkpoint, when the cover fails, and its seven parts take seven seconds at least.
            configuration.objectStorage.retryPolicy = RetryPolicy(maxRetryCount: 4, baseDelay: .seconds(1), maxDelay: .seconds(1))
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            await #expect(throws: FerryError.self) {
                try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Kept"), credentials: server.stsToken())
            }
            #expect(try await server.engine().listMultipartUploads(bucket: "ferry-media").count == 1)
            #expect(!Self.checkpoints(records).isEmpty)

            proxy.clearFaults()
            let result = try await uploader.upload(
                video: video, cover: cover, info: MediaInfo(title: "Kept"), credentials: server.stsToken())
            let listed = try await server.media().listVideos()
            #expect(listed.total == 1 && listed.videos.first?.videoId == result.videoId, "\(listed.videos.map(\.videoId))")
            let source = try await server.media().getMezzanineInfo(videoId: result.videoId)
            #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: video)))
            try await proxy.shutdown()
        }
    }

    @Test("a pause while the cover's ticket is being made holds both files until resume: nothing is sent meanwhile, then both are stored")
    func pauseWhileCreatingCover() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-early-pause")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 64 * 1024, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 1024, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let arrived = Signals()
            proxy.inject(.delay(seconds: 1), when: Match { request in
                guard request.path.contains("CreateUploadImage") else { return false }
                arrived.signal()
                return true
            })
            let uploader = ShortVideoUploader(
                endpoint: URL(string: proxy.endpoint)!, configuration: UploadQueueTests.configuration(records: directory + "/records"))
            let running = Task {
                try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Held"), credentials: server.stsToken())
            }
            await arrived.wait(for: 1)
            await uploader.pause()
            // The ticket comes back within the second; what would be sent after it is watched for a while.
            try await Task.sleep(for: .seconds(2))
            #expect(!proxy.log.contains { $0.method == "PUT" }, "\(proxy.log.map { "\($0.method) \($0.path)" })")
            #expect(await uploader.resume())
            let result = try await running.value
            #expect(!result.videoId.isEmpty)
            #expect(proxy.log.contains { $0.method == "PUT" })
            try await proxy.shutdown()
        }
    }

    @Test("cancel stops both files and aborts their multipart uploads; pause and resume continue; a missing file is refused")
    func pauseResumeCancel() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 16 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 6 * Self.mib, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.3), when: .query(contains: "partNumber"), times: .max)
            var configuration = UploadQueueTests.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let transport = CountingTransport()
            configuration.objectStorage.transport = transport
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            let (log, collector) = ShortVideoLog.collect(uploader)
            await #expect(throws: FerryError.self) {
                try await uploader.upload(
                    video: URL(fileURLWithPath: directory + "/missing.mp4"), cover: cover, info: MediaInfo(),
                    credentials: server.stsToken())
            }
            #expect(await log.wait { if case .failed = $0 { true } else { false } })
            #expect(log.count { if case .failed("fileNotFound", let message) = $0 { message.contains("missing.mp4") } else { false } } == 1)
            let token = server.stsToken()
            let running = Task { try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Cancelled"), credentials: token) }
            #expect(await log.wait { if case .progress(let sent, _) = $0 { sent > 0 } else { false } })
            await uploader.pause()
            // Both engine uploads have stopped when pause returns: no request starts from now on. Watching for a while
            // is what this checks (a pause that did not hold would send the next part within it).
            let requestsAtPause = transport.requests
            try await Task.sleep(for: .milliseconds(400))
            #expect(transport.requests == requestsAtPause, "nothing is sent while paused")
            #expect(await uploader.resume())
            #expect(await transport.wait(forMoreThan: requestsAtPause), "nothing was sent after resume")
            #expect(await uploader.cancel())
            await #expect(throws: FerryError.self) { try await running.value }
            collector.cancel()
            try await proxy.shutdown()
            #expect(try await server.engine().listMultipartUploads(bucket: "ferry-media").isEmpty)
            #expect(await uploader.cancel() == false)
        }
    }

    @Test("cancel() while the cover image is being made: the upload throws cancelled, and the image it made is deleted rather than left Uploading")
    func cancelWhileCoverIsMade() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-cancel-cover")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 300_000, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 20_000, ext: "jpg", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 2), when: .path(contains: "CreateUploadImage"))
            let uploader = ShortVideoUploader(
                endpoint: URL(string: proxy.endpoint)!, configuration: UploadQueueTests.configuration(records: directory + "/records"))
            let token = server.stsToken()
            let running = Task { try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Gone"), credentials: token) }
            var asked = false
            for _ in 0..<2400 where !asked {
                asked = proxy.log.contains { $0.path.contains("CreateUploadImage") }
                if !asked { try await Task.sleep(for: .milliseconds(25)) }
            }
            #expect(asked, "the cover image was not asked for")
            #expect(await uploader.cancel())
            await #expect(throws: FerryError.self) { try await running.value }
            // The image was made (the service answered after the cancel) and is deleted in the background.
            let catalog = server.server.mediaCatalog
            var left = try await catalog.uploadingImages(createdBefore: .distantFuture, after: "", limit: 10)
            for _ in 0..<400 where !left.isEmpty {
                try await Task.sleep(for: .milliseconds(50))
                left = try await catalog.uploadingImages(createdBefore: .distantFuture, after: "", limit: 10)
            }
            #expect(left.isEmpty, "\(left.map(\.imageId))")
            #expect(proxy.log.contains { $0.path.contains("CreateUploadImage") && $0.outcome == "200" })
            try await proxy.shutdown()
        }
    }
}
