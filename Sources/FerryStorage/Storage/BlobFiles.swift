#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import FerryCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The files that hold object and part bytes: `blobs/<xx>/<name>` for visible data and `tmp/` for bodies being written.
///
/// Blob names are random; keys never become paths. A body is written to `tmp/`, fsynced, and renamed into `blobs/`
/// only once complete and verified, so a crash never leaves a partial blob visible. What is left in `tmp/` at start is
/// deleted.
struct BlobFiles: BlobStorage {
    let root: String
    /// Threads for hashing and other short blocking work.
    let threadPool: NIOThreadPool
    /// Threads that wait on the disk: writes, fsync, renames. Kept apart from ``threadPool`` so a write waiting on the
    /// device never holds up a hash job.
    let diskPool: NIOThreadPool
    /// Whether bodies are written with direct I/O where the platform has it (Linux); tests turn it off to cover the
    /// page-cache path.
    var directIO = true
    /// Blobs being read; their deletion waits until the last reader lets go.
    let leases = BlobLeases()
    /// Bytes of free space kept on the file system under ``root``: a body whose next block would leave less is
    /// refused (`storageFull`, nothing of it kept), so that the catalog's commits, and the deletes that free space,
    /// still fit when uploads have filled the disk. An empty body writes nothing and is not refused.
    var reserve: Int64 = 0
    /// The turns of blocks waiting for hashing and writing, shared by every body (``AlignedBlock/inFlight``); tests
    /// give their own.
    var turns: Turns = AlignedBlock.inFlight
    /// The free bytes of the file system holding a path (``DiskSpace``); tests give a disk of their own size.
    var freeBytes: @Sendable (String) -> Int64? = { DiskSpace.of($0)?.free }
    /// Bytes gathered before one write to disk.
    static let writeBatch = 1 << 20
    /// Makes a directory's entries durable (fsync of the directory); tests see or fail it here.
    var syncDirectory: @Sendable (String) throws -> Void = BlobFiles.sync
    /// Bytes read from disk per chunk sent: what an answer holds in memory for a client that stops reading (the
    /// next chunk is read once the connection has taken the last), so a thousand such clients hold 256 MiB, not
    /// gigabytes.
    static let readChunk = 256 << 10

    var tmpDirectory: String { root + "/tmp" }
    var blobDirectory: String { root + "/blobs" }

    init(
        root: String, reserve: Int64 = 0, threadPool: NIOThreadPool = .singleton,
        diskPool: NIOThreadPool = BlobFiles.sharedDiskPool
    ) throws {
        self.root = root
        self.reserve = reserve
        self.threadPool = threadPool
        self.diskPool = diskPool
        let fm = FileManager.default
        try PrivateFiles.directory(root)
        try PrivateFiles.directory(root + "/blobs")
        // A crash can leave only unfinished bodies here; none of them is referenced.
        try? fm.removeItem(atPath: root + "/tmp")
        try PrivateFiles.directory(root + "/tmp")
        // Every blob's folder (`00` to `ff`) is made now, and every folder made is synced into its parent before a
        // blob is acknowledged: a folder made by a first blob and lost to a power cut would take acknowledged blobs
        // with it.
        for byte in 0...255 {
            let folder = blobDirectory + "/" + Hex.encode([UInt8(byte)])
            if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw POSIXFileError("mkdir", errno) }
        }
        for directory in [blobDirectory, root, (root as NSString).deletingLastPathComponent] {
            try Self.sync(directory)
        }
    }

    /// Syncs a directory's entries; a file system that cannot sync a directory (EINVAL, ENOTSUP) is taken as it is.
    static func sync(_ directory: String) throws {
        do {
            try BackupFiles.syncDirectory(directory)
        } catch let error as POSIXFileError where [EINVAL, ENOTSUP].contains(error.code) {
            return
        }
    }

    /// Makes sure the folder of a blob about to be named exists, durably (it is made at start; here only when
    /// something removed it since).
    private func makeFolder(_ directory: String) throws {
        guard mkdir(directory, 0o700) == 0 else {
            if errno == EEXIST { return }
            throw POSIXFileError("mkdir", errno)
        }
        try syncDirectory((directory as NSString).deletingLastPathComponent)
    }

    func path(of blob: String) -> String {
        "\(blobDirectory)/\(Self.relativePath(of: blob))"
    }

    /// Where a blob's file is below `blobs/`: `xx/<name>`, `xx` its name's first two characters.
    static func relativePath(of blob: String) -> String {
        "\(blob.prefix(2))/\(blob)"
    }

    /// The process's disk threads: more than the cores, as they mostly wait (direct writes return when the device has
    /// the bytes).
    static let sharedDiskPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        return pool
    }()

    /// Streams a body to a new temporary file, computing MD5 and the requested checksums in the same pass.
    ///
    /// The request's buffers are copied into page-aligned blocks of ``writeBatch`` bytes taken from a shared pool.
    /// Each full block is hashed on the thread pool, blocks in order, while it is written on another thread: hashing
    /// and writing run side by side, and the request keeps receiving. At most two writes and three hash jobs are
    /// outstanding, so memory stays a few blocks per request, and at most ``AlignedBlock/inFlightLimit`` blocks wait
    /// for hashing and writing across every body at once: under many uploads at once a request waits for a turn
    /// (its client for the connection to take more), holding only the block it fills, instead of each holding its
    /// few blocks.
    ///
    /// Where the platform allows it (Linux), blocks are written with `O_DIRECT`: the bytes go from the block to the
    /// disk without being copied into the page cache, which is most of the cost of a write on a virtual machine. The
    /// final partial block, and every write on a file system that refuses direct I/O, goes through the page cache.
    /// Either way the file is fsynced before this returns.
    ///
    /// - Returns: the temporary path and the digests. The caller commits or discards the path.
    func write<Body: AsyncSequence & Sendable>(
        _ body: Body, checksums algorithms: [ChecksumAlgorithm], maxSize: Int64
    ) async throws -> (tempPath: String, digests: BodyDigests) where Body.Element == ByteBuffer {
        let tempPath = "\(tmpDirectory)/\(Hex.randomId())"
        let file = try TempFile(path: tempPath, direct: directIO)
        let digests = DigestState(algorithms: algorithms)
        var writes: [Task<Void, any Error>] = []
        var hashes: [Task<Void, any Error>] = []
        do {
            var size: Int64 = 0
            var offset: Int64 = 0
            var block = try AlignedBlock.take()
            func flush(_ full: AlignedBlock) async throws {
                let at = offset
                offset += Int64(full.count)
                if hashes.count >= 3 { try await hashes.removeFirst().value }
                if writes.count >= 2 { try await writes.removeFirst().value }
                try checkRoom(for: Int64(full.count) * Int64(writes.count + 1))
                // A turn among every body's blocks waiting to be hashed and written; handed back once this one is.
                await turns.acquire()
                let previous = hashes.last
                let hash = Task { [threadPool] in
                    try await previous?.value
                    try await digests.update(full, on: threadPool)
                }
                hashes.append(hash)
                writes.append(Task { [diskPool, turns] in
                    defer { turns.release() }
                    var failure: (any Error)?
                    do { try await diskPool.runIfActive { try file.write(full, at: at) } } catch { failure = error }
                    _ = await hash.result
                    if let failure { throw failure }
                })
            }
            for try await received in body {
                size += Int64(received.readableBytes)
                if size > maxSize {
                    throw FerryDomainError(.tooLarge, "Your proposed upload exceeds the maximum allowed size.")
                }
                var buffer = received
                while buffer.readableBytes > 0 {
                    buffer.readWithUnsafeReadableBytes { block.append($0) }
                    if block.isFull {
                        try await flush(block)
                        block = try AlignedBlock.take()
                    }
                }
            }
            if block.count > 0 { try await flush(block) }
            for task in writes + hashes { try await task.value }
            writes = []
            hashes = []
            try await diskPool.runIfActive { try file.syncAndClose() }
            return (tempPath, digests.finish(size: size))
        } catch {
            // Nothing may still write to the descriptor when it is closed.
            for task in writes + hashes { _ = await task.result }
            file.closeDescriptor()
            unlink(tempPath)
            throw error
        }
    }

    /// Throws `storageFull` when writing `bytes` more would leave less than ``reserve`` free.
    private func checkRoom(for bytes: Int64) throws {
        guard reserve > 0, let free = freeBytes(root), free - bytes < reserve else { return }
        throw FerryDomainError.outOfSpace
    }

    /// Moves a finished temporary file into place under a new blob name and makes the rename durable.
    func commit(tempPath: String) async throws -> String {
        let name = Hex.randomId()
        let final = path(of: name)
        let directory = (final as NSString).deletingLastPathComponent
        try await diskPool.runIfActive {
            try makeFolder(directory)
            if rename(tempPath, final) != 0 { throw POSIXFileError("rename", errno) }
            try syncNamed(final, in: directory)
        }
        return name
    }

    /// Syncs the directory a blob was just named in; when that fails the name is taken back (the blob is not
    /// acknowledged on a name a power cut could lose) and the error thrown.
    private func syncNamed(_ path: String, in directory: String) throws {
        do {
            try syncDirectory(directory)
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Deletes a temporary file.
    func discard(tempPath: String) async {
        unlink(tempPath)
    }

    @discardableResult
    func remove(_ blobs: [String]) async -> [String] {
        let paths = blobs.map { (blob: $0, path: path(of: $0)) }
        @Sendable func unlinkAll() -> [String] {
            paths.filter { unlink($0.path) != 0 && errno != ENOENT }.map(\.blob)
        }
        do {
            return try await threadPool.runIfActive { unlinkAll() }
        } catch {
            // The pool is shutting down: delete here instead.
            return unlinkAll()
        }
    }

    /// Blob files are read by this process only: its leases cover every reader, so a blob nothing references goes at
    /// once, or when its last reader lets go.
    var retirementGrace: Duration? { nil }

    func removeDetached(_ blobs: [String]) {
        for blob in blobs { unlink(path(of: blob)) }
    }

    /// Gives the bytes of `blob` a second, new blob name (a hard link: one file, two names; deleting either name
    /// leaves the other). Where the file system cannot link, the bytes are copied.
    func link(_ blob: String) async throws -> String {
        let name = Hex.randomId()
        let source = path(of: blob)
        let target = path(of: name)
        let directory = (target as NSString).deletingLastPathComponent
        let temp = "\(tmpDirectory)/\(Hex.randomId())"
        try await diskPool.runIfActive {
            try makeFolder(directory)
            if Foundation.link(source, target) != 0 {
                let code = errno
                guard code == EXDEV || code == EPERM || code == EMLINK || code == ENOTSUP else {
                    throw POSIXFileError("link", code)
                }
                guard try BackupFiles.copy(source, to: temp) != nil else { throw POSIXFileError("open", ENOENT) }
                if rename(temp, target) != 0 {
                    let code = errno
                    unlink(temp)
                    throw POSIXFileError("rename", code)
                }
            }
            // The orphan collector judges a file by its age: the new name must not look like an old orphan while
            // the catalog entry that will reference it is being written.
            utimes(target, nil)
            try syncNamed(target, in: directory)
        }
        return name
    }

    /// Reads `length` bytes at `offset` of a blob.
    func read(blob: String, offset: Int64, length: Int) async throws -> ByteBuffer {
        let path = path(of: blob)
        return try await threadPool.runIfActive {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw POSIXFileError("open", errno) }
            defer { close(fd) }
            var buffer = ReadBuffers.allocator.buffer(capacity: length)
            try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { out in
                guard let base = out.baseAddress else { return 0 }
                var done = 0
                while done < length {
                    let n = pread(fd, base + done, length - done, off_t(offset) + off_t(done))
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw POSIXFileError("read", errno)
                    }
                    if n == 0 { throw POSIXFileError("read", EIO) }
                    done += n
                }
                return done
            }
            return buffer
        }
    }

    /// Streams a blob's bytes in chunks of ``readChunk``, each read when the consumer asks for it.
    func bytes(of blob: String, offset: Int64, length: Int64) -> AsyncThrowingStream<ByteBuffer, any Error> {
        let position = NIOLockedValueBox((offset: offset, remaining: length))
        return AsyncThrowingStream(unfolding: {
            let (at, remaining) = position.withLockedValue { ($0.offset, $0.remaining) }
            guard remaining > 0 else { return nil }
            let n = Int(Swift.min(remaining, Int64(Self.readChunk)))
            let buffer = try await read(blob: blob, offset: at, length: n)
            position.withLockedValue { $0 = ($0.offset + Int64(n), $0.remaining - Int64(n)) }
            return buffer
        })
    }

    /// Blob files last modified before `cutoff`.
    func blobs(olderThan cutoff: Date) async throws -> [String] {
        let fm = FileManager.default
        var names: [String] = []
        for directory in try fm.contentsOfDirectory(atPath: blobDirectory) {
            for name in (try? fm.contentsOfDirectory(atPath: blobDirectory + "/" + directory)) ?? [] {
                let attributes = try? fm.attributesOfItem(atPath: path(of: name))
                if let modified = attributes?[.modificationDate] as? Date, modified < cutoff { names.append(name) }
            }
        }
        return names
    }
}

/// MD5 and the requested checksums of a body, updated by one hash job at a time (each waits for the one before it).
///
/// The MD5 goes to ``MD5Batcher``, which hashes it side by side with other bodies' blocks; the other checksums run on
/// the thread pool meanwhile.
private final class DigestState: @unchecked Sendable {
    // Only the chain of hash jobs in `BlobFiles.write` touches these, strictly one after another, and `finish` runs
    // after the last of them.
    private let md5 = MD5Digest()
    private var hashers: [Checksummer]
    private let algorithms: [ChecksumAlgorithm]

    init(algorithms: [ChecksumAlgorithm]) {
        self.algorithms = algorithms
        hashers = algorithms.map { Checksummer($0) }
    }

    func update(_ block: AlignedBlock, on threadPool: NIOThreadPool) async throws {
        async let md5Done: Void = MD5Batcher.shared.update(md5, with: block.bytes, owner: block)
        if !hashers.isEmpty {
            try await threadPool.runIfActive {
                for index in self.hashers.indices { self.hashers[index].update(block.bytes) }
            }
        }
        await md5Done
    }

    func finish(size: Int64) -> BodyDigests {
        var checksums: [String: [UInt8]] = [:]
        for (algorithm, hasher) in zip(algorithms, hashers) { checksums[algorithm.s3Name] = hasher.finalize() }
        return BodyDigests(size: size, md5: md5.finalize(), checksums: checksums)
    }
}

/// A failed file-system call inside the store; its description names the call, never a user's key.
struct POSIXFileError: Error, CustomStringConvertible {
    var call: String
    var code: Int32
    init(_ call: String, _ code: Int32) {
        self.call = call
        self.code = code
    }
    var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
}
