/// Computes several checksums in one pass over the same bytes, e.g. the MD5
/// for an object's ETag together with the `x-amz-checksum-*` the client asked
/// for.
///
/// Large inputs are processed in cache-sized chunks, each chunk going through
/// every algorithm before the next is touched, so the data is read from
/// memory once.
///
/// ```swift
/// var hashes = MultiChecksummer([.md5, .crc64nvme])
/// hashes.update(body)
/// let etag = Hex.encode(hashes.finalize(.md5)!)
/// ```
public struct MultiChecksummer: Sendable {
    /// The algorithms computed, in the order given (duplicates removed).
    public let algorithms: [ChecksumAlgorithm]

    private var checksummers: [Checksummer]

    /// Bytes per chunk handed to each algorithm in turn (fits in L2).
    private static let chunkSize = 128 * 1024

    /// Creates a computation of each of `algorithms` (duplicates ignored);
    /// CRC kernels may use `acceleration`.
    public init(_ algorithms: [ChecksumAlgorithm], acceleration: CRCAcceleration = .automatic) {
        var unique: [ChecksumAlgorithm] = []
        for algorithm in algorithms where !unique.contains(algorithm) {
            unique.append(algorithm)
        }
        self.algorithms = unique
        self.checksummers = unique.map { Checksummer($0, acceleration: acceleration) }
    }

    /// Total number of bytes passed to `update` so far.
    public private(set) var byteCount: UInt64 = 0

    /// Feeds the bytes in `bytes` to every algorithm.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        byteCount &+= UInt64(bytes.count)
        if checksummers.count <= 1 || bytes.count <= Self.chunkSize {
            for index in checksummers.indices {
                checksummers[index].update(bytes)
            }
            return
        }
        var offset = 0
        while offset < bytes.count {
            let end = Swift.min(offset + Self.chunkSize, bytes.count)
            let chunk = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
            for index in checksummers.indices {
                checksummers[index].update(chunk)
            }
            offset = end
        }
    }

    /// Feeds a collection of bytes to every algorithm (in place when the
    /// collection has contiguous storage).
    public mutating func update<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.update(UnsafeRawBufferPointer(buffer))
        }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBytes { update($0) }
        }
    }

    /// The binary digest of `algorithm` so far, or `nil` if it is not being
    /// computed.
    public func finalize(_ algorithm: ChecksumAlgorithm) -> [UInt8]? {
        checksummers.first { $0.algorithm == algorithm }?.finalize()
    }

    /// The binary digests of all algorithms so far.
    public func finalize() -> [ChecksumAlgorithm: [UInt8]] {
        var result: [ChecksumAlgorithm: [UInt8]] = [:]
        for checksummer in checksummers {
            result[checksummer.algorithm] = checksummer.finalize()
        }
        return result
    }

    /// The base64-encoded digests of all algorithms so far.
    public func finalizeBase64() -> [ChecksumAlgorithm: String] {
        finalize().mapValues { Checksum.base64($0) }
    }
}
