import FerryCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The object store: metadata in the SQLite catalog, bytes in blobs, kept as files under the data directory (the
/// embedded default) or in a bucket of an S3-compatible store (`--store s3://…`).
///
/// A multipart object is a manifest of its part blobs, streamed in order on GET; completing an upload copies nothing.
public struct CatalogObjectStore: ObjectStore {
    /// Limits the store enforces.
    public struct Limits: Sendable {
        /// Smallest size of every part but the last (S3: 5 MiB).
        public var minPartSize: Int64 = 5 * 1024 * 1024
        /// Largest single PUT or part (S3: 5 GiB).
        public var maxPartSize: Int64 = 5 * 1024 * 1024 * 1024
        /// Bytes of disk kept free under blobs stored as files: a body that would leave less is refused
        /// (`InsufficientStorage`), so that the catalog's commits and the deletes that free space still fit.
        public var minFreeBytes: Int64 = 64 * 1024 * 1024
        /// Creates the S3 defaults.
        public init() {}

        /// S3's largest object, 5 TiB: the most a resumable upload may hold, and the largest size a media or publish
        /// upload may announce.
        public static let maxObjectSize: Int64 = 5 * 1024 * 1024 * 1024 * 1024
    }

    let catalog: any ObjectCatalog
    let files: any BlobStorage
    let limits: Limits
    let logger: Logger
    /// Whether other nodes share this store's catalog and blobs (a PostgreSQL catalog over an S3-compatible store).
    package var isShared: Bool { catalog.isShared }
    /// Who hears of uploads started, completed, aborted and resumed, parts retried, and how long catalog and blob
    /// calls take (the server's metrics); nil reports nothing.
    package var events: (any ServiceEvents)?
    /// Unreferenced blobs the last orphan pass found; the next pass deletes those still unreferenced.
    let orphanSuspects = NIOLockedValueBox<Set<String>>([])
    /// The buckets' lifecycle configurations the last lifecycle pass read, by bucket.
    let lifecycleSeen = NIOLockedValueBox<[String: String]>([:])

    /// Opens the store with its blobs as files in `directory`, over `catalog`.
    public init(directory: String, catalog: SQLiteCatalog, limits: Limits = .init(), logger: Logger) throws {
        self.init(
            blobs: try BlobFiles(root: directory, reserve: limits.minFreeBytes), catalog: catalog, limits: limits,
            logger: logger)
    }

    /// Opens the store with its blobs in an S3-compatible store: with a `shared` PostgreSQL catalog their metadata is
    /// shared too, and any node serves any object; else it is in the data directory's `catalog`.
    package init(
        blobs: S3BlobStorage, catalog: SQLiteCatalog, shared: PostgresCatalog?, limits: Limits, logger: Logger
    ) {
        let metadata: any ObjectCatalog = shared ?? catalog
        self.init(blobs: blobs, catalog: metadata, limits: limits, logger: logger)
    }

    /// Opens the store with its blobs in `blobs`, over `catalog`.
    init(blobs: any BlobStorage, catalog: any ObjectCatalog, limits: Limits = .init(), logger: Logger) {
        self.catalog = catalog
        self.files = blobs
        self.limits = limits
        self.logger = logger
    }

    // MARK: Buckets

    public func createBucket(_ name: String) async throws {
        guard try await catalog.insertBucket(name, at: Date()) else {
            throw FerryDomainError(
                .bucketExists,
                "Your previous request to create the named bucket succeeded and you already own it.")
        }
    }

    public func bucket(_ name: String) async throws -> BucketInfo {
        guard let bucket = try await catalog.bucket(name) else { throw Self.noSuchBucket }
        return bucket
    }

    public func deleteBucket(_ name: String) async throws {
        // A bucket made again under the name starts with no lifecycle configuration read (forgotten before and after
        // the deletion, as a setting is).
        lifecycleSeen.withLockedValue { $0[name] = nil }
        defer { lifecycleSeen.withLockedValue { $0[name] = nil } }
        switch try await catalog.deleteBucket(name) {
        case .deleted(let blobs, let uploads):
            // Aborted with the bucket, as their clients could have: counted so, as they were counted started.
            if uploads > 0 { events?.multipartUpload(.aborted, count: uploads) }
            await retire(blobs)
        case .missing: throw Self.noSuchBucket
        case .notEmpty: throw FerryDomainError(.bucketNotEmpty, "The bucket you tried to delete is not empty.")
        }
    }

    public func listBuckets() async throws -> [BucketInfo] {
        try await catalog.buckets()
    }

    public func bucketConfiguration(_ name: String, _ kind: BucketConfigurationKind) async throws -> String? {
        _ = try await bucket(name)
        return try await catalog.bucketConfiguration(name, kind)
    }

    public func setBucketConfiguration(_ name: String, _ kind: BucketConfigurationKind, _ document: String?) async throws {
        // A lifecycle configuration put (the same one again too) is read by a pass before one applies it: forgotten
        // before the write and after it, as a pass may read the catalog before the write and note it after.
        if kind == .lifecycle { lifecycleSeen.withLockedValue { $0[name] = nil } }
        defer { if kind == .lifecycle { lifecycleSeen.withLockedValue { $0[name] = nil } } }
        guard try await catalog.setBucketConfiguration(name, kind, document) else { throw Self.noSuchBucket }
    }

    /// Keys, prefixes and delimiters are matched by their UTF-8 bytes, in byte order. A `startAfter` that is itself a
    /// common prefix (it ends with the delimiter, after `prefix`) skips every key under it, as a marker S3 gave back.
    public func listObjects(bucket: String, prefix: String, delimiter: String?, startAfter: String?, maxKeys: Int)
        async throws -> ObjectListing
    {
        _ = try await self.bucket(bucket)
        var objects: [ObjectInfo] = []
        var prefixes: [String] = []
        let rolledUp = KeyRollup(prefix: prefix, delimiter: delimiter).commonPrefix
        // Keys after `after` (exclusive) and from `from` (inclusive).
        var after = startAfter
        var from = prefix
        if let marker = startAfter, marker.hasBytePrefix(prefix), let common = rolledUp(marker), common.isByteEqual(to: marker) {
            guard let next = String.byteOrderSuccessor(of: marker) else {
                return ObjectListing(objects: [], commonPrefixes: [], isTruncated: false)
            }
            (after, from) = (nil, next)
        }
        var lastReturned: String?
        while true {
            let batch = try await catalog.objects(bucket: bucket, after: after, from: from, limit: 1000)
            if batch.isEmpty { return ObjectListing(objects: objects, commonPrefixes: prefixes, isTruncated: false) }
            for object in batch {
                guard object.key.hasBytePrefix(prefix) else {
                    return ObjectListing(objects: objects, commonPrefixes: prefixes, isTruncated: false)
                }
                let common = rolledUp(object.key)
                if let common, let last = prefixes.last, common.isByteEqual(to: last) { continue }
                if objects.count + prefixes.count == maxKeys {
                    return ObjectListing(
                        objects: objects, commonPrefixes: prefixes, isTruncated: true, nextMarker: lastReturned)
                }
                if let common {
                    prefixes.append(common)
                    lastReturned = common
                } else {
                    objects.append(object)
                    lastReturned = object.key
                }
            }
            // A batch that ends inside a common prefix: the next starts past every key under it (they would all roll
            // up into it), so a listing's work is bounded by its page, not by how many keys a prefix holds.
            if let last = batch.last?.key, let common = rolledUp(last), let newest = prefixes.last, common.isByteEqual(to: newest) {
                guard let next = String.byteOrderSuccessor(of: common) else {
                    return ObjectListing(objects: objects, commonPrefixes: prefixes, isTruncated: false)
                }
                (after, from) = (nil, next)
            } else {
                after = batch.last?.key
            }
        }
    }

    // MARK: Objects

    public func object(bucket: String, key: String) async throws -> ObjectInfo {
        if let object = try await events.timed("catalog", "object", { try await catalog.object(bucket: bucket, key: key) }) {
            return object
        }
        _ = try await self.bucket(bucket)
        throw Self.noSuchKey
    }

    public func readObject(_ object: ObjectInfo, range: ClosedRange<Int64>?) async throws -> AsyncThrowingStream<
        ByteBuffer, any Error
    > {
        let lease = files.lease(object.manifest.map(\.blob))
        // Leased first, then confirmed: a writer deletes replaced blobs only after its catalog change, so either
        // the catalog still shows this version now and its blobs stay until the lease ends, or the version changed.
        guard let current = try await catalog.object(bucket: object.bucket, key: object.key),
            current.etag == object.etag, current.manifest == object.manifest
        else {
            lease.release()
            throw ObjectChangedError()
        }
        // The first bytes are read before the stream is handed over, so a storage that cannot serve them (an object
        // store that is down) fails the request before a status line is sent, not in the middle of a 200.
        var iterator = BlobByteSequence(storage: files, manifest: object.manifest, range: range, events: events)
            .makeAsyncIterator()
        let first: ByteBuffer?
        do {
            first = try await iterator.next()
        } catch {
            lease.release()
            throw error
        }
        let box = IteratorBox(iterator, lease: lease, first: first)
        let (logger, bucket) = (self.logger, object.bucket)
        return AsyncThrowingStream(unfolding: {
            do {
                let next = try await box.next()
                if next == nil { box.lease.release() }
                return next
            } catch {
                // The answer's status is sent: it ends short, which only the client and this line tell.
                if !(error is CancellationError) {
                    logger.warning(
                        "object read failed after its first bytes; the answer ends short",
                        metadata: ["ferry.bucket": .string(bucket), "error": .string(String(describing: error))])
                }
                throw error
            }
        })
    }

    public func putObject<Body: AsyncSequence & Sendable>(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag], body: Body,
        checksums: [ChecksumAlgorithm], condition: ObjectWriteCondition, verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        _ = try await self.bucket(bucket)
        let freed: (String) async throws -> Int64 = { owner in
            guard let current = try await self.catalog.object(bucket: bucket, key: key), current.owner == owner else {
                return 0
            }
            return current.size
        }
        var room: Int64?
        if let charge {
            try await precheck(charge, freed: freed)
            room = try await self.room(charge, freed: freed)
        }
        let (blob, digests) = try await writeVerified(
            QuotaBoundBody(base: body, room: room, limit: charge?.quota.storageBytes ?? 0), checksums: checksums,
            verify: verify)
        let object = ObjectInfo(
            bucket: bucket, key: key, size: digests.size, etag: Hex.encode(digests.md5), lastModified: Date(),
            attributes: attributes,
            checksums: digests.checksums.filter { $0.key != "MD5" }.mapValues { Data($0).base64EncodedString() },
            checksumType: digests.checksums.keys.contains { $0 != "MD5" } ? "FULL_OBJECT" : nil,
            manifest: [BlobSegment(blob: blob, size: digests.size)], partCount: nil, tags: tags,
            owner: charge?.owner)
        return try await store(object, condition: condition, newBlobs: [blob], byteLimit: charge?.quota.storageBytes)
    }

    /// Writes an object's catalog entry (refused past `byteLimit` for its owner); on failure deletes `newBlobs` and
    /// throws the S3 error.
    private func store(_ object: ObjectInfo, condition: ObjectWriteCondition, newBlobs: [String], byteLimit: Int64?)
        async throws -> ObjectInfo
    {
        let outcome: CatalogPutOutcome
        do {
            outcome = try await events.timed("catalog", "putObject") {
                try await catalog.putObject(object, condition: condition, byteLimit: byteLimit)
            }
        } catch {
            await discardUnlessRecorded(newBlobs, after: error)
            throw error
        }
        switch outcome {
        case .stored(let replaced):
            await retire(replaced.map(\.blob))
            return object
        case .kept:
            await discardUnreferenced(newBlobs)
            return try await catalog.object(bucket: object.bucket, key: object.key) ?? object
        case .noSuchBucket:
            await discardUnreferenced(newBlobs)
            throw Self.noSuchBucket
        case .refused(let failure):
            await discardUnreferenced(newBlobs)
            throw Self.refusal(failure)
        }
    }

    public func copyObject(
        _ source: ObjectInfo, bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        condition: ObjectWriteCondition, charge: StorageCharge?
    ) async throws -> ObjectInfo {
        _ = try await self.bucket(bucket)
        let manifest = try await share(source, segments: source.manifest)
        var object = source
        object.bucket = bucket
        object.key = key
        object.attributes = attributes
        object.tags = tags
        object.lastModified = Date()
        object.manifest = manifest
        object.owner = charge?.owner
        return try await store(
            object, condition: condition, newBlobs: manifest.map(\.blob), byteLimit: charge?.quota.storageBytes)
    }

    /// New names for the blobs of `segments` of `source` (hard links), taken while the source is leased and
    /// confirmed current; throws ``ObjectChangedError`` when the source changed first.
    private func share(_ source: ObjectInfo, segments: [BlobSegment]) async throws -> [BlobSegment] {
        let lease = files.lease(segments.map(\.blob))
        defer { lease.release() }
        guard let current = try await catalog.object(bucket: source.bucket, key: source.key),
            current.etag == source.etag, current.manifest == source.manifest
        else { throw ObjectChangedError() }
        return try await link(segments)
    }

    /// New names (hard links) for the blobs of `segments`, the caller holding a lease on them; when one link fails,
    /// those made before it are discarded.
    func link(_ segments: [BlobSegment]) async throws -> [BlobSegment] {
        var shared: [BlobSegment] = []
        do {
            for segment in segments {
                shared.append(
                    BlobSegment(
                        blob: try await events.timed("blobs", "link") { try await files.link(segment.blob) },
                        size: segment.size, offset: segment.offset))
            }
        } catch {
            await discardUnreferenced(shared.map(\.blob))
            throw error
        }
        return shared
    }

    public func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition) async throws {
        _ = try await self.bucket(bucket)
        let outcome = try await events.timed("catalog", "deleteObject") {
            try await catalog.deleteObject(bucket: bucket, key: key, condition: condition)
        }
        switch outcome {
        case .stored(let replaced): await retire(replaced.map(\.blob))
        case .kept: break
        case .refused(let failure): throw Self.refusal(failure)
        case .noSuchBucket: throw Self.noSuchBucket
        }
    }

    public func setObjectTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws {
        guard try await catalog.setTags(tags, bucket: bucket, key: key, etag: etag) else {
            _ = try await self.bucket(bucket)
            throw Self.noSuchKey
        }
    }

    // MARK: Multipart

    public func createMultipartUpload(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        checksumAlgorithm: ChecksumAlgorithm?, checksumType: String?, charge: StorageCharge?
    ) async throws -> MultipartUploadInfo {
        try await createMultipartUpload(
            idPrefix: "", bucket: bucket, key: key, attributes: attributes, tags: tags,
            checksumAlgorithm: checksumAlgorithm, checksumType: checksumType, charge: charge)
    }

    /// A new upload id: `prefix`, the initiation time in milliseconds (12 hex digits), then 26 random bytes in hex, so
    /// that one key's uploads, listed in id order, are listed in the order they were initiated, as S3 lists them.
    static func uploadId(prefix: String, initiated: Date) -> String {
        let milliseconds = UInt64(max(0, min(initiated.timeIntervalSince1970 * 1000, 0xFFFF_FFFF_FFFF)))
        let time = String(milliseconds, radix: 16)
        return prefix + String(repeating: "0", count: 12 - time.count) + time + Hex.randomId(byteCount: 26)
    }

    /// Starts a multipart upload whose id begins with `idPrefix`.
    func createMultipartUpload(
        idPrefix: String, bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        checksumAlgorithm: ChecksumAlgorithm?, checksumType: String?, charge: StorageCharge?
    ) async throws -> MultipartUploadInfo {
        let now = Date()
        let upload = MultipartUploadInfo(
            uploadId: Self.uploadId(prefix: idPrefix, initiated: now), bucket: bucket, key: key, initiated: now,
            attributes: attributes, checksumAlgorithm: checksumAlgorithm?.s3Name, checksumType: checksumType,
            tags: tags, owner: charge?.owner)
        let limit = charge?.quota.concurrentUploads
        let insert = { [catalog, events] in
            try await events.timed("catalog", "insertUpload") { try await catalog.insertUpload(upload, uploadLimit: limit) }
        }
        let inserted: Bool
        do {
            inserted = try await insert()
        } catch let error as FerryDomainError where error.details["QuotaName"] == "ConcurrentUploads" {
            // The owner's resumable uploads past their expiry hold their slots until the collector's next pass (an
            // hour at most): ended now, and the upload tried once more.
            guard let owner = charge?.owner, try await expireUnfinishedResumableUploads(of: owner, now: Date()) > 0
            else { throw error }
            inserted = try await insert()
        }
        guard inserted else { throw Self.noSuchBucket }
        events?.multipartUpload(.started, count: 1)
        return upload
    }

    public func multipartUpload(_ uploadId: String, bucket: String, key: String) async throws -> MultipartUploadInfo {
        // Bytes, as the catalog and the access policies compare keys: Swift's `==` takes a key canonically equivalent
        // to the upload's (`e` + U+0301 for `é`), another key, for it.
        guard let upload = try await catalog.upload(uploadId), upload.bucket.isByteEqual(to: bucket),
            upload.key.isByteEqual(to: key)
        else {
            _ = try await self.bucket(bucket)
            throw Self.noSuchUpload
        }
        return upload
    }

    public func uploadPart<Body: AsyncSequence & Sendable>(
        _ upload: MultipartUploadInfo, partNumber: Int, body: Body, checksums: [ChecksumAlgorithm],
        verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        // Parts count against the upload's owner (the edge charges them to it, whoever sends them); a charge to
        // anyone else is not the upload's and is not applied.
        let charge = charge.flatMap { $0.owner == upload.owner ? $0 : nil }
        if let charge {
            try await precheck(charge) { _ in
                try await catalog.parts(uploadId: upload.uploadId, after: partNumber - 1, limit: 1)
                    .first(where: { $0.number == partNumber })?.size ?? 0
            }
        }
        let algorithms = Self.algorithms(checksums, upload: upload)
        let (blob, digests) = try await writeVerified(body, checksums: algorithms, verify: verify)
        let part = PartInfo(number: partNumber, digests: digests, segments: [BlobSegment(blob: blob, size: digests.size)])
        return try await record(part, upload: upload, byteLimit: charge?.quota.storageBytes)
    }

    /// Streams `body` (at most `maxSize` bytes, ``Limits/maxPartSize`` when nil) to a new blob, checks its digests
    /// with `verify` and commits it: the blob's name (not yet referenced: the caller records it, and deletes it through
    /// ``discardUnreferenced(_:)`` when that fails) and the digests. A body that fails its checks (`verify` throws),
    /// or a commit that fails, leaves nothing behind.
    func writeVerified<Body: AsyncSequence & Sendable>(
        _ body: Body, checksums: [ChecksumAlgorithm], maxSize: Int64? = nil, verify: BodyVerifier
    ) async throws -> (blob: String, digests: BodyDigests) where Body.Element == ByteBuffer {
        let temp: String
        let digests: BodyDigests
        do {
            (temp, digests) = try await files.write(body, checksums: checksums, maxSize: maxSize ?? limits.maxPartSize)
        } catch {
            events.failed("blobs", "write", error)
            throw error
        }
        do {
            try verify(digests)
            return (try await events.timed("blobs", "commit") { try await files.commit(tempPath: temp) }, digests)
        } catch {
            await files.discard(tempPath: temp)
            throw error
        }
    }

    /// The algorithms a part is hashed with: those asked for and the upload's own.
    private static func algorithms(_ checksums: [ChecksumAlgorithm], upload: MultipartUploadInfo) -> [ChecksumAlgorithm] {
        var algorithms = checksums
        if let name = upload.checksumAlgorithm, let algorithm = ChecksumAlgorithm(name: name),
            !algorithms.contains(algorithm)
        {
            algorithms.append(algorithm)
        }
        return algorithms
    }

    /// Records a part in the catalog (refused past `byteLimit` for the upload's owner, not counting the parts of the
    /// uploads in `freeing`), deleting the blobs of the part it replaces (or its own when the upload is gone or the
    /// quota refuses it).
    func record(_ part: PartInfo, upload: MultipartUploadInfo, byteLimit: Int64?, freeing: [String] = [])
        async throws -> PartInfo
    {
        let outcome: CatalogPartOutcome
        do {
            outcome = try await events.timed("catalog", "putPart") {
                try await catalog.putPart(part, uploadId: upload.uploadId, byteLimit: byteLimit, freeing: freeing)
            }
        } catch {
            await discardUnlessRecorded(part.segments.map(\.blob), after: error)
            throw error
        }
        switch outcome {
        case .stored(let replaced):
            if !replaced.isEmpty { events?.partReplaced() }
            await retire(replaced)
            return part
        case .noSuchUpload:
            await discardUnreferenced(part.segments.map(\.blob))
            throw Self.noSuchUpload
        }
    }

    public func uploadPartCopy(
        _ upload: MultipartUploadInfo, partNumber: Int, source: ObjectInfo, range: ClosedRange<Int64>?,
        checksums: [ChecksumAlgorithm], charge: StorageCharge?
    ) async throws -> PartInfo {
        let byteLimit = charge.flatMap { $0.owner == upload.owner ? $0.quota.storageBytes : nil }
        guard source.size > 0 else {
            // An empty source makes an empty part: nothing to share.
            return try await emptyPart(
                upload, number: partNumber, checksums: Self.algorithms(checksums, upload: upload), byteLimit: byteLimit)
        }
        let range = range ?? 0...(source.size - 1)
        // The segments of the source that hold the range, cut to it.
        var segments: [BlobSegment] = []
        var position: Int64 = 0
        for segment in source.manifest {
            let start = max(range.lowerBound, position)
            let end = min(range.upperBound + 1, position + segment.size)
            if end > start {
                segments.append(
                    BlobSegment(blob: segment.blob, size: end - start, offset: (segment.offset ?? 0) + start - position))
            }
            position += segment.size
        }
        // The part's MD5 and checksums come from its bytes, read once; then the bytes are shared, not copied.
        let lease = files.lease(segments.map(\.blob))
        defer { lease.release() }
        guard let current = try await catalog.object(bucket: source.bucket, key: source.key),
            current.etag == source.etag, current.manifest == source.manifest
        else { throw ObjectChangedError() }
        let digests = try await files.digest(
            BlobByteSequence(storage: files, manifest: segments, range: nil, events: events),
            checksums: Self.algorithms(checksums, upload: upload))
        let part = PartInfo(number: partNumber, digests: digests, segments: try await link(segments))
        return try await record(part, upload: upload, byteLimit: byteLimit)
    }

    public func listParts(_ upload: MultipartUploadInfo, after marker: Int, maxParts: Int) async throws
        -> (parts: [PartInfo], isTruncated: Bool)
    {
        let parts = try await catalog.parts(uploadId: upload.uploadId, after: marker, limit: maxParts + 1)
        if marker == 0 { events?.multipartUpload(.resumed, count: 1) }
        return (Array(parts.prefix(maxParts)), parts.count > maxParts)
    }

    /// Uploads in (key, upload id) order; with a delimiter, those of keys that have it after `prefix` roll up into
    /// common prefixes, which count toward `maxUploads` as uploads do. A key marker that is itself a common prefix
    /// (given back as the next key marker) skips every key under it. Keys are matched by their UTF-8 bytes, and the
    /// keys under a common prefix are skipped in the catalog, not read: a page costs what it lists.
    public func listMultipartUploads(
        bucket: String, prefix: String, delimiter: String?, keyMarker: String, uploadIdMarker: String, maxUploads: Int
    ) async throws -> MultipartUploadListing {
        _ = try await self.bucket(bucket)
        let rolledUp = KeyRollup(prefix: prefix, delimiter: delimiter).commonPrefix
        var listing = MultipartUploadListing()
        var (keyMarker, uploadIdMarker) = (keyMarker, uploadIdMarker)
        if keyMarker.hasBytePrefix(prefix), let common = rolledUp(keyMarker), common.isByteEqual(to: keyMarker) {
            (keyMarker, uploadIdMarker) = (KeyRollup.pastEveryKey(under: common), "")
        }
        while true {
            let batch = try await catalog.uploads(
                bucket: bucket, prefix: prefix, keyMarker: keyMarker, uploadIdMarker: uploadIdMarker, limit: 1000)
            for upload in batch {
                let common = rolledUp(upload.key)
                if let common, let last = listing.commonPrefixes.last, common.isByteEqual(to: last) { continue }
                if listing.uploads.count + listing.commonPrefixes.count == maxUploads {
                    listing.isTruncated = true
                    return listing
                }
                if let common {
                    listing.commonPrefixes.append(common)
                    (listing.nextKeyMarker, listing.nextUploadIdMarker) = (common, nil)
                } else {
                    listing.uploads.append(upload)
                    (listing.nextKeyMarker, listing.nextUploadIdMarker) = (upload.key, upload.uploadId)
                }
            }
            guard batch.count == 1000, let last = batch.last else { return listing }
            // A batch that ends inside a common prefix: the next starts past every key under it.
            if let common = rolledUp(last.key) {
                (keyMarker, uploadIdMarker) = (KeyRollup.pastEveryKey(under: common), "")
            } else {
                (keyMarker, uploadIdMarker) = (last.key, last.uploadId)
            }
        }
    }

    public func completeMultipartUpload(
        _ upload: MultipartUploadInfo, parts requested: [CompleteMultipartUpload.Part],
        fullObjectChecksums: [String: String], objectSize: Int64? = nil, condition: ObjectWriteCondition
    ) async throws -> ObjectInfo {
        // A declared object checksum must at least be one of this upload's, and well-formed.
        for (name, value) in fullObjectChecksums {
            guard name == upload.checksumAlgorithm, let algorithm = ChecksumAlgorithm(name: name) else {
                throw FerryDomainError(
                    .checksumNotApplicable,
                    upload.checksumAlgorithm.map { "The upload was created using the \($0) checksum algorithm, not \(name)." }
                        ?? "The upload was created without a checksum algorithm; the x-amz-checksum-\(name.lowercased()) header cannot be checked.")
            }
            let digest = Self.stripPartCount(value)
            guard let data = Data(base64Encoded: String(digest)), data.count == algorithm.digestLength else {
                throw FerryDomainError(.checksumMismatch, "The \(name) you specified did not match the calculated checksum.")
            }
        }
        guard !requested.isEmpty else {
            throw FerryDomainError(
                .noParts,
                "The XML you provided was not well-formed or did not validate against our published schema.")
        }
        for (previous, next) in zip(requested, requested.dropFirst()) where next.partNumber <= previous.partNumber {
            throw FerryDomainError(.partsOutOfOrder, "The list of parts was not in ascending order. Parts must be ordered by part number.")
        }
        let stored = Dictionary(
            uniqueKeysWithValues: try await catalog.parts(uploadId: upload.uploadId, after: 0, limit: nil).map { ($0.number, $0) })
        var chosen: [PartInfo] = []
        for entry in requested {
            let etag = entry.eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
            guard let part = stored[entry.partNumber], part.etag == etag else {
                throw Self.invalidPart(entry.partNumber)
            }
            for (name, value) in entry.checksums.values where part.checksums[name] != value {
                throw Self.invalidPart(entry.partNumber)
            }
            chosen.append(part)
        }
        for part in chosen.dropLast() where part.size < limits.minPartSize {
            throw FerryDomainError(
                .partTooSmall, "Your proposed upload is smaller than the minimum allowed object size.",
                details: ["PartNumber": String(part.number), "MinSizeAllowed": String(limits.minPartSize)])
        }
        let total = chosen.reduce(Int64(0)) { $0 + $1.size }
        if let objectSize, objectSize != total {
            throw FerryDomainError(
                .sizeMismatch, "The declared object size, \(objectSize), is not the size of the parts listed, \(total).")
        }
        return try await assemble(upload, parts: chosen, fullObjectChecksums: fullObjectChecksums, condition: condition)
    }

    /// Makes `chosen`, the validated parts of `upload` in order, its object: the multipart ETag, the upload's checksum
    /// (full-object or composite, checked against any declared value), and one catalog transaction.
    func assemble(
        _ upload: MultipartUploadInfo, parts chosen: [PartInfo], fullObjectChecksums: [String: String],
        condition: ObjectWriteCondition
    ) async throws -> ObjectInfo {
        let md5s = chosen.map { Hex.decode($0.etag) ?? [] }
        var checksums: [String: String] = [:]
        if let name = upload.checksumAlgorithm, let algorithm = ChecksumAlgorithm(name: name) {
            let partValues = try chosen.map { part -> [UInt8] in
                guard let value = part.checksums[name], let data = Data(base64Encoded: value) else {
                    throw Self.invalidPart(part.number)
                }
                return [UInt8](data)
            }
            if upload.checksumType == "FULL_OBJECT" {
                var combined = partValues[0]
                for (value, part) in zip(partValues.dropFirst(), chosen.dropFirst()) {
                    guard let next = Checksum.combine(algorithm, combined, value, lengthOfB: UInt64(part.size)) else {
                        throw FerryDomainError(.checksumNotApplicable, "The \(name) algorithm cannot form a full-object checksum.")
                    }
                    combined = next
                }
                checksums[name] = Data(combined).base64EncodedString()
            } else {
                checksums[name] = Checksum.composite(algorithm, partChecksums: partValues)
            }
            if let declared = fullObjectChecksums[name],
                Self.stripPartCount(declared) != Self.stripPartCount(checksums[name] ?? "")
            {
                throw FerryDomainError(.checksumMismatch, "The \(name) you specified did not match the calculated checksum.")
            }
        }
        let object = ObjectInfo(
            bucket: upload.bucket, key: upload.key, size: chosen.reduce(0) { $0 + $1.size },
            etag: Checksum.multipartETag(partMD5s: md5s).trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
            lastModified: Date(), attributes: upload.attributes, checksums: checksums,
            checksumType: checksums.isEmpty ? nil : (upload.checksumType ?? "COMPOSITE"),
            manifest: chosen.flatMap(\.segments), partCount: chosen.count, tags: upload.tags,
            parts: chosen.map { ObjectPart(number: $0.number, size: $0.size, checksums: $0.checksums) },
            owner: upload.owner)
        let outcome = try await events.timed("catalog", "completeUpload") {
            try await catalog.completeUpload(upload.uploadId, object: object, expectedParts: chosen, condition: condition, now: Date())
        }
        switch outcome {
        case .completed(let replaced, let unused):
            events?.multipartUpload(.completed, count: 1)
            await retire(replaced.map(\.blob) + unused)
            return object
        case .kept(let unused):
            events?.multipartUpload(.completed, count: 1)
            await retire(unused)
            return try await catalog.object(bucket: object.bucket, key: object.key) ?? object
        case .noSuchUpload:
            throw Self.noSuchUpload
        case .changed:
            throw FerryDomainError(.partReplaced, "A part was replaced while the upload was being completed; try again.")
        case .refused(let failure):
            throw Self.refusal(failure)
        }
    }

    public func completedUpload(_ uploadId: String) async throws -> CompletedUpload? {
        try await catalog.completedUpload(uploadId)
    }

    // MARK: Quotas

    /// How many multipart uploads are in progress, of every owner (resumable uploads' included).
    package func uploadCount() async throws -> Int {
        try await events.timed("catalog", "uploadCount") { try await catalog.uploadCount() }
    }

    public func usage(owner: String) async throws -> StorageUsage {
        try await catalog.usage(owner: owner)
    }

    /// Refuses a write whose declared size alone would take its owner past the byte quota, before a byte of its body
    /// is read; `freed` tells the bytes of the owner's that the write would replace (asked only at the limit). The
    /// catalog checks again, authoritatively, with the bytes received.
    package func precheck(_ charge: StorageCharge, freed: (String) async throws -> Int64) async throws {
        guard let limit = charge.quota.storageBytes, let declared = charge.declaredBytes else { return }
        let stored = try await catalog.usage(owner: charge.owner).storedBytes
        guard StorageQuotaCheck.exceeds(stored: stored, adding: declared, limit: limit) else { return }
        try StorageQuotaCheck.check(stored: stored, adding: declared, freeing: try await freed(charge.owner), limit: limit)
    }

    /// The most bytes a body that declares no size may bring for `charge`: what the owner's byte quota leaves, with
    /// the `freed` bytes of the owner's that the write replaces; nil without a byte quota or with a declared size
    /// (which ``precheck(_:freed:)`` checks and the body's framing holds it to).
    package func room(_ charge: StorageCharge, freed: (String) async throws -> Int64) async throws -> Int64? {
        guard let limit = charge.quota.storageBytes, charge.declaredBytes == nil else { return nil }
        let stored = try await catalog.usage(owner: charge.owner).storedBytes
        let (left, overflow) = limit.subtractingReportingOverflow(stored)
        let (room, more) = max(0, left).addingReportingOverflow(try await freed(charge.owner))
        return overflow || more ? nil : room
    }

    /// A checksum value without a composite's `-N` part count.
    static func stripPartCount(_ value: String) -> Substring {
        guard let dash = value.lastIndex(of: "-"), value[value.index(after: dash)...].allSatisfy(\.isNumber) else {
            return Substring(value)
        }
        return value[..<dash]
    }

    public func abortMultipartUpload(_ upload: MultipartUploadInfo, expired: Bool) async throws {
        guard let blobs = try await catalog.deleteUpload(upload.uploadId) else { throw Self.noSuchUpload }
        events?.multipartUpload(expired ? .expired : .aborted, count: 1)
        await retire(blobs)
    }

    public func abortMultipartUploads(initiatedBefore date: Date) async throws -> Int {
        try await abort(try await catalog.uploads(initiatedBefore: date, limit: 10_000), as: .expired)
    }

    /// Aborts `uploads` (those still there), counted as `outcome`; returns how many.
    func abort(_ uploads: [MultipartUploadInfo], as outcome: MultipartUploadEvent) async throws -> Int {
        var count = 0
        for upload in uploads {
            if let blobs = try await catalog.deleteUpload(upload.uploadId) {
                await retire(blobs)
                count += 1
            }
        }
        if count > 0 { events?.multipartUpload(outcome, count: count) }
        return count
    }

    /// Forgets completed uploads older than `date` (a Complete retried after that answers NoSuchUpload).
    package func forgetCompletedUploads(before date: Date) async throws -> Int {
        try await catalog.forgetCompletedUploads(before: date)
    }

    /// Deletes blobs no catalog entry references (left by a crash between writing a blob and its catalog entry).
    ///
    /// Where only this process reads the blobs (the data directory's files, or a store no other node shares), a blob
    /// unreferenced, older than `age` and held by no reader here is no one's, and one pass deletes it: a server
    /// restarted more often than the passes' interval still reclaims what its crashes left. Where other nodes read
    /// (a retirement grace period), a blob is deleted only when two passes in a row found it so: one an overwrite
    /// retired a moment ago, which readers on other nodes may still stream during the grace period, is at most a
    /// suspect in the first pass, and passes are an interval (an hour by default) apart.
    package func collectOrphanBlobs(olderThan age: TimeInterval = 3600) async throws -> Int {
        // A queued blob is the queue's to delete, when it is due and read nowhere (``holdReadBlobs(now:)``).
        let referenced = try await catalog.referencedBlobs()
            .union(catalog.dueBlobDeletions(now: .distantFuture, limit: .max))
        let unreferenced = Set(
            try await files.blobs(olderThan: Date().addingTimeInterval(-age)).filter {
                !referenced.contains($0) && !files.leases.isLeased($0)
            })
        let onlyReadHere = (files.retirementGrace ?? .zero) == .zero
        let removed = orphanSuspects.withLockedValue { suspects in
            defer { suspects = onlyReadHere ? [] : unreferenced }
            return Array(onlyReadHere ? unreferenced : unreferenced.intersection(suspects))
        }
        let failed = Set(await files.remove(removed))
        return removed.filter { !failed.contains($0) }.count
    }

    // MARK: Retired blobs

    /// Deletes blobs an object or part referenced until now (replaced, deleted, aborted), even when the calling task
    /// is cancelled.
    ///
    /// Files (the embedded store) go before this returns, or when their last reader in this process lets go. Blobs in
    /// an S3-compatible store go before this returns when no reader here holds them and no other node can (no grace
    /// period); otherwise they are queued in the catalog — durably, due after the grace period — and
    /// ``deleteQueuedBlobs(now:limit:)`` deletes them once due and no longer read here. So is a blob the store did
    /// not delete when asked. A blob that can be neither deleted nor queued stays unreferenced, for the orphan
    /// collection; that is logged.
    func retire(_ blobs: [String]) async {
        guard !blobs.isEmpty else { return }
        guard let grace = files.retirementGrace else {
            await discardUnreferenced(files.leases.delete(blobs))
            return
        }
        var waiting: [String] = []
        if grace == .zero {
            // Only this process reads: what no reader here holds goes now.
            var unread: [String] = []
            for blob in blobs {
                if files.leases.isLeased(blob) { waiting.append(blob) } else { unread.append(blob) }
            }
            waiting += await removeIgnoringCancellation(unread)
        } else {
            waiting = blobs
        }
        guard !waiting.isEmpty else { return }
        await queueForDeletion(waiting, dueAt: Date().addingTimeInterval(grace.timeInterval))
    }

    /// Deletes blobs nothing has referenced (a write that failed, or lost its race), even when the calling task is
    /// cancelled; what the storage could not delete is left for the orphan collection, and logged.
    func discardUnreferenced(_ blobs: [String]) async {
        let failed = await removeIgnoringCancellation(blobs)
        guard !failed.isEmpty else { return }
        logger.warning(
            "unreferenced blobs not deleted; the orphan collection removes them", metadata: ["ferry.blobs": "\(failed.count)"])
    }

    /// After a catalog write of a record referencing `blobs` failed with `error`: deletes them when the write surely
    /// did not happen. When the catalog became unavailable during the write, its commit may have landed: they are left
    /// for the orphan collection, which removes only blobs no record references.
    func discardUnlessRecorded(_ blobs: [String], after error: any Error) async {
        guard (error as? FerryDomainError)?.code == .storeUnavailable else {
            await discardUnreferenced(blobs)
            return
        }
        logger.warning(
            "catalog write of unknown outcome; its blobs are left for the orphan collection",
            metadata: ["ferry.blobs": "\(blobs.count)"])
    }

    /// Deletes blobs, even when the calling task is cancelled; returns those the storage did not delete.
    private func removeIgnoringCancellation(_ blobs: [String]) async -> [String] {
        guard !blobs.isEmpty else { return [] }
        let files = self.files
        return await whileIgnoringCancellation { await files.remove(blobs) }
    }

    /// Queues blobs in the catalog for deletion at `due`, even when the calling task is cancelled; what cannot be
    /// queued is left for the orphan collection, and logged.
    private func queueForDeletion(_ blobs: [String], dueAt due: Date) async {
        let catalog = self.catalog
        do {
            try await whileIgnoringCancellation { try await catalog.queueBlobDeletions(blobs, dueAt: due) }
        } catch {
            logger.warning(
                "unreferenced blobs not queued for deletion; the orphan collection removes them",
                metadata: ["ferry.blobs": "\(blobs.count)", "error": .string(String(describing: error))])
        }
    }

    /// Deletes the queued blobs that are due and no reader here holds, up to `limit`, and takes them off the queue;
    /// returns how many. A blob still read here, or one the storage did not delete, is looked at again
    /// ``queuedBlobRetryDelay`` later, behind the others.
    @discardableResult
    package func deleteQueuedBlobs(now: Date = Date(), limit: Int = 1000) async throws -> Int {
        let due = try await catalog.dueBlobDeletions(now: now, limit: limit)
        guard !due.isEmpty else { return 0 }
        let read = due.filter { files.leases.isLeased($0) }
        let unread = due.filter { !files.leases.isLeased($0) }
        let failed = await files.remove(unread)
        let failedSet = Set(failed)
        let deleted = unread.filter { !failedSet.contains($0) }
        if !deleted.isEmpty { try await catalog.removeBlobDeletions(deleted) }
        if !(read + failed).isEmpty {
            try await catalog.queueBlobDeletions(read + failed, dueAt: now.addingTimeInterval(Self.queuedBlobRetryDelay))
        }
        return deleted.count
    }

    /// Keeps the queued blobs that readers here still stream from being deleted for another grace period from `now`,
    /// where other nodes share the blobs: each node's collector does this every 30 s, in a pass of its own, so a blob
    /// an overwrite retired goes only once no node has read it for the grace period, however long a download takes.
    package func holdReadBlobs(now: Date = Date()) async throws {
        guard let grace = files.retirementGrace, grace > .zero else { return }
        let read = files.leases.leasedBlobs
        for start in stride(from: 0, to: read.count, by: 1000) {
            try await catalog.postponeBlobDeletions(
                Array(read[start..<min(start + 1000, read.count)]), until: now.addingTimeInterval(grace.timeInterval))
        }
    }

    /// How long a queued blob that could not be deleted waits before it is tried again.
    static let queuedBlobRetryDelay: TimeInterval = 60

    // MARK: Helpers

    // `@unchecked Sendable`: AsyncThrowingStream(unfolding:) calls its closure for one consumer, one call at a time,
    // so the iterator is never used concurrently.
    final class IteratorBox: @unchecked Sendable {
        var iterator: BlobByteSequence.AsyncIterator
        /// Keeps the blobs from deletion until the body is read or dropped.
        let lease: BlobLease
        /// Bytes read ahead, handed out first.
        var first: ByteBuffer?
        init(_ iterator: BlobByteSequence.AsyncIterator, lease: BlobLease, first: ByteBuffer?) {
            self.iterator = iterator
            self.lease = lease
            self.first = first
        }
        func next() async throws -> ByteBuffer? {
            if let buffer = first {
                first = nil
                return buffer
            }
            return try await iterator.next()
        }
    }

    static let noSuchBucket = FerryDomainError(.bucketNotFound, "The specified bucket does not exist.")
    static let noSuchKey = FerryDomainError(.objectNotFound, "The specified key does not exist.")
    static let preconditionFailed = FerryDomainError(
        .preconditionFailed, "At least one of the pre-conditions you specified did not hold")
    /// The S3 error of a write whose condition did not hold.
    static func refusal(_ failure: ObjectWriteCondition.Failure) -> FerryDomainError {
        switch failure {
        case .noSuchKey: noSuchKey
        case .preconditionFailed: preconditionFailed
        case .fileStored(let owner): .fileStored(owner: owner)
        }
    }
    package static let noSuchUpload = FerryDomainError(
        .uploadNotFound,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )
    static func invalidPart(_ number: Int) -> FerryDomainError {
        FerryDomainError(
            .partNotFound,
            "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
            details: ["PartNumber": String(number)])
    }

}

extension CatalogObjectStore: CollectableObjectStore {}

extension PartInfo {
    /// A part made now from a body's digests (its ETag the hex MD5, its checksums base64) stored in `segments`.
    init(number: Int, digests: BodyDigests, segments: [BlobSegment]) {
        self.init(
            number: number, size: digests.size, etag: Hex.encode(digests.md5),
            checksums: digests.checksums.mapValues { Data($0).base64EncodedString() }, segments: segments,
            lastModified: Date())
    }
}
