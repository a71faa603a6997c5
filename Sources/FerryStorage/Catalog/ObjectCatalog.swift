import Foundation

/// The metadata of the object store: buckets, objects (with the blobs that hold their bytes), multipart uploads and
/// their parts, remembered completions.
///
/// ``SQLiteCatalog`` keeps it in the data directory; ``PostgresCatalog`` keeps it for several nodes that share an
/// S3-compatible blob store. Every write that depends on what is there (conditions, part replacement, completion) is
/// one transaction, so two nodes writing the same key or upload at once serialize. Keys compare byte-wise, the order
/// S3 lists them in.
protocol ObjectCatalog: ResumableUploadCatalog {
    /// Inserts a bucket; false when it exists already.
    func insertBucket(_ name: String, at date: Date) async throws -> Bool
    /// The bucket, or nil.
    func bucket(_ name: String) async throws -> BucketInfo?
    /// All buckets by name.
    func buckets() async throws -> [BucketInfo]
    /// Deletes a bucket without objects; multipart and resumable uploads still in progress in it are aborted.
    func deleteBucket(_ name: String) async throws -> CatalogDeleteBucketOutcome
    /// The bucket's configuration document of that kind, or nil.
    func bucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind) async throws -> String?
    /// Sets (nil: removes) the bucket's configuration document of that kind; false when there is no such bucket.
    func setBucketConfiguration(_ bucket: String, _ kind: BucketConfigurationKind, _ document: String?) async throws -> Bool
    /// Every bucket that has a configuration document of that kind, with the document, by bucket name.
    func bucketConfigurations(_ kind: BucketConfigurationKind) async throws -> [(bucket: String, document: String)]

    /// The object, or nil.
    func object(bucket: String, key: String) async throws -> ObjectInfo?
    /// Inserts or replaces an object when `condition` holds; returns the blobs of the object it replaced. With a
    /// `byteLimit`, throws `quotaExceeded` (storing nothing) when the object would take its owner's stored bytes past
    /// it, checked in the same transaction.
    func putObject(_ object: ObjectInfo, condition: ObjectWriteCondition, byteLimit: Int64?) async throws
        -> CatalogPutOutcome
    /// Deletes an object when `condition` holds; returns its blobs (none when there was no object).
    func deleteObject(bucket: String, key: String, condition: ObjectWriteCondition) async throws -> CatalogPutOutcome
    /// Replaces an object's tags when its ETag is still `etag`; false when it changed or is gone.
    func setTags(_ tags: [ObjectTag], bucket: String, key: String, etag: String) async throws -> Bool
    /// Up to `limit` objects with keys after `after` (exclusive) and at or after `from`, in key order.
    func objects(bucket: String, after: String?, from: String, limit: Int) async throws -> [ObjectInfo]

    /// Records a new upload; false when the bucket does not exist. With an `uploadLimit`, throws `quotaExceeded` when
    /// the upload's owner has that many in progress already, checked in the same transaction.
    func insertUpload(_ upload: MultipartUploadInfo, uploadLimit: Int?) async throws -> Bool
    /// The upload, or nil.
    func upload(_ uploadId: String) async throws -> MultipartUploadInfo?
    /// Uploads of a bucket under `prefix` in (key, upload id) order after the markers, up to `limit`: with an empty
    /// `uploadIdMarker`, only keys after `keyMarker` (as S3 reads a key marker alone).
    func uploads(bucket: String, prefix: String, keyMarker: String, uploadIdMarker: String, limit: Int) async throws
        -> [MultipartUploadInfo]
    /// S3 multipart uploads initiated before `date`, oldest first: not those of resumable uploads, which end at their
    /// own expiry (``ResumableUpload/expiresAt``) or, unclaimed, by ``unclaimedResumableMultipartUploads(initiatedBefore:limit:)``.
    func uploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo]
    /// Records a part, replacing one with the same number; returns the replaced part's blobs. With a `byteLimit`,
    /// throws `quotaExceeded` (recording nothing) when the part would take the upload's owner past it. The parts of
    /// the owner's uploads named in `freeing` (a tus final upload's partial uploads, which end with it and whose bytes
    /// its parts are linked copies of) are not counted, while they are recorded: those bytes count once.
    func putPart(_ part: PartInfo, uploadId: String, byteLimit: Int64?, freeing: [String]) async throws
        -> CatalogPartOutcome
    /// Parts numbered above `marker`, ascending, up to `limit` (all when nil).
    func parts(uploadId: String, after marker: Int, limit: Int?) async throws -> [PartInfo]
    /// Removes an upload and its parts, with the unfinished resumable upload whose bytes it held; returns the parts'
    /// blobs (nil when there was no such upload).
    func deleteUpload(_ uploadId: String) async throws -> [String]?
    /// Turns an upload into an object at once: the object takes the listed parts' blobs, the upload and its other
    /// parts go, and the completion is remembered for a retried Complete.
    func completeUpload(
        _ uploadId: String, object: ObjectInfo, expectedParts: [PartInfo], condition: ObjectWriteCondition, now: Date
    ) async throws -> CatalogCompleteOutcome
    /// A remembered completion, or nil.
    func completedUpload(_ uploadId: String) async throws -> CompletedUpload?
    /// Forgets completions older than `date`; returns how many.
    func forgetCompletedUploads(before date: Date) async throws -> Int

    /// What `owner` holds: the bytes of its objects and of its uploads' parts, and its uploads in progress.
    func usage(owner: String) async throws -> StorageUsage

    /// How many multipart uploads are in progress (begun, neither completed nor aborted), of every owner, resumable
    /// uploads' included.
    func uploadCount() async throws -> Int

    /// Every blob an object or part references.
    func referencedBlobs() async throws -> Set<String>

    /// Whether other nodes share this catalog (and so the blobs it references): their readers are out of this
    /// process's sight, and one node at a time collects what the nodes share.
    var isShared: Bool { get }
    /// Queues blobs nothing references any more for deletion at `date` or later, durably; a blob queued already keeps
    /// the later of its two times.
    func queueBlobDeletions(_ blobs: [String], dueAt date: Date) async throws
    /// Up to `limit` queued blobs due by `now`, earliest first.
    func dueBlobDeletions(now: Date, limit: Int) async throws -> [String]
    /// Takes deleted blobs off the queue.
    func removeBlobDeletions(_ blobs: [String]) async throws
    /// Makes those of `blobs` that are queued due no earlier than `date` (a reader on some node still streams them);
    /// queues none of the others.
    func postponeBlobDeletions(_ blobs: [String], until date: Date) async throws
}

/// A configuration a bucket may hold, as its S3 XML document.
public enum BucketConfigurationKind: String, Sendable, CaseIterable {
    /// `CORSConfiguration` (Put/GetBucketCors).
    case cors
    /// `LifecycleConfiguration` (Put/GetBucketLifecycleConfiguration).
    case lifecycle
}

/// How deleting a bucket ended.
enum CatalogDeleteBucketOutcome: Sendable {
    /// Deleted, with the blobs of the multipart uploads it still had and how many they were (aborted with it, as S3
    /// does).
    case deleted(abortedBlobs: [String], abortedUploads: Int)
    case missing
    case notEmpty
}

/// How writing or deleting an object ended.
enum CatalogPutOutcome: Sendable {
    case stored(replaced: [BlobSegment])
    /// The key holds the file of a video or image (``ObjectWriteCondition/fileOwner``) with the write's ETag: it is
    /// kept as stored, and nothing was written.
    case kept
    case noSuchBucket
    /// The request's condition did not hold for the current object.
    case refused(ObjectWriteCondition.Failure)
}

/// How recording a part ended.
enum CatalogPartOutcome: Sendable {
    case stored(replaced: [String])
    case noSuchUpload
}

/// How completing an upload ended.
enum CatalogCompleteOutcome: Sendable {
    case completed(replaced: [BlobSegment], unused: [String])
    /// As ``CatalogPutOutcome/kept``: the upload is completed (and remembered) without becoming the object; all its
    /// parts' blobs are `unused`.
    case kept(unused: [String])
    case noSuchUpload
    /// A listed part was replaced after it was validated.
    case changed
    /// The request's condition did not hold for the current object.
    case refused(ObjectWriteCondition.Failure)
}
