import Crypto
import FerryCore
import Foundation
import FerryTransport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads byte ranges of a local file; the whole file is never loaded.
struct FileRanges: Sendable {
    let path: String

    /// The file's size and modification time; `fileNotFound` when it cannot be read.
    static func attributes(of path: String) throws -> (size: Int64, modified: Double) {
        var info = stat()
        guard stat(path, &info) == 0, access(path, R_OK) == 0 else {
            throw FerryError(.fileNotFound, "The file \(path) does not exist or cannot be read.")
        }
        #if canImport(Darwin)
        let modified = Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
        #else
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        #endif
        return (Int64(info.st_size), modified)
    }

    /// What the file system says of a file that a write changes even when the writer puts its size and modification
    /// time back: the inode's change time (which no call sets back), with the device and inode, size and
    /// modification time. Compared within one run only (a copy or a `chmod` changes it too, and a checkpoint outlives
    /// both).
    struct State: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Double
        var changedSeconds: Int
        var changedNanoseconds: Int
    }

    /// The file's ``State``; `fileNotFound` when it cannot be read.
    static func state(of path: String) throws -> State {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw FerryError(.fileNotFound, "The file \(path) does not exist or cannot be read.")
        }
        #if canImport(Darwin)
        let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
        #else
        let (modified, changed) = (info.st_mtim, info.st_ctim)
        #endif
        return State(
            device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(truncatingIfNeeded: info.st_ino),
            size: Int64(info.st_size), modified: Double(modified.tv_sec) + Double(modified.tv_nsec) / 1e9,
            changedSeconds: Int(changed.tv_sec), changedNanoseconds: Int(changed.tv_nsec))
    }

    /// Reads `range` into memory (one part: memory stays about concurrency × part size).
    func read(_ range: Range<Int64>) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw FerryError(.fileNotFound, "The file \(path) cannot be opened.") }
        defer { close(fd) }
        let count = Int(range.upperBound - range.lowerBound)
        // Read straight into the array's storage: no zero-filling first.
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            try readFully(fd, into: UnsafeMutableRawPointer(buffer.baseAddress), count: count, at: range.lowerBound)
            initialized = count
        }
    }

    /// Reads exactly `count` bytes at `offset` into `destination`; a file that ends first is `cannotResumeUpload`.
    fileprivate func readFully(_ fd: Int32, into destination: UnsafeMutableRawPointer?, count: Int, at offset: Int64) throws {
        try FileReading.readFully(
            fd, into: destination, count: count, at: offset,
            orThrow: FerryError(.cannotResumeUpload, "The file \(path) became shorter while it was being uploaded."))
    }
}

extension FileRanges {
    /// Reads `range` into `buffer`, replacing what it held; a buffer that is not shared keeps its memory, so a part
    /// buffer is filled again without allocating or touching fresh pages.
    func read(_ range: Range<Int64>, into buffer: any BodyBuffer) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw FerryError(.fileNotFound, "The file \(path) cannot be opened.") }
        defer { close(fd) }
        let count = Int(range.upperBound - range.lowerBound)
        try buffer.replaceContents(count: count) { out in
            try readFully(fd, into: out.baseAddress, count: count, at: range.lowerBound)
        }
    }
}

/// Part buffers kept for the next part: filling a buffer that is already mapped costs a copy, a fresh one also costs
/// a page fault per page. Holds at most ``limit`` idle buffers.
///
/// Buffers come from the transport (``HTTPTransport/makeBodyBuffer(capacity:)``), so it sends them without a copy. A
/// buffer comes back as soon as its request has an answer, but the HTTP client may let go of its last slice a moment
/// later (``BodyBuffer/isInUse``); refilling it then would make the transport's buffer allocate a fresh copy. So
/// ``take(capacity:)`` hands out the oldest idle buffer that nothing else holds any more, and a new one only when
/// there is none. With a ``maximum``, the async
/// ``take(capacity:patience:)`` waits that moment instead of allocating once that many buffers exist, which bounds
/// an upload's memory to `maximum` buffers of its largest part.
final class PartBufferPool: @unchecked Sendable {
    // Every access to `idle` and `live` holds `lock`.
    private let lock = NSLock()
    /// Oldest first.
    private var idle: [any BodyBuffer] = []
    /// Buffers this pool allocated that it has not dropped: idle ones and those in use.
    private var live = 0
    /// Most idle buffers kept.
    let limit: Int
    /// Most live buffers before ``take(capacity:patience:)`` waits for one to come free; nil never waits.
    let maximum: Int?

    /// Makes a buffer with room for the given number of bytes.
    let allocate: @Sendable (Int) -> any BodyBuffer

    init(limit: Int, maximum: Int? = nil, allocate: @escaping @Sendable (Int) -> any BodyBuffer) {
        self.limit = limit
        self.maximum = maximum
        self.allocate = allocate
    }

    /// The oldest idle buffer no one else holds, or a new one with room for `capacity` bytes. Allocating the largest
    /// part up front means a buffer never grows when parts do, so it is never copied to a larger allocation.
    func take(capacity: Int = 0) -> any BodyBuffer {
        take(capacity: capacity, allocating: true)!
    }

    /// As ``take(capacity:)``, but when ``maximum`` buffers already exist and none is free, waits (checking every
    /// half millisecond) for the HTTP client to let go of one, for at most `patience`; then, or if the task is
    /// cancelled, allocates a new one.
    func take(capacity: Int, patience: Duration) async -> any BodyBuffer {
        let deadline = ContinuousClock.now + patience
        while true {
            let giveUp = ContinuousClock.now >= deadline || Task.isCancelled
            if let buffer = take(capacity: capacity, allocating: giveUp) { return buffer }
            try? await Task.sleep(for: .microseconds(500))
        }
    }

    /// An idle buffer no one else holds; else a new one if `allocating` or below ``maximum``; else nil.
    private func take(capacity: Int, allocating: Bool) -> (any BodyBuffer)? {
        let (reused, allocating): ((any BodyBuffer)?, Bool) = lock.withLock {
            for index in idle.indices where !idle[index].isInUse {
                return (idle.remove(at: index), false)
            }
            guard allocating || live < (maximum ?? .max) else { return (nil, false) }
            live += 1
            return (nil, true)
        }
        if let reused { return reused }
        return allocating ? allocate(capacity) : nil
    }

    /// Keeps `buffer` for a later part (its bytes are no longer needed); beyond ``limit`` idle buffers it is dropped.
    func give(_ buffer: any BodyBuffer) {
        lock.withLock {
            if idle.count < limit {
                idle.append(buffer)
            } else {
                live = max(0, live - 1)
            }
        }
    }

    /// Lets go of every idle buffer.
    func removeAll() {
        lock.withLock {
            live = max(0, live - idle.count)
            idle.removeAll()
        }
    }
}

/// What identifies a file's content for resuming: its size, modification time, and a hash of sampled ranges (start,
/// middle, end), so a changed file is noticed without reading it whole.
public struct FileFingerprint: Codable, Sendable, Hashable {
    /// Size in bytes.
    public var size: Int64
    /// Modification time, seconds since 1970.
    public var modificationTime: Double
    /// Hex SHA-256 of up to three 64 KiB samples.
    public var sampleHash: String

    static let sampleSize: Int64 = 64 * 1024

    /// Computes the fingerprint of a file.
    static func of(path: String) throws -> FileFingerprint {
        let (size, modified) = try FileRanges.attributes(of: path)
        let reader = FileRanges(path: path)
        var hasher = SHA256()
        let starts: [Int64] = [0, max(0, size / 2 - sampleSize / 2), max(0, size - sampleSize)]
        for start in Set(starts).sorted() {
            hasher.update(data: try reader.read(start..<min(size, start + sampleSize)))
        }
        return FileFingerprint(size: size, modificationTime: modified, sampleHash: Hex.encode(hasher.finalize()))
    }
}
