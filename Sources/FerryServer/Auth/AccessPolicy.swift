import Foundation

/// What a principal may do: a list of statements, each allowing actions on a bucket and a key prefix.
///
/// Nothing is allowed unless a statement allows it. Actions are S3 action names (`s3:GetObject`, `s3:PutObject`, …),
/// media operations (`media:CreateUploadVideo`, …), or a trailing-wildcard pattern (`s3:*`, `*`).
public struct AccessPolicy: Codable, Sendable, Hashable {
    /// One grant.
    public struct Statement: Codable, Sendable, Hashable {
        /// Allowed actions; `*` and `prefix*` patterns match several.
        public var actions: [String]
        /// Bucket the grant covers; `*` for every bucket.
        public var bucket: String
        /// Key prefix the grant covers; empty for every key. Bucket-level actions ignore it.
        public var keyPrefix: String

        /// Creates a statement.
        public init(actions: [String], bucket: String = "*", keyPrefix: String = "") {
            self.actions = actions
            self.bucket = bucket
            self.keyPrefix = keyPrefix
        }

        func allowsAction(_ action: String) -> Bool {
            actions.contains { pattern in
                pattern.hasSuffix("*") ? action.hasPrefix(pattern.dropLast()) : pattern == action
            }
        }

        func allows(action: String, bucket: String?, key: String?) -> Bool {
            guard allowsAction(action) else { return false }
            if self.bucket != "*" && self.bucket != bucket { return false }
            if let key { return key.hasPrefix(keyPrefix) }
            return true
        }
    }

    /// The grants.
    public var statements: [Statement]

    /// Creates a policy.
    public init(statements: [Statement]) {
        self.statements = statements
    }

    /// Everything on everything (the root key).
    public static let fullAccess = AccessPolicy(statements: [Statement(actions: ["*"])])

    /// Whether the policy allows `action` on `bucket` and (for object actions) `key`.
    public func allows(action: String, bucket: String? = nil, key: String? = nil) -> Bool {
        statements.contains { $0.allows(action: action, bucket: bucket, key: key) }
    }
}

/// Who made a request, as resolved from its credentials.
public struct Principal: Sendable, Hashable {
    /// The access key id that signed the request.
    public var accessKeyId: String
    /// The long-term key a temporary credential was issued under (its own id for a long-term key).
    public var parentAccessKeyId: String
    /// What it may do.
    public var policy: AccessPolicy
    /// When a temporary credential expires; nil for a long-term key.
    public var expiration: Date?
    /// Whether this is the server's root key.
    public var isRoot: Bool

    /// Creates a principal.
    public init(
        accessKeyId: String, parentAccessKeyId: String, policy: AccessPolicy, expiration: Date?, isRoot: Bool
    ) {
        self.accessKeyId = accessKeyId
        self.parentAccessKeyId = parentAccessKeyId
        self.policy = policy
        self.expiration = expiration
        self.isRoot = isRoot
    }
}
