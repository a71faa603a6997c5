#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The data directory is for the server's eyes only: directories 0700 and files 0600, whatever the umask and
/// whatever mode a directory had before.
package enum PrivateFiles {
    /// Creates `path` (and its missing parents) as a 0700 directory, or makes an existing one 0700.
    /// - Throws: ``Unusable`` naming `path` when it is a file or cannot be made.
    package static func directory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw Unusable(path: path, kind: "directory", reason: "it is a file, not a directory")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let posix = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError).map { Int32($0.code) }
            let reason = posix.map { String(cString: strerror($0)) } ?? "\(error)"
            throw Unusable(path: path, kind: "directory", reason: reason)
        }
        guard chmod(path, 0o700) == 0 else {
            let reason = String(cString: strerror(errno))
            throw Unusable(path: path, kind: "directory", reason: "its mode cannot be set to 0700: \(reason)")
        }
    }

    /// A directory or file the server needs (the data directory or one in it) that could not be made, opened or
    /// made private.
    package struct Unusable: Error, CustomStringConvertible {
        /// The directory or file.
        package var path: String
        /// `directory` or `file`.
        package var kind: String
        /// Why, in words.
        package var reason: String

        package var description: String { "\(path) cannot be used as a \(kind): \(reason)." }
    }

    /// Creates an empty 0600 file at `path` when there is none, and makes an existing one 0600 (SQLite then gives its
    /// WAL and shared-memory files the same mode).
    /// - Throws: ``Unusable`` naming `path`.
    package static func file(_ path: String) throws {
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Unusable(path: path, kind: "file", reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else {
            let reason = String(cString: strerror(errno))
            throw Unusable(path: path, kind: "file", reason: "its mode cannot be set to 0600: \(reason)")
        }
    }


    /// Makes every file below `root` 0600 and every directory 0700 (for files a previous version left readable).
    package static func tighten(_ root: String) {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return }
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: if info.st_mode & 0o777 != 0o700 { chmod(path, 0o700) }
            case S_IFREG: if info.st_mode & 0o777 != 0o600 { chmod(path, 0o600) }
            default: break
            }
        }
    }
}
