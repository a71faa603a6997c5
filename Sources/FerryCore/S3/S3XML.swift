import Foundation
import XMLCoder

/// Encodes and decodes the S3 XML documents.
public enum S3XML {
    /// Encodes a document with the given root element, the S3 namespace and an XML declaration.
    public static func encode<T: Encodable>(_ value: T, root: String, namespace: Bool = true) throws -> Data {
        let encoder = XMLEncoder()
        return try encoder.encode(
            value, withRootKey: root,
            rootAttributes: namespace ? ["xmlns": s3XMLNamespace] : nil,
            header: XMLHeader(version: 1.0, encoding: "UTF-8"))
    }

    /// Decodes a document; throws for malformed XML or missing required elements.
    ///
    /// - Parameters:
    ///   - trimming: whether surrounding white space of element values is dropped; documents that carry object keys
    ///     (where `" "` is a key) decode with `false`.
    ///   - root: the name the root element must have (namespace prefix aside), or nil for any: the decoder itself
    ///     reads a `<Foo>` document as readily as a `<Tagging>` one.
    /// Documents nested deeper or holding more elements than ``DocumentLimits/standard`` throw
    /// ``DocumentTooComplex`` before any parser sees them.
    public static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, trimming: Bool = true, root: String? = nil
    ) throws -> T {
        try DocumentShape.checkXML(data)
        let decoder = XMLDecoder()
        decoder.trimValueWhitespaces = trimming
        decoder.shouldProcessNamespaces = true
        let input = try parserInput(data)
        if let root, rootElementName(input) != root {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "The root element is not \(root)."))
        }
        return try decoder.decode(type, from: input)
    }

    /// The name of the first element of `input` (the bytes ``parserInput(_:)`` returns: no declaration, DTD or
    /// processing instruction before it) without its namespace prefix; comments before it are skipped.
    static func rootElementName(_ input: Data) -> String? {
        let bytes = [UInt8](input)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "<") else {
                index += 1
                continue
            }
            if bytes[index...].starts(with: "<!--".utf8) {
                guard let end = (index + 4..<max(index + 4, bytes.count - 2)).first(where: { bytes[$0...].starts(with: "-->".utf8) })
                else { return nil }
                index = end + 3
                continue
            }
            let name = bytes[(index + 1)...].prefix { ![0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ">"), UInt8(ascii: "/")].contains($0) }
            return String(decoding: name, as: UTF8.self).split(separator: ":", omittingEmptySubsequences: false).last.map(String.init)
        }
        return nil
    }

    /// The bytes of `data` a parser may be given, or a `DecodingError` saying why there are none. The platform's XML
    /// parser stops the process on bytes that are not UTF-8 in a name and on a processing instruction without data,
    /// and it expands entities, so the document must be UTF-8 without the control characters XML 1.0 forbids, with no
    /// DTD (no S3 document has one; this keeps entity expansion and external entities out) and no processing
    /// instruction. Its XML declaration is dropped: these checks read the bytes as UTF-8, and the parser must read the
    /// same characters, which an `encoding` the declaration names (UTF-7, UTF-16) would change.
    package static func parserInput(_ data: Data) throws -> Data {
        func refuse(_ reason: String) -> DecodingError {
            DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: reason))
        }
        guard String(validating: data, as: UTF8.self) != nil else { throw refuse("The document is not UTF-8.") }
        if data.contains(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) {
            throw refuse("The document holds a control character.")
        }
        if containsDeclaration(data) { throw refuse("A document type declaration is not allowed.") }
        var bytes = [UInt8](data)
        let start = bytes.firstIndex { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) } ?? bytes.endIndex
        if bytes[start...].starts(with: "<?xml".utf8), bytes.count > start + 5, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[start + 5]),
            let end = bytes[start...].indices.first(where: { bytes[$0] == UInt8(ascii: "?") && bytes.indices.contains($0 + 1) && bytes[$0 + 1] == UInt8(ascii: ">") })
        {
            bytes.removeSubrange(bytes.startIndex...(end + 1))
        }
        if zip(bytes, bytes.dropFirst()).contains(where: { $0 == UInt8(ascii: "<") && $1 == UInt8(ascii: "?") }) {
            throw refuse("The document holds a processing instruction.")
        }
        return Data(bytes)
    }

    /// Whether the document holds `<!DOCTYPE` or `<!ENTITY` (in any case); comments and CDATA sections are fine.
    static func containsDeclaration(_ data: Data) -> Bool {
        let bytes = [UInt8](data)
        guard bytes.count >= 3 else { return false }
        for index in 0..<(bytes.count - 2) where bytes[index] == UInt8(ascii: "<") && bytes[index + 1] == UInt8(ascii: "!") {
            let next = bytes[index + 2] | 0x20
            if next == UInt8(ascii: "d") || next == UInt8(ascii: "e") { return true }
        }
        return false
    }

    /// Renders the S3 error document for an error.
    public static func errorDocument(_ error: S3Error) -> Data {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\(escape(error.code.rawValue))</Code>"
        xml += "<Message>\(escape(error.message))</Message>"
        for (name, value) in error.details.sorted(by: { $0.key < $1.key }) {
            xml += "<\(name)>\(escape(value))</\(name)>"
        }
        if let resource = error.resource { xml += "<Resource>\(escape(resource))</Resource>" }
        if let requestId = error.requestId {
            // The request id is also the host id (`x-amz-id-2`): one node's answer names no host.
            xml += "<RequestId>\(escape(requestId))</RequestId><HostId>\(escape(requestId))</HostId>"
        }
        xml += "</Error>"
        return Data(xml.utf8)
    }

    /// Escapes text for an XML element body. A carriage return is written as a reference (a parser would read a
    /// literal one as a line feed); a character XML 1.0 cannot carry at all (other C0 controls, U+FFFE, U+FFFF) as
    /// U+FFFD, so the document stays well-formed whatever a request echoed.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\r": out += "&#13;"
            case "\t", "\n": out.unicodeScalars.append(ch)
            case _ where ch.value < 0x20 || ch.value == 0xFFFE || ch.value == 0xFFFF: out += "\u{FFFD}"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}
