import HTTPTypes
import Hummingbird

/// Adjusts every answer of the routes behind it once they have made it: headers every answer of a group carries,
/// refusals included when it stands in front of the group's dialect.
struct AnswerMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    /// Changes the answer to the request.
    let adjust: @Sendable (inout Response, Request) async -> Void

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        await adjust(&response, request)
        return response
    }
}

extension AnswerMiddleware {
    /// Keeps what users stored from acting as a page of this origin, the console's: every answer that does not set its
    /// own `Content-Security-Policy` (only the console's pages do) gets `Content-Security-Policy: sandbox`, so a
    /// browser opening an object, a form upload's callback answer or any other stored or relayed bytes renders them in
    /// an opaque origin without script, and `X-Content-Type-Options: nosniff`, so no type is guessed from the bytes.
    /// Fetches, `<img>` and `<video>` are not affected: a policy applies to the document an answer becomes.
    ///
    /// The router's outermost middleware, so refusals carry the headers too.
    static let contentIsolation = AnswerMiddleware { response, _ in
        if response.headers[.contentSecurityPolicy] == nil { response.headers[.contentSecurityPolicy] = "sandbox" }
        if response.headers[.xContentTypeOptions] == nil { response.headers[.xContentTypeOptions] = "nosniff" }
    }
}
