import Foundation
import GRDB

extension SQLiteCatalog: MediaCatalog {
    /// Schema of the media catalog.
    static let mediaMigration = Migration("v3-media", """
        CREATE TABLE video (
            videoId TEXT PRIMARY KEY NOT NULL, record TEXT NOT NULL, status TEXT NOT NULL,
            cateId INTEGER, tags TEXT, bucket TEXT NOT NULL, key TEXT NOT NULL, createdAt DOUBLE NOT NULL
        );
        CREATE INDEX video_by_object ON video(bucket, key);
        CREATE INDEX video_by_status ON video(status, createdAt);
        CREATE TABLE image (
            imageId TEXT PRIMARY KEY NOT NULL, record TEXT NOT NULL, bucket TEXT NOT NULL, key TEXT NOT NULL,
            createdAt DOUBLE NOT NULL
        );
        CREATE INDEX image_by_object ON image(bucket, key);
        """)

    /// The owner of each video as a column, so a key's listing is filtered in the query.
    static let mediaOwnerMigration = Migration("v5-media-owner", """
        ALTER TABLE video ADD COLUMN owner TEXT;
        ALTER TABLE video ADD COLUMN clientToken TEXT;
        UPDATE video SET owner = json_extract(record, '$.owner');
        CREATE INDEX video_by_owner ON video(owner, createdAt);
        CREATE INDEX video_by_token ON video(owner, clientToken);
        """)

    /// Videos stored before media processing existed (status `Uploaded`) become `UploadSucc` and are probed.
    static let videoStatusMigration = Migration("v7-video-processing") { db in
        let ids = try String.fetchAll(db, sql: "SELECT videoId FROM video WHERE status = 'Uploaded'")
        try db.execute(
            sql: """
                UPDATE video SET status = 'UploadSucc', record = json_set(record, '$.status', 'UploadSucc')
                WHERE status = 'Uploaded'
                """)
        try insertJobs(ids.map { MediaJob(videoId: $0, kind: .probe) }, db)
    }

    /// Images get a status column beside their record, so the collector finds those still uploading by an index.
    static let imageStatusMigration = Migration("v17-image-status", """
        ALTER TABLE image ADD COLUMN status TEXT;
        UPDATE image SET status = json_extract(record, '$.status');
        CREATE INDEX image_by_status ON image(status, imageId);
        """)

    /// Stores or replaces a video.
    public func saveVideo(_ video: VideoRecord) async throws {
        let record = try CatalogJSON.encode(video)
        try await pool.write { db in try Self.insertVideo(video, record: record, db) }
    }

    @discardableResult
    public func updateVideo(_ id: String, _ change: @escaping @Sendable (inout VideoRecord) throws -> RecordChange)
        async throws -> VideoRecord?
    {
        try await update(id, "SELECT record FROM video WHERE videoId = ?", change) {
            try Self.insertVideo($0, record: $1, $2)
        }
    }

    private static func insertVideo(_ video: VideoRecord, record: String, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO video
                (videoId, record, status, cateId, tags, bucket, key, createdAt, owner, clientToken)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                video.videoId, record, video.status, video.cateId, video.tags, video.bucket, video.key,
                video.createdAt.timeIntervalSince1970, video.owner, video.clientToken,
            ])
    }

    public func createVideo(_ video: VideoRecord, videoLimit: Int?, tokenUsedOnce: Bool) async throws -> VideoRecord {
        let record = try CatalogJSON.encode(video)
        // One write transaction: the lookup and the insert cannot interleave with another request's.
        let existing = try await pool.write { db -> String? in
            if let token = video.clientToken,
                let found = try String.fetchOne(
                    db,
                    sql: "SELECT record FROM video WHERE owner = ? AND clientToken = ?"
                        + (tokenUsedOnce ? "" : " AND status = 'Uploading'") + " ORDER BY createdAt DESC",
                    arguments: [video.owner, token])
            {
                return found
            }
            if let limit = videoLimit, try Self.videoCount(owner: video.owner, db) >= limit {
                throw FerryDomainError.videoQuotaExceeded(limit: limit)
            }
            try Self.insertVideo(video, record: record, db)
            return nil
        }
        return try existing.map { try CatalogJSON.decode(VideoRecord.self, $0) } ?? video
    }

    /// The video, or nil.
    public func video(_ id: String) async throws -> VideoRecord? {
        try await record(VideoRecord.self, "SELECT record FROM video WHERE videoId = ?", [id])
    }

    /// The video still uploading that `owner` created with `clientToken`, or nil.
    public func uploadingVideo(owner: String, clientToken: String) async throws -> VideoRecord? {
        try await record(
            VideoRecord.self,
            "SELECT record FROM video WHERE owner = ? AND clientToken = ? AND status = 'Uploading' ORDER BY createdAt DESC",
            [owner, clientToken])
    }

    public func uploadingVideos(createdBefore date: Date, after videoId: String, limit: Int) async throws -> [VideoRecord] {
        try await records(
            VideoRecord.self,
            "SELECT record FROM video WHERE status = 'Uploading' AND createdAt < ? AND videoId > ? ORDER BY videoId LIMIT ?",
            [date.timeIntervalSince1970, videoId, limit])
    }

    /// The video whose source file is `bucket`/`key`.
    public func video(bucket: String, key: String) async throws -> VideoRecord? {
        try await record(VideoRecord.self, "SELECT record FROM video WHERE bucket = ? AND key = ?", [bucket, key])
    }

    /// A page of videos, newest first, and the total matching.
    public func videos(status: String?, cateId: Int?, tag: String?, title: String?, owner: String?, offset: Int, limit: Int)
        async throws -> (videos: [VideoRecord], total: Int)
    {
        var conditions = ["status != 'Deleted'"]
        var arguments: StatementArguments = []
        func add(_ condition: String, _ value: some DatabaseValueConvertible) {
            conditions.append(condition)
            _ = arguments.append(contentsOf: [value])
        }
        if let owner { add("owner = ?", owner) }
        if let status { add("status = ?", status) }
        if let cateId { add("cateId = ?", cateId) }
        // A tag matches whole and as written (case kept, `%` and `_` literal), as in the PostgreSQL catalog.
        if let tag { add("instr(',' || tags || ',', ?) > 0", "," + tag + ",") }
        if let title, !title.isEmpty {
            add("json_extract(record, '$.title') LIKE ? ESCAPE '\\'", Self.containsPattern(title))
        }
        let filter = conditions.joined(separator: " AND ")
        let countArguments = arguments
        let pageArguments = arguments + [limit, offset]
        let (rows, total) = try await pool.read { db in
            (
                try String.fetchAll(
                    db, sql: "SELECT record FROM video WHERE \(filter) ORDER BY createdAt DESC, videoId LIMIT ? OFFSET ?",
                    arguments: pageArguments),
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM video WHERE \(filter)", arguments: countArguments) ?? 0
            )
        }
        return (try rows.map { try CatalogJSON.decode(VideoRecord.self, $0) }, total)
    }

    public func uploadingImages(createdBefore date: Date, after imageId: String, limit: Int) async throws -> [ImageRecord] {
        try await records(
            ImageRecord.self,
            "SELECT record FROM image WHERE status = 'Uploading' AND createdAt < ? AND imageId > ? ORDER BY imageId LIMIT ?",
            [date.timeIntervalSince1970, imageId, limit])
    }

    /// Stores or replaces an image.
    public func saveImage(_ image: ImageRecord) async throws {
        let record = try CatalogJSON.encode(image)
        try await pool.write { db in try Self.insertImage(image, record: record, db) }
    }

    @discardableResult
    public func updateImage(_ id: String, _ change: @escaping @Sendable (inout ImageRecord) throws -> RecordChange)
        async throws -> ImageRecord?
    {
        try await update(id, "SELECT record FROM image WHERE imageId = ?", change) {
            try Self.insertImage($0, record: $1, $2)
        }
    }

    /// Reads the record `select` finds by `id`, lets `change` alter it and, when it says so, stores it with `insert`
    /// and what the change brings, in one write transaction; under a ``JobLease/current`` no longer held, nothing.
    private func update<R: Codable & Sendable>(
        _ id: String, _ select: String, _ change: @escaping @Sendable (inout R) throws -> RecordChange,
        insert: @escaping @Sendable (R, String, Database) throws -> Void
    ) async throws -> R? {
        let lease = JobLease.current
        return try await pool.write { db in
            if let lease,
                try String.fetchOne(
                    db, sql: "SELECT leaseOwner FROM mediaJob WHERE id = ? AND state = 'running'",
                    arguments: [lease.jobId]) != lease.worker
            {
                return nil
            }
            guard let text = try String.fetchOne(db, sql: select, arguments: [id]) else { return nil }
            var record = try CatalogJSON.decode(R.self, text)
            let outcome = try change(&record)
            guard outcome.save else { return nil }
            try insert(record, try CatalogJSON.encode(record), db)
            try Self.apply(outcome, id: id, db)
            return record
        }
    }

    /// What a saved change brings with it: the record's jobs cancelled, new jobs, webhook events, images.
    private static func apply(_ change: RecordChange, id: String, _ db: Database) throws {
        if change.cancelJobs { _ = try cancelJobs(videoId: id, now: Date(), db) }
        try insertJobs(change.enqueue, db)
        for event in change.notify { try insertWebhookEvent(event, db) }
        for image in change.images { try insertImage(image, record: try CatalogJSON.encode(image), db) }
    }

    private static func insertImage(_ image: ImageRecord, record: String, _ db: Database) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO image (imageId, record, bucket, key, createdAt, status) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [
                image.imageId, record, image.bucket, image.key, image.createdAt.timeIntervalSince1970, image.status,
            ])
    }

    public func createImage(_ image: ImageRecord) async throws -> ImageRecord {
        let record = try CatalogJSON.encode(image)
        // One write transaction: the lookup and the insert cannot interleave with another request's.
        let existing = try await pool.write { db -> String? in
            if let token = image.clientToken,
                let found = try String.fetchOne(
                    db,
                    sql: """
                        SELECT record FROM image WHERE status = 'Uploading' AND json_extract(record, '$.clientToken') = ?
                        AND json_extract(record, '$.owner') IS ? AND json_extract(record, '$.imageType') = ?
                        ORDER BY createdAt DESC
                        """,
                    arguments: [token, image.owner, image.imageType])
            {
                return found
            }
            try Self.insertImage(image, record: record, db)
            return nil
        }
        return try existing.map { try CatalogJSON.decode(ImageRecord.self, $0) } ?? image
    }

    /// The image, or nil.
    public func image(_ id: String) async throws -> ImageRecord? {
        try await record(ImageRecord.self, "SELECT record FROM image WHERE imageId = ?", [id])
    }

    /// The image whose file is `bucket`/`key`.
    public func image(bucket: String, key: String) async throws -> ImageRecord? {
        try await record(ImageRecord.self, "SELECT record FROM image WHERE bucket = ? AND key = ?", [bucket, key])
    }

    /// The record in the first row `sql` selects (its `record` column), or nil.
    private func record<R: Decodable>(_ type: R.Type, _ sql: String, _ arguments: StatementArguments) async throws -> R? {
        try await pool.read { db in try String.fetchOne(db, sql: sql, arguments: arguments) }
            .map { try CatalogJSON.decode(type, $0) }
    }

    /// The records of every row `sql` selects.
    private func records<R: Decodable>(_ type: R.Type, _ sql: String, _ arguments: StatementArguments) async throws
        -> [R]
    {
        try await pool.read { db in try String.fetchAll(db, sql: sql, arguments: arguments) }
            .map { try CatalogJSON.decode(type, $0) }
    }
}
