import Foundation
import PostgresNIO

extension PostgresCatalog {
    /// The resumable uploads table (schema version 9).
    static let resumableUploadTable = [
        """
        CREATE TABLE resumable_upload (
            id TEXT PRIMARY KEY, upload_id TEXT NOT NULL, bucket TEXT NOT NULL, key TEXT NOT NULL, owner TEXT NOT NULL,
            length BIGINT, received BIGINT NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL, info TEXT NOT NULL, etag TEXT)
        """,
        "CREATE INDEX resumable_upload_by_expiry ON resumable_upload (expires_at)",
    ]

    func insertResumableUpload(_ upload: ResumableUpload) async throws {
        let info = try CatalogJSON.encode(upload.info)
        try await execute(
            """
            INSERT INTO resumable_upload (id, upload_id, bucket, key, owner, length, received, created_at, expires_at,
                info, etag)
            VALUES (\(upload.id), \(upload.uploadId), \(upload.bucket), \(upload.key), \(upload.owner), \(upload.length),
                \(upload.offset), \(upload.createdAt.timeIntervalSince1970), \(upload.expiresAt.timeIntervalSince1970),
                \(info), \(upload.etag))
            """)
    }

    func resumableUpload(_ id: String) async throws -> ResumableUpload? {
        try await rows("SELECT * FROM resumable_upload WHERE id = \(id)").first.map(Self.resumable)
    }

    func appendResumablePart(_ part: PartInfo, to id: String, at offset: Int64, byteLimit: Int64?) async throws
        -> ResumableAppendOutcome
    {
        let checksums = try CatalogJSON.encode(part.checksums)
        let plain = part.segments.count == 1 && part.segments[0].offset == nil && part.segments[0].size == part.size
        let segments = plain ? nil : try CatalogJSON.encode(part.segments)
        return try await transaction { [logger] connection -> ResumableAppendOutcome in
            // The upload's row, locked: appends to one upload from any node take their turn here.
            guard
                var upload = try await Self.rows(
                    "SELECT * FROM resumable_upload WHERE id = \(id) FOR UPDATE", on: connection, logger: logger
                ).first.map(Self.resumable),
                try await Self.exists(
                    "SELECT id FROM s3_upload WHERE id = \(upload.uploadId) FOR UPDATE", on: connection, logger: logger)
            else { return .missing }
            guard upload.offset == offset, upload.etag == nil else { return .conflict(upload) }
            if let length = upload.length, offset + part.size > length { return .beyondLength(upload) }
            let last = try await Self.rows(
                "SELECT MAX(number) AS last FROM s3_part WHERE upload_id = \(upload.uploadId)", on: connection,
                logger: logger
            ).first?["last"].decode(Int?.self)
            let number = (last ?? 0) + 1
            var numbered = part
            numbered.number = number
            // The owner's lock comes last, after the upload's rows, as every quota check takes it.
            try await Self.checkQuota(
                storing: numbered, uploadId: upload.uploadId, limit: byteLimit, freeing: [], on: connection, logger: logger)
            try await connection.query(
                """
                INSERT INTO s3_part (upload_id, number, size, etag, checksums, blob, last_modified, segments)
                VALUES (\(upload.uploadId), \(number), \(part.size), \(part.etag), \(checksums), \(part.blob),
                    \(part.lastModified.timeIntervalSince1970), \(segments))
                """, logger: logger)
            upload.offset += part.size
            try await connection.query(
                "UPDATE resumable_upload SET received = \(upload.offset) WHERE id = \(id)", logger: logger)
            return .appended(upload)
        }
    }

    func setResumableLength(_ id: String, length: Int64) async throws -> ResumableUpload? {
        try await execute(
            "UPDATE resumable_upload SET length = \(length) WHERE id = \(id) AND length IS NULL AND received <= \(length)")
        return try await resumableUpload(id)
    }

    func setResumableExpiry(_ id: String, to date: Date) async throws {
        try await execute("UPDATE resumable_upload SET expires_at = \(date.timeIntervalSince1970) WHERE id = \(id)")
    }

    func markResumableCompleted(_ id: String, etag: String) async throws {
        try await execute("UPDATE resumable_upload SET etag = \(etag) WHERE id = \(id)")
    }

    func claimPartialUploads(_ ids: [String], for final: String) async throws -> Bool {
        try await transaction { [logger] connection -> Bool in
            var claimed: [ResumableUpload] = []
            // Locked in one order, so that two final uploads naming the same partial uploads cannot deadlock.
            for id in Set(ids).sorted() {
                guard let row = try await Self.rows(
                    "SELECT * FROM resumable_upload WHERE id = \(id) FOR UPDATE", on: connection, logger: logger
                ).first else { return false }
                var upload = try Self.resumable(row)
                guard upload.etag == nil, upload.info.concatenatedInto == nil else { return false }
                upload.info.concatenatedInto = final
                claimed.append(upload)
            }
            for upload in claimed {
                let info = try CatalogJSON.encode(upload.info)
                try await connection.query("UPDATE resumable_upload SET info = \(info) WHERE id = \(upload.id)", logger: logger)
            }
            return true
        }
    }

    func releasePartialUploads(_ ids: [String], from final: String) async throws {
        try await transaction { [logger] connection in
            for id in Set(ids).sorted() {
                guard let row = try await Self.rows(
                    "SELECT * FROM resumable_upload WHERE id = \(id) FOR UPDATE", on: connection, logger: logger
                ).first else { continue }
                var upload = try Self.resumable(row)
                guard upload.info.concatenatedInto == final else { continue }
                upload.info.concatenatedInto = nil
                let info = try CatalogJSON.encode(upload.info)
                try await connection.query("UPDATE resumable_upload SET info = \(info) WHERE id = \(id)", logger: logger)
            }
        }
    }

    func concludePartialUpload(_ id: String, into final: String) async throws -> [String]? {
        try await transaction { [logger] connection -> [String]? in
            guard let row = try await Self.rows(
                "SELECT * FROM resumable_upload WHERE id = \(id) FOR UPDATE", on: connection, logger: logger
            ).first else { return nil }
            var upload = try Self.resumable(row)
            guard [nil, final].contains(upload.info.concatenatedInto),
                try await Self.lockUpload(upload.uploadId, on: connection, logger: logger)
            else { return nil }
            upload.info.concatenatedInto = final
            let info = try CatalogJSON.encode(upload.info)
            try await connection.query("UPDATE resumable_upload SET info = \(info) WHERE id = \(id)", logger: logger)
            let blobs = try await Self.rows(
                "SELECT blob, segments FROM s3_part WHERE upload_id = \(upload.uploadId)", on: connection, logger: logger
            ).flatMap(Self.partBlobs)
            try await connection.query("DELETE FROM s3_upload WHERE id = \(upload.uploadId)", logger: logger)
            return blobs
        }
    }

    func deleteResumableUpload(_ id: String) async throws -> ResumableUpload? {
        try await rows("DELETE FROM resumable_upload WHERE id = \(id) RETURNING *").first.map(Self.resumable)
    }

    func expiredResumableUploads(before date: Date, limit: Int) async throws -> [ResumableUpload] {
        try await rows(
            """
            SELECT * FROM resumable_upload WHERE expires_at < \(date.timeIntervalSince1970) ORDER BY expires_at
            LIMIT \(limit)
            """
        ).map(Self.resumable)
    }

    func unclaimedResumableMultipartUploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo] {
        let prefix = ResumableUpload.multipartIdPrefix
        return try await rows(
            """
            SELECT * FROM s3_upload WHERE starts_with(id, \(prefix))
                AND initiated < \(date.timeIntervalSince1970)
                AND NOT EXISTS (SELECT 1 FROM resumable_upload WHERE resumable_upload.upload_id = s3_upload.id)
            ORDER BY initiated LIMIT \(limit)
            """
        ).map(Self.uploadInfo)
    }

    private static func resumable(_ row: PostgresRandomAccessRow) throws -> ResumableUpload {
        ResumableUpload(
            id: try row.value("id"), uploadId: try row.value("upload_id"), bucket: try row.value("bucket"),
            key: try row.value("key"), owner: try row.value("owner"), length: try row.value("length"),
            offset: try row.value("received"), createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"), info: try row.json("info"), etag: try row.value("etag"))
    }
}
