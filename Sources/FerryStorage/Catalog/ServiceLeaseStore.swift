import Foundation
import GRDB
import PostgresNIO

/// Leases that let one node at a time do what must not be done twice at once: deliver webhook events in order, collect
/// unfinished uploads. A node holds a lease until it expires unless it renews it; when the node dies, another takes the
/// lease over once it has expired.
public protocol ServiceLeaseStore: Sendable {
    /// Takes the lease `name` for `owner` until `now + duration` when it is free, expired or already `owner`'s (then
    /// renews it); true when `owner` holds it afterwards.
    func acquireLease(_ name: String, owner: String, duration: Duration, now: Date) async throws -> Bool
    /// Gives the lease up, when `owner` holds it.
    func releaseLease(_ name: String, owner: String) async throws
}

extension SQLiteCatalog: ServiceLeaseStore {
    static func registerLeaseMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v8-service-leases") { db in
            try db.execute(
                sql: "CREATE TABLE serviceLease (name TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, expiresAt DOUBLE NOT NULL)")
        }
    }

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
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM serviceLease WHERE name = ? AND owner = ?", arguments: [name, owner])
        }
    }
}

extension PostgresCatalog: ServiceLeaseStore {
    public func acquireLease(_ name: String, owner: String, duration: Duration, now: Date) async throws -> Bool {
        let expires = now.addingTimeInterval(duration.timeInterval).timeIntervalSince1970
        let time = now.timeIntervalSince1970
        let holders = try await strings(
            """
            INSERT INTO service_lease (name, owner, expires_at) VALUES (\(name), \(owner), \(expires))
            ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
            WHERE service_lease.owner = EXCLUDED.owner OR service_lease.expires_at < \(time)
            RETURNING owner
            """)
        return holders.first == owner
    }

    public func releaseLease(_ name: String, owner: String) async throws {
        try await client.query("DELETE FROM service_lease WHERE name = \(name) AND owner = \(owner)", logger: logger)
    }
}
