#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// A temporary blob file being written: with direct I/O (`O_DIRECT`) when the platform and file system take it, and
/// through the page cache otherwise.
///
/// Direct writes need a page-aligned buffer, offset and length; ``write(_:at:)`` writes a block's aligned prefix
/// directly and anything after it (only the last block of a body has such a tail) through the page cache. A file
/// system that refuses direct I/O (`EINVAL` at open or at the first write) is written through the page cache from
/// then on. Writes to distinct ranges may run on different threads at once.
final class TempFile: @unchecked Sendable {
    /// Alignment of direct writes: the page size, a multiple of every common logical block size.
    static let alignment = 4096

    /// `O_DIRECT`, which Swift's C modules do not export (its value differs between architectures); 0 where unknown.
    static let directFlag: Int32 = {
        #if os(Linux) && arch(x86_64)
        return 0o40000
        #elseif os(Linux) && arch(arm64)
        return 0o200000
        #else
        return 0
        #endif
    }()

    private let fd: Int32
    // Guards `direct` and `closed`; the descriptor itself is shared by the writing threads.
    private let lock = NIOLock()
    private var direct: Bool
    private var closed = false

    /// Creates the file (it must not exist); `direct` asks for direct I/O where available.
    init(path: String, direct wanted: Bool) throws {
        var direct = wanted && Self.directFlag != 0
        var fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | (direct ? Self.directFlag : 0), 0o600)
        if fd < 0 && direct && errno == EINVAL {
            // The file system does not do direct I/O; the failed open may have created the file already.
            direct = false
            fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        }
        guard fd >= 0 else { throw POSIXFileError("open", errno) }
        self.fd = fd
        self.direct = direct
    }

    /// Whether writes still go around the page cache.
    var isDirect: Bool { lock.withLock { direct } }

    /// Writes a block's bytes at `offset` (a multiple of ``alignment`` unless the file is written through the cache).
    func write(_ block: AlignedBlock, at offset: Int64) throws {
        let bytes = block.bytes
        let aligned = isDirect ? bytes.count & ~(Self.alignment - 1) : 0
        if aligned > 0 {
            do {
                try writeAll(UnsafeRawBufferPointer(rebasing: bytes[..<aligned]), at: offset)
            } catch let error as POSIXFileError where error.code == EINVAL {
                // Open took O_DIRECT but the file system refuses the write itself: use the page cache from now on.
                stopDirectIO()
                try writeAll(UnsafeRawBufferPointer(rebasing: bytes[..<aligned]), at: offset)
            }
        }
        if aligned < bytes.count {
            stopDirectIO()
            try writeAll(UnsafeRawBufferPointer(rebasing: bytes[aligned...]), at: offset + Int64(aligned))
        }
    }

    /// Makes the contents durable and closes the file.
    func syncAndClose() throws {
        if fsync(fd) != 0 { throw POSIXFileError("fsync", errno) }
        closeDescriptor()
    }

    /// Closes the file (once).
    func closeDescriptor() {
        let first = lock.withLock {
            defer { closed = true }
            return !closed
        }
        if first { close(fd) }
    }

    private func stopDirectIO() {
        lock.withLock {
            guard direct else { return }
            direct = false
            let flags = fcntl(fd, F_GETFL)
            if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~Self.directFlag) }
        }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, at start: Int64) throws {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, base + done, bytes.count - done, off_t(start) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXFileError("write", errno)
            }
            done += n
        }
    }
}

/// A page-aligned block of ``BlobFiles/writeBatch`` bytes that a body is copied into before it is hashed and written.
///
/// Blocks come from a small process-wide ``BlockPool`` and go back to it when the last job holding one lets go of it:
/// reusing memory that is already mapped is much cheaper than touching fresh pages for every body. The pool keeps at
/// most ``poolLimit`` idle blocks; more are mapped under load and unmapped when returned to a full pool.
final class AlignedBlock: @unchecked Sendable {
    /// Bytes per block.
    static let size = BlobFiles.writeBatch
    /// Idle blocks kept for reuse.
    static let poolLimit = 16
    /// Blocks waiting to be hashed and written at once, across every body being received: 64 MiB. Without it, 250
    /// uploads of 4 MiB at once held 1.2 GB, four blocks each, behind the hashing two cores could do.
    static let inFlightLimit = 64
    /// The turns of ``inFlightLimit``.
    static let inFlight = Turns(inFlightLimit)

    private static let pool = BlockPool(size: size, limit: poolLimit)

    private let base: UnsafeMutableRawPointer
    /// Bytes filled so far. Only the task filling the block changes it, before handing the block on.
    private(set) var count = 0

    private init(base: UnsafeMutableRawPointer) {
        self.base = base
    }

    deinit {
        Self.pool.give(base)
    }

    /// A block from the pool, or a new one.
    static func take() throws -> AlignedBlock {
        guard let base = pool.take() else { throw POSIXFileError("mmap", ENOMEM) }
        return AlignedBlock(base: base)
    }

    /// Whether the block has no room left.
    var isFull: Bool { count == Self.size }

    /// The bytes filled so far.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Copies as much of `source` as fits and returns how many bytes that was.
    func append(_ source: UnsafeRawBufferPointer) -> Int {
        let n = min(source.count, Self.size - count)
        if n > 0, let from = source.baseAddress { (base + count).copyMemory(from: from, byteCount: n) }
        count += n
        return n
    }
}

/// A number of turns shared by tasks: ``acquire()`` waits, in order, until one is free; ``release()`` hands it on.
/// Waiting is not cancelled: a turn is held only for work that ends by itself (a block's hash and write).
final class Turns: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: NIOLockedValueBox<State>

    init(_ count: Int) { state = NIOLockedValueBox(State(free: count)) }

    /// Takes a turn, waiting for one when none is free.
    func acquire() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state -> Bool in
                guard state.free <= 0 else {
                    state.free -= 1
                    return true
                }
                state.waiting.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    /// Gives a turn back: to the task that has waited longest, or to the free ones.
    func release() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }

    /// Turns free now.
    var free: Int { state.withLockedValue { $0.free } }
}
