import Foundation
import PostgresNIO

/// Playback signing keys: public keys only, each with the access key that created it.
extension PostgresCatalog {
    /// Migration 11: the signing key table.
    static let signingKeyMigration = [
        """
        CREATE TABLE signing_key (
            id TEXT PRIMARY KEY, algorithm TEXT NOT NULL, public_key TEXT NOT NULL, owner TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)
        """,
        "CREATE INDEX signing_key_by_owner ON signing_key (owner, created_at)",
    ]

    public func insertSigningKey(_ key: StoredSigningKey, limit: Int) async throws -> Bool {
        return try await transaction { [logger] connection in
            // The owner's inserts are serialized (across nodes) until this transaction ends.
            try await Self.lockOwner(key.owner, on: connection, logger: logger)
            let held = try await Self.rows(
                "SELECT COUNT(*) AS count FROM signing_key WHERE owner = \(key.owner)", on: connection, logger: logger
            ).first?["count"].decode(Int.self) ?? 0
            guard held < limit else { return false }
            try await connection.query(
                """
                INSERT INTO signing_key (id, algorithm, public_key, owner, created_at)
                VALUES (\(key.keyId), \(key.algorithm), \(key.publicKey), \(key.owner), \(key.createdAt.timeIntervalSince1970))
                """, logger: logger)
            return true
        }
    }

    public func signingKey(_ id: String) async throws -> StoredSigningKey? {
        try await rows("SELECT * FROM signing_key WHERE id = \(id)").first.map(Self.signingKey)
    }

    public func signingKeys(owner: String?) async throws -> [StoredSigningKey] {
        if let owner {
            return try await rows("SELECT * FROM signing_key WHERE owner = \(owner) ORDER BY created_at, id")
                .map(Self.signingKey)
        }
        return try await rows("SELECT * FROM signing_key ORDER BY created_at, id").map(Self.signingKey)
    }

    public func deleteSigningKey(_ id: String) async throws -> Bool {
        return try await changed("DELETE FROM signing_key WHERE id = \(id) RETURNING id") > 0
    }

    private static func signingKey(_ row: PostgresRandomAccessRow) throws -> StoredSigningKey {
        StoredSigningKey(
            keyId: try row.value("id"), algorithm: try row.value("algorithm"), publicKey: try row.value("public_key"),
            owner: try row.value("owner"), createdAt: try row.date("created_at"))
    }
}
