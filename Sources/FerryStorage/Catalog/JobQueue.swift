import Foundation

/// What a media job does.
public struct MediaJobKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: String
    /// Creates a kind from its stored name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Reads the source with ffprobe and records what it is (duration, size, streams).
    public static let probe = MediaJobKind(rawValue: "probe")
    /// Takes a cover image from the source.
    public static let snapshot = MediaJobKind(rawValue: "snapshot")
    /// Encodes the template group's renditions and packages them as HLS and MP4.
    public static let transcode = MediaJobKind(rawValue: "transcode")
    /// Removes a first stream's files once the ladder that replaced it has been published for the retention time.
    public static let retireFirstStream = MediaJobKind(rawValue: "retire-first-stream")
    /// Removes the files of a video that was deleted or whose upload expired, then sends its event: enqueued with that
    /// change and due later, it finishes the change when the node making it stopped before it had (that node does the
    /// same at once and records it done, and the job then does nothing).
    public static let removeFiles = MediaJobKind(rawValue: "remove-files")
    /// Removes the file of an image that was deleted or whose upload expired, with its unfinished multipart uploads:
    /// enqueued with that change and due later, it finishes the removal when the node making it stopped before it
    /// had. Its ``MediaJob/videoId`` is the image's id. The image's event was stored with the change: the job sends
    /// none.
    public static let removeImageFile = MediaJobKind(rawValue: "remove-image-file")

    public var description: String { rawValue }
}

/// A worker's claim on a media job, as it holds it while it runs the job.
public struct JobLease: Sendable, Hashable {
    /// The job's id.
    public var jobId: String
    /// The worker that claimed it.
    public var worker: String

    /// Creates a lease.
    public init(jobId: String, worker: String) {
        self.jobId = jobId
        self.worker = worker
    }

    /// The claim the running job's record changes are made under. A video or image record changed while it is set
    /// (``MediaCatalog/updateVideo(_:_:)``, ``MediaCatalog/updateImage(_:_:)``) is saved only while the job is still
    /// running under this worker's claim, in the same transaction; otherwise the change is kept back, as a `.keep`
    /// is. A worker that stalled past its lease (a paused machine, a stopped process) and woke after another took the
    /// job over cannot publish, fail or otherwise change the record under the new owner.
    @TaskLocal public static var current: JobLease?
}

/// Where a job is in its life.
public struct MediaJobState: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: String
    /// Creates a state from its stored name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Waiting for a worker (also after a failed attempt, until `runAt`).
    public static let queued = MediaJobState(rawValue: "queued")
    /// Claimed by a worker whose lease runs until `leaseExpiresAt`; an expired lease makes it claimable again.
    public static let running = MediaJobState(rawValue: "running")
    /// Done.
    public static let succeeded = MediaJobState(rawValue: "succeeded")
    /// Given up: a permanent failure, or its attempts ran out.
    public static let failed = MediaJobState(rawValue: "failed")
    /// Cancelled (its video was deleted).
    public static let cancelled = MediaJobState(rawValue: "cancelled")

    /// Whether the job will not run again.
    public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
    public var description: String { rawValue }
}

/// A job of the media pipeline, as the queue holds it.
public struct MediaJob: Sendable, Hashable, Codable {
    /// Unique id.
    public var id: String
    /// The video it works on; the image, for ``MediaJobKind/removeImageFile``.
    public var videoId: String
    /// What it does.
    public var kind: MediaJobKind
    /// Where it is.
    public var state: MediaJobState
    /// Attempts started so far (a claim starts one).
    public var attempts: Int
    /// Attempts allowed before it fails for good.
    public var maxAttempts: Int
    /// Not claimed before this time.
    public var runAt: Date
    /// The worker holding it while it runs.
    public var leaseOwner: String?
    /// When the running worker's lease ends unless renewed; after that another worker may take the job over.
    public var leaseExpiresAt: Date?
    /// Fraction done (0–1) as the worker last reported it.
    public var progress: Double?
    /// Why the last attempt failed.
    public var lastError: String?
    /// When it was enqueued.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
    /// The trace the job continues (`traceparent` of the span that enqueued it); nil when nothing was traced.
    public var traceParent: String?

    /// A new job, due at `runAt`.
    public init(videoId: String, kind: MediaJobKind, maxAttempts: Int = 3, runAt: Date = Date()) {
        id = "job_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        self.videoId = videoId
        self.kind = kind
        state = .queued
        attempts = 0
        self.maxAttempts = maxAttempts
        self.runAt = runAt
        createdAt = runAt
        updatedAt = runAt
        traceParent = TraceContext.current()
    }
}

/// The durable queue of media jobs, kept in the catalog so jobs survive restarts and crashes.
///
/// Workers claim a job with a lease, renew it while they work (``heartbeat(_:worker:lease:progress:now:)``) and end
/// it with ``complete(_:worker:now:)`` or ``fail(_:worker:error:retryAt:now:)``. A worker that dies stops renewing;
/// once its lease has expired another worker claims the job again. Every operation that ends or renews a job names
/// the worker, and does nothing (answering false) when that worker no longer holds it: its lease expired and another
/// took over, or the job was cancelled.
///
/// SQLite implements it for one node (``SQLiteCatalog``); a PostgreSQL implementation claims with
/// `FOR UPDATE SKIP LOCKED` for many. One behavioural test suite holds both to this contract.
/// The media job queue as an operator sees it.
public struct JobBacklog: Sendable, Hashable {
    /// Jobs due, waiting for a worker.
    public var queued = 0
    /// Queued jobs not due yet: waiting out a retry's delay, a delayed clean-up, a first stream's retirement.
    public var scheduled = 0
    /// Jobs a worker holds.
    public var running = 0
    /// Jobs given up on.
    public var failed = 0
    /// When the job that has been due the longest became due (`runAt` of the oldest queued job whose time has come);
    /// nil when none is due.
    public var oldestDue: Date?

    /// An empty queue.
    public init() {}
}

public protocol JobQueue: Sendable {
    /// Adds jobs, due at their `runAt`.
    func enqueue(_ jobs: [MediaJob]) async throws
    /// Claims the oldest due job (queued with `runAt` reached, or running with an expired lease) of one of `kinds`
    /// (any kind when nil) for `worker` until `now + lease`, counting an attempt; nil when none is due.
    func claim(worker: String, lease: Duration, now: Date, kinds: [MediaJobKind]?) async throws -> MediaJob?
    /// Renews the lease and records progress; false when `worker` no longer holds the job (stop working on it).
    func heartbeat(_ id: String, worker: String, lease: Duration, progress: Double?, now: Date) async throws -> Bool
    /// Marks the job succeeded; false when `worker` no longer holds it.
    func complete(_ id: String, worker: String, now: Date) async throws -> Bool
    /// Ends an attempt that failed: queued again for `retryAt`, or failed for good when `retryAt` is nil; false when
    /// `worker` no longer holds it.
    func fail(_ id: String, worker: String, error: String, retryAt: Date?, now: Date) async throws -> Bool
    /// Gives a job back without counting the attempt (its worker is shutting down, or a store the job needs did not
    /// answer): queued again for `runAt`; false when `worker` no longer holds it. A `reason` (what the job waits for)
    /// becomes its ``MediaJob/lastError``; nil keeps the one it has.
    func release(_ id: String, worker: String, runAt: Date, reason: String?, now: Date) async throws -> Bool
    /// Cancels every unfinished job of a video (a running one too: its worker's next heartbeat answers false);
    /// returns the jobs cancelled.
    @discardableResult
    func cancelJobs(videoId: String, now: Date) async throws -> [MediaJob]
    /// The video's jobs, oldest first.
    func jobs(videoId: String) async throws -> [MediaJob]
    /// How many jobs wait, run and have failed, and since when the oldest due job has waited.
    func backlog(now: Date) async throws -> JobBacklog
    /// The job, or nil.
    func job(_ id: String) async throws -> MediaJob?
}

extension JobQueue {
    /// Gives a job back without counting the attempt and keeps its ``MediaJob/lastError``
    /// (``release(_:worker:runAt:reason:now:)``).
    public func release(_ id: String, worker: String, runAt: Date, now: Date) async throws -> Bool {
        try await release(id, worker: worker, runAt: runAt, reason: nil, now: now)
    }

    /// Claims the oldest due job of any kind (``claim(worker:lease:now:kinds:)``).
    public func claim(worker: String, lease: Duration, now: Date) async throws -> MediaJob? {
        try await claim(worker: worker, lease: lease, now: now, kinds: nil)
    }
}
