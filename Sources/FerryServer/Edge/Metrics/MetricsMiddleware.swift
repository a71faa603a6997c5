import FerryCore
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Counts and times every request, refusals included: it stands after the request id and the access log and before
/// the route groups, whose dialect middleware names the group that answered (``RequestObservation``).
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let metrics: FerryMetrics

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        metrics.requestStarted()
        let start = ContinuousClock.now
        // The body bytes counted are those read, never what a header declares.
        let read = NIOLockedValueBox<Int64>(0)
        var request = request
        request.body = RequestBody(asyncSequence: CountedBody(base: request.body, count: read))
        do {
            var response = try await next(request, context)
            finish(
                request, context: context, status: Int(response.status.code), since: start,
                read: read.withLockedValue { $0 })
            // The answer's bytes are counted as they are handed to the connection: one cut off counts what was sent.
            // The request is being answered until its body has been sent, or dropped unsent. A small answer goes out
            // in one write at once: counted now, and left as it is (wrapped, it would take three writes).
            let sent = metrics.responseBytesCounter(group: context.observation.group)
            if let length = response.body.contentLength, length <= AnswerPacingMiddleware.smallAnswer {
                if length > 0 { sent.increment(by: Int64(length)) }
                metrics.requestEnded()
                return response
            }
            let answering = AnswerInProgress(metrics: metrics)
            response.body = response.body.counting({ sent.increment(by: Int64($0)) }, whenWritten: { answering.end() })
            return response
        } catch {
            finish(
                request, context: context, status: (error as? any HTTPResponseError).map { Int($0.status.code) } ?? 500,
                since: start, read: read.withLockedValue { $0 })
            metrics.requestEnded()
            throw error
        }
    }

    /// The methods that are label values of their own: those some route answers.
    static let labelledMethods: Set<HTTPRequest.Method> = [.get, .head, .put, .post, .delete, .options, .patch]

    private func finish(
        _ request: Request, context: Context, status: Int, since start: ContinuousClock.Instant, read: Int64
    ) {
        let observation = context.observation
        // The methods the service answers are a fixed set; anything else (WebDAV's, an extension's) is one value.
        let method = Self.labelledMethods.contains(request.method) ? request.method.rawValue : "other"
        let accepted = (200..<300).contains(status)
        // An aws-chunked body counts its decoded length, which is less than the bytes read (chunk headers and
        // signatures); a declared length larger than what was read counts what was read.
        let chunked = request.headers[.contentEncoding]?.contains("aws-chunked") == true
            || request.headers[.amzContentSHA256]?.hasPrefix("STREAMING-") == true
        let decoded = chunked ? request.headers[.amzDecodedContentLength].flatMap { Int64($0) } : nil
        let bytesIn = accepted ? min(decoded ?? read, read) : nil
        metrics.requestFinished(
            group: observation.group, method: method, status: status, duration: ContinuousClock.now - start,
            bytesIn: bytesIn)
        if let operation = observation.operation {
            metrics.operationFinished(operation, group: observation.group, status: status)
        }
        if observation.checksumMismatch { metrics.checksumMismatch(group: observation.group) }
        if observation.throttled { metrics.requestThrottled(group: observation.group) }
        if let quota = observation.quotaRefused { metrics.quotaRefused(group: observation.group, quota: quota) }
    }
}

extension ResponseBody {
    /// This body, telling `count` the size of each buffer once it has been written, and `whenWritten` once the body
    /// has been written or has failed.
    func counting(
        _ count: @escaping @Sendable (Int) -> Void, whenWritten: @escaping @Sendable () -> Void
    ) -> ResponseBody {
        let body = self
        return ResponseBody(contentLength: contentLength) { writer in
            defer { whenWritten() }
            try await body.write(CountingBodyWriter(base: writer, count: count))
        }
    }
}

/// A request counted as being answered (``FerryMetrics/requestStarted()``) until ``end()``, or until it is released:
/// an answer the server drops without writing its body (the connection went first) ends too.
private final class AnswerInProgress: Sendable {
    private let metrics: FerryMetrics
    private let ended = NIOLockedValueBox(false)

    init(metrics: FerryMetrics) {
        self.metrics = metrics
    }

    func end() {
        let first = ended.withLockedValue { ended in
            defer { ended = true }
            return !ended
        }
        if first { metrics.requestEnded() }
    }

    deinit { end() }
}

/// A response body writer that tells `count` the size of each buffer it has written.
private struct CountingBodyWriter: ResponseBodyWriter {
    var base: any ResponseBodyWriter
    let count: @Sendable (Int) -> Void

    mutating func write(_ buffer: ByteBuffer) async throws {
        try await base.write(buffer)
        count(buffer.readableBytes)
    }

    mutating func write(contentsOf buffers: some Sequence<ByteBuffer>) async throws {
        let buffers = Array(buffers)
        try await base.write(contentsOf: buffers)
        count(buffers.reduce(0) { $0 + $1.readableBytes })
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        try await base.finish(trailingHeaders)
    }
}

/// A request body that adds the bytes read from it to `count`.
struct CountedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let count: NIOLockedValueBox<Int64>

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let count: NIOLockedValueBox<Int64>

        mutating func next() async throws -> ByteBuffer? {
            let buffer = try await base.next()
            if let buffer { count.withLockedValue { $0 += Int64(buffer.readableBytes) } }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), count: count)
    }
}

/// `GET /metrics`: Ferry's series for Prometheus, behind a bearer token when one is configured.
///
/// `/metrics` is also the path of a bucket of that name: a request signed for S3 (an `Authorization` that is not a
/// bearer token, or any query, as presigned URLs and listings have) goes to the object API.
struct MetricsEndpoint: Sendable {
    let metrics: FerryMetrics
    /// The bearer token scrapers must send; nil leaves the series open.
    let token: String?
    /// Brings the series read from elsewhere (the catalog's queues) up to date before they are rendered.
    let refresh: @Sendable () async -> Void

    /// Whether `request` is for the series rather than the bucket named `metrics`.
    static func isScrape(_ request: Request) -> Bool {
        guard request.method == .get, (request.uri.query ?? "").isEmpty else { return false }
        guard let authorization = request.headers[.authorization] else { return true }
        return bearerToken(authorization) != nil
    }

    /// The token of a `Bearer` authorization (the scheme in any case, as HTTP compares schemes); nil for another
    /// scheme.
    static func bearerToken(_ authorization: String) -> String? {
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        return String(authorization.dropFirst(7))
    }

    func respond(to request: Request) async -> Response {
        if let token {
            let sent = request.headers[.authorization].flatMap(Self.bearerToken)
            guard let sent, SigV4.constantTimeEquals(sent, token) else {
                return Response(
                    status: .unauthorized,
                    headers: [.contentType: "text/plain; charset=utf-8", .wwwAuthenticate: "Bearer realm=\"ferry-metrics\""],
                    body: .init(byteBuffer: ByteBuffer(string: "The metrics need the bearer token (--metrics-token).\n")))
            }
        }
        await refresh()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: metrics.render())))
    }
}

/// Names the object API operation of a request before it is authenticated, so that the operation series counts
/// refusals of authentication and of the request rate too; ``ObjectAPI`` names it again as it answers (a request
/// whose operation cannot be told is counted by its group alone).
struct S3OperationMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if request.method != .options, let (bucket, key) = try? ObjectAPI.splitPath(request.uri.path),
            let operation = try? ObjectAPI.operation(
                method: request.method, bucket: bucket, key: key,
                query: SigV4.parseQueryString(request.uri.query ?? ""), headers: request.headers)
        {
            context.observation.operation = operation.rawValue
        }
        return try await next(request, context)
    }
}

/// Names the media API action a request asks for before it is authenticated, so that refusals of authentication and
/// of the request rate are counted by action too; only an action the API has is named (never an arbitrary string as
/// a label).
struct MediaActionMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix(MediaAPI.pathPrefix) {
            Self.name(String(path.dropFirst(MediaAPI.pathPrefix.count)), in: context)
        }
        return try await next(request, context)
    }

    /// Names `action` as the request's operation when the media API has it.
    static func name(_ action: String, in context: Context) {
        if MediaAPI.operations[action] != nil { context.observation.operation = action }
    }
}
