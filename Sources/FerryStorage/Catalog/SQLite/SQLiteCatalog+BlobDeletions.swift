import Foundation
import GRDB

// The catalog's queue of blobs to delete: blobs nothing references any more that could not be deleted at once (a
// reader still holds them, other nodes get a grace period, the storage failed), kept in the catalog so a restart does
// not lose them. ``CatalogObjectStore/retire(_:)`` queues; ``CatalogObjectStore/deleteQueuedBlobs(now:limit:)``
// deletes what is due.

extension SQLiteCatalog {
    /// Whether other nodes share this catalog: never (it is a file in this node's data directory).
    var isShared: Bool { false }

    /// Schema of the deletion queue: one row per blob, with when it may go.
    static let blobDeletionMigration = Migration("v9-blob-deletions", """
        CREATE TABLE blobDeletion (blob TEXT PRIMARY KEY, dueAt DOUBLE NOT NULL);
        CREATE INDEX blobDeletion_by_due ON blobDeletion(dueAt);
        """)

    /// Queues blobs for deletion at `date` or later; a blob queued already keeps the later of its two times.
    func queueBlobDeletions(_ blobs: [String], dueAt date: Date) async throws {
        guard !blobs.isEmpty else { return }
        try await pool.write { db in
            for blob in blobs {
                try db.execute(
                    sql: """
                        INSERT INTO blobDeletion (blob, dueAt) VALUES (?, ?)
                        ON CONFLICT(blob) DO UPDATE SET dueAt = max(dueAt, excluded.dueAt)
                        """,
                    arguments: [blob, date.timeIntervalSince1970])
            }
        }
    }

    /// Up to `limit` queued blobs due by `now`, earliest first.
    func dueBlobDeletions(now: Date, limit: Int) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT blob FROM blobDeletion WHERE dueAt <= ? ORDER BY dueAt LIMIT ?",
                arguments: [now.timeIntervalSince1970, limit])
        }
    }

    /// Takes deleted blobs off the queue.
    func removeBlobDeletions(_ blobs: [String]) async throws {
        guard !blobs.isEmpty else { return }
        try await pool.write { db in
            for blob in blobs {
                try db.execute(sql: "DELETE FROM blobDeletion WHERE blob = ?", arguments: [blob])
            }
        }
    }

    /// Makes those of `blobs` that are queued due no earlier than `date`; queues none of the others.
    func postponeBlobDeletions(_ blobs: [String], until date: Date) async throws {
        guard !blobs.isEmpty else { return }
        try await pool.write { db in
            for blob in blobs {
                try db.execute(
                    sql: "UPDATE blobDeletion SET dueAt = max(dueAt, ?) WHERE blob = ?",
                    arguments: [date.timeIntervalSince1970, blob])
            }
        }
    }
}
