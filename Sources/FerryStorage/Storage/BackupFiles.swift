#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import FerryCore
import Foundation

/// The file operations of a backup and a restore (and of blob links where the file system cannot link): streamed
/// copies that hash the bytes as they pass and are durable when they return, and durable directory entries. Blocking;
/// callers run them on a thread pool.
enum BackupFiles {
    /// Bytes read and written at a time; a file is never held whole in memory.
    static let chunk = 1 << 20

    /// Copies `source` to a new file `target` (mode 0600) in chunks, hashing them as they pass, and fsyncs it.
    /// A symbolic link at `source` is refused, not followed.
    ///
    /// - Returns: the size and SHA-256 of the bytes copied, or nil when there is no file at `source` (and then no
    ///   file at `target` either).
    static func copy(_ source: String, to target: String) throws -> (size: Int64, sha256: String)? {
        var shared = SharedCopies()
        return try shared.copy(source, to: target)
    }

    /// Copies that keep files sharing their bytes (hard links of one file, as blob copies are) shared: the first name
    /// of a file is copied, and every later name of it is a hard link to that copy. Where the target's file system
    /// cannot link, each name is copied.
    struct SharedCopies: Sendable {
        /// The first copy of each source file (device and inode) made so far, with its size and SHA-256.
        private var copies: [FileIdentity: (path: String, size: Int64, sha256: String)] = [:]

        /// A file's device and inode.
        private struct FileIdentity: Hashable, Sendable {
            let device: UInt64
            let inode: UInt64
        }

        /// Copies `source` to a new file `target` as ``BackupFiles/copy(_:to:)`` does, or links `target` to the copy
        /// made of another name of the same file.
        ///
        /// - Returns: the size and SHA-256 of the bytes at `target`, or nil when there is no file at `source`.
        mutating func copy(_ source: String, to target: String) throws -> (size: Int64, sha256: String)? {
            let input = open(source, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard input >= 0 else {
                if errno == ENOENT { return nil }
                throw POSIXFileError("open", errno)
            }
            defer { close(input) }
            var info = stat()
            guard fstat(input, &info) == 0 else { throw POSIXFileError("fstat", errno) }
            let identity = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
            if info.st_nlink > 1, let earlier = copies[identity], link(earlier.path, target) == 0 {
                return (earlier.size, earlier.sha256)
            }
            let output = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard output >= 0 else { throw POSIXFileError("open", errno) }
            do {
                let digest = try read(input) { bytes in try writeAll(bytes, to: output) }
                guard fsync(output) == 0 else { throw POSIXFileError("fsync", errno) }
                close(output)
                if info.st_nlink > 1 { copies[identity] = (target, digest.size, digest.sha256) }
                return digest
            } catch {
                close(output)
                unlink(target)
                throw error
            }
        }
    }

    /// The size and SHA-256 of the file at `path`, read in chunks.
    static func digest(of path: String) throws -> (size: Int64, sha256: String) {
        let input = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw POSIXFileError("open", errno) }
        defer { close(input) }
        return try read(input) { _ in }
    }

    /// Writes `data` to a new file `path` (mode 0600) and fsyncs it.
    static func write(_ data: Data, to path: String) throws {
        let output = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw POSIXFileError("open", errno) }
        defer { close(output) }
        try data.withUnsafeBytes { try writeAll($0, to: output) }
        guard fsync(output) == 0 else { throw POSIXFileError("fsync", errno) }
    }

    /// Makes the entry of `path` (a file or directory created or renamed there) durable: syncs the directory holding
    /// it, the current one for a bare name.
    static func syncParent(of path: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        try syncDirectory(parent.isEmpty ? "." : parent)
    }

    /// Makes the entries of directory `path` (files created or renamed in it) durable.
    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXFileError("open", errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw POSIXFileError("fsync", errno) }
    }

    /// Renames `source` to `target` (both in one file system).
    static func rename(_ source: String, to target: String) throws {
        guard Foundation.rename(source, target) == 0 else { throw POSIXFileError("rename", errno) }
    }

    /// Reads `fd` to its end in chunks, passing each to `body`; returns the size and SHA-256 of what it read.
    private static func read(_ fd: Int32, _ body: (UnsafeRawBufferPointer) throws -> Void) throws
        -> (size: Int64, sha256: String)
    {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        guard let base = buffer.baseAddress else { throw POSIXFileError("read", EINVAL) }
        var hasher = SHA256()
        var size: Int64 = 0
        while true {
            let n = Foundation.read(fd, base, chunk)
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXFileError("read", errno)
            }
            if n == 0 { break }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            hasher.update(bufferPointer: bytes)
            try body(bytes)
            size += Int64(n)
        }
        return (size, Hex.encode(hasher.finalize()))
    }

    /// Writes all of `bytes` to `fd`.
    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32) throws {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = Foundation.write(fd, base + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXFileError("write", errno)
            }
            done += n
        }
    }
}
