import NIOCore

/// Sizes each connection's socket reads: from 16 KiB, adapting up to a largest read as the connection sends more, and
/// down again when it sends little.
///
/// What a connection has read ahead of its request's handler (up to about ten reads, the request stream's high-water
/// mark) is held in memory, so the largest read decides what each connection sending a body holds. A connection
/// opened while few are open reads up to ``maximum``: a body streamed at loopback or LAN speed reaches the store in
/// fewer, larger buffers. One opened while ``quietConnections`` or more are open reads up to ``crowdedMaximum``,
/// NIO's own limit: at 256 KiB each, 250 uploads of 4 MiB at once held over 1 GB in `ferry serve`, at 64 KiB about
/// half of that (`Benchmarks/ServerIngest`).
final class ReceiveBufferSizing: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// Largest buffer one read may fill while few connections are open.
    static let maximum = 256 * 1024
    /// Largest buffer one read may fill on a connection opened while many are open.
    static let crowdedMaximum = 64 * 1024
    /// Connections open, the new one not counted, from which a new one reads up to ``crowdedMaximum`` only.
    static let quietConnections = 16

    /// The server's connections, counted by ``ConnectionGuard``.
    private let connections: ConnectionGuard.Counter

    init(connections: ConnectionGuard.Counter) { self.connections = connections }

    func handlerAdded(context: ChannelHandlerContext) {
        let largest = connections.current < Self.quietConnections ? Self.maximum : Self.crowdedMaximum
        let allocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 16 * 1024, maximum: largest)
        context.channel.setOption(ChannelOptions.recvAllocator, value: allocator).whenFailure { _ in
            // A channel that cannot take the option keeps NIO's default sizes.
        }
    }
}
