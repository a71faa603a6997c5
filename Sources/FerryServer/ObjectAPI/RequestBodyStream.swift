import Crypto
import FerryCore
import NIOConcurrencyHelpers
import NIOCore

/// A request body as the store should see it: aws-chunked framing removed (chunk signatures verified), the signed
/// SHA-256 checked, and the length checked against what the client declared.
///
/// Every check that fails throws from the sequence, so the store discards what it wrote. Trailing headers of an
/// aws-chunked body are published through `trailers` once the body has ended.
struct RequestBodyStream<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer

    /// The trailers of an aws-chunked body, set when the body ends.
    final class Trailers: Sendable {
        private let box = NIOLockedValueBox<[(name: String, value: String)]>([])
        var values: [(name: String, value: String)] { box.withLockedValue { $0 } }
        func set(_ values: [(name: String, value: String)]) { box.withLockedValue { $0 = values } }
    }

    let base: Base
    let chunked: AWSChunkedMode?
    let expectedSHA256: String?
    /// The decoded length the client declared (Content-Length, or x-amz-decoded-content-length for aws-chunked).
    let expectedLength: Int64?
    let trailers: Trailers

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        var decoder: AWSChunkedDecoder?
        var sha256: SHA256?
        let expectedSHA256: String?
        let expectedLength: Int64?
        let trailers: Trailers
        var count: Int64 = 0
        var done = false

        mutating func next() async throws -> ByteBuffer? {
            while !done {
                let next: ByteBuffer?
                do {
                    next = try await base.next()
                } catch {
                    // The connection ended or failed before the body did.
                    throw S3Error(.incompleteBody, "The request body ended before its declared length.")
                }
                guard let input = next else {
                    done = true
                    try finish()
                    return nil
                }
                var output: ByteBuffer
                if var decoder {
                    output = ByteBuffer()
                    output.reserveCapacity(input.readableBytes)
                    do {
                        try input.withUnsafeReadableBytes { bytes in
                            try decoder.feed(bytes) { piece in output.writeBytes(piece) }
                        }
                    } catch let error as SigV4Error {
                        throw FerryDomainError(error)
                    }
                    self.decoder = decoder
                } else {
                    output = input
                }
                guard output.readableBytes > 0 else { continue }
                count += Int64(output.readableBytes)
                if let expectedLength, count > expectedLength {
                    throw S3Error(.invalidRequest, "The request body is longer than its declared length.")
                }
                if var hasher = sha256 {
                    output.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                    sha256 = hasher
                }
                return output
            }
            return nil
        }

        private mutating func finish() throws {
            if var decoder {
                do {
                    trailers.set(try decoder.finish())
                } catch {
                    throw FerryDomainError(error)
                }
            }
            if let expectedLength, count != expectedLength {
                throw S3Error(
                    .incompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
            }
            if let expectedSHA256, let sha256 {
                let actual = Hex.encode(sha256.finalize())
                guard actual == expectedSHA256.lowercased() else {
                    throw S3Error(
                        .xAmzContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
                }
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            base: base.makeAsyncIterator(),
            decoder: chunked.map { AWSChunkedDecoder(mode: $0, decodedContentLength: expectedLength) },
            sha256: expectedSHA256 == nil ? nil : SHA256(), expectedSHA256: expectedSHA256,
            expectedLength: expectedLength, trailers: trailers)
    }
}
