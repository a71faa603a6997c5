import FerryCore
import Foundation
import NIOCore

/// The object was replaced or deleted between looking it up and reading it.
public struct ObjectChangedError: Error, Sendable {
    /// Creates the error.
    public init() {}
}

/// When a write (or delete) may replace what is stored at a key: S3's conditional writes (`If-Match`,
/// `If-None-Match`) and deletes (`If-Match`, `x-amz-if-match-last-modified-time`, `x-amz-if-match-size`).
public struct ObjectWriteCondition: Sendable, Hashable {
    /// ETags (unquoted) one of which the current object must have, or `*` for any; nil for no such condition.
    public var ifMatch: [String]?
    /// ETags (unquoted) the current object must not have, or `*` for "no object"; nil for no such condition.
    public var ifNoneMatch: [String]?
    /// The last-modified time (whole seconds) the current object must have.
    public var ifMatchLastModified: Date?
    /// The size the current object must have.
    public var ifMatchSize: Int64?
    /// The tags the current object must have (in any order): a lifecycle rule's delete of an object whose tags
    /// changed since it was judged does not hold.
    public var ifMatchTags: [ObjectTag]?
    /// Set for the one file of a video or image (`Video <id>`, `Image <id>`): the object is written only where none is
    /// or over one of the same ETag (the same bytes again), so that of writers racing to make the file one makes it
    /// and the others are refused (``Failure/fileStored(owner:)``).
    public var fileOwner: String?

    /// Creates a condition.
    public init(
        ifMatch: [String]? = nil, ifNoneMatch: [String]? = nil, ifMatchLastModified: Date? = nil,
        ifMatchSize: Int64? = nil, ifMatchTags: [ObjectTag]? = nil, fileOwner: String? = nil
    ) {
        self.ifMatch = ifMatch
        self.ifNoneMatch = ifNoneMatch
        self.ifMatchLastModified = ifMatchLastModified
        self.ifMatchSize = ifMatchSize
        self.ifMatchTags = ifMatchTags
        self.fileOwner = fileOwner
    }

    /// No condition.
    public static let none = ObjectWriteCondition()
    /// Only when no object has the key (`If-None-Match: *`).
    public static let absent = ObjectWriteCondition(ifNoneMatch: ["*"])

    /// Whether there is any condition.
    public var isEmpty: Bool { self == .none }

    /// Why a condition does not hold.
    public enum Failure: Sendable, Hashable {
        /// 412 PreconditionFailed.
        case preconditionFailed
        /// `If-Match` named an object that does not exist: 404 NoSuchKey.
        case noSuchKey
        /// ``fileOwner``'s file holds other bytes: 403 AccessDenied.
        case fileStored(owner: String)
    }

    /// Evaluates the condition against the current object (nil when the key is free; `tags` read only for
    /// ``ifMatchTags``) for a write of an object with the ETag `writing` (nil for a delete); nil when it holds.
    public func evaluate(
        etag: String?, lastModified: Date?, size: Int64?, tags: () throws -> [ObjectTag]? = { nil },
        writing: String? = nil
    ) rethrows -> Failure? {
        if let ifMatch {
            guard let etag else { return .noSuchKey }
            if !ifMatch.contains("*") && !ifMatch.contains(etag) { return .preconditionFailed }
        }
        if let ifNoneMatch, let etag, ifNoneMatch.contains("*") || ifNoneMatch.contains(etag) {
            return .preconditionFailed
        }
        if let ifMatchLastModified {
            guard let lastModified else { return .noSuchKey }
            if lastModified.timeIntervalSince1970.rounded(.down) != ifMatchLastModified.timeIntervalSince1970.rounded(.down) {
                return .preconditionFailed
            }
        }
        if let ifMatchSize {
            guard let size else { return .noSuchKey }
            if size != ifMatchSize { return .preconditionFailed }
        }
        if let ifMatchTags {
            guard let tags = try tags() else { return .noSuchKey }
            if Set(tags) != Set(ifMatchTags) || tags.count != ifMatchTags.count { return .preconditionFailed }
        }
        if let fileOwner, let etag, etag != writing { return .fileStored(owner: fileOwner) }
        return nil
    }

    /// The ETags of an `If-Match` / `If-None-Match` header: comma-separated, quotes removed. Weak ones (`W/"…"`)
    /// match only where RFC 9110 compares weakly (`If-None-Match`, `weak`); a strong comparison (`If-Match`) drops
    /// them, so an `If-Match` of weak ETags alone matches nothing.
    public static func etags(_ header: String, weak: Bool = false) -> [String] {
        header.split(separator: ",").compactMap {
            var tag = $0.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") {
                guard weak else { return nil }
                tag.removeFirst(2)
            }
            return tag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }.filter { !$0.isEmpty }
    }
}

/// Checks a body once it has been fully received, before it becomes visible; throws an `S3Error` to reject it.
public typealias BodyVerifier = @Sendable (BodyDigests) throws -> Void

/// The storage behind the object API: buckets, objects and multipart uploads with S3 semantics.
///
/// Implementations throw `S3Error` for everything a client can cause (`NoSuchBucket`, `InvalidPart`, …). A write
/// becomes visible only when complete and verified; a failed or cancelled write leaves nothing behind.
public protocol ObjectStore: Sendable {
    /// Creates a bucket; `BucketAlreadyOwnedByYou` when it exists.
    func createBucket(_ name: String) async throws
    /// The bucket; `NoSuchBucket` when absent.
    func bucket(_ name: String) async throws -> BucketInfo
    /// Deletes a bucket without objects, aborting its unfinished multipart uploads; `BucketNotEmpty` or
    /// `NoSuchBucket`.
    func deleteBucket(_ name: String) async throws
    /// All buckets by name.
    func listBuckets() async throws -> [BucketInfo]
    /// The bucket's configuration of that kind (its S3 XML document), nil when it has none; `NoSuchBucket` when
    /// absent.
    func bucketConfiguration(_ name: String, _ kind: BucketConfigurationKind) async throws -> String?
    /// Sets the bucket's configuration of that kind, or removes it with nil; `NoSuchBucket` when absent.
    func setBucketConfiguration(_ name: String, _ kind: BucketConfigurationKind, _ document: String?) async throws
    /// One page of objects, with common prefixes rolled up at `delimiter`.
    func listObjects(bucket: String, prefix: String, delimiter: String?, startAfter: String?, maxKeys: Int)
        async throws -> ObjectListing

    /// The object's catalog entry; `NoSuchKey` or `NoSuchBucket`.
    func object(bucket: String, key: String) async throws -> ObjectInfo
    /// The bytes (or a range of them) of the version `object` describes, read as the consumer asks; the version stays
    /// readable to the end even when the key is overwritten or deleted meanwhile. Throws ``ObjectChangedError`` when
    /// the key no longer holds that version when the read starts (look the object up again).
    func readObject(_ object: ObjectInfo, range: ClosedRange<Int64>?) async throws
        -> AsyncThrowingStream<ByteBuffer, any Error>
    /// Streams a body into a new object, computing MD5 and `checksums`; `verify` sees the digests before it is visible.
    /// The object replaces the current one only when `condition` holds (`PreconditionFailed` otherwise). With a
    /// `charge`, the object is its owner's and is refused (`quotaExceeded`, nothing stored) past its byte quota.
    func putObject<Body: AsyncSequence & Sendable>(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag], body: Body,
        checksums: [ChecksumAlgorithm], condition: ObjectWriteCondition, verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer
    /// Stores a copy of `source` at bucket/key with new attributes and tags, sharing the source's bytes where the
    /// store can (no bytes pass through the caller); with a `charge`, the copy is its owner's, within its quota.
    func copyObject(
        _ source: ObjectInfo, bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        condition: ObjectWriteCondition, charge: StorageCharge?
    ) async throws -> ObjectInfo
    /// Deletes an object when `condition` holds; deleting a missing key succeeds, as in S3.
    func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition) async throws
    /// Replaces the tags of the object whose ETag is `etag`; `NoSuchKey` when it is gone or was replaced meanwhile.
    func setObjectTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws

    /// Starts a multipart upload; with a `charge`, the upload (its parts, the object it makes) is its owner's, and is
    /// refused (`quotaExceeded`) when the owner has as many uploads in progress as its quota allows.
    func createMultipartUpload(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        checksumAlgorithm: ChecksumAlgorithm?, checksumType: String?, charge: StorageCharge?
    ) async throws -> MultipartUploadInfo
    /// The upload when it exists for that bucket and key; `NoSuchUpload` otherwise.
    func multipartUpload(_ uploadId: String, bucket: String, key: String) async throws -> MultipartUploadInfo
    /// Streams a part; a part with the same number is replaced. With a `charge` of the upload's owner, the part is
    /// refused (`quotaExceeded`, nothing stored) past the owner's byte quota.
    func uploadPart<Body: AsyncSequence & Sendable>(
        _ upload: MultipartUploadInfo, partNumber: Int, body: Body, checksums: [ChecksumAlgorithm],
        verify: BodyVerifier, charge: StorageCharge?
    ) async throws -> PartInfo where Body.Element == ByteBuffer
    /// Makes bytes of `source` (all, or `range`) part `partNumber` of the upload, computing its MD5 and `checksums`
    /// (and the upload's algorithm) and sharing the source's bytes where the store can; a `charge` as for
    /// ``uploadPart(_:partNumber:body:checksums:verify:charge:)``.
    func uploadPartCopy(
        _ upload: MultipartUploadInfo, partNumber: Int, source: ObjectInfo, range: ClosedRange<Int64>?,
        checksums: [ChecksumAlgorithm], charge: StorageCharge?
    ) async throws -> PartInfo
    /// A page of parts after `marker`.
    func listParts(_ upload: MultipartUploadInfo, after marker: Int, maxParts: Int) async throws
        -> (parts: [PartInfo], isTruncated: Bool)
    /// A page of uploads in progress, and of common prefixes with a delimiter.
    func listMultipartUploads(
        bucket: String, prefix: String, delimiter: String?, keyMarker: String, uploadIdMarker: String, maxUploads: Int
    ) async throws -> MultipartUploadListing
    /// Assembles the listed parts into the object, without copying their bytes, when `condition` holds.
    /// `fullObjectChecksums` are the object checksums the request declared (base64 by algorithm name); a value that
    /// does not match is `BadDigest`. `objectSize`, when declared, must be the parts' total.
    func completeMultipartUpload(
        _ upload: MultipartUploadInfo, parts: [CompleteMultipartUpload.Part], fullObjectChecksums: [String: String],
        objectSize: Int64?, condition: ObjectWriteCondition
    ) async throws -> ObjectInfo
    /// A completion remembered for a while (so a retried Complete gets its answer again), or nil.
    func completedUpload(_ uploadId: String) async throws -> CompletedUpload?
    /// Discards an upload and deletes its parts; `expired` when it is removed for its age (counted as expired, not
    /// aborted by its client).
    func abortMultipartUpload(_ upload: MultipartUploadInfo, expired: Bool) async throws
    /// Aborts S3 multipart uploads initiated before `date` (not resumable uploads' own, which expire when they said
    /// they would); returns how many.
    func abortMultipartUploads(initiatedBefore date: Date) async throws -> Int
    /// What the long-term key `owner` holds: the bytes its quota counts and its uploads in progress.
    func usage(owner: String) async throws -> StorageUsage
}

extension ObjectStore {
    /// Discards an upload its client aborts, and deletes its parts.
    public func abortMultipartUpload(_ upload: MultipartUploadInfo) async throws {
        try await abortMultipartUpload(upload, expired: false)
    }

    /// The object's catalog entry, or nil when it or its bucket does not exist.
    public func storedObject(bucket: String, key: String) async throws -> ObjectInfo? {
        do {
            return try await object(bucket: bucket, key: key)
        } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
            return nil
        }
    }

    /// What a Complete sent again for `uploadId` answers, when that upload completed already (remembered for a day)
    /// for `bucket`/`key` with the same `parts`: the completion's ETag, and the object while the key still holds that
    /// completion's version. Nil otherwise (the Complete is refused as its upload is gone).
    public func repeatedCompletion(
        _ uploadId: String, bucket: String, key: String, parts: [CompleteMultipartUpload.Part]
    ) async throws -> (etag: String, object: ObjectInfo?)? {
        guard let completed = try await completedUpload(uploadId),
            completed.bucket.isByteEqual(to: bucket), completed.key.isByteEqual(to: key)
        else { return nil }
        let asked = parts.map {
            CompletedUploadPart(
                number: $0.partNumber, etag: $0.eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")))
        }
        guard asked == completed.parts else { return nil }
        let object = try await storedObject(bucket: bucket, key: key)
        return (completed.etag, object?.etag == completed.etag ? object : nil)
    }

    /// Streams a body into a new object that counts against no access key's quota (see
    /// ``putObject(bucket:key:attributes:tags:body:checksums:condition:verify:charge:)``).
    public func putObject<Body: AsyncSequence & Sendable>(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag], body: Body,
        checksums: [ChecksumAlgorithm], condition: ObjectWriteCondition, verify: BodyVerifier
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer {
        try await putObject(
            bucket: bucket, key: key, attributes: attributes, tags: tags, body: body, checksums: checksums,
            condition: condition, verify: verify, charge: nil)
    }

    /// Starts a multipart upload that counts against no access key's quota.
    public func createMultipartUpload(
        bucket: String, key: String, attributes: ObjectAttributes, tags: [ObjectTag],
        checksumAlgorithm: ChecksumAlgorithm?, checksumType: String?
    ) async throws -> MultipartUploadInfo {
        try await createMultipartUpload(
            bucket: bucket, key: key, attributes: attributes, tags: tags, checksumAlgorithm: checksumAlgorithm,
            checksumType: checksumType, charge: nil)
    }

    /// Streams a part without a quota check.
    public func uploadPart<Body: AsyncSequence & Sendable>(
        _ upload: MultipartUploadInfo, partNumber: Int, body: Body, checksums: [ChecksumAlgorithm],
        verify: BodyVerifier
    ) async throws -> PartInfo where Body.Element == ByteBuffer {
        try await uploadPart(
            upload, partNumber: partNumber, body: body, checksums: checksums, verify: verify, charge: nil)
    }
}

/// What the collector (``UploadCollector``) asks of a store besides the object API: clearing away what no one
/// references any more.
package protocol CollectableObjectStore: ObjectStore {
    /// Whether other nodes share the store's catalog and bytes; then one node at a time collects.
    var isShared: Bool { get }
    /// Deletes bytes nothing references (left by a crash between writing them and recording them), once two passes
    /// in a row found them unreferenced and older than `age`; returns how many blobs went.
    func collectOrphanBlobs(olderThan age: TimeInterval) async throws -> Int
    /// Forgets completed multipart uploads older than `date` (a Complete retried after that answers NoSuchUpload);
    /// returns how many.
    func forgetCompletedUploads(before date: Date) async throws -> Int
    /// Deletes bytes queued for deletion (replaced or deleted objects' bytes kept for their readers) that are due and
    /// no longer read, up to `limit`; returns how many went.
    func deleteQueuedBlobs(now: Date, limit: Int) async throws -> Int
    /// Keeps queued bytes that readers here still stream from being deleted for another grace period from `now`
    /// (other nodes' queue passes included).
    func holdReadBlobs(now: Date) async throws
    /// Removes the resumable uploads that expired before `now`, with the bytes of those left unfinished; returns how
    /// many.
    func expireResumableUploads(now: Date) async throws -> Int
    /// Aborts the multipart uploads that hold bytes of resumable uploads no record owns any more (a crash between the
    /// two), initiated before `date`; returns how many.
    func abortUnclaimedResumableUploads(initiatedBefore date: Date) async throws -> Int
    /// Applies the buckets' lifecycle rules as of `now` (``BucketLifecycle``; `dayLength` shortens their days), but
    /// not those of the buckets in `skipping`, nor, with `settledOnly`, a configuration the last pass did not read.
    func applyLifecycle(now: Date, dayLength: TimeInterval?, skipping: Set<String>, settledOnly: Bool) async throws
        -> LifecycleOutcome
    /// Forgets the configurations the last lifecycle pass read: the next pass with `settledOnly` applies none.
    func forgetLifecycleReadings()
}
