@testable import Ferry
@testable import FerryAsyncHTTPClient
import FerryTransport
import Foundation
import NIOCore
import Testing

@Suite("Part buffer pool", .timeLimit(.minutes(10)))
struct PartBufferPoolTests {
    /// A pool of the buffers the AsyncHTTPClient transport sends from.
    static func nioPool(limit: Int, maximum: Int? = nil) -> PartBufferPool {
        PartBufferPool(limit: limit, maximum: maximum, allocate: { NIOBodyBuffer(capacity: $0) })
    }

    static func address(_ buffer: any BodyBuffer) -> UInt {
        buffer.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    }

    static func fill(_ buffer: any BodyBuffer, with byte: UInt8, count: Int) {
        buffer.replaceContents(count: count) { $0.initializeMemory(as: UInt8.self, repeating: byte) }
    }

    @Test("a returned buffer is reused once nothing else holds it, oldest first; one still shared is passed over")
    func reuseOnlyUnshared() {
        let pool = Self.nioPool(limit: 3)
        let first = pool.take(capacity: 1 << 20)
        Self.fill(first, with: 1, count: 1 << 20)
        let firstAddress = Self.address(first)
        // As the HTTP client may hold a last slice of a body it has answered for.
        var slice: ByteBuffer? = (first as? NIOBodyBuffer)?.byteBuffer.getSlice(at: 0, length: 16)
        #expect(first.isInUse)
        pool.give(first)
        // Still shared: a new buffer, not the one the slice points into.
        let second = pool.take(capacity: 1 << 20)
        #expect(second !== first)
        Self.fill(second, with: 2, count: 1 << 20)
        #expect(Self.address(second) != firstAddress)
        // The slice still reads what was written there: the pool did not hand its memory out.
        #expect(slice?.getBytes(at: 0, length: 16) == [UInt8](repeating: 1, count: 16))
        slice = nil
        #expect(!first.isInUse)
        pool.give(second)
        // Now the first is unshared again and the oldest: it comes back, memory and all, and filling it again keeps
        // that memory.
        let reused = pool.take(capacity: 1 << 20)
        #expect(reused === first)
        Self.fill(reused, with: 3, count: 1 << 19)
        #expect(Self.address(reused) == firstAddress)
        #expect(reused.bytes.allSatisfy { $0 == 3 } && reused.count == 1 << 19)
    }

    @Test("the pool keeps at most its limit of idle buffers")
    func limit() {
        let pool = PartBufferPool(limit: 2, allocate: { HeapBodyBuffer(capacity: $0) })
        let given = (0..<5).map { _ in HeapBodyBuffer(bytes: [1, 2, 3]) }
        for buffer in given { pool.give(buffer) }
        // The first two are kept, the other three dropped; a third take allocates.
        let a = pool.take(), b = pool.take(), c = pool.take()
        #expect(a === given[0] && b === given[1])
        #expect(!given.contains { $0 === c })
        #expect(c.count == 0)
    }

    @Test("at its maximum the pool waits for a buffer the client lets go of instead of allocating; past its patience it allocates")
    func boundedByMaximum() async throws {
        let pool = Self.nioPool(limit: 2, maximum: 2)
        let first = pool.take(capacity: 1 << 20)
        let second = pool.take(capacity: 1 << 20)
        Self.fill(first, with: 1, count: 3)
        Self.fill(second, with: 4, count: 3)
        var held: ByteBuffer? = (first as? NIOBodyBuffer)?.byteBuffer  // the HTTP client still holds each
        let alsoHeld = (second as? NIOBodyBuffer)?.byteBuffer
        pool.give(first)
        pool.give(second)
        let handedOut = Flag()
        let asking = Signals()
        let waiting = Task {
            asking.signal()
            let buffer = await pool.take(capacity: 1 << 20, patience: .seconds(10))
            handedOut.set()
            return buffer
        }
        #expect(await asking.wait(for: 1))
        // Both buffers are still held: the pool waits rather than hand one out or allocate a third. Nothing is handed
        // out for a while: watching that is what this checks.
        try await Task.sleep(for: .milliseconds(30))
        #expect(!handedOut.value)
        #expect(held?.getBytes(at: 0, length: 3) == [1, 1, 1])
        held = nil  // the client lets go of the first buffer
        let reused = await waiting.value
        #expect(reused === first)
        // Nothing comes free: after its patience the pool allocates rather than wait for ever.
        let started = ContinuousClock.now
        let fresh = await pool.take(capacity: 1 << 20, patience: .milliseconds(40))
        #expect(ContinuousClock.now - started >= .milliseconds(40))
        #expect(fresh !== first && fresh !== second)
        #expect((fresh as? NIOBodyBuffer)?.capacity ?? 0 >= 1 << 20)
        #expect(alsoHeld?.readableBytes == 3)
    }

    @Test("the AsyncHTTPClient transport makes NIO buffers and sends their own memory; any other kind is copied")
    func asyncHTTPClientSendsWithoutCopy() {
        let transport = AsyncHTTPClientTransport()
        let part = transport.makeBodyBuffer(capacity: 1 << 16)
        #expect(part is NIOBodyBuffer)
        Self.fill(part, with: 5, count: 1 << 16)
        var sent: ByteBuffer? = AsyncHTTPClientTransport.byteBuffer(of: part)
        #expect(sent?.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == Self.address(part))
        #expect(part.isInUse)
        sent = nil
        #expect(!part.isInUse)
        let heap = HeapBodyBuffer(bytes: [1, 2, 3])
        let copy = AsyncHTTPClientTransport.byteBuffer(of: heap)
        #expect(copy.getBytes(at: 0, length: 3) == [1, 2, 3])
        #expect(copy.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } != Self.address(heap))
    }

    @Test("a heap buffer keeps its memory when filled again with no more than it holds, and grows when filled with more")
    func heapBufferReuse() {
        let buffer = HeapBodyBuffer(capacity: 1024)
        Self.fill(buffer, with: 7, count: 1024)
        let address = Self.address(buffer)
        Self.fill(buffer, with: 8, count: 512)
        #expect(Self.address(buffer) == address)
        #expect(buffer.bytes == [UInt8](repeating: 8, count: 512))
        Self.fill(buffer, with: 9, count: 4096)
        #expect(buffer.count == 4096 && buffer.bytes.allSatisfy { $0 == 9 })
        #expect(!buffer.isInUse)
    }
}

/// A flag one task sets and another reads.
final class Flag: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var isSet = false
    var value: Bool { lock.withLock { isSet } }
    func set() { lock.withLock { isSet = true } }
}
