import NIOCore
import Testing

@testable import FerryServer

@Suite("Multipart form parser", .timeLimit(.minutes(10)))
struct MultipartFormParserTests {
    typealias Parser = MultipartFormParser

    /// A part as the parser reported it.
    struct Part: Equatable {
        var headers: Parser.PartHeaders
        var content: [UInt8]
        var final: Bool
    }

    /// Feeds `body` in the given pieces and collects parts.
    static func parse(_ body: [UInt8], boundary: String, cuts: [Int]) throws -> (parts: [Part], finished: Bool) {
        var parser = Parser(boundary: boundary)
        var parts: [Part] = []
        var start = 0
        for end in cuts + [body.count] where end >= start {
            for event in try parser.feed(ByteBuffer(bytes: body[start..<end])) {
                switch event {
                case .partStart(let headers): parts.append(Part(headers: headers, content: [], final: false))
                case .content(let buffer): parts[parts.count - 1].content += Array(buffer.readableBytesView)
                case .partEnd(let final): parts[parts.count - 1].final = final
                }
            }
            start = end
        }
        return (parts, parser.isFinished)
    }

    static let boundary = "XyZ-boundary-42"
    /// File content full of near-delimiters: CRLF, dashes and a boundary prefix without its last character.
    static let trickyContent: [UInt8] =
        Array("\r\n--XyZ-boundary-4\r\n-\r\r\n--XyZ\0\u{ff}".utf8) + (0..<300).map { UInt8($0 % 256) }
        + Array("\r\n--XyZ-boundary-4".utf8)

    static var body: [UInt8] {
        var text: [UInt8] = Array("preamble to ignore\r\n".utf8)
        text += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\nAK:sig:policy\r\n".utf8)
        text += Array("--\(boundary)\r\ncontent-disposition: form-data; name=\"x:a \\\"b\\\"\"\r\n\r\n\r\n".utf8)
        text += Array(
            ("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cat.jpg\"\r\n"
                + "Content-Type: image/jpeg\r\n\r\n").utf8)
        text += trickyContent
        text += Array("\r\n--\(boundary)--\r\nepilogue".utf8)
        return text
    }

    static let expected: [Part] = [
        Part(
            headers: .init(name: "token", filename: nil, contentType: nil), content: Array("AK:sig:policy".utf8),
            final: false),
        Part(headers: .init(name: "x:a \"b\"", filename: nil, contentType: nil), content: [], final: false),
        Part(
            headers: .init(name: "file", filename: "cat.jpg", contentType: "image/jpeg"), content: trickyContent,
            final: true),
    ]

    @Test("one buffer: fields, an empty field, the file with near-boundaries inside, the final flag")
    func whole() throws {
        let (parts, finished) = try Self.parse(Self.body, boundary: Self.boundary, cuts: [])
        #expect(parts == Self.expected)
        #expect(finished)
    }

    @Test("the body split at every offset (one cut) gives the same parts")
    func everySplit() throws {
        let body = Self.body
        for cut in 0...body.count {
            let (parts, finished) = try Self.parse(body, boundary: Self.boundary, cuts: [cut])
            #expect(parts == Self.expected, "cut at \(cut)")
            #expect(finished)
        }
    }

    @Test("the body fed a byte at a time, and in random pieces, gives the same parts")
    func smallPieces() throws {
        let body = Self.body
        let (parts, _) = try Self.parse(body, boundary: Self.boundary, cuts: Array(0...body.count))
        #expect(parts == Self.expected)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let cuts = (0..<8).map { _ in Int.random(in: 0...body.count, using: &generator) }.sorted()
            #expect(try Self.parse(body, boundary: Self.boundary, cuts: cuts).parts == Self.expected, "\(cuts)")
        }
    }

    @Test("a part after the file ends the file with final false")
    func partAfterFile() throws {
        let body = Array(
            ("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nDATA\r\n"
                + "--b\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n--b--").utf8)
        let (parts, finished) = try Self.parse(body, boundary: "b", cuts: [body.count - 40])
        #expect(parts.first?.final == false)
        #expect(parts.first?.content == Array("DATA".utf8))
        #expect(parts.last?.final == true)
        #expect(finished)
    }

    @Test("broken framing throws; a body without its closing boundary is not finished")
    func malformed() throws {
        for bad in [
            "--b\r\nContent-Disposition: attachment; name=\"x\"\r\n\r\nv\r\n--b--",  // not form-data
            "--b\r\nContent-Type: text/plain\r\n\r\nv\r\n--b--",  // no name
            "--b\r\nno colon here\r\n\r\nv\r\n--b--",
            "--bX\r\n",  // garbage after a delimiter
            "--b\r\nContent-Disposition: form-data; name=\"x\r\n\r\nv\r\n--b--",  // unclosed quote
        ] {
            #expect(throws: Parser.ParseError.self, "\(bad)") {
                _ = try Self.parse(Array(bad.utf8), boundary: "b", cuts: [])
            }
        }
        var parser = Parser(boundary: "b")
        _ = try parser.feed(ByteBuffer(string: "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nDATA"))
        #expect(!parser.isFinished)
        #expect(throws: Parser.ParseError.self) { try parser.finish() }
        var long = Parser(boundary: "b")
        #expect(throws: Parser.ParseError.self) {
            _ = try long.feed(ByteBuffer(string: "--b\r\nX-Long: " + String(repeating: "a", count: 9000)))
        }
    }

    @Test("boundary parameter: quoted or bare, only for multipart/form-data")
    func boundaryParameter() {
        #expect(Parser.boundary(fromContentType: "multipart/form-data; boundary=abc") == "abc")
        #expect(Parser.boundary(fromContentType: "Multipart/Form-Data; charset=utf-8; Boundary=\"a b\"") == "a b")
        #expect(Parser.boundary(fromContentType: "multipart/mixed; boundary=abc") == nil)
        #expect(Parser.boundary(fromContentType: "multipart/form-data") == nil)
        #expect(
            Parser.boundary(fromContentType: "multipart/form-data; boundary=" + String(repeating: "a", count: 71))
                == nil)
    }
}
