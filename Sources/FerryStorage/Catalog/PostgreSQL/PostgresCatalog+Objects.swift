import Foundation
import Logging
import PostgresNIO

/// The object store's metadata in PostgreSQL, for nodes that share an S3-compatible blob store.
///
/// Keys are `COLLATE "C"` (byte order, as S3 lists them). A write to an object key takes a transaction-scoped advisory
/// lock on the key first, so conditional writes, overwrites and completions of one key serialize across nodes; a
/// write to an upload locks the upload's row.
extension PostgresCatalog: ObjectCatalog {
    /// The schema of the object tables (migration 4).
    static let objectTables = [
        """
        CREATE TABLE s3_bucket (
            name TEXT COLLATE "C" PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL, cors TEXT)
        """,
        """
        CREATE TABLE s3_object (
            bucket TEXT COLLATE "C" NOT NULL REFERENCES s3_bucket(name), key TEXT COLLATE "C" NOT NULL,
            size BIGINT NOT NULL, etag TEXT NOT NULL, last_modified DOUBLE PRECISION NOT NULL, attributes TEXT NOT NULL,
            checksums TEXT NOT NULL, checksum_type TEXT, manifest TEXT NOT NULL, part_count INTEGER,
            tags TEXT NOT NULL, parts TEXT, PRIMARY KEY (bucket, key))
        """,
        """
        CREATE TABLE s3_upload (
            id TEXT PRIMARY KEY, bucket TEXT COLLATE "C" NOT NULL REFERENCES s3_bucket(name),
            key TEXT COLLATE "C" NOT NULL, initiated DOUBLE PRECISION NOT NULL, attributes TEXT NOT NULL,
            checksum_algorithm TEXT, checksum_type TEXT, tags TEXT NOT NULL)
        """,
        "CREATE INDEX s3_upload_by_key ON s3_upload (bucket, key, id)",
        "CREATE INDEX s3_upload_by_time ON s3_upload (initiated)",
        """
        CREATE TABLE s3_part (
            upload_id TEXT NOT NULL REFERENCES s3_upload(id) ON DELETE CASCADE, number INTEGER NOT NULL,
            size BIGINT NOT NULL, etag TEXT NOT NULL, checksums TEXT NOT NULL, blob TEXT NOT NULL,
            last_modified DOUBLE PRECISION NOT NULL, segments TEXT, PRIMARY KEY (upload_id, number))
        """,
        """
        CREATE TABLE s3_completed_upload (
            id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL, parts TEXT NOT NULL, etag TEXT NOT NULL,
            completed_at DOUBLE PRECISION NOT NULL)
        """,
        "CREATE INDEX s3_completed_upload_by_time ON s3_completed_upload (completed_at)",
    ]

    // MARK: Buckets

    func insertBucket(_ name: String, at date: Date) async throws -> Bool {
        try await changed("""
            INSERT INTO s3_bucket (name, created_at) VALUES (\(name), \(date.timeIntervalSince1970))
            ON CONFLICT (name) DO NOTHING RETURNING name
            """) > 0
    }

    func bucket(_ name: String) async throws -> BucketInfo? {
        try await rows("SELECT name, created_at FROM s3_bucket WHERE name = \(name)").first.map(Self.bucketInfo)
    }

    func buckets() async throws -> [BucketInfo] {
        try await rows("SELECT name, created_at FROM s3_bucket ORDER BY name").map(Self.bucketInfo)
    }

    private static func bucketInfo(_ row: PostgresRandomAccessRow) throws -> BucketInfo {
        BucketInfo(name: try row.value("name"), createdAt: try row.date("created_at"))
    }

    func deleteBucket(_ name: String) async throws -> CatalogDeleteBucketOutcome {
        return try await transaction { [logger] connection in
            func exists(_ query: PostgresQuery) async throws -> Bool {
                try await Self.exists(query, on: connection, logger: logger)
            }
            guard try await exists("SELECT name FROM s3_bucket WHERE name = \(name) FOR UPDATE") else {
                return .missing
            }
            if try await exists("SELECT 1 AS one FROM s3_object WHERE bucket = \(name) LIMIT 1") { return .notEmpty }
            let blobs = try await Self.rows(
                "SELECT blob, segments FROM s3_part WHERE upload_id IN (SELECT id FROM s3_upload WHERE bucket = \(name))",
                on: connection, logger: logger
            ).flatMap(Self.partBlobs)
            let aborted = try await Self.rows(
                "DELETE FROM s3_upload WHERE bucket = \(name) RETURNING id", on: connection, logger: logger
            ).count
            try await connection.query(
                "DELETE FROM resumable_upload WHERE bucket = \(name) AND etag IS NULL", logger: logger)
            try await connection.query("DELETE FROM s3_bucket WHERE name = \(name)", logger: logger)
            return .deleted(abortedBlobs: blobs, abortedUploads: aborted)
        }
    }

    func bucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind) async throws -> String? {
        let found = try await rows(
            "SELECT \(unescaped: kind.rawValue) AS document FROM s3_bucket WHERE name = \(bucket)")
        return try found.first?["document"].decode(String?.self)
    }

    func setBucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind, _ document: String?) async throws -> Bool {
        try await changed(
            "UPDATE s3_bucket SET \(unescaped: kind.rawValue) = \(document) WHERE name = \(bucket) RETURNING name") > 0
    }

    func bucketConfigurations(_ kind: BucketConfigurationKind) async throws -> [(bucket: String, document: String)] {
        try await rows(
            """
            SELECT name, \(unescaped: kind.rawValue) AS document FROM s3_bucket
            WHERE \(unescaped: kind.rawValue) IS NOT NULL ORDER BY name
            """
        ).map { (bucket: try $0.value("name"), document: try $0.value("document")) }
    }

    // MARK: Objects

    private static func objectInfo(_ row: PostgresRandomAccessRow) throws -> ObjectInfo {
        ObjectInfo(
            bucket: try row.value("bucket"), key: try row.value("key"), size: try row.value("size"),
            etag: try row.value("etag"), lastModified: try row.date("last_modified"),
            attributes: try row.json("attributes"), checksums: try row.json("checksums"),
            checksumType: try row.value("checksum_type"),
            manifest: try row.json("manifest"), partCount: try row.value("part_count"), tags: try row.json("tags"),
            parts: try row.optionalJSON("parts"), owner: try row.value("owner"))
    }

    func object(bucket: String, key: String) async throws -> ObjectInfo? {
        try await rows("SELECT * FROM s3_object WHERE bucket = \(bucket) AND key = \(key)").first.map(Self.objectInfo)
    }

    /// Serializes writers of one key until the transaction ends.
    private static func lockKey(bucket: String, key: String, on connection: PostgresConnection, logger: Logger)
        async throws
    {
        try await lock(
            "SELECT pg_advisory_xact_lock(hashtext(\("s3:" + bucket + "\n" + key)))", on: connection, logger: logger)
    }

    /// Whether `condition` holds for the current object (inside the key's lock) for a write of an object with the
    /// ETag `writing` (nil for a delete); nil when it does.
    private static func check(
        _ condition: ObjectWriteCondition, bucket: String, key: String, writing: String? = nil,
        on connection: PostgresConnection, logger: Logger
    ) async throws -> ObjectWriteCondition.Failure? {
        if condition.isEmpty { return nil }
        let current = try await rows(
            "SELECT etag, last_modified, size, tags FROM s3_object WHERE bucket = \(bucket) AND key = \(key)",
            on: connection, logger: logger
        ).first
        return try condition.evaluate(
            etag: try current.map { try $0.value("etag") }, lastModified: try current?.date("last_modified"),
            size: try current.map { try $0.value("size") }, tags: { try current.map { try $0.json("tags") } },
            writing: writing)
    }

    /// Whether a write of `object` under a file owner's condition finds that file stored with its ETag (inside the
    /// key's lock): kept as stored, the write stores nothing (see the SQLite catalog's `keepsFile`).
    private static func keepsFile(
        _ condition: ObjectWriteCondition, _ object: ObjectInfo, on connection: PostgresConnection, logger: Logger
    ) async throws -> Bool {
        guard condition.fileOwner != nil else { return false }
        let current: String? = try await rows(
            "SELECT etag FROM s3_object WHERE bucket = \(object.bucket) AND key = \(object.key)", on: connection,
            logger: logger
        ).first.map { try $0.value("etag") }
        return current == object.etag
    }

    /// Writes the object's row; returns the blobs of the one it replaced.
    private static func upsert(_ object: ObjectInfo, on connection: PostgresConnection, logger: Logger) async throws
        -> [BlobSegment]
    {
        let replaced: [BlobSegment] = try await rows(
            "SELECT manifest FROM s3_object WHERE bucket = \(object.bucket) AND key = \(object.key)", on: connection,
            logger: logger
        ).first?.json("manifest") ?? []
        let attributes = try CatalogJSON.encode(object.attributes)
        let checksums = try CatalogJSON.encode(object.checksums)
        let manifest = try CatalogJSON.encode(object.manifest)
        let tags = try CatalogJSON.encode(object.tags)
        let parts = try object.parts.map(CatalogJSON.encode)
        try await connection.query(
            """
            INSERT INTO s3_object (bucket, key, size, etag, last_modified, attributes, checksums, checksum_type,
                manifest, part_count, tags, parts, owner)
            VALUES (\(object.bucket), \(object.key), \(object.size), \(object.etag),
                \(object.lastModified.timeIntervalSince1970), \(attributes), \(checksums), \(object.checksumType),
                \(manifest), \(object.partCount), \(tags), \(parts), \(object.owner))
            ON CONFLICT (bucket, key) DO UPDATE SET size = EXCLUDED.size, etag = EXCLUDED.etag,
                last_modified = EXCLUDED.last_modified, attributes = EXCLUDED.attributes,
                checksums = EXCLUDED.checksums, checksum_type = EXCLUDED.checksum_type, manifest = EXCLUDED.manifest,
                part_count = EXCLUDED.part_count, tags = EXCLUDED.tags, parts = EXCLUDED.parts, owner = EXCLUDED.owner
            """, logger: logger)
        return replaced
    }

    func putObject(_ object: ObjectInfo, condition: ObjectWriteCondition, byteLimit: Int64?) async throws
        -> CatalogPutOutcome
    {
        try await transaction { [logger] connection in
            try await Self.lockKey(bucket: object.bucket, key: object.key, on: connection, logger: logger)
            guard try await Self.exists(bucket: object.bucket, on: connection, logger: logger) else {
                return .noSuchBucket
            }
            if let failed = try await Self.check(
                condition, bucket: object.bucket, key: object.key, writing: object.etag, on: connection, logger: logger)
            {
                return .refused(failed)
            }
            if try await Self.keepsFile(condition, object, on: connection, logger: logger) { return .kept }
            try await Self.checkQuota(storing: object, limit: byteLimit, on: connection, logger: logger)
            return .stored(replaced: try await Self.upsert(object, on: connection, logger: logger))
        }
    }

    func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition) async throws -> CatalogPutOutcome {
        try await transaction { [logger] connection in
            try await Self.lockKey(bucket: bucket, key: key, on: connection, logger: logger)
            guard
                let row = try await Self.rows(
                    "SELECT manifest FROM s3_object WHERE bucket = \(bucket) AND key = \(key)", on: connection,
                    logger: logger
                ).first
            else { return .stored(replaced: []) }
            if let failed = try await Self.check(condition, bucket: bucket, key: key, on: connection, logger: logger) {
                return .refused(failed)
            }
            try await connection.query("DELETE FROM s3_object WHERE bucket = \(bucket) AND key = \(key)", logger: logger)
            return .stored(replaced: try row.json("manifest"))
        }
    }

    func setTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws -> Bool {
        let document = try CatalogJSON.encode(tags)
        // Under the key's lock, as every other writer of the key: a conditional delete (a lifecycle rule's, on the
        // tags it judged) reads the tags and deletes in one step that a retagging cannot come between.
        return try await transaction { [logger] connection in
            try await Self.lockKey(bucket: bucket, key: key, on: connection, logger: logger)
            return try await Self.rows(
                """
                UPDATE s3_object SET tags = \(document) WHERE bucket = \(bucket) AND key = \(key) AND etag = \(etag)
                RETURNING key
                """, on: connection, logger: logger
            ).count > 0
        }
    }

    func objects(bucket: String, after: String?, from: String, limit: Int) async throws -> [ObjectInfo] {
        if let after {
            return try await rows(
                """
                SELECT * FROM s3_object WHERE bucket = \(bucket) AND key > \(after) AND key >= \(from)
                ORDER BY key LIMIT \(limit)
                """
            ).map(Self.objectInfo)
        }
        return try await rows(
            "SELECT * FROM s3_object WHERE bucket = \(bucket) AND key >= \(from) ORDER BY key LIMIT \(limit)"
        ).map(Self.objectInfo)
    }

    // MARK: Multipart uploads

    static func uploadInfo(_ row: PostgresRandomAccessRow) throws -> MultipartUploadInfo {
        MultipartUploadInfo(
            uploadId: try row.value("id"), bucket: try row.value("bucket"), key: try row.value("key"),
            initiated: try row.date("initiated"), attributes: try row.json("attributes"),
            checksumAlgorithm: try row.value("checksum_algorithm"), checksumType: try row.value("checksum_type"),
            tags: try row.json("tags"), owner: try row.value("owner"))
    }

    func insertUpload(_ upload: MultipartUploadInfo, uploadLimit: Int?) async throws -> Bool {
        let attributes = try CatalogJSON.encode(upload.attributes)
        let tags = try CatalogJSON.encode(upload.tags)
        return try await transaction { [logger] connection in
            guard try await Self.exists(bucket: upload.bucket, on: connection, logger: logger) else { return false }
            if let limit = uploadLimit, let owner = upload.owner {
                try await Self.lockOwner(owner, on: connection, logger: logger)
                if try await Self.uploadCount(owner: owner, on: connection, logger: logger) >= limit {
                    throw FerryDomainError.uploadQuotaExceeded(limit: limit)
                }
            }
            try await connection.query(
                """
                INSERT INTO s3_upload (id, bucket, key, initiated, attributes, checksum_algorithm, checksum_type, tags,
                    owner)
                VALUES (\(upload.uploadId), \(upload.bucket), \(upload.key), \(upload.initiated.timeIntervalSince1970),
                    \(attributes), \(upload.checksumAlgorithm), \(upload.checksumType), \(tags), \(upload.owner))
                """, logger: logger)
            return true
        }
    }

    func upload(_ uploadId: String) async throws -> MultipartUploadInfo? {
        try await rows("SELECT * FROM s3_upload WHERE id = \(uploadId)").first.map(Self.uploadInfo)
    }

    func uploads(bucket: String, prefix: String, keyMarker: String, uploadIdMarker: String, limit: Int) async throws
        -> [MultipartUploadInfo]
    {
        try await rows(
            """
            SELECT * FROM s3_upload WHERE bucket = \(bucket) AND key >= \(prefix)
            AND (key > \(keyMarker)
                OR (key = \(keyMarker) AND \(uploadIdMarker) <> '' AND id COLLATE "C" > \(uploadIdMarker)))
            ORDER BY key, id COLLATE "C" LIMIT \(limit)
            """
        ).map(Self.uploadInfo).filter { $0.key.hasBytePrefix(prefix) }
    }

    func uploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo] {
        try await rows(
            """
            SELECT * FROM s3_upload WHERE initiated < \(date.timeIntervalSince1970)
                AND NOT starts_with(id, \(ResumableUpload.multipartIdPrefix)) ORDER BY initiated LIMIT \(limit)
            """
        ).map(Self.uploadInfo)
    }

    private static func partInfo(_ row: PostgresRandomAccessRow) throws -> PartInfo {
        let size: Int64 = try row.value("size")
        return PartInfo(
            number: try row.value("number"), size: size, etag: try row.value("etag"),
            checksums: try row.json("checksums"),
            segments: try row.optionalJSON("segments") ?? [BlobSegment(blob: try row.value("blob"), size: size)],
            lastModified: try row.date("last_modified"))
    }

    static func partBlobs(_ row: PostgresRandomAccessRow) throws -> [String] {
        try (row.optionalJSON("segments") as [BlobSegment]?)?.map(\.blob) ?? [try row.value("blob")]
    }

    /// Locks the bucket's row against its deletion until the transaction ends; false when there is no such bucket.
    private static func exists(bucket: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await exists("SELECT name FROM s3_bucket WHERE name = \(bucket) FOR SHARE", on: connection, logger: logger)
    }

    /// Locks an upload's row until the transaction ends; false when there is no such upload.
    static func lockUpload(_ uploadId: String, on connection: PostgresConnection, logger: Logger) async throws
        -> Bool
    {
        try await exists("SELECT id FROM s3_upload WHERE id = \(uploadId) FOR UPDATE", on: connection, logger: logger)
    }

    func putPart(_ part: PartInfo, uploadId: String, byteLimit: Int64?, freeing: [String]) async throws
        -> CatalogPartOutcome
    {
        let checksums = try CatalogJSON.encode(part.checksums)
        let plain = part.segments.count == 1 && part.segments[0].offset == nil && part.segments[0].size == part.size
        let segments = plain ? nil : try CatalogJSON.encode(part.segments)
        return try await transaction { [logger] connection in
            guard try await Self.lockUpload(uploadId, on: connection, logger: logger) else { return .noSuchUpload }
            try await Self.checkQuota(
                storing: part, uploadId: uploadId, limit: byteLimit, freeing: freeing, on: connection, logger: logger)
            let replaced = try await Self.rows(
                "SELECT blob, segments FROM s3_part WHERE upload_id = \(uploadId) AND number = \(part.number)",
                on: connection, logger: logger
            ).flatMap(Self.partBlobs)
            try await connection.query(
                """
                INSERT INTO s3_part (upload_id, number, size, etag, checksums, blob, last_modified, segments)
                VALUES (\(uploadId), \(part.number), \(part.size), \(part.etag), \(checksums), \(part.blob),
                    \(part.lastModified.timeIntervalSince1970), \(segments))
                ON CONFLICT (upload_id, number) DO UPDATE SET size = EXCLUDED.size, etag = EXCLUDED.etag,
                    checksums = EXCLUDED.checksums, blob = EXCLUDED.blob, last_modified = EXCLUDED.last_modified,
                    segments = EXCLUDED.segments
                """, logger: logger)
            return .stored(replaced: replaced)
        }
    }

    func parts(uploadId: String, after marker: Int, limit: Int?) async throws -> [PartInfo] {
        let limit = limit ?? Int(Int32.max)
        return try await rows(
            """
            SELECT * FROM s3_part WHERE upload_id = \(uploadId) AND number > \(marker) ORDER BY number LIMIT \(limit)
            """
        ).map(Self.partInfo)
    }

    func deleteUpload(_ uploadId: String) async throws -> [String]? {
        return try await transaction { [logger] connection -> [String]? in
            guard try await Self.lockUpload(uploadId, on: connection, logger: logger) else { return nil }
            let blobs = try await Self.rows(
                "SELECT blob, segments FROM s3_part WHERE upload_id = \(uploadId)", on: connection, logger: logger
            ).flatMap(Self.partBlobs)
            try await connection.query("DELETE FROM s3_upload WHERE id = \(uploadId)", logger: logger)
            try await connection.query(
                "DELETE FROM resumable_upload WHERE upload_id = \(uploadId) AND etag IS NULL", logger: logger)
            return blobs
        }
    }

    func completeUpload(
        _ uploadId: String, object: ObjectInfo, expectedParts: [PartInfo], condition: ObjectWriteCondition, now: Date
    ) async throws -> CatalogCompleteOutcome {
        let completedParts = try CatalogJSON.encode(expectedParts.map { CompletedUploadPart(number: $0.number, etag: $0.etag) })
        return try await transaction { [logger] connection in
            try await Self.lockKey(bucket: object.bucket, key: object.key, on: connection, logger: logger)
            guard try await Self.lockUpload(uploadId, on: connection, logger: logger) else { return .noSuchUpload }
            if let failed = try await Self.check(
                condition, bucket: object.bucket, key: object.key, writing: object.etag, on: connection, logger: logger)
            {
                return .refused(failed)
            }
            let current = try await Self.rows(
                "SELECT * FROM s3_part WHERE upload_id = \(uploadId)", on: connection, logger: logger)
            let byNumber = Dictionary(uniqueKeysWithValues: try current.map(Self.partInfo).map { ($0.number, $0) })
            for part in expectedParts where byNumber[part.number]?.blob != part.blob {
                return .changed
            }
            let kept = try await Self.keepsFile(condition, object, on: connection, logger: logger)
            let used = kept ? [] : Set(expectedParts.flatMap { $0.segments.map(\.blob) })
            let unused = try current.flatMap(Self.partBlobs).filter { !used.contains($0) }
            let replaced = kept ? [] : try await Self.upsert(object, on: connection, logger: logger)
            try await connection.query("DELETE FROM s3_upload WHERE id = \(uploadId)", logger: logger)
            try await connection.query(
                """
                INSERT INTO s3_completed_upload (id, bucket, key, parts, etag, completed_at)
                VALUES (\(uploadId), \(object.bucket), \(object.key), \(completedParts), \(object.etag),
                    \(now.timeIntervalSince1970))
                ON CONFLICT (id) DO UPDATE SET parts = EXCLUDED.parts, etag = EXCLUDED.etag,
                    completed_at = EXCLUDED.completed_at
                """, logger: logger)
            return kept ? .kept(unused: unused) : .completed(replaced: replaced, unused: unused)
        }
    }

    func completedUpload(_ uploadId: String) async throws -> CompletedUpload? {
        try await rows("SELECT * FROM s3_completed_upload WHERE id = \(uploadId)").first.map { row in
            CompletedUpload(
                uploadId: try row.value("id"), bucket: try row.value("bucket"), key: try row.value("key"),
                parts: try row.json("parts"), etag: try row.value("etag"), completedAt: try row.date("completed_at"))
        }
    }

    func forgetCompletedUploads(before date: Date) async throws -> Int {
        try await changed(
            "DELETE FROM s3_completed_upload WHERE completed_at < \(date.timeIntervalSince1970) RETURNING id")
    }

    func referencedBlobs() async throws -> Set<String> {
        var names = Set(try await rows("SELECT blob, segments FROM s3_part").flatMap(Self.partBlobs))
        for manifest in try await strings("SELECT manifest FROM s3_object") {
            names.formUnion(try CatalogJSON.decode([BlobSegment].self, manifest).map(\.blob))
        }
        return names
    }
}
