import Foundation

extension MediaContract {
    /// An image as GetImageInfo describes it.
    public struct ImageInfo: Codable, Sendable, Hashable {
        /// Id.
        public var imageId: String
        /// `default` or `cover`.
        public var imageType: String
        /// `Uploading` or `Normal`.
        public var status: String
        /// When it was created, ISO 8601.
        public var creationTime: String
        /// A signed URL of the image file.
        public var url: String
        /// Bytes, once uploaded.
        public var size: Int64?
        /// The stored file's ETag, without quotes, once uploaded (as ``Mezzanine/eTag``). A Ferry extension.
        public var eTag: String?
        /// Title.
        public var title: String?

        /// Creates a description.
        public init(
            imageId: String, imageType: String, status: String, creationTime: String, url: String, size: Int64? = nil,
            title: String? = nil
        ) {
            self.imageId = imageId
            self.imageType = imageType
            self.status = status
            self.creationTime = creationTime
            self.url = url
            self.size = size
            self.title = title
        }

        /// ``url`` without its signature's query: the image's address as CreateUploadImage names it (nil when `url`
        /// is not a URL).
        public var unsignedURL: String? {
            guard var components = URLComponents(string: url) else { return nil }
            components.query = nil
            return components.string
        }

        enum CodingKeys: String, CodingKey {
            case imageId = "ImageId", imageType = "ImageType", status = "Status", creationTime = "CreationTime"
            case url = "URL", size = "Size", eTag = "ETag", title = "Title"
        }
    }

    /// GetImageInfo's answer.
    public struct ImageInfoAnswer: Codable, Sendable, Hashable {
        /// The image.
        public var imageInfo: ImageInfo
        /// Creates an answer.
        public init(imageInfo: ImageInfo) { self.imageInfo = imageInfo }
        enum CodingKeys: String, CodingKey { case imageInfo = "ImageInfo" }
    }

    /// A webhook event as ListWebhookEvents describes it, with its delivery state.
    public struct WebhookEvent: Codable, Sendable, Hashable {
        /// Id.
        public var eventId: String
        /// `FileUploadComplete`, `TranscodeComplete`, …
        public var eventType: String
        /// When it happened, ISO 8601.
        public var creationTime: String
        /// Deliveries tried.
        public var attempts: Int
        /// `Pending`, `Delivered` or `Failed`.
        public var state: String
        /// The video it is about, when it is about one.
        public var videoId: String?
        /// When it was delivered.
        public var deliveryTime: String?
        /// When delivery was given up.
        public var failureTime: String?
        /// When the next delivery is due, while pending.
        public var nextAttemptTime: String?
        /// Why the last delivery failed.
        public var lastError: String?

        /// Creates a description.
        public init(eventId: String, eventType: String, creationTime: String, attempts: Int, state: String) {
            self.eventId = eventId
            self.eventType = eventType
            self.creationTime = creationTime
            self.attempts = attempts
            self.state = state
        }

        enum CodingKeys: String, CodingKey {
            case eventId = "EventId", eventType = "EventType", creationTime = "CreationTime", attempts = "Attempts"
            case state = "State", videoId = "VideoId", deliveryTime = "DeliveryTime", failureTime = "FailureTime"
            case nextAttemptTime = "NextAttemptTime", lastError = "LastError"
        }
    }

    /// ListWebhookEvents' answer.
    public struct WebhookEventsAnswer: Codable, Sendable, Hashable {
        /// The newest events, newest first.
        public var events: [WebhookEvent]
        /// Where events are delivered, when webhooks are configured.
        public var webhookURL: String?
        /// Creates an answer.
        public init(events: [WebhookEvent], webhookURL: String?) {
            self.events = events
            self.webhookURL = webhookURL
        }
        enum CodingKeys: String, CodingKey { case events = "Events", webhookURL = "WebhookURL" }
    }

    /// RetryWebhookEvent's answer.
    public struct WebhookEventStateAnswer: Codable, Sendable, Hashable {
        /// The event.
        public var eventId: String
        /// Its state now (`Pending`).
        public var state: String
        /// Creates an answer.
        public init(eventId: String, state: String) {
            self.eventId = eventId
            self.state = state
        }
        enum CodingKeys: String, CodingKey { case eventId = "EventId", state = "State" }
    }

    /// DisableAccessKey's answer.
    public struct AccessKeyStatusAnswer: Codable, Sendable, Hashable {
        /// The key.
        public var accessKeyId: String
        /// Its status now (`disabled`).
        public var status: String
        /// Creates an answer.
        public init(accessKeyId: String, status: String) {
            self.accessKeyId = accessKeyId
            self.status = status
        }
        enum CodingKeys: String, CodingKey { case accessKeyId = "AccessKeyId", status = "Status" }
    }

    /// The answer of an operation that reports nothing but its request id (UpdateVideoInfo).
    public struct EmptyAnswer: Codable, Sendable, Hashable {
        /// Creates an answer.
        public init() {}
    }
}
