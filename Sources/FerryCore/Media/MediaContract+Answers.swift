import Foundation

// The media API's refusals, and its answers about a video's source file, deletions, STS and access keys: the server
// encodes them, `MediaServiceClient` decodes them, and docs/openapi.yaml describes the same fields (MediaOpenAPITests
// holds real answers to it).

extension MediaContract {
    // MARK: Errors

    /// A refusal: the body of every 4xx and 5xx answer of the media API, `{code, message, requestId}`.
    public struct ErrorAnswer: Codable, Sendable, Hashable {
        /// Error code, e.g. `InvalidParameter`, `InvalidVideo.NotFound`.
        public var code: String?
        /// Message for people.
        public var message: String?
        /// The request's id.
        public var requestId: String?

        /// Creates a refusal.
        public init(code: String?, message: String?, requestId: String?) {
            self.code = code
            self.message = message
            self.requestId = requestId
        }
    }

    // MARK: Source file

    /// One stream of a video's source file, as GetMezzanineInfo lists it.
    public struct MezzanineStream: Codable, Sendable, Hashable {
        /// Codec (`h264`, `hevc`, `aac`, `opus`, …).
        public var codecName: String?
        /// Picture width (video).
        public var width: Int?
        /// Picture height (video).
        public var height: Int?
        /// Frames per second (video).
        public var fps: Double?
        /// kbit/s, when known.
        public var bitrate: Int?
        /// Pixel format (`yuv420p`, …) (video).
        public var pixFmt: String?
        /// Degrees the picture is rotated by when displayed (video).
        public var rotate: Int?
        /// Sample rate (audio).
        public var sampleRate: Int?
        /// Channels (audio).
        public var channels: Int?

        /// Creates a stream.
        public init(codecName: String?) { self.codecName = codecName }

        enum CodingKeys: String, CodingKey {
            case codecName = "CodecName"
            case width = "Width"
            case height = "Height"
            case fps = "Fps"
            case bitrate = "Bitrate"
            case pixFmt = "PixFmt"
            case rotate = "Rotate"
            case sampleRate = "SampleRate"
            case channels = "Channels"
        }
    }

    /// A video's source file as GetMezzanineInfo describes it.
    public struct Mezzanine: Codable, Sendable, Hashable {
        /// Id of the video.
        public var videoId: String
        /// The name it was uploaded as.
        public var fileName: String
        /// Bytes.
        public var size: Int64
        /// Signed URL to download it.
        public var fileURL: String
        /// The stored file's ETag, without quotes (hex MD5, or `hex-N` for a multipart upload): an uploader compares it
        /// with its file's to recognise an upload a run that was stopped had finished. A Ferry extension; nil when
        /// the file is no longer stored.
        public var eTag: String?
        /// `Normal` once probed, `Analysing` before, `AnalysisFail` when ffprobe could not read it.
        public var status: String
        /// When the video was created, ISO 8601.
        public var creationTime: String?
        /// Seconds.
        public var duration: Double?
        /// kbit/s of the whole file.
        public var bitrate: Int?
        /// Picture width as displayed (after rotation).
        public var width: Int?
        /// Picture height as displayed (after rotation).
        public var height: Int?
        /// Frames per second.
        public var fps: Double?
        /// Container (ffprobe's `format_name`).
        public var formatName: String?
        /// The video stream (empty without video), once probed.
        public var videoStreamList: [MezzanineStream]?
        /// The audio stream (empty without audio), once probed.
        public var audioStreamList: [MezzanineStream]?

        /// Creates a description.
        public init(videoId: String, fileName: String, size: Int64, fileURL: String, status: String) {
            self.videoId = videoId
            self.fileName = fileName
            self.size = size
            self.fileURL = fileURL
            self.status = status
        }

        /// Codec of the video stream (`h264`, `hevc`), if any.
        public var videoCodec: String? { videoStreamList?.first?.codecName }
        /// Codec of the audio stream (`aac`, `opus`), if any.
        public var audioCodec: String? { audioStreamList?.first?.codecName }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId"
            case fileName = "FileName"
            case size = "Size"
            case fileURL = "FileURL"
            case eTag = "ETag"
            case status = "Status"
            case creationTime = "CreationTime"
            case duration = "Duration"
            case bitrate = "Bitrate"
            case width = "Width"
            case height = "Height"
            case fps = "Fps"
            case formatName = "FormatName"
            case videoStreamList = "VideoStreamList"
            case audioStreamList = "AudioStreamList"
        }
    }

    /// GetMezzanineInfo's answer.
    public struct MezzanineInfoAnswer: Codable, Sendable, Hashable {
        /// The source file.
        public var mezzanine: Mezzanine
        /// Creates an answer.
        public init(mezzanine: Mezzanine) { self.mezzanine = mezzanine }
        enum CodingKeys: String, CodingKey { case mezzanine = "Mezzanine" }
    }

    // MARK: Deletion

    /// DeleteVideo's answer.
    public struct DeleteVideoAnswer: Codable, Sendable, Hashable {
        /// The ids of the videos deleted, in the order asked.
        public var deletedVideoIds: [String]
        /// Creates an answer.
        public init(deletedVideoIds: [String]) { self.deletedVideoIds = deletedVideoIds }
        enum CodingKeys: String, CodingKey { case deletedVideoIds = "DeletedVideoIds" }
    }

    /// DeleteImage's answer.
    public struct DeleteImageAnswer: Codable, Sendable, Hashable {
        /// The ids of the images deleted, in the order asked.
        public var deletedImageIds: [String]
        /// Creates an answer.
        public init(deletedImageIds: [String]) { self.deletedImageIds = deletedImageIds }
        enum CodingKeys: String, CodingKey { case deletedImageIds = "DeletedImageIds" }
    }

    // MARK: STS and access keys

    /// Temporary credentials, as AssumeRole issues them.
    public struct TemporaryCredentials: Codable, Sendable, Hashable {
        /// Access key id.
        public var accessKeyId: String
        /// Secret access key.
        public var accessKeySecret: String
        /// Session token, sent with every request signed with them.
        public var securityToken: String
        /// When they stop working, ISO 8601.
        public var expiration: String

        /// Creates credentials.
        public init(accessKeyId: String, accessKeySecret: String, securityToken: String, expiration: String) {
            self.accessKeyId = accessKeyId
            self.accessKeySecret = accessKeySecret
            self.securityToken = securityToken
            self.expiration = expiration
        }

        /// ``expiration`` as a date.
        public var expirationDate: Date? { try? Date(expiration, strategy: .iso8601) }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case accessKeySecret = "AccessKeySecret"
            case securityToken = "SecurityToken"
            case expiration = "Expiration"
        }
    }

    /// AssumeRole's answer.
    public struct AssumeRoleAnswer: Codable, Sendable, Hashable {
        /// The temporary credentials.
        public var credentials: TemporaryCredentials
        /// Creates an answer.
        public init(credentials: TemporaryCredentials) { self.credentials = credentials }
        enum CodingKeys: String, CodingKey { case credentials = "Credentials" }
    }

    /// A long-term access key as CreateAccessKey answers it: the only time its secret is shown.
    public struct NewAccessKey: Codable, Sendable, Hashable {
        /// Access key id.
        public var accessKeyId: String
        /// Secret access key.
        public var accessKeySecret: String
        /// `active`.
        public var status: String

        /// Creates a key description.
        public init(accessKeyId: String, accessKeySecret: String, status: String) {
            self.accessKeyId = accessKeyId
            self.accessKeySecret = accessKeySecret
            self.status = status
        }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case accessKeySecret = "AccessKeySecret"
            case status = "Status"
        }
    }

    /// CreateAccessKey's answer.
    public struct CreateAccessKeyAnswer: Codable, Sendable, Hashable {
        /// The new key.
        public var accessKey: NewAccessKey
        /// Creates an answer.
        public init(accessKey: NewAccessKey) { self.accessKey = accessKey }
        enum CodingKeys: String, CodingKey { case accessKey = "AccessKey" }
    }

    /// A long-term access key as ListAccessKeys describes it (without its secret).
    public struct AccessKey: Codable, Sendable, Hashable {
        /// Access key id.
        public var accessKeyId: String
        /// `active` or `disabled`.
        public var status: String
        /// The note it was created with.
        public var description: String
        /// When it was created, ISO 8601.
        public var creationTime: String
        /// What it may do.
        public var policy: AccessPolicy
        /// Its limits; nil when it has none.
        public var quota: AccessKeyQuota?

        /// Creates a key description.
        public init(
            accessKeyId: String, status: String, description: String, creationTime: String, policy: AccessPolicy,
            quota: AccessKeyQuota? = nil
        ) {
            self.accessKeyId = accessKeyId
            self.status = status
            self.description = description
            self.creationTime = creationTime
            self.policy = policy
            self.quota = quota
        }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case status = "Status"
            case description = "Description"
            case creationTime = "CreationTime"
            case policy = "Policy"
            case quota = "Quota"
        }
    }

    /// UpdateAccessKey's answer: the key as it is now.
    public struct AccessKeyAnswer: Codable, Sendable, Hashable {
        /// The key.
        public var accessKey: AccessKey
        /// Creates an answer.
        public init(accessKey: AccessKey) { self.accessKey = accessKey }
        enum CodingKeys: String, CodingKey { case accessKey = "AccessKey" }
    }

    /// What a key holds, as GetUsage counts it against its quota.
    public struct Usage: Codable, Sendable, Hashable {
        /// Bytes of its objects and of the parts of its multipart uploads in progress.
        public var storageBytes: Int64
        /// Its videos (not deleted).
        public var videos: Int
        /// Its multipart uploads in progress.
        public var uploadsInProgress: Int

        /// Creates a usage.
        public init(storageBytes: Int64, videos: Int, uploadsInProgress: Int) {
            self.storageBytes = storageBytes
            self.videos = videos
            self.uploadsInProgress = uploadsInProgress
        }

        enum CodingKeys: String, CodingKey {
            case storageBytes = "StorageBytes"
            case videos = "Videos"
            case uploadsInProgress = "UploadsInProgress"
        }
    }

    /// GetUsage's answer.
    public struct UsageAnswer: Codable, Sendable, Hashable {
        /// The long-term key counted.
        public var accessKeyId: String
        /// What it holds.
        public var usage: Usage
        /// Its limits; nil when it has none (the root key never has).
        public var quota: AccessKeyQuota?

        /// Creates an answer.
        public init(accessKeyId: String, usage: Usage, quota: AccessKeyQuota?) {
            self.accessKeyId = accessKeyId
            self.usage = usage
            self.quota = quota
        }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId"
            case usage = "Usage"
            case quota = "Quota"
        }
    }

    /// ListAccessKeys' answer.
    public struct ListAccessKeysAnswer: Codable, Sendable, Hashable {
        /// Every long-term key but the root key.
        public var accessKeys: [AccessKey]
        /// Creates an answer.
        public init(accessKeys: [AccessKey]) { self.accessKeys = accessKeys }
        enum CodingKeys: String, CodingKey { case accessKeys = "AccessKeys" }
    }
}

extension MediaContract.TemporaryCredentials: SecretRedacting {
    /// The key id and expiry only; the secret and the token are never printed.
    public var description: String { "TemporaryCredentials(\(accessKeyId), expires \(expiration))" }
    /// The fields without the secret and the token.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "accessKeyId": accessKeyId, "accessKeySecret": "<redacted>", "securityToken": "<redacted>",
            "expiration": expiration,
        ]
    }
}

extension MediaContract.UploadTicketAnswer: SecretRedacting {
    /// The ids only; the credential and the upload URL (its own credential) are never printed.
    public var description: String { "UploadTicketAnswer(\(videoId ?? imageId ?? ""))" }
    /// The fields without the credential and the upload URL.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "videoId": videoId as Any, "imageId": imageId as Any, "imageURL": imageURL as Any,
            "uploadAddress": uploadAddress, "uploadAuth": "<redacted>",
            "resumableUploadURL": resumableUploadURL == nil ? "nil" : "<redacted>",
        ]
    }
}

extension MediaContract.NewAccessKey: SecretRedacting {
    /// The key id and status only; the secret is never printed.
    public var description: String { "NewAccessKey(\(accessKeyId), \(status))" }
    /// The fields without the secret.
    public var redactedFields: KeyValuePairs<String, Any> {
        ["accessKeyId": accessKeyId, "accessKeySecret": "<redacted>", "status": status]
    }
}
