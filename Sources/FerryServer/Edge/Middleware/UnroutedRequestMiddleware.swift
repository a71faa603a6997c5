import Hummingbird

/// Hands a request no route matched to the S3 catch-all: a method no group registers, or a path that ends below a
/// group's fixed segments (`/s3/photos/a.jpg` beside `/s3/multipart`). The router's last middleware, so it runs only
/// in front of Hummingbird's not-found responder; S3 then answers in its own dialect (`MethodNotAllowed`,
/// `NoSuchBucket`, …).
struct UnroutedRequestMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    /// The S3 group's middleware and route.
    let s3: any HTTPResponder<FerryRequestContext>

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        context.coreContext.endpointPath.value = "/**"
        return try await s3.respond(to: request, context: context)
    }
}

/// Middleware in front of a responder, composed as a router group composes them (the first runs first), for the S3
/// group, whose chain answers both its routes and the requests no route matched.
struct MiddlewareChain: HTTPResponder {
    typealias Context = FerryRequestContext
    let middleware: [any RouterMiddleware<Context>]
    let responder: @Sendable (Request, Context) async throws -> Response

    func respond(to request: Request, context: Context) async throws -> Response {
        try await run(from: 0, request, context)
    }

    private func run(from index: Int, _ request: Request, _ context: Context) async throws -> Response {
        guard index < middleware.count else { return try await responder(request, context) }
        return try await middleware[index].handle(request, context: context) { request, context in
            try await run(from: index + 1, request, context)
        }
    }
}
