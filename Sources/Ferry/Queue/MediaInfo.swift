import Foundation

/// What a media file is: the media service keeps videos and images apart.
public enum MediaKind: String, Sendable, Hashable, Codable {
    /// A video: CreateUploadVideo, a VideoId, a play URL.
    case video
    /// An image: CreateUploadImage, an ImageURL.
    case image

    /// Extensions taken for images; everything else is a video.
    public static let imageExtensions: Set<String> = ["png", "jpg", "jpeg", "gif", "webp", "heic"]

    /// The kind a file's extension suggests.
    public init(fileURL: URL) {
        self = Self.imageExtensions.contains(fileURL.pathExtension.lowercased()) ? .image : .video
    }

    /// The `Content-Type` for a media file extension, or nil when it is not a known one.
    public static func contentType(forExtension ext: String) -> String? {
        switch ext.lowercased() {
        case "mp4", "m4v": "video/mp4"
        case "mov": "video/quicktime"
        case "webm": "video/webm"
        case "png": "image/png"
        case "jpg", "jpeg": "image/jpeg"
        case "gif": "image/gif"
        case "webp": "image/webp"
        case "heic": "image/heic"
        default: nil
        }
    }
}

/// Title, tags, description, category and cover of a video or image (the seeds' `VodInfo` and `VodSVideoInfo`).
public struct MediaInfo: Sendable, Hashable {
    /// Title; default: the file name without its extension.
    public var title: String?
    /// Comma-separated tags (at most 16, each at most 32 bytes).
    public var tags: String?
    /// Description.
    public var desc: String?
    /// Category id.
    public var cateId: Int?
    /// URL of the video's cover image (videos only).
    public var coverURL: String?

    /// Creates the information; every field is optional.
    public init(title: String? = nil, tags: String? = nil, desc: String? = nil, cateId: Int? = nil, coverURL: String? = nil) {
        self.title = title
        self.tags = tags
        self.desc = desc
        self.cateId = cateId
        self.coverURL = coverURL
    }
}

/// What a finished media upload produced (the seeds' `VodUploadResult`).
public struct MediaUploadResult: Sendable, Hashable {
    /// The video id, for a video whose upload address this SDK obtained (STS) or the app handed over with one.
    public var videoId: String?
    /// The image id, for an image: GetImageInfo (``MediaServiceClient/getImageInfo(imageId:authTimeout:)``) gives a
    /// URL that reads it.
    public var imageId: String?
    /// The image's address, for an image: its name in the media bucket, which a reader needs a signature for (a
    /// video's `CoverURL` naming it is answered presigned).
    public var imageURL: String?
    /// What the object service stored: key, ETag, size, the verified checksum.
    public var upload: UploadResult
}
