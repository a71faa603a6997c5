import Foundation
import GRDB

extension SQLiteCatalog: WebhookStore {
    /// Schema of the webhook outbox: one row per event, kept after delivery (or failure) for inspection.
    ///
    /// `seq` orders events by creation (AUTOINCREMENT: never reused); `body` is the exact JSON that is signed and
    /// sent on every attempt; `nextAttemptAt` is when the next attempt is due; `failedAt` is set when the attempts
    /// ran out. An event is pending while both `deliveredAt` and `failedAt` are NULL.
    static let webhookMigration = Migration("v2-webhooks", """
        CREATE TABLE webhookEvent (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            payload TEXT NOT NULL,
            body BLOB NOT NULL,
            createdAt DOUBLE NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            nextAttemptAt DOUBLE NOT NULL,
            deliveredAt DOUBLE,
            failedAt DOUBLE,
            lastError TEXT
        );
        CREATE INDEX webhookEvent_pending ON webhookEvent(seq)
            WHERE deliveredAt IS NULL AND failedAt IS NULL;
        """)

    /// Each event's subject (the video, else the image, it is about), and the pending events by subject: an event
    /// waits only for the earlier pending events of its subject.
    static let webhookSubjectMigration = Migration("v18-webhook-subjects", """
        ALTER TABLE webhookEvent ADD COLUMN subject TEXT;
        UPDATE webhookEvent
            SET subject = coalesce(json_extract(payload, '$.VideoId'), json_extract(payload, '$.ImageId'))
            WHERE deliveredAt IS NULL;
        CREATE INDEX webhookEvent_pending_by_subject ON webhookEvent(subject, seq)
            WHERE deliveredAt IS NULL AND failedAt IS NULL;
        """)

    private static func storedWebhookEvent(_ row: Row) throws -> StoredWebhookEvent {
        let event = WebhookEvent(
            id: row["id"], type: WebhookEventType(rawValue: row["type"]),
            payload: try CatalogJSON.decode(WebhookPayload.self, row["payload"]),
            createdAt: Date(timeIntervalSince1970: row["createdAt"]), attempts: row["attempts"],
            deliveredAt: (row["deliveredAt"] as Double?).map(Date.init(timeIntervalSince1970:)),
            failedAt: (row["failedAt"] as Double?).map(Date.init(timeIntervalSince1970:)))
        let body: Data = row["body"]
        return StoredWebhookEvent(
            event: event, body: [UInt8](body), nextAttemptAt: Date(timeIntervalSince1970: row["nextAttemptAt"]),
            traceParent: row["traceParent"])
    }

    public func insertWebhookEvent(_ stored: StoredWebhookEvent) async throws {
        try await pool.write { db in try Self.insertWebhookEvent(stored, db) }
    }

    static func insertWebhookEvent(_ stored: StoredWebhookEvent, _ db: Database) throws {
        let event = stored.event
        let payload = try WebhookEvent.jsonEncoder.encode(event.payload)
        try db.execute(
            sql: """
                INSERT INTO webhookEvent (
                    id, type, payload, body, createdAt, attempts, nextAttemptAt, traceParent, subject)
                VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)
                """,
            arguments: [
                event.id, event.type.rawValue, String(decoding: payload, as: UTF8.self), Data(stored.body),
                event.createdAt.timeIntervalSince1970, stored.nextAttemptAt.timeIntervalSince1970, stored.traceParent,
                event.payload.subject,
            ])
    }

    public func nextPendingWebhookEvent() async throws -> StoredWebhookEvent? {
        try await first(
            """
            SELECT * FROM webhookEvent e WHERE deliveredAt IS NULL AND failedAt IS NULL AND NOT EXISTS (
                SELECT 1 FROM webhookEvent p
                WHERE p.subject IS e.subject AND p.seq < e.seq AND p.deliveredAt IS NULL AND p.failedAt IS NULL)
            ORDER BY nextAttemptAt, seq LIMIT 1
            """, [], Self.storedWebhookEvent)
    }

    /// Every event not delivered (pending and failed), oldest first.
    public func undeliveredWebhookEvents() async throws -> [WebhookEvent] {
        try await all("SELECT * FROM webhookEvent WHERE deliveredAt IS NULL ORDER BY seq") {
            try Self.storedWebhookEvent($0).event
        }
    }

    public func webhookBacklog() async throws -> WebhookBacklog {
        try await first("""
            SELECT count(*) AS n, min(createdAt) AS oldest FROM webhookEvent
            WHERE deliveredAt IS NULL AND failedAt IS NULL
            """
        ) { row in
            var backlog = WebhookBacklog()
            backlog.pending = row["n"]
            backlog.oldestCreatedAt = (row["oldest"] as Double?).map(Date.init(timeIntervalSince1970:))
            return backlog
        } ?? WebhookBacklog()
    }

    /// Records a successful delivery.
    public func markWebhookEventDelivered(_ id: String, at date: Date) async throws {
        try await execute(
            "UPDATE webhookEvent SET attempts = attempts + 1, deliveredAt = ?, lastError = NULL WHERE id = ?",
            [date.timeIntervalSince1970, id])
    }

    public func recentWebhookEvents(limit: Int) async throws -> [WebhookDelivery] {
        try await all("SELECT * FROM webhookEvent ORDER BY seq DESC LIMIT ?", [limit]) { row in
            let stored = try Self.storedWebhookEvent(row)
            return WebhookDelivery(
                event: stored.event, nextAttemptAt: stored.nextAttemptAt, lastError: row["lastError"])
        }
    }

    public func retryWebhookEvent(_ id: String, now: Date) async throws -> Bool {
        try await execute("""
            UPDATE webhookEvent SET failedAt = NULL, attempts = 0, nextAttemptAt = ?
            WHERE id = ? AND failedAt IS NOT NULL AND deliveredAt IS NULL
            """, [now.timeIntervalSince1970, id]) > 0
    }

    /// Records a failed attempt: either the next attempt's time or, when attempts ran out (nil), the failure.
    public func recordWebhookAttemptFailure(_ id: String, error: String, nextAttemptAt: Date?, now: Date) async throws {
        if let nextAttemptAt {
            try await execute(
                "UPDATE webhookEvent SET attempts = attempts + 1, nextAttemptAt = ?, lastError = ? WHERE id = ?",
                [nextAttemptAt.timeIntervalSince1970, error, id])
        } else {
            try await execute(
                "UPDATE webhookEvent SET attempts = attempts + 1, failedAt = ?, lastError = ? WHERE id = ?",
                [now.timeIntervalSince1970, error, id])
        }
    }
}

