import Foundation

/// Memory a request body is read into and sent from.
///
/// The engine reads each upload part from the file straight into a body buffer, checksums it there, and hands it to
/// the transport. A transport makes the kind it can send without copying (``HTTPTransport/makeBodyBuffer(capacity:)``):
/// the AsyncHTTPClient transport answers with SwiftNIO's own buffers, every other transport with ``HeapBodyBuffer``.
/// Buffers are reused from part to part, so filling one again costs no allocation.
///
/// One task uses a buffer at a time: it is filled, then sent, then given back. Implementations are classes whose
/// storage is only touched under a lock of their own.
public protocol BodyBuffer: AnyObject, Sendable {
    /// Bytes the buffer holds.
    var count: Int { get }

    /// Replaces the contents with `count` bytes that `fill` writes into the memory it is handed (exactly `count`
    /// bytes long). Keeps the buffer's memory when it is large enough and nothing else still reads it.
    func replaceContents(count: Int, with fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows

    /// Calls `body` with the bytes the buffer holds.
    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result

    /// Whether the network may still be reading this buffer's memory: a transport can answer a request a moment
    /// before its connection lets go of the last slice it wrote. A buffer in use is not filled again.
    var isInUse: Bool { get }
}

extension BodyBuffer {
    /// The bytes, copied into an array.
    public var bytes: [UInt8] { withUnsafeBytes { [UInt8]($0) } }
}

/// A ``BodyBuffer`` in ordinary heap memory: what every transport but AsyncHTTPClient's sends from.
///
/// `@unchecked Sendable`: `storage` and `count` are read and written only while holding `lock`.
public final class HeapBodyBuffer: BodyBuffer, @unchecked Sendable {
    private let lock = NSLock()
    private var storage: UnsafeMutableRawBufferPointer
    private var held = 0

    /// An empty buffer with room for `capacity` bytes (it grows when filled with more).
    public init(capacity: Int = 0) {
        storage = .allocate(byteCount: Swift.max(0, capacity), alignment: 16)
    }

    /// A buffer holding a copy of `bytes`.
    public convenience init(bytes: some Collection<UInt8>) {
        self.init(capacity: bytes.count)
        replaceContents(count: bytes.count) { out in _ = out.initializeMemory(as: UInt8.self, from: bytes) }
    }

    deinit { storage.deallocate() }

    public var count: Int { lock.withLock { held } }

    public func replaceContents(count: Int, with fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        try lock.withLock {
            if storage.count < count {
                storage.deallocate()
                storage = .allocate(byteCount: count, alignment: 16)
            }
            held = 0
            try fill(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
            held = count
        }
    }

    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(UnsafeRawBufferPointer(rebasing: storage[0..<held])) }
    }

    /// Always false: transports copy what they send out of heap buffers before their request returns.
    public var isInUse: Bool { false }
}
