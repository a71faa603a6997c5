import Crypto
import FerryCore
import Foundation

/// Issues and verifies the session tokens of temporary credentials.
///
/// A token is self-contained: `FT1.<base64url claims>.<base64url HMAC-SHA256>` under the server's token key, so any
/// server instance with the key verifies it without a lookup. The claims carry the temporary access key id, the parent
/// key, the expiry and the policy. The temporary secret is derived from the key id with the same server key, so it is
/// never stored.
public struct SessionTokenCodec: Sendable {
    struct Claims: Codable {
        var k: String
        var parent: String
        var exp: Double
        var policies: [AccessPolicy]
    }

    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// Creates a codec over the server's token key.
    public init(key: SymmetricKey) {
        self.keyBytes = key.withUnsafeBytes { Array($0) }
    }

    /// Issues temporary credentials under `parent` with `policy`, valid until `expiration`.
    public func issue(parent: String, policy: AccessPolicy, expiration: Date) -> SigV4Credentials {
        issue(parent: parent, policies: [policy], expiration: expiration)
    }

    /// Issues temporary credentials under `parent` that every one of `policies` must allow.
    public func issue(parent: String, policies: [AccessPolicy], expiration: Date) -> SigV4Credentials {
        let accessKeyId = "FSIA" + Self.randomAlphanumeric(16)
        let claims = Claims(k: accessKeyId, parent: parent, exp: expiration.timeIntervalSince1970.rounded(.down), policies: policies)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Strings, a number and policies always encode; a token without claims would only be refused as invalid.
        let body = Self.base64url((try? encoder.encode(claims)) ?? Data())
        let mac = Self.base64url(Data(HMAC<SHA256>.authenticationCode(for: Data(("FT1." + body).utf8), using: key)))
        return SigV4Credentials(
            accessKeyId: accessKeyId, secretAccessKey: secret(for: accessKeyId), sessionToken: "FT1.\(body).\(mac)")
    }

    /// The secret of a temporary access key id.
    func secret(for accessKeyId: String) -> String {
        Self.base64url(Data(HMAC<SHA256>.authenticationCode(for: Data(("secret:" + accessKeyId).utf8), using: key)))
    }

    /// An HMAC-SHA256 of `message` under a key derived from the token key for `purpose`, so other self-contained
    /// tokens of the server (a publish session key) need no key of their own and cannot be confused with these.
    package func authenticationCode(for message: Data, purpose: String) -> Data {
        let derived = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(("purpose:" + purpose).utf8), using: key)))
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: derived))
    }

    /// What a verified token says.
    public struct Verified: Sendable {
        /// The principal the token stands for.
        public var principal: Principal
        /// The temporary secret, to verify the request signature with.
        public var secretAccessKey: String
    }

    /// Verifies a token presented with `accessKeyId`; throws `InvalidToken` or `ExpiredToken`.
    public func verify(token: String, accessKeyId: String, now: Date = Date()) throws -> Verified {
        let invalid = FerryDomainError(.invalidSessionToken, "The provided token is malformed or otherwise invalid.")
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 3, pieces[0] == "FT1", let macBytes = Self.unbase64url(String(pieces[2])),
            let claimBytes = Self.unbase64url(String(pieces[1]))
        else { throw invalid }
        let signed = Data("FT1.\(pieces[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(macBytes, authenticating: signed, using: key) else { throw invalid }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: claimBytes), claims.k == accessKeyId else {
            throw invalid
        }
        let expiration = Date(timeIntervalSince1970: claims.exp)
        guard expiration > now else { throw FerryDomainError(.expiredSessionToken, "The provided token has expired.") }
        return Verified(
            principal: Principal(
                accessKeyId: accessKeyId, parentAccessKeyId: claims.parent, policies: claims.policies,
                expiration: expiration, isRoot: false),
            secretAccessKey: secret(for: accessKeyId))
    }

    package static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes `string` spells in base64url, nil unless it is the one spelling ``base64url(_:)`` makes of them (no
    /// padding, no other characters, no stray low bits): a token has one text, and another text is another token.
    package static func unbase64url(_ string: String) -> Data? {
        guard
            string.utf8.allSatisfy({
                (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D
                    || $0 == 0x5F
            })
        else { return nil }
        var s = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        guard let data = Data(base64Encoded: s), base64url(data) == string else { return nil }
        return data
    }

    package static func randomAlphanumeric(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
    }
}
