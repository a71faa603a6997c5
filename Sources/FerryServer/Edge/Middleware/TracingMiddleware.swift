import HTTPTypes
import Hummingbird
import Tracing

extension HTTPField.Name {
    /// W3C Trace Context's parent span.
    static let traceParent = Self("traceparent")!
    /// W3C Trace Context's vendor state.
    static let traceState = Self("tracestate")!
}

/// One server span per request, continuing the caller's W3C `traceparent` (Ferry's SDK sends one per upload), named
/// by method and route group (`PUT s3`). Its attributes are the method, the path and query with every credential
/// redacted as the access log redacts them, the route group, the S3 operation or media action, and the status. The
/// span ends when the answer's head is ready. Without a tracer (no `--otel-endpoint`) it costs next to nothing.
///
/// The tracer sees only a `traceparent` of the W3C form and a `tracestate` of the W3C grammar within the
/// specification's 512 characters: never the other headers (a tracer that logs the fields it failed to read would
/// log credentials), and never text its parser cannot take (non-ASCII `tracestate` trapped in the W3C library).
struct RequestTracingMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var parent = ServiceContext.current ?? .topLevel
        if let fields = Self.traceContext(request.headers) {
            InstrumentationSystem.instrument.extract(fields, into: &parent, using: FieldsExtractor())
        }
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

    /// The request's W3C trace context fields, when its `traceparent` is well formed (`tracestate` is dropped unless
    /// it is well formed too); nil otherwise.
    static func traceContext(_ headers: HTTPFields) -> HTTPFields? {
        let parents = headers[values: .traceParent]
        guard parents.count == 1, let parent = parents.first, isTraceParent(parent) else { return nil }
        var fields = HTTPFields()
        fields[.traceParent] = parent
        let state = headers[values: .traceState].joined(separator: ",")
        if !state.isEmpty, isTraceState(state) { fields[.traceState] = state }
        return fields
    }

    /// Comma-separated `key=value` members, at most 512 characters and 32 members: keys of lowercase letters, digits
    /// and `_-*/@`, values of printable ASCII but `,` and `=` (not ending in a space).
    static func isTraceState(_ value: String) -> Bool {
        guard value.utf8.count <= 512 else { return false }
        let members = value.utf8.split(separator: UInt8(ascii: ","))
            .map { $0.drop { $0 == 0x20 || $0 == 0x09 } }
            .map { member in member.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed() }
            .filter { !$0.isEmpty }
        guard members.count <= 32 else { return false }
        return members.allSatisfy { member in
            let pair = member.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, let key = pair.first, let value = pair.last, (1...256).contains(key.count),
                value.count <= 256, value.last != 0x20
            else { return false }
            let keyByte: (UInt8) -> Bool = {
                (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || [0x5F, 0x2D, 0x2A, 0x2F, 0x40].contains($0)
            }
            return key.allSatisfy(keyByte) && value.allSatisfy { (0x20...0x7E).contains($0) && $0 != 0x2C && $0 != 0x3D }
        }
    }

    /// `version-traceid-parentid-flags` in lowercase hex (2-32-16-2), as the W3C Trace Context specifies.
    static func isTraceParent(_ value: String) -> Bool {
        let parts = value.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard parts.map(\.count) == [2, 32, 16, 2] else { return false }
        return parts.allSatisfy { $0.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
    }

    /// Reads a request's header fields by name.
    private struct FieldsExtractor: Extractor {
        func extract(key: String, from carrier: HTTPFields) -> String? {
            HTTPField.Name(key).flatMap { carrier[$0] }
        }
    }
}
