import FerryStorage
import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The jobs this process is running, by video, so that deleting a video stops its ffmpeg at once (other nodes notice
/// at their next heartbeat).
package final class RunningJobs: Sendable {
    private let tasks = NIOLockedValueBox<[String: [String: @Sendable () -> Void]]>([:])

    package init() {}

    /// Records a running job's way to stop it.
    func register(videoId: String, jobId: String, cancel: @escaping @Sendable () -> Void) {
        tasks.withLockedValue { $0[videoId, default: [:]][jobId] = cancel }
    }

    /// Forgets a job that ended.
    func unregister(videoId: String, jobId: String) {
        tasks.withLockedValue {
            $0[videoId]?[jobId] = nil
            if $0[videoId]?.isEmpty == true { $0[videoId] = nil }
        }
    }

    /// Stops every job of a video running here.
    func cancel(videoId: String) {
        for cancel in tasks.withLockedValue({ Array(($0[videoId] ?? [:]).values) }) { cancel() }
    }

    /// How many jobs run here.
    package var count: Int { tasks.withLockedValue { $0.values.reduce(0) { $0 + $1.count } } }
}

/// Runs media jobs with a bounded number of workers until the service group shuts down.
///
/// Besides the configured workers, which take any job, one more (the quick lane) takes every job but transcodes
/// (``MediaPipeline/quickKinds``): a probe, a cover or a removal never waits for a long transcode to end. Where two
/// workers may claim a job, one whose lease ran out during an outage can be taken over by the other (an attempt, as
/// for a worker that died) before its own worker gives it back.
///
/// Each worker claims the oldest due job with a lease and runs it in one task group with its lease's heartbeat,
/// which renews the lease every third of it: whichever ends first ends the other. The job ends done, retried after a
/// backoff (a failure that is not the file's fault), or failed for good once its attempts run out. A job whose lease
/// is lost is stopped at once, its ffmpeg killed, and nothing is written for it: the catalog answered that this worker
/// no longer holds it (its video was deleted, or another worker took it over). Deleting a video stops its jobs on this
/// node at once (``RunningJobs``). On graceful shutdown, or when the service's task is cancelled, a running job's
/// ffmpeg is killed and the job is given back to the queue without counting the attempt.
///
/// An outage is not the job's fault either: a job that failed because the catalog or the object store did not answer
/// (``FerryDomainError/Code/storeUnavailable``) is given back for after the retry delay, and one whose lease renewals
/// failed until it could run out is stopped and given back, neither counting the attempt. A job-state write the
/// catalog cannot take for an outage is tried again every second for up to ``outageWait``; one that still fails, or
/// fails otherwise, is logged with the job's id, and the job's lease then runs out and another claim takes it over.
package struct MediaWorkerService: Service {
    let queue: any JobQueue
    let pipeline: MediaPipeline
    let running: RunningJobs
    let configuration: MediaProcessingConfiguration
    let logger: Logger
    /// How long a job-state write is tried again while the catalog is unavailable.
    static let outageWait = Duration.seconds(120)

    /// Creates the service.
    package init(
        queue: any JobQueue, pipeline: MediaPipeline, running: RunningJobs, configuration: MediaProcessingConfiguration,
        logger: Logger
    ) {
        self.queue = queue
        self.pipeline = pipeline
        self.running = running
        self.configuration = configuration
        self.logger = logger
    }

    package func run() async throws {
        await sweepWorkDirectory()
        let prefix = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(8).lowercased())"
        await withDiscardingTaskGroup { group in
            for index in 0..<max(configuration.workers, 1) {
                group.addTask { await work(as: "\(prefix)-\(index)", kinds: pipeline.claimedKinds) }
            }
            if configuration.quickLane, let quick = pipeline.quickKinds {
                group.addTask { await work(as: "\(prefix)-quick", kinds: quick) }
            }
        }
    }

    /// Removes the working directories of jobs no live worker holds (left by a process that died).
    func sweepWorkDirectory() async {
        let directory = pipeline.workDirectory
        try? PrivateFiles.directory(directory)
        let now = Date()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            let job: MediaJob?
            do {
                job = try await queue.job(entry)
            } catch {
                // Kept while the catalog cannot say whether the job still runs; the next start looks again.
                logger.warning(
                    "media job queue unavailable", metadata: ["ferry.job-id": .string(entry), "error": .string("\(error)")])
                continue
            }
            if job?.state != .running || (job?.leaseExpiresAt ?? now) <= now {
                try? FileManager.default.removeItem(atPath: directory + "/" + entry)
            }
        }
    }

    private func work(as worker: String, kinds: [MediaJobKind]?) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                if let job = try await queue.claim(worker: worker, lease: configuration.lease, now: Date(), kinds: kinds) {
                    await execute(job, worker: worker)
                    continue
                }
            } catch {
                logger.warning("media job queue unavailable", metadata: ["error": .string(String(describing: error))])
            }
            let wait = configuration.pollInterval
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
        }
    }

    /// How a running job's task group ended: the first of its tasks to end decides.
    private enum Ending: Sendable {
        /// The pipeline returned or threw.
        case finished(Result<Void, any Error>)
        /// The catalog said this worker no longer holds the job.
        case leaseLost
        /// Renewals failed until the lease could run out before the next one.
        case leaseUnrenewed
        /// Deleting the video stopped it (``RunningJobs/cancel(videoId:)``).
        case cancelled
        /// The service group is shutting down.
        case shutdown
        /// The worker's own task was cancelled.
        case interrupted
    }

    /// What a job given back without a counted attempt waits for, kept as its last error.
    enum Wait {
        static let space = "waiting for disk space on the server"
        static let store = "waiting for the store to answer"
        static let reasons: Set = [space, store]
    }

    private func execute(_ job: MediaJob, worker: String) async {
        var metadata: Logger.Metadata = [
            "ferry.job-id": .string(job.id), "ferry.job-kind": .string(job.kind.rawValue),
            // An image's removal job works on the image its id names.
            (job.kind == .removeImageFile ? "ferry.image-id" : "ferry.video-id"): .string(job.videoId),
            "ferry.attempt": "\(job.attempts)",
        ]
        if job.attempts > job.maxAttempts {
            // Claimed again after its worker died once too often: this claim runs nothing (it failed as often as the
            // attempts that ran), and what the dead worker left in its work directory here goes.
            var ran = job
            ran.attempts -= 1
            try? FileManager.default.removeItem(atPath: pipeline.workDirectory + "/" + job.id)
            let failure = job.lastError.flatMap { Wait.reasons.contains($0) ? nil : $0 }
            await giveUp(ran, worker: worker, reason: failure ?? "the worker running it stopped", metadata: metadata)
            return
        }
        logger.debug("media job started", metadata: metadata)
        let started = ContinuousClock.now
        let events = pipeline.events
        func ended(_ outcome: String) {
            events?.mediaJobEnded(kind: job.kind.rawValue, outcome: outcome, duration: ContinuousClock.now - started)
        }
        let progress = NIOLockedValueBox<Double?>(nil)
        let (stops, stop) = AsyncStream<Ending>.makeStream()
        running.register(videoId: job.videoId, jobId: job.id) { stop.yield(.cancelled) }
        let pipeline = self.pipeline
        let ending = await withGracefulShutdownHandler {
            await withTaskGroup(of: Ending.self) { group in
                group.addTask {
                    do {
                        // The job continues the trace of the request that enqueued it.
                        // Its record changes are saved only while this worker still holds the job (``JobLease``).
                        try await JobLease.$current.withValue(JobLease(jobId: job.id, worker: worker)) {
                            try await TraceContext.withSpan(
                                "media.job " + job.kind.rawValue, parent: job.traceParent, ofKind: .consumer
                            ) {
                                try await pipeline.run(job) { value in
                                    progress.withLockedValue { $0 = max($0 ?? 0, value) }
                                }
                            }
                        }
                        return .finished(.success(()))
                    } catch {
                        return .finished(.failure(error))
                    }
                }
                group.addTask { await heartbeat(job, worker: worker, progress: progress) }
                group.addTask {
                    for await reason in stops { return reason }
                    return .interrupted
                }
                // The first to end decides; the others are cancelled (the pipeline's ffmpeg is killed) and awaited.
                let first = await group.next() ?? .interrupted
                group.cancelAll()
                return first
            }
        } onGracefulShutdown: {
            stop.yield(.shutdown)
        }
        stop.finish()
        running.unregister(videoId: job.videoId, jobId: job.id)

        switch ending {
        case .finished(.success):
            if await record("complete", job, metadata, { try await $0.complete(job.id, worker: worker, now: Date()) }) {
                logger.debug("media job done", metadata: metadata)
                ended("done")
            }
        case .finished(.failure) where Task.isCancelled, .interrupted, .shutdown:
            // Not the job's fault: it goes back to the queue without counting the attempt.
            if await giveBack(job, worker: worker, after: .zero, metadata) { ended("released") }
        case .leaseLost:
            // A video deleted through another node cancelled the job there: this node hears of it at its heartbeat.
            if (try? await queue.job(job.id))?.state == .cancelled {
                logger.debug("media job stopped: its video was deleted", metadata: metadata)
                ended("cancelled")
            } else {
                logger.debug("media job stopped: its lease was lost", metadata: metadata)
                ended("lost")
            }
        case .leaseUnrenewed:
            // The catalog did not answer: the job is given back once it does, unless another worker took it meanwhile.
            logger.warning("media job stopped: its lease could not be renewed", metadata: metadata)
            ended(await giveBack(job, worker: worker, after: .zero, metadata) ? "released" : "lost")
        case .finished(.failure(let error))
        where (error as? FerryDomainError)?.code == .storeUnavailable || FerryDomainError(machineFailure: error) != nil:
            // An outage, or a disk full (or down to the space kept free for deletes): not the job's fault, and gone
            // once the store answers or space is freed, so the attempt is not counted. What the job waits for is kept
            // as its last error (the video's StatusMessage), and told once: it comes back every retry delay.
            let reason = FerryDomainError(machineFailure: error)?.code == .storageFull ? Wait.space : Wait.store
            metadata["error"] = .string(String(describing: error))
            if await giveBack(job, worker: worker, after: configuration.retryDelay, reason: reason, metadata) {
                if job.lastError == reason {
                    logger.debug("media job still \(reason)", metadata: metadata)
                } else {
                    logger.warning("media job stopped by an outage or a full disk; it will be retried", metadata: metadata)
                }
                ended("released")
            }
        case .cancelled:
            logger.debug("media job stopped: its video was deleted", metadata: metadata)
            ended("cancelled")
        case .finished(.failure(let error)):
            let reason = String(describing: error)
            metadata["error"] = .string(reason)
            if job.attempts >= job.maxAttempts {
                await giveUp(job, worker: worker, reason: reason, metadata: metadata)
                ended("failed")
            } else {
                let retryAt = Date().addingTimeInterval(
                    (configuration.retryDelay * (1 << min(job.attempts - 1, 10))).timeInterval)
                if await record("retry", job, metadata, {
                    try await $0.fail(job.id, worker: worker, error: reason, retryAt: retryAt, now: Date())
                }) {
                    logger.warning("media job failed; it will be retried", metadata: metadata)
                    ended("retry")
                }
            }
        }
    }

    /// Renews the job's lease every third of it while the job runs, with its progress. Returns ``Ending/leaseLost``
    /// when the catalog answers that this worker no longer holds the job, ``Ending/leaseUnrenewed`` when renewals
    /// failed until the lease would run out before the next one; ``Ending/interrupted`` when cancelled (the job ended
    /// first).
    private func heartbeat(_ job: MediaJob, worker: String, progress: NIOLockedValueBox<Double?>) async -> Ending {
        let lease = configuration.lease
        let interval = lease / 3
        var heldUntil = ContinuousClock.now + lease
        while true {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return .interrupted
            }
            do {
                let renewed = ContinuousClock.now + lease
                let held = try await queue.heartbeat(
                    job.id, worker: worker, lease: lease, progress: progress.withLockedValue { $0 }, now: Date())
                guard held else { return .leaseLost }
                heldUntil = renewed
            } catch {
                if Task.isCancelled { return .interrupted }
                logger.warning(
                    "media job lease not renewed",
                    metadata: ["ferry.job-id": .string(job.id), "error": .string(String(describing: error))])
                // Another worker may claim the job once the lease runs out: stop before that.
                if ContinuousClock.now + interval >= heldUntil { return .leaseUnrenewed }
            }
        }
    }

    /// Gives the job back without counting its attempt, due after `delay`; whether it was written.
    private func giveBack(
        _ job: MediaJob, worker: String, after delay: Duration, reason: String? = nil, _ metadata: Logger.Metadata
    ) async -> Bool {
        let given = await record("release", job, metadata) {
            let now = Date()
            return try await $0.release(
                job.id, worker: worker, runAt: now.addingTimeInterval(delay.timeInterval), reason: reason, now: now)
        }
        if given { logger.debug("media job given back", metadata: metadata) }
        return given
    }

    /// Writes a job's new state, even when this task is being cancelled, trying again every second for up to
    /// ``outageWait`` while the catalog is unavailable (unless the task is cancelled or the service is shutting down).
    /// Returns whether it was written; a write that fails is logged with the job's id, and one the queue refused
    /// (another worker holds the job now) at debug.
    private func record(
        _ change: String, _ job: MediaJob, _ metadata: Logger.Metadata,
        _ write: @escaping @Sendable (any JobQueue) async throws -> Bool
    ) async -> Bool {
        let queue = self.queue
        var metadata = metadata
        metadata["ferry.job-change"] = .string(change)
        let deadline = ContinuousClock.now + Self.outageWait
        let stopping = NIOLockedValueBox(Task.isCancelled || Task.isShuttingDownGracefully)
        do {
            let written = try await withTaskCancellationHandler {
                try await whileIgnoringCancellation {
                    while true {
                        do {
                            return try await write(queue)
                        } catch let error as FerryDomainError where error.code == .storeUnavailable
                            && ContinuousClock.now < deadline && !Task.isShuttingDownGracefully
                            && !stopping.withLockedValue({ $0 })
                        {
                            try await Task.sleep(for: .seconds(1))
                        }
                    }
                }
            } onCancel: {
                stopping.withLockedValue { $0 = true }
            }
            guard written else {
                logger.debug("media job no longer held; its state is not changed", metadata: metadata)
                return false
            }
            return true
        } catch {
            metadata["error"] = .string(String(describing: error))
            logger.warning("media job state not saved", metadata: metadata)
            return false
        }
    }

    private func giveUp(_ job: MediaJob, worker: String, reason: String, metadata: Logger.Metadata) async {
        do {
            try await pipeline.giveUp(job, reason: reason)
        } catch {
            logger.warning("media job could not be ended", metadata: metadata.merging(["error": .string("\(error)")]) { $1 })
            return
        }
        if await record("fail", job, metadata, {
            try await $0.fail(job.id, worker: worker, error: reason, retryAt: nil, now: Date())
        }) {
            logger.warning("media job failed for good", metadata: metadata)
        }
    }
}
