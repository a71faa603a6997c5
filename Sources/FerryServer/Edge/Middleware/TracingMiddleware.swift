import HTTPTypes
import Hummingbird
import Tracing

/// One server span per request, continuing the caller's W3C `traceparent` (Ferry's SDK sends one per upload), named
/// by method and route group (`PUT s3`). Its attributes are the method, the path and query with every credential
/// redacted as the access log redacts them, the route group, the S3 operation or media action, and the status. The
/// span ends when the answer's head is ready. Without a tracer (no `--otel-endpoint`) it costs next to nothing.
struct RequestTracingMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var parent = ServiceContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: FieldsExtractor())
        return try await withSpan("HTTP " + request.method.rawValue, context: parent, ofKind: .server) { span in
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["url.path"] = AccessLogMiddleware.redacted(path: request.uri.path, query: request.uri.query)
            span.attributes["ferry.request_id"] = context.requestId
            do {
                let response = try await next(request, context)
                record(response.status, span: span, context: context, method: request.method)
                return response
            } catch let error as any HTTPResponseError {
                record(error.status, span: span, context: context, method: request.method)
                throw error
            }
        }
    }

    private func record(_ status: HTTPResponse.Status, span: any Span, context: Context, method: HTTPRequest.Method) {
        let observation = context.observation
        span.operationName = method.rawValue + " " + observation.group
        span.attributes["ferry.route_group"] = observation.group
        if let operation = observation.operation { span.attributes["ferry.operation"] = operation }
        span.attributes["http.response.status_code"] = Int(status.code)
        if status.code >= 500 { span.setStatus(.init(code: .error)) }
    }

    /// Reads a request's header fields by name.
    private struct FieldsExtractor: Extractor {
        func extract(key: String, from carrier: HTTPFields) -> String? {
            HTTPField.Name(key).flatMap { carrier[$0] }
        }
    }
}
