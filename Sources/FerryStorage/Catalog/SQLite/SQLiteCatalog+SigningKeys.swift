import Foundation
import GRDB

/// Playback signing keys: public keys only, each with the access key that created it.
extension SQLiteCatalog {
    /// The signing key table.
    static let signingKeyMigration = Migration("v14-signing-keys", """
        CREATE TABLE signingKey (
            id TEXT PRIMARY KEY NOT NULL, algorithm TEXT NOT NULL, publicKey TEXT NOT NULL,
            owner TEXT NOT NULL, createdAt DOUBLE NOT NULL
        );
        CREATE INDEX signingKey_by_owner ON signingKey(owner, createdAt);
        """)

    public func insertSigningKey(_ key: StoredSigningKey, limit: Int) async throws -> Bool {
        try await pool.write { db in
            let held = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM signingKey WHERE owner = ?", arguments: [key.owner]) ?? 0
            guard held < limit else { return false }
            try db.execute(
                sql: "INSERT INTO signingKey (id, algorithm, publicKey, owner, createdAt) VALUES (?, ?, ?, ?, ?)",
                arguments: [key.keyId, key.algorithm, key.publicKey, key.owner, key.createdAt.timeIntervalSince1970])
            return true
        }
    }

    public func signingKey(_ id: String) async throws -> StoredSigningKey? {
        try await first("SELECT * FROM signingKey WHERE id = ?", [id], Self.signingKey)
    }

    public func signingKeys(owner: String?) async throws -> [StoredSigningKey] {
        if let owner {
            return try await all(
                "SELECT * FROM signingKey WHERE owner = ? ORDER BY createdAt, id", [owner], Self.signingKey)
        }
        return try await all("SELECT * FROM signingKey ORDER BY createdAt, id", [], Self.signingKey)
    }

    public func deleteSigningKey(_ id: String) async throws -> Bool {
        try await execute("DELETE FROM signingKey WHERE id = ?", [id]) > 0
    }

    private static func signingKey(_ row: Row) -> StoredSigningKey {
        StoredSigningKey(
            keyId: row["id"], algorithm: row["algorithm"], publicKey: row["publicKey"], owner: row["owner"],
            createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }
}
