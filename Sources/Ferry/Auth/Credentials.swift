import FerryCore
import Foundation

/// Credentials to sign requests with: a long-term key, or a temporary one with a session token and an expiry.
public struct Credentials: Sendable, Hashable, CustomStringConvertible {
    /// Access key id.
    public var accessKeyId: String
    /// Secret access key (never printed).
    public var secretAccessKey: String
    /// Session token of temporary credentials (never printed).
    public var sessionToken: String?
    /// When temporary credentials stop working.
    public var expiration: Date?

    /// Creates credentials.
    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Date? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }

    /// The signing form FerryCore uses.
    public var sigV4: SigV4Credentials {
        SigV4Credentials(accessKeyId: accessKeyId, secretAccessKey: secretAccessKey, sessionToken: sessionToken)
    }

    /// Whether they expire within `margin` of `now`.
    public func isExpired(at now: Date = ServiceClock.now(), margin: TimeInterval = 0) -> Bool {
        guard let expiration else { return false }
        return expiration.timeIntervalSince(now) <= margin
    }

    /// The key id only; the secret and token are never printed.
    public var description: String { "Credentials(\(accessKeyId)\(sessionToken == nil ? "" : ", temporary"))" }
}

extension Credentials: SecretRedacting {
    /// The fields without the secret and the token.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "accessKeyId": accessKeyId, "secretAccessKey": "<redacted>",
            "sessionToken": sessionToken == nil ? "nil" : "<redacted>", "expiration": expiration as Any,
        ]
    }
}

/// Where an upload gets its credentials, asked again whenever the server says they expired.
///
/// Return fresh credentials, or the same ones when there are none fresher: the upload then pauses with a
/// `credentialsExpired` event until the app calls `resume(with:)`.
public protocol CredentialProvider: Sendable {
    /// The credentials to sign with now.
    func credentials() async throws -> Credentials
}

/// Always the same credentials.
public struct StaticCredentialProvider: CredentialProvider {
    let value: Credentials
    /// Creates a provider.
    public init(_ credentials: Credentials) { value = credentials }
    /// The credentials.
    public func credentials() async throws -> Credentials { value }
}

/// Credentials from a closure, e.g. one that asks the app server for a fresh STS token.
public struct ClosureCredentialProvider: CredentialProvider {
    let body: @Sendable () async throws -> Credentials
    /// Creates a provider.
    public init(_ body: @escaping @Sendable () async throws -> Credentials) { self.body = body }
    /// Calls the closure.
    public func credentials() async throws -> Credentials { try await body() }
}
