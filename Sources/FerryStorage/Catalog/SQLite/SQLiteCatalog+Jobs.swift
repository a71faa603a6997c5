import Foundation
import GRDB

extension SQLiteCatalog: JobQueue {
    /// Schema of the media job queue. A job is due when it is queued with `runAt` reached, or running with an
    /// expired lease (its worker died); `due` indexes both by the time that matters.
    static let jobMigration = Migration("v6-media-jobs", """
        CREATE TABLE mediaJob (
            id TEXT PRIMARY KEY NOT NULL,
            videoId TEXT NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            maxAttempts INTEGER NOT NULL,
            runAt DOUBLE NOT NULL,
            leaseOwner TEXT,
            leaseExpiresAt DOUBLE,
            progress DOUBLE,
            lastError TEXT,
            createdAt DOUBLE NOT NULL,
            updatedAt DOUBLE NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX mediaJob_queued ON mediaJob(runAt, seq) WHERE state = 'queued';
        CREATE INDEX mediaJob_running ON mediaJob(leaseExpiresAt, seq) WHERE state = 'running';
        CREATE INDEX mediaJob_by_video ON mediaJob(videoId, seq);
        """)

    static func mediaJob(_ row: Row) -> MediaJob {
        var job = MediaJob(
            videoId: row["videoId"], kind: MediaJobKind(rawValue: row["kind"]), maxAttempts: row["maxAttempts"],
            runAt: Date(timeIntervalSince1970: row["runAt"]))
        job.id = row["id"]
        job.state = MediaJobState(rawValue: row["state"])
        job.attempts = row["attempts"]
        job.leaseOwner = row["leaseOwner"]
        job.leaseExpiresAt = (row["leaseExpiresAt"] as Double?).map(Date.init(timeIntervalSince1970:))
        job.progress = row["progress"]
        job.lastError = row["lastError"]
        job.createdAt = Date(timeIntervalSince1970: row["createdAt"])
        job.updatedAt = Date(timeIntervalSince1970: row["updatedAt"])
        job.traceParent = row["traceParent"]
        return job
    }

    /// Inserts jobs inside a transaction the caller holds (with the catalog change that makes them needed).
    static func insertJobs(_ jobs: [MediaJob], _ db: Database) throws {
        for job in jobs {
            let seq = (try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) + 1 FROM mediaJob")) ?? 1
            try db.execute(
                sql: """
                    INSERT INTO mediaJob
                    (id, videoId, kind, state, attempts, maxAttempts, runAt, progress, lastError, createdAt, updatedAt, seq,
                     traceParent)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    job.id, job.videoId, job.kind.rawValue, job.state.rawValue, job.attempts, job.maxAttempts,
                    job.runAt.timeIntervalSince1970, job.progress, job.lastError, job.createdAt.timeIntervalSince1970,
                    job.updatedAt.timeIntervalSince1970, seq, job.traceParent,
                ])
        }
    }

    public func enqueue(_ jobs: [MediaJob]) async throws {
        try await pool.write { db in try Self.insertJobs(jobs, db) }
    }

    public func claim(worker: String, lease: Duration, now: Date, kinds: [MediaJobKind]?) async throws -> MediaJob? {
        let time = now.timeIntervalSince1970
        let names = kinds?.map(\.rawValue) ?? []
        let only = kinds == nil ? "" : "AND kind IN (\(names.map { _ in "?" }.joined(separator: ",")))"
        return try await pool.write { db in
            // SQLite has one writer at a time: the lookup and the update below cannot interleave with another claim.
            guard
                let row = try Row.fetchOne(
                    db, sql: """
                        SELECT * FROM (
                            SELECT * FROM mediaJob WHERE state = 'queued' AND runAt <= ? \(only)
                            UNION ALL
                            SELECT * FROM mediaJob WHERE state = 'running' AND leaseExpiresAt < ? \(only)
                        ) ORDER BY seq LIMIT 1
                        """,
                    arguments: [time] + StatementArguments(names) + [time] + StatementArguments(names))
            else { return nil }
            var job = Self.mediaJob(row)
            job.state = .running
            job.attempts += 1
            job.leaseOwner = worker
            job.leaseExpiresAt = now.addingTimeInterval(lease.timeInterval)
            job.updatedAt = now
            try db.execute(
                sql: """
                    UPDATE mediaJob SET state = 'running', attempts = ?, leaseOwner = ?, leaseExpiresAt = ?, updatedAt = ?
                    WHERE id = ?
                    """,
                arguments: [job.attempts, worker, job.leaseExpiresAt?.timeIntervalSince1970, time, job.id])
            return job
        }
    }

    public func heartbeat(_ id: String, worker: String, lease: Duration, progress: Double?, now: Date) async throws
        -> Bool
    {
        try await execute("""
            UPDATE mediaJob SET leaseExpiresAt = ?, progress = COALESCE(?, progress), updatedAt = ?
            WHERE id = ? AND state = 'running' AND leaseOwner = ?
            """, [
            now.addingTimeInterval(lease.timeInterval).timeIntervalSince1970, progress, now.timeIntervalSince1970, id,
            worker,
        ]) > 0
    }

    public func complete(_ id: String, worker: String, now: Date) async throws -> Bool {
        try await execute("""
                    UPDATE mediaJob SET state = 'succeeded', progress = 1, leaseOwner = NULL, leaseExpiresAt = NULL,
                    updatedAt = ? WHERE id = ? AND state = 'running' AND leaseOwner = ?
                    """, [now.timeIntervalSince1970, id, worker]) > 0
    }

    public func fail(_ id: String, worker: String, error: String, retryAt: Date?, now: Date) async throws -> Bool {
        let state = retryAt == nil ? MediaJobState.failed.rawValue : MediaJobState.queued.rawValue
        return try await execute("""
            UPDATE mediaJob SET state = ?, runAt = COALESCE(?, runAt), lastError = ?, leaseOwner = NULL,
            leaseExpiresAt = NULL, updatedAt = ? WHERE id = ? AND state = 'running' AND leaseOwner = ?
            """, [state, retryAt?.timeIntervalSince1970, error, now.timeIntervalSince1970, id, worker]) > 0
    }

    public func release(_ id: String, worker: String, runAt: Date, reason: String?, now: Date) async throws -> Bool {
        try await execute("""
                    UPDATE mediaJob SET state = 'queued', attempts = MAX(attempts - 1, 0), runAt = ?, leaseOwner = NULL,
                    leaseExpiresAt = NULL, lastError = COALESCE(?, lastError), updatedAt = ?
                    WHERE id = ? AND state = 'running' AND leaseOwner = ?
                    """, [runAt.timeIntervalSince1970, reason, now.timeIntervalSince1970, id, worker]) > 0
    }

    public func cancelJobs(videoId: String, now: Date) async throws -> [MediaJob] {
        try await pool.write { db in try Self.cancelJobs(videoId: videoId, now: now, db) }
    }

    /// Cancels a video's unfinished jobs inside a transaction the caller holds.
    static func cancelJobs(videoId: String, now: Date, _ db: Database) throws -> [MediaJob] {
        let rows = try Row.fetchAll(
            db, sql: "SELECT * FROM mediaJob WHERE videoId = ? AND state IN ('queued', 'running') ORDER BY seq",
            arguments: [videoId])
        try db.execute(
            sql: """
                UPDATE mediaJob SET state = 'cancelled', leaseOwner = NULL, leaseExpiresAt = NULL, updatedAt = ?
                WHERE videoId = ? AND state IN ('queued', 'running')
                """,
            arguments: [now.timeIntervalSince1970, videoId])
        return rows.map {
            var job = Self.mediaJob($0)
            job.state = .cancelled
            return job
        }
    }

    public func jobs(videoId: String) async throws -> [MediaJob] {
        try await all("SELECT * FROM mediaJob WHERE videoId = ? ORDER BY seq", [videoId], Self.mediaJob)
    }

    public func backlog(now: Date) async throws -> JobBacklog {
        try await pool.read { db in
            var backlog = JobBacklog()
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT state, count(*) AS n, sum(runAt <= ?) AS due FROM mediaJob
                    WHERE state IN ('queued', 'running', 'failed') GROUP BY state
                    """,
                arguments: [now.timeIntervalSince1970])
            {
                let count: Int = row["n"]
                switch MediaJobState(rawValue: row["state"]) {
                case .queued:
                    backlog.queued = row["due"]
                    backlog.scheduled = count - backlog.queued
                case .running: backlog.running = count
                default: backlog.failed = count
                }
            }
            backlog.oldestDue = try Double.fetchOne(
                db, sql: "SELECT min(runAt) FROM mediaJob WHERE state = 'queued' AND runAt <= ?",
                arguments: [now.timeIntervalSince1970]
            ).map(Date.init(timeIntervalSince1970:))
            return backlog
        }
    }

    public func job(_ id: String) async throws -> MediaJob? {
        try await first("SELECT * FROM mediaJob WHERE id = ?", [id], Self.mediaJob)
    }
}
