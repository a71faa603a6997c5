import FerryCore
import Foundation

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
    /// Its limits, which its temporary credentials share.
    public var quota: AccessKeyQuota

    /// Creates a key.
    package init(
        accessKeyId: String, secretAccessKey: String, policy: AccessPolicy, status: Status, description: String,
        createdAt: Date, quota: AccessKeyQuota = .unlimited
    ) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.policy = policy
        self.status = status
        self.description = description
        self.createdAt = createdAt
        self.quota = quota
    }
}

// `description` is the key's free text here, so printing goes through `debugDescription` and the mirror, both without
// the secret.
extension StoredAccessKey: CustomDebugStringConvertible, CustomReflectable {
    /// The key without its secret.
    public var debugDescription: String {
        "StoredAccessKey(accessKeyId: \(accessKeyId), secretAccessKey: <redacted>, status: \(status.rawValue))"
    }
    /// A mirror without the secret.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessKeyId": accessKeyId, "secretAccessKey": "<redacted>", "policy": policy, "status": status,
                "description": description, "createdAt": createdAt, "quota": quota,
            ], displayStyle: .struct)
    }
}
