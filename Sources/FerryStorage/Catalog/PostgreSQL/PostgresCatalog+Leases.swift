import Foundation
import PostgresNIO

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
        try await execute("DELETE FROM service_lease WHERE name = \(name) AND owner = \(owner)")
    }
}
