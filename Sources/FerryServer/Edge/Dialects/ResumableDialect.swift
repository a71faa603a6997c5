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
        if let refusal = error as? ResumableRefusal { return refusal }
        let wire = (try? ResumableWire.of(request.headers)) ?? nil
        let status: Int
        let message: String
        switch error {
        case let error as FerryDomainError:
            let code = S3Dialect.code(error.code)
            (status, message) = (error.code == .uploadNotFound ? 404 : code.httpStatus, error.message)
        case let error as S3Error:
            (status, message) = (error.code.httpStatus, error.message)
        case let error as SigV4Error:
            let domain = FerryDomainError(error)
            (status, message) = (S3Dialect.code(domain.code).httpStatus, domain.message)
        default:
            return nil
        }
        context.logger.debug("request failed", metadata: ["ferry.status": .string(String(status))])
        return ResumableRefusal(.init(code: status), message, wire: wire)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        ResumableRefusal(
            .internalServerError, "The service failed to answer; try again.",
            wire: (try? ResumableWire.of(request.headers)) ?? nil)
    }
}
