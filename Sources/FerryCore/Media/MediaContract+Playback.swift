import Foundation

/// Who may play a video through its playback addresses (`/_ferry/play/<VideoId>/<file>`).
///
/// A value type over a string, so policies added later decode in older clients. Its JSON form is the string.
public struct PlaybackPolicy: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    /// `public` or `signed`.
    public var rawValue: String

    /// Creates a policy from its name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Anyone with the address plays the video; no token is needed.
    public static let `public` = PlaybackPolicy(rawValue: "public")
    /// Every request carries `?token=<JWT>`, signed by a signing key (``MediaContract/CreateSigningKeyAnswer``)
    /// or minted by the server in GetPlayInfo's URLs. What a new video gets.
    public static let signed = PlaybackPolicy(rawValue: "signed")

    /// The policies the server knows.
    public static let all: [PlaybackPolicy] = [.public, .signed]

    /// The name.
    public var description: String { rawValue }
}

/// Which progressive files of a video (its MP4 per definition, its audio rendition's `.m4a`) are offered for download:
/// listed in GetPlayInfo and served at their playback addresses. The HLS and DASH streams are not affected.
///
/// Written as a comma-separated list of `capped-1080p` (the one MP4 of the highest definition whose shorter side is at
/// most 1080 pixels) and `audio-only` (the audio rendition), or `all` (every progressive file: the default) or `none`.
/// Its JSON form is the text.
public struct DownloadPolicy: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    /// The canonical form: `all`, `none`, `capped-1080p`, `audio-only` or `audio-only,capped-1080p`.
    public var rawValue: String

    /// Creates a policy from its text, as is (``parse(_:)`` checks and orders it).
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Every progressive file; what a video gets unless it asks otherwise.
    public static let all = DownloadPolicy(rawValue: "all")
    /// No progressive file.
    public static let none = DownloadPolicy(rawValue: "none")
    /// The highest MP4 at most 1080p.
    public static let capped1080p = DownloadPolicy(rawValue: "capped-1080p")
    /// The audio rendition's `.m4a`.
    public static let audioOnly = DownloadPolicy(rawValue: "audio-only")
    /// Both the highest MP4 at most 1080p and the audio rendition.
    public static let capped1080pAndAudio = DownloadPolicy(rawValue: "audio-only,capped-1080p")

    /// The policy `text` names, in canonical form; nil when it names none (unknown items, `all` or `none` with
    /// others, an empty list).
    public static func parse(_ text: String) -> DownloadPolicy? {
        let items = Set(text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) })
        switch items {
        case ["all"]: return .all
        case ["none"]: return DownloadPolicy.none
        case ["capped-1080p"]: return .capped1080p
        case ["audio-only"]: return .audioOnly
        case ["capped-1080p", "audio-only"]: return .capped1080pAndAudio
        default: return nil
        }
    }

    /// Whether the highest MP4 at most 1080p is offered.
    public var includesCapped1080p: Bool { self == .all || rawValue.contains("capped-1080p") }
    /// Whether the audio rendition is offered.
    public var includesAudio: Bool { self == .all || rawValue.contains("audio-only") }

    /// The text.
    public var description: String { rawValue }
}

extension MediaContract {
    /// CreateSigningKey: a new key pair for playback tokens; the answer carries the private key, once.
    public struct CreateSigningKeyRequest: Codable, Sendable, Hashable {
        /// `ES256` (the default, ECDSA P-256) or `RS256` (RSA 2048, PKCS #1 v1.5).
        public var algorithm: String?

        /// Creates a request.
        public init(algorithm: String? = nil) { self.algorithm = algorithm }

        enum CodingKeys: String, CodingKey { case algorithm = "Algorithm" }
    }

    /// ListSigningKeys: it takes no parameters (the answer is a ``ListSigningKeysAnswer``).
    public struct ListSigningKeysRequest: Codable, Sendable, Hashable {
        /// Creates a request.
        public init() {}
    }

    /// DeleteSigningKey: a key whose tokens are refused from now on.
    public struct SigningKeyIdRequest: Codable, Sendable, Hashable {
        /// The key's id (required).
        public var keyId: String?

        /// Creates a request.
        public init(keyId: String?) { self.keyId = keyId }

        enum CodingKeys: String, CodingKey { case keyId = "KeyId" }
    }

    /// A signing key as ListSigningKeys describes it: its public half only.
    public struct SigningKey: Codable, Sendable, Hashable {
        /// The key's id: the `kid` of the tokens it signs.
        public var keyId: String
        /// `ES256` or `RS256`.
        public var algorithm: String
        /// The public key, PEM (`-----BEGIN PUBLIC KEY-----`).
        public var publicKey: String
        /// When it was created, ISO 8601.
        public var creationTime: String

        /// Creates a key description.
        public init(keyId: String, algorithm: String, publicKey: String, creationTime: String) {
            self.keyId = keyId
            self.algorithm = algorithm
            self.publicKey = publicKey
            self.creationTime = creationTime
        }

        enum CodingKeys: String, CodingKey {
            case keyId = "KeyId", algorithm = "Algorithm", publicKey = "PublicKey", creationTime = "CreationTime"
        }
    }

    /// CreateSigningKey's answer: the key's id and its private key, PEM. The server keeps only the public key: this
    /// is the one time the private key is seen.
    public struct CreateSigningKeyAnswer: Codable, Sendable, Hashable, SecretRedacting {
        /// The key's id: put it in the `kid` header of the tokens it signs.
        public var keyId: String
        /// `ES256` or `RS256`.
        public var algorithm: String
        /// The private key, PEM (`-----BEGIN PRIVATE KEY-----`).
        public var privateKey: String

        /// Creates an answer.
        public init(keyId: String, algorithm: String, privateKey: String) {
            self.keyId = keyId
            self.algorithm = algorithm
            self.privateKey = privateKey
        }

        /// The key id and algorithm only; the private key is never printed.
        public var description: String { "CreateSigningKeyAnswer(\(keyId), \(algorithm))" }
        /// The fields without the private key.
        public var redactedFields: KeyValuePairs<String, Any> {
            ["keyId": keyId, "algorithm": algorithm, "privateKey": "<redacted>"]
        }

        enum CodingKeys: String, CodingKey { case keyId = "KeyId", algorithm = "Algorithm", privateKey = "PrivateKey" }
    }

    /// ListSigningKeys' answer: the caller's signing keys (every key for the root key), oldest first.
    public struct ListSigningKeysAnswer: Codable, Sendable, Hashable {
        /// The keys.
        public var signingKeys: [SigningKey]

        /// Creates an answer.
        public init(signingKeys: [SigningKey]) { self.signingKeys = signingKeys }

        enum CodingKeys: String, CodingKey { case signingKeys = "SigningKeys" }
    }
}
