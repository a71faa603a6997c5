import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` with an interim `100 Continue` only when the application asks for the body, which
/// it does once the request is authenticated and allowed: a badly signed client learns of its 403 before it sends a
/// byte of its body (S3 behaves the same).
///
/// When a final response leaves for such a request without the 100 having been sent, the client may not send its
/// body at all, so the connection is marked `Connection: close` and closed after the response; nothing waits for a
/// body that will not come.
///
/// An HTTP/1.0 request gets no informational response at all (RFC 9110 §15.2), neither a 100 nor the resumable-upload
/// draft's 104: a proxy speaking HTTP/1.0 to Ferry (nginx's default) could take one for the final answer. Its
/// connection is closed after the answer unless it asked `Connection: keep-alive` (RFC 9112 §9.3): a client that
/// reads the answer to the end of the connection does not wait for the idle timeout.
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The current request expects a 100 that has not been sent.
    private var pending = false
    /// The response to such a request is going out: close once it is written.
    private var closeAfterResponse = false
    private var context: ChannelHandlerContext?
    /// The current request came as HTTP/1.0 (told by the ``ConnectionGuard`` as it passes the request on).
    var http10 = false
    /// The current request lets its connection stay open after the answer (told with ``http10``).
    var keepAlive = true

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            pending = head.headerFields[.expect]?.lowercased() == "100-continue"
        }
        context.fireChannelRead(data)
    }

    /// Sends the 100 the current request waits for, if it still waits. Call on the channel's event loop.
    func sendContinue() {
        guard pending, !http10, let context else { return }
        pending = false
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
    }

    /// Sends an informational response ahead of the final one (the resumable-upload draft's `104`). Call on the
    /// channel's event loop.
    func sendInformational(_ head: HTTPResponse) {
        guard let context, !http10, head.status.kind == .informational else { return }
        context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.kind != .informational && pending:
            pending = false
            closeAfterResponse = true
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .head(var head) where head.status.kind != .informational && http10 && !keepAlive:
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end where closeAfterResponse:
            closeAfterResponse = false
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            let channel = context.channel
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            context.write(data, promise: written)
        default:
            context.write(data, promise: promise)
        }
    }
}

/// A request body that lets its client send it (`100 Continue`) when it is first read, not before: a refusal the
/// handler makes before reading (a missing bucket, a quota the declared length would pass) leaves without the client
/// having sent a byte of its body.
struct ContinueOnFirstRead<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let sendContinue: @Sendable () async -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        var sendContinue: (@Sendable () async -> Void)?

        mutating func next() async throws -> ByteBuffer? {
            if let send = sendContinue {
                sendContinue = nil
                await send()
            }
            return try await base.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), sendContinue: sendContinue)
    }
}

extension Channel {
    /// Lets a request that sent `Expect: 100-continue` go on with its body (see ``ExpectContinueHandler``).
    func sendContinue() async {
        _ = try? await pipeline.handler(type: ExpectContinueHandler.self).map { $0.sendContinue() }.get()
    }

    /// Sends an informational response (a `1xx`) to the current request ahead of its final response.
    func sendInformational(_ head: HTTPResponse) async {
        _ = try? await pipeline.handler(type: ExpectContinueHandler.self).map { $0.sendInformational(head) }.get()
    }
}
