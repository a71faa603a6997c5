import FerryCore
import Foundation
import GRDB

/// What each access key holds, for its quota: objects and multipart uploads carry their owner (the long-term key);
/// a part counts against its upload's owner. Writes check a quota inside their write transaction, which SQLite
/// runs one at a time.
extension SQLiteCatalog {
    /// Owners of objects and uploads, and quotas of access keys.
    static let quotaMigration = Migration("v13-quotas", """
        ALTER TABLE accessKey ADD COLUMN quota TEXT;
        ALTER TABLE object ADD COLUMN owner TEXT;
        ALTER TABLE upload ADD COLUMN owner TEXT;
        CREATE INDEX object_by_owner ON object(owner);
        CREATE INDEX upload_by_owner ON upload(owner);
        """)

    /// What `owner` holds now.
    func usage(owner: String) async throws -> StorageUsage {
        try await pool.read { db in
            StorageUsage(storedBytes: try Self.storedBytes(owner: owner, db), uploadsInProgress: try Self.uploadCount(owner: owner, db))
        }
    }

    func uploadCount() async throws -> Int {
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM upload") ?? 0 }
    }

    /// How many videos (not deleted) `owner` has.
    public func videoCount(owner: String) async throws -> Int {
        try await pool.read { db in try Self.videoCount(owner: owner, db) }
    }

    /// How many videos (not deleted) `owner` has, in `db`.
    static func videoCount(owner: String, _ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM video WHERE owner = ? AND status != 'Deleted'", arguments: [owner])
            ?? 0
    }

    /// Bytes of `owner`'s objects and of the parts of its uploads.
    static func storedBytes(owner: String, _ db: Database) throws -> Int64 {
        let objects =
            try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM object WHERE owner = ?", arguments: [owner]) ?? 0
        let parts =
            try Int64.fetchOne(
                db,
                sql: "SELECT COALESCE(SUM(part.size), 0) FROM part JOIN upload ON upload.id = part.uploadId WHERE upload.owner = ?",
                arguments: [owner]) ?? 0
        return objects + parts
    }

    /// How many uploads `owner` has in progress.
    static func uploadCount(owner: String, _ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM upload WHERE owner = ?", arguments: [owner]) ?? 0
    }

    /// Refuses storing `object` when it takes its owner past `limit` (an object of the same owner it replaces frees
    /// its bytes).
    static func checkQuota(storing object: ObjectInfo, limit: Int64?, _ db: Database) throws {
        guard let limit, let owner = object.owner else { return }
        let current = try Row.fetchOne(
            db, sql: "SELECT size, owner FROM object WHERE bucket = ? AND key = ?", arguments: [object.bucket, object.key])
        let freed: Int64 = current.flatMap { ($0["owner"] as String?) == owner ? $0["size"] as Int64 : nil } ?? 0
        try StorageQuotaCheck.check(
            stored: try storedBytes(owner: owner, db), adding: object.size, freeing: freed, limit: limit)
    }

    /// Refuses recording `part` of `uploadId` when it takes the upload's owner past `limit` (a part with the same
    /// number frees its bytes, and so do the parts of the owner's uploads named in `freeing`, while recorded).
    static func checkQuota(
        storing part: PartInfo, uploadId: String, limit: Int64?, freeing: [String] = [], _ db: Database
    ) throws {
        guard let limit,
            let owner = try String.fetchOne(db, sql: "SELECT owner FROM upload WHERE id = ?", arguments: [uploadId])
        else { return }
        var freed =
            try Int64.fetchOne(
                db, sql: "SELECT size FROM part WHERE uploadId = ? AND number = ?", arguments: [uploadId, part.number]) ?? 0
        let others = Array(Set(freeing).subtracting([uploadId]))
        if !others.isEmpty {
            freed += try Int64.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(part.size), 0) FROM part JOIN upload ON upload.id = part.uploadId
                    WHERE upload.owner = ? AND part.uploadId IN (\(databaseQuestionMarks(count: others.count)))
                    """, arguments: StatementArguments([owner] + others)) ?? 0
        }
        try StorageQuotaCheck.check(stored: try storedBytes(owner: owner, db), adding: part.size, freeing: freed, limit: limit)
    }
}
