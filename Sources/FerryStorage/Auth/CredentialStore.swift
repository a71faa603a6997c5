import Crypto
import FerryCore
import Foundation

/// Resolves access key ids to their secrets and principals: the root key, stored access keys, and temporary
/// credentials carried by session tokens.
public struct CredentialStore: Sendable {
    package let root: SigV4Credentials
    package let catalog: any MediaCatalog
    /// Issues and verifies session tokens.
    public let tokens: SessionTokenCodec
    /// The time credentials are issued and judged by (``FerryServerConfiguration/now``).
    public let now: @Sendable () -> Date
    /// The ``Principal/reservedBuckets`` of every key but the root key.
    public let reservedBuckets: Set<String>

    /// Creates a store.
    public init(
        root: SigV4Credentials, catalog: any MediaCatalog, tokens: SessionTokenCodec,
        now: @escaping @Sendable () -> Date = { Date() }, reservedBuckets: Set<String> = []
    ) {
        self.root = root
        self.catalog = catalog
        self.tokens = tokens
        self.now = now
        self.reservedBuckets = reservedBuckets
    }

    /// A resolved key: its secret and who it is.
    package struct Resolved: Sendable {
        package var secretAccessKey: String
        package var principal: Principal
    }

    /// Resolves a key id (with its session token when one was sent); throws `InvalidAccessKeyId`, `InvalidToken` or
    /// `ExpiredToken`.
    package func resolve(accessKeyId: String, sessionToken: String?, now: Date? = nil) async throws -> Resolved {
        let now = now ?? self.now()
        if let sessionToken {
            let verified = try tokens.verify(token: sessionToken, accessKeyId: accessKeyId, now: now)
            var principal = verified.principal
            // A temporary credential ends when its parent key is disabled, and has its parent's quota as it is now.
            if principal.parentAccessKeyId != root.accessKeyId {
                guard let parent = try await catalog.accessKey(principal.parentAccessKeyId), parent.status == .active
                else { throw Self.unknownKey }
                principal.quota = parent.quota
            }
            principal.reservedBuckets = reservedBuckets
            return Resolved(secretAccessKey: verified.secretAccessKey, principal: principal)
        }
        if accessKeyId == root.accessKeyId {
            return Resolved(
                secretAccessKey: root.secretAccessKey,
                principal: Principal(
                    accessKeyId: accessKeyId, parentAccessKeyId: accessKeyId, policies: [.fullAccess], expiration: nil,
                    isRoot: true))
        }
        guard let key = try await catalog.accessKey(accessKeyId), key.status == .active else { throw Self.unknownKey }
        var principal = Principal(
            accessKeyId: accessKeyId, parentAccessKeyId: accessKeyId, policies: [key.policy], expiration: nil,
            isRoot: false, quota: key.quota)
        principal.reservedBuckets = reservedBuckets
        return Resolved(secretAccessKey: key.secretAccessKey, principal: principal)
    }

    /// Resolves a long-term key, the root key or an active stored key (a temporary key id resolves to nothing); nil
    /// when it is unknown or disabled. What else it throws is the catalog's (an outage is not a refusal of the key).
    package func longTermKey(_ accessKeyId: String, now: Date? = nil) async throws -> Resolved? {
        do {
            return try await resolve(accessKeyId: accessKeyId, sessionToken: nil, now: now)
        } catch let error as FerryDomainError where error.code == .unknownAccessKey {
            return nil
        }
    }

    /// The limits of the long-term key `owner` as they are now: what its uploads count against, whoever writes their
    /// parts. A key that is gone or disabled takes no more bytes (`accessDenied`).
    package func ownerQuota(_ owner: String) async throws -> AccessKeyQuota {
        guard owner != root.accessKeyId else { return .unlimited }
        guard let key = try await catalog.accessKey(owner), key.status == .active else {
            throw FerryDomainError(.accessDenied, "The access key this upload counts against is disabled.")
        }
        return key.quota
    }

    /// Whether the long-term key `accessKeyId` is the root key or a stored key that is active (not disabled or gone).
    package func isActive(_ accessKeyId: String) async throws -> Bool {
        guard accessKeyId != root.accessKeyId else { return true }
        return try await catalog.accessKey(accessKeyId)?.status == .active
    }

    static let unknownKey = FerryDomainError(
        .unknownAccessKey, "The AWS Access Key Id you provided does not exist in our records.")
}
