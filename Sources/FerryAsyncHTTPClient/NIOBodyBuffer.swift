import FerryTransport
import Foundation
import NIOCore

/// A ``BodyBuffer`` over a SwiftNIO `ByteBuffer`: the AsyncHTTPClient transport writes slices of it to the connection
/// without copying, and the engine reads parts from files straight into it.
///
/// `@unchecked Sendable`: `buffer` is read and written only while holding `lock`.
public final class NIOBodyBuffer: BodyBuffer, @unchecked Sendable {
    private let lock = NSLock()
    private var buffer: ByteBuffer

    /// An empty buffer with room for `capacity` bytes.
    public init(capacity: Int = 0) {
        buffer = ByteBufferAllocator().buffer(capacity: capacity)
    }

    /// The bytes as a `ByteBuffer` sharing this buffer's memory (what the transport sends).
    public var byteBuffer: ByteBuffer { lock.withLock { buffer } }

    /// The memory the buffer has, filled or not.
    public var capacity: Int { lock.withLock { buffer.capacity } }

    public var count: Int { lock.withLock { buffer.readableBytes } }

    public func replaceContents(count: Int, with fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        try lock.withLock {
            buffer.clear(minimumCapacity: count)
            try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
                try fill(UnsafeMutableRawBufferPointer(rebasing: out[0..<count]))
                return count
            }
        }
    }

    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try lock.withLock { try buffer.withUnsafeReadableBytes(body) }
    }

    /// Whether a `ByteBuffer` handed out by ``byteBuffer`` (or a slice of one) still shares this buffer's memory.
    public var isInUse: Bool {
        lock.withLock { buffer.modifyIfUniquelyOwned { _ in true } != true }
    }
}
