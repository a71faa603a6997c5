import FerryCore
import Foundation

extension MediaServiceClient {
    /// A video as GetVideoInfo and ListVideos describe it.
    public typealias VideoInfo = MediaContract.Video

    /// What GetPlayInfo answers: the video and its playable streams.
    public struct PlayInfo: Sendable, Hashable {
        /// One playable stream.
        public typealias Stream = MediaContract.PlayStream

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
        init(_ answer: MediaContract.PlayInfoAnswer) {
            videoId = answer.videoBase.videoId
            title = answer.videoBase.title
            status = answer.videoBase.status
            coverURL = answer.videoBase.coverURL
            duration = answer.videoBase.duration
            streams = answer.playInfoList
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
