import Foundation
import NIOCore

/// An incremental `multipart/form-data` parser (RFC 7578): fed the body in buffers of any size, it reports each
/// part's headers, its content in pieces, and its end. Part content is never collected: the pieces are slices of the
/// input, and only a delimiter's length of bytes is held back between buffers (a boundary may be split anywhere).
///
/// A pure value type; the caller decides what to keep.
struct MultipartFormParser {
    /// What the parser found in one buffer.
    enum Event: Equatable {
        /// A part begins.
        case partStart(PartHeaders)
        /// Content of the current part.
        case content(ByteBuffer)
        /// The current part ended; `final` when it was the last (the closing delimiter followed).
        case partEnd(final: Bool)
    }

    /// The headers of a part that matter for form data.
    struct PartHeaders: Equatable {
        /// The `name` of `Content-Disposition: form-data`.
        var name: String
        /// The `filename`, when the part is a file.
        var filename: String?
        /// `Content-Type`.
        var contentType: String?
    }

    /// Why the body cannot be read.
    struct ParseError: Error, Equatable {
        var message: String
    }

    private enum State {
        /// Before the first delimiter.
        case preamble
        /// Just after a delimiter: `--` (the end) or line end (a part follows).
        case afterDelimiter
        /// Reading a part's header block.
        case headers
        /// Reading a part's content.
        case content
        /// After the closing delimiter: the epilogue is ignored.
        case done
    }

    /// Most bytes of one part's header block.
    static let maxHeaderBytes = 8 * 1024

    private let delimiter: [UInt8]
    private var state = State.preamble
    /// Whether a part has started and not ended.
    private var partOpen = false
    /// Input not yet consumed (a possible partial delimiter, or an incomplete header block).
    private var pending = ByteBuffer()

    /// Whether the closing delimiter has been read.
    var isFinished: Bool {
        if case .done = state { return true }
        return false
    }

    /// Creates a parser for the boundary of the request's `Content-Type`.
    init(boundary: String) {
        delimiter = Array("\r\n--\(boundary)".utf8)
        // The first delimiter may open the body without the line end before it.
        pending.writeBytes([13, 10])
    }

    /// The `boundary` parameter of a `multipart/form-data` content type, or nil.
    static func boundary(fromContentType contentType: String) -> String? {
        let pieces = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let type = pieces.first, type.lowercased() == "multipart/form-data" else { return nil }
        for piece in pieces.dropFirst() {
            guard let equals = piece.firstIndex(of: "=") else { continue }
            guard piece[..<equals].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            var value = piece[piece.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            // RFC 2046: 1 to 70 characters.
            guard (1...70).contains(value.utf8.count) else { return nil }
            return value
        }
        return nil
    }

    /// Feeds the next buffer of the body.
    ///
    /// - Returns: what it completed, in order.
    /// - Throws: ``ParseError`` when the framing is broken.
    mutating func feed(_ input: ByteBuffer) throws -> [Event] {
        if case .done = state { return [] }
        if pending.readableBytes == 0 {
            pending = input
        } else {
            var input = input
            pending.writeBuffer(&input)
        }
        var events: [Event] = []
        loop: while true {
            switch state {
            case .preamble:
                guard let at = find(delimiter, in: pending) else {
                    // Keep only what could start a delimiter.
                    pending.moveReaderIndex(forwardBy: max(0, pending.readableBytes - (delimiter.count - 1)))
                    break loop
                }
                pending.moveReaderIndex(forwardBy: at + delimiter.count)
                state = .afterDelimiter
            case .afterDelimiter:
                guard let final = try readAfterDelimiter() else { break loop }
                if partOpen { events.append(.partEnd(final: final)) }
                partOpen = false
                if final {
                    state = .done
                    pending = ByteBuffer()
                    break loop
                }
                state = .headers
            case .headers:
                guard let end = find([13, 10, 13, 10], in: pending) else {
                    if pending.readableBytes > Self.maxHeaderBytes {
                        throw ParseError(message: "A part's headers are longer than 8 KiB.")
                    }
                    break loop
                }
                guard end <= Self.maxHeaderBytes else {
                    throw ParseError(message: "A part's headers are longer than 8 KiB.")
                }
                let block = pending.readString(length: end) ?? ""
                pending.moveReaderIndex(forwardBy: 4)
                events.append(.partStart(try Self.parseHeaders(block)))
                partOpen = true
                state = .content
            case .content:
                if let at = find(delimiter, in: pending) {
                    if at > 0, let content = pending.readSlice(length: at) { events.append(.content(content)) }
                    pending.moveReaderIndex(forwardBy: delimiter.count)
                    // The part's end is reported once what follows the delimiter says whether it was the last.
                    state = .afterDelimiter
                    continue loop
                }
                let safe = safePrefixLength(pending)
                if safe > 0, let content = pending.readSlice(length: safe) { events.append(.content(content)) }
                break loop
            case .done:
                break loop
            }
        }
        if pending.readableBytes == 0 {
            pending = ByteBuffer()
        } else if pending.readerIndex > 0 {
            // Detach the held-back bytes from the input's storage.
            pending = ByteBuffer(bytes: pending.readableBytesView)
        }
        return events
    }

    /// The input ended.
    ///
    /// - Throws: ``ParseError`` unless the closing delimiter was read.
    func finish() throws {
        guard case .done = state else { throw ParseError(message: "The form body ended before its closing boundary.") }
    }

    /// After a delimiter: true for `--` (the end), false for a line end (optionally after spaces), nil when more input
    /// is needed.
    private mutating func readAfterDelimiter() throws -> Bool? {
        let view = pending.readableBytesView
        guard let first = view.first else { return nil }
        if first == UInt8(ascii: "-") {
            guard view.count >= 2 else { return nil }
            guard view[view.startIndex + 1] == UInt8(ascii: "-") else {
                throw ParseError(message: "A boundary is followed by garbage.")
            }
            pending.moveReaderIndex(forwardBy: 2)
            return true
        }
        var index = view.startIndex
        while index < view.endIndex, view[index] == 0x20 || view[index] == 0x09 { index += 1 }
        guard index < view.endIndex else {
            if view.count > 64 { throw ParseError(message: "A boundary is followed by garbage.") }
            return nil
        }
        guard view[index] == 13 else { throw ParseError(message: "A boundary is followed by garbage.") }
        guard index + 1 < view.endIndex else { return nil }
        guard view[index + 1] == 10 else { throw ParseError(message: "A boundary is followed by garbage.") }
        pending.moveReaderIndex(forwardBy: index + 2 - view.startIndex)
        return false
    }

    /// Bytes at the start of `buffer` that cannot be part of a delimiter beginning in it.
    private func safePrefixLength(_ buffer: ByteBuffer) -> Int {
        let count = buffer.readableBytes
        let keep = min(count, delimiter.count - 1)
        // Hold back only the longest suffix that is a prefix of the delimiter.
        return buffer.withUnsafeReadableBytes { bytes -> Int in
            var length = keep
            while length > 0 {
                var matches = true
                for i in 0..<length where bytes[count - length + i] != delimiter[i] {
                    matches = false
                    break
                }
                if matches { return count - length }
                length -= 1
            }
            return count
        }
    }

    /// Offset of the first complete occurrence of `needle`, or nil.
    private func find(_ needle: [UInt8], in buffer: ByteBuffer) -> Int? {
        buffer.withUnsafeReadableBytes { bytes -> Int? in
            let count = bytes.count
            guard count >= needle.count else { return nil }
            let first = needle[0]
            var index = 0
            let last = count - needle.count
            while index <= last {
                guard let found = memchrIndex(bytes, first, from: index, to: last + 1) else { return nil }
                var matches = true
                for i in 1..<needle.count where bytes[found + i] != needle[i] {
                    matches = false
                    break
                }
                if matches { return found }
                index = found + 1
            }
            return nil
        }
    }

    private func memchrIndex(_ bytes: UnsafeRawBufferPointer, _ byte: UInt8, from: Int, to: Int) -> Int? {
        guard from < to, let base = bytes.baseAddress else { return nil }
        guard let found = memchr(base + from, Int32(byte), to - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }

    /// Parses a header block (lines separated by CRLF).
    static func parseHeaders(_ block: String) throws -> PartHeaders {
        var name: String?
        var filename: String?
        var contentType: String?
        for line in block.split(separator: "\r\n", omittingEmptySubsequences: true) {
            guard let colon = line.firstIndex(of: ":") else { throw ParseError(message: "A part header has no colon.") }
            let field = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch field {
            case "content-disposition":
                let parameters = try parseDisposition(value)
                name = parameters["name"]
                filename = parameters["filename"]
            case "content-type":
                contentType = value
            default:
                continue
            }
        }
        guard let name else { throw ParseError(message: "A part has no Content-Disposition form-data name.") }
        return PartHeaders(name: name, filename: filename, contentType: contentType)
    }

    /// The parameters of `form-data; name="…"; filename="…"` (quoted strings may escape `"` and `\`).
    static func parseDisposition(_ value: String) throws -> [String: String] {
        var characters = Substring(value)
        func skipSpaces() { while characters.first == " " || characters.first == "\t" { characters.removeFirst() } }
        skipSpaces()
        let type = characters.prefix { $0 != ";" }
        guard type.trimmingCharacters(in: .whitespaces).lowercased() == "form-data" else {
            throw ParseError(message: "A part is not form-data.")
        }
        characters = characters.dropFirst(type.count)
        var parameters: [String: String] = [:]
        while !characters.isEmpty {
            guard characters.first == ";" else {
                throw ParseError(message: "A part's Content-Disposition is malformed.")
            }
            characters.removeFirst()
            skipSpaces()
            if characters.isEmpty { break }
            let key = characters.prefix { $0 != "=" && $0 != ";" }
            characters = characters.dropFirst(key.count)
            guard characters.first == "=" else {
                throw ParseError(message: "A part's Content-Disposition is malformed.")
            }
            characters.removeFirst()
            var parsed = ""
            if characters.first == "\"" {
                characters.removeFirst()
                var closed = false
                while let character = characters.first {
                    characters.removeFirst()
                    if character == "\\", let escaped = characters.first {
                        characters.removeFirst()
                        parsed.append(escaped)
                    } else if character == "\"" {
                        closed = true
                        break
                    } else {
                        parsed.append(character)
                    }
                }
                guard closed else { throw ParseError(message: "A part's Content-Disposition is malformed.") }
            } else {
                let token = characters.prefix { $0 != ";" }
                characters = characters.dropFirst(token.count)
                parsed = token.trimmingCharacters(in: .whitespaces)
            }
            skipSpaces()
            parameters[key.trimmingCharacters(in: .whitespaces).lowercased()] = parsed
        }
        return parameters
    }
}
