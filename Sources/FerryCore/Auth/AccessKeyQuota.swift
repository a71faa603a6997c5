import Foundation

/// The limits of a long-term access key (and of every temporary credential issued under it), as CreateAccessKey and
/// UpdateAccessKey set them (`Quota`); a limit left out is no limit.
///
/// ```json
/// {"StorageBytes": 1073741824, "Videos": 100, "ConcurrentUploads": 4, "RequestsPerSecond": 20}
/// ```
public struct AccessKeyQuota: Codable, Sendable, Hashable {
    /// Bytes the key may keep stored: its objects and the parts of its multipart uploads in progress.
    public var storageBytes: Int64?
    /// Videos (not deleted) the key may have.
    public var videos: Int?
    /// Multipart uploads the key may have in progress at once.
    public var concurrentUploads: Int?
    /// Requests per second the key may send to one node (a token bucket holding one second's worth).
    public var requestsPerSecond: Double?

    /// Creates a quota; nil limits nothing.
    public init(
        storageBytes: Int64? = nil, videos: Int? = nil, concurrentUploads: Int? = nil, requestsPerSecond: Double? = nil
    ) {
        self.storageBytes = storageBytes
        self.videos = videos
        self.concurrentUploads = concurrentUploads
        self.requestsPerSecond = requestsPerSecond
    }

    /// No limit at all.
    public static let unlimited = AccessKeyQuota()

    /// Whether no limit is set.
    public var isUnlimited: Bool { self == .unlimited }

    /// Why the quota cannot be used (a negative limit, a rate that is not a positive finite number), or nil.
    public var problem: String? {
        if let storageBytes, storageBytes < 0 { return "StorageBytes must not be negative." }
        if let videos, videos < 0 { return "Videos must not be negative." }
        if let concurrentUploads, concurrentUploads < 0 { return "ConcurrentUploads must not be negative." }
        if let requestsPerSecond, !(requestsPerSecond.isFinite && (0.001...1_000_000).contains(requestsPerSecond)) {
            return "RequestsPerSecond must be a number from 0.001 to 1000000."
        }
        return nil
    }

    enum CodingKeys: String, CodingKey {
        case storageBytes = "StorageBytes"
        case videos = "Videos"
        case concurrentUploads = "ConcurrentUploads"
        case requestsPerSecond = "RequestsPerSecond"
    }

    /// Decodes a quota. A field that names no limit (a misspelt `StorageByte`) is refused
    /// (``UnknownFieldError``) rather than taken as limiting nothing.
    public init(from decoder: any Decoder) throws {
        try UnknownFieldError.check(decoder, knowing: CodingKeys.self, takes: "StorageBytes, Videos, ConcurrentUploads and RequestsPerSecond")
        let c = try decoder.container(keyedBy: CodingKeys.self)
        storageBytes = try c.decodeIfPresent(Int64.self, forKey: .storageBytes)
        videos = try c.decodeIfPresent(Int.self, forKey: .videos)
        concurrentUploads = try c.decodeIfPresent(Int.self, forKey: .concurrentUploads)
        requestsPerSecond = try c.decodeIfPresent(Double.self, forKey: .requestsPerSecond)
    }
}

/// A JSON object held a field its type does not take: refused where a misspelt field would otherwise be ignored and
/// change what a request means (a quota that limits nothing, a grant to every bucket).
public struct UnknownFieldError: Error, Sendable {
    /// Where the field is, as dotted names.
    public var path: String
    /// The fields the object takes, in words.
    public var takes: String

    /// Throws when the object `decoder` reads holds a field `Keys` does not name.
    static func check<Keys: CodingKey>(_ decoder: any Decoder, knowing _: Keys.Type, takes: String) throws {
        let fields = try decoder.container(keyedBy: FieldName.self).allKeys
        guard let unknown = fields.first(where: { Keys(stringValue: $0.stringValue) == nil }) else { return }
        let path = (decoder.codingPath + [unknown]).reduce("") { path, key in
            if let index = key.intValue { return path + "[\(index)]" }
            return path.isEmpty ? key.stringValue : path + "." + key.stringValue
        }
        throw UnknownFieldError(path: String(path.filter { !$0.isNewline }.prefix(128)), takes: takes)
    }
}

/// Any field name of a JSON object.
private struct FieldName: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
