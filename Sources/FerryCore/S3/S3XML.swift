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
    /// - Parameter trimming: whether surrounding white space of element values is dropped; documents that carry
    ///   object keys (where `" "` is a key) decode with `false`.
    /// Documents nested deeper or holding more elements than ``DocumentLimits/standard`` throw
    /// ``DocumentTooComplex`` before any parser sees them.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data, trimming: Bool = true) throws -> T {
        try DocumentShape.checkXML(data)
        // No S3 document has a DTD; refusing one keeps entity expansion (billion laughs) and external entities out.
        if containsDeclaration(data) {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "A document type declaration is not allowed."))
        }
        if let reason = unsafeForParser(data) {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: reason))
        }
        let decoder = XMLDecoder()
        decoder.trimValueWhitespaces = trimming
        decoder.shouldProcessNamespaces = true
        return try decoder.decode(type, from: data)
    }

    /// Why the document cannot be given to the platform's XML parser, nil when it can: the parser stops the process on
    /// bytes that are not UTF-8 in a name and on a processing instruction without data, so a document must be UTF-8
    /// without the control characters XML 1.0 forbids, and its only processing instruction may be the XML declaration
    /// at its start (`<?xml version=…?>`).
    static func unsafeForParser(_ data: Data) -> String? {
        guard String(validating: data, as: UTF8.self) != nil else { return "The document is not UTF-8." }
        if data.contains(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) {
            return "The document holds a control character."
        }
        let bytes = [UInt8](data)
        var index = 0
        while index + 1 < bytes.count {
            defer { index += 1 }
            guard bytes[index] == UInt8(ascii: "<"), bytes[index + 1] == UInt8(ascii: "?") else { continue }
            let declaration = Array("<?xml".utf8)
            let isDeclaration =
                bytes[..<index].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF }
                && bytes.count > index + declaration.count + 1
                && Array(bytes[index..<(index + declaration.count)]) == declaration
                && [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index + declaration.count])
                && String(decoding: bytes[index...].prefix(64), as: UTF8.self).contains("version")
            guard isDeclaration else { return "The document holds a processing instruction." }
        }
        return nil
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
        if let requestId = error.requestId { xml += "<RequestId>\(escape(requestId))</RequestId>" }
        xml += "</Error>"
        return Data(xml.utf8)
    }

    /// Escapes text for an XML element body.
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
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}
