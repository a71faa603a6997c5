import Foundation
import FerryCore
import GRDB

/// A long-term access key stored in the catalog.
public struct StoredAccessKey: Sendable, Hashable {
    /// Whether the key may sign requests.
    public enum Status: String, Sendable, Codable {
        /// Usable.
        case active
        /// Rejected as unknown.
        case disabled
    }
    /// The key id.
    public var accessKeyId: String
    /// The secret (never logged).
    public var secretAccessKey: String
    /// What it may do.
    public var policy: AccessPolicy
    /// Active or disabled.
    public var status: Status
    /// Free text the creator gave.
    public var description: String
    /// Creation time.
    public var createdAt: Date
}

extension SQLiteCatalog {
    /// The stored key, or nil.
    public func accessKey(_ id: String) async throws -> StoredAccessKey? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM accessKey WHERE id = ?", arguments: [id]).map(Self.accessKey)
        }
    }

    /// Every stored key, oldest first.
    public func accessKeys() async throws -> [StoredAccessKey] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM accessKey ORDER BY createdAt, id").map(Self.accessKey)
        }
    }

    /// Stores a new key.
    public func insertAccessKey(_ key: StoredAccessKey) async throws {
        let policy = String(decoding: try JSONEncoder().encode(key.policy), as: UTF8.self)
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO accessKey (id, secret, policy, status, description, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    key.accessKeyId, key.secretAccessKey, policy, key.status.rawValue, key.description,
                    key.createdAt.timeIntervalSince1970,
                ])
        }
    }

    /// Sets a key's status; false when there is no such key.
    public func setAccessKeyStatus(_ id: String, _ status: StoredAccessKey.Status) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE accessKey SET status = ? WHERE id = ?", arguments: [status.rawValue, id])
            return db.changesCount > 0
        }
    }

    private static func accessKey(_ row: Row) throws -> StoredAccessKey {
        StoredAccessKey(
            accessKeyId: row["id"], secretAccessKey: row["secret"],
            policy: try JSONDecoder().decode(AccessPolicy.self, from: Data((row["policy"] as String).utf8)),
            status: StoredAccessKey.Status(rawValue: row["status"]) ?? .disabled, description: row["description"],
            createdAt: Date(timeIntervalSince1970: row["createdAt"]))
    }
}
