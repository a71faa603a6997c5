import Crypto
import Foundation

/// A publish (UGC upload) signature, as the VOD services' app servers issue them to devices.
///
/// The app server holds an access key and signs what a device may publish; the device passes the signature to
/// `VideoPublisher` and never sees the secret. The signature is
/// `base64(HMAC-SHA1(secretKey, original) + original)`, where `original` is the fields as a URL query string:
/// `secretId=…&currentTimeStamp=…&expireTime=…&random=…[&procedure=…&classId=…&oneTimeValid=…&sourceContext=…]`,
/// values percent-encoded (RFC 3986 unreserved characters kept).
///
/// ```swift
/// // On the app server:
/// let now = Int(Date().timeIntervalSince1970)
/// let signature = PublishSignature(secretId: key.accessKeyId, currentTimeStamp: now, expireTime: now + 86_400)
///     .sign(secretKey: key.secretAccessKey)
/// // On the Ferry server:
/// let parsed = try PublishSignature.parse(signature)
/// guard parsed.isValid(secretKey: secretFor(parsed.signature.secretId)) else { … }
/// ```
public struct PublishSignature: Sendable, Hashable {
    /// The access key id whose secret signs this signature.
    public var secretId: String
    /// When it was issued, seconds since 1970.
    public var currentTimeStamp: Int
    /// When it stops being accepted, seconds since 1970.
    public var expireTime: Int
    /// A random number, so two signatures issued in the same second differ.
    public var random: UInt32
    /// The processing procedure (task flow) to run after the upload, when any.
    public var procedure: String?
    /// The category id the published video is filed under, when any.
    public var classId: Int?
    /// `1` when the signature may apply for one video only (a later `ApplyUploadUGC` for a new video is refused;
    /// resuming and committing that video still take it); `0` or absent when it may publish until it expires.
    public var oneTimeValid: Int?
    /// Free context of the app, stored with the video (its `UserData`).
    public var sourceContext: String?

    /// Creates a signature's fields; `random` defaults to a fresh random number.
    public init(
        secretId: String, currentTimeStamp: Int, expireTime: Int, random: UInt32 = UInt32.random(in: 0...UInt32.max),
        procedure: String? = nil, classId: Int? = nil, oneTimeValid: Int? = nil, sourceContext: String? = nil
    ) {
        self.secretId = secretId
        self.currentTimeStamp = currentTimeStamp
        self.expireTime = expireTime
        self.random = random
        self.procedure = procedure
        self.classId = classId
        self.oneTimeValid = oneTimeValid
        self.sourceContext = sourceContext
    }

    /// The string that is signed: the fields as a URL query string, in a fixed order, optional fields only when set.
    public var original: String {
        var fields: [(String, String)] = [
            ("secretId", secretId), ("currentTimeStamp", String(currentTimeStamp)), ("expireTime", String(expireTime)),
            ("random", String(random)),
        ]
        if let procedure { fields.append(("procedure", procedure)) }
        if let classId { fields.append(("classId", String(classId))) }
        if let oneTimeValid { fields.append(("oneTimeValid", String(oneTimeValid))) }
        if let sourceContext { fields.append(("sourceContext", sourceContext)) }
        return fields.map { $0.0 + "=" + SigV4.uriEncode($0.1, encodeSlash: true) }.joined(separator: "&")
    }

    /// Signs the fields: `base64(HMAC-SHA1(secretKey, original) + original)`.
    ///
    /// - Parameter secretKey: the secret of ``secretId``.
    /// - Returns: the signature to hand to the device.
    public func sign(secretKey: String) -> String {
        let original = Array(self.original.utf8)
        let mac = HMAC<Insecure.SHA1>.authenticationCode(
            for: original, using: SymmetricKey(data: Array(secretKey.utf8)))
        return Data(Array(mac) + original).base64EncodedString()
    }

    /// Whether the signature has expired at `now` (`expireTime` is before `now`).
    public func isExpired(at now: Date = Date()) -> Bool {
        Double(expireTime) < now.timeIntervalSince1970
    }

    /// The longest a signature may be valid, `expireTime - currentTimeStamp`: 7,776,000 s (90 days).
    public static let longestValidity = 7_776_000
    /// How far the app server's clock may run ahead of the service's: 600 s.
    public static let clockSkew = 600

    /// Why the service refuses these fields at `now`, or nil: valid for longer than ``longestValidity``, expiring
    /// more than that (and ``clockSkew``) after `now` (a `currentTimeStamp` in the future would otherwise stretch it),
    /// expiring before it was made, made more than ``clockSkew`` after `now`, or a `oneTimeValid` other than 0 or 1.
    /// Expiry itself is ``isExpired(at:)``.
    public func problem(at now: Date) -> String? {
        let (validity, overflow) = expireTime.subtractingReportingOverflow(currentTimeStamp)
        let latest = Double(Self.longestValidity + Self.clockSkew) + now.timeIntervalSince1970
        if overflow || validity > Self.longestValidity || Double(expireTime) > latest {
            return "A signature may be valid for at most 90 days (expireTime - currentTimeStamp ≤ 7776000, and "
                + "expireTime at most 90 days from now)."
        }
        if validity < 0 { return "The signature's expireTime is before its currentTimeStamp." }
        if Double(currentTimeStamp) > now.timeIntervalSince1970 + Double(Self.clockSkew) {
            return "The signature's currentTimeStamp is more than 10 minutes ahead of the service's clock."
        }
        if let oneTimeValid, oneTimeValid != 0, oneTimeValid != 1 { return "The signature's oneTimeValid must be 0 or 1." }
        return nil
    }

    /// A signature as received: its fields, and the MAC and original bytes exactly as sent, to verify.
    public struct Parsed: Sendable, Hashable {
        /// The fields.
        public var signature: PublishSignature
        /// The HMAC-SHA1 sent (20 bytes).
        public var mac: [UInt8]
        /// The signed string's bytes as sent.
        public var original: [UInt8]

        /// Whether the MAC is the HMAC-SHA1 of the original under `secretKey`, compared in constant time.
        public func isValid(secretKey: String) -> Bool {
            HMAC<Insecure.SHA1>.isValidAuthenticationCode(
                mac, authenticating: original, using: SymmetricKey(data: Array(secretKey.utf8)))
        }
    }

    /// Length of an HMAC-SHA1.
    static let macLength = 20

    /// Reads a signature without verifying it.
    ///
    /// - Parameter signature: the base64 signature.
    /// - Returns: its fields, MAC and original bytes; verify with ``Parsed/isValid(secretKey:)``.
    /// - Throws: ``PublishSignatureError`` with ``PublishSignatureRefusal/malformed`` when it is not base64, too short,
    ///   or its query string lacks a field, repeats one, or has one that is not a number where a number belongs.
    public static func parse(_ signature: String) throws(PublishSignatureError) -> Parsed {
        let text = signature.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw PublishSignatureError(.malformed, "The signature is empty.") }
        guard let data = Data(base64Encoded: text), data.count > macLength else {
            throw PublishSignatureError(.malformed, "The signature is not base64 of a MAC and a query string.")
        }
        let bytes = [UInt8](data)
        let mac = Array(bytes[..<macLength])
        let original = Array(bytes[macLength...])
        guard let query = String(bytes: original, encoding: .utf8) else {
            throw PublishSignatureError(.malformed, "The signed part of the signature is not UTF-8.")
        }
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]) else {
                throw PublishSignatureError(.malformed, "The signed part of the signature is not a query string.")
            }
            guard let value = parts.count == 2 ? decode(parts[1]) : "" else {
                throw PublishSignatureError(
                    .malformed, "The field \(name.prefix(32)) is not percent-encoded correctly.")
            }
            // One value a field: a repeated one would leave a reader to guess which counts.
            guard fields.updateValue(value, forKey: name) == nil else {
                throw PublishSignatureError(.malformed, "The signature repeats the field \(name.prefix(32)).")
            }
        }
        func required(_ name: String) throws(PublishSignatureError) -> String {
            guard let value = fields[name], !value.isEmpty else {
                throw PublishSignatureError(.malformed, "The signature has no \(name).")
            }
            return value
        }
        func number<T: FixedWidthInteger>(_ name: String, _ value: String?) throws(PublishSignatureError) -> T? {
            guard let value else { return nil }
            guard let number = T(value) else {
                throw PublishSignatureError(.malformed, "The signature's \(name) is not a number.")
            }
            return number
        }
        let secretId = try required("secretId")
        guard let now: Int = try number("currentTimeStamp", try required("currentTimeStamp")),
            let expire: Int = try number("expireTime", try required("expireTime")),
            let random: UInt32 = try number("random", try required("random"))
        else { throw PublishSignatureError(.malformed, "The signature lacks a required field.") }
        let parsed = PublishSignature(
            secretId: secretId, currentTimeStamp: now, expireTime: expire, random: random,
            procedure: fields["procedure"], classId: try number("classId", fields["classId"]),
            oneTimeValid: try number("oneTimeValid", fields["oneTimeValid"]), sourceContext: fields["sourceContext"])
        return Parsed(signature: parsed, mac: mac, original: original)
    }

    /// Parses and verifies a signature with the secret of its `secretId`.
    ///
    /// - Parameters:
    ///   - signature: the base64 signature.
    ///   - now: the time to check expiry against.
    ///   - secretKey: returns the secret of an access key id, or nil when the id is unknown or disabled.
    /// - Returns: the verified fields.
    /// - Throws: ``PublishSignatureError``: `malformed`, `invalid` (unknown key, wrong MAC, or fields the service
    ///   refuses: ``problem(at:)``), or `expired` (checked only once the MAC verifies, so a forger learns nothing about
    ///   expiry).
    public static func verify(
        _ signature: String, now: Date = Date(), secretKey: (String) async throws -> String?
    ) async throws -> PublishSignature {
        let parsed = try parse(signature)
        guard let secret = try await secretKey(parsed.signature.secretId), parsed.isValid(secretKey: secret) else {
            throw PublishSignatureError(.invalid, "The signature does not verify.")
        }
        if let problem = parsed.signature.problem(at: now) { throw PublishSignatureError(.invalid, problem) }
        guard !parsed.signature.isExpired(at: now) else {
            throw PublishSignatureError(.expired, "The signature expired.")
        }
        return parsed.signature
    }

    private static func decode(_ text: Substring) -> String? {
        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

/// Why a publish signature was not accepted. Messages never contain the signature or a secret.
public typealias PublishSignatureError = CredentialRefusal<PublishSignatureRefusal>

/// What is wrong with a publish signature. New codes may be added.
public struct PublishSignatureRefusal: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// Not base64 of a MAC and a query string with the required fields.
    public static let malformed = Self("malformed")
    /// The key is unknown or the MAC does not verify.
    public static let invalid = Self("invalid")
    /// The signature verifies but its `expireTime` has passed.
    public static let expired = Self("expired")
    /// The code's name.
    public var description: String { name }
}
