/// The type a file's first bytes show it to be, which an upload token's `mimeLimit` is matched against (Qiniu detects
/// the type from the content: the type an uploader declares is its own word).
///
/// A recognised format (JPEG, PNG, GIF, WebP, BMP, TIFF, ICO, JPEG 2000, HEIF/AVIF, the MP4 and QuickTime family,
/// Matroska/WebM, AVI, MPEG program and transport streams, FLV, ASF, Ogg, FLAC, WAV, AIFF, CAF, MP3, AAC, AC-3, AMR, PDF
/// and a few archives) is its type, unless the declared type names the same kind of medium (`video/quicktime` for an
/// MP4-family file, `audio/mp4` for one without video, `image/jpg`): the declared type then stands. Text (UTF-8, or
/// well-formed UTF-16 with its byte order mark) is `text/html` when it begins as a web page, the declared type when
/// that is a textual one (`text/*`, JSON, XML, JavaScript; SVG only for a document whose root is SVG's `svg` element),
/// else `text/plain`. Other bytes are `application/octet-stream`; an empty file is what it is declared to be.
public enum ContentSniffer {
    /// How many first bytes ``type(of:declared:)`` looks at: enough for the start tag of an SVG drawing program's
    /// files.
    public static let headLength = 4096

    /// The type `head`, a file's first bytes (``headLength`` of them, or the whole file when it is shorter), shows,
    /// given the type the uploader declared (nil or `application/octet-stream` when none).
    public static func type(of head: [UInt8], declared: String?) -> String {
        names(of: head, declared: declared)[0]
    }

    /// The type `head` shows (``type(of:declared:)``) first, then the other names its format goes by.
    static func names(of head: [UInt8], declared: String?) -> [String] {
        let declaredEssence = declared.map(essence).flatMap { $0 == "application/octet-stream" || $0.isEmpty ? nil : $0 }
        if head.isEmpty { return [declaredEssence ?? "application/octet-stream"] }
        // Text with a UTF-16 byte order mark is text, though FF FE could begin an MPEG audio frame.
        let utf16 = bytesAt(head, [0xFF, 0xFE]) || bytesAt(head, [0xFE, 0xFF])
        if !utf16, let format = format(of: head) {
            if let declaredEssence, let kind = declaredEssence.split(separator: "/").first,
                format.kinds.contains(String(kind))
            {
                return [declaredEssence] + otherNames(of: declaredEssence)
            }
            let names = [format.type] + format.alternatives
            return names + names.flatMap(otherNames(of:)).filter { !names.contains($0) }
        }
        guard let text = textView(head) else { return ["application/octet-stream"] }
        if beginsAsHTML(text) { return ["text/html"] }
        if let declaredEssence, isTextual(declaredEssence) {
            // SVG only when the document's root element is svg: other markup declared as SVG is not an image.
            if declaredEssence != "image/svg+xml" || (rootIsSVG(text) && readsAsChecked(declared)) { return [declaredEssence] }
        }
        return ["text/plain"]
    }

    /// Other names of the same type that uploaders and browsers use (`audio/x-wav` for `audio/wav`, `image/jpg`
    /// for `image/jpeg`): its common name and that name's other aliases.
    static func otherNames(of type: String) -> [String] {
        let common = aliases[type] ?? type
        return ([common] + aliases.filter { $0.value == common }.map(\.key).sorted()).filter { $0 != type }
    }

    /// Aliases and the common name each stands for.
    static let aliases: [String: String] = [
        "audio/x-wav": "audio/wav", "audio/wave": "audio/wav", "audio/vnd.wave": "audio/wav",
        "audio/x-aiff": "audio/aiff", "audio/aifc": "audio/aiff", "audio/x-flac": "audio/flac", "audio/mp3": "audio/mpeg",
        "audio/x-mp3": "audio/mpeg", "audio/x-mpeg": "audio/mpeg", "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
        "audio/x-m4a": "audio/mp4", "audio/m4a": "audio/mp4", "video/avi": "video/x-msvideo", "video/msvideo": "video/x-msvideo",
        "image/x-ms-bmp": "image/bmp", "image/x-bmp": "image/bmp", "audio/x-aac": "audio/aac", "audio/aacp": "audio/aac",
        "audio/x-ac3": "audio/ac3", "audio/vorbis": "audio/ogg", "image/x-tiff": "image/tiff",
        "image/x-png": "image/png", "video/mkv": "video/x-matroska",
        "video/flv": "video/x-flv", "video/mpg": "video/mpeg",
        "video/mpeg2ts": "video/mp2t", "image/x-icon": "image/vnd.microsoft.icon",
    ]

    /// Whether the first element of XML text, after its declaration, comments, processing instructions and a doctype
    /// (without an internal subset, and without `<`, `>` or `[` in its quoted literals, which parsers disagree on),
    /// is `svg` in SVG's namespace: unprefixed with no `xmlns` or SVG's, or prefixed with the prefix bound to SVG's
    /// namespace in that tag. (An `svg` element of another namespace, XHTML's, is not an image.)
    static func rootIsSVG(_ text: [UInt8]) -> Bool {
        var index = bytesAt(text, [0xEF, 0xBB, 0xBF]) ? 3 : 0
        func skip(past end: String) -> Bool {
            let needle = Array(end.utf8)
            while index + needle.count <= text.count {
                if text[index..<index + needle.count].elementsEqual(needle) { index += needle.count; return true }
                index += 1
            }
            return false
        }
        /// Moves past a doctype: false at an internal subset, at markup characters in a literal, or at its end.
        func skipDoctype() -> Bool {
            var quote: UInt8?
            while index < text.count {
                let byte = text[index]
                index += 1
                if let open = quote {
                    if byte == open { quote = nil } else if byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "[") { return false }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == UInt8(ascii: "[") || byte == UInt8(ascii: "<") {
                    return false
                } else if byte == UInt8(ascii: ">") {
                    return true
                }
            }
            return false
        }
        while index < text.count {
            if [0x09, 0x0A, 0x0D, 0x20].contains(text[index]) { index += 1; continue }
            guard text[index] == UInt8(ascii: "<"), index + 1 < text.count else { return false }
            let rest = text[(index + 1)...]
            if rest.starts(with: "!--".utf8) {
                guard skip(past: "-->") else { return false }
            } else if rest.starts(with: "?".utf8) {
                guard skip(past: "?>") else { return false }
            } else if rest.starts(with: "!".utf8) {
                index += 2
                guard skipDoctype() else { return false }
            } else {
                return startTagIsSVG(rest)
            }
        }
        return false
    }

    /// Whether a start tag (the bytes after its `<`) opens an `svg` element in SVG's namespace.
    private static func startTagIsSVG(_ tag: ArraySlice<UInt8>) -> Bool {
        let space: [UInt8] = [0x09, 0x0A, 0x0D, 0x20]
        let name = tag.prefix { !(space + [0x2F, 0x3E]).contains($0) }
        let parts = name.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard parts.count <= 2, parts.last?.elementsEqual("svg".utf8) == true, name.count < tag.count else { return false }
        let binding = parts.count == 2 ? "xmlns:" + String(decoding: parts[0], as: UTF8.self) : "xmlns"
        // The tag's attributes, up to its end outside quotes: every binding of the element's prefix must be SVG's.
        var attributes: [(name: String, value: String)] = []
        var index = name.endIndex
        var closed = false
        while index < tag.endIndex {
            while index < tag.endIndex, space.contains(tag[index]) { index += 1 }
            guard index < tag.endIndex else { break }
            if tag[index] == UInt8(ascii: ">") || tag[index] == UInt8(ascii: "/") {
                closed = true
                break
            }
            let nameStart = index
            while index < tag.endIndex, !(space + [UInt8(ascii: "="), 0x3E]).contains(tag[index]) { index += 1 }
            let attribute = String(decoding: tag[nameStart..<index], as: UTF8.self)
            while index < tag.endIndex, space.contains(tag[index]) { index += 1 }
            guard index < tag.endIndex else { break }
            guard tag[index] == UInt8(ascii: "=") else { return false }
            index += 1
            while index < tag.endIndex, space.contains(tag[index]) { index += 1 }
            guard index < tag.endIndex else { break }
            guard tag[index] == UInt8(ascii: "\"") || tag[index] == UInt8(ascii: "'") else { return false }
            let quote = tag[index]
            index += 1
            let valueStart = index
            while index < tag.endIndex, tag[index] != quote { index += 1 }
            guard index < tag.endIndex else { break }
            attributes.append((attribute, String(decoding: tag[valueStart..<index], as: UTF8.self)))
            index += 1
        }
        let bound = attributes.filter { $0.name == binding }
        guard bound.allSatisfy({ $0.value == "http://www.w3.org/2000/svg" }) else { return false }
        // A tag cut by the end of what was read shows SVG's binding before the cut (a second, later binding would make
        // the document malformed); a whole unprefixed tag without one is of no namespace, not XHTML's.
        return (parts.count == 1 && closed) || !bound.isEmpty
    }

    /// Whether text declared as `declared` is read by a browser as it was checked: no `charset` parameter, or UTF-8's
    /// or ASCII's.
    static func readsAsChecked(_ declared: String?) -> Bool {
        guard let declared else { return true }
        for parameter in declared.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard pair.count == 2, pair[0] == "charset" else { continue }
            let value = pair[1].filter { $0 != "\"" && $0 != "'" }
            if !["utf-8", "utf8", "us-ascii", "ascii"].contains(value) { return false }
        }
        return true
    }

    /// Whether `value` can be a stored content type: 1 to 256 printable ASCII characters.
    public static func isUsableType(_ value: String) -> Bool {
        (1...256).contains(value.utf8.count) && value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
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
        /// Other names the same bytes go by (`audio/mp4` for an MP4 file that may hold sound alone, `video/x-ms-wmv`
        /// for ASF): a limit that allows one of them allows the file.
        var alternatives: [String] = []
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
        if bytes(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            return Format(type: "image/png", kinds: ["image"], alternatives: ["image/apng"])
        }
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
            case "M4V ", "M4VH", "M4VP": return Format(type: "video/x-m4v", kinds: media, alternatives: ["video/mp4"])
            case _ where brand.hasPrefix("3g2"): return Format(type: "video/3gpp2", kinds: media, alternatives: ["audio/3gpp2"])
            case _ where brand.hasPrefix("3gp"): return Format(type: "video/3gpp", kinds: media, alternatives: ["audio/3gpp"])
            default: return Format(type: "video/mp4", kinds: media, alternatives: ["audio/mp4", "video/x-m4v"])
            }
        }
        if bytes(0, [0x1A, 0x45, 0xDF, 0xA3]) {
            let webm = head.prefix(64).indices.contains { at($0, "webm") }
            return webm
                ? Format(type: "video/webm", kinds: media, alternatives: ["audio/webm"])
                : Format(type: "video/x-matroska", kinds: media, alternatives: ["audio/x-matroska"])
        }
        if bytes(0, [0x00, 0x00, 0x01, 0xBA]) || bytes(0, [0x00, 0x00, 0x01, 0xB3]) {
            return Format(type: "video/mpeg", kinds: media)
        }
        // MPEG transport streams: 188-byte packets (192 in M2TS), each starting 0x47.
        if head.count > 188, head[0] == 0x47, head[188] == 0x47 { return Format(type: "video/mp2t", kinds: media) }
        if head.count > 196, head[4] == 0x47, head[196] == 0x47 { return Format(type: "video/mp2t", kinds: media) }
        if at(0, "FLV"), head.count > 3, head[3] == 1 { return Format(type: "video/x-flv", kinds: media) }
        if bytes(0, [0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11]) {
            return Format(type: "video/x-ms-asf", kinds: media, alternatives: ["video/x-ms-wmv", "audio/x-ms-wma"])
        }
        if at(0, ".RMF") { return Format(type: "application/vnd.rn-realmedia", kinds: media) }
        if at(0, "OggS") { return Format(type: "audio/ogg", kinds: media, alternatives: ["video/ogg", "application/ogg"]) }
        if at(0, "fLaC") { return Format(type: "audio/flac", kinds: ["audio"]) }
        if at(0, "caff") { return Format(type: "audio/x-caf", kinds: ["audio"]) }
        if at(0, "FORM"), at(8, "AIFF") || at(8, "AIFC") { return Format(type: "audio/aiff", kinds: ["audio"]) }
        if bytes(0, [0x0B, 0x77]) { return Format(type: "audio/ac3", kinds: ["audio"]) }
        if bytes(0, [0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) {
            return Format(type: "image/jp2", kinds: ["image"])
        }
        // An icon directory: reserved 0, type 1, at least one image, each image entry's reserved byte 0.
        if bytes(0, [0x00, 0x00, 0x01, 0x00]), head.count >= 22, head[4] | head[5] != 0, head[9] == 0 {
            return Format(type: "image/vnd.microsoft.icon", kinds: ["image"], alternatives: ["image/x-icon"])
        }
        if at(0, "#!AMR") { return Format(type: "audio/amr", kinds: ["audio"]) }
        if at(0, "ID3") { return Format(type: "audio/mpeg", kinds: ["audio"]) }
        if head.count >= 4, head[0] == 0xFF {
            // ADTS (AAC) frames have layer bits 00 and a sampling rate index below 13; MPEG audio frames (MP3) a
            // version, a layer, a bitrate index other than 15 and a sampling rate index other than 3.
            if head[1] & 0xF6 == 0xF0, (head[2] >> 2) & 0x0F < 13 { return Format(type: "audio/aac", kinds: ["audio"]) }
            if head[1] & 0xE0 == 0xE0, (head[1] >> 3) & 0x03 != 1, (head[1] >> 1) & 0x03 != 0, head[2] >> 4 != 0x0F,
                (head[2] >> 2) & 0x03 != 3
            {
                return Format(type: "audio/mpeg", kinds: ["audio"])
            }
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

    /// The bytes as text, or nil when they hold a byte text does not (the WHATWG sniffing rule's binary bytes):
    /// UTF-8 as it is, UTF-16 with its byte order mark as the low bytes of its code units (enough to see markup).
    static func textView(_ head: [UInt8]) -> [UInt8]? {
        let units: [UInt8]
        let littleEndian = bytesAt(head, [0xFF, 0xFE])
        if littleEndian || bytesAt(head, [0xFE, 0xFF]) {
            let codeUnits: [UInt16] = stride(from: 2, to: head.count - 1, by: 2).map { (offset: Int) -> UInt16 in
                let (high, low) = littleEndian ? (head[offset + 1], head[offset]) : (head[offset], head[offset + 1])
                return UInt16(high) << 8 | UInt16(low)
            }
            // Well-formed UTF-16: surrogates in pairs (a pair cut by the end of the head is let be).
            var index = 0
            while index < codeUnits.count {
                let unit = codeUnits[index]
                if (0xD800...0xDBFF).contains(unit) {
                    if index + 1 < codeUnits.count {
                        guard (0xDC00...0xDFFF).contains(codeUnits[index + 1]) else { return nil }
                        index += 1
                    }
                } else if (0xDC00...0xDFFF).contains(unit) || unit == 0xFFFE || unit == 0xFFFF {
                    return nil
                }
                index += 1
            }
            units = codeUnits.map { $0 < 0x80 ? UInt8($0) : 0x7F }
        } else {
            units = head
        }
        let binary = units.contains { $0 <= 0x08 || $0 == 0x0B || (0x0E...0x1A).contains($0) || (0x1C...0x1F).contains($0) }
        return binary ? nil : units
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
        let given = declared.flatMap {
            let essence = ContentSniffer.essence($0)
            return essence.isEmpty || essence == "application/octet-stream" ? nil : $0
        }
        // The declared type passes as it is or under another of its names (`audio/x-m4a` for `audio/mp4`), when it is
        // one type.
        if let given, !allows(given, mimeLimit: mimeLimit),
            !(isOneType(given) && ContentSniffer.otherNames(of: ContentSniffer.essence(given)).contains {
                allows($0, mimeLimit: mimeLimit)
            })
        {
            return given
        }
        let names = ContentSniffer.names(of: head, declared: given)
        return names.contains { allows($0, mimeLimit: mimeLimit) } ? nil : names[0]
    }
}
