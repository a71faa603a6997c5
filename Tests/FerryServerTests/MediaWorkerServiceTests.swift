import FerryCore
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing

@testable import FerryMedia
@testable import FerryServer

#if canImport(Glibc)
import Glibc
#endif

/// How a test stops the worker service.
enum WorkerStop: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The service group shuts down gracefully.
    case gracefulShutdown
    /// The task running the service is cancelled.
    case cancellation
    var testDescription: String { rawValue }
}

/// The media worker on its own: one video waiting to be probed in a fresh data directory, the real pipeline, and an
/// "ffprobe" that writes its process id to a file and then runs until it is killed (a tool busy with a long file).
struct WorkerHarness: Sendable {
    let server: FerryServer
    let directory: String
    /// The probe job the video waits for.
    let job: MediaJob
    let tools: MediaTools
    var pidFile: String { directory + "/tool.pid" }
    /// The file that ends a finishing tool.
    var finishFile: String { directory + "/tool.finish" }

    /// Runs `body` with a server whose catalog holds a video at `UploadSucc` and its probe job; with `source`, the
    /// video's file is stored too. With `catalogURL` the catalog is that PostgreSQL database, its client running
    /// while `body` runs. With `finishing`, the tool ends (with no output) once the file ``finishFile`` exists.
    /// Without `quickLane`, one worker alone claims jobs. A job given back waits `retryDelay`.
    static func with<T: Sendable>(
        source: Bool = true, catalogURL: String? = nil, lease: Duration = .seconds(3), finishing: Bool = false,
        quickLane: Bool = true, retryDelay: Duration = .seconds(5), _ body: @Sendable (WorkerHarness) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory.make("ferry-worker")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = FerryServerConfiguration(dataDirectory: directory + "/data")
        configuration.rootCredentials = SigV4Credentials(accessKeyId: "FKIATESTROOT0000", secretAccessKey: "test-root-secret")
        configuration.catalogURL = catalogURL
        configuration.mediaProcessing.workers = 1
        configuration.mediaProcessing.lease = lease
        configuration.mediaProcessing.pollInterval = .milliseconds(50)
        configuration.mediaProcessing.idleScheduling = false
        configuration.mediaProcessing.quickLane = quickLane
        configuration.mediaProcessing.retryDelay = retryDelay
        let server = try await FerryServer.open(configuration: configuration, environment: [:])
        let client = server.postgres.map { postgres in Task { await postgres.run() } }
        func stopClient() async {
            client?.cancel()
            await client?.value
        }

        do {
            // The tool: its pid in a file (written whole, then renamed), then a long wait in the same process.
            let script = directory + "/media-tool"
            let wait = finishing ? "while [ ! -e '\(directory)/tool.finish' ]; do sleep 0.1; done\nexit 1" : "exec sleep 600"
            let text = "#!/bin/sh\necho $$ > '\(directory)/tool.pid.tmp'\nmv '\(directory)/tool.pid.tmp' '\(directory)/tool.pid'\n\(wait)\n"
            try Data(text.utf8).write(to: URL(fileURLWithPath: script))
            chmod(script, 0o755)

            let bucket = configuration.mediaBucket
            let key = "video/v1/source.mp4"
            try await server.store.createBucket(bucket)
            if source {
                _ = try await server.store.putObject(
                    bucket: bucket, key: key, attributes: ObjectAttributes(), tags: [],
                    body: AsyncStream<ByteBuffer> { continuation in
                        continuation.yield(ByteBuffer(string: "not really a video"))
                        continuation.finish()
                    },
                    checksums: [], condition: .none, verify: { _ in })
            }
            let now = Date()
            try await server.mediaCatalog.saveVideo(
                VideoRecord(
                    videoId: "v1", title: "Stuck", fileName: "source.mp4", status: VideoStatus.uploadSucc, bucket: bucket,
                    key: key, owner: "FKIATESTROOT0000", createdAt: now, updatedAt: now))
            let job = MediaJob(videoId: "v1", kind: .probe, maxAttempts: 3, runAt: now)
            try await server.mediaCatalog.enqueue([job])
            let result = try await body(
                WorkerHarness(
                    server: server, directory: directory, job: job, tools: MediaTools(ffmpeg: script, ffprobe: script)))
            await stopClient()
            return result
        } catch {
            await stopClient()
            throw error
        }
    }

    /// A worker service over `queue` (the catalog when nil), logging to `logger`.
    func worker(queue: (any JobQueue)? = nil, logger: Logger = Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() }))
        -> MediaWorkerService
    {
        let configuration = server.configuration.mediaProcessing
        let pipeline = MediaPipeline(
            catalog: server.mediaCatalog, store: server.store, webhooks: server.webhooks, tools: tools,
            configuration: configuration, workDirectory: directory + "/work", logger: logger)
        return MediaWorkerService(
            queue: queue ?? server.mediaCatalog, pipeline: pipeline, running: RunningJobs(), configuration: configuration,
            logger: logger)
    }

    /// The running tool's process id, once it has started.
    func toolPid() async throws -> Int32 {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                return pid
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw WorkerTestTimeout(what: "the job's tool started")
    }

    /// Whether a process exists (a zombie counts: it was not reaped).
    static func exists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }

    /// Waits until `condition` holds; throws when `timeout` passes first.
    static func eventually(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool)
        async throws
    {
        let deadline = ContinuousClock.now + timeout
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw WorkerTestTimeout(what: what) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

struct WorkerTestTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting until \(what)" }
}

/// A job queue that passes everything to the catalog, records how the worker ended jobs, and fails the writes it is
/// told to.
final class ObservedQueue: JobQueue, @unchecked Sendable {
    let base: any JobQueue
    let failing: Set<String>
    // Every access to `calls` holds `lock`.
    private let lock = NSLock()
    private var calls: [String] = []

    init(base: any JobQueue, failing: Set<String> = []) {
        self.base = base
        self.failing = failing
    }

    struct Refused: Error, CustomStringConvertible {
        var description: String { "the catalog is unavailable" }
    }

    /// The job-state writes asked for, in order: `complete`, `fail`, `retry`, `release` and the job's id.
    var endings: [String] { lock.withLock { calls } }

    private func record(_ change: String, _ id: String) throws {
        lock.withLock { calls.append("\(change) \(id)") }
        if failing.contains(change) { throw Refused() }
    }

    func enqueue(_ jobs: [MediaJob]) async throws { try await base.enqueue(jobs) }
    func claim(worker: String, lease: Duration, now: Date, kinds: [MediaJobKind]?) async throws -> MediaJob? {
        try await base.claim(worker: worker, lease: lease, now: now, kinds: kinds)
    }
    func heartbeat(_ id: String, worker: String, lease: Duration, progress: Double?, now: Date) async throws -> Bool {
        try await base.heartbeat(id, worker: worker, lease: lease, progress: progress, now: now)
    }
    func complete(_ id: String, worker: String, now: Date) async throws -> Bool {
        try record("complete", id)
        return try await base.complete(id, worker: worker, now: now)
    }
    func fail(_ id: String, worker: String, error: String, retryAt: Date?, now: Date) async throws -> Bool {
        try record(retryAt == nil ? "fail" : "retry", id)
        return try await base.fail(id, worker: worker, error: error, retryAt: retryAt, now: now)
    }
    func release(_ id: String, worker: String, runAt: Date, reason: String?, now: Date) async throws -> Bool {
        try record("release", id)
        return try await base.release(id, worker: worker, runAt: runAt, reason: reason, now: now)
    }
    func cancelJobs(videoId: String, now: Date) async throws -> [MediaJob] {
        try await base.cancelJobs(videoId: videoId, now: now)
    }
    func jobs(videoId: String) async throws -> [MediaJob] { try await base.jobs(videoId: videoId) }
    func backlog(now: Date) async throws -> JobBacklog { try await base.backlog(now: now) }
    func job(_ id: String) async throws -> MediaJob? { try await base.job(id) }
}

@Suite("Media worker: a job and its lease in one task group", .serialized, .timeLimit(.minutes(10)))
struct MediaWorkerServiceTests {
    @Test("stopping the worker kills the running job's tool and gives the job back, claimable at once", arguments: WorkerStop.allCases)
    func stopKillsTheTool(_ stop: WorkerStop) async throws {
        try await WorkerHarness.with { harness in
            let queue = ObservedQueue(base: harness.server.mediaCatalog)
            let worker = harness.worker(queue: queue)
            let logger = Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() })
            let group = ServiceGroup(configuration: .init(services: [worker], logger: logger))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                switch stop {
                case .gracefulShutdown: tasks.addTask { try await group.run() }
                case .cancellation: tasks.addTask { try await worker.run() }
                }
                let pid = try await harness.toolPid()
                #expect(WorkerHarness.exists(pid))
                switch stop {
                case .gracefulShutdown: await group.triggerGracefulShutdown()
                case .cancellation: tasks.cancelAll()
                }
                // The service returns only once its job has ended: by then the tool is killed and reaped.
                try await tasks.waitForAll()
                #expect(!WorkerHarness.exists(pid), "the tool (pid \(pid)) outlived the worker")
            }
            #expect(queue.endings == ["release \(harness.job.id)"])
            let stored = try #require(try await harness.server.mediaCatalog.job(harness.job.id))
            #expect(stored.state == .queued && stored.attempts == 0 && stored.leaseOwner == nil)
            // Claimable again now, not only once the old lease has run out.
            let again = try await harness.server.mediaCatalog.claim(worker: "next", lease: .seconds(60), now: Date())
            #expect(again?.id == harness.job.id)
        }
    }

    @Test("a transcode holding the only worker delays no other video's probe: the quick lane runs it beside")
    func quickLane() async throws {
        try await WorkerHarness.with { harness in
            let catalog = harness.server.mediaCatalog
            // The probe is put back in the queue once the transcode runs.
            _ = try await catalog.cancelJobs(videoId: "v1", now: Date())
            let bucket = harness.server.configuration.mediaBucket
            let key = "video/v0/source.mp4"
            _ = try await harness.server.store.putObject(
                bucket: bucket, key: key, attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: "a long video"))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            var long = VideoRecord(
                videoId: "v0", title: "Long", fileName: "source.mp4", status: VideoStatus.transcoding, bucket: bucket,
                key: key, owner: "FKIATESTROOT0000", createdAt: Date(), updatedAt: Date())
            var info = MezzanineInfo(size: 12)
            (info.duration, info.width, info.height, info.fps) = (30, 640, 480, 25)
            (info.videoCodec, info.formatName) = ("mpeg4", "avi")
            long.mezzanine = info
            try await catalog.saveVideo(long)
            let transcode = MediaJob(videoId: "v0", kind: .transcode, maxAttempts: 3, runAt: Date())
            try await catalog.enqueue([transcode])
            let worker = harness.worker()
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await worker.run() }
                // The transcode's ffmpeg runs (and runs on: the tool waits to be killed).
                let encoding = try await harness.toolPid()
                #expect(try await catalog.job(transcode.id)?.state == .running)
                let probe = MediaJob(videoId: "v1", kind: .probe, maxAttempts: 3, runAt: Date())
                try await catalog.enqueue([probe])
                try await WorkerHarness.eventually("the probe's ffprobe started beside the transcode") {
                    let pid = (try? String(contentsOfFile: harness.pidFile, encoding: .utf8)).flatMap {
                        Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
                    }
                    return pid != nil && pid != encoding
                }
                #expect(WorkerHarness.exists(encoding), "the transcode's tool stopped")
                let running = try #require(try await catalog.job(probe.id))
                #expect(running.state == .running && running.leaseOwner?.hasSuffix("-quick") == true, "\(running)")
                tasks.cancelAll()
                try await tasks.waitForAll()
            }
        }
    }

    @Test("a job whose worker died on each of its attempts fails for good at the next claim, naming the attempts that ran, and the work files a dead worker left here go")
    func diedTooOften() async throws {
        try await WorkerHarness.with { harness in
            let catalog = harness.server.mediaCatalog
            // Three claims whose workers died, the last leaving its work files; its lease still runs when the worker
            // starts (so the start's sweep keeps them) and ends before the worker's claim.
            for lease in [Duration.milliseconds(1), .milliseconds(1), .seconds(2)] {
                _ = try #require(try await catalog.claim(worker: "dead", lease: lease, now: Date()))
                try await Task.sleep(for: .milliseconds(20))
            }
            let left = harness.directory + "/work/" + harness.job.id
            try FileManager.default.createDirectory(atPath: left, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: left + "/source.mp4", contents: Data(repeating: 1, count: 1000)))
            let worker = harness.worker()
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await worker.run() }
                try await WorkerHarness.eventually("the job failed for good") {
                    try await catalog.job(harness.job.id)?.state == .failed
                }
                tasks.cancelAll()
            }
            let video = try #require(try await catalog.video("v1"))
            #expect(video.status == VideoStatus.transcodeFail && video.errorCode == "ProcessingFailed")
            #expect(video.errorMessage == "Processing failed 3 times; last: the worker running it stopped", "\(video.errorMessage ?? "")")
            #expect(!FileManager.default.fileExists(atPath: left))
        }
    }

    /// Runs the harness's job on a worker, does `elsewhere` to the job in the catalog (as another node would) and
    /// waits for the worker to say `told`, which it learns at its next heartbeat (a third of the 3 s lease): its tool
    /// must then be dead, and the worker must have written no ending of its own. What the worker logged.
    private func stoppedElsewhere(_ harness: WorkerHarness, told: String, _ elsewhere: () async throws -> Void)
        async throws -> LogRecorder
    {
        let queue = ObservedQueue(base: harness.server.mediaCatalog)
        let log = LogRecorder()
        let worker = harness.worker(queue: queue, logger: log.logger())
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await worker.run() }
            let pid = try await harness.toolPid()
            try await elsewhere()
            try await WorkerHarness.eventually("the worker says: \(told)", timeout: .seconds(15)) {
                log.records.contains { $0.message == told }
            }
            #expect(!WorkerHarness.exists(pid), "the tool (pid \(pid)) outlived the job")
            tasks.cancelAll()
            try await tasks.waitForAll()
        }
        #expect(queue.endings.isEmpty, "\(queue.endings)")
        return log
    }

    @Test("a heartbeat that finds the lease taken stops the job: its tool is killed and no completion is written")
    func lostLeaseStopsTheJob() async throws {
        try await WorkerHarness.with { harness in
            _ = try await stoppedElsewhere(harness, told: "media job stopped: its lease was lost") {
                // Another worker takes the job over, as it may once the lease looks expired.
                let thief = try await harness.server.mediaCatalog.claim(
                    worker: "thief", lease: .seconds(600), now: Date().addingTimeInterval(3600))
                #expect(thief?.id == harness.job.id)
            }
            let stored = try #require(try await harness.server.mediaCatalog.job(harness.job.id))
            #expect(stored.state == .running && stored.leaseOwner == "thief")
        }
    }

    @Test("a job cancelled through another node (its video deleted there) stops at this worker's next heartbeat, its tool killed, and is told as cancelled, not as a lost lease")
    func jobCancelledElsewhereStops() async throws {
        try await WorkerHarness.with { harness in
            let log = try await stoppedElsewhere(harness, told: "media job stopped: its video was deleted") {
                // Cancelled in the catalog alone, as a DeleteVideo answered by another node cancels it.
                let cancelled = try await harness.server.mediaCatalog.cancelJobs(videoId: harness.job.videoId, now: Date())
                #expect(cancelled.map(\.id) == [harness.job.id])
            }
            #expect(!log.records.contains { $0.message == "media job stopped: its lease was lost" })
            #expect(try await harness.server.mediaCatalog.job(harness.job.id)?.state == .cancelled)
        }
    }

    @Test("a snapshot run that read the video before another run of its job published the cover, and whose save is refused once that run took the job over, deletes only its own file: the published cover stays")
    func stalledSnapshotLeavesTheCover() async throws {
        try await WorkerHarness.with { harness in
            let catalog = harness.server.mediaCatalog
            // An "ffmpeg" that writes a picture to its output (its last argument) and ends.
            let tool = harness.directory + "/picture-tool"
            try Data("#!/bin/sh\nfor last; do :; done\nprintf 'picture' > \"$last\"\n".utf8).write(to: URL(fileURLWithPath: tool))
            chmod(tool, 0o755)
            let pipeline = MediaPipeline(
                catalog: catalog, store: harness.server.store, webhooks: harness.server.webhooks,
                tools: MediaTools(ffmpeg: tool, ffprobe: tool), configuration: harness.server.configuration.mediaProcessing,
                workDirectory: harness.directory + "/work", logger: Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() }))
            let snapshot = MediaJob(videoId: "v1", kind: .snapshot, maxAttempts: 3, runAt: Date())
            try await catalog.enqueue([snapshot])
            let claimed = try await catalog.claim(worker: "second", lease: .seconds(600), now: Date(), kinds: [.snapshot])
            #expect(claimed?.id == snapshot.id)
            // The run that took the job over publishes its cover.
            try await JobLease.$current.withValue(JobLease(jobId: snapshot.id, worker: "second")) {
                try await pipeline.run(snapshot) { _ in }
            }
            let published = try #require(try await catalog.video("v1")?.snapshotKey)
            let bucket = harness.server.configuration.mediaBucket
            #expect(try await harness.server.store.object(bucket: bucket, key: published).size == 7)

            // The stalled run read the video before that save (no cover yet), then stores its picture and saves under
            // the claim it lost: its save is refused and it deletes what it stored.
            let seen = try await catalog.updateVideo("v1") { video in
                video.snapshotKey = nil
                video.snapshotImageId = nil
                return .save()
            }
            #expect(seen?.snapshotKey == nil)
            try await JobLease.$current.withValue(JobLease(jobId: snapshot.id, worker: "first")) {
                try await pipeline.run(snapshot) { _ in }
            }
            #expect(try await catalog.video("v1")?.snapshotKey == nil, "the stalled run's save was not refused")
            let left = try await harness.server.store.listObjects(
                bucket: bucket, prefix: "video/v1/snapshots/", delimiter: nil, startAfter: nil, maxKeys: 10)
            #expect(left.objects.map(\.key) == [published], "\(left.objects.map(\.key))")
        }
    }

    @Test("a job-state write that fails is logged with the job's id", arguments: ["complete", "retry", "release"])
    func failedStateWriteIsLogged(_ change: String) async throws {
        // complete: the video is gone, so the job has nothing to do; retry: its source is missing, an error the worker
        // retries; release: the worker stops while the job runs.
        try await WorkerHarness.with(source: change != "retry") { harness in
            if change == "complete" {
                _ = try await harness.server.mediaCatalog.updateVideo("v1") { video in
                    video.status = VideoStatus.deleted
                    return .save()
                }
            }
            let queue = ObservedQueue(base: harness.server.mediaCatalog, failing: [change])
            let log = LogRecorder()
            let worker = harness.worker(queue: queue, logger: log.logger())
            let group = ServiceGroup(
                configuration: .init(services: [worker], logger: Logger(label: "ferry.test", factory: { _ in SwiftLogNoOpLogHandler() })))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                if change == "release" {
                    _ = try await harness.toolPid()
                    await group.triggerGracefulShutdown()
                }
                try await WorkerHarness.eventually("the failed write is logged") {
                    log.records.contains { $0.message == "media job state not saved" }
                }
                if change != "release" { await group.triggerGracefulShutdown() }
                try await tasks.waitForAll()
            }
            let record = try #require(log.records.first { $0.message == "media job state not saved" })
            #expect(record.level == .warning)
            #expect(record.metadata["ferry.job-id"] == harness.job.id)
            #expect(record.metadata["ferry.job-change"] == change)
            #expect(record.metadata["error"] == "the catalog is unavailable")
            #expect(queue.endings.first == "\(change) \(harness.job.id)")
        }
    }

    /// How a catalog outage reaches a running job.
    enum Outage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// The lease cannot be renewed while the tool runs (a 3 s lease: the first failed renewal takes 5 s).
        case renewal
        /// The tool ends during the outage and the pipeline's next catalog write fails (a 30 s lease that outlasts it).
        case failure
        var testDescription: String { rawValue }
    }

    @Test("a PostgreSQL outage costs a running job no attempt: it is given back once the catalog answers again", arguments: Outage.allCases)
    func outageCostsNoAttempt(_ outage: Outage) async throws {
        try await PostgresServer.withServer { postgres, url in
            // One worker: a second one (the quick lane) would take over the job whose lease ran out in the outage
            // (an attempt, as for a worker that died) before the first could give it back.
            try await WorkerHarness.with(
                catalogURL: url, lease: outage == .renewal ? .seconds(3) : .seconds(30), finishing: outage == .failure,
                // A job given back after its tool failed waits a minute: still queued when this reads it, however late.
                quickLane: false, retryDelay: .seconds(60)
            ) { harness in
                let log = LogRecorder()
                let worker = harness.worker(logger: log.logger())
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask { try await worker.run() }
                    let pid = try await harness.toolPid()
                    try FileManager.default.removeItem(atPath: harness.pidFile)
                    await postgres.stopServer(mode: "immediate")
                    // Either the worker stops the job when it cannot renew the lease, or the tool ends.
                    if outage == .failure { try Data().write(to: URL(fileURLWithPath: harness.finishFile)) }
                    try await WorkerHarness.eventually("the tool has ended", timeout: .seconds(60)) { !WorkerHarness.exists(pid) }
                    // The job's state cannot be written until PostgreSQL is back: the worker keeps trying.
                    try await Task.sleep(for: .seconds(8))
                    try await postgres.startServer()
                    switch outage {
                    case .renewal:
                        // Given back due at once, the job is claimed again: its second claim is its first attempt.
                        _ = try await harness.toolPid()
                        let job = try #require(try await harness.server.mediaCatalog.job(harness.job.id))
                        #expect(job.state == .running && job.attempts == 1, "\(job.state) after \(job.attempts) attempts")
                    case .failure:
                        try await WorkerHarness.eventually("the job is given back", timeout: .seconds(60)) {
                            log.records.contains { $0.message == "media job stopped by an outage or a full disk; it will be retried" }
                        }
                        let job = try #require(try await harness.server.mediaCatalog.job(harness.job.id))
                        #expect(job.state == .queued && job.attempts == 0, "\(job.state) after \(job.attempts) attempts")
                        // Due after the retry delay from when it was given back, whenever this reads it.
                        #expect(job.runAt.timeIntervalSince(job.updatedAt) >= 59.5, "due \(job.runAt), given back \(job.updatedAt)")
                        let record = try #require(log.records.first { $0.message == "media job stopped by an outage or a full disk; it will be retried" })
                        #expect(record.metadata["ferry.job-id"] == harness.job.id)
                    }
                    #expect(!log.records.contains { $0.message == "media job state not saved" })
                    tasks.cancelAll()
                    try await tasks.waitForAll()
                }
            }
        }
    }
}
