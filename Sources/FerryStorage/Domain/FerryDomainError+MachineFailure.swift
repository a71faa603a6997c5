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

extension FerryDomainError {
    /// The domain error a failure of the machine under the stores stands for, when clients should hear of it by name:
    /// a full disk (or disk quota) under the data directory, a full SQLite catalog, or a PostgreSQL server out of disk
    /// (`storageFull`). Nil for anything else, which stays an internal error.
    package init?(machineFailure error: any Error) {
        let full =
            switch error {
            case let error as POSIXFileError: Self.isOutOfSpace(error.code)
            case let error as IOError: Self.isOutOfSpace(error.errnoCode)
            case let error as DatabaseError: error.resultCode == .SQLITE_FULL
            case let error as PSQLError: error.serverInfo?[.sqlState] == "53100"
            default: false
            }
        guard full else { return nil }
        self.init(.storageFull, "The server is out of storage space; nothing of this request was stored. Try again later.")
    }

    private static func isOutOfSpace(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }
}
