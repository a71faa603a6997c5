import FerryCore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A request body of known length read while it is sent: pieces of bytes in memory and ranges of local files, the
/// files read in chunks of ``chunkSize`` bytes so a body of any size takes only a chunk of memory.
///
/// ```swift
/// let body = StreamedBody([.bytes(Array(head.utf8)), .file(path: movie.path, offset: 0, length: size), .bytes(tail)])
/// let request = TransportRequest(
///     method: "POST", url: url, headers: headers, streamedBody: body, timeout: .seconds(600))
/// ```
public struct StreamedBody: Sendable {
    /// One piece of the body.
    public struct Piece: Sendable {
        enum Source: Sendable {
            case bytes([UInt8])
            case file(path: String, offset: Int64, length: Int64)
        }
        let source: Source

        /// Bytes held in memory.
        public static func bytes(_ bytes: [UInt8]) -> Piece { Piece(source: .bytes(bytes)) }

        /// `length` bytes of the file at `path` from `offset`; the file is read as the body is sent.
        public static func file(path: String, offset: Int64 = 0, length: Int64) -> Piece {
            Piece(source: .file(path: path, offset: offset, length: length))
        }

        /// Bytes in the piece.
        public var length: Int64 {
            switch source {
            case .bytes(let bytes): Int64(bytes.count)
            case .file(_, _, let length): length
            }
        }
    }

    /// The pieces, in order.
    public var pieces: [Piece]
    /// Most bytes read from a file at once. Default 256 KiB.
    public var chunkSize: Int

    /// Creates a body.
    ///
    /// - Parameters:
    ///   - pieces: the pieces, in order.
    ///   - chunkSize: most bytes read from a file at once (at least 1). Default 256 KiB.
    public init(_ pieces: [Piece], chunkSize: Int = 256 * 1024) {
        self.pieces = pieces
        self.chunkSize = Swift.max(1, chunkSize)
    }

    /// The total length in bytes.
    public var length: Int64 { pieces.reduce(0) { $0 + $1.length } }

    /// The body as chunks of at most ``chunkSize`` bytes (byte pieces come whole).
    public var chunks: Chunks { Chunks(body: self) }

    /// The body's chunks, in order. Reading a file that is missing or became shorter throws a ``FerryError``.
    public struct Chunks: AsyncSequence, Sendable {
        /// A chunk.
        public typealias Element = [UInt8]
        let body: StreamedBody

        /// Iterates the chunks.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let body: StreamedBody
            var index = 0
            var offsetInPiece: Int64 = 0

            /// The next chunk, or nil at the end.
            public mutating func next() async throws -> [UInt8]? {
                while index < body.pieces.count {
                    let piece = body.pieces[index]
                    switch piece.source {
                    case .bytes(let bytes):
                        index += 1
                        if bytes.isEmpty { continue }
                        return bytes
                    case .file(let path, let offset, let length):
                        let remaining = length - offsetInPiece
                        guard remaining > 0 else {
                            index += 1
                            offsetInPiece = 0
                            continue
                        }
                        try Task.checkCancellation()
                        let count = Int(Swift.min(Int64(body.chunkSize), remaining))
                        let chunk = try StreamedBody.read(path: path, at: offset + offsetInPiece, count: count)
                        offsetInPiece += Int64(count)
                        return chunk
                    }
                }
                return nil
            }
        }

        /// Starts from the first piece.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: body) }
    }

    /// Reads exactly `count` bytes at `offset`.
    static func read(path: String, at offset: Int64, count: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw FerryError(.fileNotFound, "The file \(path) cannot be opened.") }
        defer { close(fd) }
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            try FileReading.readFully(
                fd, into: UnsafeMutableRawPointer(buffer.baseAddress), count: count, at: offset,
                orThrow: FerryError(.fileNotFound, "The file \(path) became shorter while it was being sent."))
            initialized = count
        }
    }
}

/// Reads of exact byte ranges of local files, shared by streamed bodies and the engine's part reads.
package enum FileReading {
    /// Reads exactly `count` bytes at `offset` of `fd` into `destination`, throwing `shortRead` if the file ends (or
    /// cannot be read) first.
    package static func readFully(
        _ fd: Int32, into destination: UnsafeMutableRawPointer?, count: Int, at offset: Int64,
        orThrow shortRead: @autoclosure () -> FerryError
    ) throws {
        guard count > 0, let destination else { return }
        var done = 0
        while done < count {
            let n = pread(fd, destination + done, count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw shortRead() }
            done += n
        }
    }
}
