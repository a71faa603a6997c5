import Foundation
import PostgresNIO

// The catalog's queue of blobs to delete, in PostgreSQL; see SQLiteCatalog+BlobDeletions.swift.

extension PostgresCatalog {
    /// Whether other nodes share this catalog: that is what it is for.
    var isShared: Bool { true }

    /// Schema of the deletion queue (migration 5).
    static let blobDeletionTable = [
        "CREATE TABLE blob_deletion (blob TEXT PRIMARY KEY, due_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX blob_deletion_by_due ON blob_deletion (due_at)",
    ]

    /// Queues blobs for deletion at `date` or later; a blob queued already keeps the later of its two times. These
    /// statements bind their blobs sorted, so that nodes working on the same blobs take their rows in much the same
    /// order and seldom deadlock (which fails the statement, and the pass tries again later).
    func queueBlobDeletions(_ blobs: [String], dueAt date: Date) async throws {
        guard !blobs.isEmpty else { return }
        let blobs = blobs.sorted()
        try await execute(
            """
            INSERT INTO blob_deletion (blob, due_at) SELECT unnest(\(blobs)::text[]), \(date.timeIntervalSince1970)
            ON CONFLICT (blob) DO UPDATE SET due_at = GREATEST(blob_deletion.due_at, EXCLUDED.due_at)
            """)
    }

    /// Up to `limit` queued blobs due by `now`, earliest first.
    func dueBlobDeletions(now: Date, limit: Int) async throws -> [String] {
        try await strings(
            """
            SELECT blob FROM blob_deletion WHERE due_at <= \(now.timeIntervalSince1970) ORDER BY due_at
            LIMIT \(Int64(limit))
            """)
    }

    /// Takes deleted blobs off the queue.
    func removeBlobDeletions(_ blobs: [String]) async throws {
        guard !blobs.isEmpty else { return }
        let blobs = blobs.sorted()
        try await execute("DELETE FROM blob_deletion WHERE blob = ANY(\(blobs)::text[])")
    }

    /// Makes those of `blobs` that are queued due no earlier than `date`; queues none of the others.
    func postponeBlobDeletions(_ blobs: [String], until date: Date) async throws {
        guard !blobs.isEmpty else { return }
        let blobs = blobs.sorted()
        try await execute(
            """
            UPDATE blob_deletion SET due_at = GREATEST(due_at, \(date.timeIntervalSince1970))
            WHERE blob = ANY(\(blobs)::text[])
            """)
    }
}
