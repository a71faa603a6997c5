import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Plain text, for routes people and load balancers read: the console's static files and the health check.
struct TextDialect: Dialect {
    var name: String

    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)? {
        if let error = error as? TextErrorResponse { return error }
        guard let error = error as? FerryDomainError else { return nil }
        return TextErrorResponse(status: .init(code: S3Dialect.code(error.code).httpStatus), message: error.message)
    }

    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError {
        TextErrorResponse(status: .internalServerError, message: "The service failed to answer; try again.")
    }
}

/// A refusal in plain text.
struct TextErrorResponse: HTTPResponseError {
    var status: HTTPResponse.Status
    var message: String

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
    }
}
