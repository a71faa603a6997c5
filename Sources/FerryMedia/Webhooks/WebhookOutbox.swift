import FerryStorage
import Foundation

/// Persists webhook events in the catalog (so they survive restarts) for `WebhookDeliveryService` to deliver.
public final class WebhookOutbox: Sendable {
    package let catalog: any WebhookStore
    /// The configuration; nil when no webhook is configured.
    public let configuration: WebhookConfiguration?

    package init(catalog: any WebhookStore, configuration: WebhookConfiguration?) {
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
        try await catalog.insertWebhookEvent(event, body: try Self.body(of: event), traceParent: TraceContext.current())
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
        let body = Body(id: event.id, type: event.type, createdAt: createdAt, payload: event.payload)
        return [UInt8](try WebhookEvent.jsonEncoder.encode(body))
    }
}
