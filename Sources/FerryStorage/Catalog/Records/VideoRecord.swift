import Foundation


/// A video in the media catalog.
public struct VideoRecord: Codable, Sendable, Hashable {
    /// Video id.
    public var videoId: String
    /// Title.
    public var title: String
    /// Original file name.
    public var fileName: String
    /// Description.
    public var description: String?
    /// Cover image URL.
    public var coverURL: String?
    /// Category id.
    public var cateId: Int?
    /// Comma-separated tags.
    public var tags: String?
    /// Transcoding template group, when asked for.
    public var transcode: String?
    /// Free data of the app.
    public var userData: String?
    /// Status (``VideoStatus``): `Uploading`, `UploadSucc`, `Transcoding`, `Normal`, `TranscodeFail`, `UploadFail`,
    /// `Deleted`.
    public var status: String
    /// Bytes stored, once uploaded.
    public var size: Int64?
    /// Size the creator announced.
    public var declaredSize: Int64?
    /// Bucket of the source file.
    public var bucket: String
    /// Key of the source file.
    public var key: String
    /// Access key that created it.
    public var owner: String
    /// Creation time.
    public var createdAt: Date
    /// Last status change.
    public var updatedAt: Date
    /// The token CreateUploadVideo was called with, which makes it idempotent.
    public var clientToken: String?
    /// What ffprobe found in the source file, once probed.
    public var mezzanine: MezzanineInfo?
    /// The renditions the last transcode published, all at once, under `outputPrefix`.
    public var renditions: [Rendition]?
    /// Key prefix of the published renditions (`video/<id>/out/<job>.<run>`; `video/<id>/out/<job>` from earlier
    /// versions).
    public var outputPrefix: String?
    /// Key of the cover taken from the source, when one was.
    public var snapshotKey: String?
    /// Image id of that cover.
    public var snapshotImageId: String?
    /// Why probing or transcoding failed (with `TranscodeFail`).
    public var errorCode: String?
    /// What went wrong, readable (ffprobe's or ffmpeg's last words).
    public var errorMessage: String?
    /// Caption and subtitle tracks, in the order they were added (AddSubtitle).
    public var subtitles: [SubtitleTrack]?
    /// Who may play it: `public` or `signed`; nil (a video stored before policies existed) is `signed`.
    public var playbackPolicy: String?
    /// Which progressive files are offered for download (a ``DownloadPolicy``'s text); nil is `all`.
    public var downloads: String?
    /// When it first had a stream to play: its first stream published while the ladder was still being made, or the
    /// ladder itself (`VideoPlayable`); nil until then.
    public var playableAt: Date?
    /// The definition of the first stream published under ``outputPrefix`` (`OD`, or the ladder's lowest), kept once
    /// the ladder replaces it: a playback URL restricted to that definition plays its files to the end. Nil when no
    /// first stream was published under that prefix.
    public var firstStreamDefinition: String?
    /// The key of the cover a publish (ApplyUploadUGC) was applied for (empty: none), so that an apply racing it or
    /// retried with the same signature is answered that cover, not one of its own; nil for other videos, and for
    /// those applied for before it was kept.
    public var publishCoverKey: String?
    /// The status (`Deleted`, `UploadFail`) whose removal of files and event are done; until then a `remove-files`
    /// job finishes them.
    public var removedWith: String?

    /// Whether its playback addresses need a token.
    public var isPlaybackSigned: Bool { playbackPolicy != "public" }

    /// The template group the video is processed with: `NoTranscode`, or a group name (nil: the default group).
    package var templateGroup: String? { transcode }

    /// Creates a record; what is optional may be left out.
    public init(
        videoId: String, title: String, fileName: String, description: String? = nil, coverURL: String? = nil,
        cateId: Int? = nil, tags: String? = nil, transcode: String? = nil, userData: String? = nil, status: String,
        size: Int64? = nil, declaredSize: Int64? = nil, bucket: String, key: String, owner: String, createdAt: Date,
        updatedAt: Date, clientToken: String? = nil, mezzanine: MezzanineInfo? = nil, renditions: [Rendition]? = nil,
        outputPrefix: String? = nil, snapshotKey: String? = nil, snapshotImageId: String? = nil,
        errorCode: String? = nil, errorMessage: String? = nil
    ) {
        self.videoId = videoId
        self.title = title
        self.fileName = fileName
        self.description = description
        self.coverURL = coverURL
        self.cateId = cateId
        self.tags = tags
        self.transcode = transcode
        self.userData = userData
        self.status = status
        self.size = size
        self.declaredSize = declaredSize
        self.bucket = bucket
        self.key = key
        self.owner = owner
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.clientToken = clientToken
        self.mezzanine = mezzanine
        self.renditions = renditions
        self.outputPrefix = outputPrefix
        self.snapshotKey = snapshotKey
        self.snapshotImageId = snapshotImageId
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }
}

/// The source file of a video as ffprobe describes it (GetVideoInfo, GetMezzanineInfo).
public struct MezzanineInfo: Codable, Sendable, Hashable {
    /// Bytes.
    public var size: Int64
    /// Seconds.
    public var duration: Double?
    /// Seconds before the first packet, when the container counts them in ``duration`` (nil: none); what plays
    /// lasts ``duration`` less these.
    public var startTime: Double?
    /// Bits per second of the whole file.
    public var bitrate: Int?
    /// Container (ffprobe's `format_name`, e.g. `mov,mp4,m4a,3gp,3g2,mj2`).
    public var formatName: String?
    /// Width as displayed (after rotation).
    public var width: Int?
    /// Height as displayed (after rotation).
    public var height: Int?
    /// Frames per second (average).
    public var fps: Double?
    /// Degrees the picture is rotated by when displayed (0, 90, 180, 270).
    public var rotation: Int?
    /// Codec of the first video stream (`h264`, `hevc`, …), nil without video.
    public var videoCodec: String?
    /// Pixel format of the first video stream (`yuv420p`, `yuv420p10le`, …).
    public var pixelFormat: String?
    /// Bits per second of the first video stream, when known.
    public var videoBitrate: Int?
    /// Codec of the first audio stream (`aac`, `opus`, …), nil without audio.
    public var audioCodec: String?
    /// Sample rate of the first audio stream.
    public var audioSampleRate: Int?
    /// Channels of the first audio stream.
    public var audioChannels: Int?
    /// Bits per second of the first audio stream, when known.
    public var audioBitrate: Int?

    /// How long what plays lasts: ``duration`` less ``startTime`` (an MP4's empty edit counts in the container's
    /// duration, not in any rendition's). The video's `Duration`, and the bounds of its storyboard and thumbnails.
    public var playingDuration: Double? { duration.map { max(0, $0 - (startTime ?? 0)) } }

    /// Whether the source has a picture (a still cover art stream does not count).
    public var hasVideo: Bool { videoCodec != nil }
    /// Whether the source has sound.
    public var hasAudio: Bool { audioCodec != nil }

    /// The most pixels a picture may have for ffmpeg to decode it here (8192×4320, 8K): a few hundred bytes of PNG
    /// can declare 16000×16000, a gigabyte of memory for each decoder.
    package static let maxPixels = maxFrame.width * maxFrame.height
    /// The frame whose area is ``maxPixels``.
    private static let maxFrame = (width: 8192, height: 4320)
    /// ``maxPixels`` as people read it, for messages.
    package static let maxPixelsText = "\(maxPixels) (\(maxFrame.width)×\(maxFrame.height))"

    /// Whether the picture is larger than ``maxPixels``: nothing is decoded from it (no ladder, cover or picture on
    /// request); NoTranscode still publishes it as it is.
    package var isPictureTooLarge: Bool {
        guard let width, let height else { return false }
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        return overflow || pixels > Self.maxPixels
    }

    /// A file of `size` bytes, nothing else known yet.
    package init(size: Int64) {
        self.size = size
    }
}

/// A caption or subtitle track of a video: WebVTT stored as an object of the video's bucket.
public struct SubtitleTrack: Codable, Sendable, Hashable {
    /// Id, unique within the video.
    public var subtitleId: String
    /// BCP 47 language tag.
    public var language: String
    /// The name players show.
    public var name: String
    /// Whether players select it when none is chosen (at most one track of a video).
    public var isDefault: Bool
    /// Key of the WebVTT file: `video/<id>/subtitles/<subtitleId>.vtt`.
    public var key: String
    /// Cues in the file.
    public var cueCount: Int
    /// When it was added.
    public var createdAt: Date

    /// Creates a record.
    package init(
        subtitleId: String, language: String, name: String, isDefault: Bool, key: String, cueCount: Int, createdAt: Date
    ) {
        self.subtitleId = subtitleId
        self.language = language
        self.name = name
        self.isDefault = isDefault
        self.key = key
        self.cueCount = cueCount
        self.createdAt = createdAt
    }
}

/// A published rendition of a video: one definition in one format.
public struct Rendition: Codable, Sendable, Hashable {
    /// `LD`, `SD`, `HD`, `FHD`, `SQ` (audio), or `AUTO` (the HLS master playlist of every definition).
    public var definition: String
    /// `m3u8`, `mp4` or `m4a`.
    public var format: String
    /// Path under the video's output prefix: `LD/index.m3u8`, `LD.mp4`, `master.m3u8`.
    public var path: String
    /// Width in pixels (video).
    public var width: Int?
    /// Height in pixels (video).
    public var height: Int?
    /// Bits per second.
    public var bitrate: Int?
    /// Seconds.
    public var duration: Double?
    /// Frames per second (video).
    public var fps: Double?
    /// Bytes: the file, or every file of an HLS rendition (playlist, init segment, segments).
    public var size: Int64
    /// Codec of the video stream (`h264`).
    public var videoCodec: String?
    /// Codec of the audio stream (`aac`).
    public var audioCodec: String?

    /// Creates a record; what is optional may be left out.
    package init(
        definition: String, format: String, path: String, width: Int? = nil, height: Int? = nil, bitrate: Int? = nil,
        duration: Double? = nil, fps: Double? = nil, size: Int64, videoCodec: String? = nil, audioCodec: String? = nil
    ) {
        self.definition = definition
        self.format = format
        self.path = path
        self.width = width
        self.height = height
        self.bitrate = bitrate
        self.duration = duration
        self.fps = fps
        self.size = size
        self.videoCodec = videoCodec
        self.audioCodec = audioCodec
    }
}

/// Statuses of a video, in the order they advance. See docs/api.md.
///
/// `Uploading → UploadSucc → Transcoding → Normal`, or `TranscodeFail` (the source kept, the reason recorded); with
/// the `NoTranscode` template group `UploadSucc → Normal` with the original as its only definition (`OD`).
public enum VideoStatus {
    /// Created; its source file is not (completely) in storage yet.
    public static let uploading = "Uploading"
    /// The object service has its complete source file; it waits for (or is in) probing.
    public static let uploadSucc = "UploadSucc"
    /// Probed; its renditions are being encoded.
    public static let transcoding = "Transcoding"
    /// Playable: every rendition of its template group is published (or, with `NoTranscode`, the original).
    public static let normal = "Normal"
    /// Probing or transcoding failed; the source is kept and `ErrorCode` / `ErrorMessage` say why.
    public static let transcodeFail = "TranscodeFail"
    /// Deleted; its files are gone.
    public static let deleted = "Deleted"
    /// Its upload never completed within the server's `uploadingVideoMaxAge`; what had arrived was removed. Images use
    /// the same status.
    public static let uploadFailed = "UploadFail"
}
