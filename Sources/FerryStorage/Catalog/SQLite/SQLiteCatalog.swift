import Foundation
import GRDB

/// The catalog of buckets, objects, multipart uploads and access keys, in SQLite (WAL) through GRDB.
///
/// Versioned migrations create and evolve the schema. Object keys are compared byte-wise (SQLite's BINARY collation
/// over UTF-8), which is the order S3 lists keys in.
public final class SQLiteCatalog: ObjectCatalog {
    let pool: DatabasePool
    /// Seals the access keys' secrets at rest; nil keeps them as they are (a catalog without a server key).
    let secrets: SecretBox?
    /// Waits for a lock another process holds: 10 s at most.
    let lockWatch = SQLiteLockWatch(limit: .seconds(10))

    /// How long the catalog's connections have been waiting for a lock another process holds (writes are stuck
    /// meanwhile, though reads answer); nil when none waits.
    package var lockWait: Duration? { lockWatch.currentWait }

    /// Opens (creating when needed) the catalog at `path` and runs pending migrations.
    public convenience init(path: String) throws {
        try self.init(path: path, secrets: nil)
    }

    /// Opens the catalog at `path`, with access key secrets sealed by `secrets` (those stored before are sealed now).
    package init(path: String, secrets: SecretBox?) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .callback { [lockWatch] tries in lockWatch.retry(tries) }
        pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB sets NORMAL for WAL, which syncs the log only at checkpoints: a power cut or an OS crash could then take
        // back commits already acknowledged (an object, a part, a resumable upload's offset). FULL syncs the log at
        // every commit, as the blob files are synced before it. Set on the writer, the pool's one writing connection.
        try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
        self.secrets = secrets
        try Self.migrator.migrate(pool)
        try sealPlaintextSecrets()
    }

    /// A schema change: its name in GRDB's table of applied migrations and what it does.
    struct Migration: Sendable {
        let name: String
        let run: @Sendable (Database) throws -> Void

        init(_ name: String, _ sql: String) {
            self.name = name
            run = { db in try db.execute(sql: sql) }
        }

        init(_ name: String, run: @escaping @Sendable (Database) throws -> Void) {
            self.name = name
            self.run = run
        }
    }

    /// Every schema change, in the order they were made (never reorder or rename: a catalog records their names).
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        let migrations = [
            objectsMigration, mediaMigration, webhookMigration, subresourcesMigration, mediaOwnerMigration, jobMigration,
            videoStatusMigration, leaseMigration, blobDeletionMigration, lifecycleMigration, nodeHeartbeatMigration,
            traceContextMigration, resumableMigration, quotaMigration, signingKeyMigration, revokedSessionMigration,
            resumableUploadIndexMigration, imageStatusMigration, webhookSubjectMigration,
        ]
        for migration in migrations { migrator.registerMigration(migration.name, migrate: migration.run) }
        return migrator
    }

    static let objectsMigration = Migration("v1-objects", """
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

    static let subresourcesMigration = Migration("v4-s3-subresources", """
        ALTER TABLE object ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE object ADD COLUMN parts TEXT;
        ALTER TABLE upload ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE part ADD COLUMN segments TEXT;
        ALTER TABLE bucket ADD COLUMN cors TEXT;
        CREATE TABLE completedUpload (
            id TEXT PRIMARY KEY NOT NULL,
            bucket TEXT NOT NULL,
            key TEXT NOT NULL,
            parts TEXT NOT NULL,
            etag TEXT NOT NULL,
            completedAt DOUBLE NOT NULL
        );
        CREATE INDEX completedUpload_by_time ON completedUpload(completedAt);
        """)

    static let lifecycleMigration = Migration("v10-bucket-lifecycle", "ALTER TABLE bucket ADD COLUMN lifecycle TEXT")

    static let traceContextMigration = Migration("v11-trace-context", """
        ALTER TABLE mediaJob ADD COLUMN traceParent TEXT;
        ALTER TABLE webhookEvent ADD COLUMN traceParent TEXT;
        """)

    /// Runs one statement in its own write transaction; the number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: StatementArguments = []) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: sql, arguments: arguments)
            return db.changesCount
        }
    }

    /// Every row a query reads, mapped by `map`.
    func all<T: Sendable>(
        _ sql: String, _ arguments: StatementArguments = [], _ map: @escaping @Sendable (Row) throws -> T
    ) async throws -> [T] {
        try await pool.read { db in try Row.fetchAll(db, sql: sql, arguments: arguments).map(map) }
    }

    /// The first row a query reads, mapped by `map`; nil when it reads none.
    func first<T: Sendable>(
        _ sql: String, _ arguments: StatementArguments = [], _ map: @escaping @Sendable (Row) throws -> T
    ) async throws -> T? {
        try await pool.read { db in try Row.fetchOne(db, sql: sql, arguments: arguments).map(map) }
    }

    // MARK: Buckets

    /// Inserts a bucket; returns false when it exists already.
    func insertBucket(_ name: String, at date: Date) async throws -> Bool {
        try await pool.write { db in
            if try db.exists("SELECT 1 FROM bucket WHERE name = ?", [name]) { return false }
            try db.execute(sql: "INSERT INTO bucket (name, createdAt) VALUES (?, ?)", arguments: [name, date.timeIntervalSince1970])
            return true
        }
    }

    /// The bucket, or nil.
    func bucket(_ name: String) async throws -> BucketInfo? {
        try await first("SELECT name, createdAt FROM bucket WHERE name = ?", [name], Self.bucketInfo)
    }

    /// All buckets by name.
    func buckets() async throws -> [BucketInfo] {
        try await all("SELECT name, createdAt FROM bucket ORDER BY name", [], Self.bucketInfo)
    }

    private static func bucketInfo(_ row: Row) -> BucketInfo {
        BucketInfo(name: row["name"], createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }

    /// Deletes a bucket without objects; multipart uploads still in progress in it are aborted.
    func deleteBucket(_ name: String) async throws -> CatalogDeleteBucketOutcome {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM bucket WHERE name = ?", [name]) else { return .missing }
            if try db.exists("SELECT 1 FROM object WHERE bucket = ? LIMIT 1", [name]) { return .notEmpty }
            let blobs = try Row.fetchAll(
                db, sql: "SELECT blob, segments FROM part WHERE uploadId IN (SELECT id FROM upload WHERE bucket = ?)",
                arguments: [name]
            ).flatMap(Self.partBlobs)
            try db.execute(sql: "DELETE FROM upload WHERE bucket = ?", arguments: [name])
            let aborted = db.changesCount
            try db.execute(sql: "DELETE FROM resumableUpload WHERE bucket = ? AND etag IS NULL", arguments: [name])
            try db.execute(sql: "DELETE FROM bucket WHERE name = ?", arguments: [name])
            return .deleted(abortedBlobs: blobs, abortedUploads: aborted)
        }
    }

    // MARK: Objects

    private static func objectInfo(_ row: Row) throws -> ObjectInfo {
        ObjectInfo(
            bucket: row["bucket"], key: row["key"], size: row["size"], etag: row["etag"],
            lastModified: Date(timeIntervalSince1970: row["lastModified"]),
            attributes: try CatalogJSON.decode(ObjectAttributes.self, row["attributes"]),
            checksums: try CatalogJSON.decode([String: String].self, row["checksums"]),
            checksumType: row["checksumType"], manifest: try CatalogJSON.decode([BlobSegment].self, row["manifest"]),
            partCount: row["partCount"], tags: try CatalogJSON.decode([ObjectTag].self, row["tags"]),
            parts: try (row["parts"] as String?).map { try CatalogJSON.decode([ObjectPart].self, $0) },
            owner: row["owner"])
    }

    /// The object, or nil.
    func object(bucket: String, key: String) async throws -> ObjectInfo? {
        try await first("SELECT * FROM object WHERE bucket = ? AND key = ?", [bucket, key], Self.objectInfo)
    }

    private static func upsert(_ object: ObjectInfo, _ db: Database) throws -> [BlobSegment] {
        let previous = try String.fetchOne(
            db, sql: "SELECT manifest FROM object WHERE bucket = ? AND key = ?", arguments: [object.bucket, object.key])
        let replaced = try previous.map { try CatalogJSON.decode([BlobSegment].self, $0) } ?? []
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO object
                (bucket, key, size, etag, lastModified, attributes, checksums, checksumType, manifest, partCount, tags,
                 parts, owner)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                object.bucket, object.key, object.size, object.etag, object.lastModified.timeIntervalSince1970,
                try CatalogJSON.encode(object.attributes), try CatalogJSON.encode(object.checksums), object.checksumType,
                try CatalogJSON.encode(object.manifest), object.partCount, try CatalogJSON.encode(object.tags), try object.parts.map(CatalogJSON.encode),
                object.owner,
            ])
        return replaced
    }

    /// Whether `condition` holds for the current object at bucket/key (inside a write transaction) for a write of an
    /// object with the ETag `writing` (nil for a delete); nil when it does.
    private static func check(
        _ condition: ObjectWriteCondition, bucket: String, key: String, writing: String? = nil, _ db: Database
    ) throws -> ObjectWriteCondition.Failure? {
        if condition.isEmpty { return nil }
        let current = try Row.fetchOne(
            db, sql: "SELECT etag, lastModified, size, tags FROM object WHERE bucket = ? AND key = ?",
            arguments: [bucket, key])
        return try condition.evaluate(
            etag: current?["etag"], lastModified: (current?["lastModified"] as Double?).map(Date.init(timeIntervalSince1970:)),
            size: current?["size"], tags: { try current.map { try CatalogJSON.decode([ObjectTag].self, $0["tags"]) } },
            writing: writing)
    }

    /// Whether a write of `object` under a file owner's condition finds that file stored with its ETag: the file is
    /// kept as stored (bytes, type, metadata) and the write stores nothing. The same ETag is not always the same bytes
    /// (an MD5 collision made on purpose), and a retry of the same bytes loses nothing by not being written.
    private static func keepsFile(_ condition: ObjectWriteCondition, _ object: ObjectInfo, _ db: Database) throws
        -> Bool
    {
        guard condition.fileOwner != nil else { return false }
        return try String.fetchOne(
            db, sql: "SELECT etag FROM object WHERE bucket = ? AND key = ?", arguments: [object.bucket, object.key])
            == object.etag
    }

    /// Inserts or replaces an object; returns the blobs of the object it replaced so the caller deletes them. With a
    /// `byteLimit`, throws `quotaExceeded` when the object would take its owner past it.
    func putObject(_ object: ObjectInfo, condition: ObjectWriteCondition = .none, byteLimit: Int64? = nil) async throws
        -> CatalogPutOutcome
    {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM bucket WHERE name = ?", [object.bucket]) else { return .noSuchBucket }
            if let failed = try Self.check(condition, bucket: object.bucket, key: object.key, writing: object.etag, db) {
                return .refused(failed)
            }
            if try Self.keepsFile(condition, object, db) { return .kept }
            try Self.checkQuota(storing: object, limit: byteLimit, db)
            return .stored(replaced: try Self.upsert(object, db))
        }
    }

    /// Deletes an object when `condition` holds; returns its blobs (empty when there was none: deleting a missing
    /// key succeeds whatever the condition).
    func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition = .none) async throws -> CatalogPutOutcome {
        try await pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT manifest FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key])
            else { return .stored(replaced: []) }
            if let failed = try Self.check(condition, bucket: bucket, key: key, db) { return .refused(failed) }
            try db.execute(sql: "DELETE FROM object WHERE bucket = ? AND key = ?", arguments: [bucket, key])
            return .stored(replaced: try CatalogJSON.decode([BlobSegment].self, row["manifest"]))
        }
    }

    /// Replaces an object's tags when its ETag is still `etag`; false when the object changed or is gone.
    func setTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws -> Bool {
        try await execute(
            "UPDATE object SET tags = ? WHERE bucket = ? AND key = ? AND etag = ?", [try CatalogJSON.encode(tags), bucket, key, etag])
            > 0
    }

    /// Up to `limit` objects with keys after `after` (exclusive) and at or after `from`, in key order.
    func objects(bucket: String, after: String?, from: String, limit: Int) async throws -> [ObjectInfo] {
        if let after {
            return try await all(
                "SELECT * FROM object WHERE bucket = ? AND key > ? AND key >= ? ORDER BY key LIMIT ?",
                [bucket, after, from, limit], Self.objectInfo)
        }
        return try await all(
            "SELECT * FROM object WHERE bucket = ? AND key >= ? ORDER BY key LIMIT ?", [bucket, from, limit],
            Self.objectInfo)
    }

    // MARK: Multipart uploads

    static func uploadInfo(_ row: Row) throws -> MultipartUploadInfo {
        MultipartUploadInfo(
            uploadId: row["id"], bucket: row["bucket"], key: row["key"],
            initiated: Date(timeIntervalSince1970: row["initiated"]),
            attributes: try CatalogJSON.decode(ObjectAttributes.self, row["attributes"]),
            checksumAlgorithm: row["checksumAlgorithm"], checksumType: row["checksumType"],
            tags: try CatalogJSON.decode([ObjectTag].self, row["tags"]), owner: row["owner"])
    }

    /// Records a new upload; false when the bucket does not exist. With an `uploadLimit`, throws `quotaExceeded` when
    /// its owner has that many uploads in progress already.
    func insertUpload(_ upload: MultipartUploadInfo, uploadLimit: Int? = nil) async throws -> Bool {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM bucket WHERE name = ?", [upload.bucket]) else { return false }
            if let limit = uploadLimit, let owner = upload.owner, try Self.uploadCount(owner: owner, db) >= limit {
                throw FerryDomainError.uploadQuotaExceeded(limit: limit)
            }
            try db.execute(
                sql: """
                    INSERT INTO upload (id, bucket, key, initiated, attributes, checksumAlgorithm, checksumType, tags, owner)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    upload.uploadId, upload.bucket, upload.key, upload.initiated.timeIntervalSince1970,
                    try CatalogJSON.encode(upload.attributes), upload.checksumAlgorithm, upload.checksumType,
                    try CatalogJSON.encode(upload.tags), upload.owner,
                ])
            return true
        }
    }

    /// The upload, or nil.
    func upload(_ uploadId: String) async throws -> MultipartUploadInfo? {
        try await first("SELECT * FROM upload WHERE id = ?", [uploadId], Self.uploadInfo)
    }

    /// Uploads of a bucket in (key, upload id) order after the markers (after the key marker's uploads too, when the
    /// upload-id marker is empty), up to `limit`.
    func uploads(bucket: String, prefix: String, keyMarker: String, uploadIdMarker: String, limit: Int) async throws
        -> [MultipartUploadInfo]
    {
        try await all(
            """
            SELECT * FROM upload WHERE bucket = ? AND key >= ?
            AND (key > ? OR (key = ? AND ? <> '' AND id > ?))
            ORDER BY key, id LIMIT ?
            """, [bucket, prefix, keyMarker, keyMarker, uploadIdMarker, uploadIdMarker, limit], Self.uploadInfo
        ).filter { $0.key.hasBytePrefix(prefix) }
    }

    func uploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo] {
        let prefix = ResumableUpload.multipartIdPrefix
        return try await all(
            "SELECT * FROM upload WHERE initiated < ? AND substr(id, 1, ?) <> ? ORDER BY initiated LIMIT ?",
            [date.timeIntervalSince1970, prefix.count, prefix, limit], Self.uploadInfo)
    }

    private static func partInfo(_ row: Row) throws -> PartInfo {
        let size: Int64 = row["size"]
        return PartInfo(
            number: row["number"], size: size, etag: row["etag"],
            checksums: try CatalogJSON.decode([String: String].self, row["checksums"]),
            segments: try (row["segments"] as String?).map { try CatalogJSON.decode([BlobSegment].self, $0) }
                ?? [BlobSegment(blob: row["blob"], size: size)],
            lastModified: Date(timeIntervalSince1970: row["lastModified"]))
    }

    /// The blob names a part's row holds (one, or its segments').
    static func partBlobs(_ row: Row) throws -> [String] {
        try (row["segments"] as String?).map { try CatalogJSON.decode([BlobSegment].self, $0).map(\.blob) }
            ?? [row["blob"]]
    }

    /// Records a part, replacing a previous part with the same number; returns the replaced part's blob. With a
    /// `byteLimit`, throws `quotaExceeded` when the part would take the upload's owner past it.
    func putPart(_ part: PartInfo, uploadId: String, byteLimit: Int64? = nil, freeing: [String] = []) async throws
        -> CatalogPartOutcome
    {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM upload WHERE id = ?", [uploadId]) else { return .noSuchUpload }
            try Self.checkQuota(storing: part, uploadId: uploadId, limit: byteLimit, freeing: freeing, db)
            let replaced = try Row.fetchOne(
                db, sql: "SELECT blob, segments FROM part WHERE uploadId = ? AND number = ?",
                arguments: [uploadId, part.number]
            ).map(Self.partBlobs) ?? []
            let plain = part.segments.count == 1 && part.segments[0].offset == nil && part.segments[0].size == part.size
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO part (uploadId, number, size, etag, checksums, blob, lastModified, segments)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    uploadId, part.number, part.size, part.etag, try CatalogJSON.encode(part.checksums), part.blob,
                    part.lastModified.timeIntervalSince1970, plain ? nil : try CatalogJSON.encode(part.segments),
                ])
            return .stored(replaced: replaced)
        }
    }

    /// Parts of an upload with numbers above `marker`, ascending, up to `limit` (all when nil).
    func parts(uploadId: String, after marker: Int = 0, limit: Int? = nil) async throws -> [PartInfo] {
        try await all(
            "SELECT * FROM part WHERE uploadId = ? AND number > ? ORDER BY number LIMIT ?",
            [uploadId, marker, limit ?? -1], Self.partInfo)
    }

    /// Removes an upload and its parts, and the unfinished resumable upload whose bytes it held (whoever aborts it: a
    /// client, a lifecycle rule, the collector); returns the part blobs (nil when there was no such upload).
    func deleteUpload(_ uploadId: String) async throws -> [String]? {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM upload WHERE id = ?", [uploadId]) else { return nil }
            let blobs = try Row.fetchAll(db, sql: "SELECT blob, segments FROM part WHERE uploadId = ?", arguments: [uploadId])
                .flatMap(Self.partBlobs)
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [uploadId])
            try db.execute(sql: "DELETE FROM resumableUpload WHERE uploadId = ? AND etag IS NULL", arguments: [uploadId])
            return blobs
        }
    }

    /// Atomically turns an upload into an object: the object takes the listed parts' blobs, the upload and its other
    /// parts go, and the completion is remembered (for a retried Complete). `expectedParts` guards against a part
    /// replaced between validation and commit; `condition` is the request's If-Match / If-None-Match.
    func completeUpload(
        _ uploadId: String, object: ObjectInfo, expectedParts: [PartInfo], condition: ObjectWriteCondition = .none,
        now: Date = Date()
    ) async throws -> CatalogCompleteOutcome {
        try await pool.write { db in
            guard try db.exists("SELECT 1 FROM upload WHERE id = ?", [uploadId]) else { return .noSuchUpload }
            if let failed = try Self.check(condition, bucket: object.bucket, key: object.key, writing: object.etag, db) {
                return .refused(failed)
            }
            let current = try Row.fetchAll(db, sql: "SELECT * FROM part WHERE uploadId = ?", arguments: [uploadId])
            let byNumber = Dictionary(uniqueKeysWithValues: try current.map(Self.partInfo).map { ($0.number, $0) })
            for part in expectedParts where byNumber[part.number]?.blob != part.blob {
                return .changed
            }
            let kept = try Self.keepsFile(condition, object, db)
            let used = kept ? [] : Set(expectedParts.flatMap { $0.segments.map(\.blob) })
            let unused = try current.flatMap(Self.partBlobs).filter { !used.contains($0) }
            let replaced = kept ? [] : try Self.upsert(object, db)
            try db.execute(sql: "DELETE FROM upload WHERE id = ?", arguments: [uploadId])
            try db.execute(
                sql: "INSERT OR REPLACE INTO completedUpload (id, bucket, key, parts, etag, completedAt) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    uploadId, object.bucket, object.key,
                    try CatalogJSON.encode(expectedParts.map { CompletedUploadPart(number: $0.number, etag: $0.etag) }),
                    object.etag, now.timeIntervalSince1970,
                ])
            return kept ? .kept(unused: unused) : .completed(replaced: replaced, unused: unused)
        }
    }

    /// A completion remembered for retries, or nil.
    func completedUpload(_ uploadId: String) async throws -> CompletedUpload? {
        try await first("SELECT * FROM completedUpload WHERE id = ?", [uploadId]) { row in
            CompletedUpload(
                uploadId: row["id"], bucket: row["bucket"], key: row["key"],
                parts: try CatalogJSON.decode([CompletedUploadPart].self, row["parts"]),
                etag: row["etag"], completedAt: Date(timeIntervalSince1970: row["completedAt"]))
        }
    }

    /// Forgets completions older than `date`; returns how many.
    func forgetCompletedUploads(before date: Date) async throws -> Int {
        try await execute("DELETE FROM completedUpload WHERE completedAt < ?", [date.timeIntervalSince1970])
    }

    // MARK: Bucket configurations

    /// The bucket's configuration document of that kind (S3 XML as stored), or nil when it has none.
    func bucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind) async throws -> String? {
        try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT \(kind.rawValue) FROM bucket WHERE name = ?", arguments: [bucket])
        }
    }

    /// Sets (or with nil removes) the bucket's configuration of that kind; false when there is no such bucket.
    func setBucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind, _ document: String?) async throws -> Bool {
        try await execute("UPDATE bucket SET \(kind.rawValue) = ? WHERE name = ?", [document, bucket]) > 0
    }

    /// Every bucket with a configuration of that kind, by name.
    func bucketConfigurations(_ kind: BucketConfigurationKind) async throws -> [(bucket: String, document: String)] {
        try await all(
            "SELECT name, \(kind.rawValue) AS document FROM bucket WHERE \(kind.rawValue) IS NOT NULL ORDER BY name"
        ) { (bucket: $0["name"], document: $0["document"]) }
    }

    /// Every blob name the catalog references (for garbage collection of orphans).
    func referencedBlobs() async throws -> Set<String> {
        try await pool.read { db in try Self.referencedBlobs(db) }
    }

    /// Every blob name the catalog in `db` references: its objects' and its multipart uploads' parts' (also read from
    /// a copy of the catalog, such as a backup's).
    static func referencedBlobs(_ db: Database) throws -> Set<String> {
        var names = Set(try Row.fetchAll(db, sql: "SELECT blob, segments FROM part").flatMap(partBlobs))
        for manifest in try String.fetchAll(db, sql: "SELECT manifest FROM object") {
            names.formUnion(try CatalogJSON.decode([BlobSegment].self, manifest).map(\.blob))
        }
        return names
    }
}

extension Database {
    /// Whether a query reads any row.
    func exists(_ sql: String, _ arguments: StatementArguments) throws -> Bool {
        try Bool.fetchOne(self, sql: sql, arguments: arguments) == true
    }
}
