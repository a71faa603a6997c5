import Crypto
import FerryCore
import FerryTestSupport
import Foundation

extension FuzzRequest {
    /// Host values no client would send. Those with a control character other than tab may be refused by the HTTP
    /// parser; the others reach the routes.
    static let hostileHosts: [String] = [
        "", " ", "a b", "@", "user:pass@127.0.0.1", "[::1", "[::1]:99999", "[fe80::1%25eth0]", "[::1]x", "[", "]",
        "::::",
        "host:99999", "host:-1", "host:", ":", ":80", "127.0.0.1:65536", "127.0.0.1:80:80", "%", "%zz", "%00", "a%20b",
        "\u{00FC}n\u{00EF}c\u{00F6}d\u{00E9}.example", "\u{4F8B}\u{3048}.\u{30C6}\u{30B9}\u{30C8}", "\u{202E}moc.live",
        "\u{FEFF}host", repeated("a", 300), repeated("a", 8000), repeated("x.", 200), "a\tb", "\t", "h/o/s/t",
        "host?x=1",
        "host#f", "http://evil.example", "\\evil", "a\"b", "<x>", "a,b", "1.2.3.4.5", "0x7f.1", "host;x", "{}", "|",
        "^",
        "`", "~", "a\u{7F}b", "a\u{01}b", "a\u{0B}b", "a\u{00}b",
    ]

    static func mutateHost(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        let good = q.host ?? []
        switch r.int(0...19) {
        case 0:
            q.host = nil
            return "no Host"
        case 1:
            let bad = Array(r.pick(hostileHosts).utf8)
            q.extraHosts = [bad]
            return "second Host \(printable(String(decoding: bad, as: UTF8.self), limit: 40))"
        case 2:
            q.host = Array(r.pick(hostileHosts).utf8)
            q.extraHosts = [good]
            return "bad Host \(printable(String(decoding: q.host ?? [], as: UTF8.self), limit: 40)), then the good one"
        case 3:
            q.host = r.pick([[0xFF, 0xFE], [0xC0, 0xAF], [0x61, 0x80, 0x62], [0xED, 0xA0, 0x80]])
            return "Host of invalid UTF-8"
        default:
            q.host = Array(r.pick(hostileHosts).utf8)
            return "Host \(printable(String(decoding: q.host ?? [], as: UTF8.self), limit: 40))"
        }
    }

    static func mutateHeaders(_ q: inout FuzzRequest, _ f: FuzzFixtures, _ r: inout SeededGenerator) -> String {
        let hugeNumber = r.pick([
            "99999999999999999999", "-1", "-99999999999999999999", "18446744073709551616", "9223372036854775808", "1e3",
            "0x10", "", " ", "+1", "\u{0661}\u{0662}",
        ])
        switch r.int(0...33) {
        case 0:
            let size = r.pick([8 << 10, 32 << 10, 60 << 10, 100 << 10])
            q.header("x-fuzz-huge", repeated("a", size))
            return "a header of \(size >> 10) KiB"
        case 1:
            q.header(
                "x-amz-meta-fuzz",
                r.pick(["\u{65E5}\u{672C}\u{8A9E}", "\u{00FC}ber", "\u{1F4A3}", "\u{202E}x", "a\u{00A0}b"]))
            return "non-ASCII metadata value"
        case 2:
            q.rawLines.append(
                Array("x-amz-meta-raw: ".utf8) + r.pick([[0xFF, 0xFE], [0xC0, 0xAF], [0x80], [0xED, 0xA0, 0x80]]))
            return "invalid UTF-8 in a header value"
        case 3:
            q.lateHeaders.append(("Authorization", r.pick(authorizationGarbage)))
            return "an extra Authorization header"
        case 4:
            q.headers.removeAll { $0.name.lowercased() == "authorization" }
            q.lateHeaders.append(("Authorization", r.pick(authorizationGarbage)))
            return "a garbage Authorization header"
        case 5:
            q.header(
                "date", r.pick(["garbage", "", "Mon, 99 Foo 99999 99:99:99 GMT", "Thu, 01 Jan 1970 00:00:00 GMT"]))
            return "bad Date"
        case 6:
            q.lateHeaders.append(
                ("x-amz-date", r.pick(["", "20991301T000000Z", "yesterday", "99999999T999999Z", "20200101"])))
            return "a second, bad x-amz-date"
        case 7:
            q.payloadHash = r.pick([
                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "zz", repeated("g", 64), "",
            ])
            if r.chance(0.6) {
                q.header("content-encoding", "aws-chunked")
                q.header("x-amz-decoded-content-length", r.chance(0.5) ? String(q.body.count) : hugeNumber)
            }
            return "x-amz-content-sha256 \(q.payloadHash ?? "")"
        case 8:
            q.header("x-amz-decoded-content-length", hugeNumber)
            return "x-amz-decoded-content-length \(hugeNumber)"
        case 9:
            let algorithm = r.pick(["crc32", "crc32c", "crc64nvme", "sha1", "sha256"])
            q.header("x-amz-checksum-\(algorithm)", r.pick(["!!!", "", "AAAA", repeated("QUFB", 3000), "AAAAAA=="]))
            return "bad x-amz-checksum-\(algorithm)"
        case 10:
            q.header(
                r.pick([
                    "x-amz-checksum-algorithm", "x-amz-sdk-checksum-algorithm", "x-amz-checksum-type", "x-amz-trailer",
                ]),
                r.pick(["FOO", "crc32", "FULL_OBJECT", "COMPOSITE", "x-amz-checksum-crc32", "", repeated("Z", 500)]))
            return "odd checksum header"
        case 11:
            q.header("content-md5", r.pick(["nope", "", "AAAAAAAAAAAAAAAAAAAAAA==", repeated("A", 1000), "===="]))
            return "bad Content-MD5"
        case 12:
            q.header(
                "range",
                r.pick([
                    "bytes=-", "bytes=5-1", "bytes=99999999999999999999-", "bytes=-99999999999999999999", "items=0-1",
                    "bytes=",
                    (0..<1000).map { "\($0)-\($0)" }.joined(separator: ","), "bytes=0-0,-1", "bytes=--1", "bytes=1-2-3",
                ]))
            return "odd Range"
        case 13:
            q.header(
                r.pick(["if-match", "if-none-match", "if-modified-since", "if-unmodified-since"]),
                r.pick(["*", "\"\"", "garbage", "Mon, 99 Foo 99999 99:99:99 GMT", repeated("\"x\",", 2000), "W/\"x\""]))
            return "odd conditional header"
        case 14:
            q.header(
                "x-amz-copy-source",
                r.pick([
                    "", "/", "%zz", "/\(f.bucket)/\(f.object)?versionId=x", "\(f.bucket)/" + repeated("k", 2000),
                    "/nonexistent/../../etc/passwd", "/\(f.bucket)/%00", "\u{00FC}/\u{00FC}",
                    "/\(f.mediaBucket)/\(f.uploadKey)",
                ]))
            if r.chance(0.4) {
                q.header("x-amz-copy-source-range", r.pick(["bytes=9-1", "bytes=0-99999999999999999999", "x"]))
            }
            return "odd x-amz-copy-source"
        case 15:
            q.header(
                r.pick(["x-amz-tagging", "x-amz-tagging-directive", "x-amz-metadata-directive"]),
                r.pick(["a=%zz&&&=", "BOGUS", "=", repeated("k=v&", 500), "COPY", "REPLACE"]))
            return "odd tagging or directive header"
        case 16:
            q.header("x-amz-meta-big", repeated("m", r.pick([2000, 3000, 30000])))
            return "large metadata"
        case 17:
            for index in 0..<r.pick([100, 500]) { q.lateHeaders.append(("x-fuzz-\(index)", "v")) }
            return "hundreds of headers"
        case 18:
            q.header(
                r.pick([
                    "x-amz-storage-class", "x-amz-acl", "x-amz-grant-read", "x-amz-server-side-encryption",
                    "x-amz-object-lock-mode",
                    "x-amz-expected-bucket-owner", "x-amz-request-payer", "x-amz-object-ownership",
                    "x-amz-website-redirect-location",
                    "x-amz-write-offset-bytes", "x-amz-bucket-object-lock-enabled",
                ]), r.pick(["FOO", "true", "", "GLACIER", hugeNumber, repeated("z", 300)]))
            return "unimplemented-feature header"
        case 19:
            q.header(
                r.pick([
                    "x-amz-object-attributes", "x-amz-max-parts", "x-amz-part-number-marker", "x-amz-checksum-mode",
                ]),
                r.pick(["ETag,Garbage,,", hugeNumber, "ENABLED", ""]))
            return "odd attribute header"
        case 20:
            q.header(
                "content-type",
                r.pick([
                    "multipart/form-data; boundary=", "multipart/form-data; boundary=\"", "multipart/form-data",
                    "multipart/form-data; boundary=" + repeated("b", 5000), "application/json; charset=utf-16",
                    "text/plain; charset=\u{00FC}",
                    "", "*/*", "multipart/form-data; boundary=a; boundary=b",
                ]))
            return "odd Content-Type"
        case 21:
            q.lateHeaders.append(
                (
                    "Cookie",
                    r.pick([
                        "ferry_console=garbage", "ferry_console=", "ferry_console=FST1." + repeated("A", 6000),
                        "ferry_console=a; ferry_console=b", (0..<200).map { "c\($0)=v" }.joined(separator: "; "), ";;;",
                        "=",
                    ])
                ))
            return "odd Cookie"
        case 22:
            q.lateHeaders.append(("X-Ferry-CSRF", r.pick(["", "wrong", f.csrf + "x", repeated("c", 5000)])))
            return "odd X-Ferry-CSRF"
        case 23:
            q.lateHeaders.append(("Uppy-Versions", r.pick(["", "@uppy/aws-s3=4.1.0", repeated("u", 3000)])))
            return "Uppy-Versions"
        case 24:
            q.header(
                "origin",
                r.pick([
                    "null", "https://app.example", "http://evil.example", "*", "http://[::1", "", repeated("o", 3000),
                ]))
            if r.chance(0.5) {
                q.header("access-control-request-method", r.pick(["PUT", "garbage", "", "GET"]))
                q.header("access-control-request-headers", r.pick(["x", repeated("h,", 3000), ",,,", "\u{00FC}"]))
            }
            return "Origin (CORS)"
        case 25:
            q.expectContinue = true
            return "Expect: 100-continue"
        case 26:
            q.lateHeaders.append(("Expect", r.pick(["200-ok", "100-continue, 100-continue", "", "100-Continue"])))
            return "odd Expect"
        case 27:
            if r.chance(0.6) {
                q.chunked = true
                return "Transfer-Encoding: chunked"
            }
            // Sent with a chunked body (the terminating chunk included), so that no server waits for more.
            q.chunked = true
            q.transferEncoding = r.pick(["gzip, chunked", "chunked, chunked", "identity", "x", "Chunked"])
            q.refusable("Transfer-Encoding: \(q.transferEncoding)")
            return "odd Transfer-Encoding"
        case 28:
            switch r.int(0...3) {
            case 0: q.contentLength = .written(r.pick(["000\(q.body.count)", " \(q.body.count) ", "+\(q.body.count)"]))
            case 1: q.contentLength = .twice
            case 2: q.contentLength = .short(max(0, q.body.count / 2))
            default: q.contentLength = .omitted
            }
            return "Content-Length \(q.contentLength)"
        case 29:
            q.header(
                r.pick(["amz-sdk-invocation-id", "amz-sdk-request"]),
                r.pick([
                    "attempt=99999999999999999999; max=-1", repeated("i", 500), "\u{00FC}", "", "../../x",
                ]))
            return "odd SDK headers"
        case 30:
            q.header(
                r.pick(["x-forwarded-proto", "x-forwarded-for", "forwarded"]),
                r.pick(["https", "garbage", "for=\"[::1\"", ""]))
            return "forwarding headers"
        case 31:
            q.connection = r.pick(["keep-alive", "upgrade", "close, close", "", "TE"])
            if q.connection == "upgrade" {
                q.lateHeaders.append(("Upgrade", r.pick(["websocket", "h2c"])))
                q.refusable("Connection: upgrade")
            }
            return "Connection: \(q.connection ?? "")"
        case 32:
            q.rawLines.append(
                Array(
                    r.pick([
                        "x-amz-meta-\u{00FC}: v", "bad header: v", "x-fold: a\r\n b", ": empty-name", "x-nul: a\u{00}b",
                        "x-cr: a\rb",
                    ]).utf8))
            return "malformed header line"
        default:
            q.header("x-amz-security-token", r.pick(["garbage", "", "FST1." + repeated("A", 2000), "FST1.a.b.c"]))
            return "x-amz-security-token garbage (signed)"
        }
    }

    static let authorizationGarbage = [
        "AWS4-HMAC-SHA256", "AWS4-HMAC-SHA256 Credential=", "Bearer x", "AWS FKIATORTURE00000:c2lnbmF0dXJl",
        "AWS4-HMAC-SHA256 Credential=a/b/c/d/e/f/g, SignedHeaders=, Signature=zz",
        "AWS4-HMAC-SHA256 Credential=FKIATORTURE00000/20200101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature="
            + repeated("0", 64),
        "AWS4-HMAC-SHA256 Credential=" + repeated("/", 300),
        "AWS4-HMAC-SHA256 SignedHeaders=host;host;host, Signature=x",
        "AWS4-HMAC-SHA256 Credential=\u{00FC}/\u{00FC}, SignedHeaders=\u{00FC}, Signature=\u{00FC}", "", "QBox a:b",
        "UpToken ::", repeated("A", 9000),
    ]

    static func mutateQuery(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        let number = r.pick([
            "99999999999999999999", "-1", "0", "-99999999999999999999", "1e3", "0x10", " 1", "1 ", "+1", "", "NaN",
            "\u{0661}\u{0662}", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "10001", "1.5",
        ])
        switch r.int(0...11) {
        case 0:
            q.rawQuery = r.pick([
                "bad=%", "bad=%zz", "bad=%G0", "bad=%e9%80", "bad=%00", "%%", "a=%FF%FE", "%=%", "k%zz=v",
            ])
            return "bad percent-encoding \(q.rawQuery ?? "")"
        case 1:
            let name = r.pick([
                "max-keys", "max-uploads", "max-parts", "part-number-marker", "partNumber", "X-Amz-Expires",
                "list-type",
                "PageNo", "key", "uploadId",
            ])
            q.query.removeAll { $0.name == name }
            q.query.append((name, number))
            return "\(name)=\(number)"
        case 2:
            if let first = q.query.first {
                q.query.append((first.name, first.value + "x"))
                return "\(first.name) repeated"
            }
            q.query += Array(repeating: ("uploads", ""), count: 200)
            return "uploads repeated 200 times"
        case 3:
            let name = r.pick([
                "uploads", "uploadId", "tagging", "cors", "delete", "acl", "policy", "versioning", "location",
                "versions",
                "attributes", "partNumber", "torrent", "select", "restore", "legal-hold", "lifecycle", "website",
                "session",
            ])
            q.query.append((name, r.pick(["", "x", number])))
            return "sub-resource ?\(name) added"
        case 4:
            let name = r.pick([
                "prefix", "delimiter", "continuation-token", "start-after", "marker", "key-marker", "upload-id-marker",
                "versionId", "encoding-type", "fetch-owner",
            ])
            q.query.append(
                (name, r.pick([repeated("p", 16 << 10), "\u{0000}", "%", "\u{65E5}\u{672C}", "!!!", "url", "true"])))
            return "odd \(name)"
        case 5:
            q.query.append(
                (
                    r.pick([
                        "response-content-type", "response-content-disposition", "response-expires",
                        "response-cache-control",
                    ]),
                    r.pick(["a\r\nX-Injected: 1", "garbage", "\u{00FC}", repeated("r", 9000), ""])
                ))
            return "odd response-* override"
        case 6:
            q.query += [
                ("X-Amz-Algorithm", r.pick(["AWS4-HMAC-SHA256", "x"])),
                ("X-Amz-Credential", r.pick(["garbage", "a/b/c", ""])),
                ("X-Amz-Date", r.pick(["20200101T000000Z", "x"])), ("X-Amz-Expires", number),
                ("X-Amz-SignedHeaders", "host"), ("X-Amz-Signature", repeated("0", 64)),
            ]
            return "garbage presigned parameters"
        case 7:
            q.rawQuery = r.pick(["=x", "&&", "=", "a==b", "&=&=", "?", "#", "a=b=c"])
            return "odd query syntax \(q.rawQuery ?? "")"
        case 8:
            q.query.append(("\u{00FC}", "\u{65E5}\u{672C}"))
            return "non-ASCII query name and value"
        case 9:
            q.rawQuery = "raw=" + String(decoding: [0xFF, 0x61], as: UTF8.self)
            return "raw non-ASCII byte in the query"
        case 10:
            q.query += (0..<2000).map { ("p\($0)", "v") }
            return "2000 query parameters"
        default:
            q.query.append(
                (r.pick(["X-Amz-Security-Token", "x-id", "uploadId"]), r.pick(["", repeated("t", 5000), "FST1.x"])))
            return "odd token parameter"
        }
    }

    static func mutateMethod(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        q.method = r.pick([
            "GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "FOO", "get", "G ET", "PROPFIND",
        ])
        return "method \(q.method)"
    }

    static func mutatePath(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        switch r.int(0...6) {
        case 0: q.path += "/"
        case 1: q.path += "/%zz"
        case 2: q.path += "/%00"
        case 3: q.path += "/../.."
        case 4: q.path += "/" + repeated("p", 8000)
        case 5: q.path = q.path.replacingOccurrences(of: "/", with: "//")
        default: q.path += "/%E9%80"
        }
        return "path \(printable(q.path, limit: 60))"
    }
}

// MARK: - Body mutations

extension FuzzRequest {
    static func mutateBody(_ q: inout FuzzRequest, _ f: FuzzFixtures, _ r: inout SeededGenerator) -> String {
        if q.group == .publish, r.chance(0.4) { return mutatePublishFields(&q, f, &r) }
        if q.json != nil { return mutateJSON(&q, &r) }
        if q.form != nil { return mutateForm(&q, f, &r) }
        return mutateXML(&q, &r)
    }

    /// JSON nested `depth` deep: arrays, objects or both, closed or not.
    static func nestedJSON(_ depth: Int, _ r: inout SeededGenerator) -> [UInt8] {
        let closed = r.chance(0.5)
        switch r.int(0...2) {
        case 0: return Array((repeated("[", depth) + (closed ? repeated("]", depth) : "")).utf8)
        case 1: return Array((repeated(#"{"a":"#, depth) + "1" + (closed ? repeated("}", depth) : "")).utf8)
        default: return Array((repeated(#"[{"a":"#, depth / 2) + "1" + (closed ? repeated("}]", depth / 2) : "")).utf8)
        }
    }

    static func mutateJSON(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        var fields = q.json ?? []
        let index = fields.isEmpty ? nil : r.int(0...(fields.count - 1))
        let name = index.map { String(decoding: fields[$0].key, as: UTF8.self) } ?? "(new field)"
        func setValue(_ value: [UInt8]) {
            if let index { fields[index].value = value } else { fields.append((jsonString("X"), value)) }
        }
        var label: String
        switch r.int(0...14) {
        case 0:
            let depth = r.pick([600, 20_000, 100_000, 400_000])
            setValue(nestedJSON(depth, &r))
            label = "JSON nested \(depth) deep in \(name)"
        case 1:
            let depth = r.pick([600, 100_000, 900_000])
            q.json = nil
            q.body = nestedJSON(depth, &r)
            return "JSON body nested \(depth) deep"
        case 2:
            let number = r.pick([
                "1e999999", "-1e999999", "99999999999999999999999999", "9223372036854775808", "-9223372036854775809",
                "1.5",
                "-0", "1e-999999", "123456789012345678901234567890.5e300", repeated("9", 5000),
            ])
            setValue(Array(number.utf8))
            label = "number \(number.prefix(30)) in \(name)"
        case 3:
            let value = r.pick([
                "null", "true", "[]", "{}", "\"str\"", "1", "-1", "[1,2]", #"{"a":1}"#, "\"\"", "\"1\"", "[[]]",
            ])
            setValue(Array(value.utf8))
            label = "\(value) in \(name)"
        case 4:
            setValue(
                [UInt8(ascii: "\"")]
                    + r.pick([[0xFF, 0xFE], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0x80], [0xF4, 0x90, 0x80, 0x80]])
                    + [UInt8(ascii: "\"")])
            label = "invalid UTF-8 in \(name)"
        case 5:
            let value = r.pick([#""\ud800""#, #""\u0000""#, #""\udfff\ud800""#, #""a\u0000b""#, #""\uD83D\uDCA3""#])
            setValue(Array(value.utf8))
            label = "escape \(value) in \(name)"
        case 6:
            if let index {
                fields.append(
                    (fields[index].key, r.pick([Array(#""other""#.utf8), Array("null".utf8), Array("[]".utf8)])))
                label = "duplicate key \(name)"
            } else {
                fields += [jsonField("a", "1"), jsonField("a", "2")]
                label = "duplicate key a"
            }
        case 7:
            setValue(jsonString(repeated("s", r.pick([300 << 10, 900 << 10]))))
            label = "long string in \(name)"
        case 8:
            fields += (0..<20_000).map { jsonRaw("k\($0)", "0") }
            label = "20000 keys"
        case 9:
            let value = r.pick(["01", "1.", ".5", "+1", "Infinity", "NaN", "0x10", "1e", "--1", "1_000"])
            setValue(Array(value.utf8))
            label = "invalid number \(value) in \(name)"
        case 10:
            setValue(Array("\"a\u{01}b\tc\nd\"".utf8))
            label = "raw control characters in \(name)"
        case 11:
            setValue(Array(r.pick([#""\x41""#, #""\u00""#, #""\""#, #""\""#, "'single'", "\"unterminated"]).utf8))
            label = "bad escape or quote in \(name)"
        case 12:
            let key = r.pick([
                Array(#""""#.utf8), jsonString("\u{00FC}"), Array(#""Vide\u006fId""#.utf8),
                jsonString(repeated("k", 70_000)),
            ])
            fields.append((key, Array("1".utf8)))
            label = "odd key \(printable(String(decoding: key.prefix(20), as: UTF8.self), limit: 20))"
        case 13:
            q.json = nil
            let texts = ["", "   ", "null", "[]", "\"str\"", "1", "true", "{}x", #"{"a":"#, "{}{}", "{\u{0000}}"]
            var choices: [[UInt8]] = texts.map { Array($0.utf8) }
            choices.append([0xEF, 0xBB, 0xBF] + Array("{}".utf8))
            choices.append([0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00])
            choices.append([UInt8](repeating: 0x20, count: (1 << 20) + 1))
            let whole = r.pick(choices)
            q.body = whole
            return
                "JSON body \(printable(String(decoding: whole.prefix(12), as: UTF8.self), limit: 12)) (\(whole.count) bytes)"
        default:
            // A JSON body cut short.
            var bytes: [UInt8] = [UInt8(ascii: "{")]
            for (position, field) in fields.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes += field.key + [UInt8(ascii: ":")] + field.value
            }
            q.json = nil
            q.body = Array(bytes.prefix(r.int(0...max(0, bytes.count - 1))))
            return "JSON body cut short"
        }
        q.json = fields
        return label
    }

    static func mutateXML(_ q: inout FuzzRequest, _ r: inout SeededGenerator) -> String {
        let root = q.xmlRoot ?? "Root"
        let limit = q.xmlLimit
        let child: String =
            switch root {
            case "CompleteMultipartUpload": "Part"
            case "Delete": "Object"
            case "CORSConfiguration": "CORSRule"
            case "Tagging": "TagSet"
            default: "LocationConstraint"
            }
        let document = String(decoding: q.body, as: UTF8.self)
        let open = "<\(root)>"
        let close = "</\(root)>"
        /// The deepest nesting of `element` that fits the operation's limit, at most 100000.
        func fitting(_ bytesPerLevel: Int) -> Int { min(100_000, max(1, (limit - 200) / bytesPerLevel)) }
        switch r.int(0...15) {
        case 0, 1:
            let depth = r.pick([300, 5000, fitting(7)])
            q.body = Array((open + repeated("<a>", depth) + "x" + repeated("</a>", depth) + close).utf8)
            return "XML nested \(depth) deep in <\(root)>"
        case 2:
            let depth = r.pick([300, 5000, fitting(3)])
            q.body = Array((open + repeated("<a>", depth)).utf8)
            return "XML nested \(depth) deep, never closed"
        case 3:
            let depth = r.pick([300, fitting(2 * child.count + 5)])
            q.body = Array((open + repeated("<\(child)>", depth) + repeated("</\(child)>", depth) + close).utf8)
            return "<\(child)> nested \(depth) deep"
        case 4:
            let unit =
                child == "Part"
                ? "<Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>"
                : child == "Object" ? "<Object><Key>k</Key></Object>" : "<\(child)><x>1</x></\(child)>"
            let count = min(20_000, (limit - 200) / unit.utf8.count)
            q.body = Array((open + repeated(unit, count) + close).utf8)
            return "\(count) <\(child)> elements"
        case 5:
            let text = r.pick([
                "<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>",
                "<!DOCTYPE x SYSTEM \"file:///etc/passwd\">", "<!ENTITY x \"y\">", "<!doctype x>",
            ])
            q.body = Array((text + document).utf8)
            return "DOCTYPE or ENTITY"
        case 6:
            let reference = r.pick([
                "&#0;", "&#xD800;", "&#99999999999;", "&#x110000;", "&bogus;", "&", "&#;", "&#x;", "&amp",
            ])
            q.body = Array(document.replacingOccurrences(of: "</\(root)>", with: "<x>\(reference)</x></\(root)>").utf8)
            return "character reference \(reference)"
        case 7:
            var bytes = q.body
            let at = r.int(0...bytes.count)
            bytes.insert(
                contentsOf: r.pick([[0xFF, 0xFE], [0xC0, 0xAF], [0x00], [0xED, 0xA0, 0x80], [0x80]]), at: at)
            q.body = bytes
            return "invalid UTF-8 or NUL in the XML"
        case 8:
            let declaration = r.pick([
                "<?xml version=\"1.0\" encoding=\"UTF-16\"?>", "<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?>",
                "<?xml version=\"9.9\"?>", "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\u{00E9}", "<?xml?>",
            ])
            q.body = Array((declaration + document).utf8)
            return "XML declaration \(declaration.prefix(40))"
        case 9:
            q.body = [0xFF, 0xFE] + Array(document.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
            return "XML in UTF-16"
        case 10:
            let piece = r.pick([
                "<?x y?>", "<!--" + repeated("c", 30_000) + "-->", "<!-- unclosed",
                "<![CDATA[" + repeated("d", 60_000) + "]]>",
                "<![CDATA[ unclosed", "]]>", repeated("<!---->", 5000), repeated("<?p?>", 5000),
            ])
            q.body = Array(document.replacingOccurrences(of: open, with: open + piece).utf8)
            return "comment, CDATA or processing instruction"
        case 11:
            let renamed = r.pick([
                "<x:\(root)>", "<\(root) xmlns:x=\"\">", "<\(root) xmlns=\"http://evil.example\">",
                "<\(root) xmlns=\"\">",
                "<\(root) " + (0..<5000).map { "a\($0)=\"1\"" }.joined(separator: " ") + ">",
                "<\(root) a=\"1\" a=\"2\">",
                "<\(root) a=\"" + repeated("v", 60_000) + "\">",
            ])
            q.body = Array(document.replacingOccurrences(of: open, with: renamed).utf8)
            return "namespace or attributes on <\(root)>"
        case 12:
            let value = r.pick([
                "-1", "99999999999999999999", "abc", "1e3", " 1 ", "", "0x10", repeated("9", 5000), "\u{0661}",
            ])
            var text = document
            for element in [
                "PartNumber", "MaxAgeSeconds", "Quiet", "Key", "Value", "ETag", "AllowedMethod", "LocationConstraint",
            ] {
                text = text.replacing(
                    try! Regex("<\(element)>[^<]*</\(element)>"), with: "<\(element)>\(value)</\(element)>")
            }
            q.body = Array(text.utf8)
            return "element values \(value.prefix(20))"
        case 13:
            let name = repeated("n", r.pick([1000, 30_000]))
            q.body = Array((open + "<\(name)>x</\(name)>" + close).utf8)
            return "element name of \(name.count) bytes"
        case 14:
            q.body = Array(
                r.pick([
                    "", " ", "<\(root)/>", open + close + open + close, document.prefix(document.count / 2) + "",
                    "text only",
                    #"{"json":true}"#, open + "</Wrong>", "<", open + "<a></b>" + close,
                ]).utf8)
            return "XML body \(printable(String(decoding: q.body.prefix(20), as: UTF8.self), limit: 20))"
        default:
            q.body = Array((open + "<x>" + repeated("p", limit) + "</x>" + close).utf8)
            return "XML body over the \(limit >> 10) KiB limit"
        }
    }

    static func mutateForm(_ q: inout FuzzRequest, _ f: FuzzFixtures, _ r: inout SeededGenerator) -> String {
        guard var form = q.form else { return "no form" }
        defer { q.form = form }
        switch r.int(0...12) {
        case 0:
            let contentType = r.pick([
                "multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=other",
                "multipart/form-data; boundary=\"" + form.boundary, "application/x-www-form-urlencoded",
            ])
            q.header("content-type", contentType)
            return "form Content-Type \(contentType.prefix(50))"
        case 1:
            let index = r.int(0...(form.parts.count - 1))
            form.parts[index].headers[0] = Array(
                r.pick([
                    "Content-Disposition: form-data; name=\"unclosed",
                    "Content-Disposition: form-data; name*=UTF-8''%zz",
                    "Content-Disposition: form-data; name=\"\u{00FC}\"", "Content-Disposition: attachment",
                    "X-Nothing: 1",
                    "Content-Disposition: form-data; name=\"file\"; filename=\"" + repeated("f", 10_000) + "\"",
                    "Content-Disposition: form-data; name=\"token\"; name=\"key\"", "Content-Disposition:",
                ]).utf8)
            return "odd part header"
        case 2:
            form.parts[0].headers.append(Array(("X-Huge: " + repeated("h", 60_000)).utf8))
            return "a part header of 60 KiB"
        case 3:
            form.parts.append(FuzzForm.field("key", "fz/after"))
            return "a field after the file"
        case 4:
            form.parts.insert(contentsOf: (0..<5000).map { FuzzForm.field("x:v\($0)", "v") }, at: 0)
            return "5000 fields"
        case 5:
            form.closed = false
            if r.chance(0.5), !form.parts.isEmpty { form.parts[form.parts.count - 1].content = Array("cut".utf8) }
            return "no closing boundary"
        case 6:
            form.parts.insert(
                FuzzForm.field("crc32", r.pick(["99999999999999999999", "-1", "abc", "", "4294967296", "0x1"])), at: 1)
            return "odd crc32"
        case 7:
            let key = r.pick([
                "", "../x", "a/../b", repeated("k", 1100), "a\u{00}b", "%zz", "a\u{7F}b", "/", "\u{00FC}", "./x",
            ])
            form.parts.removeAll { String(decoding: $0.headers.first ?? [], as: UTF8.self).contains("name=\"key\"") }
            form.parts.insert(FuzzForm.field("key", key), at: min(1, form.parts.count))
            return "form key \(printable(key, limit: 20))"
        case 8:
            form.parts.insert(
                r.chance(0.5)
                    ? FuzzForm.field("x-qn-meta-" + r.pick(["\u{00FC}", "a b", "", "a:b"]), "v")
                    : FuzzForm.field("x:big", repeated("v", 100_000)), at: 0)
            return "odd metadata or variable"
        case 9:
            // A token signed by the cell's key (the root key's for the form token cell) over a policy no app server
            // would write: the signature verifies, the policy is what is hostile. Credentials without a key sign with
            // one nobody has.
            let depth = r.pick([600, 100_000])
            let nested = String(decoding: nestedJSON(depth, &r), as: UTF8.self)
            let policy = r.pick([
                nested,
                #"{"scope":"fuzz","deadline":99999999999999999999}"#, #"{"scope":1,"deadline":"x"}"#,
                #"{"scope":"fuzz:","deadline":4102444800,"fsizeLimit":-1}"#, #"{"scope":"","deadline":4102444800}"#,
                #"{"scope":"nonexistent-bucket","deadline":4102444800}"#,
                #"{"scope":"fuzz","deadline":4102444800,"mimeLimit":"\#(repeated("*;", 5000))"}"#,
                #"{"scope":"fuzz","deadline":4102444800,"returnBody":"$(\#(repeated("x", 10_000)))"}"#,
                #"{"scope":"fuzz","deadline":4102444800,"insertOnly":1}"#,
            ])
            let signer =
                f.keys(q.credential)
                ?? (q.credential == .formToken
                    ? f.root
                    : SigV4Credentials(
                        accessKeyId: f.root.accessKeyId, secretAccessKey: "not the secret"))
            let token =
                r.chance(0.7)
                ? UploadToken.sign(
                    accessKey: signer.accessKeyId, secretKey: signer.secretAccessKey, policyJSON: Array(policy.utf8))
                : r.pick(["", "a:b:c", "::", ":::", "\(f.root.accessKeyId):x:" + repeated("A", 5000), "%%%"])
            form.parts.removeAll { String(decoding: $0.headers.first ?? [], as: UTF8.self).contains("name=\"token\"") }
            form.parts.insert(FuzzForm.field("token", token), at: 0)
            return "hostile upload token (\(printable(String(policy.prefix(24)), limit: 24)))"
        case 10:
            if let last = form.parts.indices.last {
                form.parts[last].headers = [
                    Array("Content-Disposition: form-data; name=\"file\"; filename=\"\u{00FC}\r\".txt\"".utf8),
                    Array("Content-Type: \(r.pick(["", "x", "video/mp4; \(repeated("p", 3000))", "image/*"]))".utf8),
                ]
            }
            return "odd file part headers"
        case 11:
            if let last = form.parts.indices.last {
                form.parts[last].content = Array(
                    "--\(form.boundary)\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n".utf8)
            }
            return "the boundary inside the file"
        default:
            form.boundary = r.pick([repeated("b", 200), "", "a b", "\u{00FC}"])
            q.header("content-type", form.contentType)
            return "boundary \(printable(form.boundary, limit: 20))"
        }
    }
}

extension FuzzRequest {
    /// A publish signature that verifies (HMAC'd by the cell's key) over fields no app server would sign, or one that
    /// is not a signature; or a VodSessionKey that is not one.
    static func mutatePublishFields(_ q: inout FuzzRequest, _ f: FuzzFixtures, _ r: inout SeededGenerator) -> String {
        var fields = q.json ?? []
        fields.removeAll { $0.key == jsonString("signature") && r.chance(0.5) }
        if r.chance(0.3) {
            let key = r.pick([
                "", "FV1..", "FV1.%%%.x", "FV1." + FuzzFixtures.base64url(Data(repeated("[", 100_000).utf8)) + ".AAAA",
                "FV1." + repeated("A", 100_000) + ".A", "FV2.x.y", f.vodSessionKey + "x",
                String(f.vodSessionKey.reversed()),
            ])
            fields.removeAll { $0.key == jsonString("vodSessionKey") }
            fields.append(jsonField("vodSessionKey", key))
            q.json = fields
            return "odd vodSessionKey (\(key.prefix(12)))"
        }
        let now = Int(Date().timeIntervalSince1970)
        // Signed with the cell's own key (the app server's key for the publish signature cell); credentials without
        // a key sign with one nobody has.
        let signer =
            f.keys(q.credential)
            ?? (q.credential == .publishSignature
                ? f.publisher
                : SigV4Credentials(
                    accessKeyId: f.publisher.accessKeyId, secretAccessKey: "not the secret"))
        let id = signer.accessKeyId
        let base = "secretId=\(id)&currentTimeStamp=\(now)&expireTime=\(now + 3600)&random=7"
        var original = Array(
            r.pick([
                "secretId=\(id)&currentTimeStamp=\(now)&expireTime=99999999999999999999&random=1",
                "secretId=\(id)&currentTimeStamp=-99999999999999999999&expireTime=\(now + 3600)&random=1",
                "secretId=\(id)&currentTimeStamp=\(now)&expireTime=\(now + 3600)",
                "secretId=\(id)&secretId=\(f.root.accessKeyId)&currentTimeStamp=\(now)&expireTime=\(now + 3600)&random=1",
                base + "&procedure=" + repeated("p", 10_000), base + "&procedure=..%2F..%2Fx",
                base + "&classId=99999999999999999999",
                base + "&classId=abc", base + "&sourceContext=" + repeated("s", 200_000), base + "&oneTimeValid=x",
                base + "&random=99999999999999999999", "secretId=%zz&currentTimeStamp=1&expireTime=1&random=1", "",
                "&&&===",
                base + "&" + (0..<5000).map { "f\($0)=1" }.joined(separator: "&"),
            ]).utf8)
        if r.chance(0.2) { original.insert(contentsOf: [0xFF, 0xFE], at: r.int(0...original.count)) }
        let mac = HMAC<Insecure.SHA1>.authenticationCode(
            for: original, using: SymmetricKey(data: Array(signer.secretAccessKey.utf8)))
        let signature =
            r.chance(0.8)
            ? Data(Array(mac) + original).base64EncodedString()
            : r.pick(["not base64!", "AAAA", repeated("QUFB", 200_000), " ", "=" + f.publishSignature])
        fields.removeAll { $0.key == jsonString("signature") }
        fields.insert(jsonField("signature", signature), at: 0)
        q.json = fields
        return "publish signature over \(printable(String(decoding: original.prefix(40), as: UTF8.self), limit: 40))"
    }
}
