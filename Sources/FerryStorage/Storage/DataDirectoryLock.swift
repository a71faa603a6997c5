#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// One process at a time owns a data directory: an exclusive lock on its `lock` file, held while the server is open
/// and released when the process ends, however it ends. The lock file names the owner (its pid and, once it listens,
/// its address), so another command on the same directory can talk to the running server instead of opening it a
/// second time (which would, among other things, clear the bodies it is receiving).
package final class DataDirectoryLock: Sendable {
    private let fd: Int32
    let path: String

    /// Locks `directory`, or throws ``DataDirectoryInUse``.
    package init(directory: String) throws {
        path = directory + "/lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXFileError("open", errno) }
        // A lock file found (left by someone else, or copied in) is made private as one made here is.
        _ = fchmod(fd, 0o600)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno
            close(fd)
            guard busy == EWOULDBLOCK else { throw POSIXFileError("flock", busy) }
            let owner = Self.owner(of: directory)
            throw DataDirectoryInUse(directory: directory, pid: owner.pid, endpoint: owner.endpoint)
        }
        self.fd = fd
        record(endpoint: nil)
    }

    deinit {
        // Closing the descriptor releases the lock.
        close(fd)
    }

    /// Writes the owner's pid and, once known, its address into the lock file.
    package func record(endpoint: String?) {
        let text = "\(getpid())\n" + (endpoint.map { $0 + "\n" } ?? "")
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
    }

    /// The pid and address a locked directory's owner recorded.
    static func owner(of directory: String) -> (pid: Int32?, endpoint: String?) {
        let text = (try? String(contentsOfFile: directory + "/lock", encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").map(String.init)
        return (lines.first.flatMap { Int32($0) }, lines.count > 1 ? lines[1] : nil)
    }
}

/// A data directory is in use by another Ferry process (`ferry serve`, or a command running the service in-process).
public struct DataDirectoryInUse: Error, CustomStringConvertible {
    /// The directory.
    public var directory: String
    /// The owner's pid, when its lock file names it.
    public var pid: Int32?
    /// The owner's address (`http://127.0.0.1:9000`), once it listens.
    public var endpoint: String?

    public var description: String {
        var text = "The data directory \(directory) is in use by another Ferry process"
        if let pid { text += " (pid \(pid)" + (endpoint.map { ", listening on \($0)" } ?? "") + ")" }
        // Only a process that listens takes requests (a restore, or a service still starting, does not).
        guard let endpoint else { return text + "; wait for it to end, stop it, or use another --data-dir." }
        return text + "; stop it, use another --data-dir, or send requests to it with --endpoint \(endpoint)."
    }
}
