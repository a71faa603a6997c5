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
        /// Key prefix the grant covers; empty for every key. A statement scoped to a prefix allows, of the bucket-level
        /// actions, only ``prefixScopedBucketActions``: a key confined to some keys of a bucket neither deletes nor
        /// configures the bucket (a lifecycle rule or a DeleteBucket would reach every other key in it).
        public var keyPrefix: String
        /// When set, the one key the grant covers (an upload credential's object).
        public var key: String?

        /// Creates a statement.
        public init(actions: [String], bucket: String = "*", keyPrefix: String = "", key: String? = nil) {
            self.actions = actions
            self.bucket = bucket
            self.keyPrefix = keyPrefix
            self.key = key
        }

        enum CodingKeys: String, CodingKey { case actions, bucket, keyPrefix, key }

        /// Decodes a statement; `bucket` defaults to every bucket and `keyPrefix` to every key. A field it does not know
        /// (a misspelt `bukcet`) is refused rather than left to widen the grant to every bucket.
        public init(from decoder: any Decoder) throws {
            try UnknownFieldError.check(decoder, knowing: CodingKeys.self, takes: "actions, bucket, keyPrefix and key")
            let c = try decoder.container(keyedBy: CodingKeys.self)
            actions = try c.decode([String].self, forKey: .actions)
            bucket = try c.decodeIfPresent(String.self, forKey: .bucket) ?? "*"
            keyPrefix = try c.decodeIfPresent(String.self, forKey: .keyPrefix) ?? ""
            key = try c.decodeIfPresent(String.self, forKey: .key)
        }

        /// Whether the statement names `action`.
        public func allowsAction(_ action: String) -> Bool {
            actions.contains { pattern in
                pattern.hasSuffix("*") ? action.hasPrefix(pattern.dropLast()) : pattern == action
            }
        }

        /// Whether the statement allows `action` on `bucket` and `key`.
        public func allows(action: String, bucket: String?, key: String?) -> Bool {
            guard allowsAction(action) else { return false }
            // Bucket and key scope object-service actions; media operations have neither.
            guard action.hasPrefix("s3:") else { return true }
            if self.bucket != "*" && self.bucket != bucket { return false }
            if let key {
                // Bytes, as keys are compared: canonically equivalent keys are different objects.
                if let exact = self.key, !exact.isByteEqual(to: key) { return false }
                return key.hasBytePrefix(keyPrefix)
            }
            return self.key == nil && (keyPrefix.isEmpty || Self.prefixScopedBucketActions.contains(action))
        }

        /// The bucket-level actions a statement scoped to a key prefix allows: listings (whose `prefix` must lie
        /// within the scope, ``AccessPolicy/allowsListing(action:bucket:prefix:namedOnly:)``), HeadBucket
        /// (`s3:ListBucket`), ListBuckets, and reading the bucket's region and versioning state.
        public static let prefixScopedBucketActions: Set<String> = [
            "s3:ListAllMyBuckets", "s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads",
            "s3:GetBucketLocation", "s3:GetBucketVersioning",
        ]
    }

    /// The grants.
    public var statements: [Statement]

    /// Whether the policy allows listing `bucket` under `prefix` (`action` is `s3:ListBucket` or another listing
    /// action): a statement scoped to a key prefix allows listings whose prefix lies within it, and no other.
    /// With `namedOnly`, only a statement that names `bucket` itself counts (not one for every bucket).
    public func allowsListing(action: String, bucket: String, prefix: String, namedOnly: Bool = false) -> Bool {
        statements.contains { statement in
            statement.allowsAction(action) && (statement.bucket == "*" && !namedOnly || statement.bucket == bucket)
                && statement.key == nil && prefix.hasBytePrefix(statement.keyPrefix)
        }
    }

    /// Creates a policy.
    public init(statements: [Statement]) {
        self.statements = statements
    }

    /// Everything on everything (the root key).
    public static let fullAccess = AccessPolicy(statements: [Statement(actions: ["*"])])

    /// Whether the policy allows `action` on `bucket` and (for object actions) `key`; with `namedOnly`, only by a
    /// statement that names `bucket` itself (not one for every bucket).
    public func allows(action: String, bucket: String? = nil, key: String? = nil, namedOnly: Bool = false) -> Bool {
        statements.contains { (!namedOnly || $0.bucket == bucket) && $0.allows(action: action, bucket: bucket, key: key) }
    }
}

