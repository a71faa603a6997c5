import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// How long a connection may wait and how slowly a body may come before the server lets go of the connection, and how
/// many connections it holds at once.
public struct ConnectionLimits: Sendable, Hashable {
    /// Longest wait for a request to begin on an open connection (a new one, or between requests of a kept-alive one),
    /// which also bounds how long a request's headers may take to arrive. Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// While a request body is being received, each window of this length must bring at least
    /// ``minimumBodyBytesPerWindow`` bytes, or the connection is closed and nothing of the body is kept. A window
    /// counts only the time the server was asking for the body: while the server is busy with what it has read (a slow
    /// store), the client is not waited for, and its window does not run. While an
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
/// A request answered before its body ended (refused, or by a route that reads no body) does not get the rest of its
/// body read: its answer says `Connection: close`, and the connection closes once the answer is sent and the body has
/// ended, or a body window after the answer (as a web server lingers: time for a client that sends its whole body
/// before reading to get the answer rather than a reset). Otherwise a client refused at its headers (unsigned, say)
/// could hold the connection for as long as it trickled a body, and a few such clients every connection the server
/// takes; now it holds one no longer than an idle connection.
///
/// One request at a time, one answer per request. Requests a client sends before the answer to the one in progress
/// (pipelined) are held here, and the connection is not read further, until that answer has ended: every handler
/// behind this one, and the state kept here, then speaks of the request being answered, not of one read ahead. An
/// answer written when no request waits for one (the HTTP server answers 400 to a body the parser refuses, though
/// the request was answered already) is dropped and the connection closed once what was answered is sent: passed on,
/// it would reach the client, or a proxy's next client on a reused connection, as the answer to a later request.
/// Only a request head the parser refuses is owed that 400.
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
    /// A request has been passed on and its answer has not ended.
    private var answering = false
    /// The request being answered has been read to its end.
    private var requestEnded = false
    /// The request being answered has had the head of its answer.
    private var answerStarted = false
    /// The request being answered asked `Connection: close`: its answer says so.
    private var closeAsked = false
    /// The parser refused a request head, for this reason: the application's 400 for it is the answer it is owed, and
    /// says why.
    private var owedParserAnswer: ParserRefusal?
    /// An answer that no request waits for is being dropped.
    private var droppingAnswer = false
    /// What the client sent after the request being answered, in order, passed on once its answer has ended.
    private var held: [HeldEvent] = []
    /// The channel asked for a read while requests were held: asked again once they have been passed on.
    private var readWanted = false
    /// The last write passed on, so that the connection closes only once it has been sent.
    private var lastWrite: EventLoopFuture<Void>?
    /// Each request head's HTTP version and keep-alive, in the order the parser read them (told by a
    /// ``VersionObserver`` ahead of the HTTP/1 codec, which drops the version).
    fileprivate var versions: [(http10: Bool, keepAlive: Bool)] = []
    /// The handler told each request's version as it is passed on.
    private weak var expectContinue: ExpectContinueHandler?
    private var bodyBytesThisWindow = 0
    /// When the server last asked the connection for more (a read passed on) and nothing has come since; nil while it
    /// is not asking.
    private var askingSince: NIODeadline?
    /// How long the server has asked for the body in the current body window, up to ``askingSince``.
    private var askedThisWindow: TimeAmount = .zero
    private var timer: Scheduled<Void>?
    /// The request being received was refused: the connection closes after its answer.
    private var refusedMidBody = false
    /// The refused request's answer has been sent.
    private var refusalSent = false
    /// A request head was refused here: nothing more is read from the connection, which is closing.
    private var headRefused = false
    /// Whether the client is still there (``ClientPresence``).
    let presence = ClientPresence()
    /// Answers waiting for the connection to take more (``Channel/answerWritable()``).
    private var writableWaiters: [EventLoopPromise<Void>] = []

    /// Told the status of each answer made here or by the HTTP server before any route took the request (a head the
    /// parser or this guard refuses), which the metrics middleware never sees.
    private let unrouted: @Sendable (Int) -> Void

    init(limits: ConnectionLimits, counter: Counter, unrouted: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.limits = limits
        self.counter = counter
        self.unrouted = unrouted
    }

    /// What came from the client after the request being answered.
    private enum HeldEvent {
        case part(HTTPRequestPart)
        case error(any Error)
        case inputClosed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The version is gone once the codec has made the request an HTTPRequest: it is read ahead of the codec.
        if let codec = try? context.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? context.pipeline.syncOperations.addHandler(VersionObserver(owner: self), position: .before(codec))
        }
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
    /// `Connection: close`, as the HTTP parser answers what it cannot parse, and closes the connection. (A head is
    /// looked at only once the answers before it have ended.)
    private func refuseHead(_ context: ChannelHandlerContext, status: HTTPResponse.Status = .badRequest) {
        unrouted(status.code)
        headRefused = true
        held = []
        cancelTimer()
        sendRefusal(context, status)
    }

    /// Closes the connection once the writes passed on so far have been sent.
    private func closeAfterWrites(_ context: ChannelHandlerContext) {
        context.flush()
        let channel = context.channel
        guard let lastWrite else { return channel.close(promise: nil) }
        lastWrite.whenComplete { _ in channel.close(promise: nil) }
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
        if holding {
            held.append(.error(error))
            return
        }
        passOn(error, context)
    }

    private func passOn(_ error: any Error, _ context: ChannelHandlerContext) {
        if let error = error as? HTTPParserError {
            if readingBody && answerStarted {
                // The body of a request that has its answer is malformed: no second answer, the connection ends.
                closeAfterWrites(context)
                return
            }
            if !readingBody { owedParserAnswer = ParserRefusal(error) }
        }
        context.fireErrorCaught(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // HTTP clients send nothing more once they hang up; the server keeps its own side open for the answer.
            presence.left()
            if holding {
                // Told to the server after the requests that came before it.
                held.append(.inputClosed)
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Whether what comes from the client now waits: the request being answered has been read to its end and its
    /// answer has not ended, or earlier events wait already.
    private var holding: Bool { !held.isEmpty || answering && requestEnded }

    func read(context: ChannelHandlerContext) {
        // Requests are held: the connection is not read further until they have been passed on.
        guard held.isEmpty else {
            readWanted = true
            return
        }
        passOnRead(context)
    }

    /// Asks the connection for more, and counts the time from now until something comes as time the client was asked
    /// for the body (``bodyWindowEnded(_:)``).
    private func passOnRead(_ context: ChannelHandlerContext) {
        if askingSince == nil { askingSince = .now() }
        context.read()
    }

    /// Counts the time the server asked for bytes up to now, and stops counting until it asks again.
    private func stopAsking() {
        guard let since = askingSince else { return }
        askedThisWindow = askedThisWindow + (.now() - since)
        askingSince = nil
    }

    /// Passes on what was held once the answer before it has ended, up to the next request's end.
    private func passOnHeld(_ context: ChannelHandlerContext) {
        var passed = false
        while !held.isEmpty, !(answering && requestEnded), !headRefused, !refusalSent {
            switch held.removeFirst() {
            case .part(let part):
                passOn(part, context)
                passed = true
            case .error(let error):
                passOn(error, context)
            case .inputClosed:
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            }
        }
        if passed { context.fireChannelReadComplete() }
        if held.isEmpty, readWanted {
            readWanted = false
            passOnRead(context)
        }
    }

    /// Completes `promise` once the connection is writable again, or gone. Call on the event loop.
    func whenWritable(_ promise: EventLoopPromise<Void>) {
        writableWaiters.append(promise)
    }

    private func resumeWriters() {
        let waiters = writableWaiters
        writableWaiters = []
        for waiter in waiters { waiter.succeed(()) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        resumeWriters()
        presence.left()
        cancelTimer()
        if counted {
            counted = false
            counter.leave(address: address)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        stopAsking()
        if headRefused { return }
        let part = unwrapInboundIn(data)
        if holding {
            held.append(.part(part))
            return
        }
        passOn(part, context)
    }

    private func passOn(_ part: HTTPRequestPart, _ context: ChannelHandlerContext) {
        switch part {
        case .head(var head):
            let version = versions.isEmpty ? (http10: false, keepAlive: true) : versions.removeFirst()
            // An HTTP/1.0 message with Transfer-Encoding has faulty framing (RFC 9112 §6.1): a hop that speaks
            // HTTP/1.0 may have framed it otherwise.
            if !Self.hasReadableFraming(head.headerFields) || version.http10 && head.headerFields[.transferEncoding] != nil {
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
            answering = true
            requestEnded = false
            answerStarted = false
            closeAsked = head.headerFields[values: .connection].contains { value in
                value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
            }
            // Said as the HTTP server looks for it (`close` alone), however the client wrote it (`Close`, `TE, close`).
            if closeAsked { head.headerFields[.connection] = "close" }
            readingBody = true
            startBodyWindow()
            schedule(context, after: limits.bodyWindow) { guardHandler, context in guardHandler.bodyWindowEnded(context) }
            if expectContinue == nil {
                expectContinue = try? context.pipeline.syncOperations.handler(type: ExpectContinueHandler.self)
            }
            expectContinue?.http10 = version.http10
            expectContinue?.keepAlive = version.keepAlive
            if version.http10, !version.keepAlive {
                // Said as HTTP/1.1 says it, so the server ends the connection after the answer as it does for one:
                // its output half first, the rest when the client closes or the linger ends.
                head.headerFields[.connection] = "close"
                closeAsked = true
            }
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        case .body(let buffer):
            bodyBytesThisWindow += buffer.readableBytes
        case .end:
            readingBody = false
            requestEnded = true
            cancelTimer()
            if !answering && !refusalSent {
                // Answered before its body ended: the wait for the next request starts now.
                waitForRequest(context)
            } else if answering, answerStarted, !context.channel.isWritable {
                // An answer under way that the connection holds full: watched from now as any answer is (it filled
                // while the body came, when the body's windows watched the connection).
                watchFullConnection(context, after: limits.bodyWindow)
            }
        }
        context.fireChannelRead(wrapInboundOut(part))
        // The rest of a refused request's body has come after its answer: the connection closes now.
        if refusalSent, case .end = part { context.close(promise: nil) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var part = unwrapOutboundIn(data)
        if case .head(var head) = part, head.status.kind != .informational {
            if answering && !answerStarted {
                answerStarted = true
                if closeAsked { head.headerFields[.connection] = "close" }
            } else if let refusal = owedParserAnswer {
                owedParserAnswer = nil
                answering = true
                answerStarted = true
                head.headerFields[.connection] = "close"
                if head.status == .badRequest {
                    // The server's bare 400 says why: the client sees a limit it can keep to, not a mystery.
                    head.status = refusal.status
                    let body = context.channel.allocator.buffer(string: refusal.message + "\n")
                    head.headerFields[.contentType] = "text/plain; charset=utf-8"
                    head.headerFields[.contentLength] = String(body.readableBytes)
                    unrouted(head.status.code)
                    forward(.head(head), context, nil)
                    forward(.body(body), context, promise)
                    return
                }
                unrouted(head.status.code)
            } else {
                droppingAnswer = true
            }
            part = .head(head)
        }
        if droppingAnswer {
            // One request, one answer: this one answers nothing the client asked and is not sent.
            promise?.succeed(())
            if case .end = part {
                droppingAnswer = false
                closeAfterWrites(context)
            }
            return
        }
        switch part {
        case .head(var head) where readingBody && head.status.kind != .informational:
            // Answered before its body has come (a refusal, or a route that reads no body): the rest is not read as a
            // request, the answer says the connection ends, and it does once the body has come or a window has passed.
            // A proxy in front then does not hand the connection to another client.
            refusedMidBody = true
            head.headerFields[.connection] = "close"
            forward(.head(head), context, promise)
        case .end where refusedMidBody:
            answering = false
            refusalSent = true
            forward(part, context, promise)
            if readingBody {
                context.flush()
                schedule(context, after: limits.bodyWindow) { _, context in context.close(promise: nil) }
            } else {
                // Closed once the answer has been sent, not while its last bytes wait to be; a client that stops taking
                // them is let go as between requests.
                closeAfterWrites(context)
                waitForRequest(context)
            }
        case .end:
            answering = false
            forward(part, context, promise)
            if !readingBody { waitForRequest(context) }
            passOnHeld(context)
        default:
            forward(part, context, promise)
        }
    }

    /// Writes a part of an answer, remembering the write (``closeAfterWrites(_:)``).
    private func forward(_ part: HTTPResponsePart, _ context: ChannelHandlerContext, _ promise: EventLoopPromise<Void>?) {
        let written = promise ?? context.eventLoop.makePromise()
        lastWrite = written.futureResult
        context.write(wrapOutboundOut(part), promise: written)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { resumeWriters() }
        // An answer is being sent and the connection is full: a client that has stopped taking it has a body window to
        // start again, or the connection (and the answer's buffers) go. One that takes it slowly keeps it.
        if answering, !readingBody, !refusalSent {
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
            guard !guardHandler.answering, !guardHandler.readingBody else { return }
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

    /// Starts a body window: its bytes and the time the server asked for them are counted from now.
    private func startBodyWindow() {
        bodyBytesThisWindow = 0
        askedThisWindow = .zero
        if askingSince != nil { askingSince = .now() }
    }

    /// Judges the body window that ends now. A window is the time the server asked for the body, not the time on the
    /// clock: a server that reads nothing for a while (its store is slow to take what it has read, so it reads no more
    /// of the body until the store catches up) has not been waiting for the client, whose bytes wait in the
    /// connection's buffers. Until the server has asked for a whole window, the judgement waits; then a body that
    /// brought less than the minimum in it was trickling, and the connection closes.
    ///
    /// A request answered before its body ended is timed by the clock: no route reads the rest of its body, so the
    /// server would never ask for it, and a client that stopped sending it and taking the answer would hold the
    /// connection for ever.
    private func bodyWindowEnded(_ context: ChannelHandlerContext) {
        guard readingBody else { return }
        let window = TimeAmount(limits.bodyWindow)
        let asked = askedThisWindow + (askingSince.map { .now() - $0 } ?? .zero)
        guard asked >= window || refusedMidBody else {
            // While the server is not asking, the window cannot end sooner than its rest after it asks again: looked
            // at again a quarter window on at the soonest, not at once.
            let soonest: TimeAmount = askingSince == nil ? .nanoseconds(window.nanoseconds / 4) : .milliseconds(10)
            let rest = max(window - asked, soonest)
            schedule(context, after: Duration(rest)) { guardHandler, context in guardHandler.bodyWindowEnded(context) }
            return
        }
        guard bodyBytesThisWindow >= limits.minimumBodyBytesPerWindow else {
            context.close(promise: nil)
            return
        }
        startBodyWindow()
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
    /// Waits until the connection takes more of an answer: until what was handed to it so far has reached it and its
    /// buffer has drained below its low-water mark, or it is gone. An answer that reads its next chunk only then holds
    /// one chunk for a client that stops reading, whatever the object's size.
    func answerWritable() async {
        let wait = try? await eventLoop.submit { [self] () -> EventLoopFuture<Void>? in
            // Submitted after the writes handed over before it: they have reached the connection's buffer now.
            guard isActive, !isWritable, let guardHandler = try? pipeline.syncOperations.handler(type: ConnectionGuard.self)
            else { return nil }
            let promise = eventLoop.makePromise(of: Void.self)
            guardHandler.whenWritable(promise)
            return promise.futureResult
        }.get()
        try? await wait?.get()
    }

    /// Whether the client of this HTTP connection is still there (its ``ConnectionGuard``'s); nil where there is no
    /// such connection (a request made in memory).
    func clientPresence() async -> ClientPresence? {
        try? await eventLoop.submit { [self] in
            try pipeline.syncOperations.handler(type: ConnectionGuard.self).presence
        }.get()
    }
}

/// Tells a ``ConnectionGuard`` each request head's HTTP version and whether it keeps its connection alive, which it
/// cannot see behind the HTTP/1 codec.
private final class VersionObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    private weak var owner: ConnectionGuard?

    init(owner: ConnectionGuard) {
        self.owner = owner
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            owner?.versions.append((head.version.major == 1 && head.version.minor == 0, head.isKeepAlive))
        }
        context.fireChannelRead(data)
    }
}

/// What the answer to a request head the HTTP parser refused says: 431 for a head over the parser's limits (the path,
/// query and headers together over 80 KiB, or more than 1,000 header fields), else 400, with a line of plain text
/// naming the fault (the parser's category, never the request's bytes). The head was not read, so no dialect's
/// envelope applies.
struct ParserRefusal: Sendable, Equatable {
    /// The status of the answer.
    var status: HTTPResponse.Status
    /// The line of text the answer's body holds.
    var message: String

    /// The refusal of a head for `error`.
    init(_ error: HTTPParserError) {
        if case .headerOverflow = error {
            status = .init(code: 431, reasonPhrase: "Request Header Fields Too Large")
            message =
                "Request header fields too large: the request line and headers together may hold at most 80 KiB, "
                + "in at most 1,000 header fields; send a shorter path or query, or fewer or shorter headers."
        } else {
            status = .badRequest
            message = "Bad request: the request line or headers could not be parsed (\(error.debugDescription))."
        }
    }
}
