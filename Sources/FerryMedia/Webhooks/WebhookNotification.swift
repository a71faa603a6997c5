import FerryStorage
import Foundation

/// What happened, to be sent to the webhook receiver: an event's type and its payload.
///
/// The static functions make each documented event with exactly its documented fields:
///
/// ```swift
/// try await outbox.enqueue(.videoDeleted(videoId: video.videoId))
/// ```
public struct WebhookNotification: Sendable, Hashable {
    /// The event's type.
    public var type: WebhookEventType
    /// The event's fields.
    public var payload: WebhookPayload

    /// Creates a notification of any type.
    public init(type: WebhookEventType, payload: WebhookPayload) {
        self.type = type
        self.payload = payload
    }

    /// `FileUploadComplete`: `VideoId`, `Size`, `Status` (`UploadSucc`).
    public static func fileUploadComplete(videoId: String, size: Int64) -> WebhookNotification {
        WebhookNotification(
            type: .fileUploadComplete, payload: WebhookPayload(videoId: videoId, status: VideoStatus.uploadSucc, size: size))
    }

    /// `VideoAnalysisComplete` after a probe: `VideoId`, `Status` (`success`), `Size`, and what the probe found of
    /// `Duration`, `Width`, `Height`, `Bitrate` (kbit/s) and `Fps`.
    public static func videoAnalysisComplete(videoId: String, info: MezzanineInfo) -> WebhookNotification {
        WebhookNotification(
            type: .videoAnalysisComplete,
            payload: WebhookPayload(
                videoId: videoId, status: "success", size: info.size, duration: info.playingDuration, width: info.width,
                height: info.height, bitrate: info.bitrate.map { $0 / 1000 }, fps: info.fps))
    }

    /// `VideoAnalysisComplete` when the source could not be probed: `VideoId`, `Status` (`fail`), `ErrorCode`,
    /// `ErrorMessage`.
    public static func videoAnalysisFailed(videoId: String, errorCode: String, errorMessage: String)
        -> WebhookNotification
    {
        WebhookNotification(
            type: .videoAnalysisComplete,
            payload: WebhookPayload(videoId: videoId, status: "fail", errorCode: errorCode, errorMessage: errorMessage))
    }

    /// `SnapshotComplete` with the cover: `VideoId`, `Status` (`success`), `ImageId`, `Size`.
    public static func snapshotComplete(videoId: String, imageId: String, size: Int64) -> WebhookNotification {
        WebhookNotification(
            type: .snapshotComplete,
            payload: WebhookPayload(videoId: videoId, imageId: imageId, status: "success", size: size))
    }

    /// `SnapshotComplete` when no cover could be taken: `VideoId`, `Status` (`fail`), `ErrorCode`, `ErrorMessage`.
    public static func snapshotFailed(videoId: String, errorCode: String, errorMessage: String) -> WebhookNotification {
        WebhookNotification(
            type: .snapshotComplete,
            payload: WebhookPayload(videoId: videoId, status: "fail", errorCode: errorCode, errorMessage: errorMessage))
    }

    /// `VideoPlayable` when the video first has a stream to play: `VideoId`, `Status` (`success`), `Definition` (of
    /// the stream: `OD` for the source packaged as it is, else the definition first encoded, or `AUTO` for a ladder
    /// published whole) and `Format` (`m3u8`, or the original's format for `NoTranscode`).
    public static func videoPlayable(videoId: String, definition: String, format: String) -> WebhookNotification {
        WebhookNotification(
            type: .videoPlayable,
            payload: WebhookPayload(videoId: videoId, status: "success", definition: definition, format: format))
    }

    /// `StreamTranscodeComplete` for a stream made: the stream's fields and `VideoId`.
    public static func streamTranscodeComplete(videoId: String, stream: WebhookStreamInfo) -> WebhookNotification {
        WebhookNotification(type: .streamTranscodeComplete, payload: WebhookPayload(videoId: videoId, stream: stream))
    }

    /// `StreamTranscodeComplete` for a stream that could not be made: `VideoId`, `Status` (`fail`), `Definition`,
    /// `Format`, `ErrorCode`, `ErrorMessage`.
    public static func streamTranscodeFailed(
        videoId: String, definition: String, format: String, errorCode: String, errorMessage: String
    ) -> WebhookNotification {
        WebhookNotification(
            type: .streamTranscodeComplete,
            payload: WebhookPayload(
                videoId: videoId, status: "fail", definition: definition, format: format, errorCode: errorCode,
                errorMessage: errorMessage))
    }

    /// `TranscodeComplete` once the streams are published: `VideoId`, `Status` (`success`), `StreamInfos`.
    public static func transcodeComplete(videoId: String, streams: [WebhookStreamInfo]) -> WebhookNotification {
        WebhookNotification(
            type: .transcodeComplete, payload: WebhookPayload(videoId: videoId, status: "success", streamInfos: streams))
    }

    /// `TranscodeComplete` when the video failed: `VideoId`, `Status` (`fail`), `ErrorCode`, `ErrorMessage`, and an
    /// empty `StreamInfos`.
    public static func transcodeFailed(videoId: String, errorCode: String, errorMessage: String) -> WebhookNotification {
        WebhookNotification(
            type: .transcodeComplete,
            payload: WebhookPayload(
                videoId: videoId, status: "fail", errorCode: errorCode, errorMessage: errorMessage, streamInfos: []))
    }

    /// `ImageUploadComplete`: `ImageId`, `Size`.
    public static func imageUploadComplete(imageId: String, size: Int64) -> WebhookNotification {
        WebhookNotification(type: .imageUploadComplete, payload: WebhookPayload(imageId: imageId, size: size))
    }

    /// `VideoDeleted`: `VideoId`.
    public static func videoDeleted(videoId: String) -> WebhookNotification {
        WebhookNotification(type: .videoDeleted, payload: WebhookPayload(videoId: videoId))
    }

    /// `VideoUploadExpired`: `VideoId`.
    public static func videoUploadExpired(videoId: String) -> WebhookNotification {
        WebhookNotification(type: .videoUploadExpired, payload: WebhookPayload(videoId: videoId))
    }

    /// `ImageUploadExpired`: `ImageId`.
    public static func imageUploadExpired(imageId: String) -> WebhookNotification {
        WebhookNotification(type: .imageUploadExpired, payload: WebhookPayload(imageId: imageId))
    }

    /// `ImageDeleted`: `ImageId`.
    public static func imageDeleted(imageId: String) -> WebhookNotification {
        WebhookNotification(type: .imageDeleted, payload: WebhookPayload(imageId: imageId))
    }
}
