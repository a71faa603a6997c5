import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request whose head has been read and logged, and whose fault has been chosen.
struct ProxyRequest: Sendable {
    var head: HTTPRequestHead
    var id: Int
    var fault: Fault?
    var path: String

    /// Whether serving it involves the upstream.
    var needsUpstream: Bool {
        switch fault {
        case .status, .throttled, .stall: false
        case nil, .delay, .dropAfterRequestBytes, .dropResponseMidBody, .corruptRequestByte, .trickle, .shiftRange: true
        }
    }

    /// The request-body byte count after which the client connection is reset.
    var requestLimit: Int? {
        if case .dropAfterRequestBytes(let bytes) = fault { return max(0, bytes) }
        return nil
    }

    /// The response-body byte count after which the connection is closed.
    var responseLimit: Int? {
        if case .dropResponseMidBody(let bytes) = fault { return max(0, bytes) }
        return nil
    }

    /// Whether the client asked for `100 Continue` before sending the body.
    var expectsContinue: Bool {
        head.headers["expect"].contains { $0.lowercased() == "100-continue" }
    }
}

/// One client connection. Requests are served strictly one after the other; those that go upstream share an
/// upstream connection for as long as both sides keep it alive. Used by a single task only (not Sendable).
final class ProxyConnection {
    private let core: FaultProxyCore
    private let client: Channel
    private var requests: NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator

    init(
        core: FaultProxyCore, client: Channel,
        requests: NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator
    ) {
        self.core = core
        self.client = client
        self.requests = requests
    }

    /// Serves requests until a fault, either side or the proxy ends the connection.
    func run() async {
        do {
            var next = try await readRequest()
            while let request = next {
                if request.needsUpstream {
                    next = try await serveThroughNewUpstream(request)
                } else {
                    next = try await serveLocally(request) ? try await readRequest() : nil
                }
            }
        } catch {
            // The client, the upstream or shutdown ended the connection; nothing to report.
        }
    }

    /// Reads the next request head, logs it and picks its fault; nil when the client is done.
    private func readRequest() async throws -> ProxyRequest? {
        guard let part = try await requests.next() else { return nil }
        guard case .head(let head) = part else { throw ProxyProtocolError.unexpectedPart }
        let target = head.uri
        let path: String
        let query: String
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            query = String(target[target.index(after: mark)...])
        } else {
            path = target
            query = ""
        }
        let (id, fault) = core.begin(
            Match.Request(method: head.method.rawValue, path: path, query: query, headers: head.headers))
        if case .delay(let seconds) = fault {
            guard await wait(seconds: seconds) else {
                core.finish(id, "aborted")
                throw CancellationError()
            }
        }
        return ProxyRequest(head: head, id: id, fault: fault, path: path)
    }

    // MARK: Faults answered by the proxy

    /// Serves a request that does not involve the upstream; returns whether the connection can carry another.
    private func serveLocally(_ request: ProxyRequest) async throws -> Bool {
        defer { core.finishIfPending(request.id, "aborted") }
        switch request.fault {
        case .status(let status, let code):
            return try await answer(request, status: status, code: code)
        case .throttled(let seconds):
            return try await answer(request, status: 503, code: "SlowDown", retryAfter: seconds)
        case .stall(let seconds):
            core.finish(request.id, "stalled")
            await stall(seconds: seconds)
            return false
        case nil, .delay, .dropAfterRequestBytes, .dropResponseMidBody, .corruptRequestByte, .trickle, .shiftRange:
            preconditionFailure("\(String(describing: request.fault)) goes upstream")
        }
    }

    /// Answers with an S3 error document without forwarding, after reading and discarding the body.
    private func answer(_ request: ProxyRequest, status: Int, code: String, retryAfter: Int? = nil) async throws -> Bool {
        let head = request.head
        try await sendContinue(request)
        guard try await drainRequestBody() else { return false }
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>\(escape(code))</Code><Message>Injected by FaultProxy</Message>\
            <Resource>\(escape(request.path))</Resource><RequestId>FAULTPROXY\(request.id)</RequestId></Error>
            """
        let body = ByteBuffer(string: xml)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/xml")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "x-amz-request-id", value: "FAULTPROXY\(request.id)")
        if let retryAfter { headers.add(name: "Retry-After", value: String(retryAfter)) }
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        core.finish(request.id, String(status))
        try await write(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: status), headers: headers)))
        if head.method != .HEAD { try await write(.body(.byteBuffer(body))) }
        try await write(.end(nil))
        return head.isKeepAlive
    }

    /// Holds the connection until `seconds` pass, the client hangs up, the proxy shuts down or the task is cancelled;
    /// then closes it.
    private func stall(seconds: Double) async {
        _ = await wait(seconds: seconds)
        client.close(promise: nil)
    }

    /// Waits `seconds`; returns false at once if the client's connection closes first (the client hung up or the
    /// proxy shut down) or the task is cancelled.
    private func wait(seconds: Double) async -> Bool {
        let sleeper = Task { (try? await Task.sleep(for: .seconds(max(0, seconds)))) != nil }
        client.closeFuture.whenComplete { _ in sleeper.cancel() }
        return await withTaskCancellationHandler {
            await sleeper.value
        } onCancel: {
            sleeper.cancel()
        }
    }

    /// Answers 502 (the upstream could not be reached or closed without answering); the connection then ends.
    private func badGateway(_ request: ProxyRequest) async throws {
        core.finish(request.id, "502")
        let head = request.head
        let body = ByteBuffer(
            string: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>BadGateway</Code>"
                + "<Message>FaultProxy: upstream unavailable</Message></Error>")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/xml")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Connection", value: "close")
        try await write(.head(HTTPResponseHead(version: head.version, status: .badGateway, headers: headers)))
        if head.method != .HEAD { try await write(.body(.byteBuffer(body))) }
        try await write(.end(nil))
    }

    // MARK: Forwarding

    /// Opens an upstream connection and serves `first` and the requests after it through it, for as long as it stays
    /// usable. Returns a request that needs a new upstream connection, or nil when the client connection is done.
    private func serveThroughNewUpstream(_ first: ProxyRequest) async throws -> ProxyRequest? {
        let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            channel = try await UpstreamConnection.connect(core: core)
        } catch {
            try await upstreamUnreachable(first)
            return nil
        }
        return try await channel.executeThenClose { responses, _ in
            let upstream = UpstreamConnection(channel: channel.channel, responses: responses.makeAsyncIterator())
            var request = first
            var reused = false
            while true {
                switch try await forward(request, through: upstream, reused: reused) {
                case .close:
                    return nil
                case .retryOnNewUpstream:
                    return request
                case .keepAlive:
                    break
                }
                reused = true
                var next = try await readRequest()
                while let local = next, !local.needsUpstream {
                    guard try await serveLocally(local) else { return nil }
                    next = try await readRequest()
                }
                guard let next else { return nil }
                guard upstream.isUsable else { return next }
                request = next
            }
        }
    }

    private enum Forwarded {
        /// The connection can carry another request.
        case keepAlive
        /// The connection is done.
        case close
        /// The (reused) upstream connection failed before taking the request head; nothing was consumed.
        case retryOnNewUpstream
    }

    /// Forwards a request upstream and its response back, applying the request's drop fault if it has one. The upstream
    /// connection is marked unusable whenever it is left in an unknown state.
    private func forward(_ request: ProxyRequest, through upstream: UpstreamConnection, reused: Bool) async throws
        -> Forwarded
    {
        var head = request.head
        if case .shiftRange(let bytes) = request.fault, let range = head.headers["range"].first,
            range.hasPrefix("bytes="), let dash = range.firstIndex(of: "-"),
            let first = Int(range[range.index(range.startIndex, offsetBy: 6)..<dash])
        {
            head.headers.replaceOrAdd(name: "range", value: "bytes=\(first + bytes)\(range[dash...])")
        }
        do {
            try await upstream.write(.head(head))
        } catch {
            upstream.close()
            // A reused connection may have been closed while idle: try once more on a fresh one.
            if reused { return .retryOnNewUpstream }
            try await upstreamUnreachable(request)
            return .close
        }
        try await sendContinue(request)

        // The request body.
        let requestLimit = request.requestLimit
        var forwarded = 0
        let trickleStart = ContinuousClock.now
        var trickled = 0
        var upstreamBroken = false
        var requestComplete = false
        while !requestComplete, let part = try await requests.next() {
            switch part {
            case .head:
                throw ProxyProtocolError.unexpectedPart
            case .body(var buffer):
                if let requestLimit, forwarded + buffer.readableBytes > requestLimit {
                    if !upstreamBroken, let slice = buffer.readSlice(length: requestLimit - forwarded),
                        slice.readableBytes > 0
                    {
                        try? await upstream.write(.body(.byteBuffer(slice)))
                    }
                    core.finish(request.id, "dropped")
                    upstream.close()
                    await reset()
                    return .close
                }
                if case .corruptRequestByte(let offset) = request.fault, (forwarded..<forwarded + buffer.readableBytes).contains(offset),
                    let byte = buffer.getInteger(at: buffer.readerIndex + offset - forwarded, as: UInt8.self)
                {
                    buffer.setInteger(~byte, at: buffer.readerIndex + offset - forwarded)
                }
                forwarded += buffer.readableBytes
                if case .trickle(let rate) = request.fault {
                    // Pieces of at most a tenth of the rate, each sent when the rate allows it.
                    while !upstreamBroken, buffer.readableBytes > 0,
                        let slice = buffer.readSlice(length: min(max(1, rate / 10), buffer.readableBytes))
                    {
                        do { try await upstream.write(.body(.byteBuffer(slice))) } catch { upstreamBroken = true }
                        trickled += slice.readableBytes
                        try await Task.sleep(until: trickleStart + .seconds(Double(trickled) / Double(max(1, rate))))
                    }
                } else if !upstreamBroken {
                    do { try await upstream.write(.body(.byteBuffer(buffer))) } catch { upstreamBroken = true }
                }
            case .end(let trailers):
                if !upstreamBroken {
                    do { try await upstream.write(.end(trailers)) } catch { upstreamBroken = true }
                }
                requestComplete = true
            }
        }
        guard requestComplete else {
            // The client went away mid-body; the upstream sees the same truncation.
            upstream.close()
            core.finish(request.id, "aborted")
            return .close
        }
        if upstreamBroken { upstream.close() }

        // The response. An upstream that broke off while the body was sent may still have answered early.
        let responseLimit = request.responseLimit
        var responseHead: HTTPResponseHead?
        var sent = 0
        do {
            while let part = try await upstream.next() {
                switch part {
                case .head(let response):
                    if requestLimit != nil {
                        // The whole (short) request went through and the upstream answered: lose the answer.
                        core.finish(request.id, "dropped")
                        upstream.close()
                        await reset()
                        return .close
                    }
                    responseHead = response
                    core.finish(request.id, responseLimit == nil ? String(response.status.code) : "dropped")
                    try await write(.head(response))
                case .body(var buffer):
                    if let responseLimit, sent + buffer.readableBytes > responseLimit {
                        if let slice = buffer.readSlice(length: responseLimit - sent), slice.readableBytes > 0 {
                            try await write(.body(.byteBuffer(slice)))
                        }
                        upstream.close()
                        try? await client.close()
                        return .close
                    }
                    sent += buffer.readableBytes
                    try await write(.body(.byteBuffer(buffer)))
                case .end(let trailers):
                    guard let responseHead else { throw ProxyProtocolError.unexpectedPart }
                    if responseLimit != nil {
                        upstream.close()
                        try? await client.close()
                        return .close
                    }
                    try await write(.end(trailers))
                    if !responseHead.isKeepAlive { upstream.close() }
                    return head.isKeepAlive && responseHead.isKeepAlive ? .keepAlive : .close
                }
            }
        } catch let error as ClientWriteError {
            upstream.close()
            throw error.underlying
        } catch {
            // The upstream failed: handled below like an early close.
        }
        // The upstream closed before the end of the response.
        upstream.close()
        if requestLimit != nil {
            core.finish(request.id, "dropped")
            await reset()
        } else if responseHead == nil {
            try await badGateway(request)
        } else {
            // Mid-body: pass the cut on.
            try? await client.close()
        }
        return .close
    }

    /// Nothing reached the upstream: a drop fault still drops (the client must see a reset, not a 502); otherwise
    /// 502.
    private func upstreamUnreachable(_ request: ProxyRequest) async throws {
        if let limit = request.requestLimit {
            _ = try? await drainRequestBody(upTo: limit)
            core.finish(request.id, "dropped")
            await reset()
        } else {
            try await badGateway(request)
        }
    }

    // MARK: Client connection

    private func sendContinue(_ request: ProxyRequest) async throws {
        guard request.expectsContinue else { return }
        try await write(.head(HTTPResponseHead(version: request.head.version, status: .continue)))
    }

    /// Reads and discards the rest of the request body (giving up after `limit` bytes); returns whether its end was
    /// reached.
    private func drainRequestBody(upTo limit: Int = .max) async throws -> Bool {
        var read = 0
        while let part = try await requests.next() {
            switch part {
            case .head:
                throw ProxyProtocolError.unexpectedPart
            case .body(let buffer):
                read += buffer.readableBytes
                if read > limit { return false }
            case .end:
                return true
            }
        }
        return false
    }

    /// Writes to the client and waits until the write completed (back-pressure, and ordering before a close).
    private func write(_ part: HTTPServerResponsePart) async throws {
        do {
            try await client.writeAndFlush(part).get()
        } catch {
            throw ClientWriteError(underlying: error)
        }
    }

    /// Closes the client connection abruptly: with SO_LINGER 0, close() sends a TCP RST, as a lost network path
    /// eventually does.
    private func reset() async {
        if let provider = client as? any SocketOptionProvider {
            try? await provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        try? await client.close()
    }
}

/// The upstream side of a client connection. Used by a single task only (not Sendable).
final class UpstreamConnection {
    private let channel: Channel
    private var responses: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
    private var closed = false

    init(channel: Channel, responses: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator) {
        self.channel = channel
        self.responses = responses
    }

    /// Connects to the upstream and tracks the connection for shutdown.
    static func connect(core: FaultProxyCore) async throws
        -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
    {
        let channel = try await ClientBootstrap(group: core.group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .connect(host: core.upstreamHost, port: core.upstreamPort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        guard core.register(channel.channel) else {
            // The proxy is shutting down. Closed through its wrapper, which finishes the wrapper's writer: one dropped
            // unfinished stops the process (NIOAsyncWriter's deinit).
            try? await channel.executeThenClose { _, _ in }
            throw CancellationError()
        }
        return channel
    }

    /// Whether another request can be sent.
    var isUsable: Bool { !closed && channel.isActive }

    /// Writes and waits until the write completed.
    func write(_ part: HTTPClientRequestPart) async throws {
        try await channel.writeAndFlush(part).get()
    }

    /// The next response part; nil once the upstream closed.
    func next() async throws -> HTTPClientResponsePart? {
        try await responses.next()
    }

    func close() {
        closed = true
        channel.close(promise: nil)
    }
}

/// A write to the client failed: the client is gone.
private struct ClientWriteError: Error {
    var underlying: any Error
}

private enum ProxyProtocolError: Error {
    case unexpectedPart
}

private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        .replacingOccurrences(of: ">", with: "&gt;")
}
