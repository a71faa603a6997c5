import Foundation
import NIOCore

/// Sizes a connection's send buffer (`SO_SNDBUF`) to its link: about two seconds of what the connections to the same
/// server drain while their buffers are full, from ``smallest`` to ``AsyncHTTPClientTransport/sendBufferSize``.
///
/// On a slow link with deep queues (a mobile network's), each connection's bytes in flight wait in one queue, so a
/// buffer of fixed size put seconds of queueing in front of every byte: at 20 KB/s, three connections holding 512 KiB
/// each queued 75 s, parts went unanswered past their time limits, and progress ran megabytes ahead of the server. The
/// connections to one server share one size, from the fastest of them, so they hold equal shares of the queue and
/// drain at equal rates (a starved connection with a smaller buffer would stay starved). A connection starts with the
/// size last measured for its server, or ``opening``, and its measure is taken between two moments its buffers are
/// full (the channel turns unwritable): the bytes written in between are what the link drained.
///
/// Runs on the connection's event loop only, as the first handler of its pipeline (it sees the bytes that reach the
/// socket, after TLS).
final class SendWindow: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// The least a buffer is set to (Linux keeps twice this): 32 KiB.
    static let smallest = 32 * 1024
    /// A new connection's buffer when its server has no measure yet: 64 KiB (a fast link grows it after the first
    /// measure, two seconds in).
    static let opening = 64 * 1024
    /// Shortest time a measure covers.
    static let measureTime = TimeAmount.seconds(2)

    private let server: String
    private let sizes: SendSizes
    private var size = 0
    /// When the last measure started (the channel turned unwritable), what has been written since, and the buffer's
    /// size then.
    private var start: NIODeadline?
    private var written = 0
    private var sizeAtStart = 0
    /// Whether the first measure (from the connection's opening, or after a pause) is over.
    private var measuring = false
    /// Since when the connection could take bytes and was given none, if it can.
    private var quiet: NIODeadline?

    init(server: String, sizes: SendSizes = .shared) {
        self.server = server
        self.sizes = sizes
    }

    /// Adds a window to `channel`'s pipeline, keyed by the server it is connected to.
    @Sendable static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.submit {
            let server = channel.remoteAddress.map { "\($0)" } ?? ""
            try channel.pipeline.syncOperations.addHandler(SendWindow(server: server), position: .first)
        }.recover { _ in }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        resize(to: sizes.size(for: server), context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sizes.forget(ObjectIdentifier(self), server: server)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let now = NIODeadline.now()
        if let quiet, now - quiet > .seconds(1) {
            // Nothing was written for a while though the connection could take it (an answer awaited, or no request):
            // a measure across that time would take the pause for a slow link.
            start = nil
            measuring = false
        }
        quiet = context.channel.isWritable ? now : nil
        written += unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            quiet = .now()
        } else {
            quiet = nil
            full(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// The connection's buffers are full: what was written since the last time they were is what the link drained
    /// (less what a smaller buffer no longer holds). The first measure after the connection opened or paused is not
    /// kept: the socket took bytes as fast as they came until it was full.
    private func full(context: ChannelHandlerContext, now: NIODeadline = .now()) {
        guard let start else {
            begin(now)
            return
        }
        let elapsed = now - start
        guard elapsed >= Self.measureTime else { return }
        if measuring {
            let drained = written + 2 * (sizeAtStart - size)
            let perSecond = Int(Double(max(drained, 0)) / (Double(elapsed.nanoseconds) / 1e9))
            sizes.note(perSecond, from: ObjectIdentifier(self), server: server, now: now)
        }
        measuring = true
        let level = size
        resize(to: sizes.size(for: server), context: context)
        begin(now, level: level)
    }

    /// Starts a measure at `now`, with the socket holding what a buffer of `level` bytes holds.
    private func begin(_ now: NIODeadline, level: Int? = nil) {
        start = now
        written = 0
        sizeAtStart = level ?? size
    }

    private func resize(to next: Int, context: ChannelHandlerContext) {
        guard next != size else { return }
        size = next
        let option = ChannelOptions.socketOption(.so_sndbuf)
        try? context.channel.syncOptions?.setOption(option, value: SocketOptionValue(next))
    }
}

/// The send buffer size of the connections to each server (address and port), from what each of them last drained.
///
/// `@unchecked Sendable`: `servers` is only touched while holding `lock`.
final class SendSizes: @unchecked Sendable {
    /// Sizes shared by the process's connections.
    static let shared = SendSizes()

    private struct Server {
        var drains: [ObjectIdentifier: (perSecond: Int, at: NIODeadline)] = [:]
        var size = SendWindow.opening
    }

    private let lock = NSLock()
    private var servers: [String: Server] = [:]
    let largest: Int

    init(largest: Int = AsyncHTTPClientTransport.sendBufferSize) {
        self.largest = largest
    }

    /// The size for a connection to `server`: two seconds of the fastest drain its connections measured in the last
    /// ten seconds, rounded up to 4 KiB, or the last size, or ``SendWindow/opening``.
    func size(for server: String) -> Int {
        lock.withLock { servers[server]?.size ?? SendWindow.opening }
    }

    /// Records that the connection `id` to `server` drained `perSecond` bytes a second.
    func note(_ perSecond: Int, from id: ObjectIdentifier, server: String, now: NIODeadline) {
        lock.withLock {
            if servers[server] == nil, servers.count >= 256 { servers.removeAll() }
            var entry = servers[server] ?? Server()
            entry.drains[id] = (perSecond, now)
            entry.drains = entry.drains.filter { now - $0.value.at <= .seconds(10) }
            let fastest = entry.drains.values.map(\.perSecond).max() ?? 0
            let twoSeconds = (min(fastest, largest) * 2 + 4095) / 4096 * 4096
            entry.size = min(largest, max(SendWindow.smallest, twoSeconds))
            servers[server] = entry
        }
    }

    /// The connection `id` to `server` closed.
    func forget(_ id: ObjectIdentifier, server: String) {
        lock.withLock { _ = servers[server]?.drains.removeValue(forKey: id) }
    }
}
