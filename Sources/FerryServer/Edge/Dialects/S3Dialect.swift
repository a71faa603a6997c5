import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// S3's dialect: errors as S3's XML `<Error>` document with its code, message, resource and request id (no body for a
/// `HEAD` or a `304`), spoken by the object API and the playback routes.
struct S3Dialect: Dialect {
    /// Whether the error document names the addressed bucket and key (the object API) or no resource (playback, whose
    /// paths carry a credential).
    var namesResource = true

    var name: String { namesResource ? "s3" : "playback" }

    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        guard var s3Error = Self.s3Error(for: error) else { return nil }
        if namesResource {
            let path = request.uri.path
            if let (bucket, key) = try? ObjectAPI.splitPath(path) {
                s3Error.resource = key.isEmpty ? "/\(bucket)" : "/\(bucket)/\(key)"
                // S3 names what was not found in elements of their own too; what a copy did not find may be its
                // source, which the path does not name (``ObjectAPI/copySource(_:)`` names it).
                if request.headers[.amzCopySource] == nil {
                    if s3Error.code == .noSuchKey, !key.isEmpty { s3Error.details["Key"] = key }
                    if s3Error.code == .noSuchBucket { s3Error.details["BucketName"] = bucket }
                }
            } else {
                s3Error.resource = String(path.prefix(1024))
            }
        }
        s3Error.requestId = context.requestId
        if s3Error.code == .noSuchKey, request.method == .get || request.method == .head, namesResource {
            // No key here is a delete marker: a bucket without versioning has none.
            s3Error.headers["x-amz-delete-marker"] = "false"
        }
        context.logger.debug("request failed", metadata: ["ferry.error-code": .string(s3Error.code.rawValue)])
        return S3ErrorResponse(error: s3Error, head: request.method == .head)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        var error = S3Error(.internalError, "We encountered an internal error. Please try again.")
        error.requestId = context.requestId
        return S3ErrorResponse(error: error, head: request.method == .head)
    }

    /// The S3 error for one of Ferry's refusals; nil for anything else.
    static func s3Error(for error: any Error) -> S3Error? {
        switch error {
        case let error as S3Error: error
        case let error as FerryDomainError: s3Error(error)
        case let error as SigV4Error: s3Error(FerryDomainError(error))
        case is NIOTooManyBytesError: S3Error(.maxMessageLengthExceeded, "Your request was too big.")
        case let error as DocumentTooComplex:
            S3Error(.malformedXML, "The XML you provided was not well-formed or did not validate against our published schema: \(error.reason).")
        default: nil
        }
    }

    /// The one mapping of domain errors to S3's codes.
    static func s3Error(_ error: FerryDomainError) -> S3Error {
        var s3Error = S3Error(code(error.code), error.message, details: error.details)
        if let seconds = error.retryAfterSeconds { s3Error.headers["Retry-After"] = String(seconds) }
        return s3Error
    }

    /// S3's code for a domain code.
    static func code(_ code: FerryDomainError.Code) -> S3ErrorCode {
        if let signature = code.signatureCode {
            return S3ErrorCode.named(signature.s3ErrorCode)
                ?? S3ErrorCode(signature.s3ErrorCode, httpStatus: signature.httpStatus)
        }
        return codes[code] ?? .internalError
    }

    private static let codes: [FerryDomainError.Code: S3ErrorCode] = [
        .bucketNotFound: .noSuchBucket, .bucketExists: .bucketAlreadyOwnedByYou, .bucketNotEmpty: .bucketNotEmpty,
        .objectNotFound: .noSuchKey, .uploadNotFound: .noSuchUpload, .partNotFound: .invalidPart,
        .partReplaced: .invalidPart, .partsOutOfOrder: .invalidPartOrder, .noParts: .malformedXML,
        .partTooSmall: .entityTooSmall, .tooLarge: .entityTooLarge, .checksumMismatch: .badDigest,
        .checksumNotApplicable: .invalidRequest, .sizeMismatch: .invalidRequest, .preconditionFailed: .preconditionFailed,
        .storeUnavailable: .slowDown, .storeRefused: .internalError,
        .anonymous: .accessDenied, .accessDenied: .accessDenied, .unknownAccessKey: .invalidAccessKeyId,
        .invalidSessionToken: .invalidToken, .expiredSessionToken: .expiredToken,
        .unsupportedAuthorization: .invalidRequest, .missingContentHash: .invalidRequest,
        .invalidContentHash: .invalidArgument, .presignedExpiryTooLong: .authorizationQueryParametersError,
        .invalidHost: .invalidArgument, .bodyTooComplex: .malformedXML, .malformedBody: .malformedXML,
        .bodyTooLarge: .maxMessageLengthExceeded, .invalidArgument: .invalidArgument, .notImplemented: .notImplemented,
        .quotaExceeded: .quotaExceeded, .requestRateExceeded: .slowDown, .storageFull: .insufficientStorage,
    ]
}

/// An S3 error document with its status and headers, as Hummingbird renders a thrown error.
struct S3ErrorResponse: HTTPResponseError {
    var error: S3Error
    /// Whether the request was a `HEAD` (no body).
    var head: Bool

    var status: HTTPResponse.Status { .init(code: error.code.httpStatus) }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.amzRequestId: error.requestId ?? "", .amzId2: error.requestId ?? ""]
        for (name, value) in error.headers {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        if head || error.code == .notModified {
            headers[.contentLength] = "0"
            return Response(status: status, headers: headers)
        }
        headers[.contentType] = "application/xml"
        let data = S3XML.errorDocument(error)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension S3ErrorCode {
    /// `MaxMessageLengthExceeded` (HTTP 400): a request body larger than the operation reads.
    static let maxMessageLengthExceeded = S3ErrorCode("MaxMessageLengthExceeded", httpStatus: 400)
}
