import Foundation

/// A playback signing key in the catalog: its public half only. The private key went to its creator once and is kept
/// nowhere by the server.
public struct StoredSigningKey: Sendable, Hashable {
    /// The key's id (the `kid` of the tokens it signs).
    public var keyId: String
    /// `ES256` or `RS256`.
    public var algorithm: String
    /// The public key, PEM.
    public var publicKey: String
    /// The long-term access key that created it: its tokens play that key's videos (every video for the root key).
    public var owner: String
    /// Creation time.
    public var createdAt: Date

    /// Creates a key record.
    package init(keyId: String, algorithm: String, publicKey: String, owner: String, createdAt: Date) {
        self.keyId = keyId
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.owner = owner
        self.createdAt = createdAt
    }
}
