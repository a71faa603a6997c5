import Foundation
import GRDB

extension SQLiteCatalog: NodeHeartbeatStore {
    static func registerNodeHeartbeatMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v-node-heartbeats") { db in
            try db.execute(
                sql: """
                    CREATE TABLE nodeHeartbeat (
                        name TEXT PRIMARY KEY NOT NULL,
                        role TEXT NOT NULL,
                        version TEXT NOT NULL,
                        startedAt DOUBLE NOT NULL,
                        lastSeen DOUBLE NOT NULL
                    )
                    """)
        }
    }

    public func recordHeartbeat(_ heartbeat: NodeHeartbeat) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO nodeHeartbeat (name, role, version, startedAt, lastSeen) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET role = excluded.role, version = excluded.version,
                    startedAt = excluded.startedAt, lastSeen = excluded.lastSeen
                    """,
                arguments: [
                    heartbeat.name, heartbeat.role, heartbeat.version, heartbeat.startedAt.timeIntervalSince1970,
                    heartbeat.lastSeen.timeIntervalSince1970,
                ])
        }
    }

    public func nodeHeartbeats() async throws -> [NodeHeartbeat] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM nodeHeartbeat ORDER BY name").map { row in
                NodeHeartbeat(
                    name: row["name"], role: row["role"], version: row["version"],
                    startedAt: Date(timeIntervalSince1970: row["startedAt"]),
                    lastSeen: Date(timeIntervalSince1970: row["lastSeen"]))
            }
        }
    }

    @discardableResult
    public func pruneHeartbeats(before date: Date) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM nodeHeartbeat WHERE lastSeen < ?", arguments: [date.timeIntervalSince1970])
            return db.changesCount
        }
    }

    public func removeHeartbeat(_ name: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM nodeHeartbeat WHERE name = ?", arguments: [name])
        }
    }
}
