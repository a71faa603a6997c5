import Foundation
import GRDB

extension SQLiteCatalog: ServiceLeaseStore {
    static let leaseMigration = Migration(
        "v8-service-leases", "CREATE TABLE serviceLease (name TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, expiresAt DOUBLE NOT NULL)")

    public func acquireLease(_ name: String, owner: String, duration: Duration, now: Date) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO serviceLease (name, owner, expiresAt) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expiresAt = excluded.expiresAt
                    WHERE serviceLease.owner = excluded.owner OR serviceLease.expiresAt < ?
                    """,
                arguments: [
                    name, owner, now.addingTimeInterval(duration.timeInterval).timeIntervalSince1970,
                    now.timeIntervalSince1970,
                ])
            return try String.fetchOne(db, sql: "SELECT owner FROM serviceLease WHERE name = ?", arguments: [name]) == owner
        }
    }

    public func releaseLease(_ name: String, owner: String) async throws {
        try await execute("DELETE FROM serviceLease WHERE name = ? AND owner = ?", [name, owner])
    }

    /// Gives up every lease, for a process that has just locked the data directory holding this catalog: only one
    /// process at a time can (``DataDirectoryLock``), so a lease found here is one an earlier process held when it
    /// ended (killed, or stopped mid-pass). Without this, the new process would wait for such a lease to run out (up to
    /// ten minutes) and then for its service's next pass (the collector's is an hour away) before expiring uploads,
    /// applying lifecycle rules or delivering webhook events again.
    package func releaseLeasesOfEndedProcesses() throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM serviceLease")
            // A media job that was running when its process ended: its lease has ended with it, so the job is taken
            // over at once (as a dead worker's, its attempt counted) rather than when the lease would have run out.
            try db.execute(sql: "UPDATE mediaJob SET leaseExpiresAt = 0 WHERE state = 'running'")
        }
    }
}
