import CFerryChecksums
import Crypto

/// Checksum helpers for S3 semantics: one-shot digests, CRC combination
/// (`FULL_OBJECT` checksums of multipart uploads), `COMPOSITE` checksums,
/// multipart ETags and the base64 encoding S3 uses.
public enum Checksum {
    /// The digest of `bytes` under `algorithm` (big-endian bytes for CRCs).
    public static func digest<C: Collection>(_ algorithm: ChecksumAlgorithm, of bytes: C) -> [UInt8]
    where C.Element == UInt8 {
        var checksummer = Checksummer(algorithm)
        checksummer.update(bytes)
        return checksummer.finalize()
    }

    /// Combines CRCs: given `a` = CRC(A), `b` = CRC(B) (binary big-endian
    /// digests) and the length of B in bytes, returns CRC(A‖B) without
    /// reading the data. Returns `nil` if the algorithm is not a CRC or a
    /// digest has the wrong length.
    public static func combine(_ algorithm: ChecksumAlgorithm, _ a: [UInt8], _ b: [UInt8], lengthOfB: UInt64)
        -> [UInt8]?
    {
        guard algorithm.supportsCombine, a.count == algorithm.digestLength, b.count == algorithm.digestLength
        else { return nil }
        switch algorithm.kind {
        case .crc32:
            let crc: UInt32 = ferry_crc32_combine(integer(a), integer(b), lengthOfB)
            return bigEndianBytes(crc)
        case .crc32c:
            let crc: UInt32 = ferry_crc32c_combine(integer(a), integer(b), lengthOfB)
            return bigEndianBytes(crc)
        case .crc64nvme:
            let crc: UInt64 = ferry_crc64nvme_combine(integer(a), integer(b), lengthOfB)
            return bigEndianBytes(crc)
        case .sha1, .sha256, .md5:
            return nil
        }
    }

    /// The `FULL_OBJECT` checksum of the concatenation of `parts`, each given
    /// by its CRC digest and its length in bytes (e.g. the parts of a
    /// multipart upload in part-number order). An empty list yields the CRC
    /// of no data. Returns `nil` for non-CRC algorithms or malformed digests.
    public static func combine(_ algorithm: ChecksumAlgorithm, parts: [(checksum: [UInt8], length: UInt64)])
        -> [UInt8]?
    {
        guard algorithm.supportsCombine else { return nil }
        var result = [UInt8](repeating: 0, count: algorithm.digestLength)  // CRC of empty input is 0
        for part in parts {
            guard let combined = combine(algorithm, result, part.checksum, lengthOfB: part.length) else { return nil }
            result = combined
        }
        return result
    }

    /// S3's `COMPOSITE` checksum of a multipart upload: base64 of the
    /// algorithm applied to the concatenation of the binary part checksums,
    /// followed by "-" and the number of parts, e.g. "xU/lUQ==-3".
    public static func composite(_ algorithm: ChecksumAlgorithm, partChecksums: [[UInt8]]) -> String {
        var checksummer = Checksummer(algorithm)
        for part in partChecksums {
            checksummer.update(part)
        }
        return checksummer.finalizeBase64() + "-\(partChecksums.count)"
    }

    /// The ETag S3 gives a multipart upload (without quotes): hex of the MD5
    /// of the concatenated binary part MD5s, "-", the number of parts.
    public static func multipartETag(partMD5s: [[UInt8]]) -> String {
        var md5 = Checksummer(.md5)
        for part in partMD5s {
            md5.update(part)
        }
        return Hex.encode(md5.finalize()) + "-\(partMD5s.count)"
    }

    /// Decodes a base64 checksum header value and checks that it has the
    /// digest length of `algorithm`; `nil` if it is malformed.
    public static func decode(_ algorithm: ChecksumAlgorithm, base64 string: String) -> [UInt8]? {
        guard let bytes = decodeBase64(string), bytes.count == algorithm.digestLength else { return nil }
        return bytes
    }

    // MARK: - Encodings

    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 (RFC 4648, with `=` padding).
    public static func base64<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        let input = Array(bytes)
        var output: [UInt8] = []
        output.reserveCapacity((input.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= input.count {
            let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(base64Alphabet[Int(value >> 18 & 63)])
            output.append(base64Alphabet[Int(value >> 12 & 63)])
            output.append(base64Alphabet[Int(value >> 6 & 63)])
            output.append(base64Alphabet[Int(value & 63)])
            index += 3
        }
        let remaining = input.count - index
        if remaining > 0 {
            var value = UInt32(input[index]) << 16
            if remaining == 2 { value |= UInt32(input[index + 1]) << 8 }
            output.append(base64Alphabet[Int(value >> 18 & 63)])
            output.append(base64Alphabet[Int(value >> 12 & 63)])
            output.append(remaining == 2 ? base64Alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
            output.append(UInt8(ascii: "="))
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes standard base64 (padding required, no whitespace); `nil` if
    /// `string` is not valid base64.
    public static func decodeBase64(_ string: String) -> [UInt8]? {
        let input = Array(string.utf8)
        guard input.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(input.count / 4 * 3)
        var index = 0
        while index < input.count {
            var value: UInt32 = 0
            var padding = 0
            for offset in 0..<4 {
                let character = input[index + offset]
                let sextet: UInt32
                switch character {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): sextet = UInt32(character - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): sextet = UInt32(character - UInt8(ascii: "a")) + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): sextet = UInt32(character - UInt8(ascii: "0")) + 52
                case UInt8(ascii: "+"): sextet = 62
                case UInt8(ascii: "/"): sextet = 63
                case UInt8(ascii: "="):
                    // Padding only in the last two positions of the last quantum.
                    guard index + 4 == input.count, offset >= 2 else { return nil }
                    padding += 1
                    sextet = 0
                default:
                    return nil
                }
                if padding > 0 && character != UInt8(ascii: "=") { return nil }
                value = value << 6 | sextet
            }
            // Reject non-canonical encodings (non-zero bits under the padding).
            if padding == 1 && value & 0xFF != 0 { return nil }
            if padding == 2 && value & 0xFFFF != 0 { return nil }
            output.append(UInt8(value >> 16 & 0xFF))
            if padding < 2 { output.append(UInt8(value >> 8 & 0xFF)) }
            if padding < 1 { output.append(UInt8(value & 0xFF)) }
            index += 4
        }
        return output
    }

    // MARK: - Internal

    static func bigEndianBytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    /// Big-endian bytes to an integer; callers pass exactly the width's bytes (extra leading bytes shift out).
    static func integer<T: FixedWidthInteger>(_ bytes: [UInt8]) -> T {
        var value: T = 0
        for byte in bytes {
            value = value << 8 | T(byte)
        }
        return value
    }
}
