import HTTPTypes
import Hummingbird

/// The server-wide cross-origin policy (`--cors-origin`, ``CrossOriginPolicy``) on the groups browser apps call (the
/// object API, the media API, publish, form uploads): preflights from allowed origins are answered here, and every
/// answer to an allowed origin, refusals included, carries the headers a browser needs to read it.
struct CrossOriginMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let policy: CrossOriginPolicy

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard !policy.origins.isEmpty else { return try await next(request, context) }
        if let preflight = policy.preflight(request) { return preflight }
        var response = try await next(request, context)
        policy.decorate(&response, for: request)
        return response
    }
}

/// Checks the `Host` of every request before a route builds a URL or checks a signature on it: exactly one, an RFC
/// 3986 authority (``Authority``); anything else is a 400 in the group's dialect. The accepted endpoint is in the
/// context for the routes (``FerryRequestContext/requestEndpoint``).
struct AuthorityMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let authority = request.head.authority else {
            throw FerryDomainError(.invalidHost, "The request has no Host header.")
        }
        guard request.headers[values: .host].isEmpty else {
            throw FerryDomainError(.invalidHost, "The request has more than one Host header.")
        }
        guard Authority.isValid(authority) else {
            throw FerryDomainError(.invalidHost, "The Host header is not a valid host[:port].")
        }
        var context = context
        context.requestEndpoint = PublicEndpoint(requestAuthority: authority, https: context.forwardedHTTPS)
        return try await next(request, context)
    }
}

/// Lets a client that sent `Expect: 100-continue` send its body at once, for groups that read their bodies before
/// deciding anything; where those are JSON bodies, one whose `Content-Length` is past their limit is refused instead,
/// uninvited. The object API sends it from its route, once the request is authenticated and allowed.
struct ContinueMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    /// Whether the group's bodies are JSON (``Request/maxSmallBody`` at most).
    var smallBodies: Bool

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if smallBodies { try request.refuseDeclaredLargeBody() }
        await context.sendContinue()
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let host = Self("Host")!
}
