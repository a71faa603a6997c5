import Foundation
import GRDB

extension SQLiteCatalog: NodeHeartbeatStore {
    static let nodeHeartbeatMigration = Migration("v-node-heartbeats", """
        CREATE TABLE nodeHeartbeat (
            name TEXT PRIMARY KEY NOT NULL,
            role TEXT NOT NULL,
            version TEXT NOT NULL,
            startedAt DOUBLE NOT NULL,
            lastSeen DOUBLE NOT NULL
        )
        """)

    public func recordHeartbeat(_ heartbeat: NodeHeartbeat) async throws {
        try await execute("""
            INSERT INTO nodeHeartbeat (name, role, version, startedAt, lastSeen) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET role = excluded.role, version = excluded.version,
            startedAt = excluded.startedAt, lastSeen = excluded.lastSeen
            """, [
            heartbeat.name, heartbeat.role, heartbeat.version, heartbeat.startedAt.timeIntervalSince1970,
            heartbeat.lastSeen.timeIntervalSince1970,
        ])
    }

    public func nodeHeartbeats() async throws -> [NodeHeartbeat] {
        try await all("SELECT * FROM nodeHeartbeat ORDER BY name") { row in
            NodeHeartbeat(
                name: row["name"], role: row["role"], version: row["version"],
                startedAt: Date(timeIntervalSince1970: row["startedAt"]),
                lastSeen: Date(timeIntervalSince1970: row["lastSeen"]))
        }
    }

    @discardableResult
    public func pruneHeartbeats(before date: Date) async throws -> Int {
        try await execute("DELETE FROM nodeHeartbeat WHERE lastSeen < ?", [date.timeIntervalSince1970])
    }

    public func removeHeartbeat(_ name: String) async throws {
        try await execute("DELETE FROM nodeHeartbeat WHERE name = ?", [name])
    }
}
