import Foundation

/// The media API's answers about videos, as one set of `Codable` types: the server encodes them, the client
/// (`MediaServiceClient`) decodes them, and docs/openapi.yaml describes the same fields, with a test holding real
/// answers to it. Swift names are lower camel case; the wire names (`VideoId`, `PlayURL`, …) are the VOD services'.
public enum MediaContract {
    /// A video as GetVideoInfo and ListVideos describe it.
    public struct Video: Codable, Sendable, Hashable {
        /// Id.
        public var videoId: String
        /// Title.
        public var title: String
        /// `Uploading`, `UploadSucc`, `Transcoding`, `Normal`, `TranscodeFail`, `UploadFail`.
        public var status: String
        /// The file name it was created with.
        public var fileName: String?
        /// When it was created, ISO 8601.
        public var creationTime: String?
        /// When it last changed, ISO 8601.
        public var modificationTime: String?
        /// The transcoding template group (`default`, `NoTranscode`, …).
        public var templateGroupId: String?
        /// Bytes of the stored source, once uploaded.
        public var size: Int64?
        /// Description.
        public var description: String?
        /// The cover: the URL it was given, or a signed URL of the cover taken from the video.
        public var coverURL: String?
        /// Signed URLs of the pictures taken from the video.
        public var snapshots: [String]?
        /// Category id.
        public var cateId: Int?
        /// Comma-separated tags.
        public var tags: String?
        /// Free data for the app.
        public var userData: String?
        /// Width of the source as displayed, once probed.
        public var width: Int?
        /// Height of the source as displayed, once probed.
        public var height: Int?
        /// Seconds, once probed.
        public var duration: Double?
        /// Frames per second of the source, once probed.
        public var fps: Double?
        /// Bit rate of the source in kbit/s, once probed.
        public var bitrate: Int?
        /// `video` or `audio`, once probed.
        public var mediaType: String?
        /// Why processing failed (`TranscodeFail`): `InvalidMedia`, `TranscodeError`, …
        public var errorCode: String?
        /// What went wrong, in the tool's words.
        public var errorMessage: String?
        /// Why a video waits (the server has no ffmpeg, processing is off, a retry is due).
        public var statusMessage: String?
        /// Percent of the transcode done, while `Transcoding`.
        public var processingProgress: Int?
        /// Who may play it: `public` (anyone with its playback address) or `signed` (a token is needed).
        public var playbackPolicy: PlaybackPolicy?
        /// Whether it has a stream to play (GetPlayInfo answers): its first stream may be while it is still
        /// `Transcoding`.
        public var playable: Bool?
        /// When it first had a stream to play (ISO 8601).
        public var playableTime: String?
        /// Which progressive files are offered for download.
        public var downloads: DownloadPolicy?

        /// Creates a video description.
        public init(videoId: String, title: String, status: String) {
            self.videoId = videoId
            self.title = title
            self.status = status
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId", title = "Title", status = "Status", fileName = "FileName"
            case creationTime = "CreationTime", modificationTime = "ModificationTime"
            case templateGroupId = "TemplateGroupId", size = "Size", description = "Description", coverURL = "CoverURL"
            case snapshots = "Snapshots", cateId = "CateId", tags = "Tags", userData = "UserData", width = "Width"
            case height = "Height", duration = "Duration", fps = "Fps", bitrate = "Bitrate", mediaType = "MediaType"
            case errorCode = "ErrorCode", errorMessage = "ErrorMessage", statusMessage = "StatusMessage"
            case processingProgress = "ProcessingProgress", playbackPolicy = "PlaybackPolicy", playable = "Playable"
            case playableTime = "PlayableTime", downloads = "Downloads"
        }
    }

    /// GetVideoInfo's answer.
    public struct VideoInfoAnswer: Codable, Sendable, Hashable {
        /// The video.
        public var video: Video
        /// Creates an answer.
        public init(video: Video) { self.video = video }
        enum CodingKeys: String, CodingKey { case video = "Video" }
    }

    /// ListVideos' answer: a page of videos, newest first.
    public struct VideoListAnswer: Codable, Sendable, Hashable {
        /// The page.
        public var videoList: [Video]
        /// How many videos match.
        public var total: Int
        /// The page number.
        public var pageNo: Int
        /// The page size.
        public var pageSize: Int
        /// Creates an answer.
        public init(videoList: [Video], total: Int, pageNo: Int, pageSize: Int) {
            self.videoList = videoList
            self.total = total
            self.pageNo = pageNo
            self.pageSize = pageSize
        }
        enum CodingKeys: String, CodingKey { case videoList = "VideoList", total = "Total", pageNo = "PageNo", pageSize = "PageSize" }
    }

    /// One playable stream of GetPlayInfo.
    public struct PlayStream: Codable, Sendable, Hashable {
        /// `LD`, `SD`, `HD`, `FHD`, `SQ` (audio), `AUTO` (HLS master playlist) or `OD` (the original).
        public var definition: String
        /// `m3u8`, `mp4`, `m4a`, or the original's extension.
        public var format: String
        /// Signed URL; an HLS playlist's segments are reachable with it by their relative URIs.
        public var url: String
        /// Bytes (every file of an HLS rendition).
        public var size: Int64
        /// `Normal`.
        public var status: String
        /// Picture width.
        public var width: Int?
        /// Picture height.
        public var height: Int?
        /// kbit/s.
        public var bitrate: Int?
        /// Seconds.
        public var duration: Double?
        /// Frames per second.
        public var fps: Double?
        /// When the URL stops working, ISO 8601.
        public var expiration: String?

        /// Creates a stream.
        public init(definition: String, format: String, url: String, size: Int64, status: String = "Normal") {
            self.definition = definition
            self.format = format
            self.url = url
            self.size = size
            self.status = status
        }

        /// ``expiration`` as a date.
        public var expirationDate: Date? { expiration.flatMap { try? Date($0, strategy: .iso8601) } }

        enum CodingKeys: String, CodingKey {
            case definition = "Definition", format = "Format", url = "PlayURL", size = "Size", status = "Status"
            case width = "Width", height = "Height", bitrate = "Bitrate", duration = "Duration", fps = "Fps"
            case expiration = "Expiration"
        }
    }

    /// The video part of GetPlayInfo's answer.
    public struct VideoBase: Codable, Sendable, Hashable {
        /// Id.
        public var videoId: String
        /// Title.
        public var title: String
        /// Status (`Normal`).
        public var status: String
        /// When it was created, ISO 8601.
        public var creationTime: String?
        /// `video` or `audio`.
        public var mediaType: String?
        /// The cover's URL.
        public var coverURL: String?
        /// Seconds.
        public var duration: Double?
        /// The storyboard's WebVTT file (`storyboard.vtt`): one cue per tile of its sprite, as `storyboard.jpg#xywh=`
        /// fragments relative to it. Nil until the video has published renditions with one.
        public var storyboardURL: String?

        /// Creates a base.
        public init(videoId: String, title: String, status: String) {
            self.videoId = videoId
            self.title = title
            self.status = status
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId", title = "Title", status = "Status", creationTime = "CreationTime"
            case mediaType = "MediaType", coverURL = "CoverURL", duration = "Duration"
            case storyboardURL = "StoryboardURL"
        }
    }

    /// GetPlayInfo's answer: the video and its playable streams.
    public struct PlayInfoAnswer: Codable, Sendable, Hashable {
        /// The video.
        public var videoBase: VideoBase
        /// The streams.
        public var playInfoList: [PlayStream]
        /// Creates an answer.
        public init(videoBase: VideoBase, playInfoList: [PlayStream]) {
            self.videoBase = videoBase
            self.playInfoList = playInfoList
        }
        enum CodingKeys: String, CodingKey { case videoBase = "VideoBase", playInfoList = "PlayInfoList" }
    }

    /// The answer to CreateUploadVideo, RefreshUploadVideo, CreateUploadImage and RefreshUploadImage.
    public struct UploadTicketAnswer: Codable, Sendable, Hashable {
        /// The video's id (video operations).
        public var videoId: String?
        /// The image's id (image operations).
        public var imageId: String?
        /// The image's URL (image operations).
        public var imageURL: String?
        /// Where to upload, base64 JSON (``UploadAddress``).
        public var uploadAddress: String
        /// With what, base64 JSON (``UploadAuth``).
        public var uploadAuth: String
        /// Where a tus client sends its creation `POST`, and where a URLSession upload task (iOS 17+, macOS 14+)
        /// starts an IETF resumable upload, of this one object: the URL carries its own credential, expiring with
        /// ``uploadAuth``'s.
        public var resumableUploadURL: String?

        /// Creates an answer.
        public init(
            videoId: String? = nil, imageId: String? = nil, imageURL: String? = nil, uploadAddress: String, uploadAuth: String,
            resumableUploadURL: String? = nil
        ) {
            self.videoId = videoId
            self.imageId = imageId
            self.imageURL = imageURL
            self.uploadAddress = uploadAddress
            self.uploadAuth = uploadAuth
            self.resumableUploadURL = resumableUploadURL
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId", imageId = "ImageId", imageURL = "ImageURL", uploadAddress = "UploadAddress"
            case uploadAuth = "UploadAuth", resumableUploadURL = "ResumableUploadURL"
        }
    }

    /// Encodes an answer as the JSON object the server sends (keys sorted).
    public static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    /// Decodes an answer.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }
}
