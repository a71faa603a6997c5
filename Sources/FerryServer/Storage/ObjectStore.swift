import FerryCore
import Foundation
import NIOCore

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
    /// Deletes an empty bucket; `BucketNotEmpty` or `NoSuchBucket`.
    func deleteBucket(_ name: String) async throws
    /// All buckets by name.
    func listBuckets() async throws -> [BucketInfo]
    /// One page of objects, with common prefixes rolled up at `delimiter`.
    func listObjects(bucket: String, prefix: String, delimiter: String?, startAfter: String?, maxKeys: Int)
        async throws -> ObjectListing

    /// The object's catalog entry; `NoSuchKey` or `NoSuchBucket`.
    func object(bucket: String, key: String) async throws -> ObjectInfo
    /// The object's bytes (or a range of them), read as the consumer asks.
    func readObject(_ object: ObjectInfo, range: ClosedRange<Int64>?) -> AsyncThrowingStream<ByteBuffer, any Error>
    /// Streams a body into a new object, computing MD5 and `checksums`; `verify` sees the digests before it is visible.
    func putObject<Body: AsyncSequence & Sendable>(
        bucket: String, key: String, attributes: ObjectAttributes, body: Body, checksums: [ChecksumAlgorithm],
        ifNoneMatch: Bool, verify: BodyVerifier
    ) async throws -> ObjectInfo where Body.Element == ByteBuffer
    /// Deletes an object; deleting a missing key succeeds, as in S3.
    func deleteObject(bucket: String, key: String) async throws

    /// Starts a multipart upload.
    func createMultipartUpload(
        bucket: String, key: String, attributes: ObjectAttributes, checksumAlgorithm: ChecksumAlgorithm?,
        checksumType: String?
    ) async throws -> MultipartUploadInfo
    /// The upload when it exists for that bucket and key; `NoSuchUpload` otherwise.
    func multipartUpload(_ uploadId: String, bucket: String, key: String) async throws -> MultipartUploadInfo
    /// Streams a part; a part with the same number is replaced.
    func uploadPart<Body: AsyncSequence & Sendable>(
        _ upload: MultipartUploadInfo, partNumber: Int, body: Body, checksums: [ChecksumAlgorithm],
        verify: BodyVerifier
    ) async throws -> PartInfo where Body.Element == ByteBuffer
    /// A page of parts after `marker`.
    func listParts(_ upload: MultipartUploadInfo, after marker: Int, maxParts: Int) async throws
        -> (parts: [PartInfo], isTruncated: Bool)
    /// A page of uploads in progress.
    func listMultipartUploads(
        bucket: String, prefix: String, keyMarker: String, uploadIdMarker: String, maxUploads: Int
    ) async throws -> (uploads: [MultipartUploadInfo], isTruncated: Bool)
    /// Assembles the listed parts into the object, without copying their bytes.
    func completeMultipartUpload(
        _ upload: MultipartUploadInfo, parts: [CompleteMultipartUpload.Part], fullObjectChecksum: String?
    ) async throws -> ObjectInfo
    /// Discards an upload and deletes its parts.
    func abortMultipartUpload(_ upload: MultipartUploadInfo) async throws
    /// Aborts uploads initiated before `date`; returns how many.
    func abortMultipartUploads(initiatedBefore date: Date) async throws -> Int
}
