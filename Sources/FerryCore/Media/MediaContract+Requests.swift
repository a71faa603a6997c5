import Foundation

// The media API's requests: the server decodes them, `MediaServiceClient` encodes them, and docs/openapi.yaml lists
// the same wire names (MediaContractRequestTests holds every request type to its operation's schema).
//
// Request fields are optional: a field the server requires is checked there, so that a request without it is
// answered `MissingParameter` naming the wire field rather than failing to decode.

extension MediaContract {
    // MARK: Videos

    /// CreateUploadVideo: a new video, and where to upload its file (the answer is an ``UploadTicketAnswer``).
    public struct CreateUploadVideoRequest: Codable, Sendable, Hashable {
        /// Title, at most 128 bytes (required).
        public var title: String?
        /// File name with its extension, e.g. `holiday.mp4` (required).
        public var fileName: String?
        /// Size in bytes, when known.
        public var fileSize: Int64?
        /// Description, at most 1024 bytes.
        public var description: String?
        /// Cover image URL.
        public var coverURL: String?
        /// Category id.
        public var cateId: Int?
        /// Comma-separated tags (at most 16 of at most 32 bytes).
        public var tags: String?
        /// Transcoding template group (`default`, `NoTranscode`, or a configured group).
        public var transcode: String?
        /// Same as ``transcode`` (the name the VOD services use); wins when both are given.
        public var templateGroupId: String?
        /// Free data for the app, at most 1024 bytes.
        public var userData: String?
        /// Makes the call idempotent: while a video created with this token is still uploading, creating again with
        /// it answers that video (with fresh credentials). 1 to 64 printable ASCII characters.
        public var clientToken: String?
        /// Who may play it: ``PlaybackPolicy/signed`` (the default) or ``PlaybackPolicy/public``.
        public var playbackPolicy: PlaybackPolicy?
        /// Which progressive files are offered for download (``DownloadPolicy``; `all` by default).
        public var downloads: DownloadPolicy?

        /// Creates a request.
        public init(
            title: String?, fileName: String?, fileSize: Int64? = nil, description: String? = nil,
            coverURL: String? = nil, cateId: Int? = nil, tags: String? = nil, transcode: String? = nil,
            templateGroupId: String? = nil, userData: String? = nil, clientToken: String? = nil,
            playbackPolicy: PlaybackPolicy? = nil, downloads: DownloadPolicy? = nil
        ) {
            self.playbackPolicy = playbackPolicy
            self.downloads = downloads
            self.title = title
            self.fileName = fileName
            self.fileSize = fileSize
            self.description = description
            self.coverURL = coverURL
            self.cateId = cateId
            self.tags = tags
            self.transcode = transcode
            self.templateGroupId = templateGroupId
            self.userData = userData
            self.clientToken = clientToken
        }

        enum CodingKeys: String, CodingKey {
            case title = "Title"
            case fileName = "FileName"
            case fileSize = "FileSize"
            case description = "Description"
            case coverURL = "CoverURL"
            case cateId = "CateId"
            case tags = "Tags"
            case transcode = "Transcode"
            case templateGroupId = "TemplateGroupId"
            case userData = "UserData"
            case clientToken = "ClientToken"
            case playbackPolicy = "PlaybackPolicy"
            case downloads = "Downloads"
        }
    }

    /// A request naming one video: RefreshUploadVideo and GetVideoInfo.
    public struct VideoIdRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?

        /// Creates a request.
        public init(videoId: String?) { self.videoId = videoId }

        enum CodingKeys: String, CodingKey { case videoId = "VideoId" }
    }

    /// GetMezzanineInfo: a video's source file (the answer is a ``MezzanineInfoAnswer``).
    public struct MezzanineInfoRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?
        /// Seconds the download URL is valid, 1 to 604800; 3600 when absent.
        public var authTimeout: Int?

        /// Creates a request.
        public init(videoId: String?, authTimeout: Int? = nil) {
            self.videoId = videoId
            self.authTimeout = authTimeout
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId"
            case authTimeout = "AuthTimeout"
        }
    }

    /// GetPlayInfo: a video's playable streams (the answer is a ``PlayInfoAnswer``).
    public struct PlayInfoRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?
        /// Seconds the play URLs are valid, 1 to 604800; 3600 when absent.
        public var authTimeout: Int?
        /// Comma-separated formats to list (`m3u8,mp4`); every format when absent.
        public var formats: String?
        /// Comma-separated definitions to list (`LD,HD`); every definition when absent.
        public var definition: String?

        /// Creates a request.
        public init(videoId: String?, authTimeout: Int? = nil, formats: String? = nil, definition: String? = nil) {
            self.videoId = videoId
            self.authTimeout = authTimeout
            self.formats = formats
            self.definition = definition
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId"
            case authTimeout = "AuthTimeout"
            case formats = "Formats"
            case definition = "Definition"
        }
    }

    /// UpdateVideoInfo: fields left out stay as they are; an empty description, tags or cover URL clears it.
    public struct UpdateVideoInfoRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?
        /// A new title (not empty, at most 128 bytes).
        public var title: String?
        /// A new description, at most 1024 bytes.
        public var description: String?
        /// New comma-separated tags.
        public var tags: String?
        /// A new category id.
        public var cateId: Int?
        /// A new cover: an http or https URL.
        public var coverURL: String?
        /// A new playback policy.
        public var playbackPolicy: PlaybackPolicy?
        /// New download choices (``DownloadPolicy``).
        public var downloads: DownloadPolicy?

        /// Creates a request.
        public init(
            videoId: String?, title: String? = nil, description: String? = nil, tags: String? = nil, cateId: Int? = nil,
            coverURL: String? = nil, playbackPolicy: PlaybackPolicy? = nil, downloads: DownloadPolicy? = nil
        ) {
            self.playbackPolicy = playbackPolicy
            self.downloads = downloads
            self.videoId = videoId
            self.title = title
            self.description = description
            self.tags = tags
            self.cateId = cateId
            self.coverURL = coverURL
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId"
            case title = "Title"
            case description = "Description"
            case tags = "Tags"
            case cateId = "CateId"
            case coverURL = "CoverURL"
            case playbackPolicy = "PlaybackPolicy"
            case downloads = "Downloads"
        }
    }

    /// DeleteVideo: videos to delete with their files (the answer is a ``DeleteVideoAnswer``).
    public struct DeleteVideoRequest: Codable, Sendable, Hashable {
        /// Comma-separated ids, at most 20 (required).
        public var videoIds: String?

        /// Creates a request.
        public init(videoIds: String?) { self.videoIds = videoIds }

        /// Creates a request for a list of ids.
        public init(videoIds: [String]) { self.videoIds = videoIds.joined(separator: ",") }

        enum CodingKeys: String, CodingKey { case videoIds = "VideoIds" }
    }

    /// DeleteImage: images to delete with their files (the answer is a ``DeleteImageAnswer``).
    public struct DeleteImageRequest: Codable, Sendable, Hashable {
        /// Comma-separated ids, at most 20 (required).
        public var imageIds: String?

        /// Creates a request.
        public init(imageIds: String?) { self.imageIds = imageIds }

        /// Creates a request for a list of ids.
        public init(imageIds: [String]) { self.imageIds = imageIds.joined(separator: ",") }

        enum CodingKeys: String, CodingKey { case imageIds = "ImageIds" }
    }

    /// ListVideos: a page of videos, newest first (the answer is a ``VideoListAnswer``).
    public struct ListVideosRequest: Codable, Sendable, Hashable {
        /// The statuses `Status` may name.
        public static let statuses = ["Uploading", "UploadSucc", "Transcoding", "Normal", "TranscodeFail", "UploadFail"]
        /// The pages `PageNo` may name (a page beyond the last is empty, not an error).
        public static let pageNumbers = 1...1_000_000
        /// The page sizes `PageSize` may ask for.
        public static let pageSizes = 1...100

        /// Only videos with this status (one of ``statuses``).
        public var status: String?
        /// Only videos of this category.
        public var cateId: Int?
        /// Only videos with this tag.
        public var tag: String?
        /// Only videos whose title contains this (at most 128 bytes).
        public var title: String?
        /// The page, from 1; 1 when absent.
        public var pageNo: Int?
        /// Videos per page, 1 to 100; 20 when absent.
        public var pageSize: Int?

        /// Creates a request.
        public init(
            status: String? = nil, cateId: Int? = nil, tag: String? = nil, title: String? = nil, pageNo: Int? = nil,
            pageSize: Int? = nil
        ) {
            self.status = status
            self.cateId = cateId
            self.tag = tag
            self.title = title
            self.pageNo = pageNo
            self.pageSize = pageSize
        }

        enum CodingKeys: String, CodingKey {
            case status = "Status"
            case cateId = "CateId"
            case tag = "Tag"
            case title = "Title"
            case pageNo = "PageNo"
            case pageSize = "PageSize"
        }
    }

    // MARK: Images

    /// CreateUploadImage: a new image, and where to upload it (the answer is an ``UploadTicketAnswer``).
    public struct CreateUploadImageRequest: Codable, Sendable, Hashable {
        /// `default` or `cover`; `default` when absent.
        public var imageType: String?
        /// `png`, `jpg`, `jpeg`, `gif`, `webp` or `heic`; `png` when absent.
        public var imageExt: String?
        /// Title, at most 128 bytes.
        public var title: String?
        /// Comma-separated tags.
        public var tags: String?
        /// Category id.
        public var cateId: Int?
        /// Description, at most 1024 bytes.
        public var description: String?
        /// Makes the call idempotent: while an image of this type created with this token is still uploading,
        /// creating again with it answers that image (with fresh credentials). 1 to 64 printable ASCII characters.
        public var clientToken: String?

        /// Creates a request.
        public init(
            imageType: String? = nil, imageExt: String? = nil, title: String? = nil, tags: String? = nil,
            cateId: Int? = nil, description: String? = nil, clientToken: String? = nil
        ) {
            self.imageType = imageType
            self.imageExt = imageExt
            self.title = title
            self.tags = tags
            self.cateId = cateId
            self.description = description
            self.clientToken = clientToken
        }

        enum CodingKeys: String, CodingKey {
            case imageType = "ImageType"
            case imageExt = "ImageExt"
            case title = "Title"
            case tags = "Tags"
            case cateId = "CateId"
            case description = "Description"
            case clientToken = "ClientToken"
        }
    }

    /// RefreshUploadImage: a fresh credential for an image still being uploaded.
    public struct ImageIdRequest: Codable, Sendable, Hashable {
        /// The image's id (required).
        public var imageId: String?

        /// Creates a request.
        public init(imageId: String?) { self.imageId = imageId }

        enum CodingKeys: String, CodingKey { case imageId = "ImageId" }
    }

    /// GetImageInfo: an image and a signed URL of it.
    public struct ImageInfoRequest: Codable, Sendable, Hashable {
        /// The image's id (required).
        public var imageId: String?
        /// Seconds the URL is valid, 1 to 604800; 3600 when absent.
        public var authTimeout: Int?

        /// Creates a request.
        public init(imageId: String?, authTimeout: Int? = nil) {
            self.imageId = imageId
            self.authTimeout = authTimeout
        }

        enum CodingKeys: String, CodingKey {
            case imageId = "ImageId"
            case authTimeout = "AuthTimeout"
        }
    }

    // MARK: STS and access keys

    /// AssumeRole: temporary credentials (the answer is an ``AssumeRoleAnswer``).
    public struct AssumeRoleRequest: Codable, Sendable, Hashable {
        /// Seconds the credentials last, 900 to 43200; 3600 when absent.
        public var durationSeconds: Int?
        /// Narrows what the credentials may do (they never may more than the key that asks).
        public var policy: AccessPolicy?

        /// Creates a request.
        public init(durationSeconds: Int? = nil, policy: AccessPolicy? = nil) {
            self.durationSeconds = durationSeconds
            self.policy = policy
        }

        enum CodingKeys: String, CodingKey {
            case durationSeconds = "DurationSeconds"
            case policy = "Policy"
        }
    }

    /// CreateAccessKey (root key only): a long-term key (the answer is a ``CreateAccessKeyAnswer``).
    public struct CreateAccessKeyRequest: Codable, Sendable, Hashable {
        /// What the key may do (required).
        public var policy: AccessPolicy?
        /// A note for people, at most 256 bytes.
        public var description: String?
        /// Its limits, shared by its temporary credentials; none when absent.
        public var quota: AccessKeyQuota?

        /// Creates a request.
        public init(policy: AccessPolicy?, description: String? = nil, quota: AccessKeyQuota? = nil) {
            self.policy = policy
            self.description = description
            self.quota = quota
        }

        enum CodingKeys: String, CodingKey {
            case policy = "Policy"
            case description = "Description"
            case quota = "Quota"
        }
    }

    /// UpdateAccessKey (root key only): sets a key's quota, which its temporary credentials follow at once (the answer
    /// is an ``AccessKeyAnswer``).
    public struct UpdateAccessKeyRequest: Codable, Sendable, Hashable {
        /// The key's id (required).
        public var accessKeyId: String?
        /// Its new limits (required); an empty object removes every limit.
        public var quota: AccessKeyQuota?

        /// Creates a request.
        public init(accessKeyId: String?, quota: AccessKeyQuota?) {
            self.accessKeyId = accessKeyId
            self.quota = quota
        }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case quota = "Quota"
        }
    }

    /// GetUsage: what a key holds against its quota (the answer is a ``UsageAnswer``). The root key asks about any
    /// key; another key (or a temporary credential) only about itself.
    public struct GetUsageRequest: Codable, Sendable, Hashable {
        /// The long-term key asked about; the caller's own when absent.
        public var accessKeyId: String?

        /// Creates a request.
        public init(accessKeyId: String? = nil) { self.accessKeyId = accessKeyId }

        enum CodingKeys: String, CodingKey { case accessKeyId = "AccessKeyId" }
    }

    /// ListAccessKeys (root key only): it takes no parameters (the answer is a ``ListAccessKeysAnswer``).
    public struct ListAccessKeysRequest: Codable, Sendable, Hashable {
        /// Creates a request.
        public init() {}
    }

    /// DisableAccessKey (root key only): the key and its temporary credentials stop working.
    public struct AccessKeyIdRequest: Codable, Sendable, Hashable {
        /// The key's id (required).
        public var accessKeyId: String?

        /// Creates a request.
        public init(accessKeyId: String?) { self.accessKeyId = accessKeyId }

        enum CodingKeys: String, CodingKey { case accessKeyId = "AccessKeyId" }
    }

    // MARK: Webhooks

    /// ListWebhookEvents (root key only): the newest webhook events.
    public struct ListWebhookEventsRequest: Codable, Sendable, Hashable {
        /// How many, 1 to 500; 50 when absent.
        public var limit: Int?

        /// Creates a request.
        public init(limit: Int? = nil) { self.limit = limit }

        enum CodingKeys: String, CodingKey { case limit = "Limit" }
    }

    /// RetryWebhookEvent (root key only): delivers a failed event again.
    public struct WebhookEventIdRequest: Codable, Sendable, Hashable {
        /// The event's id (required).
        public var eventId: String?

        /// Creates a request.
        public init(eventId: String?) { self.eventId = eventId }

        enum CodingKeys: String, CodingKey { case eventId = "EventId" }
    }
}
