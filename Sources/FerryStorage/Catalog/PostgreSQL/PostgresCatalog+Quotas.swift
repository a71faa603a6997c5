import FerryCore
import Foundation
import Logging
import PostgresNIO

/// What each access key holds, for its quota: objects and multipart uploads carry their owner (the long-term key);
/// a part counts against its upload's owner.
///
/// A write that checks a quota first takes a transaction-scoped advisory lock on its owner, so the nodes sharing the
/// catalog check and record one owner's writes one after the other: together they never store more than the quota.
/// The lock is always the last one a transaction takes (after a key's or an upload's), so no two writers wait on each
/// other in a circle.
extension PostgresCatalog {
    /// Migration 10: owners of objects and uploads, quotas of access keys.
    static let quotaMigration = [
        "ALTER TABLE access_key ADD COLUMN quota TEXT",
        "ALTER TABLE s3_object ADD COLUMN owner TEXT",
        "ALTER TABLE s3_upload ADD COLUMN owner TEXT",
        "CREATE INDEX s3_object_by_owner ON s3_object (owner)",
        "CREATE INDEX s3_upload_by_owner ON s3_upload (owner)",
    ]

    /// The first key of the two-key advisory locks on owners (a key space apart from the one-key locks on object keys).
    static let quotaLockClass: Int32 = 0x4672_5175  // "FrQu"

    /// Serializes the quota checks of one owner's writes, on every node, until the transaction ends.
    static func lockOwner(_ owner: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await lock(
            "SELECT pg_advisory_xact_lock(\(quotaLockClass), hashtext(\(owner)))", on: connection, logger: logger)
    }

    func usage(owner: String) async throws -> StorageUsage {
        return try await leased { [logger] connection in
            StorageUsage(
                storedBytes: try await Self.storedBytes(owner: owner, on: connection, logger: logger),
                uploadsInProgress: try await Self.uploadCount(owner: owner, on: connection, logger: logger))
        }
    }

    func uploadCount() async throws -> Int {
        try await leased { [logger] connection in
            try await Self.rows("SELECT COUNT(*) AS count FROM s3_upload", on: connection, logger: logger)
                .first?["count"].decode(Int.self) ?? 0
        }
    }

    public func videoCount(owner: String) async throws -> Int {
        return try await leased { [logger] connection in
            try await Self.videoCount(owner: owner, on: connection, logger: logger)
        }
    }

    /// How many videos (not deleted) `owner` has.
    static func videoCount(owner: String, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        try await rows(
            "SELECT COUNT(*) AS count FROM video WHERE owner = \(owner) AND status <> 'Deleted'", on: connection,
            logger: logger
        ).first?["count"].decode(Int.self) ?? 0
    }

    /// Bytes of `owner`'s objects and of the parts of its uploads.
    static func storedBytes(owner: String, on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let row = try await rows(
            """
            SELECT (SELECT COALESCE(SUM(size), 0) FROM s3_object WHERE owner = \(owner))::BIGINT AS objects,
                (SELECT COALESCE(SUM(p.size), 0) FROM s3_part p JOIN s3_upload u ON u.id = p.upload_id
                 WHERE u.owner = \(owner))::BIGINT AS parts
            """, on: connection, logger: logger
        ).first
        return (try row?["objects"].decode(Int64.self) ?? 0) + (try row?["parts"].decode(Int64.self) ?? 0)
    }

    /// How many uploads `owner` has in progress.
    static func uploadCount(owner: String, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        try await rows("SELECT COUNT(*) AS count FROM s3_upload WHERE owner = \(owner)", on: connection, logger: logger)
            .first?["count"].decode(Int.self) ?? 0
    }

    /// Refuses storing `object` when it takes its owner past `limit` (an object of the same owner it replaces frees
    /// its bytes). Takes the owner's lock.
    static func checkQuota(storing object: ObjectInfo, limit: Int64?, on connection: PostgresConnection, logger: Logger)
        async throws
    {
        guard let limit, let owner = object.owner else { return }
        try await lockOwner(owner, on: connection, logger: logger)
        let current = try await rows(
            "SELECT size, owner FROM s3_object WHERE bucket = \(object.bucket) AND key = \(object.key)",
            on: connection, logger: logger
        ).first
        let freed: Int64 = try current.map { try $0.value("owner") as String? == owner ? $0.value("size") : 0 } ?? 0
        try StorageQuotaCheck.check(
            stored: try await storedBytes(owner: owner, on: connection, logger: logger), adding: object.size,
            freeing: freed, limit: limit)
    }

    /// Refuses recording `part` of `uploadId` when it takes the upload's owner past `limit` (a part with the same
    /// number frees its bytes, and so do the parts of the owner's uploads named in `freeing`, while recorded). Takes
    /// the owner's lock.
    static func checkQuota(
        storing part: PartInfo, uploadId: String, limit: Int64?, freeing: [String], on connection: PostgresConnection,
        logger: Logger
    ) async throws {
        guard let limit else { return }
        let upload = try await rows("SELECT owner FROM s3_upload WHERE id = \(uploadId)", on: connection, logger: logger)
            .first
        guard let owner = try upload?["owner"].decode(String?.self) ?? nil else { return }
        try await lockOwner(owner, on: connection, logger: logger)
        var freed =
            try await rows(
                "SELECT size FROM s3_part WHERE upload_id = \(uploadId) AND number = \(part.number)", on: connection,
                logger: logger
            ).first?["size"].decode(Int64.self) ?? 0
        let others = Array(Set(freeing).subtracting([uploadId]))
        if !others.isEmpty {
            freed +=
                try await rows(
                    """
                    SELECT COALESCE(SUM(p.size), 0)::BIGINT AS size FROM s3_part p JOIN s3_upload u ON u.id = p.upload_id
                    WHERE u.owner = \(owner) AND p.upload_id = ANY(\(others))
                    """, on: connection, logger: logger
                ).first?["size"].decode(Int64.self) ?? 0
        }
        try StorageQuotaCheck.check(
            stored: try await storedBytes(owner: owner, on: connection, logger: logger), adding: part.size,
            freeing: freed, limit: limit)
    }
}
