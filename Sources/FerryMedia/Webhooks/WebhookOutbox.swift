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
    /// webhook is configured. An event that tells of a change of a video or an image goes with the change instead
    /// (``events(_:)``), so that nothing stops between the two.
    ///
    /// ```swift
    /// try await outbox.enqueue(.snapshotFailed(videoId: video.videoId, errorCode: code, errorMessage: reason))
    /// ```
    ///
    /// - Returns: the event id.
    @discardableResult
    public func enqueue(_ notification: WebhookNotification) async throws -> String? {
        guard let stored = try events(notification).first else { return nil }
        try await catalog.insertWebhookEvent(stored)
        return stored.event.id
    }

    /// The events to store for `notifications`, in order, each with its body and the current trace: what a
    /// ``RecordChange`` carries into the catalog's transaction. None when no webhook is configured.
    ///
    /// ```swift
    /// try await catalog.updateVideo(videoId) { video in
    ///     video.status = VideoStatus.transcodeFail
    ///     return .save(notify: try outbox.events(.transcodeFailed(videoId: videoId, errorCode: code, errorMessage: message)))
    /// }
    /// ```
    public func events(_ notifications: WebhookNotification...) throws -> [StoredWebhookEvent] {
        try events(for: notifications)
    }

    /// The events to store for `notifications`, in order, as ``events(_:)``.
    public func events(for notifications: [WebhookNotification]) throws -> [StoredWebhookEvent] {
        guard configuration != nil else { return [] }
        let traceParent = TraceContext.current()
        return try notifications.map { notification in
            let event = WebhookEvent(
                id: "evt_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""),
                type: notification.type, payload: notification.payload, createdAt: Date(), attempts: 0, deliveredAt: nil,
                failedAt: nil)
            return StoredWebhookEvent(event: event, body: try Self.body(of: event), traceParent: traceParent)
        }
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
