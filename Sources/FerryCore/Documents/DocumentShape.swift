import Foundation

/// How deep a document may nest and how many elements (XML) or values (JSON) it may hold before a parser is given it.
///
/// Parsers build trees recursively, so a body of a few kilobytes nested a hundred thousand levels deep exhausts a
/// thread's stack, and a flat body of millions of tiny elements exhausts memory, whatever limit is set on its size in
/// bytes. Every document Ferry reads from the other side of a connection is scanned against these limits first.
public struct DocumentLimits: Sendable, Hashable {
    /// The deepest nesting allowed (elements within elements, arrays and objects within each other).
    public var maxDepth: Int
    /// The most elements (XML) or values (JSON) allowed in the whole document.
    public var maxElements: Int

    /// Creates limits.
    public init(maxDepth: Int, maxElements: Int) {
        self.maxDepth = maxDepth
        self.maxElements = maxElements
    }

    /// The limits of the documents S3, the media API and their clients exchange: 32 levels (none nests more than 6)
    /// and 200,000 elements (a completion of 10,000 parts has about 60,000).
    public static let standard = DocumentLimits(maxDepth: 32, maxElements: 200_000)
}

/// A document that nests deeper, or holds more elements, than its ``DocumentLimits`` allow.
public struct DocumentTooComplex: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was exceeded, for people: `"nests deeper than 32 levels"`.
    public var reason: String

    /// Creates the error.
    public init(reason: String) {
        self.reason = reason
    }

    /// The document and what it exceeded.
    public var description: String { "The document \(reason)." }
}

/// Scans documents for their depth and size without building them.
///
/// The scans are linear, iterative and allocation-free; they look only at structure (tags, brackets, quotes) and
/// leave well-formedness to the parser that runs after them.
public enum DocumentShape {
    /// Checks an XML document: elements are counted at their start tags, depth rises at a start tag and falls at an
    /// end tag; comments, CDATA sections, processing instructions and declarations are skipped.
    public static func checkXML(_ data: Data, limits: DocumentLimits = .standard) throws(DocumentTooComplex) {
        let result = data.withUnsafeBytes { raw in scanXML(raw.bindMemory(to: UInt8.self), limits: limits) }
        if let result { throw result }
    }

    /// Checks a JSON document: every array, object and scalar counts as a value, depth rises at `[` and `{`; string
    /// contents (escapes included) are skipped.
    public static func checkJSON(_ data: Data, limits: DocumentLimits = .standard) throws(DocumentTooComplex) {
        let result = data.withUnsafeBytes { raw in scanJSON(raw.bindMemory(to: UInt8.self), limits: limits) }
        if let result { throw result }
    }

    private static func deeper(_ limits: DocumentLimits) -> DocumentTooComplex {
        DocumentTooComplex(reason: "nests deeper than \(limits.maxDepth) levels")
    }

    private static func larger(_ limits: DocumentLimits, _ noun: String) -> DocumentTooComplex {
        DocumentTooComplex(reason: "holds more than \(limits.maxElements) \(noun)")
    }

    private static func scanXML(_ bytes: UnsafeBufferPointer<UInt8>, limits: DocumentLimits) -> DocumentTooComplex? {
        let lt = UInt8(ascii: "<")
        let gt = UInt8(ascii: ">")
        let slash = UInt8(ascii: "/")
        var depth = 0
        var elements = 0
        var index = 0
        let count = bytes.count
        /// The index just past `terminator` at or after `from`, or `count`.
        func skip(past terminator: [UInt8], from: Int) -> Int {
            var at = from
            while at + terminator.count <= count {
                var matches = true
                for (offset, byte) in terminator.enumerated() where bytes[at + offset] != byte {
                    matches = false
                    break
                }
                if matches { return at + terminator.count }
                at += 1
            }
            return count
        }
        while index < count {
            guard bytes[index] == lt else {
                index += 1
                continue
            }
            let next = index + 1 < count ? bytes[index + 1] : 0
            if next == UInt8(ascii: "!") {
                if index + 3 < count, bytes[index + 2] == UInt8(ascii: "-"), bytes[index + 3] == UInt8(ascii: "-") {
                    index = skip(past: Array("-->".utf8), from: index + 4)
                } else if index + 8 < count, bytes[index + 2] == UInt8(ascii: "[") {
                    index = skip(past: Array("]]>".utf8), from: index + 3)
                } else {
                    index = skip(past: [gt], from: index + 2)
                }
                continue
            }
            if next == UInt8(ascii: "?") {
                index = skip(past: Array("?>".utf8), from: index + 2)
                continue
            }
            if next == slash {
                depth -= 1
                index = skip(past: [gt], from: index + 2)
                continue
            }
            // A start tag: find its end outside quoted attribute values, and whether it closes itself.
            var at = index + 1
            var quote: UInt8 = 0
            var selfClosing = false
            while at < count {
                let byte = bytes[at]
                if quote != 0 {
                    if byte == quote { quote = 0 }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == gt {
                    selfClosing = at > index + 1 && bytes[at - 1] == slash
                    break
                }
                at += 1
            }
            elements += 1
            if elements > limits.maxElements { return larger(limits, "elements") }
            if !selfClosing {
                depth += 1
                if depth > limits.maxDepth { return deeper(limits) }
            }
            index = at + 1
        }
        return nil
    }

    private static func scanJSON(_ bytes: UnsafeBufferPointer<UInt8>, limits: DocumentLimits) -> DocumentTooComplex? {
        var depth = 0
        var values = 0
        var index = 0
        var inString = false
        var inScalar = false
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            if inString {
                if byte == UInt8(ascii: "\\") {
                    index += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") { inString = false }
                index += 1
                continue
            }
            switch byte {
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                inScalar = false
                values += 1
                depth += 1
                if depth > limits.maxDepth { return deeper(limits) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                inScalar = false
                depth -= 1
            case UInt8(ascii: "\""):
                inScalar = false
                inString = true
                values += 1
            case UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"),
                UInt8(ascii: "\t"):
                inScalar = false
            default:
                // The first byte of a number, `true`, `false` or `null`.
                if !inScalar {
                    inScalar = true
                    values += 1
                }
            }
            if values > limits.maxElements { return larger(limits, "values") }
            index += 1
        }
        return nil
    }
}

/// JSON decoding of documents that come from the other side of a connection: the document's shape is checked
/// against ``DocumentLimits`` before `JSONDecoder` sees it.
public enum BoundedJSON {
    /// Decodes `type` from `data` after checking its depth and size; throws ``DocumentTooComplex`` or the decoder's
    /// error.
    public static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, limits: DocumentLimits = .standard, decoder: JSONDecoder = JSONDecoder()
    ) throws -> T {
        try DocumentShape.checkJSON(data, limits: limits)
        return try decoder.decode(type, from: data)
    }
}
