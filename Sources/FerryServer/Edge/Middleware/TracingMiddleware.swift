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
/// specification's 512 characters (a malformed one is dropped, the parent kept): never the other headers (a tracer that logs the fields it failed to read would
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

    /// The request's W3C trace context fields, when its `traceparent` is well formed (`tracestate` is passed on
    /// rewritten without empty members when it is well formed, dropped otherwise); nil otherwise.
    static func traceContext(_ headers: HTTPFields) -> HTTPFields? {
        let parents = headers[values: .traceParent]
        guard parents.count == 1, let parent = parents.first, isTraceParent(parent) else { return nil }
        var fields = HTTPFields()
        fields[.traceParent] = parent
        if let state = traceState(headers[values: .traceState].joined(separator: ",")) { fields[.traceState] = state }
        return fields
    }

    /// `tracestate` as the W3C grammar has it, its members joined by commas without blanks or empty members; nil
    /// when it is empty, longer than 512 characters, has more than 32 members or a member that is not `key=value`:
    /// a key of a lowercase letter then up to 255 of lowercase letters, digits and `_-*/`, or `tenant@system` (a
    /// letter or digit then up to 240, `@`, a letter then up to 13), and a value of 1 to 256 printable characters
    /// but `,` and `=`, not ending in a space.
    static func traceState(_ value: String) -> String? {
        guard value.utf8.count <= 512 else { return nil }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        let members = value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            .map { Array($0.drop(while: blank).reversed().drop(while: blank).reversed()) }
            .filter { !$0.isEmpty }
        guard !members.isEmpty, members.count <= 32 else { return nil }
        let lower: (UInt8) -> Bool = { (0x61...0x7A).contains($0) }
        let digit: (UInt8) -> Bool = { (0x30...0x39).contains($0) }
        let keyByte: (UInt8) -> Bool = { lower($0) || digit($0) || [0x5F, 0x2D, 0x2A, 0x2F].contains($0) }
        func isKey(_ key: ArraySlice<UInt8>) -> Bool {
            let halves = key.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
            switch halves.count {
            case 1:
                guard let first = key.first, lower(first), key.count <= 256 else { return false }
                return key.allSatisfy(keyByte)
            case 2:
                let (tenant, system) = (halves[0], halves[1])
                guard let t = tenant.first, lower(t) || digit(t), tenant.count <= 241, let s = system.first, lower(s),
                    system.count <= 14
                else { return false }
                return tenant.allSatisfy(keyByte) && system.allSatisfy(keyByte)
            default:
                return false
            }
        }
        for member in members {
            let pair = member.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, isKey(pair[0]), (1...256).contains(pair[1].count), pair[1].last != 0x20,
                pair[1].allSatisfy({ (0x20...0x7E).contains($0) && $0 != 0x2C && $0 != 0x3D })
            else { return nil }
        }
        return members.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",")
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
