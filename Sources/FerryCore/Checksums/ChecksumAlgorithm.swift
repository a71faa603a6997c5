/// A checksum (or digest) algorithm understood by Ferry and by S3.
///
/// The five `x-amz-checksum-*` algorithms (CRC32, CRC32C, CRC64NVME, SHA1,
/// SHA256) are listed in ``s3Algorithms``; MD5 is included for `Content-MD5`
/// and for computing ETags.
///
/// ```swift
/// let algorithm = ChecksumAlgorithm(name: "crc64nvme")   // .crc64nvme
/// algorithm?.headerName                                  // "x-amz-checksum-crc64nvme"
/// ```
public struct ChecksumAlgorithm: Hashable, Sendable, CustomStringConvertible, CaseIterable {
    enum Kind: UInt8, Hashable, Sendable {
        case crc32, crc32c, crc64nvme, sha1, sha256, md5
    }

    let kind: Kind

    private init(_ kind: Kind) {
        self.kind = kind
    }

    /// CRC-32 as used by zlib, gzip and S3 (`CRC32`): reflected polynomial
    /// 0xEDB88320, 4-byte digest.
    public static let crc32 = ChecksumAlgorithm(.crc32)
    /// CRC-32C (Castagnoli, S3 `CRC32C`): reflected polynomial 0x82F63B78,
    /// 4-byte digest.
    public static let crc32c = ChecksumAlgorithm(.crc32c)
    /// CRC-64/NVME (S3 `CRC64NVME`): reflected polynomial 0x9A6C9329AC4BC9B5,
    /// 8-byte digest.
    public static let crc64nvme = ChecksumAlgorithm(.crc64nvme)
    /// SHA-1 (S3 `SHA1`), 20-byte digest.
    public static let sha1 = ChecksumAlgorithm(.sha1)
    /// SHA-256 (S3 `SHA256`), 32-byte digest.
    public static let sha256 = ChecksumAlgorithm(.sha256)
    /// MD5, 16-byte digest. Used for `Content-MD5` and ETags, not an
    /// `x-amz-checksum-*` algorithm.
    public static let md5 = ChecksumAlgorithm(.md5)

    /// The algorithms S3 accepts in `x-amz-checksum-algorithm` /
    /// `x-amz-checksum-*`: CRC32, CRC32C, CRC64NVME, SHA1 and SHA256.
    public static let s3Algorithms: [ChecksumAlgorithm] = [.crc32, .crc32c, .crc64nvme, .sha1, .sha256]

    /// Every algorithm: the S3 ones followed by MD5.
    public static let allCases: [ChecksumAlgorithm] = s3Algorithms + [.md5]

    /// Parses an S3 algorithm name ("CRC32", "CRC32C", "CRC64NVME", "SHA1",
    /// "SHA256") or "MD5", ignoring ASCII case and surrounding whitespace.
    /// Returns `nil` for anything else.
    public init?(name: String) {
        switch Self.asciiLowercased(name, trimmingWhitespace: true) {
        case "crc32": self = .crc32
        case "crc32c": self = .crc32c
        case "crc64nvme": self = .crc64nvme
        case "sha1": self = .sha1
        case "sha256": self = .sha256
        case "md5": self = .md5
        default: return nil
        }
    }

    /// Parses a checksum header name ("x-amz-checksum-crc32", …,
    /// "content-md5"), ignoring ASCII case. Returns `nil` for other headers.
    public init?(headerName: String) {
        let lower = Self.asciiLowercased(headerName, trimmingWhitespace: false)
        guard let algorithm = Self.allCases.first(where: { $0.headerName == lower }) else { return nil }
        self = algorithm
    }

    /// The S3 spelling of the algorithm name: "CRC32", "CRC32C", "CRC64NVME",
    /// "SHA1", "SHA256" (and "MD5").
    public var s3Name: String {
        switch kind {
        case .crc32: return "CRC32"
        case .crc32c: return "CRC32C"
        case .crc64nvme: return "CRC64NVME"
        case .sha1: return "SHA1"
        case .sha256: return "SHA256"
        case .md5: return "MD5"
        }
    }

    /// The (lower-case) HTTP header carrying this checksum:
    /// "x-amz-checksum-crc32", …, and "content-md5" for MD5.
    public var headerName: String {
        switch kind {
        case .md5: return "content-md5"
        default: return "x-amz-checksum-" + s3Name.lowercased()
        }
    }

    /// Length of the binary digest in bytes (4, 4, 8, 20, 32, 16).
    public var digestLength: Int {
        switch kind {
        case .crc32, .crc32c: return 4
        case .crc64nvme: return 8
        case .sha1: return 20
        case .sha256: return 32
        case .md5: return 16
        }
    }

    /// Whether checksums of two pieces can be combined into the checksum of
    /// their concatenation (true for the CRCs; see ``Checksum/combine(_:_:_:lengthOfB:)``).
    /// S3 calls such checksums `FULL_OBJECT`-capable.
    public var supportsCombine: Bool {
        switch kind {
        case .crc32, .crc32c, .crc64nvme: return true
        case .sha1, .sha256, .md5: return false
        }
    }

    /// ASCII-only lower-casing (names are ASCII; other characters are kept
    /// as they are, so they never match).
    private static func asciiLowercased(_ string: String, trimmingWhitespace: Bool) -> String {
        var bytes = Array(string.utf8)
        if trimmingWhitespace {
            while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
            let leading = bytes.prefix { $0 == 0x20 || $0 == 0x09 }.count
            bytes.removeFirst(leading)
        }
        for index in bytes.indices where bytes[index] >= 0x41 && bytes[index] <= 0x5A {
            bytes[index] += 0x20
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The S3 name, e.g. "CRC32C".
    public var description: String { s3Name }
}
