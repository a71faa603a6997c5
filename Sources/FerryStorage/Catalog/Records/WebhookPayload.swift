import Foundation

/// The fields of a webhook event, as docs/api.md lists them per type ("Webhooks"): each type fills the fields it
/// documents, and a field left nil is not sent.
///
/// It encodes to the JSON object receivers get in the event's `payload`: the documented field names (`VideoId`,
/// `Status`, …), numbers as JSON numbers, a whole number without a fraction (`"Duration":10`, not `10.0`).
public struct WebhookPayload: Sendable, Hashable, Codable {
    /// The video the event is about.
    public var videoId: String?
    /// The image the event is about (`ImageUploadComplete`), or the cover a snapshot made (`SnapshotComplete`).
    public var imageId: String?
    /// `success` or `fail` for the processing events; `UploadSucc` for `FileUploadComplete`.
    public var status: String?
    /// The stream's definition (`LD`, `SD`, …) in `StreamTranscodeComplete`.
    public var definition: String?
    /// The stream's format (`mp4`, `m3u8`) in `StreamTranscodeComplete`.
    public var format: String?
    /// Bytes.
    public var size: Int64?
    /// Seconds.
    public var duration: Double?
    /// Pixels, as displayed.
    public var width: Int?
    /// Pixels, as displayed.
    public var height: Int?
    /// kbit/s.
    public var bitrate: Int?
    /// Frames per second.
    public var fps: Double?
    /// Why a step failed, as a code (`InvalidMedia`, `TranscodeError`, …).
    public var errorCode: String?
    /// Why a step failed, in words.
    public var errorMessage: String?
    /// The streams of `TranscodeComplete` (empty when the transcode failed).
    public var streamInfos: [WebhookStreamInfo]?

    /// Creates a payload with the given fields; the others are not sent.
    public init(
        videoId: String? = nil, imageId: String? = nil, status: String? = nil, definition: String? = nil,
        format: String? = nil, size: Int64? = nil, duration: Double? = nil, width: Int? = nil, height: Int? = nil,
        bitrate: Int? = nil, fps: Double? = nil, errorCode: String? = nil, errorMessage: String? = nil,
        streamInfos: [WebhookStreamInfo]? = nil
    ) {
        self.videoId = videoId
        self.imageId = imageId
        self.status = status
        self.definition = definition
        self.format = format
        self.size = size
        self.duration = duration
        self.width = width
        self.height = height
        self.bitrate = bitrate
        self.fps = fps
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.streamInfos = streamInfos
    }

    /// The fields of one stream, with the video it belongs to (`StreamTranscodeComplete`).
    public init(videoId: String, stream: WebhookStreamInfo) {
        self.init(
            videoId: videoId, status: stream.status, definition: stream.definition, format: stream.format,
            size: stream.size, duration: stream.duration, width: stream.width, height: stream.height,
            bitrate: stream.bitrate, fps: stream.fps)
    }

    /// What the event is about, for delivery in order: its video, else its image (a cover a snapshot made belongs to
    /// the video's line).
    public var subject: String? { videoId ?? imageId }

    enum CodingKeys: String, CodingKey {
        case videoId = "VideoId", imageId = "ImageId", status = "Status", definition = "Definition", format = "Format"
        case size = "Size", duration = "Duration", width = "Width", height = "Height", bitrate = "Bitrate", fps = "Fps"
        case errorCode = "ErrorCode", errorMessage = "ErrorMessage", streamInfos = "StreamInfos"
    }

    /// Encodes the fields that are set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(videoId, forKey: .videoId)
        try container.encodeIfPresent(imageId, forKey: .imageId)
        try container.encodeIfPresent(status, forKey: .status)
        try container.encodeIfPresent(definition, forKey: .definition)
        try container.encodeIfPresent(format, forKey: .format)
        try container.encodeIfPresent(size, forKey: .size)
        try container.encodeNumberIfPresent(duration, forKey: .duration)
        try container.encodeIfPresent(width, forKey: .width)
        try container.encodeIfPresent(height, forKey: .height)
        try container.encodeIfPresent(bitrate, forKey: .bitrate)
        try container.encodeNumberIfPresent(fps, forKey: .fps)
        try container.encodeIfPresent(errorCode, forKey: .errorCode)
        try container.encodeIfPresent(errorMessage, forKey: .errorMessage)
        try container.encodeIfPresent(streamInfos, forKey: .streamInfos)
    }
}

/// One published stream of a video, as `TranscodeComplete` lists it in `StreamInfos` (and `StreamTranscodeComplete`
/// sends it with the video's id).
public struct WebhookStreamInfo: Sendable, Hashable, Codable {
    /// `success`.
    public var status: String
    /// `LD`, `SD`, `HD`, `FHD`, `SQ` (audio only), or `OD` (the original).
    public var definition: String
    /// `mp4`, `m3u8`, or the audio container.
    public var format: String
    /// Bytes (every segment and the playlist for HLS).
    public var size: Int64
    /// Pixels, as displayed.
    public var width: Int?
    /// Pixels, as displayed.
    public var height: Int?
    /// kbit/s.
    public var bitrate: Int?
    /// Seconds.
    public var duration: Double?
    /// Frames per second.
    public var fps: Double?

    /// Creates a stream's fields.
    public init(
        status: String = "success", definition: String, format: String, size: Int64, width: Int? = nil,
        height: Int? = nil, bitrate: Int? = nil, duration: Double? = nil, fps: Double? = nil
    ) {
        self.status = status
        self.definition = definition
        self.format = format
        self.size = size
        self.width = width
        self.height = height
        self.bitrate = bitrate
        self.duration = duration
        self.fps = fps
    }

    enum CodingKeys: String, CodingKey {
        case status = "Status", definition = "Definition", format = "Format", size = "Size", width = "Width"
        case height = "Height", bitrate = "Bitrate", duration = "Duration", fps = "Fps"
    }

    /// Encodes the fields that are set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        try container.encode(definition, forKey: .definition)
        try container.encode(format, forKey: .format)
        try container.encode(size, forKey: .size)
        try container.encodeIfPresent(width, forKey: .width)
        try container.encodeIfPresent(height, forKey: .height)
        try container.encodeIfPresent(bitrate, forKey: .bitrate)
        try container.encodeNumberIfPresent(duration, forKey: .duration)
        try container.encodeNumberIfPresent(fps, forKey: .fps)
    }
}

extension KeyedEncodingContainer {
    /// Encodes a number the way webhook payloads always carried them: a whole number without a fraction (`30`), any
    /// other as JSON's shortest form (`29.97`).
    mutating func encodeNumberIfPresent(_ value: Double?, forKey key: Key) throws {
        guard let value else { return }
        if let whole = Int64(exactly: value) {
            try encode(whole, forKey: key)
        } else {
            try encode(value, forKey: key)
        }
    }
}
