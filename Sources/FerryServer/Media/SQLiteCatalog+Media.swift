import Foundation
import GRDB

/// A video in the media catalog.
public struct VideoRecord: Codable, Sendable, Hashable {
    /// Video id.
    public var videoId: String
    /// Title.
    public var title: String
    /// Original file name.
    public var fileName: String
    /// Description.
    public var description: String?
    /// Cover image URL.
    public var coverURL: String?
    /// Category id.
    public var cateId: Int?
    /// Comma-separated tags.
    public var tags: String?
    /// Transcoding template group, when asked for.
    public var transcode: String?
    /// Free data of the app.
    public var userData: String?
    /// Status: `Uploading`, `Uploaded`, `Deleted` (later: `Transcoding`, `Normal`).
    public var status: String
    /// Bytes stored, once uploaded.
    public var size: Int64?
    /// Size the creator announced.
    public var declaredSize: Int64?
    /// Bucket of the source file.
    public var bucket: String
    /// Key of the source file.
    public var key: String
    /// Access key that created it.
    public var owner: String
    /// Creation time.
    public var createdAt: Date
    /// Last status change.
    public var updatedAt: Date
    /// The token CreateUploadVideo was called with, which makes it idempotent.
    public var clientToken: String?
}

/// An image in the media catalog.
public struct ImageRecord: Codable, Sendable, Hashable {
    /// Image id.
    public var imageId: String
    /// `default` or `cover`.
    public var imageType: String
    /// Title.
    public var title: String?
    /// Comma-separated tags.
    public var tags: String?
    /// Category id.
    public var cateId: Int?
    /// Description.
    public var description: String?
    /// `Uploading` or `Uploaded`.
    public var status: String
    /// Bytes stored, once uploaded.
    public var size: Int64?
    /// Bucket.
    public var bucket: String
    /// Key.
    public var key: String
    /// Creation time.
    public var createdAt: Date
    /// Access key that created it (nil for images created before owners were recorded: only the root key acts on
    /// those).
    public var owner: String?
}

extension SQLiteCatalog: MediaCatalog {
    /// Schema of the media catalog.
    static func registerMediaMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-media") { db in
            try db.execute(
                sql: """
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
        }
    }

    /// The owner of each video as a column, so a key's listing is filtered in the query.
    static func registerMediaOwnerMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-media-owner") { db in
            try db.execute(
                sql: """
                    ALTER TABLE video ADD COLUMN owner TEXT;
                    ALTER TABLE video ADD COLUMN clientToken TEXT;
                    UPDATE video SET owner = json_extract(record, '$.owner');
                    CREATE INDEX video_by_owner ON video(owner, createdAt);
                    CREATE INDEX video_by_token ON video(owner, clientToken);
                    """)
        }
    }

    private static let mediaEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    private static func decodeMedia<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode(type, from: Data(text.utf8))
    }

    /// Stores or replaces a video.
    public func saveVideo(_ video: VideoRecord) async throws {
        let record = String(decoding: try Self.mediaEncoder.encode(video), as: UTF8.self)
        try await pool.write { db in try Self.insertVideo(video, record: record, db) }
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

    public func createVideo(_ video: VideoRecord) async throws -> VideoRecord {
        let record = String(decoding: try Self.mediaEncoder.encode(video), as: UTF8.self)
        // One write transaction: the lookup and the insert cannot interleave with another request's.
        let existing = try await pool.write { db -> String? in
            if let token = video.clientToken,
                let found = try String.fetchOne(
                    db,
                    sql: "SELECT record FROM video WHERE owner = ? AND clientToken = ? AND status = 'Uploading' ORDER BY createdAt DESC",
                    arguments: [video.owner, token])
            {
                return found
            }
            try Self.insertVideo(video, record: record, db)
            return nil
        }
        return try existing.map { try Self.decodeMedia(VideoRecord.self, $0) } ?? video
    }

    /// The video, or nil.
    public func video(_ id: String) async throws -> VideoRecord? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT record FROM video WHERE videoId = ?", arguments: [id])
        }.map { try Self.decodeMedia(VideoRecord.self, $0) }
    }

    /// The video still uploading that `owner` created with `clientToken`, or nil.
    public func uploadingVideo(owner: String, clientToken: String) async throws -> VideoRecord? {
        try await pool.read { db in
            try String.fetchOne(
                db,
                sql: "SELECT record FROM video WHERE owner = ? AND clientToken = ? AND status = 'Uploading' ORDER BY createdAt DESC",
                arguments: [owner, clientToken])
        }.map { try Self.decodeMedia(VideoRecord.self, $0) }
    }

    /// Videos still uploading that were created before `date`, oldest first, at most `limit`.
    public func uploadingVideos(createdBefore date: Date, limit: Int) async throws -> [VideoRecord] {
        try await pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT record FROM video WHERE status = 'Uploading' AND createdAt < ? ORDER BY createdAt LIMIT ?",
                arguments: [date.timeIntervalSince1970, limit])
        }.map { try Self.decodeMedia(VideoRecord.self, $0) }
    }

    /// The video whose source file is `bucket`/`key`.
    public func video(bucket: String, key: String) async throws -> VideoRecord? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT record FROM video WHERE bucket = ? AND key = ?", arguments: [bucket, key])
        }.map { try Self.decodeMedia(VideoRecord.self, $0) }
    }

    /// A page of videos, newest first, and the total matching.
    public func videos(status: String?, cateId: Int?, tag: String?, owner: String?, offset: Int, limit: Int)
        async throws -> (videos: [VideoRecord], total: Int)
    {
        var conditions = ["status != 'Deleted'"]
        var arguments: StatementArguments = []
        if let owner {
            conditions.append("owner = ?")
            _ = arguments.append(contentsOf: [owner])
        }
        if let status {
            conditions.append("status = ?")
            _ = arguments.append(contentsOf: [status])
        }
        if let cateId {
            conditions.append("cateId = ?")
            _ = arguments.append(contentsOf: [cateId])
        }
        if let tag {
            conditions.append("(',' || tags || ',') LIKE ?")
            _ = arguments.append(contentsOf: ["%," + tag + ",%"])
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
        return (try rows.map { try Self.decodeMedia(VideoRecord.self, $0) }, total)
    }

    /// Stores or replaces an image.
    public func saveImage(_ image: ImageRecord) async throws {
        let record = String(decoding: try Self.mediaEncoder.encode(image), as: UTF8.self)
        try await pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO image (imageId, record, bucket, key, createdAt) VALUES (?, ?, ?, ?, ?)",
                arguments: [image.imageId, record, image.bucket, image.key, image.createdAt.timeIntervalSince1970])
        }
    }

    /// The image, or nil.
    public func image(_ id: String) async throws -> ImageRecord? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT record FROM image WHERE imageId = ?", arguments: [id])
        }.map { try Self.decodeMedia(ImageRecord.self, $0) }
    }

    /// The image whose file is `bucket`/`key`.
    public func image(bucket: String, key: String) async throws -> ImageRecord? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT record FROM image WHERE bucket = ? AND key = ?", arguments: [bucket, key])
        }.map { try Self.decodeMedia(ImageRecord.self, $0) }
    }
}
