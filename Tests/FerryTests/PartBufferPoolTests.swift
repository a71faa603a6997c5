@testable import Ferry
import Foundation
import NIOCore
import Testing

@Suite("Part buffer pool", .timeLimit(.minutes(10)))
struct PartBufferPoolTests {
    @Test("a returned buffer is reused once nothing else holds it, oldest first; one still shared is passed over")
    func reuseOnlyUnshared() {
        let pool = PartBufferPool(limit: 3)
        var first = pool.take()
        first.writeBytes([UInt8](repeating: 1, count: 1 << 20))
        let firstAddress = first.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        var slice: ByteBuffer? = first.getSlice(at: 0, length: 16)  // as the HTTP client may hold a last slice
        pool.give(first)
        first = ByteBuffer()
        // Still shared: a new buffer, not the one the slice points into.
        var second = pool.take()
        second.writeBytes([UInt8](repeating: 2, count: 1 << 20))
        #expect(second.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } != firstAddress)
        // The slice still reads what was written there: the pool did not hand its memory out.
        #expect(slice?.getBytes(at: 0, length: 16) == [UInt8](repeating: 1, count: 16))
        slice = nil
        pool.give(second)
        second = ByteBuffer()
        // Now the first is unshared again and the oldest: it comes back, memory and all.
        var reused = pool.take()
        #expect(reused.capacity >= 1 << 20)
        reused.clear()
        reused.writeBytes([3])
        #expect(reused.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == firstAddress)
    }

    @Test("the pool keeps at most its limit of idle buffers")
    func limit() {
        let pool = PartBufferPool(limit: 2)
        for _ in 0..<5 {
            var buffer = ByteBuffer()
            buffer.writeBytes([1, 2, 3])
            pool.give(buffer)
        }
        #expect(pool.take().capacity > 0)
        #expect(pool.take().capacity > 0)
        #expect(pool.take().capacity == 0)
    }

    @Test("at its maximum the pool waits for a buffer the client lets go of instead of allocating; past its patience it allocates")
    func boundedByMaximum() async throws {
        let pool = PartBufferPool(limit: 2, maximum: 2)
        var first = pool.take(capacity: 1 << 20)
        var second = pool.take(capacity: 1 << 20)
        first.writeBytes([1, 2, 3])
        second.writeBytes([4, 5, 6])
        let firstAddress = first.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        var held: ByteBuffer? = first  // the HTTP client still holds a slice of each
        let alsoHeld = second
        pool.give(first)
        pool.give(second)
        first = ByteBuffer()
        second = ByteBuffer()
        let handedOut = Flag()
        let waiting = Task {
            let buffer = await pool.take(capacity: 1 << 20, patience: .seconds(10))
            handedOut.set()
            return buffer
        }
        try await Task.sleep(for: .milliseconds(30))
        // Both buffers are still held: the pool waits rather than hand one out or allocate a third.
        #expect(!handedOut.value)
        #expect(held?.getBytes(at: 0, length: 3) == [1, 2, 3])
        held = nil  // the client lets go of the first buffer
        var reused = await waiting.value
        let reusedAddress = reused.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        #expect(reusedAddress == firstAddress)
        // Nothing comes free: after its patience the pool allocates rather than wait for ever.
        let started = ContinuousClock.now
        let fresh = await pool.take(capacity: 1 << 20, patience: .milliseconds(40))
        #expect(ContinuousClock.now - started >= .milliseconds(40))
        #expect(fresh.capacity >= 1 << 20)
        #expect(alsoHeld.readableBytes == 3)
        reused.clear()
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
