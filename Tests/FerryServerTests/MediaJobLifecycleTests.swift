import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import FerryMedia

@Suite("Media jobs across deletions and crashes", .serialized, .timeLimit(.minutes(10)))
struct MediaJobLifecycleTests {
    /// Templates whose default group encodes slowly, so a transcode is still running when a test acts.
    static let slow = TranscodeTemplates(groups: TranscodeTemplates.builtIn.groups, preset: "veryslow", segmentSeconds: 4)

    /// Waits until `condition` holds, checking every 50 ms; records an issue when `timeout` passes first.
    static func eventually(
        _ what: String, timeout: Duration = .seconds(60), _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting until \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("a deletion stopped after the video was marked Deleted is finished by its removal job: the file goes and VideoDeleted is sent; a deletion that finished is recorded so the job does nothing; a retried DeleteVideo succeeds, finishing a deletion left midway at once")
    func interruptedDeletion() async throws {
        try await WebhookReceiver.with { receiver in
            try await MediaHarness.with(webhook: receiver.url) { harness in
                let catalog = harness.server.server.catalog
                // A deletion that finishes records it, so its removal job (due later) has nothing left to do.
                let done = try await harness.media.createUploadVideo(.init(title: "done", fileName: "done.mp4"))
                try await harness.media.deleteVideos([done.id])
                #expect(try await catalog.video(done.id)?.removedWith == "Deleted")
                #expect(try await catalog.jobs(videoId: done.id).filter { $0.kind == .removeFiles }.map(\.state) == [.queued])
                // The first step of a deletion alone, as a node that stopped right after it leaves it (the job due now).
                let ticket = try await harness.media.createUploadVideo(.init(title: "stopped", fileName: "stopped.mp4"))
                let s3 = harness.server.client(ticket.auth.credentials)
                let bytes = [UInt8](repeating: 1, count: 3000)
                #expect(try await s3.put(ticket.address.bucket, ticket.address.fileName, bytes).status == 200)
                try await catalog.updateVideo(ticket.id) { video in
                    video.status = "Deleted"
                    return .save(enqueue: [MediaJob(videoId: video.videoId, kind: .removeFiles)], cancelJobs: true)
                }
                let root = harness.server.client()
                try await Self.eventually("the removal job removes the file") {
                    try await root.get(ticket.address.bucket, ticket.address.fileName).status == 404
                }
                try await Self.eventually("VideoDeleted is sent") {
                    await receiver.recorder.deliveries.contains { delivery in
                        let json = (try? JSONSerialization.jsonObject(with: Data(delivery.body))) as? [String: Any]
                        return delivery.type == "VideoDeleted" && (json?["payload"] as? [String: Any])?["VideoId"] as? String == ticket.id
                    }
                }
                // The event can arrive before the worker has recorded its job's end.
                try await Self.eventually("the removal job is recorded as done") {
                    try await catalog.jobs(videoId: ticket.id).filter { $0.kind == .removeFiles }.map(\.state) == [.succeeded]
                }

                // A retried DeleteVideo: a finished deletion is answered as done, with nothing sent again; one a stopped
                // node left finishes at once (file gone, VideoDeleted sent, the removal recorded).
                try await harness.media.deleteVideos([done.id])
                let again = try await harness.media.createUploadVideo(.init(title: "again", fileName: "again.mp4"))
                let againClient = harness.server.client(again.auth.credentials)
                #expect(try await againClient.put(again.address.bucket, again.address.fileName, bytes).status == 200)
                try await catalog.updateVideo(again.id) { video in
                    video.status = "Deleted"
                    return .save(enqueue: [Self.later(again.id)], cancelJobs: true)
                }
                try await harness.media.deleteVideos([again.id])
                #expect(try await root.get(again.address.bucket, again.address.fileName).status == 404)
                #expect(try await catalog.video(again.id)?.removedWith == "Deleted")
                try await Self.eventually("the retried deletion's VideoDeleted is sent") {
                    await receiver.recorder.deliveries.contains { delivery in
                        let json = (try? JSONSerialization.jsonObject(with: Data(delivery.body))) as? [String: Any]
                        return delivery.type == "VideoDeleted" && (json?["payload"] as? [String: Any])?["VideoId"] as? String == again.id
                    }
                }
                // Events go in order: the first deletion's VideoDeleted came before, once.
                let doneEvents = await receiver.recorder.deliveries.filter { delivery in
                    let json = (try? JSONSerialization.jsonObject(with: Data(delivery.body))) as? [String: Any]
                    return delivery.type == "VideoDeleted" && (json?["payload"] as? [String: Any])?["VideoId"] as? String == done.id
                }
                #expect(doneEvents.count == 1)
            }
        }
    }

    /// A removal job due in an hour: the test's own retry, not the job, must finish the deletion.
    static func later(_ videoId: String) -> MediaJob {
        MediaJob(videoId: videoId, kind: .removeFiles, runAt: Date().addingTimeInterval(3600))
    }

    @Test("the events that tell of a status change are stored with it: a worker none of whose writes to the outbox after a change could be made (a node stopped right after each change) still leaves every event of the video's processing, in order")
    func eventsWithTheirChange() async throws {
        try await WebhookReceiver.with { receiver in
            try await MediaHarness.with(webhook: receiver.url, configure: { $0.mediaProcessing.workers = 0 }) { harness in
                let server = harness.server.server
                let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 2))
                var configuration = server.configuration.mediaProcessing
                configuration.workers = 1
                // One worker runs the jobs in their order (the quick lane would take the cover beside the transcode).
                configuration.quickLane = false
                configuration.pollInterval = .milliseconds(50)
                configuration.idleScheduling = false
                let logger = Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() })
                let tools: MediaTools = try #require(server.mediaTools)
                let pipeline = MediaPipeline(
                    catalog: server.mediaCatalog, store: server.store,
                    webhooks: WebhookOutbox(catalog: StoppedWebhookStore(), configuration: server.webhooks.configuration),
                    tools: tools, configuration: configuration,
                    workDirectory: harness.server.dataDirectory + "/stopped-work", logger: logger)
                let worker = MediaWorkerService(
                    queue: server.mediaCatalog, pipeline: pipeline, running: RunningJobs(), configuration: configuration,
                    logger: logger)
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await worker.run() }
                    let status = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"]).status
                    tasks.cancelAll()
                    #expect(status == "Normal")
                }
                try await Self.eventually("TranscodeComplete is delivered") {
                    await receiver.recorder.deliveries.contains { $0.type == "TranscodeComplete" }
                }
                // What one worker that wrote them all sends: the source published first, then the ladder.
                #expect(await receiver.recorder.deliveries.compactMap(\.type) == [
                    "FileUploadComplete", "VideoAnalysisComplete", "SnapshotComplete", "VideoPlayable", "StreamTranscodeComplete",
                    "StreamTranscodeComplete", "StreamTranscodeComplete", "StreamTranscodeComplete", "StreamTranscodeComplete",
                    "StreamTranscodeComplete", "TranscodeComplete",
                ])
            }
        }
    }

    @Test("a transcode run that lost its claim (another worker took the job over) removes the first stream it stored once its publish is refused, and stops before encoding the ladder; one stopped while storing its first stream, or while saving it in the catalog, removes it too; a run stopped while saving its ladder publishes it")
    func refusedFirstStreamIsRemoved() async throws {
        try await MediaHarness.with(configure: { $0.mediaProcessing.workers = 0 }) { harness in
            let server = harness.server.server
            let catalog = server.mediaCatalog
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 4))
            let tools = try #require(server.mediaTools)
            func pipeline(stoppingAfter stop: (@Sendable (String) -> Bool)? = nil) -> MediaPipeline {
                MediaPipeline(
                    catalog: catalog, store: stop.map { StoppingStore(base: server.store, stopAfter: $0) } ?? server.store,
                    webhooks: server.webhooks, tools: tools, configuration: server.configuration.mediaProcessing,
                    workDirectory: harness.server.dataDirectory + "/runs",
                    logger: Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() }))
            }
            func claim(_ kind: MediaJobKind, as worker: String) async throws -> MediaJob {
                try #require(try await catalog.claim(worker: worker, lease: .seconds(600), now: Date(), kinds: [kind]))
            }
            let probe = try await claim(.probe, as: "prober")
            try await JobLease.$current.withValue(JobLease(jobId: probe.id, worker: "prober")) {
                try await pipeline().run(probe) { _ in }
            }
            // The transcode is claimed by the worker that took it over; this run holds a claim it lost.
            let transcode = try await claim(.transcode, as: "second")
            let progress = ProgressValues()
            func run(as worker: String, _ pipeline: MediaPipeline) async throws {
                try await JobLease.$current.withValue(JobLease(jobId: transcode.id, worker: worker)) {
                    try await pipeline.run(transcode) { await progress.add($0) }
                }
            }
            await #expect(throws: CancellationError.self) { try await run(as: "first", pipeline()) }
            let reported = await progress.values
            #expect(reported.isEmpty, "the ladder was encoded: \(reported)")
            #expect(try await harness.keys(under: "video/\(videoId)/out/") == [])
            #expect(try await catalog.video(videoId)?.playableAt == nil)

            // Stopped right after storing the first file of its first stream, or its last (the master playlist: the
            // run is then saving the stream in the catalog): nothing it stored is left.
            let stops: KeyValuePairs<String, @Sendable (String) -> Bool> = [
                "the first file": { _ in true }, "the master playlist": { $0.hasSuffix("/master.m3u8") },
            ]
            for stop in stops {
                let stopped = Task { try await run(as: "first", pipeline(stoppingAfter: stop.value)) }
                await #expect(throws: CancellationError.self, "stopped after \(stop.key)") { try await stopped.value }
                #expect(try await harness.keys(under: "video/\(videoId)/out/") == [], "stopped after \(stop.key)")
            }
            #expect(try await catalog.video(videoId)?.playableAt == nil)

            // The run that holds the claim, stopped right after storing its ladder's master playlist (the second one
            // under its prefix, after the first stream's): the ladder's save runs to its end, and the video is Normal.
            let masters = NIOLockedValueBox(0)
            let publishing = Task {
                try await run(as: "second", pipeline { key in
                    key.hasSuffix("/master.m3u8") && masters.withLockedValue { $0 += 1; return $0 == 2 }
                })
            }
            // (Cancelled once saved, the run may still end its clean-up of older prefixes, or stop in it.)
            _ = try? await publishing.value
            #expect(masters.withLockedValue { $0 } == 2, "the run was not stopped at its ladder's master playlist")
            let video = try #require(try await catalog.video(videoId))
            #expect(video.status == "Normal")
            let prefix = try #require(video.outputPrefix)
            let stored = try await harness.keys(under: prefix + "/")
            #expect(video.renditions?.allSatisfy { stored.contains(prefix + "/" + $0.path) } == true)
        }
    }

    /// The fractions a run reported.
    actor ProgressValues {
        var values: [Double] = []
        func add(_ value: Double) { values.append(value) }
    }

    @Test("deleting a video mid-transcode cancels its jobs, kills its ffmpeg (long before it would end) and removes every file it had")
    func deleteMidTranscode() async throws {
        try await MediaHarness.with(configure: { $0.mediaProcessing.templates = Self.slow }) { harness in
            let data = harness.server.dataDirectory
            let videoId = try await harness.upload(try await harness.fixture(.long, seconds: 60))
            try await Self.eventually("ffmpeg transcodes the video") {
                let status = try await harness.media.getVideoInfo(videoId: videoId).status
                return status == "Transcoding" && !MediaFixtures.ffmpegProcesses(mentioning: data).isEmpty
            }
            try await harness.media.deleteVideos([videoId])
            // Bounds for a loaded machine; the slow template's ffmpeg alone would run for minutes.
            try await Self.eventually("ffmpeg is gone", timeout: .seconds(15)) {
                MediaFixtures.ffmpegProcesses(mentioning: data).isEmpty
            }
            let jobs = try await harness.server.server.catalog.jobs(videoId: videoId)
            #expect(jobs.filter { $0.kind == .transcode }.map(\.state) == [.cancelled])
            // Every job is over but the removal job, due later, which finds the removal recorded and does nothing.
            #expect(jobs.filter { $0.kind != .removeFiles }.allSatisfy { $0.state.isFinished })
            #expect(try await harness.server.server.catalog.video(videoId)?.removedWith == "Deleted")
            try await Self.eventually("the job's working directory is removed", timeout: .seconds(30)) {
                ((try? FileManager.default.contentsOfDirectory(atPath: data + "/media-work")) ?? []).isEmpty
            }
            #expect(try await harness.keys(under: "video/\(videoId)/").isEmpty)
            await #expect(throws: FerryError.self) { try await harness.media.getVideoInfo(videoId: videoId) }
        }
    }

    @Test("ferry serve SIGKILLed mid-transcode takes its ffmpeg with it; after a restart the job is taken over at once (not when its 10-minute lease would have run out) and ends Normal, once, with nothing left over but the first stream it had published")
    func killMidTranscode() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let directory = TemporaryDirectory.make("ferry-media-kill")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let data = directory + "/data"
        let slowFile = directory + "/slow.json"
        let fastFile = directory + "/fast.json"
        try JSONEncoder().encode(Self.slow).write(to: URL(fileURLWithPath: slowFile))
        var fast = Self.slow
        fast.preset = "ultrafast"
        try JSONEncoder().encode(fast).write(to: URL(fileURLWithPath: fastFile))
        let root = Credentials(accessKeyId: "FKIAMEDIAKILL000", secretAccessKey: "media-kill-secret-0123456789")
        let environment = ["FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey]
        // A lease far longer than the test waits: the restarted server takes its killed job up at once all the same.
        let options = ["--media-workers", "1", "--media-lease", "600"]
        let source = try await MediaFixtures.make(.long, seconds: 20, in: directory)

        let first = try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: options + ["--transcode-templates", slowFile], environment: environment)
        var media = MediaServiceClient(endpoint: URL(string: first.endpoint)!, credentials: root)
        let ticket = try await media.createUploadVideo(.init(title: "Killed", fileName: "killed.mp4"))
        _ = try await ticket.objectStorageClient()
            .upload(file: URL(fileURLWithPath: source), bucket: ticket.address.bucket, key: ticket.address.fileName).result
        // The transcode's own ffmpeg, not the cover's (with one worker the snapshot job runs first, while the video is
        // already Transcoding): only the transcode's command line names a progress file.
        try await Self.eventually("ffmpeg transcodes the video") {
            let status = try await media.getVideoInfo(videoId: ticket.id).status
            return status == "Transcoding"
                && !Set(MediaFixtures.ffmpegProcesses(mentioning: data))
                    .isDisjoint(with: MediaFixtures.ffmpegProcesses(mentioning: "/progress.txt"))
        }
        // Let it write some of its output first. The first stream (the source, H.264 + AAC, packaged as it is) was
        // published before the ladder's encode started.
        try await Task.sleep(for: .milliseconds(500))
        let before = try await media.getVideoInfo(videoId: ticket.id)
        #expect(before.playable == true && before.status == "Transcoding")
        await first.stop(signal: SIGKILL)
        try await Self.eventually("the killed server's ffmpeg is gone", timeout: .seconds(3)) {
            MediaFixtures.ffmpegProcesses(mentioning: data).isEmpty
        }

        let second = try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: options + ["--transcode-templates", fastFile], environment: environment)
        media = MediaServiceClient(endpoint: URL(string: second.endpoint)!, credentials: root)
        try await Self.eventually("the video is Normal", timeout: .seconds(120)) {
            ["Normal", "TranscodeFail"].contains(try await media.getVideoInfo(videoId: ticket.id).status)
        }
        let info = try await media.getVideoInfo(videoId: ticket.id)
        #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
        let play = try await media.getPlayInfo(videoId: ticket.id)
        #expect(play.streams.map { "\($0.definition)/\($0.format)" }.sorted() == ["AUTO/m3u8", "AUTO/mpd", "LD/m3u8", "LD/mp4", "SQ/m3u8", "SQ/m4a"])
        let mp4 = try #require(play.stream(format: "mp4"))
        #expect(abs((try await MediaFixtures.probe(mp4.url).duration ?? 0) - 20) <= 0.15)
        let copy = directory + "/copy.mp4"
        try await MediaFixtures.ffmpeg(["-i", try #require(play.stream(format: "m3u8", definition: "AUTO")).url, "-c", "copy", copy])
        #expect(abs((try await MediaFixtures.probe(copy).duration ?? 0) - 20) <= 0.15)

        // One published set of outputs; nothing of the killed attempt in storage or in the working directory.
        let s3 = S3TestClient(
            endpoint: second.endpoint, credentials: SigV4Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        let listing = try await s3.send("GET", "/ferry-media", query: [("list-type", "2"), ("prefix", "video/\(ticket.id)/out/")])
        let keys = listing.text.components(separatedBy: "<Key>").dropFirst().compactMap { $0.components(separatedBy: "</Key>").first }
        #expect(!keys.isEmpty)
        #expect(Set(keys.map { $0.split(separator: "/")[3] }).count == 1, "\(keys)")
        // The first stream, published before the kill, is still there for players that started on it.
        #expect(keys.contains { $0.hasSuffix("/start/index.m3u8") }, "\(keys)")
        #expect(info.playableTime == before.playableTime)
        // A job removes its working directory once it ends, a moment after it published (and the cover job may still be
        // running when the video is Normal): wait for that, up to 30 s, then nothing may be left.
        let workDirectory = data + "/media-work"
        let deadline = ContinuousClock.now + .seconds(30)
        while !((try? FileManager.default.contentsOfDirectory(atPath: workDirectory)) ?? []).isEmpty,
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: workDirectory)) ?? []).isEmpty)
        await second.stop()
    }
}

/// A store that stops the task storing an object once it has stored it, when `stopAfter` says so of its key (as a
/// worker's task is cancelled when its job is deleted or its server shuts down); otherwise `base`.
private struct StoppingStore: ObjectStore {
    let base: any ObjectStore
    let stopAfter: @Sendable (String) -> Bool

    func putObject<Body: AsyncSequence & Sendable>(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag], body: Body,
        checksums: [ChecksumAlgorithm], condition: ObjectWriteCondition, verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        let stored = try await base.putObject(
            bucket: bucket, key: key, attributes: attributes, tags: tags, body: body, checksums: checksums,
            condition: condition, verify: verify, charge: charge)
        if stopAfter(key) { withUnsafeCurrentTask { $0?.cancel() } }
        return stored
    }

    func createBucket(_ name: String) async throws { try await base.createBucket(name) }
    func bucket(_ name: String) async throws -> BucketInfo { try await base.bucket(name) }
    func deleteBucket(_ name: String) async throws { try await base.deleteBucket(name) }
    func listBuckets() async throws -> [BucketInfo] { try await base.listBuckets() }
    func bucketConfiguration(_ name: String, _ kind: BucketConfigurationKind) async throws -> String? {
        try await base.bucketConfiguration(name, kind)
    }
    func setBucketConfiguration(_ name: String, _ kind: BucketConfigurationKind, _ document: String?) async throws {
        try await base.setBucketConfiguration(name, kind, document)
    }
    func listObjects(bucket: String, prefix: String, delimiter: String?, startAfter: String?, maxKeys: Int)
        async throws -> ObjectListing
    {
        try await base.listObjects(bucket: bucket, prefix: prefix, delimiter: delimiter, startAfter: startAfter, maxKeys: maxKeys)
    }
    func object(bucket: String, key: String) async throws -> ObjectInfo { try await base.object(bucket: bucket, key: key) }
    func readObject(_ object: ObjectInfo, range: ClosedRange<Int64>?) async throws
        -> AsyncThrowingStream<ByteBuffer, any Error>
    {
        try await base.readObject(object, range: range)
    }
    func copyObject(
        _ source: ObjectInfo, bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        condition: ObjectWriteCondition, charge: StorageCharge?
    ) async throws -> ObjectInfo {
        try await base.copyObject(
            source, bucket: bucket, key: key, attributes: attributes, tags: tags, condition: condition, charge: charge)
    }
    func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition) async throws {
        try await base.deleteObject(bucket: bucket, key: key, condition: condition)
    }
    func setObjectTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws {
        try await base.setObjectTags(tags, bucket: bucket, key: key, etag: etag)
    }
    func createMultipartUpload(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        checksumAlgorithm: ChecksumAlgorithm?, checksumType: String?, charge: StorageCharge?
    ) async throws -> MultipartUploadInfo {
        try await base.createMultipartUpload(
            bucket: bucket, key: key, attributes: attributes, tags: tags, checksumAlgorithm: checksumAlgorithm,
            checksumType: checksumType, charge: charge)
    }
    func multipartUpload(_ uploadId: String, bucket: String, key: String) async throws -> MultipartUploadInfo {
        try await base.multipartUpload(uploadId, bucket: bucket, key: key)
    }
    func uploadPart<Body: AsyncSequence & Sendable>(
        _ upload: MultipartUploadInfo, partNumber: Int, body: Body, checksums: [ChecksumAlgorithm],
        verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try await base.uploadPart(
            upload, partNumber: partNumber, body: body, checksums: checksums, verify: verify, charge: charge)
    }
    func uploadPartCopy(
        _ upload: MultipartUploadInfo, partNumber: Int, source: ObjectInfo, range: ClosedRange<Int64>?,
        checksums: [ChecksumAlgorithm], charge: StorageCharge?
    ) async throws -> PartInfo {
        try await base.uploadPartCopy(
            upload, partNumber: partNumber, source: source, range: range, checksums: checksums, charge: charge)
    }
    func listParts(_ upload: MultipartUploadInfo, after marker: Int, maxParts: Int) async throws
        -> (parts: [PartInfo], isTruncated: Bool)
    {
        try await base.listParts(upload, after: marker, maxParts: maxParts)
    }
    func listMultipartUploads(
        bucket: String, prefix: String, delimiter: String?, keyMarker: String, uploadIdMarker: String, maxUploads: Int
    ) async throws -> MultipartUploadListing {
        try await base.listMultipartUploads(
            bucket: bucket, prefix: prefix, delimiter: delimiter, keyMarker: keyMarker, uploadIdMarker: uploadIdMarker,
            maxUploads: maxUploads)
    }
    func completeMultipartUpload(
        _ upload: MultipartUploadInfo, parts: [CompleteMultipartUpload.Part], fullObjectChecksums: [String: String],
        objectSize: Int64?, condition: ObjectWriteCondition
    ) async throws -> ObjectInfo {
        try await base.completeMultipartUpload(
            upload, parts: parts, fullObjectChecksums: fullObjectChecksums, objectSize: objectSize, condition: condition)
    }
    func completedUpload(_ uploadId: String) async throws -> CompletedUpload? { try await base.completedUpload(uploadId) }
    func abortMultipartUpload(_ upload: MultipartUploadInfo, expired: Bool) async throws {
        try await base.abortMultipartUpload(upload, expired: expired)
    }
    func abortMultipartUploads(initiatedBefore date: Date) async throws -> Int {
        try await base.abortMultipartUploads(initiatedBefore: date)
    }
    func usage(owner: String) async throws -> StorageUsage { try await base.usage(owner: owner) }
}

/// The outbox of a node that stopped: nothing can be written to it or read from it.
private struct StoppedWebhookStore: WebhookStore {
    struct Stopped: Error {}
    func insertWebhookEvent(_ stored: StoredWebhookEvent) async throws { throw Stopped() }
    func nextPendingWebhookEvent() async throws -> StoredWebhookEvent? { throw Stopped() }
    func undeliveredWebhookEvents() async throws -> [WebhookEvent] { throw Stopped() }
    func webhookBacklog() async throws -> WebhookBacklog { throw Stopped() }
    func markWebhookEventDelivered(_ id: String, at date: Date) async throws { throw Stopped() }
    func recordWebhookAttemptFailure(_ id: String, error: String, nextAttemptAt: Date?, now: Date) async throws {
        throw Stopped()
    }
    func recentWebhookEvents(limit: Int) async throws -> [WebhookDelivery] { throw Stopped() }
    func retryWebhookEvent(_ id: String, now: Date) async throws -> Bool { throw Stopped() }
}
