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
        /// The storyboard's WebVTT file (tiles of a sprite as `#xywh=` fragments), once the video has one.
        public var storyboardURL: String?
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
            storyboardURL = answer.videoBase.storyboardURL
            streams = answer.playInfoList
        }
    }

    /// A video's source file as GetMezzanineInfo describes it: what ffprobe found in it (`videoCodec`, `audioCodec`,
    /// the stream lists) and a signed URL to download it.
    public typealias MezzanineInfo = MediaContract.Mezzanine
}
