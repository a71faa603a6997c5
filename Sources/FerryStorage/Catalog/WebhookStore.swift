import Foundation

/// An event as stored, with what delivery needs.
public struct StoredWebhookEvent: Sendable {
    /// The event.
    public var event: WebhookEvent
    /// The exact JSON that is signed and sent on every attempt.
    public var body: [UInt8]
    /// When the next attempt is due.
    public var nextAttemptAt: Date
    /// The trace the event continues (`traceparent` of the span that made it); nil when nothing was traced.
    public var traceParent: String?
}

extension StoredWebhookEvent {
    /// An event to store, due at once: its first attempt may go as soon as it is stored.
    public init(event: WebhookEvent, body: [UInt8], traceParent: String?) {
        self.init(event: event, body: body, nextAttemptAt: event.createdAt, traceParent: traceParent)
    }
}

/// An event with how its delivery goes, for people looking at it (the console's webhooks page).
public struct WebhookDelivery: Sendable {
    /// The event.
    public var event: WebhookEvent
    /// When the next attempt is due (while it is pending).
    public var nextAttemptAt: Date
    /// What the last failed attempt met, nil when none failed or it was delivered since.
    public var lastError: String?
}

/// The webhook events not yet delivered, as an operator sees them.
public struct WebhookBacklog: Sendable, Hashable {
    /// Events waiting for delivery (neither delivered nor given up on).
    public var pending = 0
    /// When the oldest of them was created; nil when none waits.
    public var oldestCreatedAt: Date?

    /// No event waiting.
    public init() {}
}

/// Where the webhook outbox keeps its events, so they survive restarts: the catalog (SQLite; PostgreSQL when several
/// nodes share one). Events that follow a change of a video or an image are stored with it, in the same transaction
/// (``RecordChange/notify``).
public protocol WebhookStore: Sendable {
    /// Inserts a new event, due when `stored` says.
    func insertWebhookEvent(_ stored: StoredWebhookEvent) async throws
    /// The pending event (neither delivered nor failed) due first, due or not, among those that no earlier pending
    /// event of the same subject (``WebhookPayload/subject``; events without one form one line) holds back; of those
    /// due at once, the oldest.
    func nextPendingWebhookEvent() async throws -> StoredWebhookEvent?
    /// Every event not delivered (pending and failed), oldest first.
    func undeliveredWebhookEvents() async throws -> [WebhookEvent]
    /// How many events wait for delivery, and since when the oldest has.
    func webhookBacklog() async throws -> WebhookBacklog
    /// Records a successful delivery.
    func markWebhookEventDelivered(_ id: String, at date: Date) async throws
    /// Records a failed attempt: either the next attempt's time or, when attempts ran out (nil), the failure.
    func recordWebhookAttemptFailure(_ id: String, error: String, nextAttemptAt: Date?, now: Date) async throws
    /// The newest `limit` events, delivered or not, newest first.
    func recentWebhookEvents(limit: Int) async throws -> [WebhookDelivery]
    /// Makes an event whose attempts ran out pending again, due at `now` with a fresh count of attempts; false when
    /// no failed event has that id.
    func retryWebhookEvent(_ id: String, now: Date) async throws -> Bool
}

extension WebhookStore {
    /// Inserts a new event that continues no trace, due at once.
    public func insertWebhookEvent(_ event: WebhookEvent, body: [UInt8]) async throws {
        try await insertWebhookEvent(StoredWebhookEvent(event: event, body: body, traceParent: nil))
    }
}
