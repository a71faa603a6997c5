import FerryCore
import Foundation

/// Who made a request, as resolved from its credentials.
public struct Principal: Sendable, Hashable {
    /// The access key id that signed the request.
    public var accessKeyId: String
    /// The long-term key a temporary credential was issued under (its own id for a long-term key).
    public var parentAccessKeyId: String
    /// What it may do: every policy must allow an action (a temporary credential carries its parent's policy and the
    /// narrower one it was issued with).
    public var policies: [AccessPolicy]
    /// When a temporary credential expires; nil for a long-term key.
    public var expiration: Date?
    /// Whether this is the server's root key.
    public var isRoot: Bool
    /// The limits of the long-term key (a temporary credential has its parent's); unlimited for the root key.
    public var quota: AccessKeyQuota
    /// Buckets only a statement naming them reaches, not one for every bucket (`*`): the media bucket, whose files the
    /// media catalog describes, for every key but the root key.
    public var reservedBuckets: Set<String> = []

    /// Creates a principal.
    public init(
        accessKeyId: String, parentAccessKeyId: String, policies: [AccessPolicy], expiration: Date?, isRoot: Bool,
        quota: AccessKeyQuota = .unlimited
    ) {
        self.accessKeyId = accessKeyId
        self.parentAccessKeyId = parentAccessKeyId
        self.policies = policies
        self.expiration = expiration
        self.isRoot = isRoot
        self.quota = quota
    }

    /// Whether every policy allows listing `bucket` under `prefix` with `action`.
    public func allowsListing(action: String, bucket: String, prefix: String) -> Bool {
        let namedOnly = reservedBuckets.contains(bucket)
        return !policies.isEmpty
            && policies.allSatisfy { $0.allowsListing(action: action, bucket: bucket, prefix: prefix, namedOnly: namedOnly) }
    }

    /// Whether every policy grants `action` on some bucket: ListBuckets' check, whose answer then holds only the
    /// buckets the key may list.
    public func allowsSomewhere(action: String) -> Bool {
        !policies.isEmpty && policies.allSatisfy { $0.statements.contains { $0.allowsAction(action) } }
    }

    /// Whether every policy allows `action` on `bucket` and `key`.
    public func allows(action: String, bucket: String? = nil, key: String? = nil) -> Bool {
        let namedOnly = bucket.map(reservedBuckets.contains) ?? false
        return !policies.isEmpty
            && policies.allSatisfy { $0.allows(action: action, bucket: bucket, key: key, namedOnly: namedOnly) }
    }
}
