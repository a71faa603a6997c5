import FerryCore
import Foundation
import JWTKit

/// Decides whether a request may read a file of a video: a public video's files are open; a signed video's need a
/// token (``PlaybackToken``) whose signature, validity period (`exp`, `nbf`), audience, subject, referrer and
/// definition restrictions all hold; a token whose header names critical extensions (`crit`) is refused.
///
/// Signatures are checked by jwt-kit against the public key of the signing key the token's `kid` names (without a
/// `kid`, each key of the video's owner in turn), or the server's own key. A key made by an access key signs for that
/// key's videos while that access key is active; one made by the root key, for every video. A token the server
/// minted opens files while the access key it was minted for (`iss`) is active. A refusal is an S3 `AccessDenied` with a `Reason`
/// element (``Refusal``); no token, key or signature appears in it or in any log.
struct PlaybackAuthorizer: Sendable {
    let catalog: any MediaCatalog
    let credentials: CredentialStore

    /// Why a token was refused: the `Reason` of the 403.
    enum Refusal: String, Error, Sendable {
        /// The video is signed and the request has no token.
        case missing
        /// The token is not a JWT this server reads.
        case malformed
        /// No signing key has the token's `kid`, or the key may not sign for this video.
        case key
        /// The signature does not verify.
        case signature
        /// `exp` has passed.
        case expired
        /// `nbf` is still ahead (by more than ``PlaybackAuthorizer/clockLeeway``).
        case early
        /// The header names critical extensions (`crit`), which this server implements none of (RFC 7515, 4.1.11).
        case critical
        /// `aud` does not grant this file.
        case audience
        /// `sub` is another video.
        case video
        /// The request's `Referer` names a host the token does not allow.
        case referrer
        /// The file is a rendition of a definition the token does not open.
        case definition
        /// The signing keys could not be read (the catalog failed): nothing is refused, the request may be retried.
        case unavailable

        /// What the 403's message says.
        var message: String {
            switch self {
            case .missing: "The video is signed: its playback URLs need a token."
            case .malformed: "The playback token is not a valid JWT."
            case .key: "The playback token's signing key is unknown or may not sign for this video."
            case .signature: "The playback token's signature does not verify."
            case .expired: "The playback token has expired."
            case .early: "The playback token is not valid yet (nbf)."
            case .critical: "The playback token names critical header extensions (crit), which this server does not implement."
            case .audience: "The playback token does not grant this file (aud)."
            case .video: "The playback token is for another video (sub)."
            case .referrer: "The playback token does not allow the page this request comes from (Referer)."
            case .definition: "The playback token does not open this definition (definitions)."
            case .unavailable: "The playback token could not be checked now; try again."
            }
        }

        /// The refusal as the playback group's S3 error: 403 `AccessDenied`, or 503 `ServiceUnavailable` when the token
        /// could not be checked.
        var error: S3Error {
            self == .unavailable
                ? S3Error(.serviceUnavailable, message) : S3Error(.accessDenied, message, details: ["Reason": rawValue])
        }
    }

    /// Checks the request for `file` of `video`; throws a ``Refusal`` when it may not read it.
    func authorize(video: VideoRecord, file: String, token: String?, referer: String?) async throws(Refusal) {
        guard video.isPlaybackSigned else { return }
        guard let token, !token.isEmpty else { throw .missing }
        guard token.utf8.count <= PlaybackToken.maxTokenLength else { throw .malformed }
        let claims = try await verifiedClaims(token, video: video)
        if claims.exp.value <= credentials.now() { throw .expired }
        if let nbf = claims.nbf, nbf.value > credentials.now().addingTimeInterval(Self.clockLeeway) { throw .early }
        let granted = Set(claims.aud.value.compactMap(PlaybackToken.Audience.init(rawValue:)))
        if granted.isDisjoint(with: PlaybackToken.Audience.accepted(forFile: file)) { throw .audience }
        if claims.sub.value != video.videoId { throw .video }
        if let allowed = claims.referrers, !Self.allows(referer: referer, hosts: allowed) { throw .referrer }
        if let allowed = claims.definitions, !allowed.contains("AUTO") {
            // A file of no published rendition opens when it is of none by nature (subtitles, pictures), or is the
            // first stream's (kept after the ladder replaced it) and the token opens that stream's definition.
            guard let definition = PlaybackToken.definition(ofFile: file, in: video.renditions ?? []) else {
                guard PlaybackToken.isOfNoDefinition(file)
                    || PlaybackToken.isFirstStream(file, of: video, allowed: allowed)
                else { throw .definition }
                return
            }
            guard allowed.contains(definition) || PlaybackToken.isSound(file, of: definition, allowed: allowed, in: video.renditions ?? [])
            else { throw .definition }
        }
    }

    /// How far ahead of this server's clock a token's `nbf` may be (the app server minting it may run ahead).
    static let clockLeeway: TimeInterval = 60

    /// The token's claims once its signature verifies with the key it names.
    private func verifiedClaims(_ token: String, video: VideoRecord) async throws(Refusal) -> PlaybackToken.Claims {
        // Each part in the one base64url spelling of its bytes: a token altered in its padding or in the unused low
        // bits of its last character is another text, refused, not the same signature read leniently.
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ SessionTokenCodec.unbase64url(String($0)) != nil }) else {
            throw .malformed
        }
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse([UInt8](token.utf8), as: PlaybackToken.Claims.self).header
        } catch {
            throw .malformed
        }
        if header.fields["crit"] != nil { throw .critical }
        // RFC 7515 has every token name its algorithm; a token whose `alg` is not the key's is not verified with the
        // key under another algorithm's name (jwt-kit picks the key by `kid` alone).
        guard let algorithm = header.alg else { throw .malformed }
        let kid = header.kid
        let keys: [StoredSigningKey]
        if kid == PlaybackToken.serverKeyId {
            guard algorithm == "HS256" else { throw .signature }
            let collection = await JWTKeyCollection().add(
                hmac: PlaybackToken.serverKey(codec: credentials.tokens), digestAlgorithm: .sha256,
                kid: .init(string: PlaybackToken.serverKeyId))
            let claims = try await Self.verify(token, with: collection)
            // Minted for an access key: it ends with that key, as a presigned URL does.
            if let issuer = claims.iss?.value {
                let active: Bool
                do { active = try await credentials.isActive(issuer) } catch { throw .unavailable }
                guard active else { throw .key }
            }
            return claims
        } else if let kid {
            // Key ids are `fsk_` and 20 letters or digits: another `kid` names no key, and is not looked up.
            guard kid.utf8.count <= 64, kid.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .key }
            let key: StoredSigningKey?
            let active: Bool
            do {
                key = try await catalog.signingKey(kid)
                if let key { active = try await credentials.isActive(key.owner) } else { active = false }
            } catch {
                throw .unavailable
            }
            guard let key, active, mayPlay(video, signedWith: key) else { throw .key }
            guard key.algorithm == algorithm else { throw .signature }
            keys = [key]
        } else {
            let owned: [StoredSigningKey]
            let active: Bool
            do {
                // Newest first: a key rotated in is the likeliest signer. Every key is tried (an owner has at most
                // `MediaAPI.maxSigningKeysPerOwner`), so a rotation never strands the newest.
                owned = try await catalog.signingKeys(owner: video.owner).reversed()
                active = owned.isEmpty ? false : try await credentials.isActive(video.owner)
            } catch {
                throw .unavailable
            }
            // A disabled access key's signing keys sign nothing.
            guard !owned.isEmpty, active else { throw .key }
            keys = owned.filter { $0.algorithm == algorithm }
            guard !keys.isEmpty else { throw .signature }
        }
        var refusal = Refusal.signature
        for key in keys {
            do throws(Refusal) {
                return try await Self.verify(token, with: try await Self.collection(key, kid: kid))
            } catch {
                refusal = error
            }
        }
        throw refusal
    }

    /// Whether tokens of `key` may open `video`.
    private func mayPlay(_ video: VideoRecord, signedWith key: StoredSigningKey) -> Bool {
        key.owner == video.owner || key.owner == credentials.root.accessKeyId
    }

    /// A key collection holding the public key of `key` under `kid`.
    private static func collection(_ key: StoredSigningKey, kid: String?) async throws(Refusal) -> JWTKeyCollection {
        let identifier = kid.map { JWKIdentifier(string: $0) }
        do {
            switch key.algorithm {
            case SigningKeyAlgorithm.es256.rawValue:
                return await JWTKeyCollection().add(ecdsa: try ES256PublicKey(pem: key.publicKey), kid: identifier)
            case SigningKeyAlgorithm.rs256.rawValue:
                return await JWTKeyCollection().add(
                    rsa: try Insecure.RSA.PublicKey(pem: key.publicKey), digestAlgorithm: .sha256, kid: identifier)
            default:
                throw Refusal.key
            }
        } catch {
            throw .key
        }
    }

    private static func verify(_ token: String, with keys: JWTKeyCollection) async throws(Refusal)
        -> PlaybackToken.Claims
    {
        do {
            return try await keys.verify(token, as: PlaybackToken.Claims.self)
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw .malformed
        } catch {
            throw .signature
        }
    }

    /// Whether the host of `referer` is one of `hosts` (`*.example.com` matches its subdomains, not itself).
    static func allows(referer: String?, hosts: [String]) -> Bool {
        guard let referer, let host = URLComponents(string: referer)?.host?.lowercased(), !host.isEmpty else {
            return false
        }
        return hosts.contains { pattern in
            let pattern = pattern.lowercased()
            if pattern.hasPrefix("*.") { return host.hasSuffix(pattern.dropFirst(1)) }
            return host == pattern
        }
    }
}

/// The algorithms of playback signing keys.
enum SigningKeyAlgorithm: String, CaseIterable, Sendable {
    /// ECDSA over P-256 with SHA-256.
    case es256 = "ES256"
    /// RSA (2048-bit keys) PKCS #1 v1.5 with SHA-256.
    case rs256 = "RS256"
}
