import Foundation
import NIOCore
import PostgresNIO

extension PostgresCatalog: WebhookStore {
    private static func storedWebhookEvent(_ row: PostgresRandomAccessRow) throws -> StoredWebhookEvent {
        let event = WebhookEvent(
            id: try row.value("id"), type: WebhookEventType(rawValue: try row.value("type")),
            payload: try row.json("payload"), createdAt: try row.date("created_at"),
            attempts: try row.value("attempts"),
            deliveredAt: try row.optionalDate("delivered_at"), failedAt: try row.optionalDate("failed_at"))
        var body: ByteBuffer = try row.value("body")
        return StoredWebhookEvent(
            event: event, body: body.readBytes(length: body.readableBytes) ?? [],
            nextAttemptAt: try row.date("next_attempt_at"), traceParent: try row.value("trace_parent"))
    }

    public func insertWebhookEvent(_ stored: StoredWebhookEvent) async throws {
        try await transaction { [logger] connection in
            try await Self.lockOutbox(on: connection, logger: logger)
            try await connection.query(try Self.insertWebhookEvent(stored), logger: logger)
        }
    }

    /// Takes the outbox's lock until the transaction ends. Events are delivered in `seq` order, and a transaction that
    /// took its `seq` first must also commit first, or delivery could pass over an event not yet visible: every
    /// transaction that stores events takes this lock before its first one.
    static func lockOutbox(on connection: PostgresConnection, logger: Logger) async throws {
        try await lock("SELECT pg_advisory_xact_lock(\(outboxLock))", on: connection, logger: logger)
    }

    static let outboxLock: Int64 = 0x4665_7272_794F_7574  // "FerryOut"

    static func insertWebhookEvent(_ stored: StoredWebhookEvent) throws -> PostgresQuery {
        let event = stored.event
        let payload = String(decoding: try WebhookEvent.jsonEncoder.encode(event.payload), as: UTF8.self)
        return """
            INSERT INTO webhook_event (
                id, type, payload, body, created_at, attempts, next_attempt_at, trace_parent, subject)
            VALUES (\(event.id), \(event.type.rawValue), \(payload), \(ByteBuffer(bytes: stored.body)),
                    \(event.createdAt.timeIntervalSince1970), 0, \(stored.nextAttemptAt.timeIntervalSince1970),
                    \(stored.traceParent), \(event.payload.subject))
            """
    }

    public func nextPendingWebhookEvent() async throws -> StoredWebhookEvent? {
        try await rows(
            """
            SELECT * FROM webhook_event e WHERE delivered_at IS NULL AND failed_at IS NULL AND NOT EXISTS (
                SELECT 1 FROM webhook_event p
                WHERE p.subject IS NOT DISTINCT FROM e.subject AND p.seq < e.seq AND p.delivered_at IS NULL
                    AND p.failed_at IS NULL)
            ORDER BY next_attempt_at, seq LIMIT 1
            """
        ).first.map(Self.storedWebhookEvent)
    }

    public func undeliveredWebhookEvents() async throws -> [WebhookEvent] {
        try await rows("SELECT * FROM webhook_event WHERE delivered_at IS NULL ORDER BY seq").map {
            try Self.storedWebhookEvent($0).event
        }
    }

    public func webhookBacklog() async throws -> WebhookBacklog {
        var backlog = WebhookBacklog()
        if let row = try await rows(
            "SELECT count(*)::BIGINT AS n, min(created_at) AS oldest FROM webhook_event WHERE delivered_at IS NULL AND failed_at IS NULL"
        ).first {
            backlog.pending = try row.value("n")
            backlog.oldestCreatedAt = try row.optionalDate("oldest")
        }
        return backlog
    }

    public func markWebhookEventDelivered(_ id: String, at date: Date) async throws {
        try await execute(
            """
            UPDATE webhook_event SET attempts = attempts + 1, delivered_at = \(date.timeIntervalSince1970),
                last_error = NULL WHERE id = \(id)
            """)
    }

    public func recentWebhookEvents(limit: Int) async throws -> [WebhookDelivery] {
        try await rows("SELECT * FROM webhook_event ORDER BY seq DESC LIMIT \(Int64(limit))").map { row in
            let stored = try Self.storedWebhookEvent(row)
            return WebhookDelivery(
                event: stored.event, nextAttemptAt: stored.nextAttemptAt, lastError: try row.value("last_error"))
        }
    }

    public func retryWebhookEvent(_ id: String, now: Date) async throws -> Bool {
        try await changed(
            """
            UPDATE webhook_event SET failed_at = NULL, attempts = 0, next_attempt_at = \(now.timeIntervalSince1970)
            WHERE id = \(id) AND failed_at IS NOT NULL AND delivered_at IS NULL RETURNING id
            """) > 0
    }

    public func recordWebhookAttemptFailure(_ id: String, error: String, nextAttemptAt: Date?, now: Date) async throws {
        if let nextAttemptAt {
            try await execute(
                """
                UPDATE webhook_event SET attempts = attempts + 1, next_attempt_at = \(nextAttemptAt.timeIntervalSince1970),
                    last_error = \(error) WHERE id = \(id)
                """)
        } else {
            try await execute(
                """
                UPDATE webhook_event SET attempts = attempts + 1, failed_at = \(now.timeIntervalSince1970),
                    last_error = \(error) WHERE id = \(id)
                """)
        }
    }
}
