import Crypto
import CryptoExtras
import FerryCore
import Foundation

/// Playback signing keys: an app server mints playback tokens offline with the private key CreateSigningKey answers
/// once; the server keeps the public key only, and checks tokens against it.
extension MediaAPI {
    /// Most signing keys one access key may have.
    static let maxSigningKeysPerOwner = 50

    func createSigningKey(_ input: MediaContract.CreateSigningKeyRequest, _ call: Call) async throws
        -> MediaContract.CreateSigningKeyAnswer
    {
        let name = input.algorithm ?? SigningKeyAlgorithm.es256.rawValue
        guard let algorithm = SigningKeyAlgorithm(rawValue: name) else {
            throw MediaError.invalid("Algorithm", "must be ES256 or RS256.")
        }
        let owner = call.principal.parentAccessKeyId
        // A key the root key owns signs for every video: the root key makes one (or its console session), not a
        // temporary credential it issued, which acts on the root key's own videos alone and would outlive itself.
        guard call.principal.isRoot || owner != credentials.root.accessKeyId else {
            throw MediaError(
                "Forbidden",
                "A temporary credential of the root key cannot make signing keys; make them with the root key.",
                status: 403)
        }
        let full = MediaError(
            "QuotaExceeded.SigningKeys", "An access key has at most \(Self.maxSigningKeysPerOwner) signing keys.", status: 409)
        // Checked first so a full owner costs no key generation; the insert checks again, atomically.
        guard try await catalog.signingKeys(owner: owner).count < Self.maxSigningKeysPerOwner else { throw full }
        let privateKey: String
        let publicKey: String
        switch algorithm {
        case .es256:
            let key = P256.Signing.PrivateKey()
            privateKey = key.pemRepresentation
            publicKey = key.publicKey.pemRepresentation
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            privateKey = key.pkcs8PEMRepresentation
            publicKey = key.publicKey.pemRepresentation
        }
        let keyId = "fsk_" + SessionTokenCodec.randomAlphanumeric(20)
        let stored = StoredSigningKey(
            keyId: keyId, algorithm: algorithm.rawValue, publicKey: publicKey, owner: owner, createdAt: Date())
        guard try await catalog.insertSigningKey(stored, limit: Self.maxSigningKeysPerOwner) else { throw full }
        return MediaContract.CreateSigningKeyAnswer(keyId: keyId, algorithm: algorithm.rawValue, privateKey: privateKey)
    }

    /// Its request takes no parameters, but is read as every other's: a body that is not JSON is refused.
    func listSigningKeys(_: MediaContract.ListSigningKeysRequest, _ call: Call) async throws
        -> MediaContract.ListSigningKeysAnswer
    {
        let principal = call.principal
        let keys = try await catalog.signingKeys(owner: principal.isRoot ? nil : principal.parentAccessKeyId)
        return MediaContract.ListSigningKeysAnswer(
            signingKeys: keys.map { key in
                MediaContract.SigningKey(
                    keyId: key.keyId, algorithm: key.algorithm, publicKey: key.publicKey,
                    creationTime: key.createdAt.formatted(.iso8601))
            })
    }

    func deleteSigningKey(_ input: MediaContract.SigningKeyIdRequest, _ call: Call) async throws
        -> MediaContract.EmptyAnswer
    {
        guard let id = input.keyId, !id.isEmpty else { throw MediaError.missing("KeyId") }
        guard let key = try await catalog.signingKey(id) else { throw MediaError.notFound("SigningKey", id) }
        try Self.checkOwner(key.owner, principal: call.principal, what: "signing key")
        _ = try await catalog.deleteSigningKey(id)
        return MediaContract.EmptyAnswer()
    }

    /// The download policy a request names, in canonical form.
    static func downloadPolicy(_ policy: DownloadPolicy?) throws -> DownloadPolicy? {
        guard let policy else { return nil }
        guard let parsed = DownloadPolicy.parse(policy.rawValue) else {
            throw MediaError.invalid("Downloads", "must be all, none, or capped-1080p and/or audio-only (comma-separated).")
        }
        return parsed
    }

    /// The playback policy a request names, checked.
    static func playbackPolicy(_ policy: PlaybackPolicy?) throws -> PlaybackPolicy? {
        guard let policy else { return nil }
        guard PlaybackPolicy.all.contains(policy) else {
            throw MediaError.invalid("PlaybackPolicy", "must be public or signed.")
        }
        return policy
    }
}
