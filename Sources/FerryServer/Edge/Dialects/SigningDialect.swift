import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The dialect of the part-signing endpoints Uppy's AWS S3 plugin calls: errors as
/// `{"error": {"code", "message"}, "message"}` with their status, which Uppy shows as it is.
struct SigningDialect: MediaErrorDialect {
    var name: String { "signing" }

    static func refusal(for error: any Error) -> MediaError? {
        if let error = error as? SigningRefusal { return MediaError(error.code, error.message, status: error.status) }
        return MediaDialect.mediaError(for: error)
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
