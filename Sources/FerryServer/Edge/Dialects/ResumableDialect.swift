import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

/// The resumable-upload protocols' dialect (tus 1.0 and the IETF draft at `/_ferry/uploads/`): refusals in plain
/// text with the status the protocols give them, carrying the protocol's own headers (`Tus-Resumable`,
/// `Upload-Draft-Interop-Version`) so that a client recognises the answer.
struct ResumableDialect: Dialect {
    var name: String { "resumable" }

    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        guard let refusal = Self.refusal(for: error, wire: try? ResumableWire.of(request.headers)) else { return nil }
        context.logger.debug("request failed", metadata: ["ferry.status": .string(String(refusal.status.code))])
        return refusal
    }

    /// The refusal `error` is in protocol `wire`; nil when it is none of Ferry's refusals (an internal error).
    static func refusal(for error: any Error, wire: ResumableWire?) -> ResumableRefusal? {
        if let refusal = error as? ResumableRefusal { return refusal }
        let status: Int
        let message: String
        var headers: HTTPFields = [:]
        // A refused signature is answered as its domain error.
        switch (error as? SigV4Error).map({ FerryDomainError($0) }) ?? error {
        case let error as FerryDomainError:
            let code = S3Dialect.code(error.code)
            (status, message) = (error.code == .uploadNotFound ? 404 : code.httpStatus, error.message)
            if let seconds = error.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        case let error as S3Error:
            (status, message) = (error.code.httpStatus, error.message)
        default:
            return nil
        }
        return ResumableRefusal(.init(code: status), message, wire: wire, headers: headers)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        ResumableRefusal(
            .internalServerError, "The service failed to answer; try again.",
            wire: try? ResumableWire.of(request.headers))
    }
}
