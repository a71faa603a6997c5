import NIOCore

/// Lets a connection read up to ``maximum`` bytes per socket read (NIO's default stops at 64 KiB), so a body streamed
/// at loopback or LAN speed reaches the store in fewer, larger buffers: fewer trips through the HTTP decoder and fewer
/// wake-ups of the task that writes it. The allocator adapts, so a connection that sends little keeps small buffers.
final class ReceiveBufferSizing: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// Largest buffer one read may fill.
    static let maximum = 256 * 1024

    func handlerAdded(context: ChannelHandlerContext) {
        let allocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 16 * 1024, maximum: Self.maximum)
        context.channel.setOption(ChannelOptions.recvAllocator, value: allocator).whenFailure { _ in
            // A channel that cannot take the option keeps NIO's default sizes.
        }
    }
}
