#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers
@_spi(CustomByteBufferAllocator) import NIOCore

/// Page-aligned blocks of one size, mapped from the kernel, with up to `limit` idle ones kept for reuse and the rest
/// unmapped when they are given back.
///
/// The buffers that bodies pass through (one ``BlobFiles/readChunk`` each, one per chunk) come and go at the rate bytes move. From `malloc`
/// they interleave with the server's small allocations, and the heap kept what they freed: 20 clients downloading at
/// full speed left `ferry serve` holding 300 to 670 MB (590 MB after they ended), though about 0.5 MiB per connection
/// was in flight. A mapped block is returned whole, so the memory held follows the bytes in flight, and an idle block
/// is reused without touching fresh pages.
final class BlockPool: @unchecked Sendable {
    /// Bytes per block.
    let size: Int
    /// Idle blocks kept for reuse.
    let limit: Int
    // `lock` guards `idle` and `taken`.
    private let lock = NIOLock()
    private var idle: [UnsafeMutableRawPointer] = []
    private var taken = 0

    init(size: Int, limit: Int) {
        self.size = size
        self.limit = limit
    }

    /// An idle block, or a new mapping; nil when the kernel has no memory to map.
    func take() -> UnsafeMutableRawPointer? {
        let reused = lock.withLock {
            taken += 1
            return idle.popLast()
        }
        if let reused { return reused }
        guard let mapped = Self.map(size) else {
            lock.withLock { taken -= 1 }
            return nil
        }
        return mapped
    }

    /// Keeps the block for reuse, or unmaps it when `limit` blocks are idle already.
    func give(_ block: UnsafeMutableRawPointer) {
        let kept = lock.withLock {
            taken -= 1
            guard idle.count < limit else { return false }
            idle.append(block)
            return true
        }
        if !kept { munmap(block, size) }
    }

    /// How many idle blocks the pool holds.
    var idleCount: Int { lock.withLock { idle.count } }
    /// How many blocks are taken and not given back: the chunks alive now.
    var inUse: Int { lock.withLock { taken } }

    /// A new private anonymous mapping of `size` bytes (zeroed, page-aligned), or nil.
    static func map(_ size: Int) -> UnsafeMutableRawPointer? {
        let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
        return mapped
    }
}

/// The memory of the chunks read from blob files for answers (GET, and the copies and backups that read objects):
/// ``BlockPool`` blocks of one ``BlobFiles/readChunk`` behind a `ByteBufferAllocator`, so that every chunk a download
/// sends reuses a block another chunk has finished with.
///
/// Each allocation starts with a header holding its mapped size (0 for a small buffer, or when nothing could be
/// mapped, from `malloc`), so that release knows where it came from: a chunk's block goes back to the pool, anything
/// larger (a buffer grown by a copy-on-write) is unmapped.
enum ReadBuffers {
    /// Bytes before the address handed out (a multiple of every alignment a `ByteBuffer` needs).
    static let header = 64
    /// Idle blocks kept for reuse: 32 MiB at most.
    static let pool = BlockPool(size: BlobFiles.readChunk + header, limit: (32 << 20) / BlobFiles.readChunk)
    /// Buffers smaller than this (a small object, the last chunk of a file) come from `malloc`, as any small buffer:
    /// a block each would hold a whole chunk's memory for a few bytes.
    static let smallBuffer = 128 * 1024

    /// The allocator chunk buffers come from.
    static let allocator = ByteBufferAllocator(
        allocate: { size in ReadBuffers.allocate(size) },
        reallocate: { pointer, oldSize, newSize in ReadBuffers.reallocate(pointer, oldSize: oldSize, newSize: newSize) },
        deallocate: { pointer in ReadBuffers.deallocate(pointer) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) })

    static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        if size >= smallBuffer {
            let mapped = size + header <= pool.size ? pool.size : size + header
            if let block = mapped == pool.size ? pool.take() : BlockPool.map(mapped) {
                block.storeBytes(of: mapped, as: Int.self)
                return block + header
            }
        }
        guard let fallback = malloc(size + header) else { return nil }
        fallback.storeBytes(of: 0, as: Int.self)
        return fallback + header
    }

    static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        let block = pointer - header
        let mapped = block.load(as: Int.self)
        if mapped == 0 {
            free(block)
        } else if mapped == pool.size {
            pool.give(block)
        } else {
            munmap(block, mapped)
        }
    }

    static func reallocate(_ pointer: UnsafeMutableRawPointer?, oldSize: Int, newSize: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(newSize) }
        let mapped = (pointer - header).load(as: Int.self)
        if mapped != 0, newSize + header <= mapped { return pointer }
        guard let moved = allocate(newSize) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
        deallocate(pointer)
        return moved
    }
}
