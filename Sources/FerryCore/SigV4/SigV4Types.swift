import Foundation

/// An access key pair, optionally with the session token of temporary credentials.
///
/// `description`, `debugDescription` and the reflection mirror (used by `dump` and string
/// interpolation of containers) show only the access key id; the secret and the token are
/// never printed.
public struct SigV4Credentials: Sendable, Hashable, SecretRedacting {
    /// The public access key id (`AKIA...`).
    public var accessKeyId: String
    /// The secret access key. Never logged.
    public var secretAccessKey: String
    /// The session token of temporary credentials, sent as `x-amz-security-token`. Never logged.
    public var sessionToken: String?

    /// Creates credentials.
    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// `SigV4Credentials(accessKeyId: AKID, secretAccessKey: <redacted>[, sessionToken: <redacted>])`.
    public var description: String {
        "SigV4Credentials(accessKeyId: \(accessKeyId), secretAccessKey: <redacted>\(sessionToken == nil ? "" : ", sessionToken: <redacted>"))"
    }

    /// The access key id, and whether a session token is present.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "accessKeyId": accessKeyId, "secretAccessKey": "<redacted>",
            "sessionToken": sessionToken == nil ? "nil" : "<redacted>",
        ]
    }
}

/// A credential scope: `date/region/service/aws4_request`.
public struct SigV4Scope: Sendable, Hashable, CustomStringConvertible {
    /// The `yyyyMMdd` UTC date of the request.
    public var date: String
    /// The region, e.g. `us-east-1`.
    public var region: String
    /// The service, `s3` for S3.
    public var service: String

    /// Creates a scope from its parts.
    public init(date: String, region: String, service: String) {
        self.date = date
        self.region = region
        self.service = service
    }

    /// Creates the scope of a request made at `date` (UTC day).
    public init(date: Date, region: String, service: String) {
        self.init(date: SigV4.dateStamp(date), region: region, service: service)
    }

    /// Parses `yyyyMMdd/region/service/aws4_request`. Returns `nil` unless there are exactly four
    /// non-empty components, the first a valid date stamp and the last `aws4_request`.
    public init?(parsing s: String) {
        let parts = s.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[3] == SigV4.scopeTerminator,
            !parts[1].isEmpty, !parts[2].isEmpty,
            SigV4.isValidDateStamp(String(parts[0]))
        else { return nil }
        self.init(date: String(parts[0]), region: String(parts[1]), service: String(parts[2]))
    }

    /// `date/region/service/aws4_request`.
    public var string: String { "\(date)/\(region)/\(service)/\(SigV4.scopeTerminator)" }

    /// Same as ``string``.
    public var description: String { string }
}

/// An error from signing, verification or aws-chunked decoding.
///
/// Messages name what was wrong but never contain secrets, signatures or signing keys.
public struct SigV4Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is, with the S3 error code and HTTP status a server should answer with.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// A stable identifier, e.g. `signatureDoesNotMatch`.
        public var rawValue: String
        /// The S3 error code for the XML error body, e.g. `SignatureDoesNotMatch`.
        public var s3ErrorCode: String
        /// The HTTP status code S3 answers with.
        public var httpStatus: Int

        /// Creates a code.
        public init(rawValue: String, s3ErrorCode: String, httpStatus: Int) {
            self.rawValue = rawValue
            self.s3ErrorCode = s3ErrorCode
            self.httpStatus = httpStatus
        }

        /// The `Authorization` header (or its credential/scope) could not be parsed or is unsupported.
        public static let malformedAuthorization = Code(
            rawValue: "malformedAuthorization", s3ErrorCode: "AuthorizationHeaderMalformed", httpStatus: 400)
        /// The `X-Amz-*` query parameters of a presigned URL are missing or malformed.
        public static let malformedPresignedQuery = Code(
            rawValue: "malformedPresignedQuery", s3ErrorCode: "AuthorizationQueryParametersError", httpStatus: 400)
        /// A request, chunk or trailer signature does not match the one computed.
        public static let signatureDoesNotMatch = Code(
            rawValue: "signatureDoesNotMatch", s3ErrorCode: "SignatureDoesNotMatch", httpStatus: 403)
        /// The body ended before the aws-chunked framing (or the declared decoded length) was complete.
        public static let incompleteBody = Code(
            rawValue: "incompleteBody", s3ErrorCode: "IncompleteBody", httpStatus: 400)
        /// The aws-chunked framing is malformed: bad size, missing CRLF, over-long line, data after the end.
        public static let malformedChunk = Code(
            rawValue: "malformedChunk", s3ErrorCode: "InvalidRequest", httpStatus: 400)
        /// A chunk of an aws-chunked body other than the last is smaller than 8 KiB, as S3 requires of them.
        public static let invalidChunkSize = Code(
            rawValue: "invalidChunkSize", s3ErrorCode: "InvalidChunkSizeError", httpStatus: 400)
        /// The aws-chunked body carries more decoded bytes than `x-amz-decoded-content-length` declared.
        public static let decodedLengthMismatch = Code(
            rawValue: "decodedLengthMismatch", s3ErrorCode: "InvalidRequest", httpStatus: 400)
        /// A presigned URL's expiry is outside 1...604800 seconds.
        public static let invalidExpires = Code(
            rawValue: "invalidExpires", s3ErrorCode: "AuthorizationQueryParametersError", httpStatus: 400)
        /// A trailing checksum does not match the data received.
        public static let badTrailerChecksum = Code(
            rawValue: "badTrailerChecksum", s3ErrorCode: "BadDigest", httpStatus: 400)
        /// A trailer announced in `x-amz-trailer` was not sent, or a trailer line is malformed.
        public static let missingTrailer = Code(
            rawValue: "missingTrailer", s3ErrorCode: "MalformedTrailerError", httpStatus: 400)
        /// The request carries an `x-amz-*` header its signature does not cover.
        public static let headersNotSigned = Code(
            rawValue: "headersNotSigned", s3ErrorCode: "AccessDenied", httpStatus: 403)
        /// A presigned URL has expired.
        public static let requestExpired = Code(
            rawValue: "requestExpired", s3ErrorCode: "AccessDenied", httpStatus: 403)
        /// A presigned URL is dated later than the server's clock allows: it is not valid yet.
        public static let requestNotYetValid = Code(
            rawValue: "requestNotYetValid", s3ErrorCode: "AccessDenied", httpStatus: 403)
        /// The request time is too far from the server's clock.
        public static let requestTimeTooSkewed = Code(
            rawValue: "requestTimeTooSkewed", s3ErrorCode: "RequestTimeTooSkewed", httpStatus: 403)

        /// The ``rawValue``.
        public var description: String { rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// A human-readable explanation free of secrets and signatures.
    public var message: String
    /// Extra elements S3 adds to the error (`RequestTime`, `ServerTime` and `MaxAllowedSkewMilliseconds` of a
    /// request too far from the server's time); never a secret or signature.
    public var details: [String: String]

    /// Creates an error.
    public init(_ code: Code, _ message: String, details: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }

    static func malformedAuthorization(_ message: String) -> SigV4Error { SigV4Error(.malformedAuthorization, message) }
    static func malformedPresignedQuery(_ message: String) -> SigV4Error {
        SigV4Error(.malformedPresignedQuery, message)
    }
    static func signatureDoesNotMatch(_ message: String) -> SigV4Error { SigV4Error(.signatureDoesNotMatch, message) }
    static func malformedChunk(_ message: String) -> SigV4Error { SigV4Error(.malformedChunk, message) }
}
