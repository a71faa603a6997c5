import HTTPTypes
import Hummingbird
import Logging

/// Gives every request its id: in the request's log records (`ferry.request-id`, beside the id the client gave its
/// call, `ferry.client-request-id`, when it sent a plausible one) and in every answer's `x-amz-request-id` header. The
/// first middleware of the router, so answers that no route made (Hummingbird's own refusals) carry it too. A request
/// logs at the service's level (`--log-level`), not the HTTP server's (quieter, for its lifecycle lines).
struct RequestIdMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    /// The level a request's records are logged at.
    var logLevel: Logger.Level

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        context.logger.logLevel = logLevel
        context.logger[metadataKey: "ferry.request-id"] = .string(context.requestId)
        if let clientRequestId = request.headers.clientRequestId {
            context.logger[metadataKey: "ferry.client-request-id"] = .string(clientRequestId)
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.amzRequestId] = context.requestId
        return response
    }
}
