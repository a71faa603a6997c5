import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Sizes a connection's send buffer (`SO_SNDBUF`) to its link: about two seconds of what the connections to the same
/// server drain while their buffers are full, from ``smallest`` to ``AsyncHTTPClientTransport/sendBufferSize``.
///
/// On a slow link with deep queues (a mobile network's), each connection's bytes in flight wait in one queue, so a
/// buffer of fixed size put seconds of queueing in front of every byte: at 20 KB/s, three connections holding 512 KiB
/// each queued 75 s, parts went unanswered past their time limits, and progress ran megabytes ahead of the server. The
/// connections to one server share one size, from the fastest of them, so they hold equal shares of the queue and
/// drain at equal rates (a starved connection with a smaller buffer would stay starved). A connection starts with the
/// size last measured for its server, or ``opening``.
///
/// A measure runs from one moment the connection's buffers are full (the channel turns unwritable: the link, not the
/// body, sets the pace) to another at least ``measureTime`` later, or eight buffers' worth later on a fast link, and
/// counts the bytes the server acknowledged in between (the kernel's count, `TCP_INFO`). Where the kernel does not
/// count them (not Linux), the buffer keeps the largest size.
///
/// Runs on the connection's event loop only, as the first handler of its pipeline.
final class SendWindow: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny

    /// The least a buffer is set to (Linux keeps twice this): 32 KiB.
    static let smallest = 32 * 1024
    /// A new connection's buffer when its server has no measure yet: 32 KiB, so that the first connections to a slow
    /// link do not queue so much that the next one's connection attempt waits past its time limit (a fast link grows
    /// it within its first measure).
    static let opening = 32 * 1024
    /// Longest time a measure covers on a link that drains less than eight buffers' worth in it: two seconds.
    static let measureTime = TimeAmount.seconds(2)

    private let server: String
    private let sizes: SendSizes
    private let clock: () -> NIODeadline
    private let acknowledged: (any Channel) -> UInt64?
    /// The size the socket's buffer is set to (0 before the connection's first).
    private(set) var size = 0
    /// When the measure under way started, and the bytes acknowledged then.
    private var start: (at: NIODeadline, acked: UInt64)?
    /// Whether every measure counts. The first after the connection opened or paused counts only if it finds a link
    /// at least eight times faster than the buffer's size asks (a fast link): it includes the time the link took to
    /// come up to speed, and the bytes that filled the server's receive buffer at once.
    private var settled = false
    /// Since when the connection could take bytes and was given none, if it can.
    private var quiet: NIODeadline?

    /// A window for a connection to `server`, sized by `sizes`; `acknowledged` reads the bytes the server has
    /// acknowledged on a channel (nil where it cannot be read).
    init(
        server: String, sizes: SendSizes = .shared, clock: @escaping () -> NIODeadline = { .now() },
        acknowledged: @escaping (any Channel) -> UInt64? = SendWindow.bytesAcknowledged
    ) {
        self.server = server
        self.sizes = sizes
        self.clock = clock
        self.acknowledged = acknowledged
    }

    /// Adds a window to `channel`'s pipeline, keyed by the server it is connected to.
    @Sendable static func install(on channel: any Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.submit {
            let server = channel.remoteAddress.map { "\($0)" } ?? ""
            try channel.pipeline.syncOperations.addHandler(SendWindow(server: server), position: .first)
        }.recover { _ in }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let counted = acknowledged(context.channel) != nil
        resize(to: counted ? sizes.size(for: server) : sizes.largest, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sizes.forget(ObjectIdentifier(self), server: server)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let now = clock()
        if let quiet, now - quiet > .seconds(1) {
            // Nothing was written for a while though the connection could take it (an answer awaited, or no request):
            // a measure across that time would take the pause for a slow link.
            start = nil
            settled = false
        }
        quiet = context.channel.isWritable ? now : nil
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            quiet = clock()
        } else {
            quiet = nil
            full(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// The connection's buffers are full: ends the measure under way if it is long enough, and starts the next. A
    /// buffer shrinks by half at most per measure: what it holds beyond its new size must cross the link before the
    /// connection takes another byte.
    private func full(context: ChannelHandlerContext) {
        let now = clock()
        guard let acked = acknowledged(context.channel) else { return }
        guard let start, acked >= start.acked else {
            self.start = (now, acked)
            return
        }
        let elapsed = now - start.at
        let drained = Int(clamping: acked - start.acked)
        guard elapsed >= Self.measureTime || (elapsed > .zero && drained >= 8 * size) else { return }
        let perSecond = Int(min(Double(drained) / (Double(elapsed.nanoseconds) / 1e9), Double(1 << 40)))
        if settled || sizes.size(draining: perSecond) >= 8 * size {
            sizes.note(perSecond, from: ObjectIdentifier(self), server: server, now: now)
        }
        settled = true
        resize(to: max(sizes.size(for: server), size / 2), context: context)
        self.start = (now, acked)
    }

    private func resize(to next: Int, context: ChannelHandlerContext) {
        guard next != size else { return }
        size = next
        let option = ChannelOptions.socketOption(.so_sndbuf)
        try? context.channel.syncOptions?.setOption(option, value: SocketOptionValue(next))
    }

    /// The bytes the server has acknowledged on `channel`'s socket (`tcpi_bytes_acked`), where the kernel counts them.
    static func bytesAcknowledged(_ channel: any Channel) -> UInt64? {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        var acked: UInt64?
        let info: EventLoopFuture<TCPInfoHead> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_INFO))
        // On the channel's loop the option is read at once, and the callback runs before this returns.
        info.assumeIsolated().whenSuccess { acked = $0.bytesAcked }
        return acked.flatMap { $0 > 0 ? $0 : nil }
        #else
        return nil
        #endif
    }
}

#if os(Linux)
/// The first 128 bytes of Linux's `struct tcp_info`, which end with `tcpi_bytes_acked` (Linux 4.1 and later; an older
/// kernel fills less, and the count reads 0).
struct TCPInfoHead: Sendable {
    var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// `tcpi_bytes_acked`, at byte 120.
    var bytesAcked: UInt64 { words.15 }
}
#endif

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
    /// The largest size.
    let largest: Int

    init(largest: Int = AsyncHTTPClientTransport.sendBufferSize) {
        self.largest = largest
    }

    /// The size for a connection to `server`: from the fastest drain its connections measured in the last ten
    /// seconds (``size(draining:)``), or the last size, or ``SendWindow/opening``.
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
            entry.size = size(draining: entry.drains.values.map(\.perSecond).max() ?? 0)
            servers[server] = entry
        }
    }

    /// The size for a link that drains `perSecond` bytes a second: two seconds of it, rounded up to 4 KiB, within
    /// ``SendWindow/smallest`` and ``largest``.
    func size(draining perSecond: Int) -> Int {
        let twoSeconds = (min(max(perSecond, 0), largest) * 2 + 4095) / 4096 * 4096
        return min(largest, max(SendWindow.smallest, twoSeconds))
    }

    /// The connection `id` to `server` closed.
    func forget(_ id: ObjectIdentifier, server: String) {
        lock.withLock { _ = servers[server]?.drains.removeValue(forKey: id) }
    }
}
