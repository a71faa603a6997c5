import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The dialect of the part-signing endpoints Uppy's AWS S3 plugin calls: errors as
/// `{"error": {"code", "message"}, "message"}` with their status, which Uppy shows as it is.
struct SigningDialect: Dialect {
    var name: String { "signing" }

    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        let refusal: MediaError
        switch error {
        case let error as SigningRefusal: refusal = MediaError(error.code, error.message, status: error.status)
        default:
            guard let mapped = MediaDialect.mediaError(for: error) else { return nil }
            refusal = mapped
        }
        context.logger.debug("request failed", metadata: ["ferry.error-code": .string(refusal.code)])
        return Self.response(refusal, requestId: context.requestId)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        Self.response(
            MediaError("InternalError", "The service failed to answer; try again.", status: 500), requestId: context.requestId)
    }

    static func response(_ refusal: MediaError, requestId: String) -> JSONErrorResponse {
        JSONErrorResponse(
            status: .init(code: refusal.status),
            body: SigningErrorBody(error: .init(code: refusal.code, message: refusal.message), message: refusal.message),
            requestId: requestId, headers: [.cacheControl: "no-store"])
    }
}

/// A refusal of the part-signing endpoints that has no media API code of its own (`NoSuchUpload`, `NotFound`).
struct SigningRefusal: Error {
    var status: Int
    var code: String
    var message: String
}

/// The part-signing endpoints' error document.
private struct SigningErrorBody: Encodable {
    struct Detail: Encodable {
        var code: String
        var message: String
    }
    var error: Detail
    var message: String
}
