import FerryCore
import Hummingbird
import NIOCore

/// Reads a `multipart/form-data` request body part by part: the small fields into memory, then the `file` part as
/// an async sequence of buffers the store writes as they arrive.
///
/// `@unchecked Sendable`: a reader belongs to one request and is used by one task at a time — the handler reads the
/// fields, then hands ``fileContent(limit:ignoringLaterParts:)`` to the store, which iterates it from the same task
/// before the handler goes on; nothing touches it concurrently.
final class FormBodyReader: @unchecked Sendable {
    private var body: RequestBody.AsyncIterator
    private var parser: MultipartFormParser
    private var queued: [MultipartFormParser.Event] = []
    private var queuedIndex = 0
    private var inputEnded = false
    /// Events read ahead by ``peekFile(upTo:)``, given again before any other.
    private var peeked: [MultipartFormParser.Event] = []

    /// A field or the start of the file, as ``nextPart()`` returns it.
    enum Part {
        /// A text field, whole.
        case field(name: String, value: String)
        /// The `file` part begins; its content follows through ``fileContent(limit:ignoringLaterParts:)``.
        case file(MultipartFormParser.PartHeaders)
        /// The form ended without a file part.
        case end
    }

    /// Limits on the fields before the file.
    static let maxFieldBytes = 64 * 1024
    static let maxFields = 200

    private var fieldCount = 0

    init(body: RequestBody, boundary: String) {
        self.body = body.makeAsyncIterator()
        self.parser = MultipartFormParser(boundary: boundary)
    }

    /// The next event of the parser, reading input as needed; nil when the body ended after the closing boundary.
    private func nextEvent() async throws -> MultipartFormParser.Event? {
        if !peeked.isEmpty { return peeked.removeFirst() }
        while true {
            if queuedIndex < queued.count {
                defer { queuedIndex += 1 }
                return queued[queuedIndex]
            }
            queued.removeAll(keepingCapacity: true)
            queuedIndex = 0
            if inputEnded { return nil }
            let input: ByteBuffer?
            do {
                input = try await body.next()
            } catch {
                throw FormUploadError(.malformedForm, "The request body ended early.")
            }
            guard let input else {
                inputEnded = true
                do {
                    try parser.finish()
                } catch let error as MultipartFormParser.ParseError {
                    throw FormUploadError(.malformedForm, error.message)
                }
                continue
            }
            do {
                queued = try parser.feed(input)
            } catch let error as MultipartFormParser.ParseError {
                throw FormUploadError(.malformedForm, error.message)
            }
        }
    }

    /// Reads the next text field, or stops at the file part.
    func nextPart() async throws -> Part {
        guard let event = try await nextEvent() else { return .end }
        guard case .partStart(let headers) = event else {
            throw FormUploadError(.malformedForm, "The form's parts are out of order.")
        }
        if headers.name == FormUploadFields.file { return .file(headers) }
        fieldCount += 1
        guard fieldCount <= Self.maxFields else {
            throw FormUploadError(.invalidArgument, "The form has more than \(Self.maxFields) fields.")
        }
        var value = ByteBuffer()
        while let next = try await nextEvent() {
            switch next {
            case .content(var piece):
                guard value.readableBytes + piece.readableBytes <= Self.maxFieldBytes else {
                    throw FormUploadError(
                        .invalidArgument, "The field \(headers.name.prefix(64)) is longer than 64 KiB.")
                }
                value.writeBuffer(&piece)
            case .partEnd:
                guard let text = String(validating: value.readableBytesView, as: UTF8.self) else {
                    throw FormUploadError(.invalidArgument, "The field \(headers.name.prefix(64)) is not UTF-8 text.")
                }
                return .field(name: headers.name, value: text)
            case .partStart:
                throw FormUploadError(.malformedForm, "The form's parts are out of order.")
            }
        }
        throw FormUploadError(.malformedForm, "The form body ended inside a field.")
    }

    /// The file part's first `count` bytes (all of them when it is shorter), read ahead:
    /// ``fileContent(limit:ignoringLaterParts:)`` still gives them. Called right after ``nextPart()`` returned the
    /// file.
    func peekFile(upTo count: Int) async throws -> [UInt8] {
        var head: [UInt8] = []
        var events: [MultipartFormParser.Event] = []
        defer { peeked = events + peeked }
        while head.count < count, let event = try await nextEvent() {
            events.append(event)
            guard case .content(let piece) = event else { break }
            head += piece.readableBytesView.prefix(count - head.count)
        }
        return head
    }

    /// The file part's content; it ends only when the closing boundary follows it. A part after the file (unless
    /// `ignoringLaterParts`: S3's POST ignores the fields after the file, within the limits on fields), a body that
    /// ends early, or more than `limit` bytes throw from the sequence (so the store keeps nothing).
    func fileContent(limit: Int64?, ignoringLaterParts: Bool = false) -> FileContent {
        FileContent(reader: self, limit: limit, ignoringLaterParts: ignoringLaterParts)
    }

    /// Reads the parts after the file to the closing boundary, keeping nothing of them.
    fileprivate func skipLaterParts() async throws {
        var length = 0
        while let event = try await nextEvent() {
            switch event {
            case .partStart:
                fieldCount += 1
                length = 0
                guard fieldCount <= Self.maxFields else {
                    throw FormUploadError(.invalidArgument, "The form has more than \(Self.maxFields) fields.")
                }
            case .content(let piece):
                length += piece.readableBytes
                guard length <= Self.maxFieldBytes else {
                    throw FormUploadError(.invalidArgument, "A field after the file is longer than 64 KiB.")
                }
            case .partEnd(final: true):
                return
            case .partEnd(final: false):
                continue
            }
        }
        throw FormUploadError(.malformedForm, "The form body ended inside a field.")
    }

    /// The file part's bytes as the store consumes them.
    struct FileContent: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let reader: FormBodyReader
        let limit: Int64?
        let ignoringLaterParts: Bool

        struct AsyncIterator: AsyncIteratorProtocol {
            let reader: FormBodyReader
            let limit: Int64?
            let ignoringLaterParts: Bool
            var count: Int64 = 0
            var ended = false

            mutating func next() async throws -> ByteBuffer? {
                guard !ended else { return nil }
                while let event = try await reader.nextEvent() {
                    switch event {
                    case .content(let piece):
                        count += Int64(piece.readableBytes)
                        if let limit, count > limit {
                            throw FormUploadError(
                                .fileTooLarge, "The file is larger than the token allows (\(limit) bytes).")
                        }
                        return piece
                    case .partEnd(final: true):
                        ended = true
                        return nil
                    case .partEnd(final: false):
                        guard ignoringLaterParts else {
                            throw FormUploadError(.fileNotLast, "The file must be the last part of the form.")
                        }
                        try await reader.skipLaterParts()
                        ended = true
                        return nil
                    case .partStart:
                        throw FormUploadError(.malformedForm, "The form's parts are out of order.")
                    }
                }
                throw FormUploadError(.malformedForm, "The form body ended inside the file.")
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(reader: reader, limit: limit, ignoringLaterParts: ignoringLaterParts)
        }
    }
}
