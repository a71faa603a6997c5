import Foundation

/// Where a media upload goes, as the VOD services hand it over: base64 of JSON `{Endpoint, Bucket, FileName}`.
public struct UploadAddress: Codable, Sendable, Hashable {
    /// Object service endpoint, e.g. `http://127.0.0.1:9000`.
    public var endpoint: String
    /// Bucket.
    public var bucket: String
    /// Object key.
    public var fileName: String

    /// Creates an address.
    public init(endpoint: String, bucket: String, fileName: String) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.fileName = fileName
    }

    enum CodingKeys: String, CodingKey {
        case endpoint = "Endpoint"
        case bucket = "Bucket"
        case fileName = "FileName"
    }

    /// The base64 form.
    public func encoded() -> String { MediaCodec.encode(self) }

    /// Decodes the base64 form; nil when it is not one.
    public init?(encoded: String) {
        guard let value = MediaCodec.decode(UploadAddress.self, encoded) else { return nil }
        self = value
    }
}

/// The credential for one media upload, as the VOD services hand it over: base64 of JSON
/// `{AccessKeyId, AccessKeySecret, SecurityToken, Expiration, Region}`.
public struct UploadAuth: Codable, Sendable, Hashable, CustomStringConvertible {
    /// Temporary access key id.
    public var accessKeyId: String
    /// Temporary secret (never printed).
    public var accessKeySecret: String
    /// Session token (never printed).
    public var securityToken: String
    /// Expiry, ISO 8601.
    public var expiration: String
    /// Signing region.
    public var region: String

    /// Creates a credential.
    public init(accessKeyId: String, accessKeySecret: String, securityToken: String, expiration: Date, region: String) {
        self.accessKeyId = accessKeyId
        self.accessKeySecret = accessKeySecret
        self.securityToken = securityToken
        self.expiration = expiration.formatted(.iso8601)
        self.region = region
    }

    enum CodingKeys: String, CodingKey {
        case accessKeyId = "AccessKeyId"
        case accessKeySecret = "AccessKeySecret"
        case securityToken = "SecurityToken"
        case expiration = "Expiration"
        case region = "Region"
    }

    /// The expiry as a date.
    public var expirationDate: Date? { try? Date(expiration, strategy: .iso8601) }

    /// The signing credentials.
    public var credentials: SigV4Credentials {
        SigV4Credentials(accessKeyId: accessKeyId, secretAccessKey: accessKeySecret, sessionToken: securityToken)
    }

    /// The base64 form.
    public func encoded() -> String { MediaCodec.encode(self) }

    /// Decodes the base64 form; nil when it is not one.
    public init?(encoded: String) {
        guard let value = MediaCodec.decode(UploadAuth.self, encoded) else { return nil }
        self = value
    }

    /// The key id only.
    public var description: String { "UploadAuth(\(accessKeyId), expires \(expiration))" }
}

extension UploadAuth: SecretRedacting {
    /// The fields without the secret and the token.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "accessKeyId": accessKeyId, "accessKeySecret": "<redacted>", "securityToken": "<redacted>",
            "expiration": expiration, "region": region,
        ]
    }
}

enum MediaCodec {
    static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(value))?.base64EncodedString() ?? ""
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) -> T? {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }
}
