import Crypto
import Foundation

// `@unchecked Sendable`: `SymmetricKey` is not declared `Sendable` by swift-crypto on Linux, but it is
// an immutable value whose copy-on-write storage is never mutated once shared, so sharing it across
// concurrency domains is safe.
/// How an aws-chunked (`Content-Encoding: aws-chunked`) body is authenticated.
public enum AWSChunkedMode: @unchecked Sendable {
    /// Each chunk carries `;chunk-signature=` chained from the request's seed signature
    /// (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`). When trailers follow the final chunk they are
    /// signed too, with `x-amz-trailer-signature` (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`).
    case signed(seedSignature: String, signingKey: SymmetricKey, timestamp: String, scope: SigV4Scope)
    /// Chunks carry no signature; trailers (typically a checksum) are not signed
    /// (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`).
    case unsigned

    var chunkSigner: SigV4ChunkSigner? {
        switch self {
        case .signed(let seedSignature, let signingKey, let timestamp, let scope):
            return SigV4ChunkSigner(
                seedSignature: seedSignature, signingKey: signingKey, timestamp: timestamp, scope: scope)
        case .unsigned:
            return nil
        }
    }
}

/// Client side: frames a payload as aws-chunked.
///
/// Call ``encodeChunk(_:)`` (or ``chunkHeader(for:)`` to send the data without copying) for each
/// data chunk in order, then ``finalChunk(trailers:)`` once. In signed mode each chunk's
/// signature chains from the previous one, so chunks must be sent in the order they were encoded.
/// AWS requires every chunk but the last data chunk to be at least 8 KiB; 64 KiB is usual.
public struct AWSChunkedEncoder: Sendable {
    /// The same modes the decoder understands.
    public typealias Mode = AWSChunkedMode

    /// The mode this encoder frames with.
    public let mode: Mode
    private var signer: SigV4ChunkSigner?
    /// Whether ``finalChunk(trailers:)`` has been produced.
    public private(set) var isFinished = false

    /// Creates an encoder. For signed mode use ``SigV4SignedRequest/chunkedSigningMode`` of the
    /// request signed with `x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`.
    public init(mode: Mode) {
        self.mode = mode
        self.signer = mode.chunkSigner
    }

    /// The chunk header line `hex-size[;chunk-signature=…]\r\n` for a chunk holding `bytes`,
    /// advancing the signature chain. Send it, then the bytes, then `\r\n`.
    /// Must not be called with an empty chunk (that is ``finalChunk(trailers:)``).
    public mutating func chunkHeader(for bytes: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(!bytes.isEmpty, "a zero-length chunk ends the body: use finalChunk(trailers:)")
        precondition(!isFinished, "the aws-chunked body is already finished")
        return headerLine(size: bytes.count, signature: signer?.signChunk(chunkHash: SHA256.hash(data: bytes)))
    }

    /// One complete framed chunk: header line, the bytes, `\r\n`. An empty collection yields an
    /// empty array (a zero-length chunk would end the body; use ``finalChunk(trailers:)``).
    public mutating func encodeChunk(_ bytes: some Collection<UInt8>) -> [UInt8] {
        precondition(!isFinished, "the aws-chunked body is already finished")
        if bytes.isEmpty { return [] }
        let signature = signer?.signChunk(bytes)
        var out = headerLine(size: bytes.count, signature: signature)
        out.reserveCapacity(out.count + bytes.count + 2)
        out.append(contentsOf: bytes)
        out.append(UInt8(ascii: "\r"))
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// The zero-length final chunk, the trailers (each `name:value\r\n`; in signed mode followed
    /// by `x-amz-trailer-signature:…\r\n` when there are any) and the closing `\r\n`.
    /// For a checksum trailer use e.g. `("x-amz-checksum-crc32", base64)` and announce its name in
    /// the request's `x-amz-trailer` header.
    public mutating func finalChunk(trailers: [(name: String, value: String)] = []) -> [UInt8] {
        precondition(!isFinished, "the aws-chunked body is already finished")
        isFinished = true
        let finalSignature = signer?.signChunk(chunkHash: SHA256.hash(data: [UInt8]()))
        var out = headerLine(size: 0, signature: finalSignature)
        let canonical = SigV4.canonicalTrailers(trailers)
        for trailer in trailers {
            out.append(contentsOf: trailer.name.lowercased().utf8)
            out.append(UInt8(ascii: ":"))
            out.append(contentsOf: SigV4.canonicalHeaderValue(trailer.value).utf8)
            out.append(contentsOf: Self.crlf)
        }
        if let signer, !trailers.isEmpty {
            out.append(contentsOf: "x-amz-trailer-signature:".utf8)
            out.append(contentsOf: signer.trailerSignature(canonicalTrailers: Array(canonical.utf8)).utf8)
            out.append(contentsOf: Self.crlf)
        }
        out.append(contentsOf: Self.crlf)
        return out
    }

    /// The length of a whole aws-chunked body (for `Content-Length`) that carries
    /// `decodedLength` bytes in chunks of `chunkSize` (the last data chunk holding the remainder),
    /// then the final chunk and the trailers, whose names and value lengths are given.
    /// `x-amz-decoded-content-length` is `decodedLength`.
    public static func encodedLength(
        decodedLength: Int64,
        chunkSize: Int,
        signed: Bool,
        trailers: [(name: String, valueLength: Int)] = []
    ) -> Int64 {
        precondition(chunkSize > 0 && decodedLength >= 0)
        let size = Int64(chunkSize)
        let fullChunks = decodedLength / size
        let remainder = decodedLength % size
        var total = fullChunks * (headerLength(size: size, signed: signed) + size + 2)
        if remainder > 0 {
            total += headerLength(size: remainder, signed: signed) + remainder + 2
        }
        total += headerLength(size: 0, signed: signed)
        for trailer in trailers {
            total += Int64(trailer.name.utf8.count + 1 + trailer.valueLength + 2)
        }
        if signed && !trailers.isEmpty {
            total += Int64("x-amz-trailer-signature:".utf8.count + 64 + 2)
        }
        return total + 2
    }

    /// The length of the header line (CRLF included) of a chunk of `size` bytes.
    public static func headerLength(size: Int64, signed: Bool) -> Int64 {
        Int64(String(size, radix: 16).utf8.count) + (signed ? Int64(";chunk-signature=".utf8.count + 64) : 0) + 2
    }

    private static let crlf: [UInt8] = [UInt8(ascii: "\r"), UInt8(ascii: "\n")]

    private func headerLine(size: Int, signature: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(90)
        out.append(contentsOf: String(size, radix: 16).utf8)
        if let signature {
            out.append(contentsOf: ";chunk-signature=".utf8)
            out.append(contentsOf: signature.utf8)
        }
        out.append(contentsOf: Self.crlf)
        return out
    }
}

/// Server side: an incremental aws-chunked decoder — a pure state machine with no I/O.
///
/// Feed it the body bytes as they arrive, in slices of any size (a chunk header or CRLF may be
/// split anywhere); it passes the decoded payload bytes to `output` as slices of the input
/// (no copy), hashes each chunk incrementally and, in signed mode, verifies every chunk signature
/// as the chunk ends and the trailer signature when it arrives. ``finish()`` checks the body was
/// complete and returns the trailers.
///
/// Payload bytes are handed out before their chunk's signature can be checked (it covers the
/// whole chunk), so they are only authentic once ``finish()`` returns: write them somewhere
/// provisional and discard everything if any call throws. After an error the decoder stays
/// failed and every later call throws again.
///
/// `@unchecked Sendable`: the running `SHA256` and the key in the mode are not declared `Sendable`
/// by swift-crypto on Linux, but both are copy-on-write values never shared while mutated.
public struct AWSChunkedDecoder: @unchecked Sendable {
    /// The authentication of the body.
    public typealias Mode = AWSChunkedMode

    /// The default maximum length of a chunk header or trailer line, CRLF included.
    public static let defaultMaxLineLength = 4096
    /// The maximum number of trailer lines accepted.
    public static let maxTrailerCount = 64

    private enum State: Sendable {
        case header
        case data
        case dataCR
        case dataLF
        case trailer
        case done
    }

    private var state: State = .header
    private var signer: SigV4ChunkSigner?
    private let decodedContentLength: Int64?
    private let expectedTrailers: [String]
    private let maxLineLength: Int
    private var line: [UInt8] = []
    private var remaining: Int64 = 0
    private var hasher = SHA256()
    private var chunkSignature: String = ""
    private var failure: SigV4Error?
    private var trailerCanonical: [UInt8] = []
    private var trailerSignatureSeen = false
    /// The size of the last data chunk begun (0 before the first).
    private var lastChunkSize: Int64 = 0
    /// The smallest chunk S3 takes but for the last: smaller ones would make a body's framing (and, signed, its
    /// signatures) cost more than its bytes.
    public static let minimumChunkSize: Int64 = 8192
    /// The number of payload bytes decoded so far.
    public private(set) var decodedByteCount: Int64 = 0
    /// The trailers parsed so far (names lowercased, values trimmed), without `x-amz-trailer-signature`.
    public private(set) var trailers: [(name: String, value: String)] = []

    /// Creates a decoder.
    /// - Parameters:
    ///   - mode: `.signed` from ``SigV4VerifiedRequest/chunkedDecoderMode`` for
    ///     `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`, `.unsigned` for `STREAMING-UNSIGNED-PAYLOAD-TRAILER`.
    ///   - decodedContentLength: `x-amz-decoded-content-length`; the decoded payload must have
    ///     exactly this length (`nil`: not checked).
    public init(mode: Mode, decodedContentLength: Int64?) {
        self.init(mode: mode, decodedContentLength: decodedContentLength, expectedTrailers: [])
    }

    /// Creates a decoder that also requires trailers and bounds line lengths.
    /// - Parameters:
    ///   - expectedTrailers: names announced in `x-amz-trailer`; ``finish()`` throws
    ///     ``SigV4Error/Code/missingTrailer`` unless each was received.
    ///   - maxLineLength: the longest chunk header or trailer line accepted, CRLF included.
    public init(
        mode: Mode, decodedContentLength: Int64?, expectedTrailers: [String], maxLineLength: Int = defaultMaxLineLength
    ) {
        self.signer = mode.chunkSigner
        self.decodedContentLength = decodedContentLength
        self.expectedTrailers = expectedTrailers.map { $0.lowercased().trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
        self.maxLineLength = max(maxLineLength, 3)
        self.line.reserveCapacity(128)
    }

    /// Whether the whole body, final chunk and trailers included, has been received.
    public var isComplete: Bool {
        if case .done = state { return true }
        return false
    }

    /// Consumes the next bytes of the body, calling `output` with each run of decoded payload
    /// bytes (slices of `bytes`, valid only during the call).
    /// - Throws: ``SigV4Error`` for malformed framing, a wrong signature, or more data than
    ///   declared; or whatever `output` throws.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, output: (UnsafeRawBufferPointer) throws -> Void) throws {
        if let failure { throw failure }
        do {
            try consume(bytes, output: output)
        } catch let error as SigV4Error {
            failure = error
            throw error
        } catch {
            failure = SigV4Error(.incompleteBody, "decoding stopped because the payload consumer failed")
            throw error
        }
    }

    /// Like ``feed(_:output:)`` but returns where the decoded payload lies in `bytes`, as offset
    /// ranges in order, so a caller holding the bytes in its own buffer type can slice that buffer
    /// without copying (and hand the slices to asynchronous writes).
    public mutating func feedRanges(_ bytes: UnsafeRawBufferPointer) throws -> [Range<Int>] {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            try feed(bytes) { _ in }
            return []
        }
        var ranges: [Range<Int>] = []
        try feed(bytes) { slice in
            guard let start = slice.baseAddress.map({ base.distance(to: $0) }) else { return }
            ranges.append(start..<(start + slice.count))
        }
        return ranges
    }

    /// Convenience for small bodies and tests: feeds `bytes` and returns the decoded payload bytes.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws -> [UInt8] {
        var out: [UInt8] = []
        let body = Array(bytes)
        try body.withUnsafeBytes { buffer in
            try feed(buffer) { out.append(contentsOf: $0) }
        }
        return out
    }

    /// Ends the body: throws ``SigV4Error/Code/incompleteBody`` unless the final chunk and the
    /// closing blank line were received and the decoded length equals
    /// `x-amz-decoded-content-length`, and ``SigV4Error/Code/missingTrailer`` when an expected
    /// trailer is absent. Returns the trailers (names lowercased), without the trailer signature.
    public mutating func finish() throws(SigV4Error) -> [(name: String, value: String)] {
        if let failure { throw failure }
        guard case .done = state else {
            let error = SigV4Error(
                .incompleteBody, "the aws-chunked body ended before its final chunk and closing line")
            failure = error
            throw error
        }
        if let decodedContentLength, decodedByteCount != decodedContentLength {
            let error = SigV4Error(
                .incompleteBody,
                "x-amz-decoded-content-length is \(decodedContentLength) but the body carried \(decodedByteCount) bytes"
            )
            failure = error
            throw error
        }
        for name in expectedTrailers where !trailers.contains(where: { $0.name == name }) {
            let error = SigV4Error(
                .missingTrailer, "the trailer '\(name.prefix(64))' announced in x-amz-trailer was not sent")
            failure = error
            throw error
        }
        return trailers
    }

    // MARK: - State machine

    private static let cr = UInt8(ascii: "\r")
    private static let lf = UInt8(ascii: "\n")

    private mutating func consume(_ bytes: UnsafeRawBufferPointer, output: (UnsafeRawBufferPointer) throws -> Void)
        throws
    {
        let count = bytes.count
        var i = 0
        while i < count {
            switch state {
            case .data:
                let take = Int(min(Int64(count - i), remaining))
                let slice = UnsafeRawBufferPointer(rebasing: bytes[i..<(i + take)])
                if signer != nil { hasher.update(bufferPointer: slice) }
                remaining -= Int64(take)
                decodedByteCount += Int64(take)
                i += take
                try output(slice)
                if remaining == 0 {
                    try endOfChunkData()
                    state = .dataCR
                }
            case .dataCR:
                guard bytes[i] == Self.cr else { throw SigV4Error.malformedChunk("chunk data is not followed by CRLF") }
                i += 1
                state = .dataLF
            case .dataLF:
                guard bytes[i] == Self.lf else { throw SigV4Error.malformedChunk("chunk data is not followed by CRLF") }
                i += 1
                state = .header
            case .header, .trailer:
                // Look for the LF ending the line, but never further than the line may be long:
                // `room` more bytes may precede the LF (the limit counts the CRLF).
                let room = maxLineLength - 1 - line.count
                let searchEnd = min(count, i + room + 1)
                var lineEnd: Int?
                var j = i
                while j < searchEnd {
                    if bytes[j] == Self.lf {
                        lineEnd = j
                        break
                    }
                    j += 1
                }
                if let lineEnd {
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<lineEnd]))
                    i = lineEnd + 1
                    guard line.last == Self.cr else {
                        throw SigV4Error.malformedChunk("a chunk header or trailer line does not end with CRLF")
                    }
                    line.removeLast()
                    if case .header = state { try headerLine() } else { try trailerLine() }
                    line.removeAll(keepingCapacity: true)
                } else {
                    guard searchEnd - i <= room else {
                        throw SigV4Error.malformedChunk(
                            "a chunk header or trailer line is longer than \(maxLineLength) bytes")
                    }
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<searchEnd]))
                    i = searchEnd
                }
            case .done:
                throw SigV4Error.malformedChunk("data follows the end of the aws-chunked body")
            }
        }
    }

    /// Parses `hex-size[;name=value]*` (in `line`, CRLF stripped).
    private mutating func headerLine() throws(SigV4Error) {
        let semicolon = line.firstIndex(of: UInt8(ascii: ";")) ?? line.count
        var sizeStart = 0
        var sizeEnd = semicolon
        while sizeStart < sizeEnd, line[sizeStart] == UInt8(ascii: " ") || line[sizeStart] == UInt8(ascii: "\t") {
            sizeStart += 1
        }
        while sizeEnd > sizeStart, line[sizeEnd - 1] == UInt8(ascii: " ") || line[sizeEnd - 1] == UInt8(ascii: "\t") {
            sizeEnd -= 1
        }
        guard sizeEnd > sizeStart else { throw .malformedChunk("a chunk header has no size") }
        guard sizeEnd - sizeStart <= 15 else { throw .malformedChunk("a chunk size is too large") }
        var size: Int64 = 0
        for k in sizeStart..<sizeEnd {
            guard let digit = Hex.value(line[k]) else { throw .malformedChunk("a chunk size is not hexadecimal") }
            size = size << 4 | Int64(digit)
        }

        var signature: String?
        if semicolon < line.count {
            let extensions = String(decoding: line[(semicolon + 1)...], as: UTF8.self)
            for ext in extensions.split(separator: ";", omittingEmptySubsequences: true) {
                let parts = ext.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
                if name == "chunk-signature" {
                    guard signature == nil else { throw .malformedChunk("a chunk header has two signatures") }
                    signature = parts.count == 2 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
                }
            }
        }
        if signer != nil {
            guard let provided = signature else { throw .malformedChunk("a chunk header has no chunk-signature") }
            guard SigV4.isHex64(provided) else { throw .malformedChunk("a chunk-signature is not 64 hex digits") }
            chunkSignature = provided.lowercased()
        }
        if let decodedContentLength, size > decodedContentLength - decodedByteCount {
            throw SigV4Error(
                .decodedLengthMismatch,
                "the body carries more than the \(decodedContentLength) bytes declared in x-amz-decoded-content-length")
        }
        if size > 0, lastChunkSize > 0, lastChunkSize < Self.minimumChunkSize {
            throw SigV4Error(
                .invalidChunkSize, "only the last chunk of an aws-chunked body may be smaller than \(Self.minimumChunkSize) bytes")
        }
        if size > 0 { lastChunkSize = size }
        if size == 0 {
            if signer != nil {
                hasher = SHA256()
                try endOfChunkData()
            }
            state = .trailer
        } else {
            remaining = size
            hasher = SHA256()
            state = .data
        }
    }

    /// Verifies the signature of the chunk whose data was just hashed.
    private mutating func endOfChunkData() throws(SigV4Error) {
        guard var chain = signer else { return }
        let digest = hasher.finalize()
        guard chain.verifyChunk(chunkHash: digest, signature: chunkSignature) else {
            throw .signatureDoesNotMatch("a chunk signature does not match the chunk data")
        }
        signer = chain
    }

    /// Parses one trailer line (in `line`, CRLF stripped); an empty line ends the body.
    private mutating func trailerLine() throws(SigV4Error) {
        if line.isEmpty {
            if signer != nil, !trailers.isEmpty, !trailerSignatureSeen {
                throw .signatureDoesNotMatch("the trailers are not followed by x-amz-trailer-signature")
            }
            state = .done
            return
        }
        guard !trailerSignatureSeen else {
            throw SigV4Error(.missingTrailer, "a trailer follows x-amz-trailer-signature")
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            throw SigV4Error(.missingTrailer, "a trailer line has no ':'")
        }
        let name = String(decoding: line[..<colon], as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased()
        let value = SigV4.canonicalHeaderValue(String(decoding: line[(colon + 1)...], as: UTF8.self))
        guard !name.isEmpty else { throw SigV4Error(.missingTrailer, "a trailer line has an empty name") }
        if name == "x-amz-trailer-signature" {
            trailerSignatureSeen = true
            guard let signer else { return }
            guard SigV4.isHex64(value) else { throw .malformedChunk("x-amz-trailer-signature is not 64 hex digits") }
            let expected = signer.trailerSignature(canonicalTrailers: trailerCanonical)
            guard SigV4.constantTimeEquals(expected, value.lowercased()) else {
                throw .signatureDoesNotMatch("the trailer signature does not match the trailers")
            }
            return
        }
        guard trailers.count < Self.maxTrailerCount else {
            throw SigV4Error(.missingTrailer, "more than \(Self.maxTrailerCount) trailers")
        }
        // Two values of one trailer (two checksums of one body, one of them wrong) are not chosen between.
        guard !trailers.contains(where: { $0.name == name }) else {
            throw SigV4Error(.missingTrailer, "the trailer '\(name.prefix(64))' is sent twice")
        }
        trailers.append((name: name, value: value))
        trailerCanonical.append(contentsOf: name.utf8)
        trailerCanonical.append(UInt8(ascii: ":"))
        trailerCanonical.append(contentsOf: value.utf8)
        trailerCanonical.append(Self.lf)
    }
}
