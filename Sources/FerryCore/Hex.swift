/// Lowercase hexadecimal, the one encoding of digests, ETags and Ferry's random ids.
public enum Hex {
    /// Lowercase hex encoding of bytes.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes a hex string (either case) spells, or `nil` when it has an odd length or a character that is not a
    /// hex digit.
    public static func decode(_ hex: some StringProtocol) -> [UInt8]? {
        let characters = Array(hex.utf8)
        guard characters.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 2)
        for index in stride(from: 0, to: characters.count, by: 2) {
            guard let high = value(characters[index]), let low = value(characters[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// A new random id of `byteCount` random bytes in lowercase hex (`2 × byteCount` characters).
    public static func randomId(byteCount: Int = 16) -> String {
        var generator = SystemRandomNumberGenerator()
        return encode((0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Whether `id` has the shape ``randomId(byteCount:)`` makes: `2 × byteCount` lowercase hex digits.
    public static func isRandomId(_ id: some StringProtocol, byteCount: Int = 16) -> Bool {
        id.utf8.count == 2 * byteCount && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// The value of one hex digit (either case).
    @inline(__always)
    public static func value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)
}
