import CFerryChecksums
import Crypto

/// Incremental computation of one checksum over a stream of bytes.
///
/// A value type: copying a `Checksummer` forks the computation.
///
/// ```swift
/// var checksummer = Checksummer(.crc32c)
/// checksummer.update(firstChunk)
/// checksummer.update(secondChunk)
/// let header = checksummer.finalizeBase64()   // value for x-amz-checksum-crc32c
/// ```
///
/// CRCs run on hardware kernels when the CPU has them (see
/// ``CRCAcceleration``); SHA-1, SHA-256 and MD5 come from swift-crypto.
public struct Checksummer: @unchecked Sendable {
    // @unchecked: the CRC states are plain integers; the swift-crypto hash
    // function structs (not annotated Sendable in swift-crypto 3.x) are
    // copy-on-write values whose shared storage is never mutated while
    // shared, so concurrent use of distinct copies is safe.

    private enum State {
        case crc32(UInt32)
        case crc32c(UInt32)
        case crc64nvme(UInt64)
        case sha1(Insecure.SHA1)
        case sha256(SHA256)
        case md5(Insecure.MD5)
        /// Only present transiently inside `update`, so a hash function
        /// struct is uniquely referenced while it is mutated.
        case moving
    }

    /// The algorithm being computed.
    public let algorithm: ChecksumAlgorithm

    /// The CPU features the CRC kernels may use.
    public let acceleration: CRCAcceleration

    /// Total number of bytes passed to `update` so far.
    public private(set) var byteCount: UInt64 = 0

    private var state: State

    /// Starts a checksum computation using the fastest available kernels.
    public init(_ algorithm: ChecksumAlgorithm) {
        self.init(algorithm, acceleration: .automatic)
    }

    /// Starts a checksum computation whose CRC kernels may only use
    /// `acceleration` (``CRCAcceleration/none`` forces the portable code).
    /// Ignored for SHA-1, SHA-256 and MD5.
    public init(_ algorithm: ChecksumAlgorithm, acceleration: CRCAcceleration) {
        self.algorithm = algorithm
        self.acceleration = acceleration
        switch algorithm.kind {
        case .crc32: state = .crc32(0)
        case .crc32c: state = .crc32c(0)
        case .crc64nvme: state = .crc64nvme(0)
        case .sha1: state = .sha1(Insecure.SHA1())
        case .sha256: state = .sha256(SHA256())
        case .md5: state = .md5(Insecure.MD5())
        }
    }

    /// Feeds the bytes in `bytes`.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        byteCount &+= UInt64(bytes.count)
        let features = acceleration.rawValue
        switch state {
        case .crc32(let crc):
            state = .crc32(ferry_crc32_update_with_features(crc, bytes.baseAddress, bytes.count, features))
        case .crc32c(let crc):
            state = .crc32c(ferry_crc32c_update_with_features(crc, bytes.baseAddress, bytes.count, features))
        case .crc64nvme(let crc):
            state = .crc64nvme(ferry_crc64nvme_update_with_features(crc, bytes.baseAddress, bytes.count, features))
        case .sha1(var hash):
            state = .moving
            hash.update(bufferPointer: bytes)
            state = .sha1(hash)
        case .sha256(var hash):
            state = .moving
            hash.update(bufferPointer: bytes)
            state = .sha256(hash)
        case .md5(var hash):
            state = .moving
            hash.update(bufferPointer: bytes)
            state = .md5(hash)
        case .moving:
            preconditionFailure("Checksummer state is being updated")
        }
    }

    /// Feeds a collection of bytes (`[UInt8]`, `ArraySlice<UInt8>`, `Data`,
    /// `String.UTF8View`, …). Contiguous collections are hashed in place;
    /// others are copied through a bounded buffer.
    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.update(UnsafeRawBufferPointer(buffer))
        }
        if done != nil { return }
        let chunkSize = 64 * 1024
        var chunk: [UInt8] = []
        chunk.reserveCapacity(Swift.min(chunkSize, bytes.count))
        for byte in bytes {
            chunk.append(byte)
            if chunk.count == chunkSize {
                chunk.withUnsafeBytes { update($0) }
                chunk.removeAll(keepingCapacity: true)
            }
        }
        if !chunk.isEmpty {
            chunk.withUnsafeBytes { update($0) }
        }
    }

    /// The checksum of everything fed so far, as binary digest bytes
    /// (``ChecksumAlgorithm/digestLength`` of them). CRCs are big-endian,
    /// the byte order S3 base64-encodes. Does not end the computation: more
    /// bytes may be fed afterwards.
    public func finalize() -> [UInt8] {
        switch state {
        case .crc32(let crc), .crc32c(let crc):
            return Checksum.bigEndianBytes(crc)
        case .crc64nvme(let crc):
            return Checksum.bigEndianBytes(crc)
        case .sha1(let hash):
            return Array(hash.finalize())
        case .sha256(let hash):
            return Array(hash.finalize())
        case .md5(let hash):
            return Array(hash.finalize())
        case .moving:
            preconditionFailure("Checksummer state is being updated")
        }
    }

    /// ``finalize()`` encoded as standard base64 with padding, the form used
    /// in `x-amz-checksum-*` and `Content-MD5` headers.
    public func finalizeBase64() -> String {
        Checksum.base64(finalize())
    }
}
