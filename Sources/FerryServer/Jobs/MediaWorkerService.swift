import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The jobs this process is running, by video, so that deleting a video stops its ffmpeg at once (other nodes notice
/// at their next heartbeat).
final class RunningJobs: Sendable {
    private let tasks = NIOLockedValueBox<[String: [String: @Sendable () -> Void]]>([:])

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
    var count: Int { tasks.withLockedValue { $0.values.reduce(0) { $0 + $1.count } } }
}

/// Runs media jobs with a bounded number of workers until the service group shuts down.
///
/// Each worker claims the oldest due job with a lease, renews it every third of the lease while the job runs, and
/// ends it: done, retried after a backoff (a failure that is not the file's fault), or failed for good once its
/// attempts run out. A job whose lease is lost (its video was deleted, or another worker took it over) is stopped at
/// once, its ffmpeg killed. On shutdown a running job is given back to the queue without counting the attempt.
struct MediaWorkerService: Service {
    let queue: any JobQueue
    let pipeline: MediaPipeline
    let running: RunningJobs
    let configuration: MediaProcessingConfiguration
    let logger: Logger

    func run() async throws {
        await sweepWorkDirectory()
        let prefix = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(8).lowercased())"
        await withDiscardingTaskGroup { group in
            for index in 0..<max(configuration.workers, 1) {
                group.addTask { await work(as: "\(prefix)-\(index)") }
            }
        }
    }

    /// Removes the working directories of jobs no live worker holds (left by a process that died).
    func sweepWorkDirectory() async {
        let directory = pipeline.workDirectory
        try? PrivateFiles.directory(directory)
        let now = Date()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            let job = try? await queue.job(entry)
            if job?.state != .running || (job?.leaseExpiresAt ?? now) <= now {
                try? FileManager.default.removeItem(atPath: directory + "/" + entry)
            }
        }
    }

    private func work(as worker: String) async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                if let job = try await queue.claim(worker: worker, lease: configuration.lease, now: Date()) {
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

    /// Why a running job stopped before it ended.
    private enum Interruption: Sendable {
        case shutdown
        case leaseLost
    }

    private func execute(_ job: MediaJob, worker: String) async {
        var metadata: Logger.Metadata = [
            "ferry.job-id": .string(job.id), "ferry.job-kind": .string(job.kind.rawValue),
            "ferry.video-id": .string(job.videoId), "ferry.attempt": "\(job.attempts)",
        ]
        if job.attempts > job.maxAttempts {
            // Claimed again after its worker died once too often.
            await giveUp(job, worker: worker, reason: job.lastError ?? "the worker running it stopped", metadata: metadata)
            return
        }
        logger.debug("media job started", metadata: metadata)
        let progress = NIOLockedValueBox<Double?>(nil)
        let interruption = NIOLockedValueBox<Interruption?>(nil)
        let pipeline = self.pipeline
        let task = Task { try await pipeline.run(job) { value in progress.withLockedValue { $0 = value } } }
        running.register(videoId: job.videoId, jobId: job.id) {
            interruption.withLockedValue { $0 = $0 ?? .leaseLost }
            task.cancel()
        }
        let queue = self.queue
        let lease = configuration.lease
        let heartbeat = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                if Task.isCancelled { return }
                let held = (try? await queue.heartbeat(
                    job.id, worker: worker, lease: lease, progress: progress.withLockedValue { $0 }, now: Date())) ?? true
                if !held {
                    interruption.withLockedValue { $0 = $0 ?? .leaseLost }
                    task.cancel()
                    return
                }
            }
        }
        let result = await withGracefulShutdownHandler {
            await task.result
        } onGracefulShutdown: {
            interruption.withLockedValue { $0 = $0 ?? .shutdown }
            task.cancel()
        }
        heartbeat.cancel()
        running.unregister(videoId: job.videoId, jobId: job.id)
        let now = Date()
        switch result {
        case .success:
            _ = try? await queue.complete(job.id, worker: worker, now: now)
            logger.debug("media job done", metadata: metadata)
        case .failure(let error):
            switch interruption.withLockedValue({ $0 }) {
            case .shutdown?:
                _ = try? await queue.release(job.id, worker: worker, now: now)
                logger.debug("media job given back at shutdown", metadata: metadata)
            case .leaseLost?:
                logger.debug("media job stopped: cancelled or taken over", metadata: metadata)
            case nil:
                let reason = String(describing: error)
                metadata["error"] = .string(reason)
                if job.attempts >= job.maxAttempts {
                    await giveUp(job, worker: worker, reason: reason, metadata: metadata)
                } else {
                    let delay = configuration.retryDelay * (1 << min(job.attempts - 1, 10))
                    _ = try? await queue.fail(job.id, worker: worker, error: reason, retryAt: now.addingTimeInterval(delay.timeInterval), now: now)
                    logger.warning("media job failed; it will be retried", metadata: metadata)
                }
            }
        }
    }

    private func giveUp(_ job: MediaJob, worker: String, reason: String, metadata: Logger.Metadata) async {
        do {
            try await pipeline.giveUp(job, reason: reason)
            _ = try await queue.fail(job.id, worker: worker, error: reason, retryAt: nil, now: Date())
            logger.warning("media job failed for good", metadata: metadata)
        } catch {
            logger.warning("media job could not be ended", metadata: metadata.merging(["error": .string("\(error)")]) { $1 })
        }
    }
}
