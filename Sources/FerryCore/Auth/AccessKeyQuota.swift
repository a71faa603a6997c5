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
}
