import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A loopback HTTP/1.1 reverse proxy that sits between an S3 client and a real S3 server and injects the faults a
/// phone's network produces: error statuses, connections cut mid-request or mid-response, stalls and slow links.
///
/// Requests are forwarded unchanged: method, request target (path and query exactly as received, never re-encoded),
/// every header including `Host` as the client sent it (so SigV4 signatures made for the proxy's `host:port` still
/// verify upstream), and the body, streamed with back-pressure (nothing is buffered whole). Responses stream back the
/// same way. `Expect: 100-continue` is forwarded upstream and answered by the proxy itself; each client connection
/// gets its own upstream connection, kept alive while both sides keep it alive.
///
/// ```swift
/// try await TestServer.with { server in
///     try await FaultProxy.with(upstream: server.endpoint) { proxy in
///         proxy.inject(.status(503, code: "SlowDown"), when: .method("PUT"))
///         proxy.inject(.dropAfterRequestBytes(64 * 1024), when: .partNumber(2), times: 2)
///         let s3 = S3TestClient(endpoint: proxy.endpoint, credentials: server.root)
///         ...
///         #expect(proxy.log.map(\.outcome) == ["503", "200", "dropped", "dropped", "200"])
///     }
/// }
/// ```
public final class FaultProxy: Sendable {
    /// The port the proxy listens on (127.0.0.1).
    public let port: Int
    /// `http://127.0.0.1:PORT`.
    public var endpoint: String { "http://127.0.0.1:\(port)" }

    let core: FaultProxyCore
    private let serverChannel: Channel
    private let acceptTask: Task<Void, Never>

    private init(port: Int, core: FaultProxyCore, serverChannel: Channel, acceptTask: Task<Void, Never>) {
        self.port = port
        self.core = core
        self.serverChannel = serverChannel
        self.acceptTask = acceptTask
    }

    /// Starts the proxy in front of `upstream` (e.g. `"http://127.0.0.1:9000"`), listening on 127.0.0.1 and a free
    /// port.
    public static func start(upstream: String) async throws -> FaultProxy {
        guard let url = URL(string: upstream), url.scheme?.lowercased() == "http", let host = url.host else {
            throw FaultProxyError.badUpstream(upstream)
        }
        let core = FaultProxyCore(upstreamHost: host, upstreamPort: url.port ?? 80)
        let server = try await ServerBootstrap(group: core.group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    // A connection that arrives once shutdown has begun is refused here, before it is wrapped: a
                    // wrapped one the ending stream of connections drops would trap in NIO (NIOAsyncWriter deinited
                    // without finish()).
                    guard !core.isShutDown else { throw FaultProxyError.shutDown }
                    // No pipelining assistance: requests on a connection are handled strictly one after the other by
                    // the connection's task, and the assistance handler asserts on the early responses faults produce.
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withPipeliningAssistance: false, withErrorHandling: true)
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        guard let port = server.channel.localAddress?.port else {
            try? await server.channel.close()
            throw FaultProxyError.noPort
        }
        let task = Task<Void, Never> {
            try? await server.executeThenClose { connections in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in connections {
                        group.addTask { await core.serve(connection) }
                    }
                }
            }
        }
        return FaultProxy(port: port, core: core, serverChannel: server.channel, acceptTask: task)
    }

    /// Starts a proxy in front of `upstream`, runs `body`, and shuts the proxy down.
    public static func with<T: Sendable>(
        upstream: String, _ body: @Sendable (FaultProxy) async throws -> T
    ) async throws -> T {
        let proxy = try await start(upstream: upstream)
        do {
            let result = try await body(proxy)
            try await proxy.shutdown()
            return result
        } catch {
            try? await proxy.shutdown()
            throw error
        }
    }

    /// Adds a rule. For each request the rules are consulted in the order they were added; the first one that matches
    /// and is not spent applies (one fault per request). A rule applies `times` times, then is spent; pass `Int.max`
    /// for a rule that never runs out.
    public func inject(_ fault: Fault, when match: Match = .any, times: Int = 1) {
        precondition(times > 0, "a fault rule must apply at least once")
        core.state.withLockedValue { $0.rules.append(FaultProxyCore.Rule(fault: fault, match: match, remaining: times)) }
    }

    /// Removes every rule, spent or not. Requests already in progress keep the fault they were given.
    public func clearFaults() {
        core.state.withLockedValue { $0.rules.removeAll() }
    }

    /// The rules not yet spent (how many applications each has left), in order.
    public var pendingFaults: [(fault: Fault, remaining: Int)] {
        core.state.withLockedValue { $0.rules.filter { $0.remaining > 0 }.map { ($0.fault, $0.remaining) } }
    }

    /// The requests seen so far, in arrival order.
    public var log: [Entry] {
        core.state.withLockedValue { $0.entries.map(\.entry) }
    }

    /// Forgets the requests seen so far.
    public func clearLog() {
        core.state.withLockedValue { $0.entries.removeAll() }
    }

    /// Stops listening, closes every client and upstream connection (ending stalls and delays at once) and waits for
    /// the proxy's tasks to finish. Calling it again does nothing.
    public func shutdown() async throws {
        let channels = core.state.withLockedValue { state in
            state.isShutDown = true
            return Array(state.channels.values)
        }
        // Closing the listening channel ends the stream of connections; connections it still buffers are served
        // (and closed at once, the proxy being shut down). Cancelling the accepting task instead can drop a buffered
        // connection without closing it, which traps in NIO.
        serverChannel.close(promise: nil)
        for channel in channels { channel.close(promise: nil) }
        await acceptTask.value
    }
}

/// A fault the proxy injects into one request.
public enum Fault: Sendable, Hashable, CustomStringConvertible {
    /// Answers with an S3 error document (`<Error><Code>code</Code>…`) and this status without forwarding, e.g.
    /// `.status(500, code: "InternalError")`, `.status(503, code: "SlowDown")`,
    /// `.status(503, code: "ServiceUnavailable")`. The request body is read (after a `100 Continue` if the client asked
    /// for one) and discarded first; the connection stays usable.
    case status(Int, code: String)
    /// As ``status(_:code:)`` with 503 `SlowDown`, and a `Retry-After` header asking for `seconds`.
    case throttled(retryAfter: Int)
    /// Forwards the request head and the first N bytes of the body upstream, then resets the client connection (TCP
    /// RST, no response) and closes the upstream one, so the server sees a truncated body. If the body is not longer
    /// than N bytes the whole request is forwarded, the proxy waits for the upstream response head (the server has
    /// acted), and then resets the client connection: the response is lost. `dropAfterRequestBytes(.max)` is
    /// therefore "the request succeeded but the client never heard".
    case dropAfterRequestBytes(Int)
    /// Forwards the request, streams the response head and the first N bytes of the response body back, then closes
    /// both connections. If the body is not longer than N bytes it is delivered whole but the connection is still
    /// closed before the end of the message (a chunked response then lacks its terminating chunk).
    case dropResponseMidBody(afterBytes: Int)
    /// Holds the request this long without reading its body or answering (long enough for a client's request timeout
    /// to fire), then closes the connection without a response. Ends early when the client hangs up or the proxy
    /// shuts down.
    case stall(seconds: Double)
    /// Holds the request this long, then forwards it normally (a slow network). Ends early, closing the connection,
    /// on proxy shutdown.
    case delay(seconds: Double)
    /// Forwards the request body upstream at about this many bytes a second (a slow link that keeps moving), and the
    /// answer as it comes.
    case trickle(bytesPerSecond: Int)
    /// Forwards the request with the body byte at this offset inverted (a corruption no TCP checksum caught), and
    /// the response unchanged.
    case corruptRequestByte(at: Int)
    /// Forwards the request with the first byte of its `Range: bytes=FIRST-LAST` header moved on by this many bytes,
    /// and the response unchanged: a cache in front of the store that answers another range than the one asked.
    case shiftRange(by: Int)

    public var description: String {
        switch self {
        case .status(let status, let code): "status(\(status), \(code))"
        case .throttled(let seconds): "throttled(retryAfter: \(seconds))"
        case .dropAfterRequestBytes(let bytes): "dropAfterRequestBytes(\(bytes))"
        case .dropResponseMidBody(let bytes): "dropResponseMidBody(afterBytes: \(bytes))"
        case .stall(let seconds): "stall(\(seconds)s)"
        case .delay(let seconds): "delay(\(seconds)s)"
        case .corruptRequestByte(let offset): "corruptRequestByte(at: \(offset))"
        case .trickle(let rate): "trickle(\(rate) B/s)"
        case .shiftRange(let bytes): "shiftRange(by: \(bytes))"
        }
    }
}

/// Which requests a fault rule applies to.
public struct Match: Sendable {
    /// What a matcher sees of a request.
    public struct Request: Sendable {
        /// The method, e.g. `PUT`.
        public var method: String
        /// The path as sent (percent-encoded), without the query.
        public var path: String
        /// The raw query string (without `?`), empty if none.
        public var query: String
        /// The request headers.
        public var headers: HTTPHeaders

        /// A request as a matcher sees it.
        public init(method: String, path: String, query: String = "", headers: HTTPHeaders = [:]) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
        }

        /// The query's parameters, percent-decoded, in order. `?uploads` gives `("uploads", "")`.
        public var queryItems: [(name: String, value: String)] {
            guard !query.isEmpty else { return [] }
            return query.split(separator: "&", omittingEmptySubsequences: true).map { item in
                let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let decode = { (s: Substring) in
                    String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
                }
                return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
            }
        }
    }

    private let predicate: @Sendable (Request) -> Bool

    /// A matcher from a predicate. It runs under the proxy's lock: it must not call the proxy.
    public init(_ predicate: @escaping @Sendable (Request) -> Bool) {
        self.predicate = predicate
    }

    /// Whether the rule applies to `request`.
    public func matches(_ request: Request) -> Bool { predicate(request) }

    /// Every request.
    public static let any = Match { _ in true }

    /// Requests with this method (case-insensitive), e.g. `"PUT"`.
    public static func method(_ method: String) -> Match {
        let method = method.uppercased()
        return Match { $0.method.uppercased() == method }
    }

    /// Requests whose query has a parameter with exactly this name: `"partNumber"` (UploadPart), `"uploads"`
    /// (CreateMultipartUpload), `"uploadId"` (UploadPart, ListParts, Complete, Abort).
    public static func query(contains name: String) -> Match {
        Match { $0.queryItems.contains { $0.name == name } }
    }

    /// Requests whose query has `name=value`.
    public static func query(_ name: String, equals value: String) -> Match {
        Match { $0.queryItems.contains { $0.name == name && $0.value == value } }
    }

    /// UploadPart (or UploadPartCopy) of part `n`.
    public static func partNumber(_ n: Int) -> Match {
        query("partNumber", equals: String(n))
    }

    /// Requests whose (encoded) path is exactly `path`, e.g. `"/bucket/key"`.
    public static func path(_ path: String) -> Match {
        Match { $0.path == path }
    }

    /// Requests whose (encoded) path contains `fragment`.
    public static func path(contains fragment: String) -> Match {
        Match { $0.path.contains(fragment) }
    }

    /// Requests that carry header `name` (with `value`, case-sensitive, if given).
    public static func header(_ name: String, _ value: String? = nil) -> Match {
        Match { request in
            let values = request.headers[name]
            guard let value else { return !values.isEmpty }
            return values.contains(value)
        }
    }

    /// Requests every one of `matches` matches.
    public static func and(_ matches: Match...) -> Match {
        Match { request in matches.allSatisfy { $0.matches(request) } }
    }

    /// Requests any of `matches` matches.
    public static func or(_ matches: Match...) -> Match {
        Match { request in matches.contains { $0.matches(request) } }
    }

    /// Requests `match` does not match.
    public static func not(_ match: Match) -> Match {
        Match { !match.matches($0) }
    }

    /// Requests both this and `other` match.
    public func and(_ other: Match) -> Match { .and(self, other) }

    /// Requests this or `other` matches.
    public func or(_ other: Match) -> Match { .or(self, other) }

    /// `.and(lhs, rhs)`.
    public static func && (lhs: Match, rhs: Match) -> Match { .and(lhs, rhs) }
    /// `.or(lhs, rhs)`.
    public static func || (lhs: Match, rhs: Match) -> Match { .or(lhs, rhs) }
    /// `.not(match)`.
    public static prefix func ! (match: Match) -> Match { .not(match) }
}

/// A request the proxy saw.
public struct Entry: Sendable, Hashable, CustomStringConvertible {
    /// The method, e.g. `PUT`.
    public var method: String
    /// The path as sent (percent-encoded), without the query.
    public var path: String
    /// The raw query string (without `?`), empty if none.
    public var query: String
    /// What happened: the status sent to the client (`"200"`, `"503"` — from upstream or injected), `"dropped"` (a
    /// drop fault cut the connection), `"stalled"` (a stall fault held it), `"502"` (upstream unreachable or it
    /// closed before answering), `"aborted"` (the client or the proxy went away first), `"pending"` (still running).
    public var outcome: String

    /// An entry (for comparing with `log`).
    public init(method: String, path: String, query: String, outcome: String) {
        self.method = method
        self.path = path
        self.query = query
        self.outcome = outcome
    }

    public var description: String {
        "\(method) \(path)\(query.isEmpty ? "" : "?" + query) -> \(outcome)"
    }
}

/// Errors starting the proxy.
public enum FaultProxyError: Error, CustomStringConvertible {
    /// The upstream is not an `http://host:port` URL.
    case badUpstream(String)
    /// The listening socket has no port.
    case noPort
    /// A connection arrived after shutdown began; it is closed.
    case shutDown

    public var description: String {
        switch self {
        case .badUpstream(let upstream): "FaultProxy upstream must be http://host:port, got \(upstream)"
        case .noPort: "FaultProxy could not determine its port"
        case .shutDown: "FaultProxy is shutting down"
        }
    }
}

/// The proxy's shared state: rules, log and live connections.
final class FaultProxyCore: Sendable {
    struct Rule: Sendable {
        var fault: Fault
        var match: Match
        var remaining: Int
    }

    struct State: Sendable {
        var rules: [Rule] = []
        var entries: [(id: Int, entry: Entry)] = []
        var nextID = 0
        var channels: [ObjectIdentifier: Channel] = [:]
        var isShutDown = false
    }

    let state = NIOLockedValueBox(State())
    let upstreamHost: String
    let upstreamPort: Int
    let group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    init(upstreamHost: String, upstreamPort: Int) {
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
    }

    /// Records a new request and picks its fault (consuming one application of the rule).
    func begin(_ request: Match.Request) -> (id: Int, fault: Fault?) {
        state.withLockedValue { state in
            let id = state.nextID
            state.nextID += 1
            state.entries.append(
                (id, Entry(method: request.method, path: request.path, query: request.query, outcome: "pending")))
            guard let index = state.rules.firstIndex(where: { $0.remaining > 0 && $0.match.matches(request) }) else {
                return (id, nil)
            }
            state.rules[index].remaining -= 1
            return (id, state.rules[index].fault)
        }
    }

    /// Sets a request's outcome.
    func finish(_ id: Int, _ outcome: String) {
        state.withLockedValue { state in
            if let index = state.entries.lastIndex(where: { $0.id == id }) { state.entries[index].entry.outcome = outcome }
        }
    }

    /// Sets a request's outcome if it has none yet.
    func finishIfPending(_ id: Int, _ outcome: String) {
        state.withLockedValue { state in
            if let index = state.entries.lastIndex(where: { $0.id == id }), state.entries[index].entry.outcome == "pending" {
                state.entries[index].entry.outcome = outcome
            }
        }
    }

    /// Whether ``FaultProxy/shutdown()`` has begun.
    var isShutDown: Bool { state.withLockedValue { $0.isShutDown } }

    /// Tracks a connection so that shutdown can close it; closes it at once (returning false) after shutdown.
    func register(_ channel: Channel) -> Bool {
        let key = ObjectIdentifier(channel)
        let accepted = state.withLockedValue { state in
            guard !state.isShutDown else { return false }
            state.channels[key] = channel
            return true
        }
        guard accepted else {
            channel.close(promise: nil)
            return false
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLockedValue { $0.channels.removeValue(forKey: key) }
        }
        return true
    }

    /// Serves one client connection until it or the proxy closes.
    func serve(_ client: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        // A connection accepted as the proxy shuts down is closed through executeThenClose all the same: a
        // NIOAsyncChannel dropped without it traps.
        guard register(client.channel) else {
            try? await client.executeThenClose { _, _ in }
            return
        }
        try? await client.executeThenClose { requests, _ in
            let connection = ProxyConnection(core: self, client: client.channel, requests: requests.makeAsyncIterator())
            await connection.run()
        }
    }
}
