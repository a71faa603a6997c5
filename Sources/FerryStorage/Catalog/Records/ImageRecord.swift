import Foundation

/// An image in the media catalog.
public struct ImageRecord: Codable, Sendable, Hashable {
    /// Image id.
    public var imageId: String
    /// `default` or `cover`.
    public var imageType: String
    /// Title.
    public var title: String?
    /// Comma-separated tags.
    public var tags: String?
    /// Category id.
    public var cateId: Int?
    /// Description.
    public var description: String?
    /// `Uploading`, `Uploaded`, `UploadFail` or `Deleted`.
    public var status: String
    /// Bytes stored, once uploaded.
    public var size: Int64?
    /// Bucket.
    public var bucket: String
    /// Key.
    public var key: String
    /// Creation time.
    public var createdAt: Date
    /// Access key that created it (nil for images created before owners were recorded: only the root key acts on
    /// those).
    public var owner: String?
    /// The token CreateUploadImage was called with: asked again with it while the image is uploading, it answers
    /// this image.
    public var clientToken: String?

    /// Creates a record; what is optional may be left out.
    package init(
        imageId: String, imageType: String, title: String? = nil, tags: String? = nil, cateId: Int? = nil,
        description: String? = nil, status: String, size: Int64? = nil, bucket: String, key: String, createdAt: Date,
        owner: String? = nil, clientToken: String? = nil
    ) {
        self.imageId = imageId
        self.imageType = imageType
        self.title = title
        self.tags = tags
        self.cateId = cateId
        self.description = description
        self.status = status
        self.size = size
        self.bucket = bucket
        self.key = key
        self.createdAt = createdAt
        self.owner = owner
        self.clientToken = clientToken
    }
}

/// Statuses of an image.
public enum ImageStatus {
    /// Created; its file is not in storage yet.
    public static let uploading = "Uploading"
    /// Its file is stored.
    public static let uploaded = "Uploaded"
    /// Its file was not stored within the upload's time (`--uploading-video-max-age`); it takes no more uploads.
    public static let uploadFailed = "UploadFail"
    /// Deleted (DeleteImage); its file is gone and it takes no more uploads.
    public static let deleted = "Deleted"
}
