import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The JSON dialect of the media API, the publish API and the console's session and media routes: errors as
/// `{"code", "message", "requestId"}` with their status.
///
/// Authentication failures keep S3's codes and statuses (`SignatureDoesNotMatch`, `InvalidAccessKeyId`,
/// `ExpiredToken`), which SDK users know from the object API.
struct MediaDialect: MediaErrorDialect {
    var name: String

    static func refusal(for error: any Error) -> MediaError? { mediaError(for: error) }

    /// `{"code", "message", "requestId"}` with the refusal's status.
    static func response(_ refusal: MediaError, requestId: String) -> JSONErrorResponse {
        var headers: HTTPFields = [:]
        if let seconds = refusal.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        return JSONErrorResponse(
            status: .init(code: refusal.status),
            body: MediaContract.ErrorAnswer(code: refusal.code, message: refusal.message, requestId: requestId),
            requestId: requestId, headers: headers)
    }

    /// The media API's refusal for one of Ferry's errors; nil for anything else.
    static func mediaError(for error: any Error) -> MediaError? {
        switch error {
        case let error as MediaError: error
        case let error as FerryDomainError: mediaError(error)
        case let error as SigV4Error: mediaError(FerryDomainError(error))
        case let error as DocumentTooComplex: MediaError("InvalidParameter", "The request body \(error.reason).")
        case is NIOTooManyBytesError: MediaError("RequestTooLarge", "The request body is larger than 1 MiB.", status: 413)
        case let error as S3Error: MediaError(error.code.rawValue, error.message, status: error.code.httpStatus)
        default: nil
        }
    }

    /// The one mapping of domain errors to the media API's codes.
    static func mediaError(_ error: FerryDomainError) -> MediaError {
        switch error.code {
        case .accessDenied: return MediaError("Forbidden", error.message, status: 403)
        case .invalidHost, .bodyTooComplex, .invalidArgument: return MediaError("InvalidParameter", error.message)
        case .malformedBody: return MediaError("MalformedJSON", error.message)
        case .bodyTooLarge: return MediaError("RequestTooLarge", error.message, status: 413)
        case .storeUnavailable:
            return MediaError("ServiceUnavailable", error.message, status: 503, retryAfterSeconds: error.retryAfterSeconds)
        case .notImplemented: return MediaError("NotImplemented", error.message, status: 501)
        case .quotaExceeded: return MediaError("QuotaExceeded", error.message, status: 403)
        case .requestRateExceeded:
            return MediaError("Throttling", error.message, status: 503, retryAfterSeconds: error.retryAfterSeconds)
        default:
            // Authentication and storage refusals keep S3's names.
            let code = S3Dialect.code(error.code)
            return MediaError(code.rawValue, error.message, status: code.httpStatus)
        }
    }
}

/// A JSON dialect whose refusals are the media API's (a code, a message, a status), each written in its own envelope.
protocol MediaErrorDialect: Dialect {
    /// The refusal for one of Ferry's errors; nil for anything else.
    static func refusal(for error: any Error) -> MediaError?
    /// The refusal in this dialect's envelope.
    static func response(_ refusal: MediaError, requestId: String) -> JSONErrorResponse
}

extension MediaErrorDialect {
    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        guard let refusal = Self.refusal(for: error) else { return nil }
        context.logger.debug("request failed", metadata: ["ferry.error-code": .string(refusal.code)])
        return Self.response(refusal, requestId: context.requestId)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        Self.response(
            MediaError("InternalError", "The service failed to answer; try again.", status: 500), requestId: context.requestId)
    }
}

/// A refusal of one of the JSON dialects (media, form, part signing) as Hummingbird renders a thrown error: its status
/// and its envelope.
struct JSONErrorResponse: HTTPResponseError {
    var status: HTTPResponse.Status
    var body: any Encodable & Sendable
    var requestId: String
    var headers: HTTPFields = [:]

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try JSONAnswer.response(body, status: status, requestId: requestId, headers: headers)
    }
}

/// JSON answers of the edge's JSON dialects, encoded from their Codable types (keys sorted, as clients and tests
/// compare them).
enum JSONAnswer {
    static func response(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, requestId: String, headers: HTTPFields = [:]
    ) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(value)
        var fields = headers
        fields[.contentType] = "application/json"
        fields[.amzRequestId] = requestId
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// An answer of the media or publish API: the operation's own fields and the request's id beside them.
struct WithRequestId: Encodable {
    var answer: any Encodable & Sendable
    var requestId: String

    private enum CodingKeys: String, CodingKey { case requestId = "RequestId" }

    func encode(to encoder: any Encoder) throws {
        try answer.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(requestId, forKey: .requestId)
    }
}
