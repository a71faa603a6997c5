import HTTPTypes
import Hummingbird
import NIOCore

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

/// Sends a streamed answer no faster than its connection takes it: after each chunk, the next is made (read from
/// disk or the object store) only once the connection has taken the last. Without it an answer read ahead while the
/// connection's buffer filled, and a client that opened a download and stopped reading held megabytes of the server's
/// memory: two hundred such clients held 1.6 GB.
struct AnswerPacingMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    /// Answers this long or shorter are sent as they are: one buffer, nothing read ahead.
    static let smallAnswer = 64 << 10

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        let body = response.body
        if let length = body.contentLength, length <= Self.smallAnswer { return response }
        let channel = context.channel
        response.body = ResponseBody(contentLength: body.contentLength) { writer in
            try await body.write(PacedWriter(base: writer, channel: channel))
        }
        return response
    }

    /// Waits, after each buffer it writes, for the connection to take more.
    private struct PacedWriter: ResponseBodyWriter {
        var base: any ResponseBodyWriter
        let channel: any Channel

        mutating func write(_ buffer: ByteBuffer) async throws {
            try await base.write(buffer)
            await channel.answerWritable()
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            try await base.finish(trailingHeaders)
        }
    }
}
