/// An error code of the S3 REST protocol together with the HTTP status AWS answers it with.
///
/// One definition of each code serves the server, which renders it as S3 error XML, and the client,
/// which matches it when it parses an error response.
public struct S3ErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// The code as it appears in `<Code>` of the error XML, e.g. `NoSuchKey`.
    public let rawValue: String
    /// The HTTP status code S3 answers this error with.
    public let httpStatus: Int

    /// Creates a code; prefer the static members.
    public init(_ rawValue: String, httpStatus: Int) {
        self.rawValue = rawValue
        self.httpStatus = httpStatus
    }

    /// The code string.
    public var description: String { rawValue }

    /// Looks up a known code by its string, e.g. from a parsed error response.
    public static func named(_ name: String) -> S3ErrorCode? { all[name] }

    /// `AccessDenied` (HTTP 403).
    public static let accessDenied = S3ErrorCode("AccessDenied", httpStatus: 403)
    /// `AuthorizationQueryParametersError` (HTTP 400).
    public static let authorizationQueryParametersError = S3ErrorCode(
        "AuthorizationQueryParametersError", httpStatus: 400)
    /// `AuthorizationHeaderMalformed` (HTTP 400).
    public static let authorizationHeaderMalformed = S3ErrorCode("AuthorizationHeaderMalformed", httpStatus: 400)
    /// `MalformedTrailerError` (HTTP 400).
    public static let malformedTrailer = S3ErrorCode("MalformedTrailerError", httpStatus: 400)
    /// `BadDigest` (HTTP 400).
    public static let badDigest = S3ErrorCode("BadDigest", httpStatus: 400)
    /// `BucketAlreadyOwnedByYou` (HTTP 409).
    public static let bucketAlreadyOwnedByYou = S3ErrorCode("BucketAlreadyOwnedByYou", httpStatus: 409)
    /// `BucketNotEmpty` (HTTP 409).
    public static let bucketNotEmpty = S3ErrorCode("BucketNotEmpty", httpStatus: 409)
    /// `EntityTooLarge` (HTTP 400).
    public static let entityTooLarge = S3ErrorCode("EntityTooLarge", httpStatus: 400)
    /// `EntityTooSmall` (HTTP 400).
    public static let entityTooSmall = S3ErrorCode("EntityTooSmall", httpStatus: 400)
    /// `ExpiredToken` (HTTP 400).
    public static let expiredToken = S3ErrorCode("ExpiredToken", httpStatus: 400)
    /// `IncompleteBody` (HTTP 400).
    public static let incompleteBody = S3ErrorCode("IncompleteBody", httpStatus: 400)
    /// `InternalError` (HTTP 500).
    public static let internalError = S3ErrorCode("InternalError", httpStatus: 500)
    /// `InvalidAccessKeyId` (HTTP 403).
    public static let invalidAccessKeyId = S3ErrorCode("InvalidAccessKeyId", httpStatus: 403)
    /// `InvalidArgument` (HTTP 400).
    public static let invalidArgument = S3ErrorCode("InvalidArgument", httpStatus: 400)
    /// `InvalidBucketName` (HTTP 400).
    public static let invalidBucketName = S3ErrorCode("InvalidBucketName", httpStatus: 400)
    /// `InvalidDigest` (HTTP 400).
    public static let invalidDigest = S3ErrorCode("InvalidDigest", httpStatus: 400)
    /// `InvalidPart` (HTTP 400).
    public static let invalidPart = S3ErrorCode("InvalidPart", httpStatus: 400)
    /// `InvalidPartOrder` (HTTP 400).
    public static let invalidPartOrder = S3ErrorCode("InvalidPartOrder", httpStatus: 400)
    /// `InvalidRange` (HTTP 416).
    public static let invalidRange = S3ErrorCode("InvalidRange", httpStatus: 416)
    /// `InvalidRequest` (HTTP 400).
    public static let invalidRequest = S3ErrorCode("InvalidRequest", httpStatus: 400)
    /// `InvalidToken` (HTTP 400).
    public static let invalidToken = S3ErrorCode("InvalidToken", httpStatus: 400)
    /// `KeyTooLongError` (HTTP 400).
    public static let keyTooLong = S3ErrorCode("KeyTooLongError", httpStatus: 400)
    /// `MalformedXML` (HTTP 400).
    public static let malformedXML = S3ErrorCode("MalformedXML", httpStatus: 400)
    /// `MethodNotAllowed` (HTTP 405).
    public static let methodNotAllowed = S3ErrorCode("MethodNotAllowed", httpStatus: 405)
    /// `MissingContentLength` (HTTP 411).
    public static let missingContentLength = S3ErrorCode("MissingContentLength", httpStatus: 411)
    /// `MissingSecurityHeader` (HTTP 400).
    public static let missingSecurityHeader = S3ErrorCode("MissingSecurityHeader", httpStatus: 400)
    /// `NoSuchBucket` (HTTP 404).
    public static let noSuchBucket = S3ErrorCode("NoSuchBucket", httpStatus: 404)
    /// `NoSuchKey` (HTTP 404).
    public static let noSuchKey = S3ErrorCode("NoSuchKey", httpStatus: 404)
    /// `NoSuchUpload` (HTTP 404).
    public static let noSuchUpload = S3ErrorCode("NoSuchUpload", httpStatus: 404)
    /// `NotImplemented` (HTTP 501).
    public static let notImplemented = S3ErrorCode("NotImplemented", httpStatus: 501)
    /// `NotModified` (HTTP 304).
    public static let notModified = S3ErrorCode("NotModified", httpStatus: 304)
    /// `PreconditionFailed` (HTTP 412).
    public static let preconditionFailed = S3ErrorCode("PreconditionFailed", httpStatus: 412)
    /// `RequestTimeTooSkewed` (HTTP 403).
    public static let requestTimeTooSkewed = S3ErrorCode("RequestTimeTooSkewed", httpStatus: 403)
    /// `ServiceUnavailable` (HTTP 503).
    public static let serviceUnavailable = S3ErrorCode("ServiceUnavailable", httpStatus: 503)
    /// `SignatureDoesNotMatch` (HTTP 403).
    public static let signatureDoesNotMatch = S3ErrorCode("SignatureDoesNotMatch", httpStatus: 403)
    /// `SlowDown` (HTTP 503).
    public static let slowDown = S3ErrorCode("SlowDown", httpStatus: 503)
    /// `InsufficientStorage` (HTTP 507): Ferry's answer when the disk or database under it is full (not one of AWS's
    /// codes); nothing of the request was stored.
    public static let insufficientStorage = S3ErrorCode("InsufficientStorage", httpStatus: 507)
    /// `QuotaExceeded` (HTTP 403): Ferry's refusal of a write past the access key's quota (not one of AWS's codes).
    public static let quotaExceeded = S3ErrorCode("QuotaExceeded", httpStatus: 403)
    /// `InvalidURI` (HTTP 400).
    public static let invalidURI = S3ErrorCode("InvalidURI", httpStatus: 400)
    /// `BadRequest` (HTTP 400).
    public static let badRequest = S3ErrorCode("BadRequest", httpStatus: 400)
    /// `MetadataTooLarge` (HTTP 400).
    public static let metadataTooLarge = S3ErrorCode("MetadataTooLarge", httpStatus: 400)
    /// `InvalidTag` (HTTP 400).
    public static let invalidTag = S3ErrorCode("InvalidTag", httpStatus: 400)
    /// `NoSuchVersion` (HTTP 404).
    public static let noSuchVersion = S3ErrorCode("NoSuchVersion", httpStatus: 404)
    /// `InvalidLocationConstraint` (HTTP 400).
    public static let invalidLocationConstraint = S3ErrorCode("InvalidLocationConstraint", httpStatus: 400)
    /// `InvalidStorageClass` (HTTP 400).
    public static let invalidStorageClass = S3ErrorCode("InvalidStorageClass", httpStatus: 400)
    /// `ConditionalRequestConflict` (HTTP 409).
    public static let conditionalRequestConflict = S3ErrorCode("ConditionalRequestConflict", httpStatus: 409)
    /// `NoSuchCORSConfiguration` (HTTP 404).
    public static let noSuchCORSConfiguration = S3ErrorCode("NoSuchCORSConfiguration", httpStatus: 404)
    /// `NoSuchLifecycleConfiguration` (HTTP 404).
    public static let noSuchLifecycleConfiguration = S3ErrorCode("NoSuchLifecycleConfiguration", httpStatus: 404)
    /// `InvalidPolicyDocument` (HTTP 400).
    public static let invalidPolicyDocument = S3ErrorCode("InvalidPolicyDocument", httpStatus: 400)
    /// `MalformedPOSTRequest` (HTTP 400).
    public static let malformedPOSTRequest = S3ErrorCode("MalformedPOSTRequest", httpStatus: 400)
    /// `IncorrectNumberOfFilesInPostRequest` (HTTP 400).
    public static let incorrectNumberOfFilesInPostRequest = S3ErrorCode(
        "IncorrectNumberOfFilesInPostRequest", httpStatus: 400)
    /// `UserKeyMustBeSpecified` (HTTP 400).
    public static let userKeyMustBeSpecified = S3ErrorCode("UserKeyMustBeSpecified", httpStatus: 400)
    /// `XAmzContentSHA256Mismatch` (HTTP 400).
    public static let xAmzContentSHA256Mismatch = S3ErrorCode("XAmzContentSHA256Mismatch", httpStatus: 400)

    private static let all: [String: S3ErrorCode] = Dictionary(
        uniqueKeysWithValues: [
            accessDenied, authorizationQueryParametersError, authorizationHeaderMalformed, malformedTrailer, badDigest, bucketAlreadyOwnedByYou, bucketNotEmpty,
            entityTooLarge, entityTooSmall, expiredToken, incompleteBody, internalError, invalidAccessKeyId,
            invalidArgument, invalidBucketName, invalidDigest, invalidPart, invalidPartOrder, invalidRange,
            invalidRequest, invalidToken, keyTooLong, malformedXML, methodNotAllowed, missingContentLength,
            missingSecurityHeader, noSuchBucket, noSuchKey, noSuchUpload, notImplemented, notModified,
            preconditionFailed, requestTimeTooSkewed, serviceUnavailable, signatureDoesNotMatch, slowDown,
            xAmzContentSHA256Mismatch, invalidURI, badRequest, metadataTooLarge, invalidTag, noSuchVersion, invalidLocationConstraint,
            invalidStorageClass, conditionalRequestConflict, noSuchCORSConfiguration, invalidPolicyDocument,
            noSuchLifecycleConfiguration, insufficientStorage,
            malformedPOSTRequest, incorrectNumberOfFilesInPostRequest, quotaExceeded, userKeyMustBeSpecified,
        ].map { ($0.rawValue, $0) })
}

/// An S3 error as the protocol carries it: a code, a human-readable message, the resource and the request id.
public struct S3Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The S3 error code and its HTTP status.
    public var code: S3ErrorCode
    /// A message for people; never contains secrets or signatures.
    public var message: String
    /// The resource the request addressed, e.g. `/bucket/key`.
    public var resource: String?
    /// The request id the server assigned.
    public var requestId: String?
    /// Extra elements S3 adds to some errors (e.g. `ArgumentName`, `PartNumber`).
    public var details: [String: String]
    /// Response headers the error carries beside its document (a 304's `ETag` and `Last-Modified`).
    public var headers: [String: String] = [:]

    /// Creates an error.
    public init(
        _ code: S3ErrorCode, _ message: String, resource: String? = nil, requestId: String? = nil,
        details: [String: String] = [:]
    ) {
        self.code = code
        self.message = message
        self.resource = resource
        self.requestId = requestId
        self.details = details
    }

    /// `Code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
