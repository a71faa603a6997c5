import FerryCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An advisory lock (`flock`) on one upload's checkpoint, held by the run that sends the upload: a second run of the
/// same upload (another process, or another task in this one) is refused instead of sending the same parts and
/// writing the same checkpoint. The kernel lets go of it when the holding process ends, however it ends.
///
/// The lock is taken on a file beside the checkpoint (`.<checkpoint id>.ferry-lock`), not on the checkpoint itself,
/// which every write replaces by a rename. The holder removes the lock file when it lets go; one a killed process left
/// is taken over by the next run. A run that locked a file someone removed meanwhile locks again, so two runs never
/// both hold the lock.
package final class CheckpointLock: @unchecked Sendable {
    // `descriptor` is only touched while holding `guardLock`.
    private let guardLock = NSLock()
    private var descriptor: Int32
    /// The lock file.
    package let url: URL

    private init(descriptor: Int32, url: URL) {
        self.descriptor = descriptor
        self.url = url
    }

    /// Takes the lock at `url` without waiting; nil when someone else holds it.
    ///
    /// - Throws: ``FerryError`` `invalidArgument` when the lock file cannot be created or locked.
    package static func acquire(_ url: URL) throws(FerryError) -> CheckpointLock? {
        let path = url.path
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw FerryError(.invalidArgument, "The checkpoint lock \(path) cannot be created: \(String(cString: strerror(errno))).")
            }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let failure = errno
                close(fd)
                if failure == EWOULDBLOCK { return nil }
                if failure == EINTR { continue }
                throw FerryError(.invalidArgument, "The checkpoint lock \(path) cannot be taken: \(String(cString: strerror(failure))).")
            }
            // The file locked must still be the one at the path: a holder that let go removed it, and a run that
            // opened it before that holds a lock on a file no one else will open.
            var opened = stat()
            var named = stat()
            if fstat(fd, &opened) == 0, stat(path, &named) == 0, opened.st_dev == named.st_dev, opened.st_ino == named.st_ino {
                return CheckpointLock(descriptor: fd, url: url)
            }
            close(fd)
        }
    }

    /// Lets go of the lock and removes its file; a second call does nothing.
    package func release() {
        guardLock.withLock {
            guard descriptor >= 0 else { return }
            // Removed while still locked, so that no one locks this file after it is gone from the directory.
            unlink(url.path)
            close(descriptor)
            descriptor = -1
        }
    }

    deinit { release() }
}
