import Foundation

/// An event in the webhook outbox.
public struct WebhookEvent: Sendable, Codable, Equatable {
    /// Unique id; receivers dedupe by it (delivery is at least once).
    public var id: String
    /// Event type, e.g. `TranscodeComplete`.
    public var type: WebhookEventType
    /// Event data: the fields of the event (`VideoId`, `Status`, …), as in docs/api.md.
    public var payload: WebhookPayload
    /// When it was enqueued.
    public var createdAt: Date
    /// Delivery attempts made so far.
    public var attempts: Int
    /// When the receiver acknowledged it (2xx), or nil.
    public var deliveredAt: Date?
    /// When it was given up on after `maxAttempts` failed attempts, or nil. Failed events stay in the catalog.
    public var failedAt: Date?

    /// Creates an event.
    package init(
        id: String, type: WebhookEventType, payload: WebhookPayload, createdAt: Date, attempts: Int,
        deliveredAt: Date? = nil, failedAt: Date? = nil
    ) {
        self.id = id
        self.type = type
        self.payload = payload
        self.createdAt = createdAt
        self.attempts = attempts
        self.deliveredAt = deliveredAt
        self.failedAt = failedAt
    }
}

/// The type of a webhook event (the body's `type`).
public struct WebhookEventType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public var rawValue: String
    /// Creates a type from its name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A video's source is stored, the first time.
    public static let fileUploadComplete = WebhookEventType(rawValue: "FileUploadComplete")
    /// The source was probed (or could not be).
    public static let videoAnalysisComplete = WebhookEventType(rawValue: "VideoAnalysisComplete")
    /// A cover was taken from the source (or could not be).
    public static let snapshotComplete = WebhookEventType(rawValue: "SnapshotComplete")
    /// One stream of the transcode was made (or could not be).
    public static let streamTranscodeComplete = WebhookEventType(rawValue: "StreamTranscodeComplete")
    /// The video has a stream to play for the first time (its first stream, or its whole ladder), whatever its status.
    public static let videoPlayable = WebhookEventType(rawValue: "VideoPlayable")
    /// Every stream was published and the video is `Normal` (or the video failed).
    public static let transcodeComplete = WebhookEventType(rawValue: "TranscodeComplete")
    /// An image's file is stored, the first time.
    public static let imageUploadComplete = WebhookEventType(rawValue: "ImageUploadComplete")
    /// A video was deleted.
    public static let videoDeleted = WebhookEventType(rawValue: "VideoDeleted")
    /// A video's upload never completed in time.
    public static let videoUploadExpired = WebhookEventType(rawValue: "VideoUploadExpired")
    /// An image's upload never completed in time.
    public static let imageUploadExpired = WebhookEventType(rawValue: "ImageUploadExpired")
    /// An image was deleted.
    public static let imageDeleted = WebhookEventType(rawValue: "ImageDeleted")

    public var description: String { rawValue }
}

extension WebhookEvent {
    /// How bodies and stored payloads are written: keys sorted, slashes as they are.
    package static var jsonEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
