import Crypto
import FerryCore
import Foundation

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

    /// Reads `range` into memory (one part: memory stays about concurrency × part size).
    func read(_ range: Range<Int64>) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw FerryError(.fileNotFound, "The file \(path) cannot be opened.") }
        defer { close(fd) }
        let count = Int(range.upperBound - range.lowerBound)
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        try bytes.withUnsafeMutableBytes { buffer in
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(range.lowerBound) + off_t(done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw FerryError(.cannotResumeUpload, "The file \(path) became shorter while it was being uploaded.")
                }
                done += n
            }
        }
        return bytes
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
        return FileFingerprint(size: size, modificationTime: modified, sampleHash: SigV4.hex(hasher.finalize()))
    }
}
