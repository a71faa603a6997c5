import Foundation

/// The publish (UGC) API's requests and answers, as one set of `Codable` types: the server decodes the requests and
/// encodes the answers, the client (`VideoPublisher`) does the reverse. Wire names are those of the VOD services.
public enum PublishContract {
    /// ApplyUploadUGC: a new video (or, with `vodSessionKey`, the same one with a fresh credential).
    public struct ApplyRequest: Codable, Sendable, Hashable {
        /// The publish signature.
        public var signature: String?
        /// The video's title; its file name when absent.
        public var videoName: String?
        /// The video file's extension (`mp4`).
        public var videoType: String?
        /// The video file's size in bytes.
        public var videoSize: Int64?
        /// The cover file's extension, when a cover is uploaded.
        public var coverType: String?
        /// The session of an earlier apply, to continue it.
        public var vodSessionKey: String?

        /// Creates a request.
        public init(
            signature: String?, videoName: String? = nil, videoType: String? = nil, videoSize: Int64? = nil,
            coverType: String? = nil, vodSessionKey: String? = nil
        ) {
            self.signature = signature
            self.videoName = videoName
            self.videoType = videoType
            self.videoSize = videoSize
            self.coverType = coverType
            self.vodSessionKey = vodSessionKey
        }
    }

    /// ApplyUploadUGC's answer: where and with what to upload.
    public struct ApplyAnswer: Codable, Sendable, Hashable {
        /// The session to commit (and to continue after a restart).
        public var vodSessionKey: String
        /// The video's id.
        public var videoId: String
        /// The object service's endpoint.
        public var storageEndpoint: String
        /// The bucket.
        public var storageBucket: String
        /// The signing region.
        public var storageRegion: String?
        /// The video file's key.
        public var videoKey: String
        /// The cover's key, when a cover was announced.
        public var coverKey: String?
        /// The upload credential, base64 JSON (``UploadAuth``).
        public var uploadAuth: String
        /// True when a resumed publish's video is stored already: the credential does not write it, and what is left
        /// is the cover (when one was announced) and the commit.
        public var videoStored: Bool?

        /// Creates an answer.
        public init(
            vodSessionKey: String, videoId: String, storageEndpoint: String, storageBucket: String, storageRegion: String?,
            videoKey: String, coverKey: String?, uploadAuth: String, videoStored: Bool? = nil
        ) {
            self.vodSessionKey = vodSessionKey
            self.videoId = videoId
            self.storageEndpoint = storageEndpoint
            self.storageBucket = storageBucket
            self.storageRegion = storageRegion
            self.videoKey = videoKey
            self.coverKey = coverKey
            self.uploadAuth = uploadAuth
            self.videoStored = videoStored
        }

        enum CodingKeys: String, CodingKey {
            case vodSessionKey = "VodSessionKey", videoId = "VideoId", storageEndpoint = "StorageEndpoint"
            case storageBucket = "StorageBucket", storageRegion = "StorageRegion", videoKey = "VideoKey"
            case coverKey = "CoverKey", uploadAuth = "UploadAuth", videoStored = "VideoStored"
        }
    }

    /// CommitUploadUGC: the files are uploaded.
    public struct CommitRequest: Codable, Sendable, Hashable {
        /// The publish signature.
        public var signature: String?
        /// The session the apply answered.
        public var vodSessionKey: String?

        /// Creates a request.
        public init(signature: String?, vodSessionKey: String?) {
            self.signature = signature
            self.vodSessionKey = vodSessionKey
        }
    }

    /// CommitUploadUGC's answer: the video and its URLs.
    public struct CommitAnswer: Codable, Sendable, Hashable {
        /// The video's id.
        public var fileId: String
        /// A signed URL of the uploaded video.
        public var mediaURL: String
        /// A URL of the cover (the one uploaded, or the one taken from the video), when there is one.
        public var coverURL: String?

        /// Creates an answer.
        public init(fileId: String, mediaURL: String, coverURL: String?) {
            self.fileId = fileId
            self.mediaURL = mediaURL
            self.coverURL = coverURL
        }

        enum CodingKeys: String, CodingKey { case fileId = "FileId", mediaURL = "MediaUrl", coverURL = "CoverUrl" }
    }
}

extension PublishContract.ApplyAnswer: SecretRedacting {
    /// The video and where it goes; the credential and the session are never printed.
    public var description: String { "ApplyAnswer(\(videoId), \(storageBucket)/\(videoKey))" }
    /// The fields without the credential and the session.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "vodSessionKey": "<redacted>", "videoId": videoId, "storageEndpoint": storageEndpoint,
            "storageBucket": storageBucket, "storageRegion": storageRegion as Any, "videoKey": videoKey,
            "coverKey": coverKey as Any, "uploadAuth": "<redacted>", "videoStored": videoStored as Any,
        ]
    }
}
