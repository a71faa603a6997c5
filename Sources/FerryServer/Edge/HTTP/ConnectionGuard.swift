import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTPTypes

/// How long a connection may wait and how slowly a body may come before the server lets go of the connection, and how
/// many connections it holds at once.
public struct ConnectionLimits: Sendable, Hashable {
    /// Longest wait for a request to begin on an open connection (a new one, or between requests of a kept-alive one),
    /// which also bounds how long a request's headers may take to arrive. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// While a request body is being received, each window of this length must bring at least
    /// ``minimumBodyBytesPerWindow`` bytes, or the connection is closed and nothing of the body is kept; while an
    /// answer is being sent, a client that takes none of it for this long (the connection stays full) is let go too.
    /// Default 30 s.
    public var bodyWindow: Duration = .seconds(30)
    /// Bytes a body must progress by in each ``bodyWindow``. Default 1 KiB (a trickle of a byte a second is cut off;
    /// the slowest mobile network sends far more).
    public var minimumBodyBytesPerWindow: Int = 1024
    /// Connections held at once; one more is closed as soon as it is accepted. Default 1024.
    public var maxConnections: Int = 1024
    /// Connections held at once from one client address (an IPv4 address, or an IPv6 /64), so one client cannot take
    /// every connection the server holds; one more from that address is closed as soon as it is accepted. Default
    /// 256. Behind a proxy or load balancer every connection comes from its address: raise this to
    /// ``maxConnections`` there.
    public var maxConnectionsPerAddress: Int = 256

    /// The defaults.
    public init() {}
}

/// Applies ``ConnectionLimits`` to one connection: the connection count, the wait for a request, and the progress of
/// request bodies. A connection that breaks a limit is closed; a body cut off this way fails in the store, which keeps
/// nothing of it.
///
/// A request refused (4xx or 5xx) before its body ended does not get the rest of its body read: its answer says
/// `Connection: close`, and the connection closes once the answer is sent and the body has ended, or a body window after
/// the answer (as a web server lingers: time for a client that sends its whole body before reading to get the answer
/// rather than a reset). Otherwise a client refused at its headers (unsigned, say) could hold the connection for as
/// long as it trickled a body, and a few such clients every connection the server takes; now it holds one no longer
/// than an idle connection.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Connections open now, across the server and by client address.
    final class Counter: Sendable {
        private struct Counts {
            var total = 0
            var byAddress: [String: Int] = [:]
        }

        private let value = NIOLockedValueBox(Counts())
        /// Counts one more connection from `address`; false (and not counted) when the server's limit or the
        /// address's is reached.
        func enter(address: String?, limits: ConnectionLimits) -> Bool {
            value.withLockedValue { counts in
                guard counts.total < limits.maxConnections else { return false }
                if let address {
                    let held = counts.byAddress[address, default: 0]
                    guard held < limits.maxConnectionsPerAddress else { return false }
                    counts.byAddress[address] = held + 1
                }
                counts.total += 1
                return true
            }
        }
        /// Counts a connection from `address` gone.
        func leave(address: String?) {
            value.withLockedValue { counts in
                counts.total -= 1
                if let address, let held = counts.byAddress[address] {
                    counts.byAddress[address] = held > 1 ? held - 1 : nil
                }
            }
        }
        /// Connections open now.
        var current: Int { value.withLockedValue { $0.total } }
        /// Client addresses with a connection open now.
        var addresses: Int { value.withLockedValue { $0.byAddress.count } }
    }

    private let limits: ConnectionLimits
    private let counter: Counter
    private var counted = false
    /// The client's address, as counted.
    private var address: String?
    /// A request's body is being received.
    private var readingBody = false
    /// Requests whose response has not ended.
    private var responsesPending = 0
    private var bodyBytesThisWindow = 0
    private var timer: Scheduled<Void>?
    /// The request being received was refused: the connection closes after its answer.
    private var refusedMidBody = false
    /// The refused request's answer has been sent.
    private var refusalSent = false
    /// A request head was refused here: nothing more is read from the connection, which is closing.
    private var headRefused = false
    /// The refusal of a head that came while earlier requests' answers were pending (pipelined): sent after them.
    private var pendingRefusal: HTTPResponse.Status?
    /// Whether the client is still there (``ClientPresence``).
    let presence = ClientPresence()

    init(limits: ConnectionLimits, counter: Counter) {
        self.limits = limits
        self.counter = counter
    }

    func handlerAdded(context: ChannelHandlerContext) {
        address = ClientAddress.limitGroup(of: context.channel.remoteAddress?.ipAddress)
        guard counter.enter(address: address, limits: limits) else {
            context.close(promise: nil)
            return
        }
        counted = true
        waitForRequest(context)
    }

    /// Whether a request's `Transfer-Encoding`, if it has one, is `chunked` alone: RFC 9112 has a server refuse a
    /// request whose final coding is not chunked, and Ferry decodes no other coding. The HTTP parser stops at such a
    /// body only after it has passed the head on, so without this check the route would answer and the parser's
    /// refusal would follow as a second answer to one request.
    static func hasReadableFraming(_ fields: HTTPFields) -> Bool {
        let values = fields[values: .transferEncoding]
        guard !values.isEmpty else { return true }
        let codings = values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return codings == ["chunked"]
    }

    /// Answers a request head this connection cannot read the body of with a bare 400 (or `status`) and
    /// `Connection: close`, as the HTTP parser answers what it cannot parse, and closes the connection; with answers
    /// still pending (pipelined requests), once they have been sent.
    private func refuseHead(_ context: ChannelHandlerContext, status: HTTPResponse.Status = .badRequest) {
        headRefused = true
        cancelTimer()
        guard responsesPending == 0 else {
            pendingRefusal = status
            return
        }
        sendRefusal(context, status)
    }

    /// Writes a bare `status` answer with `Connection: close`, and closes the connection once it is sent.
    private func sendRefusal(_ context: ChannelHandlerContext, _ status: HTTPResponse.Status) {
        let head = HTTPResponse(status: status, headerFields: [.connection: "close", .contentLength: "0"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The parser's own refusal of a head refused here: the connection is closing with its answer.
        if headRefused { return }
        context.fireErrorCaught(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // HTTP clients send nothing more once they hang up; the server keeps its own side open for the answer.
        if let event = event as? ChannelEvent, event == .inputClosed { presence.left() }
        context.fireUserInboundEventTriggered(event)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        presence.left()
        cancelTimer()
        if counted {
            counted = false
            counter.leave(address: address)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if headRefused { return }
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let head):
            if !Self.hasReadableFraming(head.headerFields) {
                refuseHead(context)
                return
            }
            // Ferry is no proxy: after a CONNECT head the parser reads the connection as a tunnel, whose body never
            // ends, so a route would answer only once the body window closed it (and its 2xx would tell a proxy in
            // front that a tunnel is open). Refused at once.
            if head.method == .connect {
                refuseHead(context, status: .notImplemented)
                return
            }
            responsesPending += 1
            readingBody = true
            bodyBytesThisWindow = 0
            schedule(context, after: limits.bodyWindow) { guardHandler, context in guardHandler.bodyWindowEnded(context) }
        case .body(let buffer):
            bodyBytesThisWindow += buffer.readableBytes
        case .end:
            readingBody = false
            cancelTimer()
        }
        context.fireChannelRead(data)
        // The rest of a refused request's body has come after its answer: the connection closes now.
        if refusalSent, case .end = part { context.close(promise: nil) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where readingBody && head.status.code >= 400:
            refusedMidBody = true
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
            return
        case .end where refusedMidBody:
            responsesPending = max(0, responsesPending - 1)
            refusalSent = true
            context.write(data, promise: promise)
            context.flush()
            let linger = readingBody ? limits.bodyWindow : .zero
            schedule(context, after: linger) { _, context in context.close(promise: nil) }
            return
        case .end:
            responsesPending = max(0, responsesPending - 1)
            if responsesPending == 0, let status = pendingRefusal {
                pendingRefusal = nil
                context.write(data, promise: promise)
                sendRefusal(context, status)
                return
            }
            if responsesPending == 0 && !readingBody { waitForRequest(context) }
        default:
            break
        }
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // An answer is being sent and the connection is full: a client that has stopped taking it has a body window to
        // start again, or the connection (and the answer's buffers) go. One that takes it slowly keeps it.
        if responsesPending > 0, !readingBody, !refusalSent {
            if context.channel.isWritable {
                cancelTimer()
            } else {
                watchFullConnection(context, after: limits.bodyWindow)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    /// Checks, while the connection stays full, that the kernel still sends the answer: closes the connection once it
    /// has sent nothing for a body window.
    ///
    /// The connection's own buffer is no measure of a slow client: the kernel takes more of it only when a third of
    /// its send buffer (megabytes) has drained, so a client reading 20 KB/s could leave it full for more than 30 s and
    /// was cut off mid-download. The kernel's time since it last sent data is: a client that takes a segment in a
    /// window keeps its connection.
    private func watchFullConnection(_ context: ChannelHandlerContext, after delay: Duration) {
        schedule(context, after: delay) { guardHandler, context in
            guard !context.channel.isWritable else { return }
            guardHandler.sending(context) { sending in
                guard let sending, sending.idle < guardHandler.limits.bodyWindow else {
                    context.close(promise: nil)
                    return
                }
                guardHandler.watchFullConnection(context, after: max(guardHandler.limits.bodyWindow - sending.idle, .milliseconds(10)))
            }
        }
    }

    /// Waits for the next request for the idle timeout, counted from when the last answer's bytes left the server: the
    /// route hands its answer's end over while megabytes of it still wait in the connection's and the kernel's buffers
    /// for a slow client, and closing then left the kernel to send them for a connection it had let go (in a loaded
    /// run, the last megabyte never arrived). Until they have left, the client must take some of them each body
    /// window, as while the answer was being sent.
    private func waitForRequest(_ context: ChannelHandlerContext, after delay: Duration? = nil) {
        schedule(context, after: delay ?? limits.idleTimeout) { guardHandler, context in
            guard guardHandler.responsesPending == 0, !guardHandler.readingBody else { return }
            guardHandler.sending(context) { sending in
                let limit = sending?.unsent == true ? guardHandler.limits.bodyWindow : guardHandler.limits.idleTimeout
                guard let sending, sending.idle < limit else {
                    context.close(promise: nil)
                    return
                }
                guardHandler.waitForRequest(context, after: max(limit - sending.idle, .milliseconds(10)))
            }
        }
    }

    /// How long ago the kernel last sent data on the connection, and whether bytes of an answer still wait to be sent
    /// (in the connection's buffer or the kernel's); nil where the kernel cannot tell (`TCP_INFO` on Linux).
    private func sending(_ context: ChannelHandlerContext, _ body: @escaping ((idle: Duration, unsent: Bool)?) -> Void) {
        #if os(Linux)
        guard let provider = context.channel as? any SocketOptionProvider else { return body(nil) }
        let buffered = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        let info: EventLoopFuture<KernelTCPInfo> = provider.unsafeGetSocketOption(level: .tcp, name: .tcp_info)
        info.assumeIsolatedUnsafeUnchecked().whenComplete { result in
            body((try? result.get()).map { (.milliseconds(Int64($0.lastDataSent)), buffered > 0 || $0.notSentBytes > 0) })
        }
        #else
        body(nil)
        #endif
    }

    private func bodyWindowEnded(_ context: ChannelHandlerContext) {
        guard readingBody else { return }
        guard bodyBytesThisWindow >= limits.minimumBodyBytesPerWindow else {
            context.close(promise: nil)
            return
        }
        bodyBytesThisWindow = 0
        schedule(context, after: limits.bodyWindow) { guardHandler, context in guardHandler.bodyWindowEnded(context) }
    }

    private func schedule(
        _ context: ChannelHandlerContext, after delay: Duration,
        _ action: @escaping (ConnectionGuard, ChannelHandlerContext) -> Void
    ) {
        cancelTimer()
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        timer = loop.scheduleTask(in: TimeAmount(delay)) { [self] in
            self.timer = nil
            action(self, context)
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }
}

#if os(Linux)
/// Linux's `struct tcp_info` as the kernel fills it: Glibc's declaration ends before `tcpi_notsent_bytes` (Linux 4.6).
/// Older kernels fill less, and leave the rest zero.
struct KernelTCPInfo: Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
        = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    private func field(at offset: Int) -> UInt32 {
        withUnsafeBytes(of: words) { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }

    /// Milliseconds since data was last sent (`tcpi_last_data_sent`).
    var lastDataSent: UInt32 { field(at: 44) }
    /// Bytes written to the socket and not sent yet (`tcpi_notsent_bytes`).
    var notSentBytes: UInt32 { field(at: 144) }
}
#endif

/// Whether the client of one connection is still there: it leaves when it closes its side of the connection (or the
/// connection is gone). Work done for one request alone (a picture made for it) runs under
/// ``cancellingWhenGone(_:)`` and stops then.
final class ClientPresence: Sendable {
    private struct State {
        var gone = false
        var next = 0
        var onLeave: [Int: @Sendable () -> Void] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// The client left: what runs for it is cancelled.
    func left() {
        let handlers = state.withLockedValue { state -> [@Sendable () -> Void] in
            guard !state.gone else { return [] }
            state.gone = true
            defer { state.onLeave = [:] }
            return Array(state.onLeave.values)
        }
        for handler in handlers { handler() }
    }

    /// Runs `body`, cancelled once the client leaves (or when the caller is); nothing of it is kept once it ends.
    func cancellingWhenGone<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let work = Task { try await body() }
        let registration = state.withLockedValue { state -> Int? in
            guard !state.gone else { return nil }
            state.next += 1
            state.onLeave[state.next] = { work.cancel() }
            return state.next
        }
        if registration == nil { work.cancel() }
        defer {
            if let registration { state.withLockedValue { _ = $0.onLeave.removeValue(forKey: registration) } }
        }
        return try await withTaskCancellationHandler { try await work.value } onCancel: { work.cancel() }
    }
}

extension Channel {
    /// Whether the client of this HTTP connection is still there (its ``ConnectionGuard``'s); nil where there is no
    /// such connection (a request made in memory).
    func clientPresence() async -> ClientPresence? {
        try? await eventLoop.submit { [self] in
            try pipeline.syncOperations.handler(type: ConnectionGuard.self).presence
        }.get()
    }
}
