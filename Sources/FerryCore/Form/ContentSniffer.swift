/// The type a file's first bytes show it to be, which an upload token's `mimeLimit` is matched against (Qiniu detects
/// the type from the content: the type an uploader declares is its own word).
///
/// A recognised format (JPEG, PNG, GIF, WebP, BMP, TIFF, HEIF/AVIF, the MP4 and QuickTime family, Matroska/WebM, AVI,
/// MPEG program and transport streams, FLV, ASF, Ogg, FLAC, WAV, MP3, AAC, AMR, PDF and a few archives) is its type,
/// unless the declared type names the same kind of medium (`video/quicktime` for an MP4-family file, `audio/mp4` for
/// one without video, `image/jpg`): the declared type then stands. Text is `text/html` when it begins as a web page,
/// the declared type when that is a textual one (`text/*`, JSON, XML, SVG, JavaScript), else `text/plain`. Other bytes
/// are `application/octet-stream`; an empty file is what it is declared to be.
public enum ContentSniffer {
    /// How many first bytes ``type(of:declared:)`` looks at.
    public static let headLength = 512

    /// The type `head`, a file's first bytes (``headLength`` of them, or the whole file when it is shorter), shows,
    /// given the type the uploader declared (nil or `application/octet-stream` when none).
    public static func type(of head: [UInt8], declared: String?) -> String {
        let declaredEssence = declared.map(essence).flatMap { $0 == "application/octet-stream" || $0.isEmpty ? nil : $0 }
        if head.isEmpty { return declaredEssence ?? "application/octet-stream" }
        if let format = format(of: head) {
            if let declaredEssence, let kind = declaredEssence.split(separator: "/").first,
                format.kinds.contains(String(kind))
            {
                return declaredEssence
            }
            return format.type
        }
        guard isText(head) else { return "application/octet-stream" }
        if beginsAsHTML(head) { return "text/html" }
        if let declaredEssence, isTextual(declaredEssence) { return declaredEssence }
        return "text/plain"
    }

    /// A type's `type/subtype`, lowercased, without parameters.
    public static func essence(_ type: String) -> String {
        (type.split(separator: ";", omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters(in: .whitespaces).lowercased()
    }

    /// A recognised format: its type, and the kinds (top-level types) a declared type may name for it to stand.
    struct Format: Equatable {
        var type: String
        var kinds: Set<String>
    }

    private static let media: Set<String> = ["video", "audio"]

    /// The format whose signature `head` begins with, or nil.
    static func format(of head: [UInt8]) -> Format? {
        func at(_ offset: Int, _ ascii: String) -> Bool {
            let bytes = Array(ascii.utf8)
            return head.count >= offset + bytes.count && Array(head[offset..<offset + bytes.count]) == bytes
        }
        func bytes(_ offset: Int, _ expected: [UInt8]) -> Bool {
            head.count >= offset + expected.count && Array(head[offset..<offset + expected.count]) == expected
        }
        if bytes(0, [0xFF, 0xD8, 0xFF]) { return Format(type: "image/jpeg", kinds: ["image"]) }
        if bytes(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return Format(type: "image/png", kinds: ["image"]) }
        if at(0, "GIF87a") || at(0, "GIF89a") { return Format(type: "image/gif", kinds: ["image"]) }
        if at(0, "RIFF") {
            if at(8, "WEBP") { return Format(type: "image/webp", kinds: ["image"]) }
            if at(8, "WAVE") { return Format(type: "audio/wav", kinds: ["audio"]) }
            if at(8, "AVI ") { return Format(type: "video/x-msvideo", kinds: media) }
        }
        if at(0, "BM"), head.count >= 18, [12, 40, 52, 56, 64, 108, 124].contains(head[14]), head[15...17].allSatisfy({ $0 == 0 }) {
            return Format(type: "image/bmp", kinds: ["image"])
        }
        if bytes(0, [0x49, 0x49, 0x2A, 0x00]) || bytes(0, [0x4D, 0x4D, 0x00, 0x2A]) {
            return Format(type: "image/tiff", kinds: ["image"])
        }
        if at(0, "8BPS") { return Format(type: "image/vnd.adobe.photoshop", kinds: ["image"]) }
        if at(4, "ftyp"), head.count >= 12, let brand = String(validating: head[8..<12], as: UTF8.self) {
            switch brand {
            case "heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs": return Format(type: "image/heic", kinds: ["image"])
            case "mif1", "msf1": return Format(type: "image/heif", kinds: ["image"])
            case "avif", "avis": return Format(type: "image/avif", kinds: ["image"])
            case "qt  ": return Format(type: "video/quicktime", kinds: media)
            case "M4A ", "M4B ", "M4P ": return Format(type: "audio/mp4", kinds: media)
            case _ where brand.hasPrefix("3g2"): return Format(type: "video/3gpp2", kinds: media)
            case _ where brand.hasPrefix("3gp"): return Format(type: "video/3gpp", kinds: media)
            default: return Format(type: "video/mp4", kinds: media)
            }
        }
        if bytes(0, [0x1A, 0x45, 0xDF, 0xA3]) {
            let webm = head.prefix(64).indices.contains { at($0, "webm") }
            return Format(type: webm ? "video/webm" : "video/x-matroska", kinds: media)
        }
        if bytes(0, [0x00, 0x00, 0x01, 0xBA]) || bytes(0, [0x00, 0x00, 0x01, 0xB3]) {
            return Format(type: "video/mpeg", kinds: media)
        }
        // MPEG transport streams: 188-byte packets (192 in M2TS), each starting 0x47.
        if head.count > 188, head[0] == 0x47, head[188] == 0x47 { return Format(type: "video/mp2t", kinds: media) }
        if head.count > 196, head[4] == 0x47, head[196] == 0x47 { return Format(type: "video/mp2t", kinds: media) }
        if at(0, "FLV"), head.count > 3, head[3] == 1 { return Format(type: "video/x-flv", kinds: media) }
        if bytes(0, [0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11]) { return Format(type: "video/x-ms-asf", kinds: media) }
        if at(0, ".RMF") { return Format(type: "application/vnd.rn-realmedia", kinds: media) }
        if at(0, "OggS") { return Format(type: "audio/ogg", kinds: media) }
        if at(0, "fLaC") { return Format(type: "audio/flac", kinds: ["audio"]) }
        if at(0, "#!AMR") { return Format(type: "audio/amr", kinds: ["audio"]) }
        if at(0, "ID3") { return Format(type: "audio/mpeg", kinds: ["audio"]) }
        if head.count >= 2, head[0] == 0xFF {
            // ADTS (AAC) frames have layer bits 00; MPEG audio frames (MP3) have a layer.
            if head[1] & 0xF6 == 0xF0 { return Format(type: "audio/aac", kinds: ["audio"]) }
            if head[1] & 0xE0 == 0xE0, head[1] & 0x06 != 0 { return Format(type: "audio/mpeg", kinds: ["audio"]) }
        }
        if at(0, "%PDF-") { return Format(type: "application/pdf", kinds: []) }
        if bytes(0, [0x50, 0x4B, 0x03, 0x04]) { return Format(type: "application/zip", kinds: []) }
        if bytes(0, [0x1F, 0x8B]) { return Format(type: "application/gzip", kinds: []) }
        if bytes(0, [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C]) { return Format(type: "application/x-7z-compressed", kinds: []) }
        if at(0, "Rar!") { return Format(type: "application/vnd.rar", kinds: []) }
        if at(0, "wOFF") { return Format(type: "font/woff", kinds: ["font"]) }
        if at(0, "wOF2") { return Format(type: "font/woff2", kinds: ["font"]) }
        return nil
    }

    /// Whether the bytes hold no byte that text does not (the WHATWG sniffing rule's binary bytes); UTF-16 with its
    /// byte order mark is text.
    static func isText(_ head: [UInt8]) -> Bool {
        if bytesAt(head, [0xFE, 0xFF]) || bytesAt(head, [0xFF, 0xFE]) { return true }
        return !head.contains { $0 <= 0x08 || $0 == 0x0B || (0x0E...0x1A).contains($0) || (0x1C...0x1F).contains($0) }
    }

    /// Whether text begins (after a byte order mark and white space) with what begins a web page.
    static func beginsAsHTML(_ head: [UInt8]) -> Bool {
        var start = bytesAt(head, [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while start < head.count, [0x09, 0x0A, 0x0C, 0x0D, 0x20].contains(head[start]) { start += 1 }
        let rest = head[start...].map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }
        let tags = [
            "<!DOCTYPE HTML", "<HTML", "<HEAD", "<SCRIPT", "<IFRAME", "<H1", "<DIV", "<FONT", "<TABLE", "<A", "<STYLE",
            "<TITLE", "<B", "<BODY", "<BR", "<P", "<!--", "<META", "<LINK", "<FORM", "<OBJECT", "<EMBED",
        ]
        return tags.contains { tag in
            let bytes = Array(tag.utf8)
            guard rest.count > bytes.count, Array(rest[0..<bytes.count]) == bytes else { return false }
            // A tag name ends at a space or `>` (`<a` is not `<abbr`); `<!--` is a comment whatever follows.
            return tag == "<!--" || [0x20, 0x3E, 0x09, 0x0A, 0x0C, 0x0D, 0x2F].contains(rest[bytes.count])
        }
    }

    /// Whether a declared type is one text can be: `text/*`, JSON, XML, SVG, JavaScript and their `+json`/`+xml` kin.
    static func isTextual(_ essence: String) -> Bool {
        essence.hasPrefix("text/") || essence.hasSuffix("+json") || essence.hasSuffix("+xml")
            || ["application/json", "application/xml", "application/javascript", "application/x-javascript",
                "application/ecmascript", "application/x-www-form-urlencoded", "application/x-subrip",
                "application/x-sh", "application/yaml", "application/x-yaml", "application/toml", "application/sql",
            ].contains(essence)
    }

    private static func bytesAt(_ head: [UInt8], _ expected: [UInt8]) -> Bool {
        head.count >= expected.count && Array(head[0..<expected.count]) == expected
    }
}

extension PutPolicy {
    /// The type ``mimeLimit`` refuses for a file declared as `declared` whose first bytes are `head`, or nil when it
    /// allows the file: both the type the content shows (``ContentSniffer``) and the declared type, when one is
    /// given, must be allowed.
    public func refusedType(declared: String?, head: [UInt8]) -> String? {
        Self.refusedType(mimeLimit: mimeLimit, declared: declared, head: head)
    }

    /// The type `mimeLimit` refuses for a file declared as `declared` whose first bytes are `head`, or nil (see
    /// ``refusedType(declared:head:)``).
    public static func refusedType(mimeLimit: String?, declared: String?, head: [UInt8]) -> String? {
        guard let mimeLimit, !mimeLimit.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        let given = declared.map(ContentSniffer.essence).flatMap { $0.isEmpty || $0 == "application/octet-stream" ? nil : $0 }
        if let given, !allows(given, mimeLimit: mimeLimit) { return given }
        let shown = ContentSniffer.type(of: head, declared: given)
        return allows(shown, mimeLimit: mimeLimit) ? nil : shown
    }
}
