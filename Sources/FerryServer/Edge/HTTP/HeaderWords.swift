import Foundation

/// RFC 2047 encoded words for header values that are not US-ASCII, as S3 handles user metadata: values arrive either
/// plain or as `=?UTF-8?B?…?=` / `=?UTF-8?Q?…?=`, are stored decoded, and leave base64-encoded when they hold anything
/// but printable ASCII.
enum HeaderWords {
    /// The value to send: itself when it is printable ASCII, else one `=?UTF-8?B?…?=` word.
    static func encode(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value > 0x7E }) else { return value }
        return "=?UTF-8?B?\(Data(value.utf8).base64EncodedString())?="
    }

    /// The stored form of a received value: encoded words in UTF-8 decoded, anything else unchanged.
    static func decode(_ value: String) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("=?"), trimmed.hasSuffix("?="), trimmed.count > 4 else { return value }
        let parts = trimmed.dropFirst(2).dropLast(2).split(separator: "?", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].lowercased() == "utf-8" else { return value }
        let text = String(parts[2])
        switch parts[1].lowercased() {
        case "b":
            guard let data = Data(base64Encoded: text), let decoded = String(data: data, encoding: .utf8) else {
                return value
            }
            return decoded
        case "q":
            var bytes: [UInt8] = []
            var index = text.utf8.startIndex
            let utf8 = text.utf8
            while index != utf8.endIndex {
                let byte = utf8[index]
                if byte == UInt8(ascii: "_") {
                    bytes.append(UInt8(ascii: " "))
                } else if byte == UInt8(ascii: "="), let hi = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex),
                    let lo = utf8.index(index, offsetBy: 2, limitedBy: utf8.endIndex), lo != utf8.endIndex,
                    let value = UInt8(String(decoding: [utf8[hi], utf8[lo]], as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                    index = lo
                } else {
                    bytes.append(byte)
                }
                index = utf8.index(after: index)
            }
            return String(bytes: bytes, encoding: .utf8) ?? value
        default:
            return value
        }
    }
}
