import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The element structure an S3 XML document must have, as S3 checks it against its published schema: the root's
/// name, and for each element the children it may hold and how many times each. An element the schema does not list
/// as a parent holds text only. A decoder alone would skip an unknown element, read the first of two where one is
/// allowed, and take any root; a document that does not fit is `MalformedXML` in S3, and so here.
///
/// Element names are matched without their namespace. Text is not checked: decoding and validation do that.
package struct S3XMLSchema: Sendable {
    /// The root element's name.
    package var root: String
    /// For each element that holds elements: each child's name and the most times it may appear (nil: any number).
    package var children: [String: [String: Int?]]

    /// Creates a schema.
    package init(root: String, children: [String: [String: Int?]]) {
        self.root = root
        self.children = children
    }

    /// Why `data` does not fit the schema, or nil when it does (or is not well-formed XML: decoding says so).
    package func mismatch(in data: Data) -> String? {
        guard let input = try? S3XML.parserInput(data) else { return "The document is not well-formed." }
        let checker = Checker(schema: self)
        let parser = XMLParser(data: input)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = checker
        _ = parser.parse()
        return checker.mismatch
    }

    /// `LifecycleConfiguration` (PutBucketLifecycleConfiguration).
    package static let lifecycle = S3XMLSchema(
        root: "LifecycleConfiguration",
        children: [
            "LifecycleConfiguration": ["Rule": nil],
            "Rule": [
                "ID": 1, "Prefix": 1, "Filter": 1, "Status": 1, "Expiration": 1, "AbortIncompleteMultipartUpload": 1,
                "NoncurrentVersionExpiration": 1, "Transition": nil, "NoncurrentVersionTransition": nil,
            ],
            "Filter": ["Prefix": 1, "Tag": 1, "ObjectSizeGreaterThan": 1, "ObjectSizeLessThan": 1, "And": 1],
            "And": ["Prefix": 1, "Tag": nil, "ObjectSizeGreaterThan": 1, "ObjectSizeLessThan": 1],
            "Tag": ["Key": 1, "Value": 1],
            "Expiration": ["Days": 1, "Date": 1, "ExpiredObjectDeleteMarker": 1],
            "AbortIncompleteMultipartUpload": ["DaysAfterInitiation": 1],
            "NoncurrentVersionExpiration": ["NoncurrentDays": 1, "NewerNoncurrentVersions": 1],
            "Transition": ["Days": 1, "Date": 1, "StorageClass": 1],
            "NoncurrentVersionTransition": ["NoncurrentDays": 1, "NewerNoncurrentVersions": 1, "StorageClass": 1],
        ])

    /// Walks the elements, counting each parent's children; stops at the first mismatch.
    private final class Checker: NSObject, XMLParserDelegate {
        let schema: S3XMLSchema
        var open: [(name: String, counts: [String: Int])] = []
        var mismatch: String?

        init(schema: S3XMLSchema) { self.schema = schema }

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            guard let parent = open.last else {
                if elementName != schema.root { fail(parser, "The root element is \(elementName), not \(schema.root).") }
                open.append((elementName, [:]))
                return
            }
            guard let allowed = schema.children[parent.name], let limit = allowed[elementName] else {
                return fail(parser, "\(parent.name) holds no element \(elementName).")
            }
            let count = (parent.counts[elementName] ?? 0) + 1
            if let limit, count > limit { return fail(parser, "\(parent.name) holds \(elementName) more than once.") }
            open[open.count - 1].counts[elementName] = count
            open.append((elementName, [:]))
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            _ = open.popLast()
        }

        private func fail(_ parser: XMLParser, _ reason: String) {
            if mismatch == nil { mismatch = reason }
            parser.abortParsing()
        }
    }
}
