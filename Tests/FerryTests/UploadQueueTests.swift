import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

extension TestServer {
    /// An STS credential allowed every media operation, as an app server would hand to a device.
    func stsToken(validFor seconds: TimeInterval = 900) -> Credentials {
        let expiration = Date().addingTimeInterval(seconds)
        let issued = server.credentials.tokens.issue(
            parent: root.accessKeyId, policy: AccessPolicy(statements: [.init(actions: ["media:*"])]), expiration: expiration)
        return Credentials(
            accessKeyId: issued.accessKeyId, secretAccessKey: issued.secretAccessKey, sessionToken: issued.sessionToken,
            expiration: expiration)
    }

    /// The bytes stored at a URL of the object service (`…/bucket/key`).
    func storedBytes(at url: String) async throws -> [UInt8] {
        let path = try #require(URL(string: url)).path.dropFirst()
        let slash = try #require(path.firstIndex(of: "/"))
        return try await engine().getObject(bucket: String(path[..<slash]), key: String(path[path.index(after: slash)...]))
    }
}

/// A random file with an extension.
func makeMediaFile(size: Int, ext: String, in directory: String) throws -> URL {
    let random = try makeRandomFile(size: size, in: directory)
    let named = random.deletingPathExtension().appendingPathExtension(ext)
    try FileManager.default.moveItem(at: random, to: named)
    return named
}

/// Collects a queue's events while it runs.
final class QueueLog: Sendable {
    private let record = EventRecord<UploadQueueEvent>()
    var events: [UploadQueueEvent] { record.events }

    static func collect(_ queue: UploadQueue, onEvent: @escaping @Sendable (UploadQueueEvent) async -> Void = { _ in }) -> (QueueLog, Task<Void, Never>) {
        let log = QueueLog()
        let task = Task {
            for await event in queue.events {
                log.record.append(event)
                await onEvent(event)
            }
            log.record.end()
        }
        return (log, task)
    }

    /// Waits until `predicate` holds for the events so far, checking as each event arrives; records an issue and
    /// throws when the events end or `timeout` passes first.
    func wait(
        _ what: String, timeout: Duration = .seconds(120), until predicate: @escaping @Sendable ([UploadQueueEvent]) -> Bool
    ) async throws {
        guard await record.wait(within: timeout, until: predicate) else {
            Issue.record("timed out waiting for \(what)")
            throw CancellationError()
        }
    }

    func finished() -> [(UploadQueue.Item, MediaUploadResult)] {
        events.compactMap { if case .finished(let item, let result) = $0 { (item, result) } else { nil } }
    }
    func progress(of id: UploadQueue.Item.ID) -> [Int64] {
        events.compactMap { if case .progress(let item, let size, _) = $0, item.id == id { size } else { nil } }
    }
    func count(_ predicate: (UploadQueueEvent) -> Bool) -> Int { events.filter(predicate).count }
    static func isStarted(_ event: UploadQueueEvent) -> Bool { if case .started = event { true } else { false } }
    static func isTokenExpired(_ event: UploadQueueEvent) -> Bool { if case .tokenExpired = event { true } else { false } }
    static func isRetry(_ event: UploadQueueEvent) -> Bool { if case .retry = event { true } else { false } }
    static func isRetryResumed(_ event: UploadQueueEvent) -> Bool { if case .retryResumed = event { true } else { false } }
}

@Suite("UploadQueue (VODUploadClient)", .timeLimit(.minutes(10)))
struct UploadQueueTests {
    static let mib = 1024 * 1024

    /// The first request `match` finds reaches the service and its answer is lost; then every request fails (503)
    /// until the faults are cleared, as when the app is killed then. Signals when that request is sent.
    static func loseAnswer(to match: Match, on proxy: FaultProxy) -> Signals {
        let sent = Signals()
        proxy.inject(.dropAfterRequestBytes(.max), when: Match { request in
            guard match.matches(request) else { return false }
            sent.signal()
            return true
        })
        proxy.inject(.status(503, code: "ServiceUnavailable"), when: Match { _ in sent.count > 0 }, times: .max)
        return sent
    }

    /// Once the request of ``loseAnswer(to:on:)`` was answered by the service (and the answer dropped), stops `queue`,
    /// as the app is stopped, and clears the proxy's faults.
    static func stopOnceLost(_ queue: UploadQueue, _ sent: Signals, proxy: FaultProxy) async throws {
        #expect(await sent.wait(for: 1, within: .seconds(120)), "the request was not sent")
        for _ in 0..<600 where !proxy.log.contains(where: { $0.outcome == "dropped" }) {
            try await Task.sleep(for: .milliseconds(50))
        }
        await queue.stop()
        proxy.clearFaults()
    }

    static func configuration(records: String) -> UploadQueue.Configuration {
        var configuration = UploadQueue.Configuration()
        configuration.recordDirectoryPath = URL(fileURLWithPath: records)
        configuration.objectStorage.transport = AsyncHTTPClientTransport()
        configuration.objectStorage.retryPolicy = RetryPolicy(maxRetryCount: 5, baseDelay: .milliseconds(20), maxDelay: .milliseconds(200))
        configuration.timeoutIntervalForRequest = .seconds(20)
        return configuration
    }

    @Test("STS: the queue creates a video and an image itself, uploads them one after the other through a 503 (a part's and CreateUploadImage's, each told as a retry and its recovery), and the service stores both")
    func stsVideoAndImage() async throws {
        let directory = TemporaryDirectory.make("ferry-queue")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 12 * Self.mib, ext: "mp4", in: directory)
        let image = try makeMediaFile(size: 150_000, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.status(503, code: "SlowDown"), when: .partNumber(2))
            proxy.inject(.status(503, code: "ServiceUnavailable"), when: .path(contains: "CreateUploadImage"))
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: directory + "/records"))
            let (log, collector) = QueueLog.collect(queue)
            let videoItem = await queue.addFile(video, info: MediaInfo(title: "Holiday", tags: "beach,summer", desc: "At the sea", cateId: 19))
            let imageItem = await queue.addFile(image, info: MediaInfo(title: "Poster"))
            #expect(await queue.listFiles().map(\.state) == [.ready, .ready])
            #expect(await queue.listFiles().map(\.kind) == [.video, .image])
            await queue.start()
            try await log.wait("both files", until: { _ in log.finished().count == 2 })
            collector.cancel()
            try await proxy.shutdown()

            #expect(log.count(QueueLog.isStarted) == 2)
            #expect(log.count(QueueLog.isRetry) == 2)
            #expect(log.count(QueueLog.isRetryResumed) == 2)
            // The service call's retry is the image's, and comes before the image's upload starts.
            let imageEvents = log.events.compactMap { event -> String? in
                switch event {
                case .retry(let item, _, let error) where item.id == imageItem: "retry \(error.httpStatus ?? 0)"
                case .retryResumed(let item) where item.id == imageItem: "resumed"
                case .finished(let item, _) where item.id == imageItem: "finished"
                default: nil
                }
            }
            #expect(imageEvents == ["retry 503", "resumed", "finished"], "\(imageEvents)")
            let progress = log.progress(of: videoItem)
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0 <= $1 })
            #expect(progress.last == Int64(12 * Self.mib))
            // One file at a time (the seed's default): the image starts only after the video finished.
            let order = log.events.compactMap { event -> String? in
                switch event {
                case .started(let item): "started \(item.kind)"
                case .finished(let item, _): "finished \(item.kind)"
                default: nil
                }
            }
            #expect(order == ["started video", "finished video", "started image", "finished image"])

            let results = Dictionary(uniqueKeysWithValues: log.finished().map { ($0.0.id, $0.1) })
            let videoId = try #require(results[videoItem]?.videoId)
            let info = try await server.media().getVideoInfo(videoId: videoId)
            #expect(info.status == "UploadSucc")
            #expect(info.size == Int64(12 * Self.mib))
            #expect(info.title == "Holiday")
            let source = try await server.media().getMezzanineInfo(videoId: videoId)
            #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: video)))
            #expect(results[videoItem]?.upload.verification == .checksum)

            let imageURL = try #require(results[imageItem]?.imageURL)
            #expect(Data(try await server.storedBytes(at: imageURL)) == (try Data(contentsOf: image)))
            let items = await queue.listFiles()
            #expect(items.map(\.state) == [.succeeded, .succeeded])
            #expect(items[0].videoId == videoId)
            #expect(items[0].bucket == "ferry-media")
            #expect(items[1].imageURL == imageURL)
            // Its id gives a URL that reads it.
            let imageId = try #require(results[imageItem]?.imageId)
            #expect(items[1].imageId == imageId)
            let read = try await server.media().getImageInfo(imageId: imageId).url
            #expect(Data(try await S3TestClient.fetch(read).body) == (try Data(contentsOf: image)))
        }
    }

    @Test("upload address + credential per file: started → setUploadAuth; an expired credential → tokenExpired → resume(withUploadAuth:)")
    func perFileAuthWithExpiry() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-auth")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 7 * Self.mib, ext: "mp4", in: directory)
        try await TestServer.with { server in
            // The app server creates the video and hands the device an address and a credential, here an expired one.
            let appServer = server.media()
            let ticket = try await appServer.createUploadVideo(.init(title: "Per file", fileName: "clip.mp4"))
            let issued = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId,
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: ticket.address.bucket, key: ticket.address.fileName)]),
                expiration: Date().addingTimeInterval(-30))
            let expired = UploadAuth(
                accessKeyId: issued.accessKeyId, accessKeySecret: issued.secretAccessKey, securityToken: issued.sessionToken ?? "",
                expiration: Date().addingTimeInterval(-30), region: "us-east-1")

            let queue = UploadQueue(authorization: .uploadAuth, configuration: Self.configuration(records: directory + "/records"))
            let (log, collector) = QueueLog.collect(queue) { event in
                switch event {
                case .started(let item):
                    try? await queue.setUploadAuth(expired.encoded(), address: ticket.uploadAddress, videoId: ticket.id, for: item.id)
                case .tokenExpired:
                    let fresh = try? await appServer.refreshUploadVideo(videoId: ticket.id)
                    _ = try? await queue.resume(withUploadAuth: fresh?.uploadAuth ?? "")
                default: break
                }
            }
            let item = await queue.addFile(video)
            await queue.start()
            try await log.wait("the video", until: { _ in log.finished().count == 1 })
            collector.cancel()
            #expect(log.count(QueueLog.isStarted) == 1)
            #expect(log.count(QueueLog.isTokenExpired) == 1)
            let result = try #require(log.finished().first?.1)
            #expect(result.videoId == ticket.id)
            #expect(result.upload.size == Int64(7 * Self.mib))
            #expect(await queue.item(item)?.state == .succeeded)
            #expect(try await appServer.getVideoInfo(videoId: ticket.id).status == "UploadSucc")
            // Bad input is refused with a clear error.
            let unreadable = await #expect(throws: FerryError.self) { try await queue.setUploadAuth("not base64", address: "x", for: item) }
            #expect(unreadable?.code == .invalidArgument, "\(String(describing: unreadable))")
            await #expect(throws: FerryError.self) { try await queue.resume(withUploadAuth: "%%%") }
        }
    }

    @Test("upload address + credential pulled from an async closure, for an image")
    func pulledAuth() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-pull")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let image = try makeMediaFile(size: 300_000, ext: "jpg", in: directory)
        try await TestServer.with { server in
            let appServer = server.media()
            let queue = UploadQueue(
                authorization: .uploadAuthProvider { item in
                    try await appServer.createUploadImage(type: "default", ext: item.fileURL.pathExtension, title: item.info.title)
                },
                configuration: Self.configuration(records: directory + "/records"))
            let (log, collector) = QueueLog.collect(queue)
            await queue.addFile(image, info: MediaInfo(title: "Pulled"))
            await queue.start()
            try await log.wait("the image", until: { _ in log.finished().count == 1 })
            collector.cancel()
            let imageURL = try #require(log.finished().first?.1.imageURL)
            #expect(Data(try await server.storedBytes(at: imageURL)) == (try Data(contentsOf: image)))
        }
    }

    @Test("list operations while an upload runs: list, cancel (next starts), delete (aborted), pause/resume, resume a cancelled file from its checkpoint, clear")
    func listOperationsWhileUploading() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-list")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let files = try (0..<3).map { _ in try makeMediaFile(size: 11 * Self.mib, ext: "mp4", in: directory) }
        try await TestServer.with { server in
            // Every part waits a second on the way, so the files are still uploading while the list changes (and while
            // events reach the log late on a busy machine).
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 1), when: .query(contains: "partNumber"), times: .max)
            var configuration = Self.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()), configuration: configuration)
            let (log, collector) = QueueLog.collect(queue)
            let ids = await files.asyncMap { await queue.addFile($0) }
            await queue.start()
            // Wait until the first file's first part is on the server (the second part has begun).
            try await log.wait("a's second part", until: { _ in (log.progress(of: ids[0]).last ?? 0) > Int64(5 * Self.mib) })
            #expect(await queue.listFiles().map(\.state) == [.uploading, .ready, .ready])
            let videoA = try #require(await queue.item(ids[0])?.videoId)
            let keyA = try #require(await queue.item(ids[0])?.object)

            #expect(await queue.cancelFile(at: 0))
            #expect(await queue.listFiles().map(\.state) == [.cancelled, .uploading, .ready])
            try await log.wait("b's progress", until: { _ in !log.progress(of: ids[1]).isEmpty })
            let keyB = try #require(await queue.item(ids[1])?.object)
            let videoB = try #require(await queue.item(ids[1])?.videoId)
            #expect(await queue.deleteFile(at: 1))
            // The video the queue made for it is deleted (in the background), not left waiting `Uploading` for a file
            // that never comes.
            var gone = false
            for _ in 0..<100 where !gone {
                gone = (try? await server.media().getVideoInfo(videoId: videoB)) == nil
                if !gone { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(gone, "the deleted file's video is still there")
            #expect(await queue.listFiles().map(\.id) == [ids[0], ids[2]])
            #expect(await queue.listFiles().map(\.state) == [.cancelled, .uploading])
            let open = try await server.engine().listMultipartUploads(bucket: "ferry-media")
            #expect(!open.contains { $0.key == keyB }, "the deleted file's multipart upload is aborted")

            try await log.wait("c's progress", until: { _ in !log.progress(of: ids[2]).isEmpty })
            await queue.pause()
            #expect(await queue.listFiles().map(\.state) == [.cancelled, .paused])
            await queue.resume()
            #expect(await queue.listFiles().map(\.state) == [.cancelled, .uploading])
            #expect(await queue.resumeFile(at: 0))
            #expect(await queue.listFiles().map(\.state) == [.ready, .uploading])
            try await log.wait("a and c", until: { _ in log.finished().count == 2 })
            collector.cancel()
            let partsOfA = proxy.log.filter { $0.path.hasSuffix(keyA) && $0.query.contains("partNumber=1") && $0.outcome == "200" }
            try await proxy.shutdown()

            let results = Dictionary(uniqueKeysWithValues: log.finished().map { ($0.0.id, $0.1) })
            #expect(await queue.listFiles().map(\.state) == [.succeeded, .succeeded])
            // The cancelled file continued its multipart upload: same video, the part already stored was not sent again.
            #expect(results[ids[0]]?.videoId == videoA)
            #expect(partsOfA.count == 1)
            for (index, id) in [(0, ids[0]), (2, ids[2])] {
                let videoId = try #require(results[id]?.videoId)
                let source = try await server.media().getMezzanineInfo(videoId: videoId)
                #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: files[index])))
            }
            await queue.clearFiles()
            #expect(await queue.listFiles().isEmpty)
            // Videos that received their files stay.
            #expect(try await server.media().listVideos().total == 2)
            #expect(await queue.deleteFile(at: 0) == false)
            #expect(await queue.resumeFile(at: 5) == false)
        }
    }

    @Test("STS: a file removed and added again while the video made for it is being deleted waits for that deletion, and uploads as a new video")
    func readdedWhileItsVideoIsDeleted() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-readded")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeMediaFile(size: 11 * Self.mib, ext: "mp4", in: directory)
        try await TestServer.with { server in
            // Parts go slowly (1.5 s each), so the file is uploading when it is removed, and again while the deletion
            // asks its first question (which waits 2 s): added again at once, without the wait it would be given the
            // video being deleted, which goes while its file uploads.
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 2), when: .path(contains: "GetVideoInfo"))
            proxy.inject(.delay(seconds: 1.5), when: .query(contains: "partNumber"), times: .max)
            var configuration = Self.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()), configuration: configuration)
            let (log, collector) = QueueLog.collect(queue)
            let first = await queue.addFile(file)
            await queue.start()
            try await log.wait("the first run's progress", until: { _ in !log.progress(of: first).isEmpty })
            let removedVideo = try #require(await queue.item(first)?.videoId)
            #expect(await queue.deleteFile(first))
            let again = await queue.addFile(file)
            let failed = { @Sendable (event: UploadQueueEvent) -> Bool in if case .failed = event { true } else { false } }
            try await log.wait("the second run's end", until: { events in
                log.finished().contains { $0.0.id == again } || events.contains(where: failed)
            })
            collector.cancel()
            try await proxy.shutdown()
            #expect(log.count(failed) == 0, "\(log.events.filter(failed))")
            let videoId = try #require(log.finished().first { $0.0.id == again }?.1.videoId)
            #expect(videoId != removedVideo, "the file was given the video being deleted")
            #expect((try? await server.media().getVideoInfo(videoId: removedVideo)) == nil, "the removed file's video is still there")
            let source = try await server.media().getMezzanineInfo(videoId: videoId)
            #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: file)))
        }
    }

    @Test("STS: an expired token → tokenExpired → resume(withToken:); an upload credential that runs out mid-upload is renewed with RefreshUploadVideo; a missing file and a forbidden token fail with codes")
    func stsExpiryAndFailures() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-sts")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 16 * Self.mib, ext: "mp4", in: directory)
        try await TestServer.with(configure: { $0.uploadAuthLifetime = 2 }) { server in
            // Each part takes at least 0.8 s, so the 2-second upload credential runs out during the upload.
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.8), when: .query(contains: "partNumber"), times: .max)
            var configuration = Self.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken(validFor: -5)),
                configuration: configuration)
            let (log, collector) = QueueLog.collect(queue) { event in
                if case .tokenExpired = event { await queue.resume(withToken: server.stsToken()) }
            }
            let videoItem = await queue.addFile(video, info: MediaInfo(title: "Renewed"))
            let missing = await queue.addFile(URL(fileURLWithPath: directory + "/missing.mp4"))
            await queue.start()
            try await log.wait("the video and the failure", until: { _ in log.finished().count + log.count { if case .failed = $0 { true } else { false } } == 2 })
            collector.cancel()
            let expiredParts = proxy.log.filter { $0.outcome == "400" }
            try await proxy.shutdown()

            #expect(log.count(QueueLog.isTokenExpired) == 1, "only the STS token needed the app; the upload credential was renewed by the queue")
            #expect(!expiredParts.isEmpty, "the upload credential did run out during the upload")
            let result = try #require(log.finished().first { $0.0.id == videoItem }?.1)
            #expect(result.upload.size == Int64(16 * Self.mib))
            let videoId = try #require(result.videoId)
            #expect(try await server.media().getVideoInfo(videoId: videoId).status == "UploadSucc")
            let failure = log.events.compactMap { event -> (UploadQueue.Item, String, String)? in
                if case .failed(let item, let code, let message) = event { (item, code, message) } else { nil }
            }
            #expect(failure.map(\.0.id) == [missing])
            #expect(failure.first?.1 == "fileNotFound")
            #expect(failure.first?.2.contains("missing.mp4") == true)
            #expect(await queue.item(missing)?.state == .failed)
            #expect(await queue.item(missing)?.failureCode == "fileNotFound")

            // A token that may not call the media API: the file fails with the service's code.
            let issued = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: AccessPolicy(statements: [.init(actions: ["s3:GetObject"])]),
                expiration: Date().addingTimeInterval(600))
            let forbidden = UploadQueue(
                authorization: .sts(endpoint: URL(string: server.endpoint)!, credentials: Credentials(
                    accessKeyId: issued.accessKeyId, secretAccessKey: issued.secretAccessKey, sessionToken: issued.sessionToken)),
                configuration: configuration)
            let (log2, collector2) = QueueLog.collect(forbidden)
            await forbidden.addFile(video)
            await forbidden.start()
            try await log2.wait("the failure", until: { $0.contains { if case .failed = $0 { true } else { false } } })
            collector2.cancel()
            #expect(log2.events.contains { if case .failed(_, "Forbidden", _) = $0 { true } else { false } })
        }
    }

    @Test("an already expired credential is not taken: resume(withToken:) answers false and resume(withUploadAuth:) throws credentialsExpired, so an app answering every tokenExpired at once does not loop")
    func expiredCredentialsNotTaken() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-expired")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let queue = UploadQueue(
            authorization: .sts(
                endpoint: URL(string: "http://127.0.0.1:1")!, credentials: Credentials(accessKeyId: "FKIA0", secretAccessKey: "s")),
            configuration: Self.configuration(records: directory + "/records"))
        let past = Date().addingTimeInterval(-5), future = Date().addingTimeInterval(600)
        #expect(await queue.resume(withToken: Credentials(accessKeyId: "FKIA1", secretAccessKey: "s", sessionToken: "t", expiration: past)) == false)
        #expect(await queue.resume(withToken: Credentials(accessKeyId: "FKIA2", secretAccessKey: "s", sessionToken: "t", expiration: future)))
        let expired = UploadAuth(accessKeyId: "FKIA3", accessKeySecret: "s", securityToken: "t", expiration: past, region: "us-east-1")
        await #expect { try await queue.resume(withUploadAuth: expired.encoded()) } throws: { error in
            (error as? FerryError)?.code == .credentialsExpired
        }
        let fresh = UploadAuth(accessKeyId: "FKIA4", accessKeySecret: "s", securityToken: "t", expiration: future, region: "us-east-1")
        #expect(try await queue.resume(withUploadAuth: fresh.encoded()) == false, "no file waits for one")
    }

    @Test("STS: an upload credential whose renewal the service refuses for good (RefreshUploadVideo 404: the video is gone) fails the file with that answer instead of asking the app for a token again and again; the next file uploads")
    func renewalRefusedForGood() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-renewal")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 16 * Self.mib, ext: "mp4", in: directory)
        let image = try makeMediaFile(size: 64 * 1024, ext: "jpg", in: directory)
        try await TestServer.with(configure: { $0.uploadAuthLifetime = 2 }) { server in
            // The 2-second upload credential runs out during the upload, and its renewal finds the video gone.
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.8), when: .query(contains: "partNumber"), times: .max)
            proxy.inject(.status(404, code: "InvalidVideo.NotFound"), when: .path(contains: "RefreshUploadVideo"), times: .max)
            var configuration = Self.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()),
                configuration: configuration)
            let (log, collector) = QueueLog.collect(queue) { event in
                if case .tokenExpired = event { await queue.resume(withToken: server.stsToken()) }
            }
            let videoItem = await queue.addFile(video, info: MediaInfo(title: "Gone"))
            let imageItem = await queue.addFile(image, kind: .image)
            await queue.start()
            try await log.wait("the failure and the image", until: { _ in
                log.finished().count + log.count { if case .failed = $0 { true } else { false } } == 2
            })
            collector.cancel()
            let refreshes = proxy.log.filter { $0.path.contains("RefreshUploadVideo") }.count
            try await proxy.shutdown()

            #expect(log.count(QueueLog.isTokenExpired) == 0, "the STS token was valid throughout")
            #expect(refreshes == 1, "one renewal, refused for good, was asked for: \(refreshes)")
            let failure = log.events.compactMap { event -> (UploadQueue.Item, String, String)? in
                if case .failed(let item, let code, let message) = event { (item, code, message) } else { nil }
            }
            #expect(failure.map(\.0.id) == [videoItem])
            #expect(failure.first?.2.contains("404") == true, "\(failure)")
            #expect(await queue.item(videoItem)?.state == .failed)
            // Nothing more is told of the failed file.
            let afterFailure = log.events.drop { event in if case .failed = event { false } else { true } }.dropFirst()
            #expect(!afterFailure.contains { event in
                switch event {
                case .progress(let item, _, _), .started(let item), .finished(let item, _), .tokenExpired(let item),
                    .retry(let item, _, _), .retryResumed(let item), .failed(let item, _, _):
                    item.id == videoItem
                }
            })
            #expect(log.finished().map(\.0.id) == [imageItem])
        }
    }

    @Test("STS: a token the service refuses as expired, though it names no expiry the device could check, → tokenExpired → resume(withToken:) → the file uploads; the refused token is not sent again and again")
    func stsExpiredByService() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-sts-service")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 64 * 1024, ext: "mp4", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            let expired = server.stsToken(validFor: -5)
            let unlabelled = Credentials(
                accessKeyId: expired.accessKeyId, secretAccessKey: expired.secretAccessKey, sessionToken: expired.sessionToken)
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: unlabelled),
                configuration: Self.configuration(records: directory + "/records"))
            let (log, collector) = QueueLog.collect(queue) { event in
                if case .tokenExpired = event { await queue.resume(withToken: server.stsToken()) }
            }
            let item = await queue.addFile(video, info: MediaInfo(title: "Refused token"))
            await queue.start()
            try await log.wait("the video", timeout: .seconds(60), until: { _ in !log.finished().isEmpty })
            collector.cancel()
            let calls = proxy.log.count
            try await proxy.shutdown()
            #expect(log.count(QueueLog.isTokenExpired) == 1)
            #expect(log.finished().map(\.0.id) == [item])
            // The refused token went out once (CreateUploadVideo), then the new one: a handful of requests in all.
            #expect(calls < 10, "\(calls) requests")
        }
    }

    @Test("stop cancels the uploading file (its checkpoint stays) and starts nothing more; resumeFile continues it and the queue")
    func stopAndResumeFile() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-stop")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 11 * Self.mib, ext: "mp4", in: directory)
        let image = try makeMediaFile(size: 50_000, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.3), when: .query(contains: "partNumber"), times: .max)
            var configuration = Self.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let transport = CountingTransport()
            configuration.objectStorage.transport = transport
            let queue = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()), configuration: configuration)
            let (log, collector) = QueueLog.collect(queue)
            let videoItem = await queue.addFile(video)
            await queue.addFile(image)
            await queue.start()
            try await log.wait("the video's second part", until: { _ in (log.progress(of: videoItem).last ?? 0) > Int64(5 * Self.mib) })
            await queue.stop()
            #expect(await queue.listFiles().map(\.state) == [.cancelled, .ready])
            // The video's engine upload has stopped when stop returns: no request (a part, or the image's
            // CreateUploadImage) starts from now on. Watching for a while is what this checks.
            let requestsAtStop = transport.requests
            try await Task.sleep(for: .milliseconds(600))
            #expect(transport.requests == requestsAtStop, "nothing uploads or starts after stop")
            #expect(log.count(QueueLog.isStarted) == 1)
            #expect(await queue.resumeFile(at: 0))
            try await log.wait("both files", until: { _ in log.finished().count == 2 })
            collector.cancel()
            let videoParts = proxy.log.filter { $0.query.contains("partNumber=1") && $0.outcome == "200" }
            try await proxy.shutdown()
            #expect(await queue.listFiles().map(\.state) == [.succeeded, .succeeded])
            #expect(videoParts.count == 1, "the part stored before stop was not sent again")
            #expect(log.count(QueueLog.isStarted) == 2)
        }
    }

    /// A video upload that a killed app left behind, and what runs after it: `body` gets the server, the file (21 MiB)
    /// and the video it became, and `again` adds the file to a new queue over the same record directory and returns its
    /// result. The first queue sent two parts (a proxy slows each one) before it paused and went away.
    static func afterInterruptedUpload(
        _ name: String, validity: TimeInterval? = nil,
        _ body: @Sendable (
            _ server: TestServer, _ video: URL, _ videoId: String, _ again: @Sendable () async throws -> MediaUploadResult
        ) async throws -> Void
    ) async throws {
        let directory = TemporaryDirectory.make(name)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 21 * Self.mib, ext: "mp4", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.2), when: .query(contains: "partNumber"), times: .max)
            var slow = Self.configuration(records: directory + "/records")
            slow.partConcurrency = 1
            if let validity { slow.resumeValidity = validity }
            let configuration = slow
            let endpoint = URL(string: proxy.endpoint)!
            @Sendable func run(until done: @escaping @Sendable (QueueLog, UploadQueue.Item.ID) -> Bool) async throws -> (UploadQueue, QueueLog, UploadQueue.Item.ID) {
                let queue = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: server.stsToken()), configuration: configuration)
                let (log, collector) = QueueLog.collect(queue)
                let item = await queue.addFile(video, info: MediaInfo(title: "Clip"))
                await queue.start()
                try await log.wait("the upload", until: { _ in done(log, item) })
                collector.cancel()
                return (queue, log, item)
            }
            let (first, _, item) = try await run { log, item in (log.progress(of: item).last ?? 0) > Int64(10 * Self.mib) }
            await first.pause()
            let videoId = try #require(await first.item(item)?.videoId)
            try await body(server, video, videoId) {
                let (_, log, _) = try await run { log, _ in log.finished().count == 1 }
                return try #require(log.finished().first?.1)
            }
            try await proxy.shutdown()
        }
    }

    @Test("the same file added again to a new queue continues its checkpoint and keeps its VideoId (RefreshUploadVideo)")
    func sameFileAfterRestartKeepsVideoId() async throws {
        try await Self.afterInterruptedUpload("ferry-queue-restart") { server, _, videoId, again in
            let result = try await again()
            #expect(result.videoId == videoId)
            #expect(result.upload.partsResumed >= 2)
            #expect(result.upload.partsResumed + result.upload.partsSent == 5)
            let listed = try await server.media().listVideos()
            #expect(listed.total == 1)
            #expect(listed.videos.first?.status == "UploadSucc")
            #expect(listed.videos.first?.size == Int64(21 * Self.mib))
        }
    }

    @Test(
        "a video or image the service stored while the answer was lost (a multipart upload's completion, a single PUT) is not sent again: the same file in a new queue finishes as that video or image; also when the service's download URLs name a server that is not running (ferry upload's embedded service)",
        arguments: [(12, "mp4", false), (2, "mp4", false), (7, "png", false), (1, "png", false), (2, "mp4", true), (1, "png", true)])
    func lostCompletionIsNotSentAgain(mebibytes: Int, ext: String, urlsElsewhere: Bool) async throws {
        let directory = TemporaryDirectory.make("ferry-queue-lost-completion")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: mebibytes * Self.mib, ext: ext, in: directory)
        let records = directory + "/records"
        // As `ferry upload` runs its service: uploads where the requests go, download URLs for `ferry serve`'s
        // address, where nothing listens (port 9, discard, here).
        try await TestServer.with(configure: { configuration in
            guard urlsElsewhere else { return }
            configuration.publicEndpoint = "http://127.0.0.1:9"
            configuration.uploadAddressesFollowRequests = true
        }) { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            // The request that stores the file (CompleteMultipartUpload; the PUT of a file below the part size) reaches
            // the service and its answer is lost; then the network is gone (every request 503) until the app is
            // stopped, as when it is killed.
            let storing: Match = mebibytes * Self.mib > UploadPlan.defaultPartSize
                ? .method("POST") && .query(contains: "uploadId")
                : .method("PUT") && !.query(contains: "partNumber")
            let stored = Self.loseAnswer(to: storing, on: proxy)
            let first = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: records))
            let firstItem = await first.addFile(video, info: MediaInfo(title: "Clip"))
            await first.start()
            try await Self.stopOnceLost(first, stored, proxy: proxy)
            let firstRun = try #require(await first.item(firstItem))
            if ext == "mp4" {
                #expect(try await server.media().getVideoInfo(videoId: try #require(firstRun.videoId)).status == "UploadSucc")
            }

            // The app adds the file again (after a restart): it finishes as the stored video, sending no byte. Its
            // requests go through a proxy of their own: a request the first queue wrote before it stopped can reach
            // the first proxy late, and is not the second queue's.
            try await proxy.shutdown()
            let secondProxy = try await FaultProxy.start(upstream: server.endpoint)
            let second = UploadQueue(
                authorization: .sts(endpoint: URL(string: secondProxy.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: records))
            let (log, collector) = QueueLog.collect(second)
            let item = await second.addFile(video, info: MediaInfo(title: "Clip"))
            await second.start()
            try await log.wait("the file", until: { _ in log.finished().count == 1 })
            collector.cancel()
            let result = try #require(log.finished().first?.1)
            #expect(result.videoId == firstRun.videoId)
            // The same image (its URL names the address the request reached: each queue has its own proxy).
            #expect(result.imageURL.flatMap { URL(string: $0)?.path } == firstRun.imageURL.flatMap { URL(string: $0)?.path })
            #expect(result.imageId == firstRun.imageId)
            #expect(result.upload.partsSent == 0)
            #expect(result.upload.size == Int64(mebibytes * Self.mib))
            #expect(await second.item(item)?.state == .succeeded)
            #expect(!secondProxy.log.contains { $0.method == "PUT" }, "bytes were sent again")
            #expect(!secondProxy.log.contains { $0.path.hasSuffix("/CreateUploadVideo") || $0.path.hasSuffix("/CreateUploadImage") })
            if ext == "mp4" {
                let listed = try await server.media().listVideos()
                #expect(listed.total == 1, "a second video was made: \(listed.videos.map(\.videoId))")
            } else {
                let url = try #require(result.imageURL)
                #expect(Data(try await server.storedBytes(at: url)) == (try Data(contentsOf: video)))
            }
            // Nothing of the upload is left in the record directory: no checkpoint, no journal entry.
            let left = ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []).filter {
                $0.hasSuffix(".ferry-checkpoint.json") || $0.hasPrefix("media-")
            }
            #expect(left.isEmpty, "\(left)")
            try await secondProxy.shutdown()
        }
    }

    @Test(
        "a process killed as a file is stored (the record directory as `fileStored` sees it) loses nothing: the same file in a new queue finishes as that video or image with no byte sent; the first queue, once it tells the file finished, has left nothing behind",
        arguments: [(12, "mp4"), (7, "png"), (2, "mp4")])
    func killAsStoredLosesNothing(mebibytes: Int, ext: String) async throws {
        let directory = TemporaryDirectory.make("ferry-queue-kill-stored")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeMediaFile(size: mebibytes * Self.mib, ext: ext, in: directory)
        let records = directory + "/records"
        let snapshot = directory + "/snapshot"
        @Sendable func upload(_ left: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: left)) ?? []).filter {
                $0.hasSuffix(".ferry-checkpoint.json") || $0.hasPrefix("media-")
            }
        }
        try await TestServer.with { server in
            var configuration = Self.configuration(records: records)
            // What a process killed at this instant leaves behind: the record directory as it is now.
            configuration.fileStored = { _, _ in try? FileManager.default.copyItem(atPath: records, toPath: snapshot) }
            let first = UploadQueue(
                authorization: .sts(endpoint: URL(string: server.endpoint)!, credentials: server.stsToken()),
                configuration: configuration)
            let (firstLog, firstCollector) = QueueLog.collect(first)
            await first.addFile(file, info: MediaInfo(title: "Clip"))
            await first.start()
            try await firstLog.wait("the file", until: { _ in firstLog.finished().count == 1 })
            firstCollector.cancel()
            let made = try #require(firstLog.finished().first?.1)
            #expect(made.upload.partsSent > 0)
            #expect(upload(records).isEmpty, "\(upload(records))")
            #expect(!upload(snapshot).isEmpty, "the queue had forgotten the upload before fileStored")

            // The app starts again with what the kill left: the file is the video or image it became.
            let second = UploadQueue(
                authorization: .sts(endpoint: URL(string: server.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: snapshot))
            let (log, collector) = QueueLog.collect(second)
            await second.addFile(file, info: MediaInfo(title: "Clip"))
            await second.start()
            try await log.wait("the file again", until: { events in
                events.contains { if case .finished = $0 { true } else if case .failed = $0 { true } else { false } }
            })
            collector.cancel()
            let result = try #require(log.finished().first?.1, "\(log.events)")
            #expect(result.videoId == made.videoId)
            #expect(result.imageURL == made.imageURL)
            #expect(result.upload.partsSent == 0)
            if ext == "mp4" {
                let listed = try await server.media().listVideos()
                #expect(listed.total == 1, "a second video was made: \(listed.videos.map(\.videoId))")
            }
            #expect(upload(snapshot).isEmpty, "\(upload(snapshot))")
        }
    }

    @Test(
        "a file whose CreateUploadVideo or CreateUploadImage answer was lost (the app stopped before it heard) is that video or image when it is added again, not a second one",
        arguments: ["mp4", "png"])
    func lostCreationAnswerMakesOne(ext: String) async throws {
        let directory = TemporaryDirectory.make("ferry-queue-lost-creation")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeMediaFile(size: 2 * Self.mib, ext: ext, in: directory)
        let records = directory + "/records"
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            // The creation reaches the service and its answer is lost; then every request fails until the app stops.
            let created = Self.loseAnswer(
                to: .path(contains: ext == "mp4" ? "CreateUploadVideo" : "CreateUploadImage"), on: proxy)
            let first = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: records))
            await first.addFile(file, info: MediaInfo(title: "Clip"))
            await first.start()
            try await Self.stopOnceLost(first, created, proxy: proxy)
            let media = server.media()
            let catalog = server.server.catalog
            let made: String
            if ext == "mp4" {
                made = try #require(try await media.listVideos().videos.first?.videoId)
            } else {
                made = try #require(try await catalog.uploadingImages(createdBefore: .distantFuture, after: "", limit: 10).first?.imageId)
            }

            let second = UploadQueue(
                authorization: .sts(endpoint: URL(string: proxy.endpoint)!, credentials: server.stsToken()),
                configuration: Self.configuration(records: records))
            let (log, collector) = QueueLog.collect(second)
            await second.addFile(file, info: MediaInfo(title: "Clip"))
            await second.start()
            try await log.wait("the file", until: { _ in log.finished().count == 1 })
            collector.cancel()
            let result = try #require(log.finished().first?.1)
            if ext == "mp4" {
                #expect(result.videoId == made)
                #expect(try await media.listVideos().total == 1)
            } else {
                #expect(result.imageURL?.contains(made) == true, "\(result.imageURL ?? "") is not image \(made)")
                let left = try await catalog.uploadingImages(createdBefore: .distantFuture, after: "", limit: 10)
                #expect(left.isEmpty, "an image was left uploading: \(left.map(\.imageId))")
            }
            try await proxy.shutdown()
        }
    }

    @Test(
        "a file whose upload began three days ago continues as the same video from its checkpoint (the seed sets no limit); with resumeValidity of two days it starts over as a new video, and the old one is deleted",
        arguments: [nil, 2 * 24 * 3600.0])
    func agedRecords(_ validity: TimeInterval?) async throws {
        try await Self.afterInterruptedUpload("ferry-queue-aged", validity: validity) { server, video, oldId, again in
            // Three days pass for the device's records: the journal entry and the checkpoint.
            let records = video.deletingLastPathComponent().appendingPathComponent("records").path
            var aged = 0
            for name in try FileManager.default.contentsOfDirectory(atPath: records) where name.hasSuffix(".json") {
                let url = URL(fileURLWithPath: records + "/" + name)
                guard var record = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any],
                    let createdAt = record["createdAt"] as? Double
                else { continue }
                record["createdAt"] = createdAt - 3 * 24 * 3600
                try JSONSerialization.data(withJSONObject: record).write(to: url)
                aged += 1
            }
            #expect(aged >= 2, "the journal entry and the checkpoint")
            let result = try await again()
            if validity == nil {
                #expect(result.videoId == oldId)
                #expect(result.upload.partsResumed >= 2)
            } else {
                #expect(result.videoId != oldId)
                #expect(try await server.server.catalog.video(oldId)?.status == "Deleted")
            }
            #expect(try await server.media().listVideos().total == 1)
        }
    }

    @Test("a stored video whose file is another is not taken for the file: the same file becomes a new video")
    func storedOtherFileIsNotTaken() async throws {
        try await Self.afterInterruptedUpload("ferry-queue-other-stored") { server, video, oldId, again in
            // Someone with the video's upload credential stores other bytes of the file's size as the video's file.
            let old = try #require(try await server.server.catalog.video(oldId))
            let other = [UInt8](repeating: 7, count: 21 * Self.mib)
            let ticket = try await server.media().refreshUploadVideo(videoId: oldId)
            var direct = ObjectStorageClient.Configuration()
            direct.transport = AsyncHTTPClientTransport()
            try await ticket.objectStorageClient(configuration: direct).putObject(other, bucket: old.bucket, key: old.key)
            #expect(try await server.media().getVideoInfo(videoId: oldId).status == "UploadSucc")
            let result = try await again()
            #expect(result.videoId != oldId)
            let newId = try #require(result.videoId)
            let newVideo = try #require(try await server.server.catalog.video(newId))
            #expect(try await server.client().get(newVideo.bucket, newVideo.key).body == [UInt8](try Data(contentsOf: video)))
        }
    }

    @Test("a file changed after its upload began becomes a new video; the abandoned one, still Uploading, is deleted with its parts")
    func changedFileDeletesAbandonedVideo() async throws {
        try await Self.afterInterruptedUpload("ferry-queue-changed") { server, video, oldId, again in
            let media = server.media()
            #expect(try await media.getVideoInfo(videoId: oldId).status == "Uploading")
            let oldVideo = try #require(try await server.server.catalog.video(oldId))
            #expect(try await server.client().send("GET", "/\(oldVideo.bucket)", query: [("uploads", "")]).text.contains("<UploadId>"))
            let records = video.deletingLastPathComponent().appendingPathComponent("records").path
            func checkpoints() -> [String] {
                ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []).filter { $0.hasSuffix(".ferry-checkpoint.json") }
            }
            #expect(checkpoints().count == 1, "\(checkpoints())")

            // New content at the same path, with another modification time.
            let replacement = try makeRandomFile(size: 13 * Self.mib, in: video.deletingLastPathComponent().path)
            try FileManager.default.removeItem(at: video)
            try FileManager.default.moveItem(at: replacement, to: video)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: video.path)

            let result = try await again()
            #expect(result.videoId != oldId)
            #expect(result.upload.partsResumed == 0)
            let newId = try #require(result.videoId)
            let newVideo = try #require(try await server.server.catalog.video(newId))
            #expect(newVideo.size == Int64(13 * Self.mib))
            #expect(try await server.client().get(newVideo.bucket, newVideo.key).body == [UInt8](try Data(contentsOf: video)))
            // The abandoned video is gone, and nothing of it is left on the server.
            let listed = try await media.listVideos()
            #expect(listed.videos.map(\.videoId) == [result.videoId])
            #expect(try await server.server.catalog.video(oldId)?.status == "Deleted")
            let uploads = try await server.client().send("GET", "/\(oldVideo.bucket)", query: [("uploads", "")])
            #expect(!uploads.text.contains(oldVideo.key), "\(uploads.text)")
            // The abandoned upload's checkpoint is not left behind (the new upload's went when it completed).
            #expect(checkpoints().isEmpty, "\(checkpoints())")
        }
    }
}

extension UploadQueueTests {
    @Test("an image whose file changed after its upload began: the new queue aborts the abandoned multipart upload and leaves no checkpoint of it")
    func changedImageLeavesNoCheckpoint() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-changed-image")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let image = try makeMediaFile(size: 21 * Self.mib, ext: "png", in: directory)
        let records = directory + "/records"
        @Sendable func checkpoints() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []).filter { $0.hasSuffix(".ferry-checkpoint.json") }
        }
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                proxy.inject(.delay(seconds: 0.2), when: .query(contains: "partNumber"), times: .max)
                var configuration = Self.configuration(records: records)
                configuration.partConcurrency = 1
                let endpoint = URL(string: proxy.endpoint)!
                let first = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: server.stsToken()), configuration: configuration)
                let (log, collector) = QueueLog.collect(first)
                let item = await first.addFile(image, info: MediaInfo(title: "Poster"))
                await first.start()
                try await log.wait("the first parts", until: { _ in (log.progress(of: item).last ?? 0) > Int64(10 * Self.mib) })
                await first.pause()
                collector.cancel()
                let bucket = try #require(await first.item(item)?.bucket)
                #expect(checkpoints().count == 1, "\(checkpoints())")
                #expect(try await server.client().send("GET", "/\(bucket)", query: [("uploads", "")]).text.contains("<UploadId>"))

                let replacement = try makeRandomFile(size: 13 * Self.mib, in: directory)
                try FileManager.default.removeItem(at: image)
                try FileManager.default.moveItem(at: replacement, to: image)
                try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: image.path)

                let second = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: server.stsToken()), configuration: configuration)
                let (again, collecting) = QueueLog.collect(second)
                _ = await second.addFile(image, info: MediaInfo(title: "Poster"))
                await second.start()
                try await again.wait("the new image", until: { _ in again.finished().count == 1 })
                collecting.cancel()
                let imageURL = try #require(again.finished().first?.1.imageURL)
                #expect(Data(try await server.storedBytes(at: imageURL)) == (try Data(contentsOf: image)))
                #expect(checkpoints().isEmpty, "\(checkpoints())")
                let open = try await server.client().send("GET", "/\(bucket)", query: [("uploads", "")]).text
                #expect(!open.contains("<UploadId>"), "\(open)")
            }
        }
    }
}

extension Sequence where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
