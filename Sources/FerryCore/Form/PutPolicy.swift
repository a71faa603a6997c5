import Foundation

/// What an upload token allows: where the file may go, until when, and what the server does after storing it.
///
/// The field names are Qiniu's, so a policy written for Qiniu decodes unchanged. Unknown fields are ignored.
///
/// ```swift
/// var policy = PutPolicy(scope: "photos:cat.jpg", deadline: Date().addingTimeInterval(3600))
/// policy.fsizeLimit = 10 * 1024 * 1024
/// policy.mimeLimit = "image/*"
/// let token = UploadToken.make(accessKey: ak, secretKey: sk, policy: policy)
/// ```
public struct PutPolicy: Codable, Sendable, Hashable {
    /// `bucket` (any key in the bucket) or `bucket:key` (exactly that key).
    public var scope: String
    /// When the token stops being accepted, in seconds since 1970 (Qiniu's unit).
    public var deadline: Int64
    /// Whether an existing object under the key makes the upload fail (614) instead of replacing it.
    /// Encoded as Qiniu does: `1` when set, absent otherwise.
    public var insertOnly: Bool
    /// URL the server POSTs to after storing the file; the answer's body goes back to the uploader. Up to four URLs
    /// separated by `;` are tried in order until one answers 2xx (``callbackURLs``).
    public var callbackUrl: String?
    /// Template of the callback body, with magic variables such as `$(key)`, `$(etag)`, `$(x:name)`.
    public var callbackBody: String?
    /// `application/x-www-form-urlencoded` (default) or `application/json`.
    public var callbackBodyType: String?
    /// Largest file accepted, in bytes.
    public var fsizeLimit: Int64?
    /// Accepted MIME types separated by `;`, with `type/*` wildcards, e.g. `image/*;video/mp4`; an entry starting with
    /// `!` refuses what it matches instead (`!image/*` accepts every type but pictures).
    public var mimeLimit: String?
    /// Template of the JSON answer when there is no callback (default `{"key":…,"hash":…}`).
    public var returnBody: String?

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - scope: `bucket` or `bucket:key`.
    ///   - deadline: when the token expires (rounded down to a second).
    public init(scope: String, deadline: Date) {
        self.scope = scope
        self.deadline = Int64(deadline.timeIntervalSince1970.rounded(.down))
        self.insertOnly = false
    }

    /// The bucket part of ``scope``.
    public var bucket: String {
        scope.firstIndex(of: ":").map { String(scope[..<$0]) } ?? scope
    }

    /// The key part of ``scope``, or nil when the scope is a whole bucket.
    public var key: String? {
        scope.firstIndex(of: ":").map { String(scope[scope.index(after: $0)...]) }
    }

    /// The deadline as a date.
    public var deadlineDate: Date { Date(timeIntervalSince1970: TimeInterval(deadline)) }

    /// The callback URLs in the order they are tried: ``callbackUrl`` split at `;`, blanks dropped, and what a URL
    /// cannot hold as it is escaped (``HTTPTarget/escaped(_:)``), its escapes kept.
    public var callbackURLs: [String] {
        (callbackUrl ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .map(HTTPTarget.escaped)
    }

    /// The most callback URLs a policy may name.
    public static let maxCallbackURLs = 4

    /// Why a server refuses this policy before it stores anything, or nil: a negative ``fsizeLimit``, or a
    /// ``callbackUrl`` that is not one to four http or https URLs with a host (``HTTPTarget``).
    public var problem: String? {
        if let fsizeLimit, fsizeLimit < 0 { return "The upload token's fsizeLimit must be 0 or more." }
        let urls = callbackURLs
        let callbackSet = callbackUrl.map { !$0.trimmingCharacters(in: .whitespaces).isEmpty } ?? false
        guard !callbackSet || !urls.isEmpty, urls.count <= Self.maxCallbackURLs,
            urls.allSatisfy({ HTTPTarget.components($0) != nil })
        else {
            return "The upload token's callbackUrl must be one to four http or https URLs with a host (and a port from "
                + "1 to 65535), separated by ;."
        }
        return nil
    }

    /// Whether `mimeType` is allowed by ``mimeLimit`` (everything is when there is no limit).
    ///
    /// Entries match case-insensitively; `type/*` matches every subtype of `type`; parameters (`; charset=…`) of the
    /// MIME type are ignored. A type that is not one `type/subtype` of HTTP tokens (a list such as
    /// `image/png, text/html` or `image/gif;,text/html`, which a browser may read as its last, or one with a control
    /// character) matches no entry.
    public func allowsMimeType(_ mimeType: String) -> Bool {
        Self.allows(mimeType, mimeLimit: mimeLimit)
    }

    /// Whether `mimeType` is one type: no control character, and no comma outside a quoted parameter value (a
    /// browser reads `image/gif;,text/html` as its last type, text/html).
    static func isOneType(_ mimeType: String) -> Bool {
        var quoted = false
        var escaped = false
        for byte in mimeType.utf8 {
            if byte < 0x20 && byte != 0x09 || byte == 0x7F { return false }
            if escaped { escaped = false; continue }
            if quoted && byte == UInt8(ascii: "\\") { escaped = true; continue }
            if byte == UInt8(ascii: "\"") { quoted.toggle() } else if byte == UInt8(ascii: ","), !quoted { return false }
        }
        return true
    }

    /// Whether `mimeType` is allowed by the `mimeLimit` (see ``allowsMimeType(_:)``).
    static func allows(_ mimeType: String, mimeLimit: String?) -> Bool {
        guard let mimeLimit, !mimeLimit.trimmingCharacters(in: .whitespaces).isEmpty else { return true }
        guard isOneType(mimeType) else { return false }
        let essence = (mimeType.split(separator: ";", omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters(in: .whitespaces).lowercased()
        let names = essence.split(separator: "/", omittingEmptySubsequences: false)
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".utf8)
        guard names.count == 2, names.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(tokenCharacters.contains) }) else {
            return false
        }
        func matches(_ pattern: Substring) -> Bool {
            pattern == "*/*" || pattern == essence || (pattern.hasSuffix("/*") && essence.hasPrefix(pattern.dropLast()))
        }
        var accepted = false
        var acceptsSome = false
        for entry in mimeLimit.split(separator: ";") {
            let pattern = Substring(entry.trimmingCharacters(in: .whitespaces).lowercased())
            if pattern.isEmpty { continue }
            if pattern.hasPrefix("!") {
                if matches(pattern.dropFirst().drop(while: { $0 == " " })) { return false }
            } else {
                acceptsSome = true
                if matches(pattern) { accepted = true }
            }
        }
        return accepted || !acceptsSome
    }

    enum CodingKeys: String, CodingKey {
        case scope, deadline, insertOnly, callbackUrl, callbackBody, callbackBodyType, fsizeLimit, mimeLimit, returnBody
    }

    /// Decodes a policy; `insertOnly` may be a number (Qiniu) or a boolean.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        scope = try container.decode(String.self, forKey: .scope)
        deadline = try container.decode(Int64.self, forKey: .deadline)
        if let number = try? container.decodeIfPresent(Int.self, forKey: .insertOnly) {
            insertOnly = number != 0
        } else {
            insertOnly = try container.decodeIfPresent(Bool.self, forKey: .insertOnly) ?? false
        }
        callbackUrl = try container.decodeIfPresent(String.self, forKey: .callbackUrl)
        callbackBody = try container.decodeIfPresent(String.self, forKey: .callbackBody)
        callbackBodyType = try container.decodeIfPresent(String.self, forKey: .callbackBodyType)
        fsizeLimit = try container.decodeIfPresent(Int64.self, forKey: .fsizeLimit)
        mimeLimit = try container.decodeIfPresent(String.self, forKey: .mimeLimit)
        returnBody = try container.decodeIfPresent(String.self, forKey: .returnBody)
    }

    /// Encodes the policy with Qiniu's field names; absent options are left out.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(scope, forKey: .scope)
        try container.encode(deadline, forKey: .deadline)
        if insertOnly { try container.encode(1, forKey: .insertOnly) }
        try container.encodeIfPresent(callbackUrl, forKey: .callbackUrl)
        try container.encodeIfPresent(callbackBody, forKey: .callbackBody)
        try container.encodeIfPresent(callbackBodyType, forKey: .callbackBodyType)
        try container.encodeIfPresent(fsizeLimit, forKey: .fsizeLimit)
        try container.encodeIfPresent(mimeLimit, forKey: .mimeLimit)
        try container.encodeIfPresent(returnBody, forKey: .returnBody)
    }
}
