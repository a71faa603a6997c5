import FerryCore
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Where a ``CatalogObjectStore`` keeps the bytes of objects and parts: immutable blobs with random names, which only
/// the catalog's entries make visible.
///
/// A body is written to a pending blob first; the store verifies its digests and then commits it (the pending blob
/// becomes a blob) or discards it. A blob is never changed once committed: an overwrite writes a new blob and the
/// catalog switches to it, so readers see the old version or the new one, never a mix. Blobs being read are leased
/// (``BlobLeases``), and their deletion waits for the last reader.
///
/// Two implementations: ``BlobFiles`` (files under the data directory, the embedded default) and ``S3BlobStorage``
/// (objects in a bucket of an S3-compatible store such as SeaweedFS, Ceph RGW or MinIO).
protocol BlobStorage: Sendable {
    /// The blobs being read right now.
    var leases: BlobLeases { get }

    /// How long a blob nothing references any more is kept for readers this process cannot see (other nodes sharing
    /// the catalog); nil when every reader is in this process, and a blob goes at once or when its last reader here
    /// lets go (``removeDetached(_:)``). A storage with a grace period (even zero) has its deletions that cannot
    /// happen at once queued in the catalog (``CatalogObjectStore/retire(_:)``).
    var retirementGrace: Duration? { get }

    /// Streams a body into a new pending blob, computing its MD5 and `checksums` as it passes; throws
    /// `EntityTooLarge` past `maxSize` bytes. On failure nothing is left behind.
    ///
    /// - Returns: the pending blob's handle, which the caller commits or discards, and the body's digests.
    func write<Body: AsyncSequence & Sendable>(
        _ body: Body, checksums: [ChecksumAlgorithm], maxSize: Int64
    ) async throws -> (tempPath: String, digests: BodyDigests) where Body.Element == ByteBuffer

    /// Makes a pending blob a blob; returns its name.
    func commit(tempPath: String) async throws -> String

    /// Deletes a pending blob.
    func discard(tempPath: String) async

    /// Gives the bytes of `blob` a second, new blob name, without passing them through this process where the
    /// storage can (a hard link, a server-side copy). Deleting either name leaves the other.
    func link(_ blob: String) async throws -> String

    /// Streams `length` bytes of `blob` from `offset`, read as the consumer asks for them.
    func bytes(of blob: String, offset: Int64, length: Int64) -> AsyncThrowingStream<ByteBuffer, any Error>

    /// Deletes blobs that no one reads and nothing references any more; a blob already gone counts as deleted.
    ///
    /// - Returns: the blobs it could not delete (they are still there).
    @discardableResult
    func remove(_ blobs: [String]) async -> [String]

    /// Deletes blobs whose last reader just let go, from code that cannot wait (a lease's release). Only a storage
    /// without a ``retirementGrace`` has deletions wait for readers in ``BlobLeases``, so only it is asked to.
    func removeDetached(_ blobs: [String])

    /// The blobs older than `cutoff`, whether referenced or not (the orphan collector compares them with the
    /// catalog).
    func blobs(olderThan cutoff: Date) async throws -> [String]

    /// Checks cheaply that the storage is there and answers (the status report's probe); throws what it met.
    func probe() async throws
}

extension BlobStorage {
    /// Holds `blobs` for a reader: none of them is deleted until the returned lease is released (or dropped).
    func lease(_ blobs: [String]) -> BlobLease {
        leases.acquire(blobs)
        return BlobLease(storage: self, blobs: blobs)
    }

    /// MD5 and `checksums` of bytes read from the store (a copied part), hashed on the thread pool as they arrive.
    func digest<Bytes: AsyncSequence>(_ bytes: Bytes, checksums algorithms: [ChecksumAlgorithm]) async throws
        -> BodyDigests where Bytes.Element == ByteBuffer
    {
        var hasher = MultiChecksummer([.md5] + algorithms.filter { $0 != .md5 })
        var size: Int64 = 0
        for try await buffer in bytes {
            size += Int64(buffer.readableBytes)
            let current = hasher
            hasher = try await NIOThreadPool.singleton.runIfActive {
                var next = current
                buffer.withUnsafeReadableBytes { next.update($0) }
                return next
            }
        }
        return BodyDigests(size: size, hasher: hasher, algorithms: algorithms)
    }
}

/// A reader's hold on some blobs; released explicitly or when dropped.
final class BlobLease: Sendable {
    private let storage: any BlobStorage
    private let blobs: [String]
    private let released = NIOLockedValueBox(false)

    init(storage: any BlobStorage, blobs: [String]) {
        self.storage = storage
        self.blobs = blobs
    }

    /// Lets the blobs go; a deletion that waited for this reader happens now.
    func release() {
        let first = released.withLockedValue { released in
            defer { released = true }
            return !released
        }
        guard first else { return }
        let ready = storage.leases.release(blobs)
        if !ready.isEmpty { storage.removeDetached(ready) }
    }

    deinit { release() }
}

/// The bytes of an object (or a range of it): its blobs' pieces one after the other, each streamed by the storage.
struct BlobByteSequence: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let storage: any BlobStorage
    let manifest: [BlobSegment]
    let range: ClosedRange<Int64>?
    /// Told of a read that failed (as operation `read` of layer `blobs`).
    var events: (any ServiceEvents)? = nil

    struct AsyncIterator: AsyncIteratorProtocol {
        let storage: any BlobStorage
        /// (blob, offset, length) still to read, in order.
        var pieces: ArraySlice<(blob: String, offset: Int64, length: Int64)>
        var current: AsyncThrowingStream<ByteBuffer, any Error>.AsyncIterator?
        let events: (any ServiceEvents)?

        mutating func next() async throws -> ByteBuffer? {
            while true {
                do {
                    if current != nil, let buffer = try await current!.next() { return buffer }
                } catch {
                    events.failed("blobs", "read", error)
                    throw error
                }
                guard let piece = pieces.popFirst() else { return nil }
                current = piece.length == 0
                    ? nil : storage.bytes(of: piece.blob, offset: piece.offset, length: piece.length).makeAsyncIterator()
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        var pieces: [(blob: String, offset: Int64, length: Int64)] = []
        var position: Int64 = 0
        let lower = range?.lowerBound ?? 0
        let upper = range.map { $0.upperBound + 1 } ?? Int64.max
        for segment in manifest {
            let start = Swift.max(lower, position)
            let end = Swift.min(upper, position + segment.size)
            if end > start {
                pieces.append((segment.blob, (segment.offset ?? 0) + start - position, end - start))
            }
            position += segment.size
        }
        return AsyncIterator(storage: storage, pieces: pieces[...], current: nil, events: events)
    }
}

extension BodyDigests {
    /// The digests `hasher` finished for a body of `size` bytes: its MD5 and the checksums of `algorithms`.
    init(size: Int64, hasher: MultiChecksummer, algorithms: [ChecksumAlgorithm]) {
        var checksums: [String: [UInt8]] = [:]
        for algorithm in algorithms where algorithm != .md5 { checksums[algorithm.s3Name] = hasher.finalize(algorithm) }
        self.init(size: size, md5: hasher.finalize(.md5) ?? [], checksums: checksums)
    }
}
