import Foundation
import FerryCore
import GRDB

extension SQLiteCatalog {
    /// The table of console sessions ended before they expired.
    static let revokedSessionMigration = Migration(
        "v15-revoked-sessions", "CREATE TABLE revokedSession (digest TEXT PRIMARY KEY NOT NULL, expiresAt DOUBLE NOT NULL)")

    public func revokeSession(_ digest: String, expiration: Date, now: Date) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM revokedSession WHERE expiresAt < ?", arguments: [now.timeIntervalSince1970])
            try db.execute(
                sql: "INSERT OR REPLACE INTO revokedSession (digest, expiresAt) VALUES (?, ?)",
                arguments: [digest, expiration.timeIntervalSince1970])
        }
    }

    public func isSessionRevoked(_ digest: String) async throws -> Bool {
        try await pool.read { db in try db.exists("SELECT 1 FROM revokedSession WHERE digest = ?", [digest]) }
    }

    /// The stored key, or nil.
    public func accessKey(_ id: String) async throws -> StoredAccessKey? {
        // Exactly this id: SQLite's text comparison may stop at a NUL the id holds.
        try await first("SELECT * FROM accessKey WHERE id = ?", [id], accessKey).flatMap { $0.accessKeyId == id ? $0 : nil }
    }

    /// Every stored key, oldest first.
    public func accessKeys() async throws -> [StoredAccessKey] {
        try await all("SELECT * FROM accessKey ORDER BY createdAt, id", [], accessKey)
    }

    /// Stores a new key, its secret sealed.
    public func insertAccessKey(_ key: StoredAccessKey) async throws {
        let policy = String(decoding: try JSONEncoder().encode(key.policy), as: UTF8.self)
        let secret = try secrets?.seal(key.secretAccessKey) ?? key.secretAccessKey
        let quota = try AccessKeyQuotaColumn.encode(key.quota)
        try await execute("""
            INSERT INTO accessKey (id, secret, policy, status, description, createdAt, quota)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """, [
            key.accessKeyId, secret, policy, key.status.rawValue, key.description, key.createdAt.timeIntervalSince1970,
            quota,
        ])
    }

    /// Sets a key's quota; false when there is no such key.
    public func setAccessKeyQuota(_ id: String, _ quota: AccessKeyQuota) async throws -> Bool {
        let column = try AccessKeyQuotaColumn.encode(quota)
        return try await execute("UPDATE accessKey SET quota = ? WHERE id = ?", [column, id]) > 0
    }

    /// Seals the secrets a catalog stored before it had a server key to seal them with.
    func sealPlaintextSecrets() throws {
        guard let secrets else { return }
        try pool.write { db in
            for row in try Row.fetchAll(db, sql: "SELECT id, secret FROM accessKey") {
                let stored: String = row["secret"]
                guard !SecretBox.isSealed(stored) else { continue }
                try db.execute(
                    sql: "UPDATE accessKey SET secret = ? WHERE id = ?", arguments: [try secrets.seal(stored), row["id"]])
            }
        }
    }

    /// An access key secret sealed with a server key that the catalog file at `path` holds; nil when it holds none,
    /// or there is no catalog (or no key table) yet. Only read.
    static func sealedSecret(at path: String) throws -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            guard try db.tableExists("accessKey") else { return nil }
            return try String.fetchAll(db, sql: "SELECT secret FROM accessKey").first(where: SecretBox.isSealed)
        }
    }

    /// Sets a key's status; false when there is no such key.
    public func setAccessKeyStatus(_ id: String, _ status: StoredAccessKey.Status) async throws -> Bool {
        try await execute("UPDATE accessKey SET status = ? WHERE id = ?", [status.rawValue, id]) > 0
    }

    private func accessKey(_ row: Row) throws -> StoredAccessKey {
        let stored: String = row["secret"]
        return StoredAccessKey(
            accessKeyId: row["id"], secretAccessKey: try secrets?.open(stored) ?? stored,
            policy: try CatalogJSON.decode(AccessPolicy.self, row["policy"]),
            status: StoredAccessKey.Status(rawValue: row["status"]) ?? .disabled, description: row["description"],
            createdAt: Date(timeIntervalSince1970: row["createdAt"]), quota: try AccessKeyQuotaColumn.decode(row["quota"]))
    }
}
