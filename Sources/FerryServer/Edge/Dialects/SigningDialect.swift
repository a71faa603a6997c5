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
        return SigningErrorResponse(code: refusal.code, message: refusal.message, status: refusal.status)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        SigningErrorResponse(code: "InternalError", message: "The service failed to answer; try again.", status: 500)
    }
}

/// A refusal of the part-signing endpoints that has no media API code of its own (`NoSuchUpload`, `NotFound`).
struct SigningRefusal: Error {
    var status: Int
    var code: String
    var message: String
}

/// A part-signing refusal as Hummingbird renders a thrown error.
struct SigningErrorResponse: HTTPResponseError {
    var code: String
    var message: String
    var statusCode: Int

    init(code: String, message: String, status: Int) {
        self.code = code
        self.message = message
        statusCode = status
    }

    var status: HTTPResponse.Status { .init(code: statusCode) }

    private struct Body: Encodable {
        struct Detail: Encodable {
            var code: String
            var message: String
        }
        var error: Detail
        var message: String
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let requestId = (context as? FerryRequestContext)?.requestId ?? ""
        return try JSONAnswer.response(
            Body(error: .init(code: code, message: message), message: message), status: status, requestId: requestId,
            headers: [.cacheControl: "no-store"])
    }
}
