import Crypto
import Foundation

/// AWS Signature Version 4 primitives shared by the client signer and the server verifier.
///
/// Every function here is pure: no clock, no I/O, no global state. The higher-level
/// ``SigV4Signer`` (client) and ``SigV4Verifier`` (server) are built from them, so both
/// sides canonicalize requests with exactly the same code.
public enum SigV4 {
    /// The signing algorithm name that opens the `Authorization` header and the string to sign.
    public static let algorithm = "AWS4-HMAC-SHA256"
    /// `x-amz-content-sha256` value for a payload that is not covered by the signature.
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// `x-amz-content-sha256` value for an aws-chunked body whose chunks are each signed.
    public static let streamingSignedPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    /// `x-amz-content-sha256` value for signed aws-chunked chunks followed by signed trailers.
    public static let streamingSignedPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    /// `x-amz-content-sha256` value for unsigned aws-chunked chunks followed by (unsigned) trailers.
    public static let streamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    /// Lowercase hex SHA-256 of the empty string.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// The fixed last component of every credential scope.
    public static let scopeTerminator = "aws4_request"
    /// The first line of the string to sign of an aws-chunked payload chunk.
    public static let chunkPayloadAlgorithm = "AWS4-HMAC-SHA256-PAYLOAD"
    /// The first line of the string to sign of an aws-chunked trailer block.
    public static let chunkTrailerAlgorithm = "AWS4-HMAC-SHA256-TRAILER"

    // MARK: - URI encoding

    /// RFC 3986 encoding as SigV4 requires: the unreserved characters `A-Z a-z 0-9 - . _ ~`
    /// are kept, every other UTF-8 byte becomes `%XX` with uppercase hex digits.
    /// `/` is kept as is when `encodeSlash` is `false` (object key paths) and encoded as `%2F`
    /// when it is `true` (query names and values).
    public static func uriEncode(_ s: String, encodeSlash: Bool) -> String {
        var needsWork = false
        for byte in s.utf8 where !isUnreserved(byte) && !(byte == UInt8(ascii: "/") && !encodeSlash) {
            needsWork = true
            break
        }
        if !needsWork { return s }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count * 3)
        for byte in s.utf8 {
            if isUnreserved(byte) || (byte == UInt8(ascii: "/") && !encodeSlash) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(upperHexDigits[Int(byte >> 4)])
                out.append(upperHexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes `%XX` escapes (either hex case). `+` is left as a literal plus, as SigV4 clients
    /// always encode spaces as `%20`. A `%` not followed by two hex digits is kept literally.
    /// Byte sequences that are not valid UTF-8 are repaired with U+FFFD.
    public static func percentDecode(_ s: String) -> String {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return s }
        return String(decoding: percentDecodedBytes(s), as: UTF8.self)
    }

    /// Decodes `%XX` escapes as ``percentDecode(_:)`` does, or nil when the bytes they spell are not UTF-8 (so that
    /// two different escapes never decode to one repaired name).
    public static func percentDecodeValidating(_ s: String) -> String? {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return s }
        return String(validating: percentDecodedBytes(s), as: UTF8.self)
    }

    /// Decodes `%XX` escapes, or nil when a `%` is not followed by two hex digits or the bytes the escapes spell are
    /// not UTF-8: for values that must be URL-encoded (`x-amz-copy-source`), where a stray `%` is an error.
    public static func percentDecodeStrict(_ s: String) -> String? {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return s }
        return percentDecodedBytes(s, strict: true).flatMap { String(validating: $0, as: UTF8.self) }
    }

    private static func percentDecodedBytes(_ s: String) -> [UInt8] {
        percentDecodedBytes(s, strict: false) ?? []
    }

    /// The bytes `s` spells; a `%` without two hex digits after it is kept as it is, or, when `strict`, makes nil.
    private static func percentDecodedBytes(_ s: String, strict: Bool) -> [UInt8]? {
        let bytes = Array(s.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), i + 2 < bytes.count,
                let hi = Hex.value(bytes[i + 1]), let lo = Hex.value(bytes[i + 2])
            {
                out.append(hi << 4 | lo)
                i += 3
            } else if byte == UInt8(ascii: "%"), strict {
                return nil
            } else {
                out.append(byte)
                i += 1
            }
        }
        return out
    }

    /// The canonical URI of an S3 request from the raw (already percent-encoded) path as it was
    /// received on the wire: each `/`-separated segment is percent-decoded and re-encoded with
    /// ``uriEncode(_:encodeSlash:)``, so a client that escaped more (or fewer) characters than
    /// strictly needed still canonicalizes to the same string. An encoded slash (`%2F`) inside a
    /// segment stays encoded. No dot-segment normalization is done (S3 does none). An empty path
    /// becomes `/`.
    public static func canonicalURI(fromRawPath rawPath: String) -> String {
        if rawPath.isEmpty { return "/" }
        return rawPath.split(separator: "/", omittingEmptySubsequences: false)
            .map { uriEncode(percentDecode(String($0)), encodeSlash: true) }
            .joined(separator: "/")
    }

    /// Splits a raw query string (without the leading `?`) into percent-decoded name/value pairs,
    /// in their original order. `a` and `a=` both give the value `""`. Empty components are skipped.
    public static func parseQueryString(_ rawQuery: String) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        for component in rawQuery.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = component.firstIndex(of: "=") {
                result.append(
                    (
                        percentDecode(String(component[..<eq])),
                        percentDecode(String(component[component.index(after: eq)...]))
                    ))
            } else {
                result.append((percentDecode(String(component)), ""))
            }
        }
        return result
    }

    // MARK: - Canonical request

    /// The canonical query string: names and values are ``uriEncode(_:encodeSlash:)``-d (slash
    /// included), then sorted by encoded name and, for equal names, by encoded value (byte order),
    /// and joined as `name=value` pairs with `&`. A parameter without a value is `name=`.
    public static func canonicalQueryString(_ items: [(name: String, value: String)]) -> String {
        if items.isEmpty { return "" }
        let encoded = items.map {
            (name: uriEncode($0.name, encodeSlash: true), value: uriEncode($0.value, encodeSlash: true))
        }
        let sorted = encoded.sorted { a, b in
            if a.name != b.name { return a.name.utf8.lexicographicallyPrecedes(b.name.utf8) }
            return a.value.utf8.lexicographicallyPrecedes(b.value.utf8)
        }
        var out = ""
        out.reserveCapacity(sorted.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 })
        for (index, item) in sorted.enumerated() {
            if index > 0 { out += "&" }
            out += item.name
            out += "="
            out += item.value
        }
        return out
    }

    /// Trims leading/trailing spaces and tabs and collapses each inner run of them into one space,
    /// as SigV4 canonical header values require.
    public static func canonicalHeaderValue(_ value: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        var pendingSpace = false
        for byte in value.utf8 {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                pendingSpace = !out.isEmpty
            } else {
                if pendingSpace { out.append(UInt8(ascii: " ")) }
                pendingSpace = false
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The lowercased, de-duplicated and sorted form of a list of header names, the order in
    /// which they appear in the canonical request and in `SignedHeaders`.
    public static func normalizedSignedHeaders(_ names: [String]) -> [String] {
        Array(Set(names.map { $0.lowercased() })).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// Builds the SigV4 canonical request:
    ///
    /// ```
    /// METHOD\nCANONICAL-URI\nCANONICAL-QUERY\nCANONICAL-HEADERS\n\nSIGNED-HEADERS\nPAYLOAD-HASH
    /// ```
    ///
    /// Only the headers named in `signedHeaders` are included. Header names are lowercased, values
    /// trimmed with inner runs of spaces collapsed (``canonicalHeaderValue(_:)``), and the values of
    /// repeated names joined with `,` in the order they appear in `headers`. `signedHeaders` is
    /// lowercased and sorted. `canonicalURI` is used exactly as given (see
    /// ``canonicalURI(fromRawPath:)``); `query` holds decoded names and values.
    public static func canonicalRequest(
        method: String,
        canonicalURI: String,
        query: [(name: String, value: String)],
        headers: [(name: String, value: String)],
        signedHeaders: [String],
        payloadHash: String
    ) -> String {
        let names = normalizedSignedHeaders(signedHeaders)
        var values: [String: [String]] = [:]
        let wanted = Set(names)
        for header in headers {
            let name = header.name.lowercased()
            if wanted.contains(name) {
                values[name, default: []].append(canonicalHeaderValue(header.value))
            }
        }
        var out = method
        out += "\n"
        out += canonicalURI.isEmpty ? "/" : canonicalURI
        out += "\n"
        out += canonicalQueryString(query)
        out += "\n"
        for name in names {
            out += name
            out += ":"
            out += (values[name] ?? []).joined(separator: ",")
            out += "\n"
        }
        out += "\n"
        out += names.joined(separator: ";")
        out += "\n"
        out += payloadHash
        return out
    }

    // MARK: - String to sign, key, signature

    /// `AWS4-HMAC-SHA256\n<timestamp>\n<scope>\n<hex sha256(canonicalRequest)>`.
    public static func stringToSign(timestamp: String, scope: SigV4Scope, canonicalRequest: String) -> String {
        "\(algorithm)\n\(timestamp)\n\(scope.string)\n\(hexSHA256(canonicalRequest.utf8))"
    }

    /// Derives the signing key: `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")`.
    public static func signingKey(secretAccessKey: String, scope: SigV4Scope) -> SymmetricKey {
        let kSecret = SymmetricKey(data: Array(("AWS4" + secretAccessKey).utf8))
        let kDate = hmac(kSecret, scope.date)
        let kRegion = hmac(kDate, scope.region)
        let kService = hmac(kRegion, scope.service)
        return hmac(kService, scopeTerminator)
    }

    /// Lowercase hex HMAC-SHA256 of `stringToSign` under `signingKey`.
    public static func signature(signingKey: SymmetricKey, stringToSign: String) -> String {
        var mac = HMAC<SHA256>(key: signingKey)
        mac.update(data: Array(stringToSign.utf8))
        return Hex.encode(mac.finalize())
    }

    /// The string to sign of one aws-chunked payload chunk:
    /// `AWS4-HMAC-SHA256-PAYLOAD\n<timestamp>\n<scope>\n<previousSignature>\n<hex sha256("")>\n<chunkHash>`.
    public static func chunkStringToSign(
        timestamp: String, scope: SigV4Scope, previousSignature: String, chunkHash: String
    ) -> String {
        "\(chunkPayloadAlgorithm)\n\(timestamp)\n\(scope.string)\n\(previousSignature)\n\(emptyPayloadHash)\n\(chunkHash)"
    }

    /// The string to sign of an aws-chunked trailer block:
    /// `AWS4-HMAC-SHA256-TRAILER\n<timestamp>\n<scope>\n<previousSignature>\n<hex sha256(canonical trailers)>`,
    /// where the canonical trailers are `name:value\n` for each trailer in order.
    public static func trailerStringToSign(
        timestamp: String, scope: SigV4Scope, previousSignature: String, trailerHash: String
    ) -> String {
        "\(chunkTrailerAlgorithm)\n\(timestamp)\n\(scope.string)\n\(previousSignature)\n\(trailerHash)"
    }

    /// The bytes whose SHA-256 a trailer signature covers: `name:value\n` per trailer, names
    /// lowercased and values trimmed.
    public static func canonicalTrailers(_ trailers: [(name: String, value: String)]) -> String {
        var out = ""
        for trailer in trailers {
            out += trailer.name.lowercased()
            out += ":"
            out += canonicalHeaderValue(trailer.value)
            out += "\n"
        }
        return out
    }

    // MARK: - Time

    /// Formats `date` as an amz date, UTC: `yyyyMMdd'T'HHmmss'Z'` (fractional seconds dropped).
    public static func timestamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = floorDiv(seconds, 86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        var out: [UInt8] = []
        out.reserveCapacity(16)
        appendDigits(&out, year, width: 4)
        appendDigits(&out, month, width: 2)
        appendDigits(&out, day, width: 2)
        out.append(UInt8(ascii: "T"))
        appendDigits(&out, secondOfDay / 3600, width: 2)
        appendDigits(&out, (secondOfDay % 3600) / 60, width: 2)
        appendDigits(&out, secondOfDay % 60, width: 2)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// The `yyyyMMdd` date of an amz timestamp, as used in the credential scope.
    public static func dateStamp(_ date: Date) -> String {
        String(timestamp(date).prefix(8))
    }

    /// Parses an amz date (`yyyyMMdd'T'HHmmss'Z'`, UTC). Returns `nil` for anything else,
    /// including out-of-range fields such as month 13 or February 30.
    public static func parseTimestamp(_ s: String) -> Date? {
        let bytes = Array(s.utf8)
        guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for i in range {
                let b = bytes[i]
                guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(b - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
            let hour = number(9..<11), let minute = number(11..<13), let second = number(13..<15)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour < 24, minute < 60, second < 60
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// Whether `s` is a syntactically valid amz date stamp (`yyyyMMdd`).
    public static func isValidDateStamp(_ s: String) -> Bool {
        parseTimestamp(s + "T000000Z") != nil
    }

    // MARK: - Hashing and comparison

    /// Lowercase hex SHA-256 of a byte sequence (contiguous storage is hashed without copying).
    public static func hexSHA256(_ bytes: some Sequence<UInt8>) -> String {
        if let digest = bytes.withContiguousStorageIfAvailable({ SHA256.hash(data: UnsafeRawBufferPointer($0)) }) {
            return Hex.encode(digest)
        }
        return Hex.encode(SHA256.hash(data: Array(bytes)))
    }

    /// Lowercase hex SHA-256 of a raw buffer.
    public static func hexSHA256(_ buffer: UnsafeRawBufferPointer) -> String {
        Hex.encode(SHA256.hash(data: buffer))
    }

    /// Lowercase hex SHA-256 of the UTF-8 bytes of a string.
    public static func hexSHA256(_ string: String) -> String {
        hexSHA256(string.utf8)
    }

    /// Compares two strings' UTF-8 bytes in time that depends only on their lengths, for
    /// comparing signatures without leaking how many leading characters matched.
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        constantTimeEquals(Array(a.utf8), Array(b.utf8))
    }

    /// Compares two byte arrays in time that depends only on their lengths.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count {
            difference |= a[i] ^ b[i]
        }
        return difference == 0
    }

    /// Whether `s` is exactly 64 lowercase or uppercase hex digits (a SHA-256 / signature in hex).
    public static func isHex64(_ s: String) -> Bool {
        var count = 0
        for byte in s.utf8 {
            guard Hex.value(byte) != nil else { return false }
            count += 1
        }
        return count == 64
    }

    // MARK: - Internals

    static let upperHexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    @inline(__always)
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func hmac(_ key: SymmetricKey, _ message: String) -> SymmetricKey {
        SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array(message.utf8), using: key)))
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    /// Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func civilFromDays(_ z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }

    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }

    private static func appendDigits(_ out: inout [UInt8], _ value: Int64, width: Int) {
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: width)
        var v = value
        var i = width - 1
        while i >= 0 {
            digits[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
            i -= 1
        }
        out.append(contentsOf: digits)
    }
}
