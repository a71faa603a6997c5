import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Qiniu's form-upload dialect: errors as `{"error": message, "code": FormUploadErrorCode, "requestId"}` with Qiniu's
/// statuses (401 for tokens, 406 for a CRC32 mismatch, 573 past the token key's `RequestsPerSecond` with
/// `Retry-After`, 579 for a failed callback, 614, 631…).
struct FormDialect: Dialect {
    var name: String { "form" }

    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        guard let refusal = Self.formError(for: error) else { return nil }
        context.logger.debug("form upload refused", metadata: ["ferry.code": .string(refusal.code.rawValue)])
        return Self.response(refusal, requestId: context.requestId)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        Self.response(
            FormUploadError(.internalError, "The service failed to store the file; try again."), requestId: context.requestId)
    }

    static func response(_ refusal: FormUploadError, requestId: String) -> JSONErrorResponse {
        var headers: HTTPFields = [:]
        if let seconds = refusal.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        return JSONErrorResponse(
            status: .init(code: refusal.status),
            body: FormErrorBody(error: refusal.message, code: refusal.code.rawValue, requestId: requestId),
            requestId: requestId, headers: headers)
    }

    static func formError(for error: any Error) -> FormUploadError? {
        switch error {
        case let error as FormUploadError: error
        case let error as FerryDomainError: formError(error)
        case let error as S3Error: FormUploadError(.invalidArgument, error.message)
        default: nil
        }
    }

    /// The one mapping of domain errors to the form upload's codes.
    static func formError(_ error: FerryDomainError) -> FormUploadError? {
        switch error.code {
        case .bucketNotFound: FormUploadError(.noSuchBucket, error.message)
        case .preconditionFailed:
            FormUploadError(.fileExists, "An object with this key exists and the token is insertOnly.")
        case .tooLarge: FormUploadError(.fileTooLarge, "The file is larger than the server accepts.")
        case .unknownAccessKey: FormUploadError(.unknownAccessKey, "The upload token's access key is unknown or disabled.")
        case .accessDenied, .anonymous: FormUploadError(.accessDenied, error.message)
        case .quotaExceeded: FormUploadError(.quotaExceeded, error.message)
        case .invalidHost, .invalidArgument, .bodyTooComplex, .malformedBody, .bodyTooLarge:
            FormUploadError(.invalidArgument, error.message)
        case .checksumMismatch: FormUploadError(.crc32Mismatch, error.message)
        case .storageFull: FormUploadError(.storageFull, error.message)
        case .requestRateExceeded:
            FormUploadError(.tooManyRequests, error.message, retryAfterSeconds: error.retryAfterSeconds)
        case .storeUnavailable:
            FormUploadError(.serviceUnavailable, error.message, retryAfterSeconds: error.retryAfterSeconds)
        default: nil
        }
    }
}

extension FormUploadErrorCode {
    /// 573 (Qiniu's "too many requests"), with `Retry-After`: the upload token's access key is past its
    /// `RequestsPerSecond` on this node; nothing was read or stored.
    static let tooManyRequests = Self(rawValue: "TooManyRequests")
}

/// The form upload's error document.
private struct FormErrorBody: Encodable {
    var error: String
    var code: String
    var requestId: String
}
