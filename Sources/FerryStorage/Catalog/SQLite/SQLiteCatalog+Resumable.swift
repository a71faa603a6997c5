import Foundation
import GRDB

extension SQLiteCatalog {
    static let resumableMigration = Migration("v12-resumable-uploads", """
        CREATE TABLE resumableUpload (
            id TEXT PRIMARY KEY NOT NULL,
            uploadId TEXT NOT NULL,
            bucket TEXT NOT NULL,
            key TEXT NOT NULL,
            owner TEXT NOT NULL,
            length INTEGER,
            received INTEGER NOT NULL DEFAULT 0,
            createdAt DOUBLE NOT NULL,
            expiresAt DOUBLE NOT NULL,
            info TEXT NOT NULL,
            etag TEXT
        );
        CREATE INDEX resumableUpload_by_expiry ON resumableUpload(expiresAt);
        """)

    /// The collector finds the multipart uploads no resumable upload names by this index, and the oldest uploads by
    /// the other (``unclaimedResumableMultipartUploads(initiatedBefore:limit:)``).
    static let resumableUploadIndexMigration = Migration("v16-resumable-upload-indexes", """
        CREATE INDEX resumableUpload_by_upload ON resumableUpload(uploadId);
        CREATE INDEX upload_by_time ON upload(initiated);
        """)

    func insertResumableUpload(_ upload: ResumableUpload) async throws {
        let info = try CatalogJSON.encode(upload.info)
        try await execute("""
            INSERT INTO resumableUpload (id, uploadId, bucket, key, owner, length, received, createdAt, expiresAt,
                info, etag)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [
            upload.id, upload.uploadId, upload.bucket, upload.key, upload.owner, upload.length, upload.offset,
            upload.createdAt.timeIntervalSince1970, upload.expiresAt.timeIntervalSince1970, info, upload.etag,
        ])
    }

    func resumableUpload(_ id: String) async throws -> ResumableUpload? {
        try await pool.read { db in try Self.resumable(id, db) }
    }

    func appendResumablePart(_ part: PartInfo, to id: String, at offset: Int64, byteLimit: Int64?) async throws
        -> ResumableAppendOutcome
    {
        let checksums = try CatalogJSON.encode(part.checksums)
        let plain = part.segments.count == 1 && part.segments[0].offset == nil && part.segments[0].size == part.size
        let segments = plain ? nil : try CatalogJSON.encode(part.segments)
        return try await pool.write { db in
            guard var upload = try Self.resumable(id, db),
                try db.exists("SELECT 1 FROM upload WHERE id = ?", [upload.uploadId])
            else { return .missing }
            guard upload.offset == offset, upload.etag == nil else { return .conflict(upload) }
            if let length = upload.length, offset + part.size > length { return .beyondLength(upload) }
            var numbered = part
            numbered.number =
                (try Int.fetchOne(db, sql: "SELECT MAX(number) FROM part WHERE uploadId = ?", arguments: [upload.uploadId]) ?? 0)
                + 1
            try Self.checkQuota(storing: numbered, uploadId: upload.uploadId, limit: byteLimit, db)
            try db.execute(
                sql: """
                    INSERT INTO part (uploadId, number, size, etag, checksums, blob, lastModified, segments)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    upload.uploadId, numbered.number, part.size, part.etag, checksums, part.blob,
                    part.lastModified.timeIntervalSince1970, segments,
                ])
            upload.offset += part.size
            try db.execute(sql: "UPDATE resumableUpload SET received = ? WHERE id = ?", arguments: [upload.offset, id])
            return .appended(upload)
        }
    }

    func setResumableLength(_ id: String, length: Int64) async throws -> ResumableUpload? {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE resumableUpload SET length = ? WHERE id = ? AND length IS NULL AND received <= ?",
                arguments: [length, id, length])
            return try Self.resumable(id, db)
        }
    }

    func setResumableExpiry(_ id: String, to date: Date) async throws {
        try await execute("UPDATE resumableUpload SET expiresAt = ? WHERE id = ?", [date.timeIntervalSince1970, id])
    }

    func markResumableCompleted(_ id: String, etag: String) async throws {
        try await execute("UPDATE resumableUpload SET etag = ? WHERE id = ?", [etag, id])
    }

    func claimPartialUploads(_ ids: [String], for final: String) async throws -> Bool {
        try await pool.write { db in
            var claimed: [ResumableUpload] = []
            for id in ids {
                guard var upload = try Self.resumable(id, db), upload.etag == nil, upload.info.concatenatedInto == nil
                else { return false }
                upload.info.concatenatedInto = final
                claimed.append(upload)
            }
            for upload in claimed {
                try db.execute(
                    sql: "UPDATE resumableUpload SET info = ? WHERE id = ?",
                    arguments: [try CatalogJSON.encode(upload.info), upload.id])
            }
            return true
        }
    }

    func releasePartialUploads(_ ids: [String], from final: String) async throws {
        try await pool.write { db in
            for id in ids {
                guard var upload = try Self.resumable(id, db), upload.info.concatenatedInto == final else { continue }
                upload.info.concatenatedInto = nil
                try db.execute(
                    sql: "UPDATE resumableUpload SET info = ? WHERE id = ?", arguments: [try CatalogJSON.encode(upload.info), id])
            }
        }
    }

    func concludePartialUpload(_ id: String, into final: String) async throws -> [String]? {
        try await pool.write { db in
            guard var upload = try Self.resumable(id, db), [nil, final].contains(upload.info.concatenatedInto),
                try db.exists("SELECT 1 FROM upload WHERE id = ?", [upload.uploadId])
            else { return nil }
            upload.info.concatenatedInto = final
            try db.execute(
                sql: "UPDATE resumableUpload SET info = ? WHERE id = ?", arguments: [try CatalogJSON.encode(upload.info), id])
            let blobs = try Row.fetchAll(db, sql: "SELECT blob, segments FROM part WHERE uploadId = ?", arguments: [upload.uploadId])
                .flatMap(Self.partBlobs)
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [upload.uploadId])
            return blobs
        }
    }

    func deleteResumableUpload(_ id: String) async throws -> ResumableUpload? {
        try await pool.write { db in
            let upload = try Self.resumable(id, db)
            try db.execute(sql: "DELETE FROM resumableUpload WHERE id = ?", arguments: [id])
            return upload
        }
    }

    func expiredResumableUploads(before date: Date, limit: Int) async throws -> [ResumableUpload] {
        try await all(
            "SELECT * FROM resumableUpload WHERE expiresAt < ? ORDER BY expiresAt LIMIT ?",
            [date.timeIntervalSince1970, limit], Self.resumable)
    }

    func unclaimedResumableMultipartUploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo] {
        let prefix = ResumableUpload.multipartIdPrefix
        return try await all(
            """
            SELECT * FROM upload WHERE substr(id, 1, ?) = ? AND initiated < ?
                AND NOT EXISTS (SELECT 1 FROM resumableUpload WHERE resumableUpload.uploadId = upload.id)
            ORDER BY initiated LIMIT ?
            """, [prefix.count, prefix, date.timeIntervalSince1970, limit], Self.uploadInfo)
    }

    private static func resumable(_ id: String, _ db: Database) throws -> ResumableUpload? {
        try Row.fetchOne(db, sql: "SELECT * FROM resumableUpload WHERE id = ?", arguments: [id]).map(resumable)
    }

    private static func resumable(_ row: Row) throws -> ResumableUpload {
        ResumableUpload(
            id: row["id"], uploadId: row["uploadId"], bucket: row["bucket"], key: row["key"], owner: row["owner"],
            length: row["length"], offset: row["received"], createdAt: Date(timeIntervalSince1970: row["createdAt"]),
            expiresAt: Date(timeIntervalSince1970: row["expiresAt"]),
            info: try CatalogJSON.decode(ResumableUpload.Info.self, row["info"]), etag: row["etag"])
    }
}
