import Foundation
import PostgresNIO

extension PostgresCatalog: NodeHeartbeatStore {
    /// The heartbeats table (schema version 7).
    static let nodeHeartbeatTable = [
        """
        CREATE TABLE node_heartbeat (
            name TEXT PRIMARY KEY, role TEXT NOT NULL, version TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL)
        """
    ]

    public func recordHeartbeat(_ heartbeat: NodeHeartbeat) async throws {
        try await execute(
            """
            INSERT INTO node_heartbeat (name, role, version, started_at, last_seen)
            VALUES (\(heartbeat.name), \(heartbeat.role), \(heartbeat.version),
                    \(heartbeat.startedAt.timeIntervalSince1970), \(heartbeat.lastSeen.timeIntervalSince1970))
            ON CONFLICT (name) DO UPDATE SET role = EXCLUDED.role, version = EXCLUDED.version,
                started_at = EXCLUDED.started_at, last_seen = EXCLUDED.last_seen
            """)
    }

    public func nodeHeartbeats() async throws -> [NodeHeartbeat] {
        try await rows("SELECT * FROM node_heartbeat ORDER BY name").map { row in
            NodeHeartbeat(
                name: try row.value("name"), role: try row.value("role"), version: try row.value("version"),
                startedAt: try row.date("started_at"), lastSeen: try row.date("last_seen"))
        }
    }

    @discardableResult
    public func pruneHeartbeats(before date: Date) async throws -> Int {
        let cutoff = date.timeIntervalSince1970
        return try await changed("DELETE FROM node_heartbeat WHERE last_seen < \(cutoff) RETURNING name")
    }

    public func removeHeartbeat(_ name: String) async throws {
        try await execute("DELETE FROM node_heartbeat WHERE name = \(name)")
    }
}
