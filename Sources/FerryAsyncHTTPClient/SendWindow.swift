import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Sizes a connection's send buffer (`SO_SNDBUF`) to its link: two seconds of what the connections to the same server
/// drain while their buffers are full, from ``smallest`` to ``AsyncHTTPClientTransport/sendBufferSize``; and has the
/// kernel close a connection whose sent bytes, or keepalive probes, go unacknowledged for ``deadLinkTimeout``.
///
/// On a slow link with deep queues (a mobile network's), each connection's bytes in flight wait in one queue, so a
/// buffer of fixed size put seconds of queueing in front of every byte: at 20 KB/s, three connections holding 512 KiB
/// each queued over a minute, the next connection's attempt waited behind it past its time limit, and progress ran
/// megabytes ahead of the server. The connections to one server (address and port) share one size, from the fastest
/// of them. A connection starts with the size last measured for its server in the last minute, or ``opening``.
///
/// The drain is measured while the connection's buffers hold more than the connection takes at once (the channel is
/// unwritable: the link, not the body, sets the pace), from the bytes the server acknowledged then (the kernel's
/// count, `TCP_INFO`), over at least ``measureTime`` of such time, or eight buffers' worth on a fast link. Where the
/// kernel does not count them (not Linux), the buffer keeps the largest size. Linux keeps twice the size set, and
/// caps it at `net.core.wmem_max`.
///
/// Runs on the connection's event loop only, as the first handler of its pipeline.
final class SendWindow: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny

    /// The least a buffer is set to: 32 KiB.
    static let smallest = 32 * 1024
    /// A new connection's buffer when its server has no recent measure: 32 KiB, so that the first connections to a
    /// slow link do not queue so much that the next one's attempt waits past its time limit (a fast link grows it
    /// within its first measure).
    static let opening = 32 * 1024
    /// Shortest busy time a measure covers (unless eight buffers' worth drained sooner): two seconds.
    static let measureTime = TimeAmount.seconds(2)
    /// How long sent bytes may go unacknowledged before the kernel closes the connection (`TCP_USER_TIMEOUT`): 120 s. A
    /// connection that died (an address translation forgotten, a network gone) fails its request then, even while
    /// other requests to the service keep moving (which let its body go without moving, ``BodyWatch``); one that a
    /// slow link starves still has bytes acknowledged now and then, and goes on.
    static let deadLinkTimeout = TimeAmount.seconds(120)
    /// How long a connection goes without a byte from the server before the kernel probes it (TCP keepalive, then
    /// every ``keepaliveInterval``): 30 s. A link that died once the request was acknowledged, while its answer is
    /// awaited, has nothing in flight for ``deadLinkTimeout`` to judge; its probes are, and go unacknowledged, so the
    /// connection closes about ``deadLinkTimeout`` after the server was last heard (Linux lets the user timeout decide
    /// when probes fail), not after the answer's idle limit (``AsyncHTTPClientTransport/idleReadTimeout``). A server
    /// that is alive acknowledges the probes however long it takes to answer.
    static let keepaliveIdle = 30
    /// Seconds between keepalive probes: 10.
    static let keepaliveInterval = 10

    private let server: String
    private let sizes: SendSizes
    private let clock: () -> NIODeadline
    /// Bytes the server acknowledged of a channel, as the kernel counts them.
    private let acked: (any Channel) -> UInt64?
    /// The size the socket's buffer is set to (0 before the connection's first).
    private(set) var size = 0
    /// Since when the channel is unwritable, and the bytes acknowledged then.
    private var edge: (at: NIODeadline, acked: UInt64)?
    /// The busy time and the bytes acknowledged in it, of the measure under way.
    private var busy: (time: TimeAmount, acked: UInt64) = (.zero, 0)
    /// Whether every measure counts. The first after the connection opened or paused counts only if it finds a link
    /// at least eight times faster than the buffer's size asks (a fast link): it includes the time the link took to
    /// come up to speed, and the bytes that filled the server's receive buffer at once.
    private var settled = false
    /// Since when the connection could take bytes and was given none, if it can.
    private var quiet: NIODeadline?

    /// A window for a connection to `server`, sized by `sizes`; `acked` reads the bytes the kernel counts acknowledged
    /// of a channel (nil where it cannot be read).
    init(
        server: String, sizes: SendSizes = .shared, clock: @escaping () -> NIODeadline = { .now() },
        acked: @escaping (any Channel) -> UInt64? = SendWindow.kernelAcked
    ) {
        self.server = server
        self.sizes = sizes
        self.clock = clock
        self.acked = acked
    }

    /// Adds a window to `channel`'s pipeline, keyed by the server it is connected to, and sets the connection's
    /// ``deadLinkTimeout`` and keepalive probes (``keepaliveIdle``) where the platform has them.
    @Sendable static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.submit {
            let server = channel.remoteAddress.map { "\($0)" } ?? ""
            try channel.pipeline.syncOperations.addHandler(SendWindow(server: server), position: .first)
            #if os(Linux)
            let userTimeout = ChannelOptions.Types.SocketOption(
                level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_USER_TIMEOUT))
            let milliseconds = SocketOptionValue(deadLinkTimeout.nanoseconds / 1_000_000)
            try? channel.syncOptions?.setOption(userTimeout, value: milliseconds)
            let idle = ChannelOptions.Types.SocketOption(
                level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPIDLE))
            let interval = ChannelOptions.Types.SocketOption(
                level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPINTVL))
            try? channel.syncOptions?.setOption(idle, value: SocketOptionValue(keepaliveIdle))
            try? channel.syncOptions?.setOption(interval, value: SocketOptionValue(keepaliveInterval))
            try? channel.syncOptions?.setOption(.socketOption(.so_keepalive), value: 1)
            #endif
        }.recover { _ in }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let counted = acked(context.channel) != nil
        resize(to: counted ? sizes.size(for: server, now: clock()) : sizes.largest, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sizes.forget(ObjectIdentifier(self), server: server)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let now = clock()
        if let quiet, now - quiet > .seconds(1) {
            // Nothing was written for a while though the connection could take it (an answer awaited, or no request):
            // the link may start slowly again.
            settled = false
            busy = (.zero, 0)
        }
        quiet = context.channel.isWritable ? now : nil
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let now = clock()
        if context.channel.isWritable {
            quiet = now
            if let edge { busyEnded(since: edge, now: now, context: context) }
            edge = nil
        } else {
            quiet = nil
            edge = acked(context.channel).map { (now, $0) }
        }
        context.fireChannelWritabilityChanged()
    }

    /// The channel was unwritable from `edge` until `now`: adds that time and what was acknowledged in it to the
    /// measure, and ends the measure once it covers enough. A buffer shrinks by half at most per measure: what it
    /// holds beyond its new size must cross the link before the connection takes another byte.
    private func busyEnded(
        since edge: (at: NIODeadline, acked: UInt64), now: NIODeadline, context: ChannelHandlerContext
    ) {
        guard let acked = acked(context.channel), acked >= edge.acked, now > edge.at else { return }
        busy.time = busy.time + (now - edge.at)
        busy.acked += acked - edge.acked
        let drained = Int(clamping: busy.acked)
        guard busy.time >= Self.measureTime || drained >= 8 * size else { return }
        let perSecond = Int(min(Double(drained) / (Double(busy.time.nanoseconds) / 1e9), Double(Int32.max)))
        // Not round trips: past the kernel's window for its least round trip (300 s with BBR), that includes the
        // queue these buffers make, and a size that followed it grew the queue it measured.
        let target = sizes.size(draining: perSecond)
        let counts = settled || target >= 8 * size
        settled = true
        busy = (.zero, 0)
        guard counts else { return }
        sizes.note(target, from: ObjectIdentifier(self), server: server, now: now)
        resize(to: max(sizes.size(for: server, now: now), size / 2), context: context)
    }

    private func resize(to next: Int, context: ChannelHandlerContext) {
        guard next != size else { return }
        size = next
        let option = ChannelOptions.socketOption(.so_sndbuf)
        try? context.channel.syncOptions?.setOption(option, value: SocketOptionValue(next))
    }

    /// The bytes acknowledged of `channel`'s socket as the kernel counts them (`tcpi_bytes_acked`), where it does.
    static func kernelAcked(_ channel: any Channel) -> UInt64? {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        var read: UInt64?
        let info: EventLoopFuture<TCPInfoHead> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_INFO))
        // On the channel's loop the option is read at once, and the callback runs before this returns.
        info.assumeIsolated().whenSuccess { read = $0.words.15 }
        guard let read, read > 0 else { return nil }
        return read
        #else
        return nil
        #endif
    }
}

#if os(Linux)
/// The first 128 bytes of Linux's `struct tcp_info`, whose last word (`words.15`, byte 120) is `tcpi_bytes_acked`
/// (Linux 4.1 and later; an older kernel fills less, and it reads 0).
struct TCPInfoHead: Sendable {
    var words: (
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
    ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
}
#endif

/// The send buffer size of the connections to each server (address and port), from what each of them last drained.
///
/// `@unchecked Sendable`: `servers` is only touched while holding `lock`.
final class SendSizes: @unchecked Sendable {
    /// Sizes shared by the process's connections.
    static let shared = SendSizes()

    private struct Server {
        var targets: [ObjectIdentifier: (size: Int, at: NIODeadline)] = [:]
        var size = SendWindow.opening
        var at: NIODeadline
    }

    private let lock = NSLock()
    private var servers: [String: Server] = [:]
    /// The largest size.
    let largest: Int

    init(largest: Int = AsyncHTTPClientTransport.sendBufferSize) {
        self.largest = largest
    }

    /// The size for a connection to `server`: the largest its connections asked for in the ten seconds before the
    /// last measure, if that was within a minute of `now` (a link measured longer ago may have changed since), or
    /// ``SendWindow/opening``.
    func size(for server: String, now: NIODeadline) -> Int {
        lock.withLock {
            guard let entry = servers[server], now - entry.at <= .seconds(60) else { return SendWindow.opening }
            return entry.size
        }
    }

    /// Records that the connection `id` to `server` asks for `size` (from ``size(draining:)``).
    func note(_ size: Int, from id: ObjectIdentifier, server: String, now: NIODeadline) {
        lock.withLock {
            if servers[server] == nil, servers.count >= 256 { servers.removeAll() }
            var entry = servers[server] ?? Server(at: now)
            entry.targets[id] = (size, now)
            entry.targets = entry.targets.filter { now - $0.value.at <= .seconds(10) }
            entry.size = entry.targets.values.map(\.size).max() ?? SendWindow.opening
            entry.at = now
            servers[server] = entry
        }
    }

    /// The size for a link that drains `perSecond` bytes a second: what it drains in two seconds, rounded up to
    /// 4 KiB, within ``SendWindow/smallest`` and ``largest``.
    func size(draining perSecond: Int) -> Int {
        let twoSeconds = (min(max(perSecond, 0), largest) * 2 + 4095) / 4096 * 4096
        return min(largest, max(SendWindow.smallest, twoSeconds))
    }

    /// The connection `id` to `server` closed.
    func forget(_ id: ObjectIdentifier, server: String) {
        lock.withLock { _ = servers[server]?.targets.removeValue(forKey: id) }
    }
}
