import Crypto
import FerryCore
import FerryTestSupport
import Foundation

/// A request as the fuzz builds it: what the signature covers first, then what is sent.
struct FuzzRequest {
    var method: String
    /// The path as sent (percent-encoded), which is also the signature's canonical URI.
    var path: String
    /// The group and the credential the request was made for.
    var group: FuzzGroup = .objectAPI
    var credential: FuzzCredential = .anonymous
    /// Query items, decoded; encoded on the wire as clients do and covered by the signature.
    var query: [(name: String, value: String)] = []
    /// Bytes appended to the query as they are (bad escapes, bare names); not covered by the signature.
    var rawQuery: String?
    /// The Host header's value; nil sends none.
    var host: [UInt8]?
    /// More Host headers after the first.
    var extraHosts: [[UInt8]] = []
    /// Headers covered by the signature (when there is one).
    var headers: [(name: String, value: String)] = []
    /// Headers added after signing.
    var lateHeaders: [(name: String, value: String)] = []
    /// Header lines sent exactly as they are, after the others.
    var rawLines: [[UInt8]] = []
    /// A JSON object body as (quoted key, value) pairs, serialized before signing.
    var json: [(key: [UInt8], value: [UInt8])]?
    /// A multipart/form-data body, serialized before signing.
    var form: FuzzForm?
    /// The root element of an XML body and the largest body its operation reads.
    var xmlRoot: String?
    var xmlLimit = 64 * 1024
    var body: [UInt8] = []
    /// DeleteObjects needs a Content-MD5 of the body as sent.
    var needsContentMD5 = false
    /// A browser POST upload, authenticated by its signed policy rather than a header.
    var browserPost = false
    var contentLength: ContentLengthForm = .exact
    var chunked = false
    /// The Transfer-Encoding header of a chunked body ("chunked" unless a mutation writes another).
    var transferEncoding = "chunked"
    var connection: String? = "close"
    var expectContinue = false
    /// The payload hash the signature claims: nil is the body's SHA-256.
    var payloadHash: String?
    var presigned = false
    /// What the fuzz did to the request, for the report.
    var notes: [String] = []
    /// The request carries bytes the HTTP layer may refuse before any route sees it (a control character in a header,
    /// an unknown method, a malformed length, a head over its limits): a closed connection or its refusal is then an
    /// answer.
    var mayBeRefusedByHTTPLayer: Bool { refusableBecause != nil }
    /// Why the HTTP layer may refuse the request (the first reason found).
    var refusableBecause: String?
    /// The head as sent, for the report.
    var sentHead: [UInt8] = []

    init(method: String, path: String) {
        self.method = method
        self.path = path
    }

    enum ContentLengthForm {
        case exact
        case omitted
        /// A header value other than the plain length (`007`, ` 7 `, `+7`).
        case written(String)
        /// The length twice.
        case twice
        /// Fewer bytes declared than sent.
        case short(Int)
    }

    /// Replaces the value of a form field.
    mutating func setFormField(_ name: String, _ value: String) {
        setFormField(name, Array(value.utf8))
    }

    mutating func setFormField(_ name: String, _ value: [UInt8]) {
        guard
            let index = form?.parts.firstIndex(where: {
                String(decoding: $0.headers.first ?? [], as: UTF8.self).hasSuffix("name=\"\(name)\"")
            })
        else { return }
        form?.parts[index].content = value
    }

    mutating func header(_ name: String, _ value: String) {
        headers.removeAll { $0.name.lowercased() == name.lowercased() }
        headers.append((name, value))
    }

    func hasHeader(_ name: String) -> Bool {
        (headers + lateHeaders).contains { $0.name.lowercased() == name.lowercased() }
    }

    /// The JSON, form or XML body as bytes, with its Content-MD5 where the operation needs one.
    mutating func serializeBody() {
        if let json {
            var bytes: [UInt8] = [UInt8(ascii: "{")]
            for (index, field) in json.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                bytes += field.key + [UInt8(ascii: ":")] + field.value
            }
            body = bytes + [UInt8(ascii: "}")]
            self.json = nil
        }
        if let form {
            body = form.serialized()
            self.form = nil
        }
        if needsContentMD5, !hasHeader("content-md5") {
            header("content-md5", Data(Insecure.MD5.hash(data: body)).base64EncodedString())
        }
    }

    /// Signs with SigV4 (header, or presigned query when ``presigned``), covering the Host as it will be sent.
    mutating func sign(
        _ credentials: SigV4Credentials, service: String, region: String = "us-east-1", date: Date = Date()
    ) {
        let signer = SigV4Signer(credentials: credentials, region: region, service: service)
        let hostValue = host.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if presigned {
            if let items = try? signer.presign(
                method: method, path: path, query: query, host: hostValue, expires: 600, date: date)
            {
                query = items
            }
            return
        }
        let hash = payloadHash ?? SigV4.hexSHA256(body)
        let signed = signer.sign(
            method: method, path: path, query: query, headers: [("host", hostValue)] + headers, payloadHash: hash,
            date: date)
        headers = signed.headers.filter { $0.name.lowercased() != "host" }
    }

    /// The request target: the path, the encoded query and any raw query bytes.
    var target: String {
        var query = self.query.map {
            SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
        }.joined(separator: "&")
        if let rawQuery { query += (query.isEmpty ? "" : "&") + rawQuery }
        return query.isEmpty ? path : path + "?" + query
    }

    /// The bytes to send. Marks the request as one the HTTP layer may refuse when its head holds bytes HTTP/1.1 does
    /// not allow where they are.
    mutating func wire() -> RawHTTPExchange.Request {
        var head = Array("\(method) \(target) HTTP/1.1\r\n".utf8)
        if !Self.knownMethods.contains(method) { refusable("method \(method)") }
        if target.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            refusable("a space, control or non-ASCII byte in the target")
        }
        var lines: [[UInt8]] = []
        if let host { lines.append(Array("Host: ".utf8) + host) }
        for extra in extraHosts { lines.append(Array("Host: ".utf8) + extra) }
        for field in headers + lateHeaders { lines.append(Array("\(field.name): \(field.value)".utf8)) }
        lines += rawLines
        if let connection { lines.append(Array("Connection: \(connection)".utf8)) }
        if expectContinue { lines.append(Array("Expect: 100-continue".utf8)) }
        var sentBody = body
        if chunked {
            lines.append(Array("Transfer-Encoding: \(transferEncoding)".utf8))
            sentBody = body.isEmpty ? [] : Array(String(body.count, radix: 16).utf8) + [13, 10] + body + [13, 10]
            sentBody += Array("0\r\n\r\n".utf8)
        } else {
            switch contentLength {
            case .exact:
                if !body.isEmpty || method == "PUT" || method == "POST" {
                    lines.append(Array("Content-Length: \(body.count)".utf8))
                }
            case .omitted:
                break
            case .written(let text):
                lines.append(Array("Content-Length: \(text)".utf8))
                refusable("Content-Length: \(text)")
            case .twice:
                lines.append(Array("Content-Length: \(body.count)".utf8))
                lines.append(Array("Content-Length: \(body.count)".utf8))
                refusable("Content-Length twice")
            case .short(let length):
                lines.append(Array("Content-Length: \(length)".utf8))
            }
        }
        for line in lines {
            if let reason = Self.refusal(line) { refusable(reason) }
            head += line + [13, 10]
        }
        head += [13, 10]
        // Hummingbird's HTTP/1 decoder takes at most 1000 header fields, of at most 80 KiB in all.
        if head.count > 80 * 1024 { refusable("a request head of \(head.count >> 10) KiB") }
        if lines.count >= 1000 { refusable("\(lines.count) header fields") }
        sentHead = head
        return RawHTTPExchange.Request(
            head: head, body: sentBody, waitsForContinue: expectContinue, isHead: method == "HEAD")
    }

    /// Methods the HTTP parser knows; any other is refused before routing.
    static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
    ]

    mutating func refusable(_ reason: String) {
        if refusableBecause == nil { refusableBecause = reason }
    }

    /// What HTTP/1.1 forbids in a header line, if anything: a control character other than tab, or a name that is
    /// not a token.
    static func refusal(_ line: [UInt8]) -> String? {
        let name = line.firstIndex(of: UInt8(ascii: ":")).map { String(decoding: line[..<$0], as: UTF8.self) }
        if let control = line.first(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            return String(
                format: "a control character 0x%02X in the header %@", control, printable(name ?? "?", limit: 30))
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else {
            return "a header line without a name"
        }
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        if !line[..<colon].allSatisfy(token.contains) {
            return "the header name \(printable(name ?? "", limit: 30)) is not a token"
        }
        return nil
    }

    /// Method, target, headers (values cut at 140 characters) and the body's size and start, for the report.
    var summary: String {
        let lines = String(decoding: sentHead, as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        var text = lines.prefix(18).map { Self.printable($0, limit: 140) }.joined(separator: "\n    ")
        if lines.count > 18 { text += "\n    … \(lines.count - 18) more header lines" }
        text += "\n    body: \(body.count) bytes"
        if !body.isEmpty {
            text += ": " + Self.printable(String(decoding: body.prefix(160), as: UTF8.self), limit: 160)
        }
        text += "\n    mutations: " + (notes.isEmpty ? "none" : notes.joined(separator: "; "))
        return text
    }

    /// The operation the request asks for, without ids: the action of the JSON APIs, the method and sub-resources
    /// of the object API, the shape of an Uppy path.
    var operation: String {
        let group = FuzzGroup.routed(path)
        switch group {
        case .mediaAPI, .consoleAPI, .publish:
            return String(path.split(separator: "/", omittingEmptySubsequences: false).last?.prefix(40) ?? "")
        case .objectAPI:
            let subresources = [
                "uploads", "uploadId", "partNumber", "tagging", "cors", "delete", "attributes", "versions",
            ]
            let names = Set(query.map(\.name)).intersection(subresources).sorted()
            let depth = path.split(separator: "/").count
            let target = depth == 0 ? "service" : depth == 1 ? "bucket" : "object"
            return "\(method) \(target)" + (names.isEmpty ? "" : " ?" + names.joined(separator: "&"))
        case .uppySigning:
            let depth = path.split(separator: "/").count
            return "\(method) /s3/multipart" + ["", "", "/{uploadId}", "/{uploadId}/{part}"][min(depth, 3)]
        default:
            return method
        }
    }

    /// Method, target and mutations on one line.
    var brief: String {
        "\(method) \(Self.printable(target, limit: 80)) [\(notes.joined(separator: "; "))]"
    }

    /// Text with control characters escaped, cut at `limit` characters.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if out.count >= limit { return out + "…(\(text.utf8.count) bytes)" }
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += String(format: "\\x%02X", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// A multipart/form-data body.
struct FuzzForm {
    struct Part {
        var headers: [[UInt8]]
        var content: [UInt8]
    }

    var boundary = "----ferryfuzz7MA4YWxkTrZu0gW"
    var parts: [Part] = []
    /// Whether the closing boundary is written.
    var closed = true

    static func field(_ name: String, _ value: String) -> Part {
        Part(headers: [Array("Content-Disposition: form-data; name=\"\(name)\"".utf8)], content: Array(value.utf8))
    }

    static func file(_ filename: String, type: String, _ content: [UInt8]) -> Part {
        Part(
            headers: [
                Array("Content-Disposition: form-data; name=\"file\"; filename=\"\(filename)\"".utf8),
                Array("Content-Type: \(type)".utf8),
            ], content: content)
    }

    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    func serialized() -> [UInt8] {
        var bytes: [UInt8] = []
        for part in parts {
            bytes += Array("--\(boundary)\r\n".utf8)
            for line in part.headers { bytes += line + [13, 10] }
            bytes += [13, 10] + part.content + [13, 10]
        }
        if closed { bytes += Array("--\(boundary)--\r\n".utf8) }
        return bytes
    }
}

// MARK: - Random choices

extension SeededGenerator {
    mutating func chance(_ probability: Double) -> Bool {
        Double(next() >> 11) / Double(1 << 53) < probability
    }

    mutating func pick<T>(_ items: [T]) -> T {
        items[Int(next() % UInt64(items.count))]
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &self)
    }

    /// Lowercase letters and digits.
    mutating func word(_ length: Int) -> String {
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<length).map { _ in pick(letters) })
    }
}

/// JSON text of a string (quoted and escaped).
func jsonString(_ text: String) -> [UInt8] {
    var out: [UInt8] = [UInt8(ascii: "\"")]
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "\""): out += Array("\\\"".utf8)
        case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
        case 0..<0x20: out += Array(String(format: "\\u%04x", byte).utf8)
        default: out.append(byte)
        }
    }
    return out + [UInt8(ascii: "\"")]
}

func jsonField(_ key: String, _ value: String) -> (key: [UInt8], value: [UInt8]) {
    (jsonString(key), jsonString(value))
}

func jsonRaw(_ key: String, _ value: String) -> (key: [UInt8], value: [UInt8]) {
    (jsonString(key), Array(value.utf8))
}

func repeated(_ text: String, _ count: Int) -> String {
    String(repeating: text, count: count)
}
