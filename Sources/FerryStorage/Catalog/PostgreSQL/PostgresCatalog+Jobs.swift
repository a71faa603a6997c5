import Foundation
import Logging
import PostgresNIO

extension PostgresCatalog: JobQueue {
    static func mediaJob(_ row: PostgresRandomAccessRow) throws -> MediaJob {
        var job = MediaJob(
            videoId: try row.value("video_id"), kind: MediaJobKind(rawValue: try row.value("kind")),
            maxAttempts: try row.value("max_attempts"), runAt: try row.date("run_at"))
        job.id = try row.value("id")
        job.state = MediaJobState(rawValue: try row.value("state"))
        job.attempts = try row.value("attempts")
        job.leaseOwner = try row.value("lease_owner")
        job.leaseExpiresAt = try row.optionalDate("lease_expires_at")
        job.progress = try row.value("progress")
        job.lastError = try row.value("last_error")
        job.createdAt = try row.date("created_at")
        job.updatedAt = try row.date("updated_at")
        job.traceParent = try row.value("trace_parent")
        return job
    }

    static func insertJobs(_ jobs: [MediaJob], on connection: PostgresConnection, logger: Logger) async throws {
        for job in jobs {
            try await connection.query(
                """
                INSERT INTO media_job
                (id, video_id, kind, state, attempts, max_attempts, run_at, progress, last_error, created_at, updated_at,
                 trace_parent)
                VALUES (\(job.id), \(job.videoId), \(job.kind.rawValue), \(job.state.rawValue), \(job.attempts),
                        \(job.maxAttempts), \(job.runAt.timeIntervalSince1970), \(job.progress), \(job.lastError),
                        \(job.createdAt.timeIntervalSince1970), \(job.updatedAt.timeIntervalSince1970), \(job.traceParent))
                """, logger: logger)
        }
    }

    public func enqueue(_ jobs: [MediaJob]) async throws {
        try await transaction { [logger] connection in
            try await Self.insertJobs(jobs, on: connection, logger: logger)
        }
    }

    public func claim(worker: String, lease: Duration, now: Date, kinds: [MediaJobKind]?) async throws -> MediaJob? {
        let time = now.timeIntervalSince1970
        let expires = now.addingTimeInterval(lease.timeInterval).timeIntervalSince1970
        let names = kinds?.map(\.rawValue)
        // SKIP LOCKED: claims by other nodes pass over the row one of them is taking, instead of waiting for it.
        return try await rows(
            """
            WITH next AS (
                SELECT id FROM media_job
                WHERE ((state = 'queued' AND run_at <= \(time)) OR (state = 'running' AND lease_expires_at < \(time)))
                    AND (\(names == nil) OR kind = ANY(\(names ?? [])))
                ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
            UPDATE media_job SET state = 'running', attempts = media_job.attempts + 1, lease_owner = \(worker),
                lease_expires_at = \(expires), updated_at = \(time)
            FROM next WHERE media_job.id = next.id
            RETURNING media_job.*
            """
        ).first.map(Self.mediaJob)
    }


    public func heartbeat(_ id: String, worker: String, lease: Duration, progress: Double?, now: Date) async throws
        -> Bool
    {
        try await changed(
            """
            UPDATE media_job SET lease_expires_at = \(now.addingTimeInterval(lease.timeInterval).timeIntervalSince1970),
                progress = COALESCE(\(progress), progress), updated_at = \(now.timeIntervalSince1970)
            WHERE id = \(id) AND state = 'running' AND lease_owner = \(worker) RETURNING id
            """) > 0
    }

    public func complete(_ id: String, worker: String, now: Date) async throws -> Bool {
        try await changed(
            """
            UPDATE media_job SET state = 'succeeded', progress = 1, lease_owner = NULL, lease_expires_at = NULL,
                updated_at = \(now.timeIntervalSince1970)
            WHERE id = \(id) AND state = 'running' AND lease_owner = \(worker) RETURNING id
            """) > 0
    }

    public func fail(_ id: String, worker: String, error: String, retryAt: Date?, now: Date) async throws -> Bool {
        let state = retryAt == nil ? MediaJobState.failed.rawValue : MediaJobState.queued.rawValue
        return try await changed(
            """
            UPDATE media_job SET state = \(state), run_at = COALESCE(\(retryAt?.timeIntervalSince1970), run_at),
                last_error = \(error), lease_owner = NULL, lease_expires_at = NULL, updated_at = \(now.timeIntervalSince1970)
            WHERE id = \(id) AND state = 'running' AND lease_owner = \(worker) RETURNING id
            """) > 0
    }

    public func release(_ id: String, worker: String, runAt: Date, reason: String?, now: Date) async throws -> Bool {
        try await changed(
            """
            UPDATE media_job SET state = 'queued', attempts = GREATEST(attempts - 1, 0), run_at = \(runAt.timeIntervalSince1970),
                lease_owner = NULL, lease_expires_at = NULL, last_error = COALESCE(\(reason)::text, last_error),
                updated_at = \(now.timeIntervalSince1970)
            WHERE id = \(id) AND state = 'running' AND lease_owner = \(worker) RETURNING id
            """) > 0
    }

    public func cancelJobs(videoId: String, now: Date) async throws -> [MediaJob] {
        return try await transaction { [logger] connection in
            try await Self.cancelJobs(videoId: videoId, now: now, on: connection, logger: logger)
        }
    }

    /// Cancels a video's unfinished jobs inside a transaction the caller holds.
    static func cancelJobs(videoId: String, now: Date, on connection: PostgresConnection, logger: Logger) async throws
        -> [MediaJob]
    {
        try await rows(
            """
            UPDATE media_job SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
                updated_at = \(now.timeIntervalSince1970)
            WHERE video_id = \(videoId) AND state IN ('queued', 'running') RETURNING *
            """, on: connection, logger: logger
        ).map(mediaJob).sorted { $0.createdAt < $1.createdAt }
    }

    public func jobs(videoId: String) async throws -> [MediaJob] {
        try await rows("SELECT * FROM media_job WHERE video_id = \(videoId) ORDER BY seq").map(Self.mediaJob)
    }

    public func backlog(now: Date) async throws -> JobBacklog {
        var backlog = JobBacklog()
        let seconds = now.timeIntervalSince1970
        for row in try await rows(
            """
            SELECT state, count(*)::BIGINT AS n, count(*) FILTER (WHERE run_at <= \(seconds))::BIGINT AS due
            FROM media_job WHERE state IN ('queued', 'running', 'failed') GROUP BY state
            """)
        {
            let count: Int = try row.value("n")
            switch MediaJobState(rawValue: try row.value("state")) {
            case .queued:
                backlog.queued = try row.value("due")
                backlog.scheduled = count - backlog.queued
            case .running: backlog.running = count
            default: backlog.failed = count
            }
        }
        let oldest = try await rows("SELECT min(run_at) AS due FROM media_job WHERE state = 'queued' AND run_at <= \(seconds)")
        backlog.oldestDue = try oldest.first?.optionalDate("due")
        return backlog
    }

    public func job(_ id: String) async throws -> MediaJob? {
        try await rows("SELECT * FROM media_job WHERE id = \(id)").first.map(Self.mediaJob)
    }
}
