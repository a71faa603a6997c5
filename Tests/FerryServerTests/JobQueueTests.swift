import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// The catalogs the job queue's behavioural suite runs against: every implementation must pass every test here.
enum JobQueueImplementation: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// A fresh, empty queue (and media catalog) of this implementation; `body` runs with it.
    func with<T>(_ body: (any MediaCatalog) async throws -> T) async throws -> T {
        switch self {
        case .sqlite:
            let directory = TemporaryDirectory.make("ferry-jobs")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            return try await body(try SQLiteCatalog(path: directory + "/catalog.sqlite"))
        case .postgres:
            return try await PostgresServer.withDatabase { url in
                try await PostgresCatalog.withConnection(url: url) { catalog in try await body(catalog) }
            }
        }
    }
}

@Suite("Media job queue: claims, leases, retries, cancellation (every catalog implementation)", .timeLimit(.minutes(10)))
struct JobQueueTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let lease = Duration.seconds(30)
    /// A lease longer than any test's clock moves, where expiry is not what a test is about.
    let long = Duration.seconds(86_400)

    func job(_ video: String, _ kind: MediaJobKind = .probe, at date: Date? = nil) -> MediaJob {
        MediaJob(videoId: video, kind: kind, maxAttempts: 3, runAt: date ?? t0)
    }

    @Test("due jobs are claimed oldest first, once each, with a lease and an attempt counted", arguments: JobQueueImplementation.allCases)
    func claimOrder(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let first = job("v1")
            let second = job("v2", .transcode)
            let later = job("v3", at: t0.addingTimeInterval(60))
            try await queue.enqueue([first, second, later])
            let a = try #require(try await queue.claim(worker: "w1", lease: long, now: t0))
            #expect(a.id == first.id && a.state == .running && a.attempts == 1 && a.leaseOwner == "w1")
            #expect(a.leaseExpiresAt == t0.addingTimeInterval(86_400))
            let b = try #require(try await queue.claim(worker: "w2", lease: long, now: t0))
            #expect(b.id == second.id && b.kind == .transcode)
            // The third is not due yet.
            #expect(try await queue.claim(worker: "w3", lease: lease, now: t0.addingTimeInterval(59)) == nil)
            #expect(try await queue.claim(worker: "w3", lease: lease, now: t0.addingTimeInterval(60))?.id == later.id)
            #expect(try await queue.claim(worker: "w4", lease: lease, now: t0.addingTimeInterval(61)) == nil)
        }
    }

    @Test("a claim for some kinds takes the oldest due job of those kinds and leaves the others", arguments: JobQueueImplementation.allCases)
    func claimByKind(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let probe = job("v1")
            let removal = job("v2", .removeFiles)
            let transcode = job("v3", .transcode)
            try await queue.enqueue([probe, removal, transcode])
            let taken = try await queue.claim(worker: "w1", lease: long, now: t0, kinds: [.removeFiles])
            #expect(taken?.id == removal.id && taken?.state == .running)
            #expect(try await queue.claim(worker: "w1", lease: long, now: t0, kinds: [.removeFiles]) == nil)
            #expect(try await queue.claim(worker: "w1", lease: long, now: t0, kinds: [.transcode, .snapshot])?.id == transcode.id)
            #expect(try await queue.job(probe.id)?.state == .queued)
            #expect(try await queue.claim(worker: "w2", lease: long, now: t0)?.id == probe.id)
        }
    }

    @Test("heartbeats renew the holder's lease only; complete ends the job for its holder only", arguments: JobQueueImplementation.allCases)
    func heartbeatsAndCompletion(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let queued = job("v1")
            try await queue.enqueue([queued])
            _ = try await queue.claim(worker: "w1", lease: lease, now: t0)
            #expect(try await queue.heartbeat(queued.id, worker: "w2", lease: lease, progress: 0.5, now: t0) == false)
            #expect(try await queue.heartbeat(queued.id, worker: "w1", lease: lease, progress: 0.4, now: t0.addingTimeInterval(20)))
            let renewed = try #require(try await queue.job(queued.id))
            #expect(renewed.leaseExpiresAt == t0.addingTimeInterval(50) && renewed.progress == 0.4)
            // Renewed: not taken over at 40 s.
            #expect(try await queue.claim(worker: "w2", lease: lease, now: t0.addingTimeInterval(40)) == nil)
            #expect(try await queue.complete(queued.id, worker: "w2", now: t0) == false)
            #expect(try await queue.complete(queued.id, worker: "w1", now: t0.addingTimeInterval(45)))
            let done = try #require(try await queue.job(queued.id))
            #expect(done.state == .succeeded && done.leaseOwner == nil && done.progress == 1)
            #expect(try await queue.complete(queued.id, worker: "w1", now: t0) == false)
            #expect(try await queue.heartbeat(queued.id, worker: "w1", lease: lease, progress: nil, now: t0) == false)
            #expect(try await queue.claim(worker: "w3", lease: lease, now: t0.addingTimeInterval(1000)) == nil)
        }
    }

    @Test("a job whose worker stopped renewing is taken over after its lease; the old worker can no longer end it", arguments: JobQueueImplementation.allCases)
    func expiredLease(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let queued = job("v1")
            try await queue.enqueue([queued])
            _ = try await queue.claim(worker: "dead", lease: lease, now: t0)
            #expect(try await queue.claim(worker: "w2", lease: lease, now: t0.addingTimeInterval(30)) == nil)
            let taken = try #require(try await queue.claim(worker: "w2", lease: lease, now: t0.addingTimeInterval(31)))
            #expect(taken.id == queued.id && taken.attempts == 2 && taken.leaseOwner == "w2")
            #expect(try await queue.heartbeat(queued.id, worker: "dead", lease: lease, progress: nil, now: t0.addingTimeInterval(32)) == false)
            #expect(try await queue.complete(queued.id, worker: "dead", now: t0.addingTimeInterval(32)) == false)
            #expect(try await queue.fail(queued.id, worker: "dead", error: "late", retryAt: nil, now: t0) == false)
            #expect(try await queue.complete(queued.id, worker: "w2", now: t0.addingTimeInterval(33)))
        }
    }

    @Test("a failed attempt waits for its retry time with its error; a final failure ends the job", arguments: JobQueueImplementation.allCases)
    func failures(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let queued = job("v1")
            try await queue.enqueue([queued])
            _ = try await queue.claim(worker: "w1", lease: lease, now: t0)
            #expect(try await queue.fail(queued.id, worker: "w1", error: "store unavailable", retryAt: t0.addingTimeInterval(10), now: t0))
            let waiting = try #require(try await queue.job(queued.id))
            #expect(waiting.state == .queued && waiting.lastError == "store unavailable" && waiting.leaseOwner == nil)
            #expect(try await queue.claim(worker: "w1", lease: lease, now: t0.addingTimeInterval(9)) == nil)
            let again = try #require(try await queue.claim(worker: "w1", lease: lease, now: t0.addingTimeInterval(10)))
            #expect(again.attempts == 2)
            #expect(try await queue.fail(queued.id, worker: "w1", error: "gave up", retryAt: nil, now: t0.addingTimeInterval(11)))
            let failed = try #require(try await queue.job(queued.id))
            #expect(failed.state == .failed && failed.state.isFinished && failed.lastError == "gave up")
            #expect(try await queue.claim(worker: "w1", lease: lease, now: t0.addingTimeInterval(1000)) == nil)
        }
    }

    @Test("the backlog counts queued, running and failed jobs and dates the job due the longest; the webhook backlog its pending events", arguments: JobQueueImplementation.allCases)
    func backlogs(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            #expect(try await queue.backlog(now: t0) == JobBacklog())
            let early = job("v1", at: t0.addingTimeInterval(-30))
            let due = job("v2", at: t0.addingTimeInterval(-10))
            let later = job("v3", at: t0.addingTimeInterval(60))
            let doomed = job("v4", at: t0.addingTimeInterval(-60))
            try await queue.enqueue([doomed, early, due, later])
            // The first two due jobs are claimed, and the first fails for good: what waits longest now is `due`.
            #expect(try await queue.claim(worker: "w1", lease: long, now: t0)?.id == doomed.id)
            #expect(try await queue.fail(doomed.id, worker: "w1", error: "bad file", retryAt: nil, now: t0))
            #expect(try await queue.claim(worker: "w1", lease: long, now: t0)?.id == early.id)
            let backlog = try await queue.backlog(now: t0)
            // `due` is queued; `later`, not due yet, is scheduled.
            #expect(backlog.queued == 1 && backlog.scheduled == 1 && backlog.running == 1 && backlog.failed == 1)
            #expect(backlog.oldestDue == t0.addingTimeInterval(-10))
            // A job not yet due makes no one wait.
            _ = try await queue.claim(worker: "w2", lease: long, now: t0)
            #expect(try await queue.backlog(now: t0).oldestDue == nil)
            let afterwards = try await queue.backlog(now: t0.addingTimeInterval(90))
            #expect(afterwards.oldestDue == t0.addingTimeInterval(60) && afterwards.queued == 1 && afterwards.scheduled == 0)

            let store = try #require(queue as? any WebhookStore)
            #expect(try await store.webhookBacklog() == WebhookBacklog())
            for index in 0..<3 {
                let event = WebhookEvent(
                    id: "evt\(index)", type: WebhookEventType(rawValue: "FileUploadComplete"),
                    payload: WebhookPayload(videoId: "v\(index)", size: 1),
                    createdAt: t0.addingTimeInterval(Double(index)), attempts: 0, deliveredAt: nil, failedAt: nil)
                try await store.insertWebhookEvent(event, body: Array("body".utf8))
            }
            try await store.markWebhookEventDelivered("evt0", at: t0)
            try await store.recordWebhookAttemptFailure("evt1", error: "gone", nextAttemptAt: nil, now: t0)
            let webhooks = try await store.webhookBacklog()
            #expect(webhooks.pending == 1 && webhooks.oldestCreatedAt == t0.addingTimeInterval(2))
        }
    }

    @Test("a job given back is due when it says and its attempt is not counted; what it waits for becomes its last error, and a release without a reason keeps it", arguments: JobQueueImplementation.allCases)
    func release(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let queued = job("v1")
            try await queue.enqueue([queued])
            _ = try await queue.claim(worker: "w1", lease: lease, now: t0)
            #expect(try await queue.release(queued.id, worker: "w2", runAt: t0, reason: "space", now: t0) == false)
            #expect(try await queue.job(queued.id)?.lastError == nil)
            #expect(try await queue.release(queued.id, worker: "w1", runAt: t0.addingTimeInterval(5), reason: "space", now: t0.addingTimeInterval(1)))
            #expect(try await queue.job(queued.id)?.lastError == "space")
            #expect(try await queue.claim(worker: "w2", lease: lease, now: t0.addingTimeInterval(4)) == nil)
            let again = try #require(try await queue.claim(worker: "w2", lease: lease, now: t0.addingTimeInterval(5)))
            #expect(again.attempts == 1 && again.leaseOwner == "w2" && again.lastError == "space")
            #expect(try await queue.release(queued.id, worker: "w2", runAt: t0.addingTimeInterval(6), now: t0.addingTimeInterval(6)))
            #expect(try await queue.job(queued.id)?.lastError == "space")
        }
    }

    @Test("cancelling a video's jobs ends its queued and running ones (the runner's next heartbeat says stop), not others", arguments: JobQueueImplementation.allCases)
    func cancellation(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let running = job("v1")
            let waiting = job("v1", .transcode)
            let done = job("v1", .snapshot)
            let other = job("v2")
            try await queue.enqueue([running, done, waiting, other])
            #expect(try await queue.claim(worker: "w1", lease: long, now: t0)?.id == running.id)
            #expect(try await queue.claim(worker: "w2", lease: long, now: t0)?.id == done.id)
            #expect(try await queue.complete(done.id, worker: "w2", now: t0))
            let cancelled = try await queue.cancelJobs(videoId: "v1", now: t0)
            #expect(Set(cancelled.map(\.id)) == [running.id, waiting.id])
            #expect(try await queue.heartbeat(running.id, worker: "w1", lease: lease, progress: nil, now: t0) == false)
            #expect(try await queue.complete(running.id, worker: "w1", now: t0) == false)
            let jobs = try await queue.jobs(videoId: "v1")
            #expect(jobs.map(\.id) == [running.id, done.id, waiting.id])
            #expect(jobs.map(\.state) == [.cancelled, .succeeded, .cancelled])
            #expect(try await queue.claim(worker: "w3", lease: long, now: t0.addingTimeInterval(100))?.id == other.id)
            #expect(try await queue.claim(worker: "w3", lease: lease, now: t0.addingTimeInterval(1000)) == nil)
        }
    }

    @Test("many workers claiming at once take each job exactly once", arguments: JobQueueImplementation.allCases)
    func concurrentClaims(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { queue in
            let jobs = (0..<40).map { job("v\($0)") }
            try await queue.enqueue(jobs)
            let now = t0
            let claimed = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var mine: [String] = []
                        while let job = try await queue.claim(worker: "w\(worker)", lease: .seconds(30), now: now) {
                            mine.append(job.id)
                        }
                        return mine
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(claimed.count == 40)
            #expect(Set(claimed) == Set(jobs.map(\.id)))
        }
    }

    @Test("a video's status change and the jobs it calls for are saved together, or neither", arguments: JobQueueImplementation.allCases)
    func videoChangeWithJobs(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let now = Date()
            let video = VideoRecord(
                videoId: "v1", title: "t", fileName: "f.mp4", status: "Uploading", bucket: "b", key: "video/v1/source.mp4",
                owner: "k", createdAt: now, updatedAt: now)
            try await catalog.saveVideo(video)
            let kept = try await catalog.updateVideo("v1") { video in
                video.status = "UploadSucc"
                return .keep
            }
            #expect(kept == nil)
            #expect(try await catalog.video("v1")?.status == "Uploading")
            let saved = try await catalog.updateVideo("v1") { video in
                video.status = "UploadSucc"
                return .save(enqueue: [MediaJob(videoId: "v1", kind: .probe)])
            }
            #expect(saved?.status == "UploadSucc")
            #expect(try await catalog.jobs(videoId: "v1").map(\.kind) == [.probe])
            struct Refused: Error {}
            await #expect(throws: Refused.self) {
                try await catalog.updateVideo("v1") { video in
                    video.status = "Normal"
                    throw Refused()
                }
            }
            #expect(try await catalog.video("v1")?.status == "UploadSucc")
            try await catalog.updateVideo("v1") { video in
                video.status = "Deleted"
                return .save(cancelJobs: true)
            }
            #expect(try await catalog.jobs(videoId: "v1").map(\.state) == [.cancelled])
            #expect(try await catalog.updateVideo("missing") { _ in .save() } == nil)
        }
    }

    @Test("a record change made under a job's lease is saved only while the job runs under that worker's claim: once another worker took the job over, or it ended, it is kept back", arguments: JobQueueImplementation.allCases)
    func changesUnderALease(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let now = Date()
            try await catalog.saveVideo(
                VideoRecord(
                    videoId: "v1", title: "t", fileName: "f.mp4", status: "Transcoding", bucket: "b",
                    key: "video/v1/source.mp4", owner: "k", createdAt: now, updatedAt: now))
            let transcode = MediaJob(videoId: "v1", kind: .transcode, maxAttempts: 3, runAt: now)
            try await catalog.enqueue([transcode])
            #expect(try await catalog.claim(worker: "w1", lease: lease, now: now)?.id == transcode.id)
            func publish(as worker: String, _ title: String) async throws -> VideoRecord? {
                try await JobLease.$current.withValue(JobLease(jobId: transcode.id, worker: worker)) {
                    try await catalog.updateVideo("v1") { video in
                        video.title = title
                        return .save()
                    }
                }
            }
            #expect(try await publish(as: "w1", "first")?.title == "first")
            // The lease ran out and another worker took the job over: the first one's changes are kept back.
            let later = now.addingTimeInterval(60)
            #expect(try await catalog.claim(worker: "w2", lease: lease, now: later)?.id == transcode.id)
            #expect(try await publish(as: "w1", "stale") == nil)
            #expect(try await catalog.video("v1")?.title == "first")
            #expect(try await publish(as: "w2", "second")?.title == "second")
            // Once the job has ended, no change is made under it; without a lease, changes are saved as ever.
            #expect(try await catalog.complete(transcode.id, worker: "w2", now: later))
            #expect(try await publish(as: "w2", "after") == nil)
            #expect(try await catalog.video("v1")?.title == "second")
            #expect(try await catalog.updateVideo("v1") { video in video.title = "free"; return .save() }?.title == "free")
        }
    }

    @Test("a change under a job's lease and a deletion that cancels the video's jobs, made at once, both end (PostgreSQL locks the video's row, then the job's, in both): no deadlock", arguments: JobQueueImplementation.allCases)
    func leasedChangeBesideDeletion(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let now = Date()
            for round in 0..<25 {
                let id = "v\(round)"
                try await catalog.saveVideo(
                    VideoRecord(
                        videoId: id, title: "t", fileName: "f.mp4", status: "Transcoding", bucket: "b",
                        key: "video/\(id)/source.mp4", owner: "k", createdAt: now, updatedAt: now))
                let transcode = MediaJob(videoId: id, kind: .transcode, maxAttempts: 3, runAt: now)
                try await catalog.enqueue([transcode])
                #expect(try await catalog.claim(worker: "w1", lease: long, now: now)?.id == transcode.id)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        _ = try await JobLease.$current.withValue(JobLease(jobId: transcode.id, worker: "w1")) {
                            try await catalog.updateVideo(id) { video in
                                video.title = "published"
                                return .save()
                            }
                        }
                    }
                    group.addTask {
                        _ = try await catalog.updateVideo(id) { video in
                            video.status = "Deleted"
                            return .save(cancelJobs: true)
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(try await catalog.video(id)?.status == "Deleted")
                #expect(try await catalog.jobs(videoId: id).map(\.state) == [.cancelled])
            }
        }
    }
}
