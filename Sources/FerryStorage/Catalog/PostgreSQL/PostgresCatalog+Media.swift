import Foundation
import Logging
import PostgresNIO

extension PostgresCatalog: MediaCatalog {
    static func insertVideo(_ video: VideoRecord, on connection: PostgresConnection, logger: Logger) async throws {
        let record = try CatalogJSON.encode(video)
        try await connection.query(
            """
            INSERT INTO video (video_id, record, status, cate_id, tags, bucket, key, created_at, owner, client_token)
            VALUES (\(video.videoId), \(record), \(video.status), \(video.cateId), \(video.tags), \(video.bucket),
                    \(video.key), \(video.createdAt.timeIntervalSince1970), \(video.owner), \(video.clientToken))
            ON CONFLICT (video_id) DO UPDATE SET record = EXCLUDED.record, status = EXCLUDED.status,
                cate_id = EXCLUDED.cate_id, tags = EXCLUDED.tags, bucket = EXCLUDED.bucket, key = EXCLUDED.key,
                created_at = EXCLUDED.created_at, owner = EXCLUDED.owner, client_token = EXCLUDED.client_token
            """, logger: logger)
    }

    public func saveVideo(_ video: VideoRecord) async throws {
        try await leased { [logger] connection in try await Self.insertVideo(video, on: connection, logger: logger) }
    }

    @discardableResult
    public func updateVideo(_ id: String, _ change: @escaping @Sendable (inout VideoRecord) throws -> RecordChange)
        async throws -> VideoRecord?
    {
        try await update(id, "SELECT record FROM video WHERE video_id = \(id) FOR UPDATE", change) {
            try await Self.insertVideo($0, on: $1, logger: $2)
        }
    }

    public func video(_ id: String) async throws -> VideoRecord? {
        try await records(VideoRecord.self, "SELECT record FROM video WHERE video_id = \(id)").first
    }

    public func video(bucket: String, key: String) async throws -> VideoRecord? {
        try await records(VideoRecord.self, "SELECT record FROM video WHERE bucket = \(bucket) AND key = \(key) LIMIT 1")
            .first
    }

    public func videos(status: String?, cateId: Int?, tag: String?, title: String?, owner: String?, offset: Int, limit: Int)
        async throws -> (videos: [VideoRecord], total: Int)
    {
        var conditions = ["status <> 'Deleted'"]
        var bindings = PostgresBindings()
        func bind(_ condition: String, _ value: String) {
            bindings.append(value)
            conditions.append(condition.replacingOccurrences(of: "?", with: "$\(bindings.count)"))
        }
        if let owner { bind("owner = ?", owner) }
        if let status { bind("status = ?", status) }
        if let cateId {
            bindings.append(Int64(cateId))
            conditions.append("cate_id = $\(bindings.count)")
        }
        // A tag matches whole and as written (case kept, `%` and `_` literal), as in the SQLite catalog.
        if let tag { bind("strpos(',' || tags || ',', ?) > 0", "," + tag + ",") }
        // ASCII letters folded only, as SQLite's LIKE does (ILIKE would fold by the database's locale).
        if let title, !title.isEmpty {
            let upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            let folded = String(decoding: title.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
            bind(
                "translate(record::jsonb ->> 'title', '\(upper)', '\(upper.lowercased())') LIKE ? ESCAPE '\\'",
                Self.containsPattern(folded))
        }
        let filter = conditions.joined(separator: " AND ")
        let countQuery = PostgresQuery(unsafeSQL: "SELECT COUNT(*) AS count FROM video WHERE \(filter)", binds: bindings)
        var pageBindings = bindings
        pageBindings.append(Int64(limit))
        pageBindings.append(Int64(offset))
        let pageQuery = PostgresQuery(
            unsafeSQL: """
                SELECT record FROM video WHERE \(filter) ORDER BY created_at DESC, video_id
                LIMIT $\(pageBindings.count - 1) OFFSET $\(pageBindings.count)
                """, binds: pageBindings)
        let page = try await records(VideoRecord.self, pageQuery)
        let total = try await rows(countQuery).first.map { Int(try $0.value("count") as Int64) } ?? 0
        return (page, total)
    }

    public func uploadingVideo(owner: String, clientToken: String) async throws -> VideoRecord? {
        try await records(
            VideoRecord.self,
            """
            SELECT record FROM video WHERE owner = \(owner) AND client_token = \(clientToken) AND status = 'Uploading'
            ORDER BY created_at DESC LIMIT 1
            """).first
    }

    public func createVideo(_ video: VideoRecord, videoLimit: Int?, tokenUsedOnce: Bool) async throws -> VideoRecord {
        return try await transaction { [logger] connection -> VideoRecord in
            if let token = video.clientToken {
                // Requests with one token are serialized (across nodes) until this transaction ends.
                try await Self.lock(
                    "SELECT pg_advisory_xact_lock(hashtext(\(video.owner + "\n" + token)))", on: connection,
                    logger: logger)
                if let found = try await Self.rows(
                    """
                    SELECT record FROM video WHERE owner = \(video.owner) AND client_token = \(token)
                    AND (\(tokenUsedOnce) OR status = 'Uploading') ORDER BY created_at DESC LIMIT 1
                    """, on: connection, logger: logger
                ).first {
                    return try CatalogJSON.decode(VideoRecord.self, try found["record"].decode(String.self))
                }
            }
            if let limit = videoLimit {
                try await Self.lockOwner(video.owner, on: connection, logger: logger)
                if try await Self.videoCount(owner: video.owner, on: connection, logger: logger) >= limit {
                    throw FerryDomainError.videoQuotaExceeded(limit: limit)
                }
            }
            try await Self.insertVideo(video, on: connection, logger: logger)
            return video
        }
    }

    public func uploadingVideos(createdBefore date: Date, after videoId: String, limit: Int) async throws -> [VideoRecord] {
        try await records(
            VideoRecord.self,
            """
            SELECT record FROM video WHERE status = 'Uploading' AND created_at < \(date.timeIntervalSince1970)
            AND video_id COLLATE "C" > \(videoId) ORDER BY video_id COLLATE "C" LIMIT \(Int64(limit))
            """)
    }

    static func upsertImage(_ image: ImageRecord, on connection: PostgresConnection, logger: Logger) async throws {
        let record = try CatalogJSON.encode(image)
        try await connection.query(
            """
            INSERT INTO image (image_id, record, bucket, key, created_at, status)
            VALUES (
                \(image.imageId), \(record), \(image.bucket), \(image.key), \(image.createdAt.timeIntervalSince1970),
                \(image.status))
            ON CONFLICT (image_id) DO UPDATE SET record = EXCLUDED.record, bucket = EXCLUDED.bucket, key = EXCLUDED.key,
                created_at = EXCLUDED.created_at, status = EXCLUDED.status
            """, logger: logger)
    }

    public func saveImage(_ image: ImageRecord) async throws {
        try await leased { [logger] connection in try await Self.upsertImage(image, on: connection, logger: logger) }
    }

    public func createImage(_ image: ImageRecord) async throws -> ImageRecord {
        try await transaction { [logger] connection -> ImageRecord in
            if let token = image.clientToken {
                // Requests with one token are serialized (across nodes) until this transaction ends.
                try await Self.lock(
                    "SELECT pg_advisory_xact_lock(hashtext(\((image.owner ?? "") + "\n" + token + "\n" + image.imageType)))",
                    on: connection, logger: logger)
                if let found = try await Self.rows(
                    """
                    SELECT record FROM image WHERE status = 'Uploading' AND record::jsonb->>'clientToken' = \(token)
                    AND record::jsonb->>'owner' IS NOT DISTINCT FROM \(image.owner)
                    AND record::jsonb->>'imageType' = \(image.imageType) ORDER BY created_at DESC LIMIT 1
                    """, on: connection, logger: logger
                ).first {
                    return try CatalogJSON.decode(ImageRecord.self, try found["record"].decode(String.self))
                }
            }
            try await Self.upsertImage(image, on: connection, logger: logger)
            return image
        }
    }

    @discardableResult
    public func updateImage(_ id: String, _ change: @escaping @Sendable (inout ImageRecord) throws -> RecordChange)
        async throws -> ImageRecord?
    {
        try await update(id, "SELECT record FROM image WHERE image_id = \(id) FOR UPDATE", change) {
            try await Self.upsertImage($0, on: $1, logger: $2)
        }
    }

    /// Reads the record `select` finds (`FOR UPDATE`: the row stays locked until the transaction ends, so changes of
    /// one record are serialized across nodes), lets `change` alter it and, when it says so, stores it with `upsert`
    /// and what the change brings, in one transaction; under a ``JobLease/current`` no longer held, nothing (the job's
    /// row is locked too, after the record's as every change that cancels jobs locks them, so no claim by another
    /// worker comes between the check and the change, and no deadlock with a deletion).
    private func update<R: Codable & Sendable>(
        _ id: String, _ select: PostgresQuery, _ change: @escaping @Sendable (inout R) throws -> RecordChange,
        upsert: @escaping @Sendable (R, PostgresConnection, Logger) async throws -> Void
    ) async throws -> R? {
        let lease = JobLease.current
        return try await transaction { [logger] connection -> R? in
            guard
                let text = try await Self.rows(select, on: connection, logger: logger).first?["record"]
                    .decode(String.self)
            else { return nil }
            if let lease {
                let owner = try await Self.rows(
                    "SELECT lease_owner FROM media_job WHERE id = \(lease.jobId) AND state = 'running' FOR UPDATE",
                    on: connection, logger: logger
                ).first?["lease_owner"].decode(String?.self)
                guard owner == lease.worker else { return nil }
            }
            var record = try CatalogJSON.decode(R.self, text)
            let outcome = try change(&record)
            guard outcome.save else { return nil }
            try await upsert(record, connection, logger)
            try await Self.apply(outcome, id: id, on: connection, logger: logger)
            return record
        }
    }

    /// What a saved change brings with it: the record's jobs cancelled, new jobs, images, webhook events.
    private static func apply(_ change: RecordChange, id: String, on connection: PostgresConnection, logger: Logger)
        async throws
    {
        if change.cancelJobs { _ = try await cancelJobs(videoId: id, now: Date(), on: connection, logger: logger) }
        try await insertJobs(change.enqueue, on: connection, logger: logger)
        for image in change.images { try await upsertImage(image, on: connection, logger: logger) }
        guard !change.notify.isEmpty else { return }
        try await lockOutbox(on: connection, logger: logger)
        for event in change.notify { try await connection.query(try insertWebhookEvent(event), logger: logger) }
    }

    public func uploadingImages(createdBefore date: Date, after imageId: String, limit: Int) async throws -> [ImageRecord] {
        try await records(
            ImageRecord.self,
            """
            SELECT record FROM image WHERE status = 'Uploading' AND created_at < \(date.timeIntervalSince1970)
            AND image_id COLLATE "C" > \(imageId) ORDER BY image_id COLLATE "C" LIMIT \(Int64(limit))
            """)
    }

    public func image(_ id: String) async throws -> ImageRecord? {
        try await records(ImageRecord.self, "SELECT record FROM image WHERE image_id = \(id)").first
    }

    public func image(bucket: String, key: String) async throws -> ImageRecord? {
        try await records(ImageRecord.self, "SELECT record FROM image WHERE bucket = \(bucket) AND key = \(key) LIMIT 1")
            .first
    }

    /// The records (the first column, JSON) of every row a query selects.
    private func records<R: Decodable>(_ type: R.Type, _ query: PostgresQuery) async throws -> [R] {
        try await strings(query).map { try CatalogJSON.decode(type, $0) }
    }
}
