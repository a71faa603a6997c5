import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The dialect of the part-signing endpoints Uppy's AWS S3 plugin calls: errors as
/// `{"error": {"code", "message"}, "message"}` with their status, which Uppy shows as it is.
struct SigningDialect: MediaErrorDialect {
    var name: String { "signing" }

    /// The media API's refusal; the endpoints' own refusals (`NoSuchUpload`, `NotFound`) are media errors too.
    static func refusal(for error: any Error) -> MediaError? { MediaDialect.mediaError(for: error) }

    static func response(_ refusal: MediaError, requestId: String) -> JSONErrorResponse {
        var headers: HTTPFields = [.cacheControl: "no-store"]
        if let seconds = refusal.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        return JSONErrorResponse(
            status: .init(code: refusal.status),
            body: SigningErrorBody(error: .init(code: refusal.code, message: refusal.message), message: refusal.message),
            requestId: requestId, headers: headers)
    }
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
