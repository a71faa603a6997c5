import Foundation

extension MediaServiceClient {
    /// A video as GetVideoInfo and ListVideos describe it.
    public struct VideoInfo: Sendable, Hashable {
        /// Id.
        public var videoId: String
        /// Title.
        public var title: String
        /// `Uploading`, `UploadSucc`, `Transcoding`, `Normal`, `TranscodeFail`, `UploadFail`.
        public var status: String
        /// Bytes of the stored source, once uploaded.
        public var size: Int64?
        /// Description.
        public var description: String?
        /// Seconds, once probed.
        public var duration: Double?
        /// Width of the source as displayed, once probed.
        public var width: Int?
        /// Height of the source as displayed, once probed.
        public var height: Int?
        /// Frames per second of the source, once probed.
        public var fps: Double?
        /// Bit rate of the source in kbit/s, once probed.
        public var bitrate: Int?
        /// `video` or `audio`, once probed.
        public var mediaType: String?
        /// The cover: the URL it was created with, or a signed URL of the cover taken from the video.
        public var coverURL: String?
        /// Signed URLs of the pictures taken from the video.
        public var snapshots: [String]
        /// The transcoding template group (`default`, `NoTranscode`, …).
        public var templateGroupId: String?
        /// Category id.
        public var cateId: Int?
        /// Comma-separated tags.
        public var tags: String?
        /// Why processing failed (`TranscodeFail`): `InvalidMedia`, `TranscodeError`, …
        public var errorCode: String?
        /// What went wrong, in the tool's words.
        public var errorMessage: String?
        /// Why a video waits (the server has no ffmpeg, processing is off, a retry is due).
        public var statusMessage: String?
        /// Percent of the transcode done, while `Transcoding`.
        public var processingProgress: Int?

        /// Reads a video from its JSON object.
        public init(_ object: [String: Any]) {
            videoId = object["VideoId"] as? String ?? ""
            title = object["Title"] as? String ?? ""
            status = object["Status"] as? String ?? ""
            size = (object["Size"] as? NSNumber)?.int64Value
            description = object["Description"] as? String
            duration = (object["Duration"] as? NSNumber)?.doubleValue
            width = (object["Width"] as? NSNumber)?.intValue
            height = (object["Height"] as? NSNumber)?.intValue
            fps = (object["Fps"] as? NSNumber)?.doubleValue
            bitrate = (object["Bitrate"] as? NSNumber)?.intValue
            mediaType = object["MediaType"] as? String
            coverURL = object["CoverURL"] as? String
            snapshots = object["Snapshots"] as? [String] ?? []
            templateGroupId = object["TemplateGroupId"] as? String
            cateId = (object["CateId"] as? NSNumber)?.intValue
            tags = object["Tags"] as? String
            errorCode = object["ErrorCode"] as? String
            errorMessage = object["ErrorMessage"] as? String
            statusMessage = object["StatusMessage"] as? String
            processingProgress = (object["ProcessingProgress"] as? NSNumber)?.intValue
        }
    }

    /// What GetPlayInfo answers: the video and its playable streams.
    public struct PlayInfo: Sendable, Hashable {
        /// One playable stream.
        public struct Stream: Sendable, Hashable {
            /// `LD`, `SD`, `HD`, `FHD`, `SQ` (audio), `AUTO` (HLS master playlist) or `OD` (the original).
            public var definition: String
            /// `m3u8`, `mp4`, `m4a`, or the original's extension.
            public var format: String
            /// Signed URL; an HLS playlist's segments are reachable with it by their relative URIs.
            public var url: String
            /// Bytes (every file of an HLS rendition).
            public var size: Int64
            /// Picture size.
            public var width: Int?
            public var height: Int?
            /// kbit/s.
            public var bitrate: Int?
            /// Seconds.
            public var duration: Double?
            /// Frames per second.
            public var fps: Double?
            /// When the URL stops working.
            public var expiration: Date?

            init(_ object: [String: Any]) {
                definition = object["Definition"] as? String ?? ""
                format = object["Format"] as? String ?? ""
                url = object["PlayURL"] as? String ?? ""
                size = (object["Size"] as? NSNumber)?.int64Value ?? 0
                width = (object["Width"] as? NSNumber)?.intValue
                height = (object["Height"] as? NSNumber)?.intValue
                bitrate = (object["Bitrate"] as? NSNumber)?.intValue
                duration = (object["Duration"] as? NSNumber)?.doubleValue
                fps = (object["Fps"] as? NSNumber)?.doubleValue
                expiration = (object["Expiration"] as? String).flatMap { try? Date($0, strategy: .iso8601) }
            }
        }

        /// The video: `VideoId`, `Title`, `Status`, `CoverURL`, `Duration`.
        public var videoId: String
        /// Title.
        public var title: String
        /// Status (`Normal`).
        public var status: String
        /// The cover's URL.
        public var coverURL: String?
        /// Seconds.
        public var duration: Double?
        /// The streams.
        public var streams: [Stream]

        /// The first stream of a format (and definition), if any.
        public func stream(format: String, definition: String? = nil) -> Stream? {
            streams.first { $0.format == format && (definition == nil || $0.definition == definition) }
        }

        /// Reads GetPlayInfo's answer.
        public init(answer: [String: Any]) {
            let base = answer["VideoBase"] as? [String: Any] ?? [:]
            videoId = base["VideoId"] as? String ?? ""
            title = base["Title"] as? String ?? ""
            status = base["Status"] as? String ?? ""
            coverURL = base["CoverURL"] as? String
            duration = (base["Duration"] as? NSNumber)?.doubleValue
            streams = (answer["PlayInfoList"] as? [[String: Any]] ?? []).map(Stream.init)
        }
    }

    /// A video's source file as GetMezzanineInfo describes it.
    public struct MezzanineInfo: Sendable, Hashable {
        /// Id of the video.
        public var videoId: String
        /// The name it was uploaded as.
        public var fileName: String
        /// Bytes.
        public var size: Int64
        /// Signed URL to download it.
        public var fileURL: String
        /// `Normal` once probed, `Analysing` before, `AnalysisFail` when ffprobe could not read it.
        public var status: String
        /// Seconds.
        public var duration: Double?
        /// Picture size as displayed (after rotation).
        public var width: Int?
        public var height: Int?
        /// Frames per second.
        public var fps: Double?
        /// kbit/s.
        public var bitrate: Int?
        /// Codec of the video stream (`h264`, `hevc`), if any.
        public var videoCodec: String?
        /// Codec of the audio stream (`aac`, `opus`), if any.
        public var audioCodec: String?

        init(_ object: [String: Any]) {
            videoId = object["VideoId"] as? String ?? ""
            fileName = object["FileName"] as? String ?? ""
            size = (object["Size"] as? NSNumber)?.int64Value ?? 0
            fileURL = object["FileURL"] as? String ?? ""
            status = object["Status"] as? String ?? ""
            duration = (object["Duration"] as? NSNumber)?.doubleValue
            width = (object["Width"] as? NSNumber)?.intValue
            height = (object["Height"] as? NSNumber)?.intValue
            fps = (object["Fps"] as? NSNumber)?.doubleValue
            bitrate = (object["Bitrate"] as? NSNumber)?.intValue
            videoCodec = (object["VideoStreamList"] as? [[String: Any]])?.first?["CodecName"] as? String
            audioCodec = (object["AudioStreamList"] as? [[String: Any]])?.first?["CodecName"] as? String
        }
    }
}
