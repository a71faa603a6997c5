#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import GRDB
import NIOCore
import PostgresNIO

/// Bytes free and in total on the file system holding a path.
package struct DiskSpace: Sendable {
    /// Free for the service: blocks available to an unprivileged process, not those kept for root.
    package var free: Int64
    package var total: Int64

    /// The file system holding `path`; nil when it cannot be read.
    package static func of(_ path: String) -> DiskSpace? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        let block = Int64(info.f_frsize)
        return DiskSpace(free: Int64(info.f_bavail) * block, total: Int64(info.f_blocks) * block)
    }
}

extension FerryDomainError {
    /// The domain error a failure of the machine under the stores stands for, when clients should hear of it by name:
    /// a full disk (or disk quota) under the data directory, a full SQLite catalog, or a PostgreSQL server out of disk
    /// (`storageFull`); a SQLite catalog another process keeps locked past its busy timeout (`storeUnavailable`, which
    /// clients retry: an operator's `sqlite3` shell holding a write). Nil for anything else, which stays an internal
    /// error.
    package init?(machineFailure error: any Error) {
        if let error = error as? DatabaseError, error.resultCode == .SQLITE_BUSY {
            self = .catalogBusy
            return
        }
        let full =
            switch error {
            case let error as FerryDomainError: error.code == .storageFull
            case let error as POSIXFileError: Self.isOutOfSpace(error.code)
            case let error as IOError: Self.isOutOfSpace(error.errnoCode)
            case let error as DatabaseError: error.resultCode == .SQLITE_FULL
            case let error as PSQLError: error.serverInfo?[.sqlState] == "53100"
            default: false
            }
        guard full else { return nil }
        self = .outOfSpace
    }

    /// Whether `error`, thrown by a call to the catalog or the blob storage, is a failure of that layer (a file
    /// system, SQLite, PostgreSQL or object-store error, a full disk), not a refusal the layer made on purpose (a
    /// quota, a precondition, a missing object) or a request that went away.
    package static func isStoreFailure(_ error: any Error) -> Bool {
        switch error {
        case let error as FerryDomainError: [.storageFull, .storeUnavailable, .storeRefused].contains(error.code)
        case is POSIXFileError, is DatabaseError, is PSQLError: true
        default: false
        }
    }

    /// The catalog is locked by another process's write for longer than a request waits.
    package static let catalogBusy = FerryDomainError(
        .storeUnavailable, "The catalog is locked by another process's write; nothing of this request was stored. "
            + "Try again later.", retryAfterSeconds: 1)

    /// The server's disk (or catalog) is full, or its free space down to the reserve kept for the catalog.
    package static let outOfSpace = FerryDomainError(
        .storageFull, "The server is out of storage space; nothing of this request was stored. Try again later.")

    private static func isOutOfSpace(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }
}
