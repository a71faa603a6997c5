import Foundation
import GRDB

/// The catalog of buckets, objects, multipart uploads and access keys, in SQLite (WAL) through GRDB.
///
/// Versioned migrations create and evolve the schema. Object keys are compared byte-wise (SQLite's BINARY collation
/// over UTF-8), which is the order S3 lists keys in.
public final class SQLiteCatalog: Sendable {
    let pool: DatabasePool

    /// Opens (creating when needed) the catalog at `path` and runs pending migrations.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-objects") { db in
            try db.execute(
                sql: """
                    CREATE TABLE bucket (name TEXT PRIMARY KEY NOT NULL, createdAt DOUBLE NOT NULL);
                    CREATE TABLE object (
                        bucket TEXT NOT NULL REFERENCES bucket(name),
                        key TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        etag TEXT NOT NULL,
                        lastModified DOUBLE NOT NULL,
                        attributes TEXT NOT NULL,
                        checksums TEXT NOT NULL,
                        checksumType TEXT,
                        manifest TEXT NOT NULL,
                        partCount INTEGER,
                        PRIMARY KEY (bucket, key)
                    ) WITHOUT ROWID;
                    CREATE TABLE upload (
                        id TEXT PRIMARY KEY NOT NULL,
                        bucket TEXT NOT NULL REFERENCES bucket(name),
                        key TEXT NOT NULL,
                        initiated DOUBLE NOT NULL,
                        attributes TEXT NOT NULL,
                        checksumAlgorithm TEXT,
                        checksumType TEXT
                    );
                    CREATE INDEX upload_by_key ON upload(bucket, key, id);
                    CREATE TABLE part (
                        uploadId TEXT NOT NULL REFERENCES upload(id) ON DELETE CASCADE,
                        number INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        etag TEXT NOT NULL,
                        checksums TEXT NOT NULL,
                        blob TEXT NOT NULL,
                        lastModified DOUBLE NOT NULL,
                        PRIMARY KEY (uploadId, number)
                    ) WITHOUT ROWID;
                    CREATE TABLE accessKey (
                        id TEXT PRIMARY KEY NOT NULL,
                        secret TEXT NOT NULL,
                        policy TEXT NOT NULL,
                        status TEXT NOT NULL,
                        description TEXT NOT NULL DEFAULT '',
                        createdAt DOUBLE NOT NULL
                    );
                    """)
        }
        registerMediaMigrations(&migrator)
        registerWebhookMigrations(&migrator)
        return migrator
    }

    // MARK: Buckets

    /// Inserts a bucket; returns false when it exists already.
    func insertBucket(_ name: String, at date: Date) async throws -> Bool {
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [name]) == true {
                return false
            }
            try db.execute(sql: "INSERT INTO bucket (name, createdAt) VALUES (?, ?)", arguments: [name, date.timeIntervalSince1970])
            return true
        }
    }

    /// The bucket, or nil.
    func bucket(_ name: String) async throws -> BucketInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT name, createdAt FROM bucket WHERE name = ?", arguments: [name]).map {
                BucketInfo(name: $0["name"], createdAt: Date(timeIntervalSince1970: $0["createdAt"]))
            }
        }
    }

    /// All buckets by name.
    func buckets() async throws -> [BucketInfo] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT name, createdAt FROM bucket ORDER BY name").map {
                BucketInfo(name: $0["name"], createdAt: Date(timeIntervalSince1970: $0["createdAt"]))
            }
        }
    }

    enum DeleteBucketOutcome: Sendable { case deleted, missing, notEmpty }

    /// Deletes an empty bucket (no objects and no uploads in progress).
    func deleteBucket(_ name: String) async throws -> DeleteBucketOutcome {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [name]) == true else {
                return .missing
            }
            let objects = try Bool.fetchOne(db, sql: "SELECT 1 FROM object WHERE bucket = ? LIMIT 1", arguments: [name])
            let uploads = try Bool.fetchOne(db, sql: "SELECT 1 FROM upload WHERE bucket = ? LIMIT 1", arguments: [name])
            if objects == true || uploads == true { return .notEmpty }
            try db.execute(sql: "DELETE FROM bucket WHERE name = ?", arguments: [name])
            return .deleted
        }
    }

    // MARK: Objects

    private static func objectInfo(_ row: Row) throws -> ObjectInfo {
        let decoder = JSONDecoder()
        return ObjectInfo(
            bucket: row["bucket"], key: row["key"], size: row["size"], etag: row["etag"],
            lastModified: Date(timeIntervalSince1970: row["lastModified"]),
            attributes: try decoder.decode(ObjectAttributes.self, from: Data((row["attributes"] as String).utf8)),
            checksums: try decoder.decode([String: String].self, from: Data((row["checksums"] as String).utf8)),
            checksumType: row["checksumType"],
            manifest: try decoder.decode([BlobSegment].self, from: Data((row["manifest"] as String).utf8)),
            partCount: row["partCount"])
    }

    private static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The object, or nil.
    func object(bucket: String, key: String) async throws -> ObjectInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key])
                .map(Self.objectInfo)
        }
    }

    private static func upsert(_ object: ObjectInfo, _ db: Database) throws -> [BlobSegment] {
        let previous = try Row.fetchOne(
            db, sql: "SELECT manifest FROM object WHERE bucket = ? AND key = ?", arguments: [object.bucket, object.key])
        let replaced: [BlobSegment] =
            try previous.map { try JSONDecoder().decode([BlobSegment].self, from: Data(($0["manifest"] as String).utf8)) }
            ?? []
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO object
                (bucket, key, size, etag, lastModified, attributes, checksums, checksumType, manifest, partCount)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                object.bucket, object.key, object.size, object.etag, object.lastModified.timeIntervalSince1970,
                try json(object.attributes), try json(object.checksums), object.checksumType,
                try json(object.manifest), object.partCount,
            ])
        return replaced
    }

    /// Why a conditional write did not happen.
    enum WriteCondition: Sendable {
        /// Write unconditionally.
        case none
        /// Write only when no object has the key (`If-None-Match: *`).
        case absent
        /// Write only when the current object has this ETag (`If-Match`).
        case etag(String)
    }

    enum PutOutcome: Sendable {
        case stored(replaced: [BlobSegment])
        case noSuchBucket
        case preconditionFailed
    }

    /// Inserts or replaces an object; returns the blobs of the object it replaced so the caller deletes them.
    func putObject(_ object: ObjectInfo, condition: WriteCondition = .none) async throws -> PutOutcome {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [object.bucket]) == true
            else { return .noSuchBucket }
            if case .none = condition {} else {
                let current = try String.fetchOne(
                    db, sql: "SELECT etag FROM object WHERE bucket = ? AND key = ?",
                    arguments: [object.bucket, object.key])
                switch condition {
                case .absent where current != nil: return .preconditionFailed
                case .etag(let etag) where current != etag: return .preconditionFailed
                default: break
                }
            }
            return .stored(replaced: try Self.upsert(object, db))
        }
    }

    /// Deletes an object; returns its blobs (empty when there was none).
    func deleteObject(bucket: String, key: String) async throws -> [BlobSegment] {
        try await pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT manifest FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key])
            else { return [] }
            try db.execute(sql: "DELETE FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key])
            return try JSONDecoder().decode([BlobSegment].self, from: Data((row["manifest"] as String).utf8))
        }
    }

    /// Up to `limit` objects with keys after `after` (exclusive) and at or after `from`, in key order.
    func objects(bucket: String, after: String?, from: String, limit: Int) async throws -> [ObjectInfo] {
        try await pool.read { db in
            if let after {
                return try Row.fetchAll(
                    db, sql: "SELECT * FROM object WHERE bucket = ? AND key > ? AND key >= ? ORDER BY key LIMIT ?",
                    arguments: [bucket, after, from, limit]
                ).map(Self.objectInfo)
            }
            return try Row.fetchAll(
                db, sql: "SELECT * FROM object WHERE bucket = ? AND key >= ? ORDER BY key LIMIT ?",
                arguments: [bucket, from, limit]
            ).map(Self.objectInfo)
        }
    }

    // MARK: Multipart uploads

    private static func uploadInfo(_ row: Row) throws -> MultipartUploadInfo {
        MultipartUploadInfo(
            uploadId: row["id"], bucket: row["bucket"], key: row["key"],
            initiated: Date(timeIntervalSince1970: row["initiated"]),
            attributes: try JSONDecoder().decode(ObjectAttributes.self, from: Data((row["attributes"] as String).utf8)),
            checksumAlgorithm: row["checksumAlgorithm"], checksumType: row["checksumType"])
    }

    /// Records a new upload; false when the bucket does not exist.
    func insertUpload(_ upload: MultipartUploadInfo) async throws -> Bool {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM bucket WHERE name = ?", arguments: [upload.bucket]) == true
            else { return false }
            try db.execute(
                sql: """
                    INSERT INTO upload (id, bucket, key, initiated, attributes, checksumAlgorithm, checksumType)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    upload.uploadId, upload.bucket, upload.key, upload.initiated.timeIntervalSince1970,
                    try Self.json(upload.attributes), upload.checksumAlgorithm, upload.checksumType,
                ])
            return true
        }
    }

    /// The upload, or nil.
    func upload(_ uploadId: String) async throws -> MultipartUploadInfo? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM upload WHERE id = ?", arguments: [uploadId]).map(Self.uploadInfo)
        }
    }

    /// Uploads of a bucket in (key, upload id) order after the markers, up to `limit`.
    func uploads(bucket: String, prefix: String, keyMarker: String, uploadIdMarker: String, limit: Int) async throws
        -> [MultipartUploadInfo]
    {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM upload WHERE bucket = ? AND key >= ?
                    AND (key > ? OR (key = ? AND id > ?))
                    ORDER BY key, id LIMIT ?
                    """,
                arguments: [bucket, prefix, keyMarker, keyMarker, uploadIdMarker, limit]
            ).map(Self.uploadInfo).filter { $0.key.hasPrefix(prefix) }
        }
    }

    /// Uploads initiated before `date`, oldest first.
    func uploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM upload WHERE initiated < ? ORDER BY initiated LIMIT ?",
                arguments: [date.timeIntervalSince1970, limit]
            ).map(Self.uploadInfo)
        }
    }

    private static func partInfo(_ row: Row) throws -> PartInfo {
        PartInfo(
            number: row["number"], size: row["size"], etag: row["etag"],
            checksums: try JSONDecoder().decode([String: String].self, from: Data((row["checksums"] as String).utf8)),
            blob: row["blob"], lastModified: Date(timeIntervalSince1970: row["lastModified"]))
    }

    enum PartOutcome: Sendable {
        case stored(replaced: String?)
        case noSuchUpload
    }

    /// Records a part, replacing a previous part with the same number; returns the replaced part's blob.
    func putPart(_ part: PartInfo, uploadId: String) async throws -> PartOutcome {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM upload WHERE id = ?", arguments: [uploadId]) == true else {
                return .noSuchUpload
            }
            let replaced = try String.fetchOne(
                db, sql: "SELECT blob FROM part WHERE uploadId = ? AND number = ?", arguments: [uploadId, part.number])
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO part (uploadId, number, size, etag, checksums, blob, lastModified)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    uploadId, part.number, part.size, part.etag, try Self.json(part.checksums), part.blob,
                    part.lastModified.timeIntervalSince1970,
                ])
            return .stored(replaced: replaced)
        }
    }

    /// Parts of an upload with numbers above `marker`, ascending, up to `limit` (all when nil).
    func parts(uploadId: String, after marker: Int = 0, limit: Int? = nil) async throws -> [PartInfo] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM part WHERE uploadId = ? AND number > ? ORDER BY number LIMIT ?",
                arguments: [uploadId, marker, limit ?? -1]
            ).map(Self.partInfo)
        }
    }

    /// Removes an upload and its parts; returns the part blobs (nil when there was no such upload).
    func deleteUpload(_ uploadId: String) async throws -> [String]? {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM upload WHERE id = ?", arguments: [uploadId]) == true else {
                return nil
            }
            let blobs = try String.fetchAll(db, sql: "SELECT blob FROM part WHERE uploadId = ?", arguments: [uploadId])
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [uploadId])
            return blobs
        }
    }

    enum CompleteOutcome: Sendable {
        case completed(replaced: [BlobSegment], unused: [String])
        case noSuchUpload
        case changed
    }

    /// Atomically turns an upload into an object: the object takes the listed parts' blobs, the upload and its other
    /// parts go. `expectedParts` guards against a part replaced between validation and commit.
    func completeUpload(_ uploadId: String, object: ObjectInfo, expectedParts: [PartInfo]) async throws
        -> CompleteOutcome
    {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM upload WHERE id = ?", arguments: [uploadId]) == true else {
                return .noSuchUpload
            }
            let current = try Row.fetchAll(db, sql: "SELECT * FROM part WHERE uploadId = ?", arguments: [uploadId])
                .map(Self.partInfo)
            let byNumber = Dictionary(uniqueKeysWithValues: current.map { ($0.number, $0) })
            for part in expectedParts where byNumber[part.number]?.blob != part.blob {
                return .changed
            }
            let used = Set(expectedParts.map(\.blob))
            let unused = current.map(\.blob).filter { !used.contains($0) }
            let replaced = try Self.upsert(object, db)
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [uploadId])
            return .completed(replaced: replaced, unused: unused)
        }
    }

    /// Every blob name the catalog references (for garbage collection of orphans).
    func referencedBlobs() async throws -> Set<String> {
        try await pool.read { db in
            var names = Set(try String.fetchAll(db, sql: "SELECT blob FROM part"))
            for manifest in try String.fetchAll(db, sql: "SELECT manifest FROM object") {
                for segment in try JSONDecoder().decode([BlobSegment].self, from: Data(manifest.utf8)) {
                    names.insert(segment.blob)
                }
            }
            return names
        }
    }
}
