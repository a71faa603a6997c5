import FerryCore
import Foundation
import HTTPTypes

/// What a request says its body's digests are: `Content-MD5`, one `x-amz-checksum-*` header, or a checksum announced in
/// `x-amz-trailer` that arrives after an aws-chunked body.
struct ChecksumExpectation: Sendable {
    /// Algorithms the store must compute while it writes.
    var algorithms: [ChecksumAlgorithm] = []
    /// Expected raw values by S3 algorithm name, from headers.
    var expected: [String: [UInt8]] = [:]
    /// The algorithm whose value arrives as a trailer.
    var trailer: ChecksumAlgorithm?
    /// Expected MD5 from `Content-MD5`.
    var contentMD5: [UInt8]?

    /// The `x-amz-checksum-*` headers that carry no checksum.
    private static let parameterNames: Set<String> = ["x-amz-checksum-type", "x-amz-checksum-mode", "x-amz-checksum-algorithm"]

    /// Refuses (`InvalidRequest`) a checksum header of an algorithm the service does not compute (`SHA512`, `MD5`,
    /// `XXHASH64`, …): ignored, it would let a body that does not match it be stored as if checked.
    static func refuseUnsupported(_ headers: HTTPFields) throws {
        for field in headers {
            let name = field.name.canonicalName
            guard name.hasPrefix("x-amz-checksum-"), !parameterNames.contains(name),
                !ChecksumAlgorithm.s3Algorithms.contains(where: { $0.headerName == name })
            else { continue }
            throw unsupported("The checksum header \(name.prefix(64))")
        }
    }

    /// The refusal of a checksum (`what`) of an algorithm the service does not compute.
    static func unsupported(_ what: String) -> S3Error {
        S3Error(
            .invalidRequest,
            what + " names an algorithm this service does not check; send one of "
                + ChecksumAlgorithm.s3Algorithms.map(\.s3Name).joined(separator: ", ") + ".")
    }

    /// Reads the expectation from request headers; malformed values are `InvalidRequest` / `InvalidDigest`, and a
    /// checksum of an algorithm not computed is refused (``refuseUnsupported(_:)``).
    init(headers: HTTPFields) throws {
        try Self.refuseUnsupported(headers)
        if let md5 = headers[.contentMD5] {
            guard let data = Data(base64Encoded: md5), data.count == 16 else {
                throw S3Error(.invalidDigest, "The Content-MD5 you specified was invalid.")
            }
            contentMD5 = [UInt8](data)
        }
        for algorithm in ChecksumAlgorithm.s3Algorithms {
            guard let field = algorithm.headerField, let value = headers[field] else { continue }
            guard expected.isEmpty else {
                throw S3Error(.invalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
            }
            // A value that cannot be a digest cannot match one: BadDigest, as S3 answers.
            guard let data = Data(base64Encoded: value), data.count == algorithm.digestLength else {
                throw S3Error(.badDigest, "The \(algorithm.s3Name) you specified is not a valid \(algorithm.s3Name) digest.")
            }
            expected[algorithm.s3Name] = [UInt8](data)
            algorithms.append(algorithm)
        }
        if let name = headers[.amzTrailer] {
            let trimmed = name.trimmingCharacters(in: .whitespaces).lowercased()
            guard let algorithm = ChecksumAlgorithm.s3Algorithms.first(where: { $0.headerName == trimmed }) else {
                throw S3Error(.invalidRequest, "The value specified in the x-amz-trailer header is not supported")
            }
            guard expected.isEmpty else {
                throw S3Error(.invalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
            }
            trailer = algorithm
            algorithms.append(algorithm)
        }
        if let name = headers[.amzSDKChecksumAlgorithm] {
            guard let algorithm = ChecksumAlgorithm(name: name), ChecksumAlgorithm.s3Algorithms.contains(algorithm) else {
                throw S3Error(.invalidRequest, "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]")
            }
            // It names the algorithm of the checksum sent: a checksum of another algorithm is refused, as S3 does.
            if !algorithms.isEmpty, !algorithms.contains(algorithm) {
                throw S3Error(.invalidRequest, "Value for x-amz-sdk-checksum-algorithm header is invalid.")
            }
            if !algorithms.contains(algorithm) { algorithms.append(algorithm) }
        }
    }

    /// Checks the computed digests (and the trailer's value) against what the request declared.
    func verify(_ digests: BodyDigests, trailers: [(name: String, value: String)]) throws {
        if let contentMD5, contentMD5 != digests.md5 {
            throw S3Error(.badDigest, "The Content-MD5 you specified did not match what we received.")
        }
        var expected = self.expected
        // A checksum trailer that x-amz-trailer did not announce would go unchecked: the body is refused instead.
        if let unannounced = trailers.first(where: {
            $0.name.lowercased().hasPrefix("x-amz-checksum-") && $0.name.lowercased() != trailer?.headerName
        }) {
            throw S3Error(
                .malformedTrailer,
                "The trailer \(unannounced.name.prefix(64)) was not announced in x-amz-trailer.")
        }
        if let trailer {
            guard let value = trailers.first(where: { $0.name.lowercased() == trailer.headerName })?.value else {
                throw S3Error(.malformedTrailer, "The request contained trailing data that was not well-formed or did not conform to our published schema.")
            }
            guard let data = Data(base64Encoded: value.trimmingCharacters(in: .whitespaces)), data.count == trailer.digestLength else {
                throw S3Error(.invalidRequest, "Value for \(trailer.headerName) trailing header is invalid.")
            }
            expected[trailer.s3Name] = [UInt8](data)
        }
        for (name, value) in expected where digests.checksums[name] != value {
            throw S3Error(.badDigest, "The \(name) you specified did not match the calculated checksum.")
        }
    }
}
