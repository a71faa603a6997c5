import Foundation

/// Where and how the server delivers webhooks.
public struct WebhookConfiguration: Sendable {
    /// The receiver's URL; events are POSTed to it.
    public var url: URL
    /// The HMAC-SHA256 key the receiver verifies signatures with (never logged).
    public var secret: String
    /// Attempts per event before it is marked failed (it stays in the catalog). Default 50.
    public var maxAttempts: Int = 50
    /// Wait before the second attempt; doubles per attempt (with jitter) up to `maxBackoff`. Default 200 ms.
    public var initialBackoff: Duration = .milliseconds(200)
    /// Longest wait between attempts. Default 300 s.
    public var maxBackoff: Duration = .seconds(300)
    /// How often the delivery service looks for new events when it has nothing due. Default 100 ms.
    public var pollInterval: Duration = .milliseconds(100)

    /// Creates a configuration for a receiver URL and signing secret.
    public init(url: URL, secret: String) {
        self.url = url
        self.secret = secret
    }
}

extension WebhookConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The receiver without the secret.
    public var description: String { "WebhookConfiguration(url: \(url.absoluteString), secret: <redacted>)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror without the secret (services are described this way in debug logs).
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "url": url, "secret": "<redacted>", "maxAttempts": maxAttempts, "initialBackoff": initialBackoff,
                "maxBackoff": maxBackoff, "pollInterval": pollInterval,
            ], displayStyle: .struct)
    }
}

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
}

/// Persists webhook events in the catalog (so they survive restarts) for `WebhookDeliveryService` to deliver.
public final class WebhookOutbox: Sendable {
    let catalog: any WebhookStore
    /// The configuration; nil when no webhook is configured.
    public let configuration: WebhookConfiguration?

    init(catalog: any WebhookStore, configuration: WebhookConfiguration?) {
        self.catalog = catalog
        self.configuration = configuration
    }

    /// Persists an event (in the catalog, so it survives restarts) for delivery; a no-op returning nil when no
    /// webhook is configured.
    ///
    /// ```swift
    /// try await outbox.enqueue(.videoDeleted(videoId: video.videoId))
    /// ```
    ///
    /// - Returns: the event id.
    @discardableResult
    public func enqueue(_ notification: WebhookNotification) async throws -> String? {
        guard configuration != nil else { return nil }
        let event = WebhookEvent(
            id: "evt_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""), type: notification.type,
            payload: notification.payload, createdAt: Date(), attempts: 0, deliveredAt: nil, failedAt: nil)
        try await catalog.insertWebhookEvent(event, body: try Self.body(of: event))
        return event.id
    }

    /// Events not yet delivered (for tests and the CLI), oldest first: those still being retried and those that
    /// failed (`failedAt` set).
    public func pending() async throws -> [WebhookEvent] {
        try await catalog.undeliveredWebhookEvents()
    }

    /// The JSON body delivered (and signed) for an event:
    /// `{"createdAt":"<ISO 8601>","id":"…","payload":{…},"type":"…"}` (keys sorted).
    static func body(of event: WebhookEvent) throws -> [UInt8] {
        struct Body: Encodable {
            var id: String
            var type: WebhookEventType
            var createdAt: String
            var payload: WebhookPayload
        }
        let createdAt = event.createdAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        return [UInt8](
            try jsonEncoder.encode(Body(id: event.id, type: event.type, createdAt: createdAt, payload: event.payload)))
    }

    /// How bodies and stored payloads are written: keys sorted, slashes as they are.
    static var jsonEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
