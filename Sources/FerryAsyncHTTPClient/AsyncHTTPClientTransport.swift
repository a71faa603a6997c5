import AsyncHTTPClient
import FerryTransport
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Sends requests with AsyncHTTPClient (SwiftNIO); the default transport on Linux, and on Apple platforms for apps that
/// add the `FerryAsyncHTTPClient` product.
///
/// Request bodies go out in slices pulled by the connection as the socket accepts them (at most ``sliceSize`` bytes,
/// fewer on a slow link), so `bodyProgress` reports bytes as they are sent rather than when the whole body is queued.
/// Upload parts are read into ``NIOBodyBuffer``s (``makeBodyBuffer(capacity:)``) and their slices sent without a copy.
public struct AsyncHTTPClientTransport: HTTPTransport {
    let client: HTTPClient
    /// Most bytes per body slice handed to the connection, on a link fast enough to take them within a second: each
    /// slice costs a trip through the HTTP client and the event loops, so 512 KiB rather than NIO's usual 64 KiB (a
    /// 1 GiB upload on loopback spent about 10% less CPU in the client, 0.77–0.90 s instead of 0.91–1.01 s, in four
    /// runs each). Progress events are coalesced anyway.
    public static let sliceSize = 512 * 1024

    /// Longest a request body may go without the connection taking a byte of it: a link that went silent without
    /// closing fails the request as a timeout (which is retried), however long the whole request may take. While
    /// other requests to the same service keep moving, the link is not silent, and a body its connection starves (a
    /// slow link shared unevenly between parts) is not cut off and sent again from its start; a connection that died
    /// meanwhile is closed by the kernel once its sent bytes go unacknowledged for two minutes (on Linux,
    /// `SendWindow`), and otherwise the limit holds once the other requests stop moving. Default 60 s.
    public var idleWriteTimeout: Duration = .seconds(60)
    /// Longest an answer may go without a byte read once the request is sent (the shared client's): 300 s, for a
    /// server that is alive but slow to answer. A link that died meanwhile is given up sooner, on Linux about two
    /// minutes after the server was last heard (its keepalive probes go unanswered; see `SendWindow`).
    public static let idleReadTimeout = TimeAmount.seconds(300)
    /// Longest a request that sends a body may take while the body keeps moving: a part on a link of a few KB/s
    /// takes minutes, and is not cut off and sent again from its start. 24 hours.
    public static let longestBodyRequest: Duration = .seconds(24 * 3600)

    /// Most bytes a connection's socket may hold (`SO_SNDBUF`; Linux keeps twice this, for its own bookkeeping):
    /// 256 KiB. Each connection's buffer follows its link from 32 KiB up to this (`SendWindow`: about two seconds of
    /// what the link drains). Left to itself Linux grows the buffer to 4 MiB on a link that is slow but keeps taking
    /// bytes, so progress ran megabytes ahead of what the server had, and a part's answer wait began while most of it
    /// had still to cross the link. With this bound (and `settle(_:)`) a body counted as sent is within about
    /// 1.75 MiB of the server (1.0–1.5 MiB seen), per request, and within a few seconds of the link on a slow one. The
    /// bound covers bytes in flight too, which on a slow link with deep queues is what keeps new connections and
    /// other parts' acknowledgements from waiting behind megabytes (bounding only the unsent bytes, with
    /// `TCP_NOTSENT_LOWAT`, let 2.5 MB pile up per connection at 60 KB/s, and parts timed out). The cost is a ceiling
    /// of about 512 KiB per round trip per connection (10 MB/s at 50 ms), times the parts sent at once; an app on
    /// fast, distant links can hand the transport a client of its own (``init(client:)``). Network.framework's
    /// connections (AsyncHTTPClient's on Apple platforms) take no socket options and keep the system's buffering.
    public static let sendBufferSize = 256 * 1024

    /// Uses the given client (default: ``sharedClient``).
    public init(client: HTTPClient = AsyncHTTPClientTransport.sharedClient) {
        self.client = client
    }

    /// A process-wide client for Ferry: it does not retry failed connection attempts itself (the engine's retry
    /// policy does, with backoff and events), gives up connecting after 10 seconds, ends a request whose answer has
    /// not moved for ``idleReadTimeout`` once the request is sent, and follows no redirect (a signed request goes
    /// only where it was addressed, with its security token; the 3xx is its answer). Its connections' sockets hold at
    /// most ``sendBufferSize`` bytes, fewer on a slow link, where the platform's sockets allow it.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(10)
        configuration.timeout.read = idleReadTimeout
        configuration.http1_1ConnectionDebugInitializer = SendWindow.install
        configuration.http2ConnectionDebugInitializer = SendWindow.install
        // No spans of its own: they would carry every URL whole, and an upload's URL is its credential. The engine
        // sends its own `traceparent` (``UploadTrace``).
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: eventLoops, configuration: configuration)
    }()

    /// The event loops of ``sharedClient``: two of its own on Linux, however many cores the machine has, since
    /// `settle(_:)` visits every loop for each body slice (a process-wide group has a loop per core); on Apple
    /// platforms Network.framework's (a loop per core).
    static let eventLoops: any EventLoopGroup = {
        #if canImport(Network)
        HTTPClient.defaultEventLoopGroup
        #else
        MultiThreadedEventLoopGroup(numberOfThreads: 2)
        #endif
    }()

    /// Returns once every event loop of `client` has run what was handed to it before: a body slice handed to the
    /// connection has then been given to its channel (and written to the socket, as far as the socket took it), and a
    /// connection whose buffers are full has told the request to stop producing. AsyncHTTPClient hands a slice to the
    /// connection's loop and asks for the next at once, so a body that is read quickly was otherwise all taken (and
    /// counted as sent) before the first slice reached the socket, and the whole body waited in memory for a slow
    /// link. Which loop holds the connection is not known, so every loop is visited, all at once.
    static func settle(_ client: HTTPClient) async {
        let loops = Array(client.eventLoopGroup.makeIterator())
        guard let first = loops.first else { return }
        let visits = loops.map { $0.submit {} }
        try? await EventLoopFuture.andAllComplete(visits, on: first).get()
    }

    public func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        var http = HTTPClientRequest(url: request.url)
        http.method = HTTPMethod(rawValue: request.method)
        for header in request.headers where header.name.lowercased() != "host" {
            http.headers.add(name: header.name, value: header.value)
        }
        let link = LinkPace.of(request.url)
        let watch = BodyWatch(link: link)
        let progress: @Sendable (Int) -> Void = { bytes in
            watch.moved()
            bodyProgress(bytes)
        }
        var watched = false
        let settle: @Sendable () async -> Void = { [client] in await Self.settle(client) }
        if let streamed = request.streamedBody {
            let pieces = streamed.chunks.map { ByteBuffer(bytes: $0) }
            http.body = .stream(
                CountedBody(
                    pieces: pieces, length: streamed.length, progress: progress, settle: settle,
                    finished: watch.finish, link: link),
                length: .known(streamed.length))
            watched = streamed.length > 0
        } else if request.bodyLength > 0 || request.method == "PUT" || request.method == "POST" {
            let buffer = Self.byteBuffer(of: request.bodyBuffer)
            let length = Int64(buffer.readableBytes)
            let slices = BufferSlices(body: buffer, sliceSize: Self.sliceSize)
            http.body = .stream(
                CountedBody(
                    pieces: slices, length: length, progress: progress, settle: settle, finished: watch.finish,
                    link: link),
                length: .known(length))
            watched = length > 0
        }
        // Without a body, the request's time limit holds until its answer has arrived whole, not only its head: an
        // answer that trickles in (a byte now and then keeps the idle timeout from firing) fails as a timeout. With a
        // body, a slow link that keeps taking it is not cut off: the limit (at most ``idleWriteTimeout``) is the time
        // the body may go without moving, the answer's head may then take until it has not moved for
        // ``idleReadTimeout``, and its body the request's time limit.
        var deadline = ContinuousClock.now + request.timeout
        let response: HTTPClientResponse
        do {
            response = try await Self.execute(
                http, client: client, timeout: request.timeout, watch: watched ? watch : nil,
                idleWriteTimeout: min(idleWriteTimeout, request.timeout))
        } catch where Self.isConnectionFailure(error) {
            // What reading the request body threw (a file that became shorter) or a cancellation is its own.
            throw Self.transportError(error, url: request.url)
        }
        if watched { deadline = ContinuousClock.now + request.timeout }
        let headers = response.headers.map { (name: $0.name, value: $0.value) }
        let status = Int(response.status.code)
        do {
            if let responseSink, (200..<300).contains(status) {
                for try await buffer in response.body {
                    try await responseSink(Array(buffer.readableBytesView))
                }
                return TransportResponse(status: status, headers: headers, body: [])
            }
            let body = response.body
            // A head that came just before the deadline still gets a moment for a body already on its way.
            let bodyDeadline = max(deadline, ContinuousClock.now + .seconds(5))
            guard (200..<300).contains(status) else {
                // An error's document is small: beyond ``largestErrorBody`` nothing is read (a captive portal's page, an
                // endless body), so parts sent at once do not each hold what a broken server sends.
                let length = response.headers.first(name: "content-length").flatMap { Int($0) }
                let kept = try await Self.errorDocument(body, length: length, deadline: bodyDeadline)
                return TransportResponse(status: status, headers: headers, body: kept)
            }
            var collected = try await Self.within(bodyDeadline) { try await body.collect(upTo: 64 * 1024 * 1024) }
            return TransportResponse(
                status: status, headers: headers, body: collected.readBytes(length: collected.readableBytes) ?? [])
        } catch where Self.isConnectionFailure(error) {
            // What the response sink threw (a file that cannot be written) is its own, not the connection's.
            throw Self.transportError(error, url: request.url)
        }
    }

    /// An error answer's body, read to ``largestErrorBody`` by `deadline`.
    ///
    /// A refusal sent before the request's body was all sent (a server that checks the signature, the token or the
    /// quota first, then says `Connection: close`) ends while the body is still going out: AsyncHTTPClient then closes
    /// the connection, and the answer's body stream fails though the answer came whole. The refusal stands, with what
    /// came of its document: its status is the answer, not a reset connection to retry as a network failure. Only a
    /// document that came whole (its `length`, when the answer gave one) stands: without it the refusal's reason
    /// (an expired token, which a retry with fresh credentials mends) is unknown, and the failure is the connection's.
    static func errorDocument(_ body: HTTPClientResponse.Body, length: Int?, deadline: ContinuousClock.Instant)
        async throws -> [UInt8]
    {
        let kept = KeptBody()
        do {
            try await within(deadline) {
                for try await buffer in body {
                    guard kept.add(buffer.readableBytesView, upTo: largestErrorBody) else { break }
                }
            }
        } catch where !(error is TransportError) && isConnectionFailure(error) {
            let bytes = kept.bytes
            guard !bytes.isEmpty, bytes.count >= min(length ?? 0, largestErrorBody) else { throw error }
            return bytes
        }
        return kept.bytes
    }

    /// The most of an error answer's body that is read: 64 KiB (S3's and the media service's error documents are a few
    /// hundred bytes).
    static let largestErrorBody = 64 * 1024

    /// Whether `error` came from the connection (AsyncHTTPClient, SwiftNIO, TLS, or a time limit of this transport).
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if error is HTTPClientError || error is TransportError || error is IOError || error is ChannelError { return true }
        let type = String(reflecting: Swift.type(of: error))
        return type.hasPrefix("NIO") || type.contains("SSL")
    }

    /// Runs the request within `timeout`; with a `watch`, as long as its body keeps moving instead (up to
    /// ``longestBodyRequest``), failing it as a timeout when the body stops moving for `idleWriteTimeout` before it
    /// is all handed to the connection (the connection stops taking it when the peer stops acknowledging:
    /// AsyncHTTPClient's own write timeout does not count that time).
    static func execute(
        _ http: HTTPClientRequest, client: HTTPClient, timeout: Duration, watch: BodyWatch?, idleWriteTimeout: Duration
    ) async throws -> HTTPClientResponse {
        guard let watch else { return try await client.execute(http, timeout: TimeAmount(timeout)) }
        return try await withThrowingTaskGroup(of: HTTPClientResponse?.self) { group in
            group.addTask { try await client.execute(http, timeout: TimeAmount(max(timeout, Self.longestBodyRequest))) }
            group.addTask {
                try await watch.waitForStall(limit: idleWriteTimeout)
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let response = result { return response }
            }
            throw CancellationError()
        }
    }

    /// Runs `body`, failing it as a timeout when `deadline` passes first.
    static func within<T: Sendable>(_ deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(until: deadline)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw TransportError(isTimeout: true, "The answer did not arrive whole within the request's time limit.")
            }
            return value
        }
    }

    /// Memory for a body that this transport sends as it is: a ``NIOBodyBuffer``.
    public func makeBodyBuffer(capacity: Int) -> any BodyBuffer { NIOBodyBuffer(capacity: capacity) }

    /// The body as a `ByteBuffer`: the buffer itself for a ``NIOBodyBuffer``, a copy for any other kind.
    static func byteBuffer(of body: (any BodyBuffer)?) -> ByteBuffer {
        guard let body else { return ByteBuffer() }
        if let nio = body as? NIOBodyBuffer { return nio.byteBuffer }
        return body.withUnsafeBytes { ByteBuffer(bytes: $0) }
    }

    /// A failure of the request to `url` as the ``TransportError`` of its kind (refused, host not found, timeout, TLS,
    /// reset), which names the endpoint and keeps the library's words as a trailing detail; cancellation and errors
    /// that are already ``TransportError``s as they are.
    static func transportError(_ error: any Error, url: String) -> any Error {
        if error is CancellationError { return error }
        if let error = error as? TransportError {
            // This transport's own time limit, told by the endpoint too.
            guard error.kind == .timeout, !error.message.contains("://") else { return error }
            return TransportError(.timeout, url: url, detail: error.message)
        }
        if let error = error as? HTTPClientError, error == .cancelled { return CancellationError() }
        // AsyncHTTPClient's own words without their values: a refused header value is quoted whole (a session token
        // with a stray line break, say), and so is a URL.
        let detail = (error as? HTTPClientError)?.shortDescription ?? "\(error)"
        return TransportError(kind(of: error), url: url, detail: detail)
    }

    /// What kind of failure `error` is, from AsyncHTTPClient's and SwiftNIO's errors (a connection error of NIOPosix,
    /// which this module does not link, by its words and errno).
    static func kind(of error: any Error) -> TransportError.Kind {
        if let error = error as? HTTPClientError {
            if [.deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout, .tlsHandshakeTimeout].contains(error) {
                return .timeout
            }
            if error == .remoteConnectionClosed { return .connectionReset }
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return .connectionRefused
            case ECONNRESET, EPIPE, ECONNABORTED: return .connectionReset
            case ETIMEDOUT: return .timeout
            default: break
            }
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout: return .timeout
            case .eof, .ioOnClosedChannel, .outputClosed, .inputClosed, .alreadyClosed: return .connectionReset
            default: break
            }
        }
        let words = "\(error) \(String(reflecting: type(of: error)))"
        if words.contains("errno: \(ECONNREFUSED))") || words.contains("Connection refused") { return .connectionRefused }
        if words.contains("DNS error") || words.contains("UnknownHost") || words.contains("Name or service not known") {
            return .hostNotFound
        }
        if words.contains("SSL") || words.contains("TLS") || words.contains("certificate") { return .tls }
        if words.contains("errno: \(ECONNRESET))") || words.contains("Connection reset") { return .connectionReset }
        if words.contains("errno: \(ETIMEDOUT))") || words.contains("timed out") { return .timeout }
        return .other
    }
}

/// A body as an async sequence of slices of at most `sliceSize` bytes: views of its storage, not copies.
struct BufferSlices: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: ByteBuffer
    let sliceSize: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var body: ByteBuffer
        let sliceSize: Int

        mutating func next() async throws -> ByteBuffer? {
            guard body.readableBytes > 0 else { return nil }
            return body.readSlice(length: Swift.min(sliceSize, body.readableBytes))
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(body: body, sliceSize: sliceSize)
    }
}

/// Body pieces as the connection pulls them, handed over in slices that follow the link (``SlicePace``), counting each
/// slice once the next one is asked for and the connection has taken it (`settle`), and the last one, which makes up
/// `length`, when it is handed over (the response confirms it arrived).
struct CountedBody<Pieces: AsyncSequence & Sendable>: AsyncSequence, Sendable where Pieces.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let pieces: Pieces
    let length: Int64
    let progress: @Sendable (Int) -> Void
    /// Returns once the connection has taken the slices handed to it (and so may have asked for no more).
    var settle: @Sendable () async -> Void = {}
    /// Called once the last piece is handed over.
    var finished: @Sendable () -> Void = {}
    /// The link's pace, read at the start and kept once measured.
    var link: LinkPace?

    struct AsyncIterator: AsyncIteratorProtocol {
        var pieces: Pieces.AsyncIterator
        var remaining: Int64
        let progress: @Sendable (Int) -> Void
        let settle: @Sendable () async -> Void
        let finished: @Sendable () -> Void
        let link: LinkPace?
        var pending = 0
        var pace: SlicePace
        /// What is left of the piece being handed over.
        var carry = ByteBuffer()

        mutating func next() async throws -> ByteBuffer? {
            if pending > 0 {
                await settle()
                progress(pending)
                pace.taken(pending)
                if pace.measured { link?.remember(pace.size) }
                pending = 0
            }
            try Task.checkCancellation()
            while carry.readableBytes == 0 {
                guard let piece = try await pieces.next() else { return nil }
                carry = piece
            }
            guard let slice = carry.readSlice(length: Swift.min(pace.size, carry.readableBytes)) else { return nil }
            remaining -= Int64(slice.readableBytes)
            if remaining <= 0 {
                progress(slice.readableBytes)
                finished()
            } else {
                pending = slice.readableBytes
            }
            return slice
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(
            pieces: pieces.makeAsyncIterator(), remaining: length, progress: progress, settle: settle,
            finished: finished, link: link,
            pace: SlicePace(largest: AsyncHTTPClientTransport.sliceSize, starting: link?.size))
    }
}

/// The size of the slices a request body is handed to the connection in, following the link: for its first 512 KiB
/// the size last measured on the link, or 32 KiB (a new connection's send window, `SendWindow`); then what the
/// connection took in about a second, in powers of two from 16 KiB to `largest`. The opening is not measured: the
/// socket and the connection's queue take its first bytes at once, whatever the link. On a fast link slices are large
/// (fewer trips through the client and its event loops); on a slow one each still goes within seconds, so progress
/// moves, and a link that stopped is told from one that is slow (the idle write limit counts from the last slice
/// taken: a 512 KiB slice on a 5 KB/s link took 100 s, a 128 KiB opening slice on a link three parts shared 20 s).
struct SlicePace {
    static let smallest = 16 * 1024
    static let opening = 32 * 1024
    static let openingBytes = 512 * 1024
    let largest: Int
    private(set) var size: Int
    /// Whether `size` was measured on this body (not taken from an earlier one).
    private(set) var measured = false
    private var handed = 0
    private var windowBytes = 0
    private var windowStart: ContinuousClock.Instant?

    /// A pace of slices up to `largest`, starting from the size an earlier body measured on the same link, if any.
    init(largest: Int, starting known: Int? = nil) {
        self.largest = largest
        size = Swift.min(largest, Swift.max(Self.smallest, known ?? Self.opening))
    }

    /// Records that the connection took `bytes` more, at `now`; past the opening, each half second (or 2 MiB) sets the
    /// size from the bytes taken in it.
    mutating func taken(_ bytes: Int, now: ContinuousClock.Instant = .now) {
        handed += bytes
        guard handed > Self.openingBytes else { return }
        guard let start = windowStart else {
            windowStart = now
            return
        }
        windowBytes += bytes
        let elapsed = now - start
        guard elapsed >= .milliseconds(500) || windowBytes >= 2 << 20 else { return }
        let perSecond = Double(windowBytes) / Swift.max(elapsed / .seconds(1), 0.001)
        var next = Self.smallest
        while next * 2 <= largest, Double(next * 2) <= perSecond { next *= 2 }
        size = next
        measured = true
        windowBytes = 0
        windowStart = now
    }
}

/// The slice size last measured on the link to one service (scheme, host and port), shared by the requests to it:
/// parts sent at once, and the parts after them, start from it instead of measuring the link again; and when a body
/// last moved on it (``BodyWatch``).
///
/// `@unchecked Sendable`: `measured` and `moving` are only touched while holding `lock`.
final class LinkPace: @unchecked Sendable {
    private let lock = NSLock()
    private var measured: Int?
    private var moving: ContinuousClock.Instant?

    /// The size last measured, if any.
    var size: Int? { lock.withLock { measured } }

    /// Keeps `size` as the link's.
    func remember(_ size: Int) { lock.withLock { measured = size } }

    /// When a body last moved on the link, if one has.
    var lastMoved: ContinuousClock.Instant? { lock.withLock { moving } }

    /// A body on the link moved.
    func moved() { lock.withLock { moving = .now } }

    /// The pace of the link to the service `url` names.
    static func of(_ url: String) -> LinkPace {
        links.pace(for: url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).prefix(3)
            .joined(separator: "/"))
    }

    private static let links = Links()

    /// The links' paces by service; forgotten all at once past 256 services.
    ///
    /// `@unchecked Sendable`: `paces` is only touched while holding `lock`.
    private final class Links: @unchecked Sendable {
        private let lock = NSLock()
        private var paces: [String: LinkPace] = [:]

        func pace(for service: String) -> LinkPace {
            lock.withLock {
                if let pace = paces[service] { return pace }
                if paces.count >= 256 { paces.removeAll() }
                let pace = LinkPace()
                paces[service] = pace
                return pace
            }
        }
    }
}

/// What has come of an error answer's body, kept when its stream fails.
///
/// `@unchecked Sendable`: `kept` is only touched while holding `lock`.
final class KeptBody: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [UInt8] = []

    /// Keeps `bytes` up to `limit` in all; false once the limit is reached.
    func add(_ bytes: ByteBufferView, upTo limit: Int) -> Bool {
        lock.withLock {
            kept += bytes.prefix(limit - kept.count)
            return kept.count < limit
        }
    }

    /// What was kept.
    var bytes: [UInt8] { lock.withLock { kept } }
}

/// When a request body last moved, and whether all of it has been handed to the connection.
final class BodyWatch: @unchecked Sendable {
    // `last` and `done` are only touched while holding `lock`.
    private let lock = NSLock()
    private var last = ContinuousClock.now
    private var done = false
    /// The link the body goes over, which other requests to the service move too.
    private let link: LinkPace?

    init(link: LinkPace? = nil) {
        self.link = link
    }

    /// The connection took a piece of the body.
    func moved() {
        lock.withLock { last = .now }
        link?.moved()
    }

    /// All of the body was handed over: nothing more to watch.
    @Sendable func finish() { lock.withLock { done = true } }

    /// Returns once the body is all handed over; throws a timeout when it has not moved for `limit` before that, and
    /// neither has any other body on its link.
    func waitForStall(limit: Duration, every check: Duration = .seconds(1)) async throws {
        while true {
            try await Task.sleep(for: check)
            let (last, done) = lock.withLock { (self.last, self.done) }
            if done { return }
            let now = ContinuousClock.now
            let still = now - last
            guard still > limit else { continue }
            if let linkMoved = link?.lastMoved, now - linkMoved <= limit { continue }
            throw TransportError(
                isTimeout: true, "The connection took no byte of the request body for \(still.components.seconds) s.")
        }
    }
}
