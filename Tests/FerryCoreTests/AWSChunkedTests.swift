import Crypto
import Foundation
import Testing

@testable import FerryCore

/// The AWS S3 documentation's chunked upload example ("Signature Calculations for the
/// Authorization Header: Transferring Payload in Multiple Chunks"): a PUT of 66560 bytes of 'a'
/// to /examplebucket/chunkObject.txt in 64 KiB chunks.
private enum ChunkedDocExample {
    static let seedSignature = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    static let chunkSignatures = [
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ]
    static let decodedLength = 66_560
    static let contentLength = 66_824
    static let payload = [UInt8](repeating: UInt8(ascii: "a"), count: decodedLength)

    static let requestHeaders: [(name: String, value: String)] = [
        ("Host", "s3.amazonaws.com"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("Content-Encoding", "aws-chunked"),
        ("Content-Length", "66824"),
        ("x-amz-decoded-content-length", "66560"),
    ]

    static var mode: AWSChunkedMode {
        .signed(
            seedSignature: seedSignature,
            signingKey: SigV4.signingKey(
                secretAccessKey: SigV4DocExample.credentials.secretAccessKey, scope: SigV4DocExample.scope),
            timestamp: "20130524T000000Z", scope: SigV4DocExample.scope)
    }

    /// The encoded body exactly as the documentation lays it out.
    static let body: [UInt8] = {
        var body = Array("10000;chunk-signature=\(chunkSignatures[0])\r\n".utf8)
        body += [UInt8](repeating: UInt8(ascii: "a"), count: 65_536) + Array("\r\n".utf8)
        body += Array("400;chunk-signature=\(chunkSignatures[1])\r\n".utf8)
        body += [UInt8](repeating: UInt8(ascii: "a"), count: 1024) + Array("\r\n".utf8)
        body += Array("0;chunk-signature=\(chunkSignatures[2])\r\n\r\n".utf8)
        return body
    }()
}

/// CRC-32 (IEEE, as zlib), for building checksum trailers in tests.
private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1)))
        }
    }
    return ~crc
}

private func crc32Base64(_ bytes: [UInt8]) -> String {
    let value = crc32(bytes)
    return Data([UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)])
        .base64EncodedString()
}

/// Feeds `body` to `decoder` in slices whose sizes come from `sizes` (cycled), collecting the output.
private func decode(_ body: [UInt8], with decoder: inout AWSChunkedDecoder, sliceSizes sizes: () -> Int) throws
    -> [UInt8]
{
    var out: [UInt8] = []
    out.reserveCapacity(body.count)
    try body.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let size = min(max(1, sizes()), buffer.count - offset)
            try decoder.feed(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + size)])) {
                out.append(contentsOf: $0)
            }
            offset += size
        }
    }
    return out
}

private func errorCode(_ body: () throws -> Void) -> SigV4Error.Code? {
    do {
        try body()
        return nil
    } catch let error as SigV4Error {
        return error.code
    } catch {
        return nil
    }
}

@Suite("aws-chunked — AWS documentation streaming example", .timeLimit(.minutes(10)))
struct AWSChunkedExampleTests {
    @Test("Seed signature of the chunked PUT")
    func seedSignature() throws {
        let signed = SigV4DocExample.signer.sign(
            method: "PUT", path: "/examplebucket/chunkObject.txt", query: [], headers: ChunkedDocExample.requestHeaders,
            payloadHash: SigV4.streamingSignedPayload, date: SigV4DocExample.date)
        #expect(
            signed.canonicalRequest == """
                PUT
                /examplebucket/chunkObject.txt

                content-encoding:aws-chunked
                content-length:66824
                host:s3.amazonaws.com
                x-amz-content-sha256:STREAMING-AWS4-HMAC-SHA256-PAYLOAD
                x-amz-date:20130524T000000Z
                x-amz-decoded-content-length:66560
                x-amz-storage-class:REDUCED_REDUNDANCY

                content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class
                STREAMING-AWS4-HMAC-SHA256-PAYLOAD
                """)
        #expect(
            signed.stringToSign
                == SigV4DocExample.stringToSign("cee3fed04b70f867d036f722359b0b1f2f0e5dc0efadbc082b76c4c60e316455"))
        #expect(signed.signature == ChunkedDocExample.seedSignature)
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
        )
    }

    @Test("Content-Length of the framed body")
    func encodedLength() {
        #expect(AWSChunkedEncoder.encodedLength(decodedLength: 66_560, chunkSize: 65_536, signed: true) == 66_824)
        #expect(ChunkedDocExample.body.count == ChunkedDocExample.contentLength)
        #expect(AWSChunkedEncoder.encodedLength(decodedLength: 0, chunkSize: 65_536, signed: true) == 86)
        #expect(AWSChunkedEncoder.encodedLength(decodedLength: 0, chunkSize: 65_536, signed: false) == 5)
    }

    @Test("Each chunk signature chains from the seed")
    func chunkSignatures() {
        var signer = SigV4ChunkSigner(
            seedSignature: ChunkedDocExample.seedSignature,
            signingKey: SigV4.signingKey(
                secretAccessKey: SigV4DocExample.credentials.secretAccessKey, scope: SigV4DocExample.scope),
            timestamp: "20130524T000000Z", scope: SigV4DocExample.scope)
        #expect(
            SigV4.chunkStringToSign(
                timestamp: "20130524T000000Z", scope: SigV4DocExample.scope,
                previousSignature: ChunkedDocExample.seedSignature,
                chunkHash: SigV4.hexSHA256([UInt8](repeating: UInt8(ascii: "a"), count: 65_536))) == """
                    AWS4-HMAC-SHA256-PAYLOAD
                    20130524T000000Z
                    20130524/us-east-1/s3/aws4_request
                    4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9
                    e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                    bf718b6f653bebc184e1479f1935b8da974d701b893afcf49e701f3e2f9f9c5a
                    """)
        #expect(
            signer.signChunk([UInt8](repeating: UInt8(ascii: "a"), count: 65_536))
                == ChunkedDocExample.chunkSignatures[0])
        #expect(
            signer.signChunk([UInt8](repeating: UInt8(ascii: "a"), count: 1024)) == ChunkedDocExample.chunkSignatures[1]
        )
        #expect(signer.signChunk([UInt8]()) == ChunkedDocExample.chunkSignatures[2])
        #expect(signer.previousSignature == ChunkedDocExample.chunkSignatures[2])
    }

    @Test("The encoder reproduces the documented body byte for byte")
    func encoderMatchesDocumentation() {
        let signed = SigV4DocExample.signer.sign(
            method: "PUT", path: "/examplebucket/chunkObject.txt", query: [], headers: ChunkedDocExample.requestHeaders,
            payloadHash: SigV4.streamingSignedPayload, date: SigV4DocExample.date)
        var encoder = AWSChunkedEncoder(mode: signed.chunkedSigningMode)
        let payload = ChunkedDocExample.payload
        var body = encoder.encodeChunk(payload[0..<65_536])
        #expect(body.starts(with: Array("10000;chunk-signature=\(ChunkedDocExample.chunkSignatures[0])\r\n".utf8)))
        let second = Array(payload[65_536...])
        let header = second.withUnsafeBytes { encoder.chunkHeader(for: $0) }
        #expect(header == Array("400;chunk-signature=\(ChunkedDocExample.chunkSignatures[1])\r\n".utf8))
        body += header + second + Array("\r\n".utf8)
        #expect(encoder.encodeChunk([UInt8]()) == [])
        body += encoder.finalChunk()
        #expect(encoder.isFinished)
        #expect(body == ChunkedDocExample.body)
    }
}

@Suite("aws-chunked — streaming decoder", .timeLimit(.minutes(10)))
struct AWSChunkedDecoderTests {
    @Test(
        "The documented body decodes in 1-byte, 7-byte, random and whole slices",
        arguments: ["1", "7", "random", "whole"])
    func decodesDocumentedBody(slicing: String) throws {
        var decoder = AWSChunkedDecoder(
            mode: ChunkedDocExample.mode, decodedContentLength: Int64(ChunkedDocExample.decodedLength))
        var rng = SplitMix64(state: 42)
        let sizes: () -> Int
        switch slicing {
        case "1": sizes = { 1 }
        case "7": sizes = { 7 }
        case "random": sizes = { Int.random(in: 1...300, using: &rng) }
        default: sizes = { Int.max }
        }
        let out = try decode(ChunkedDocExample.body, with: &decoder, sliceSizes: sizes)
        #expect(out == ChunkedDocExample.payload)
        #expect(decoder.isComplete)
        #expect(decoder.decodedByteCount == Int64(ChunkedDocExample.decodedLength))
        let trailers = try decoder.finish()
        #expect(trailers.isEmpty)
    }

    @Test("feedRanges locates the payload inside each input slice")
    func feedRanges() throws {
        var decoder = AWSChunkedDecoder(
            mode: ChunkedDocExample.mode, decodedContentLength: Int64(ChunkedDocExample.decodedLength))
        var out: [UInt8] = []
        var rangeCount = 0
        try ChunkedDocExample.body.withUnsafeBytes { buffer in
            for start in stride(from: 0, to: buffer.count, by: 10_000) {
                let slice = UnsafeRawBufferPointer(rebasing: buffer[start..<min(start + 10_000, buffer.count)])
                for range in try decoder.feedRanges(slice) {
                    out.append(contentsOf: slice[range])
                    rangeCount += 1
                }
            }
        }
        #expect(out == ChunkedDocExample.payload)
        #expect(rangeCount == 8)  // each of the 7 slices carries first-chunk data; the 7th also the second chunk
        #expect(try decoder.finish().isEmpty)
        #expect(try decoder.feedRanges(UnsafeRawBufferPointer(start: nil, count: 0)).isEmpty)
    }

    @Test("Verification end to end: the server verifies the seed, then decodes with the chained mode")
    func verifierToDecoder() throws {
        let signed = SigV4DocExample.signer.sign(
            method: "PUT", path: "/examplebucket/chunkObject.txt", query: [], headers: ChunkedDocExample.requestHeaders,
            payloadHash: SigV4.streamingSignedPayload, date: SigV4DocExample.date)
        let verified = try SigV4Verifier.verify(
            authorization: try SigV4Authorization(parsing: signed.authorization),
            secretAccessKey: SigV4DocExample.credentials.secretAccessKey, method: "PUT",
            canonicalURI: SigV4.canonicalURI(fromRawPath: "/examplebucket/chunkObject.txt"), query: [],
            headers: signed.headers, now: SigV4DocExample.date)
        #expect(verified.payloadHash == SigV4.streamingSignedPayload)
        let mode = try #require(verified.chunkedDecoderMode)
        var decoder = AWSChunkedDecoder(mode: mode, decodedContentLength: 66_560)
        #expect(try decoder.feed(ChunkedDocExample.body) == ChunkedDocExample.payload)
        #expect(try decoder.finish().isEmpty)
    }

    @Test(
        "A tampered data byte fails that chunk's signature",
        arguments: [88 + 10, 88 + 65_535, 88 + 65_536 + 2 + 86 + 500])
    func tamperedData(at index: Int) throws {
        var body = ChunkedDocExample.body
        #expect(body[index] == UInt8(ascii: "a"))
        body[index] = UInt8(ascii: "b")
        var decoder = AWSChunkedDecoder(mode: ChunkedDocExample.mode, decodedContentLength: 66_560)
        var thrown: SigV4Error?
        do {
            var rng = SplitMix64(state: 7)
            _ = try decode(body, with: &decoder, sliceSizes: { Int.random(in: 1...5000, using: &rng) })
        } catch let error as SigV4Error {
            thrown = error
        }
        #expect(thrown?.code == .signatureDoesNotMatch)
        #expect(thrown?.message.contains("ad80c730") == false)
        // The decoder stays failed.
        #expect(errorCode { _ = try decoder.feed(Array("0\r\n\r\n".utf8)) } == .signatureDoesNotMatch)
        #expect(errorCode { _ = try decoder.finish() } == .signatureDoesNotMatch)
    }

    @Test("Tampered, reordered or missing chunk signatures are rejected")
    func tamperedSignatures() throws {
        func decodeError(_ body: [UInt8]) -> SigV4Error.Code? {
            var decoder = AWSChunkedDecoder(mode: ChunkedDocExample.mode, decodedContentLength: nil)
            return errorCode {
                _ = try decoder.feed(body)
                _ = try decoder.finish()
            }
        }
        let text = String(decoding: ChunkedDocExample.body, as: UTF8.self)
        let sigs = ChunkedDocExample.chunkSignatures
        // One hex digit of the first signature changed.
        #expect(
            decodeError(Array(text.replacingOccurrences(of: sigs[0], with: "bd80" + sigs[0].dropFirst(4)).utf8))
                == .signatureDoesNotMatch)
        // The final chunk's signature replaced by the previous one.
        #expect(
            decodeError(
                Array(
                    text.replacingOccurrences(of: "0;chunk-signature=\(sigs[2])", with: "0;chunk-signature=\(sigs[1])")
                        .utf8)) == .signatureDoesNotMatch)
        // The final chunk's signature missing.
        #expect(
            decodeError(Array(text.replacingOccurrences(of: "0;chunk-signature=\(sigs[2])", with: "0").utf8))
                == .malformedChunk)
        // Not 64 hex digits.
        #expect(
            decodeError(Array(text.replacingOccurrences(of: sigs[1], with: String(sigs[1].dropLast())).utf8))
                == .malformedChunk)
        // Uppercase hex is the same signature.
        #expect(decodeError(Array(text.replacingOccurrences(of: sigs[1], with: sigs[1].uppercased()).utf8)) == nil)
        // A body signed with another secret.
        var other = AWSChunkedEncoder(
            mode: .signed(
                seedSignature: ChunkedDocExample.seedSignature,
                signingKey: SigV4.signingKey(secretAccessKey: "another", scope: SigV4DocExample.scope),
                timestamp: "20130524T000000Z", scope: SigV4DocExample.scope))
        #expect(decodeError(other.encodeChunk(Array("hello".utf8)) + other.finalChunk()) == .signatureDoesNotMatch)
    }

    @Test("A truncated body is incomplete on finish", arguments: [1, 2, 3, 90, 1100, 40_000])
    func truncated(droppingLast count: Int) throws {
        var decoder = AWSChunkedDecoder(mode: ChunkedDocExample.mode, decodedContentLength: 66_560)
        _ = try decoder.feed(ChunkedDocExample.body.dropLast(count))
        #expect(!decoder.isComplete)
        #expect(errorCode { _ = try decoder.finish() } == .incompleteBody)
    }

    @Test("The decoded length must equal x-amz-decoded-content-length")
    func decodedLength() throws {
        var short = AWSChunkedDecoder(mode: ChunkedDocExample.mode, decodedContentLength: 66_559)
        var emitted = 0
        let code = errorCode {
            try ChunkedDocExample.body.withUnsafeBytes { buffer in
                try short.feed(buffer) { emitted += $0.count }
            }
        }
        #expect(code == .decodedLengthMismatch)
        #expect(emitted == 65_536)  // rejected at the second chunk's header, before its data
        var long = AWSChunkedDecoder(mode: ChunkedDocExample.mode, decodedContentLength: 66_561)
        _ = try long.feed(ChunkedDocExample.body)
        #expect(long.isComplete)
        #expect(errorCode { _ = try long.finish() } == .incompleteBody)
    }

    @Test("An unsigned body with an x-amz-checksum-crc32 trailer")
    func unsignedTrailer() throws {
        #expect(crc32(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(crc32Base64(Array("hello".utf8)) == "NhCmhg==")
        let body = Array("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n".utf8)
        #expect(
            Int64(body.count)
                == AWSChunkedEncoder.encodedLength(
                    decodedLength: 5, chunkSize: 65_536, signed: false, trailers: [("x-amz-checksum-crc32", 8)]))
        for size in [1, 3, body.count] {
            var decoder = AWSChunkedDecoder(
                mode: .unsigned, decodedContentLength: 5, expectedTrailers: ["x-amz-checksum-crc32"])
            let out = try decode(body, with: &decoder, sliceSizes: { size })
            #expect(out == Array("hello".utf8))
            let trailers = try decoder.finish()
            #expect(trailers.count == 1)
            #expect(trailers.first?.name == "x-amz-checksum-crc32")
            #expect(trailers.first?.value == "NhCmhg==")
        }
        // The encoder frames the same body.
        var encoder = AWSChunkedEncoder(mode: .unsigned)
        let encoded =
            encoder.encodeChunk(Array("hello".utf8))
            + encoder.finalChunk(trailers: [("x-amz-checksum-crc32", crc32Base64(Array("hello".utf8)))])
        #expect(encoded == body)
        // A trailer announced in x-amz-trailer but not sent.
        var missing = AWSChunkedDecoder(
            mode: .unsigned, decodedContentLength: 5, expectedTrailers: ["x-amz-checksum-sha256"])
        _ = try missing.feed(body)
        #expect(errorCode { _ = try missing.finish() } == .missingTrailer)
        // A trailer sent twice (a right and a wrong checksum, in either order) is refused, not chosen between.
        for pair in [("NhCmhg==", "AAAAAA=="), ("AAAAAA==", "NhCmhg==")] {
            var twice = AWSChunkedDecoder(
                mode: .unsigned, decodedContentLength: 5, expectedTrailers: ["x-amz-checksum-crc32"])
            let doubled = Array("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:\(pair.0)\r\nx-amz-checksum-crc32:\(pair.1)\r\n\r\n".utf8)
            #expect(errorCode { _ = try twice.feed(doubled); _ = try twice.finish() } == .missingTrailer)
        }
        // Without the closing blank line the body is incomplete.
        var unterminated = AWSChunkedDecoder(mode: .unsigned, decodedContentLength: 5)
        _ = try unterminated.feed(body.dropLast(2))
        #expect(errorCode { _ = try unterminated.finish() } == .incompleteBody)
        // Unsigned chunk headers may carry (ignored) extensions.
        var withExtension = AWSChunkedDecoder(mode: .unsigned, decodedContentLength: nil)
        #expect(try withExtension.feed(Array("5;foo=bar\r\nhello\r\n0\r\n\r\n".utf8)) == Array("hello".utf8))
        #expect(try withExtension.finish().isEmpty)
        // Only the last data chunk may be smaller than 8 KiB: a body of 1-byte chunks costs its framing many times
        // over, and S3 refuses it.
        var tiny = AWSChunkedEncoder(mode: .unsigned)
        let small = tiny.encodeChunk(Array("he".utf8)) + tiny.encodeChunk(Array("llo".utf8)) + tiny.finalChunk()
        var refusing = AWSChunkedDecoder(mode: .unsigned, decodedContentLength: 5)
        #expect(errorCode { _ = try refusing.feed(small) } == .invalidChunkSize)
        var full = AWSChunkedEncoder(mode: .unsigned)
        let large = [UInt8](repeating: 7, count: 8192)
        let lastSmall = full.encodeChunk(large) + full.encodeChunk(Array("tail".utf8)) + full.finalChunk()
        var accepting = AWSChunkedDecoder(mode: .unsigned, decodedContentLength: 8196)
        #expect(try accepting.feed(lastSmall) == large + Array("tail".utf8))
        #expect(try accepting.finish().isEmpty)
    }

    @Test("Signed chunks with a signed trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER)")
    func signedTrailer() throws {
        let credentials = SigV4Credentials(accessKeyId: "AKIDTEST", secretAccessKey: "secret")
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        var payload = [UInt8](repeating: 0, count: 200_000)
        var rng = SplitMix64(state: 1)
        for i in payload.indices { payload[i] = UInt8.random(in: 0...255, using: &rng) }
        let checksum = crc32Base64(payload)
        let chunkSize = 65_536
        let trailers: [(name: String, valueLength: Int)] = [("x-amz-checksum-crc32", checksum.utf8.count)]
        let contentLength = AWSChunkedEncoder.encodedLength(
            decodedLength: Int64(payload.count), chunkSize: chunkSize, signed: true, trailers: trailers)
        let signed = signer.sign(
            method: "PUT", path: "/bucket/key", query: [],
            headers: [
                ("host", "localhost"), ("content-encoding", "aws-chunked"), ("content-length", String(contentLength)),
                ("x-amz-decoded-content-length", String(payload.count)), ("x-amz-trailer", "x-amz-checksum-crc32"),
            ],
            payloadHash: SigV4.streamingSignedPayloadTrailer, date: date)
        var encoder = AWSChunkedEncoder(mode: signed.chunkedSigningMode)
        var body: [UInt8] = []
        for start in stride(from: 0, to: payload.count, by: chunkSize) {
            body += encoder.encodeChunk(payload[start..<min(start + chunkSize, payload.count)])
        }
        body += encoder.finalChunk(trailers: [("x-amz-checksum-crc32", checksum)])
        #expect(Int64(body.count) == contentLength)
        // The end of the body: CRLF after the last data, the final chunk header (84 bytes), the
        // trailer (31), its signature (90) and the closing CRLF.
        let tailLength = 2 + 84 + 31 + 90 + 2
        let tail = String(decoding: body.suffix(tailLength), as: UTF8.self)
        let head = Array(body.dropLast(tailLength))
        #expect(tail.hasPrefix("\r\n0;chunk-signature="))
        #expect(tail.contains("\r\nx-amz-checksum-crc32:\(checksum)\r\nx-amz-trailer-signature:"))
        #expect(tail.hasSuffix("\r\n\r\n"))

        let verified = try SigV4Verifier.verify(
            authorization: try SigV4Authorization(parsing: signed.authorization), secretAccessKey: "secret",
            method: "PUT",
            canonicalURI: "/bucket/key", query: [], headers: signed.headers, now: date)
        let mode = try #require(verified.chunkedDecoderMode)
        var decoder = AWSChunkedDecoder(
            mode: mode, decodedContentLength: Int64(payload.count), expectedTrailers: ["x-amz-checksum-crc32"])
        var sliceRng = SplitMix64(state: 3)
        let out = try decode(body, with: &decoder, sliceSizes: { Int.random(in: 1...9000, using: &sliceRng) })
        #expect(out == payload)
        let received = try decoder.finish()
        #expect(received.map { $0.name } == ["x-amz-checksum-crc32"])
        #expect(received.first?.value == checksum)

        func decodeError(_ body: [UInt8]) -> SigV4Error.Code? {
            var decoder = AWSChunkedDecoder(mode: mode, decodedContentLength: Int64(payload.count))
            return errorCode {
                _ = try decoder.feed(body)
                _ = try decoder.finish()
            }
        }
        // A changed trailer value.
        #expect(
            decodeError(head + Array(tail.replacingOccurrences(of: "crc32:\(checksum)", with: "crc32:AAAAAA==").utf8))
                == .signatureDoesNotMatch)
        // The trailer signature removed.
        let unsignedTail = tail.replacingOccurrences(
            of: #"x-amz-trailer-signature:[0-9a-f]{64}\r\n"#, with: "", options: .regularExpression)
        #expect(unsignedTail != tail)
        #expect(decodeError(head + Array(unsignedTail.utf8)) == .signatureDoesNotMatch)
        // A trailer after the signature.
        #expect(
            decodeError(Array(body.dropLast(2)) + Array("x-amz-checksum-sha256:abc\r\n\r\n".utf8)) == .missingTrailer)
    }

    @Test("Malformed framing is rejected")
    func malformedFraming() throws {
        func unsignedError(_ text: String, maxLineLength: Int = AWSChunkedDecoder.defaultMaxLineLength) -> SigV4Error
            .Code?
        {
            var decoder = AWSChunkedDecoder(
                mode: .unsigned, decodedContentLength: nil, expectedTrailers: [], maxLineLength: maxLineLength)
            return errorCode {
                _ = try decoder.feed(Array(text.utf8))
                _ = try decoder.finish()
            }
        }
        #expect(unsignedError("5\r\nhello\r\n0\r\n\r\n") == nil)
        #expect(unsignedError("zz\r\nhello\r\n0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError("-5\r\nhello\r\n0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError(";x=y\r\nhello\r\n0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError("\r\n") == .malformedChunk)
        #expect(unsignedError("ffffffffffffffffff\r\n") == .malformedChunk)
        #expect(unsignedError("5\nhello\r\n0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError("5\r\nhelloX\r\n0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError("5\r\nhello\rX0\r\n\r\n") == .malformedChunk)
        #expect(unsignedError("5\r\nhello\r\n0\r\n\r\nextra") == .malformedChunk)
        #expect(unsignedError("5\r\nhello\r\n0\r\nno-colon\r\n\r\n") == .missingTrailer)
        #expect(unsignedError("5\r\nhello\r\n0\r\n:value\r\n\r\n") == .missingTrailer)
        #expect(unsignedError("5\r\nhello\r\n0\r\n") == .incompleteBody)
        #expect(unsignedError("5\r\nhel") == .incompleteBody)
        #expect(unsignedError("") == .incompleteBody)
        // Line length limits, whether the long line arrives at once or byte by byte.
        #expect(unsignedError(String(repeating: "0", count: 5000) + "5\r\nhello\r\n0\r\n\r\n") == .malformedChunk)
        #expect(
            unsignedError("5" + String(repeating: ";ext=1", count: 100) + "\r\nhello\r\n0\r\n\r\n", maxLineLength: 64)
                == .malformedChunk)
        #expect(
            unsignedError(
                "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:" + String(repeating: "A", count: 70) + "\r\n\r\n",
                maxLineLength: 64) == .malformedChunk)
        var byteByByte = AWSChunkedDecoder(
            mode: .unsigned, decodedContentLength: nil, expectedTrailers: [], maxLineLength: 16)
        var thrown: SigV4Error.Code?
        for byte in Array(("5" + String(repeating: " ", count: 40) + "\r\n").utf8) where thrown == nil {
            thrown = errorCode { _ = try byteByByte.feed([byte]) }
        }
        #expect(thrown == .malformedChunk)
        // Exactly at the limit is fine: "5\r\n" is 3 bytes, "05\r\n" one too many.
        #expect(unsignedError("5\r\nhello\r\n0\r\n\r\n", maxLineLength: 3) == nil)
        #expect(unsignedError("05\r\nhello\r\n0\r\n\r\n", maxLineLength: 3) == .malformedChunk)
        #expect(unsignedError("5\r\nhello\r\n0\r\nab:c\r\n\r\n", maxLineLength: 6) == nil)
        #expect(unsignedError("5\r\nhello\r\n0\r\nab:cd\r\n\r\n", maxLineLength: 6) == .malformedChunk)
    }

    @Test("A large random payload round-trips through encoder and decoder in random slices")
    func largeRoundTrip() throws {
        var rng = SplitMix64(state: 99)
        var payload = [UInt8](repeating: 0, count: 3 * 1024 * 1024 + 12_345)
        payload.withUnsafeMutableBytes { buffer in
            var i = 0
            while i + 8 <= buffer.count {
                buffer.storeBytes(of: rng.next(), toByteOffset: i, as: UInt64.self)
                i += 8
            }
        }
        let key = SigV4.signingKey(
            secretAccessKey: "secret", scope: SigV4Scope(date: "20240101", region: "r", service: "s3"))
        let mode = AWSChunkedMode.signed(
            seedSignature: String(repeating: "0", count: 64), signingKey: key,
            timestamp: "20240101T000000Z", scope: SigV4Scope(date: "20240101", region: "r", service: "s3"))
        var encoder = AWSChunkedEncoder(mode: mode)
        var body: [UInt8] = []
        let chunkSize = 65_536
        for start in stride(from: 0, to: payload.count, by: chunkSize) {
            body += encoder.encodeChunk(payload[start..<min(start + chunkSize, payload.count)])
        }
        body += encoder.finalChunk()
        #expect(
            Int64(body.count)
                == AWSChunkedEncoder.encodedLength(
                    decodedLength: Int64(payload.count), chunkSize: chunkSize, signed: true))
        var decoder = AWSChunkedDecoder(mode: mode, decodedContentLength: Int64(payload.count))
        var hasher = SHA256()
        var total = 0
        try body.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let size = min(Int.random(in: 1...100_000, using: &rng), buffer.count - offset)
                try decoder.feed(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + size)])) { slice in
                    hasher.update(bufferPointer: slice)
                    total += slice.count
                }
                offset += size
            }
        }
        #expect(total == payload.count)
        #expect(Hex.encode(hasher.finalize()) == SigV4.hexSHA256(payload))
        #expect(try decoder.finish().isEmpty)
    }

    @Test("An error thrown by the output closure propagates and stops the decoder")
    func outputErrors() throws {
        struct DiskFull: Error {}
        var decoder = AWSChunkedDecoder(mode: .unsigned, decodedContentLength: nil)
        let body = Array("5\r\nhello\r\n0\r\n\r\n".utf8)
        #expect(throws: DiskFull.self) {
            try body.withUnsafeBytes { buffer in
                try decoder.feed(buffer) { _ in throw DiskFull() }
            }
        }
        #expect(errorCode { _ = try decoder.finish() } == .incompleteBody)
    }
}
