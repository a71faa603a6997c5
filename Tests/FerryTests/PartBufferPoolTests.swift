@testable import Ferry
import NIOCore
import Testing

@Suite("Part buffer pool")
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
        slice = nil
        #expect(slice == nil)
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
}
