import FerryCore
import Foundation
import Testing

@Suite("Document shape limits")
struct DocumentShapeTests {
    static let limits = DocumentLimits(maxDepth: 8, maxElements: 50)

    @Test("XML: depth counts nested start tags; self-closing tags, comments, CDATA, declarations and quotes do not nest")
    func xmlDepth() throws {
        let seven = String(repeating: "<a>", count: 7) + "x" + String(repeating: "</a>", count: 7)
        try DocumentShape.checkXML(Data(seven.utf8), limits: Self.limits)
        let nine = String(repeating: "<a>", count: 9) + String(repeating: "</a>", count: 9)
        #expect(throws: DocumentTooComplex.self) { try DocumentShape.checkXML(Data(nine.utf8), limits: Self.limits) }
        // Siblings at one level never add up to depth.
        let flat = "<r>" + String(repeating: "<a>1</a><b/>", count: 20) + "</r>"
        try DocumentShape.checkXML(Data(flat.utf8), limits: Self.limits)
        // What looks like tags inside comments, CDATA, processing instructions and attribute values is not.
        let hidden = """
            <?xml version="1.0"?><r a="<b><b><b><b><b><b><b><b><b>"><!-- <c><c><c><c><c><c><c><c><c> -->\
            <![CDATA[<d><d><d><d><d><d><d><d><d>]]></r>
            """
        try DocumentShape.checkXML(Data(hidden.utf8), limits: Self.limits)
    }

    @Test("XML: elements are counted, whatever their depth")
    func xmlElements() throws {
        let fifty = "<r>" + String(repeating: "<a/>", count: 49) + "</r>"
        try DocumentShape.checkXML(Data(fifty.utf8), limits: Self.limits)
        let more = "<r>" + String(repeating: "<a/>", count: 50) + "</r>"
        #expect(throws: DocumentTooComplex.self) { try DocumentShape.checkXML(Data(more.utf8), limits: Self.limits) }
    }

    @Test("JSON: arrays and objects nest, strings with brackets and escaped quotes do not")
    func jsonDepth() throws {
        try DocumentShape.checkJSON(Data((String(repeating: "[", count: 8) + String(repeating: "]", count: 8)).utf8), limits: Self.limits)
        #expect(throws: DocumentTooComplex.self) {
            try DocumentShape.checkJSON(Data((String(repeating: "[", count: 9) + String(repeating: "]", count: 9)).utf8), limits: Self.limits)
        }
        let text = #"{"a": "[[[[[[[[[[{{{{{{{{{", "b": "\"[[[[[[[[[[[", "c": {"d": [1, 2, {"e": null}]}}"#
        try DocumentShape.checkJSON(Data(text.utf8), limits: Self.limits)
        #expect(throws: DocumentTooComplex.self) {
            try DocumentShape.checkJSON(Data(("[" + Array(repeating: "1", count: 50).joined(separator: ",") + "]").utf8), limits: Self.limits)
        }
    }

    @Test("a body nested 100,000 levels deep is refused before any parser sees it, by S3XML and BoundedJSON")
    func deepBodies() throws {
        let xml = "<?xml version=\"1.0\"?>" + String(repeating: "<Part>", count: 100_000)
        #expect(throws: DocumentTooComplex.self) { try S3XML.decode(CompleteMultipartUpload.self, from: Data(xml.utf8)) }
        let json = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: DocumentTooComplex.self) { try BoundedJSON.decode([String].self, from: Data(json.utf8)) }
        let wide = "{\"a\":[" + Array(repeating: "0", count: 300_000).joined(separator: ",") + "]}"
        #expect(throws: DocumentTooComplex.self) { try BoundedJSON.decode([String: [Int]].self, from: Data(wide.utf8)) }
        // The standard limits let ordinary documents through: a completion of 10,000 parts.
        let parts = (1...10_000).map { "<Part><PartNumber>\($0)</PartNumber><ETag>\"e\"</ETag></Part>" }.joined()
        let complete = try S3XML.decode(
            CompleteMultipartUpload.self, from: Data("<CompleteMultipartUpload>\(parts)</CompleteMultipartUpload>".utf8))
        #expect(complete.parts.count == 10_000)
    }

    @Test("S3XML refuses what stops the platform's parser: processing instructions, names that are not UTF-8, controls")
    func unsafeXML() throws {
        let refused: [[UInt8]] = [
            Array("<?ferry?><Tagging/>".utf8), Array("<?xml?><Tagging/>".utf8), Array("<Tagging><?pi?></Tagging>".utf8),
            Array("<F".utf8) + [0xE9] + Array("/>".utf8), [0xFF, 0xFE] + Array("<Tagging/>".utf8),
            Array("<Tagging>".utf8) + [0x00] + Array("</Tagging>".utf8),
        ]
        for bytes in refused {
            #expect(throws: DecodingError.self, "\(bytes)") { try S3XML.decode(S3Tagging.self, from: Data(bytes)) }
        }
        // What the checks read as text, a parser honouring the declared encoding would read as markup (a processing
        // instruction without data stopped the process): the declaration is dropped before parsing, so these stay
        // text, outside the root element, and the parser refuses them as not well-formed.
        for text in [
            "<?xml version='1.0' encoding='UTF-7'?>+ADw-?foo?+AD4-<Tagging><TagSet/></Tagging>",
            "<?xml version=\"1.0\" encoding=\"UTF-7\"?>+ADw-!DOCTYPE t+AD4-<Tagging><TagSet/></Tagging>",
        ] {
            #expect(throws: (any Error).self, "\(text)") { try S3XML.decode(S3Tagging.self, from: Data(text.utf8)) }
        }
        // A declaration at the start (after a byte order mark or white space) is fine.
        for text in [
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Tagging><TagSet/></Tagging>",
            "\u{FEFF}<?xml version='1.0'?>\n<Tagging><TagSet></TagSet></Tagging>",
        ] {
            _ = try S3XML.decode(S3Tagging.self, from: Data(text.utf8))
        }
        // Inside an element, UTF-7's escapes are the characters they are in UTF-8, whatever the declaration says.
        let tagging = try S3XML.decode(
            S3Tagging.self,
            from: Data(
                "<?xml version='1.0' encoding='UTF-7'?><Tagging><TagSet><Tag><Key>+ADw-k</Key><Value>v</Value></Tag></TagSet></Tagging>".utf8))
        #expect(tagging.tagSet.tags.map(\.key) == ["+ADw-k"])
    }

    @Test("S3XML holds a request document to its root element's name, namespace prefix and comments aside")
    func rootElement() throws {
        let tagSet = "<TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet>"
        for text in [
            "<Tagging>\(tagSet)</Tagging>", "<?xml version=\"1.0\"?>\n<Tagging xmlns=\"\(s3XMLNamespace)\">\(tagSet)</Tagging>",
            "<!-- tags --><s3:Tagging xmlns:s3=\"\(s3XMLNamespace)\">\(tagSet)</s3:Tagging>", " \n<Tagging\n>\(tagSet)</Tagging>",
        ] {
            #expect(try S3XML.decode(S3Tagging.self, from: Data(text.utf8), root: "Tagging").tagSet.tags.map(\.key) == ["k"], "\(text)")
        }
        for text in ["<Foo>\(tagSet)</Foo>", "<TaggingX>\(tagSet)</TaggingX>", "<!-- <Tagging> --><Foo>\(tagSet)</Foo>", "<!-- open"] {
            #expect(throws: DecodingError.self, "\(text)") { try S3XML.decode(S3Tagging.self, from: Data(text.utf8), root: "Tagging") }
        }
        // Without a root named, any is read (the client reads answers this way).
        _ = try S3XML.decode(S3Tagging.self, from: Data("<Foo>\(tagSet)</Foo>".utf8))
    }

    @Test("a ListMultipartUploads answer without StorageClass or Initiated on an upload (some gateways leave them out) is read")
    func uploadsWithoutOptionalFields() throws {
        let xml = """
            <ListMultipartUploadsResult><Bucket>b</Bucket><Upload><Key>k</Key><UploadId>u-1</UploadId></Upload>\
            <Upload><Key>k</Key><UploadId>u-2</UploadId><Initiated>2026-12-05T01:00:00.000Z</Initiated></Upload>\
            </ListMultipartUploadsResult>
            """
        let result = try S3XML.decode(ListMultipartUploadsResult.self, from: Data(xml.utf8))
        #expect(result.uploads.map(\.uploadId) == ["u-1", "u-2"])
        #expect(result.uploads.map(\.storageClass) == ["STANDARD", "STANDARD"])
        #expect(result.uploads.map(\.initiated) == ["", "2026-12-05T01:00:00.000Z"])
    }
}
