import Crypto
import Foundation

/// A Qiniu-style upload token: `AccessKey:EncodedSign:EncodedPutPolicy`, where `EncodedPutPolicy` is the URL-safe
/// base64 (with padding) of the policy's JSON and `EncodedSign` the URL-safe base64 of
/// `HMAC-SHA1(SecretKey, EncodedPutPolicy)`.
///
/// An app server holding an access key makes tokens and hands them to devices; the device never sees the secret.
///
/// ```swift
/// let policy = PutPolicy(scope: "photos", deadline: .now + 3600)
/// let token = UploadToken.make(accessKey: ak, secretKey: sk, policy: policy)
/// // on the server:
/// let parsed = try UploadToken.parse(token)
/// try parsed.verify(secretKey: secretFor(parsed.accessKey))
/// ```
public struct UploadToken: Sendable, Hashable {
    /// The access key id that signed the token.
    public let accessKey: String
    /// URL-safe base64 of the HMAC-SHA1 signature.
    public let encodedSignature: String
    /// URL-safe base64 of the policy JSON, exactly as signed.
    public let encodedPolicy: String
    /// The decoded policy.
    public let policy: PutPolicy

    /// Makes a token for `policy`, signed with the access key's secret.
    ///
    /// The policy is encoded as compact JSON with sorted keys.
    /// - Parameters:
    ///   - accessKey: the access key id (it is part of the token).
    ///   - secretKey: its secret (only the signature depends on it).
    ///   - policy: what the token allows.
    /// - Returns: the token string.
    public static func make(accessKey: String, secretKey: String, policy: PutPolicy) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A struct of strings and integers always encodes; `{}` would only make a token no server accepts.
        let json = (try? encoder.encode(policy)) ?? Data("{}".utf8)
        return sign(accessKey: accessKey, secretKey: secretKey, policyJSON: [UInt8](json))
    }

    /// Makes a token for a policy given as JSON bytes (which are signed as they are).
    ///
    /// - Parameters:
    ///   - accessKey: the access key id.
    ///   - secretKey: its secret.
    ///   - policyJSON: the put policy's JSON.
    /// - Returns: the token string.
    public static func sign(accessKey: String, secretKey: String, policyJSON: [UInt8]) -> String {
        let encodedPolicy = urlSafeBase64(policyJSON)
        return accessKey + ":" + signature(secretKey: secretKey, data: Array(encodedPolicy.utf8)) + ":" + encodedPolicy
    }

    /// Splits and decodes a token without checking its signature.
    ///
    /// - Throws: ``UploadTokenError`` with code `malformed` when it does not have three parts, its policy is not
    ///   base64 JSON, the policy lacks `scope` or `deadline`, or its scope's bucket is no bucket name
    ///   (``BucketName/isPlausible(_:)``).
    public static func parse(_ token: String) throws(UploadTokenError) -> UploadToken {
        let parts = token.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw UploadTokenError(.malformed, "The upload token does not have the form AccessKey:Sign:Policy.")
        }
        guard let json = decodeURLSafeBase64(String(parts[2])) else {
            throw UploadTokenError(.malformed, "The upload token's policy is not URL-safe base64.")
        }
        let policy: PutPolicy
        do {
            policy = try JSONDecoder().decode(PutPolicy.self, from: Data(json))
        } catch {
            throw UploadTokenError(.malformed, "The upload token's policy is not a put policy with scope and deadline.")
        }
        guard !policy.scope.isEmpty, !policy.bucket.isEmpty else {
            throw UploadTokenError(.malformed, "The upload token's policy has an empty scope.")
        }
        guard BucketName.isPlausible(policy.bucket) else {
            throw UploadTokenError(.malformed, "The upload token's scope names no valid bucket.")
        }
        return UploadToken(
            accessKey: String(parts[0]), encodedSignature: String(parts[1]), encodedPolicy: String(parts[2]),
            policy: policy)
    }

    /// Checks the signature against `secretKey` (in constant time), then the deadline.
    ///
    /// - Parameters:
    ///   - secretKey: the secret of ``accessKey``.
    ///   - now: the current time.
    /// - Throws: ``UploadTokenError`` with code `badSignature` or `expired`.
    public func verify(secretKey: String, now: Date = Date()) throws(UploadTokenError) {
        let expected = Self.rawSignature(secretKey: secretKey, data: Array(encodedPolicy.utf8))
        guard let given = Self.decodeURLSafeBase64(encodedSignature), SigV4.constantTimeEquals(given, expected) else {
            throw UploadTokenError(.badSignature, "The upload token's signature does not match its access key.")
        }
        guard Int64(now.timeIntervalSince1970.rounded(.down)) <= policy.deadline else {
            throw UploadTokenError(.expired, "The upload token expired at its deadline \(policy.deadline).")
        }
    }

    // MARK: Encoding

    /// URL-safe base64 of `HMAC-SHA1(secretKey, data)`.
    static func signature(secretKey: String, data: [UInt8]) -> String {
        urlSafeBase64(rawSignature(secretKey: secretKey, data: data))
    }

    static func rawSignature(secretKey: String, data: [UInt8]) -> [UInt8] {
        Array(HMAC<Insecure.SHA1>.authenticationCode(for: data, using: SymmetricKey(data: Array(secretKey.utf8))))
    }

    /// Base64 with `-` and `_` for `+` and `/`, keeping the `=` padding (as Qiniu does).
    public static func urlSafeBase64<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
    }

    /// Decodes URL-safe (or standard) base64, with or without padding; nil when it is not base64.
    public static func decodeURLSafeBase64(_ string: String) -> [UInt8]? {
        var text = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let remainder = text.utf8.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { text += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: text).map { [UInt8]($0) }
    }
}

/// Why an upload token was refused. Messages never contain the token or its signature.
public typealias UploadTokenError = CredentialRefusal<UploadTokenRefusal>

/// The kind of refusal of an upload token. New codes may be added.
public struct UploadTokenRefusal: Hashable, Sendable, CustomStringConvertible {
    private enum Base: String, Sendable { case malformed, badSignature, expired }
    private let base: Base
    private init(_ base: Base) { self.base = base }
    /// The token cannot be read: wrong shape, bad base64, or a policy without scope or deadline.
    public static let malformed = Self(.malformed)
    /// The signature does not match the access key's secret.
    public static let badSignature = Self(.badSignature)
    /// The policy's deadline has passed.
    public static let expired = Self(.expired)
    /// The code's name.
    public var description: String { base.rawValue }
}
