import FerryCore
import Foundation
import Testing

@Suite("Upload tokens", .timeLimit(.minutes(10)))
struct UploadTokenTests {
    @Test("Qiniu's documented example token is reproduced byte for byte")
    func qiniuKnownAnswer() throws {
        // From Qiniu's upload token documentation; checked with python3 hmac/base64.
        let policy =
            #"{"scope":"my-bucket:sunflower.jpg","deadline":1451491200,"returnBody":"{\"name\":$(fname),\"size\":$(fsize),\"w\":$(imageInfo.width),\"h\":$(imageInfo.height),\"hash\":$(etag)}"}"#
        let token = UploadToken.sign(
            accessKey: "MY_ACCESS_KEY", secretKey: "MY_SECRET_KEY", policyJSON: Array(policy.utf8))
        #expect(
            token == "MY_ACCESS_KEY:wQ4ofysef1R7IKnrziqtomqyDvI=:"
                + "eyJzY29wZSI6Im15LWJ1Y2tldDpzdW5mbG93ZXIuanBnIiwiZGVhZGxpbmUiOjE0NTE0OTEyMDAsInJldHVybkJvZHkiOiJ7XCJuYW1lXCI6JChmbmFtZSksXCJzaXplXCI6JChmc2l6ZSksXCJ3XCI6JChpbWFnZUluZm8ud2lkdGgpLFwiaFwiOiQoaW1hZ2VJbmZvLmhlaWdodCksXCJoYXNoXCI6JChldGFnKX0ifQ=="
        )
        let parsed = try UploadToken.parse(token)
        #expect(parsed.accessKey == "MY_ACCESS_KEY")
        #expect(parsed.policy.bucket == "my-bucket")
        #expect(parsed.policy.key == "sunflower.jpg")
        #expect(parsed.policy.deadline == 1_451_491_200)
        #expect(parsed.policy.returnBody?.hasPrefix(#"{"name":$(fname)"#) == true)
        try parsed.verify(secretKey: "MY_SECRET_KEY", now: Date(timeIntervalSince1970: 1_451_491_200))
    }

    @Test("make encodes the policy as sorted compact JSON with insertOnly as 1 (known answer)")
    func makeKnownAnswer() throws {
        var policy = PutPolicy(scope: "photos:cat.jpg", deadline: Date(timeIntervalSince1970: 1_700_000_000.9))
        policy.insertOnly = true
        policy.fsizeLimit = 1_048_576
        policy.mimeLimit = "image/*"
        let token = UploadToken.make(accessKey: "FKIAFORM", secretKey: "ferry-secret", policy: policy)
        // python3: json.dumps(sort_keys=True, separators=(',',':')), urlsafe_b64encode, hmac sha1.
        #expect(
            token == "FKIAFORM:efffnb1W_FPI0b6Y8QrMdGlMKQ0=:"
                + "eyJkZWFkbGluZSI6MTcwMDAwMDAwMCwiZnNpemVMaW1pdCI6MTA0ODU3NiwiaW5zZXJ0T25seSI6MSwibWltZUxpbWl0IjoiaW1hZ2UvKiIsInNjb3BlIjoicGhvdG9zOmNhdC5qcGcifQ=="
        )
        let parsed = try UploadToken.parse(token)
        #expect(parsed.policy == policy)
        #expect(parsed.policy.insertOnly)
    }

    @Test("verify: right secret passes; wrong secret, tampered policy and passed deadline fail with their codes")
    func verification() throws {
        let policy = PutPolicy(scope: "photos", deadline: Date(timeIntervalSince1970: 2_000_000_000))
        let token = UploadToken.make(accessKey: "AK", secretKey: "SK", policy: policy)
        let parsed = try UploadToken.parse(token)
        try parsed.verify(secretKey: "SK", now: Date(timeIntervalSince1970: 2_000_000_000))
        #expect(parsed.policy.key == nil)
        #expect(parsed.policy.bucket == "photos")
        #expect(throws: UploadTokenError(.badSignature, "The upload token's signature does not match its access key."))
        {
            try parsed.verify(secretKey: "SK2", now: Date(timeIntervalSince1970: 0))
        }
        do throws(UploadTokenError) {
            try parsed.verify(secretKey: "SK", now: Date(timeIntervalSince1970: 2_000_000_001))
            Issue.record("an expired token verified")
        } catch {
            #expect(error.code == .expired)
        }
        // Another policy under the same signature.
        let other = UploadToken.make(
            accessKey: "AK", secretKey: "SK", policy: PutPolicy(scope: "other", deadline: .distantFuture))
        let pieces = token.split(separator: ":")
        let forged = try UploadToken.parse("\(pieces[0]):\(pieces[1]):\(other.split(separator: ":")[2])")
        #expect(throws: UploadTokenError.self) { try forged.verify(secretKey: "SK") }
        // The signature without its padding still verifies (lenient base64), a corrupted one does not.
        let unpadded = try UploadToken.parse(token.replacingOccurrences(of: "=:", with: ":"))
        try unpadded.verify(secretKey: "SK", now: Date(timeIntervalSince1970: 0))
        let corrupted = try UploadToken.parse("AK:AAAA" + pieces[1].dropFirst(4) + ":" + pieces[2])
        #expect(throws: UploadTokenError.self) {
            try corrupted.verify(secretKey: "SK", now: Date(timeIntervalSince1970: 0))
        }
    }

    @Test("parse refuses malformed tokens with code malformed, never quoting them")
    func malformed() {
        let good = UploadToken.make(
            accessKey: "AK", secretKey: "SK", policy: PutPolicy(scope: "b", deadline: .distantFuture))
        let policyPart = String(good.split(separator: ":")[2])
        let noScope = UploadToken.urlSafeBase64(Array(#"{"deadline":1}"#.utf8))
        let emptyScope = UploadToken.urlSafeBase64(Array(#"{"scope":"","deadline":1}"#.utf8))
        let notJSON = UploadToken.urlSafeBase64(Array("hello".utf8))
        for bad in [
            "", "AK", "AK:sig", "AK:sig:\(policyPart):extra", ":sig:\(policyPart)", "AK::\(policyPart)",
            "AK:sig:!!!", "AK:sig:\(noScope)", "AK:sig:\(emptyScope)", "AK:sig:\(notJSON)", "AK:sig:a",
        ] {
            do throws(UploadTokenError) {
                _ = try UploadToken.parse(bad)
                Issue.record("parsed \(bad)")
            } catch {
                #expect(error.code == .malformed)
                #expect(!error.message.contains("sig"))
            }
        }
    }

    @Test("mimeLimit: exact types, type/* wildcards, case and parameters ignored")
    func mimeLimit() {
        var policy = PutPolicy(scope: "b", deadline: .distantFuture)
        #expect(policy.allowsMimeType("anything/at-all"))
        policy.mimeLimit = "image/*;video/mp4"
        #expect(policy.allowsMimeType("image/png"))
        #expect(policy.allowsMimeType("IMAGE/JPEG"))
        #expect(policy.allowsMimeType("video/mp4; codecs=avc1"))
        #expect(!policy.allowsMimeType("video/quicktime"))
        #expect(!policy.allowsMimeType("application/octet-stream"))
        #expect(!policy.allowsMimeType("imagex/png"))
        // Only one type/subtype of tokens: a list a browser may read as its last type, or anything else, is not one.
        for odd in ["image/png, text/html", "image/png,text/html", "image/ png", "image/png/x", "image/", "image", "image/p\u{0}g"] {
            #expect(!policy.allowsMimeType(odd), "\(odd)")
        }
        // `!` entries refuse what they match; with only such entries everything else is accepted.
        policy.mimeLimit = "!image/*; !video/quicktime"
        #expect(policy.allowsMimeType("video/mp4"))
        #expect(policy.allowsMimeType("application/pdf"))
        #expect(!policy.allowsMimeType("image/png"))
        #expect(!policy.allowsMimeType("Video/QuickTime"))
        policy.mimeLimit = "video/*;!video/quicktime"
        #expect(policy.allowsMimeType("video/mp4"))
        #expect(!policy.allowsMimeType("video/quicktime"))
        #expect(!policy.allowsMimeType("image/png"))
        policy.mimeLimit = "!*/*"
        #expect(!policy.allowsMimeType("text/plain"))
    }

    @Test("content sniffing: signatures name their format; a declared type of the same kind stands; text is a page, its declared textual type or text/plain; other bytes are octets")
    func contentSniffing() {
        func ascii(_ text: String, padded: Int = 0) -> [UInt8] { Array(text.utf8) + [UInt8](repeating: 0, count: padded) }
        let riff = { (form: String) in ascii("RIFF") + [0, 0, 0, 0] + ascii(form) }
        let ftyp = { (brand: String) in [0, 0, 0, 0x18] + ascii("ftyp" + brand) }
        let ts = ([0x47] + [UInt8](repeating: 0xFF, count: 187)) + ([0x47] + [UInt8](repeating: 0xFF, count: 187))
        let bmp = ascii("BM") + [UInt8](repeating: 0, count: 12) + [40, 0, 0, 0] + [UInt8](repeating: 0, count: 20)
        let cases: [([UInt8], String)] = [
            ([0xFF, 0xD8, 0xFF, 0xDB], "image/jpeg"), ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "image/png"),
            (ascii("GIF89a"), "image/gif"), (riff("WEBP"), "image/webp"), (riff("WAVE"), "audio/wav"),
            (riff("AVI "), "video/x-msvideo"), (bmp, "image/bmp"), ([0x49, 0x49, 0x2A, 0x00, 8], "image/tiff"),
            (ftyp("heic"), "image/heic"), (ftyp("mif1"), "image/heif"), (ftyp("avif"), "image/avif"),
            (ftyp("qt  "), "video/quicktime"), (ftyp("M4A "), "audio/mp4"), (ftyp("3gp4"), "video/3gpp"),
            (ftyp("isom"), "video/mp4"), (ftyp("mp42"), "video/mp4"),
            ([0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x82, 0x84] + ascii("webm"), "video/webm"),
            ([0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x82, 0x88] + ascii("matroska"), "video/x-matroska"),
            ([0x00, 0x00, 0x01, 0xBA, 0x44], "video/mpeg"), (ts, "video/mp2t"), (ascii("FLV") + [1, 5], "video/x-flv"),
            (ascii("OggS"), "audio/ogg"), (ascii("fLaC"), "audio/flac"), (ascii("ID3") + [4, 0], "audio/mpeg"),
            ([0xFF, 0xFB, 0x90, 0x64], "audio/mpeg"), ([0xFF, 0xF1, 0x50, 0x80], "audio/aac"), (ascii("#!AMR\n"), "audio/amr"),
            (ascii("%PDF-1.7"), "application/pdf"), ([0x50, 0x4B, 0x03, 0x04, 0x14], "application/zip"),
            ([0x1F, 0x8B, 0x08], "application/gzip"), (ascii("caff") + [0, 1, 0, 0], "audio/x-caf"),
            (ascii("FORM") + [0, 0, 0, 4] + ascii("AIFF"), "audio/aiff"), ([0x0B, 0x77, 0x3A, 0x10], "audio/ac3"),
            ([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A, 0], "image/jp2"),
            ([0, 0, 1, 0, 1, 0, 16, 16, 0, 0] + [UInt8](repeating: 1, count: 12), "image/vnd.microsoft.icon"),
            // UTF-16 text with its byte order mark is text (FF FE could begin an MPEG audio frame); a frame's header
            // must name a bitrate and a sampling rate.
            ([0xFF, 0xFE] + Array("hello, srt".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "text/plain"),
            ([0xFE, 0xFF] + Array("<html>".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }, "text/html"),
            ([0xFF, 0xFB, 0xF0, 0x00], "application/octet-stream"), ([0xFF, 0xFB, 0x9C, 0x00], "application/octet-stream"),
            // Text: a page whatever its case and leading space, else plain.
            (Array("\n  <!doctype HTML><p>".utf8), "text/html"), (Array("<a href=x>y</a>".utf8), "text/html"),
            (Array("<!-- x -->".utf8), "text/html"), (Array("<abbr>not a page</abbr>".utf8), "text/plain"),
            (Array("hello, world\r\n".utf8), "text/plain"), ([0xEF, 0xBB, 0xBF] + Array("<html>".utf8), "text/html"),
            // Other bytes.
            ([0x00, 0x01, 0x02, 0x03], "application/octet-stream"), (ascii("BMW is not a bitmap", padded: 32), "application/octet-stream"),
            (Array("BMW is not a bitmap".utf8), "text/plain"),
        ]
        for (head, type) in cases {
            #expect(ContentSniffer.type(of: head, declared: nil) == type, "\(head.prefix(12)) → \(type)")
            #expect(ContentSniffer.type(of: head, declared: "application/octet-stream") == type)
        }
        // The declared type stands for a format of its kind only.
        #expect(ContentSniffer.type(of: ftyp("isom"), declared: "video/quicktime") == "video/quicktime")
        #expect(ContentSniffer.type(of: ftyp("isom"), declared: "audio/mp4; codecs=mp4a") == "audio/mp4")
        #expect(ContentSniffer.type(of: [0xFF, 0xD8, 0xFF], declared: "image/jpg") == "image/jpg")
        #expect(ContentSniffer.type(of: [0xFF, 0xD8, 0xFF], declared: "video/mp4") == "image/jpeg")
        #expect(ContentSniffer.type(of: ascii("%PDF-"), declared: "application/zip") == "application/pdf")
        #expect(ContentSniffer.type(of: Array("{\"a\":1}".utf8), declared: "application/json") == "application/json")
        #expect(ContentSniffer.type(of: Array("<svg xmlns='http://www.w3.org/2000/svg'/>".utf8), declared: "image/svg+xml") == "image/svg+xml")
        // Markup declared as SVG is SVG only when its root element is svg, whatever comes before it or is in it.
        for (text, svg) in [
            ("<?xml version='1.0'?><html><script/>", false), ("<?xml version='1.0'?><!-- <svg --> <html><script/>", false),
            ("<?x <svg?><html/>", false), ("<?xml version='1.0'?><html title='&lt;svg <svg'/>", false), ("<x:html><!--<svg--></x:html>", false),
            ("alert(1)//<svg", false), ("<!DOCTYPE svg [<!ENTITY x '<svg'>]><html/>", false), ("<svg", false),
            ("\n<?xml version='1.0'?>\n<!-- made -->\n<!DOCTYPE svg PUBLIC 'a' 'b'>\n<svg xmlns='http://www.w3.org/2000/svg'/>", true),
            ("<svg:svg xmlns:svg='http://www.w3.org/2000/svg'></svg:svg>", true), ("<svg>", true), ("<svgx/>", false),
            // An svg element of XHTML's namespace is XHTML; a prefix needs SVG's binding.
            ("<svg xmlns=\"http://www.w3.org/1999/xhtml\"><script>alert(1)</script></svg>", false),
            ("<h:svg xmlns:h='http://www.w3.org/1999/xhtml'><h:script/></h:svg>", false), ("<s:svg/>", false),
            ("<svg xmlns='http://www.w3.org/2000/svg' xmlns:x='http://www.w3.org/1999/xhtml'><x:script/></svg>", true),
            // A doctype's literal holding markup characters, which parsers read differently, is not skipped.
            ("<!DOCTYPE svg SYSTEM \"x> <svg \"><html xmlns='http://www.w3.org/1999/xhtml'/>", false),
            ("<?xml version='1.0'?><!DOCTYPE x SYSTEM '> <svg>'><html/>", false),
            // A start tag longer than what is read shows SVG's binding before the cut.
            ("<svg a='" + String(repeating: "x", count: 5000) + "' xmlns='http://www.w3.org/1999/xhtml'>", false),
            ("<svg xmlns='http://www.w3.org/2000/svg' a='" + String(repeating: "x", count: 5000) + "'>", true),
        ] {
            let type = ContentSniffer.type(of: Array(text.utf8.prefix(ContentSniffer.headLength)), declared: "image/svg+xml")
            #expect(type == (svg ? "image/svg+xml" : "text/plain"), "\(text.prefix(80))")
        }
        // UTF-16 is text only when well formed: no lone surrogate, no NUL or control characters.
        #expect(ContentSniffer.type(of: [0xFF, 0xFE, 0x00, 0xD8, 0x41, 0x00], declared: nil) == "application/octet-stream")
        #expect(ContentSniffer.type(of: [0xFF, 0xFE, 0x00, 0x00, 0x00, 0x00], declared: nil) == "application/octet-stream")
        #expect(ContentSniffer.type(of: [0xFF, 0xFE, 0x3D, 0xD8, 0x00, 0xDE], declared: nil) == "text/plain")
        let utf16Text: [UInt8] = [0xFF, 0xFE] + Array("1\n00:00".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        #expect(ContentSniffer.type(of: utf16Text, declared: "application/x-subrip") == "application/x-subrip")
        #expect(ContentSniffer.type(of: Array("<html>".utf8), declared: "image/svg+xml") == "text/html")
        // SVG is read as UTF-8 when checked: a declared charset a browser would read otherwise does not stand.
        #expect(ContentSniffer.type(of: Array("<svg>".utf8), declared: "image/svg+xml; charset=iso-2022-jp") == "text/plain")
        #expect(ContentSniffer.type(of: Array("<svg>".utf8), declared: "image/svg+xml; charset=\"UTF-8\"") == "image/svg+xml")
        #expect(ContentSniffer.type(of: Array("plain".utf8), declared: "image/png") == "text/plain")
        #expect(ContentSniffer.type(of: [], declared: "image/png") == "image/png")
        #expect(ContentSniffer.type(of: [], declared: nil) == "application/octet-stream")

        // A limit: both the declared type, when one is given, and the shown type must pass.
        var policy = PutPolicy(scope: "b", deadline: .distantFuture)
        #expect(policy.refusedType(declared: "text/html", head: Array("<html>".utf8)) == nil)
        policy.mimeLimit = "image/*"
        #expect(policy.refusedType(declared: "image/png", head: Array("<html>".utf8)) == "text/html")
        #expect(policy.refusedType(declared: "text/plain", head: [0xFF, 0xD8, 0xFF]) == "text/plain")
        #expect(policy.refusedType(declared: nil, head: [0xFF, 0xD8, 0xFF]) == nil)
        #expect(policy.refusedType(declared: "application/octet-stream", head: [0xFF, 0xD8, 0xFF]) == nil)
        #expect(policy.refusedType(declared: "image/png", head: [0xFF, 0xD8, 0xFF]) == nil)
        #expect(policy.refusedType(declared: "image/png", head: [0x00, 0x00]) == "application/octet-stream")
        // One type only: a comma outside a quoted value makes a list a browser reads as its last type.
        let gif = ascii("GIF89a") + Array("<script>".utf8)
        #expect(policy.refusedType(declared: "image/gif;,text/html", head: gif) == "image/gif;,text/html")
        #expect(policy.refusedType(declared: "image/gif; name=\"a,b\"", head: gif) == nil)
        #expect(policy.refusedType(declared: "image/gif; name=\"a\\\",b\"", head: gif) == nil)
        #expect(policy.refusedType(declared: "image/gif; name=\"a\\\"\",b", head: gif) != nil)
        #expect(!policy.allowsMimeType("image/png;\u{1}"))
        // A format's other names: sound alone in MP4 or WebM, WMV as ASF, APNG as PNG.
        policy.mimeLimit = "audio/*"
        #expect(policy.refusedType(declared: nil, head: ftyp("isom")) == nil)
        #expect(policy.refusedType(declared: nil, head: [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42, 0x82, 0x84] + ascii("webm")) == nil)
        #expect(policy.refusedType(declared: nil, head: [0xFF, 0xD8, 0xFF]) == "image/jpeg")
        policy.mimeLimit = "video/x-ms-wmv;image/apng"
        #expect(policy.refusedType(declared: nil, head: [0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11]) == nil)
        #expect(policy.refusedType(declared: nil, head: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) == nil)
        #expect(policy.refusedType(declared: nil, head: ftyp("isom")) == "video/mp4")
        // The names uploaders and browsers use for the same types pass as their common names do.
        policy.mimeLimit = "audio/x-wav;image/jpg;audio/mp4"
        #expect(policy.refusedType(declared: nil, head: riff("WAVE")) == nil)
        #expect(policy.refusedType(declared: "audio/wave", head: riff("WAVE")) == nil)
        #expect(policy.refusedType(declared: nil, head: [0xFF, 0xD8, 0xFF]) == nil)
        #expect(policy.refusedType(declared: "image/pjpeg", head: [0xFF, 0xD8, 0xFF]) == nil)
        #expect(policy.refusedType(declared: "audio/x-m4a", head: ftyp("M4A ")) == nil)
        #expect(policy.refusedType(declared: "audio/x-m4a;,text/html", head: ftyp("M4A ")) == "audio/x-m4a;,text/html")
        #expect(policy.refusedType(declared: nil, head: ascii("fLaC")) == "audio/flac")
        policy.mimeLimit = "  "
        #expect(policy.refusedType(declared: "image/png", head: [0x00]) == nil)
    }

    @Test("content sniffing takes any bytes: signature prefixes cut at every length and random bytes, seeded, name a type")
    func contentSniffingAnyBytes() {
        var generator = SplitMix64(state: 0x5eed_f00d)
        let prefixes: [[UInt8]] = [
            [0xFF, 0xFE], [0xFE, 0xFF], [0xEF, 0xBB, 0xBF], [0xFF, 0xD8, 0xFF], Array("RIFF".utf8), Array("BM".utf8),
            [0, 0, 0, 0x18] + Array("ftyp".utf8), [0x1A, 0x45, 0xDF, 0xA3], [0x47], [0, 0, 1, 0], Array("<?xml".utf8),
            Array("<svg".utf8), Array("<!--".utf8), Array("<!DOCTYPE".utf8), [0xFF, 0xFB], [0xFF, 0xF1], [],
        ]
        for round in 0..<20_000 {
            let prefix = prefixes[round % prefixes.count]
            let length = Int.random(in: 0...600, using: &generator)
            let head = Array((prefix + (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }).prefix(
                Int.random(in: 0...(prefix.count + length), using: &generator)))
            let declared = ["image/svg+xml", "audio/mp4", nil, "text/plain"][round % 4]
            #expect(!ContentSniffer.type(of: head, declared: declared).isEmpty)
            _ = PutPolicy.refusedType(mimeLimit: "image/*;!image/svg+xml", declared: declared, head: head)
        }
    }

    @Test("policy problems: a negative fsizeLimit, a callbackUrl that is not one to four http(s) URLs with a host")
    func policyProblems() {
        var policy = PutPolicy(scope: "b", deadline: .distantFuture)
        #expect(policy.problem == nil)
        policy.fsizeLimit = 0
        #expect(policy.problem == nil)
        policy.fsizeLimit = -1
        #expect(policy.problem?.contains("fsizeLimit") == true)
        policy.fsizeLimit = nil
        for bad in [
            "ftp://x/cb", "cb", "http://", ";", " ; ", "http://a/1;javascript:x", "http://a;http://b;http://c;http://d;http://e",
            "http://127.0.0.1:99999/x", "http://a:65536/x", "http://a/ok;https://b:70000/x", "http://a:0/x",
        ] {
            policy.callbackUrl = bad
            #expect(policy.problem?.contains("callbackUrl") == true, "\(bad)")
        }
        for good in ["", "http://a/cb", " https://a/cb ; http://b:8080/x?y=1 ", "http://a;http://b;http://c;http://d", "http://a:65535/x"] {
            policy.callbackUrl = good
            #expect(policy.problem == nil, "\(good)")
        }
        policy.callbackUrl = "http://a/1; ;http://b/2"
        #expect(policy.callbackURLs == ["http://a/1", "http://b/2"])
    }

    @Test("policy JSON: Qiniu's insertOnly number or a boolean decode; absent options are left out")
    func policyCoding() throws {
        let decoded = try JSONDecoder().decode(
            PutPolicy.self,
            from: Data(#"{"scope":"b:k","deadline":5,"insertOnly":0,"callbackUrl":"http://x/cb","unknown":true}"#.utf8))
        #expect(!decoded.insertOnly)
        #expect(decoded.callbackUrl == "http://x/cb")
        let boolean = try JSONDecoder().decode(
            PutPolicy.self, from: Data(#"{"scope":"b","deadline":5,"insertOnly":true}"#.utf8))
        #expect(boolean.insertOnly)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(
            decoding: try encoder.encode(PutPolicy(scope: "b", deadline: Date(timeIntervalSince1970: 5))), as: UTF8.self
        )
        #expect(json == #"{"deadline":5,"scope":"b"}"#)
    }

    @Test("callback Authorization: QBox AK:sign over path?query\\nbody (known answer), verified and tamper-evident")
    func callbackSignature() {
        let body = Array("bucket=photos&key=cat.jpg".utf8)
        let header = FormCallbackSignature.authorization(
            accessKey: "FKIAFORM", secretKey: "ferry-secret", path: "/uploaded", query: "app=photos", body: body)
        // python3: urlsafe_b64encode(hmac.new(b"ferry-secret", b"/uploaded?app=photos\nbucket=photos&key=cat.jpg", sha1))
        #expect(header == "QBox FKIAFORM:r-2w0G8nC2caSupDYKmwftOJlaY=")
        let noQuery = FormCallbackSignature.authorization(
            accessKey: "FKIAFORM", secretKey: "ferry-secret", path: "/uploaded", query: nil, body: body)
        #expect(noQuery == "QBox FKIAFORM:CpyaQFr6FOY4z22mXMyrpgCr3S8=")
        #expect(
            FormCallbackSignature.verify(
                authorization: header, secretKey: "ferry-secret", path: "/uploaded", query: "app=photos", body: body))
        #expect(
            !FormCallbackSignature.verify(
                authorization: header, secretKey: "other", path: "/uploaded", query: "app=photos", body: body))
        #expect(
            !FormCallbackSignature.verify(
                authorization: header, secretKey: "ferry-secret", path: "/uploaded", query: nil, body: body))
        #expect(
            !FormCallbackSignature.verify(
                authorization: header, secretKey: "ferry-secret", path: "/uploaded", query: "app=photos",
                body: body + [0x20]))
        #expect(
            !FormCallbackSignature.verify(
                authorization: "Bearer x", secretKey: "ferry-secret", path: "/uploaded", query: nil, body: body))
    }
}
