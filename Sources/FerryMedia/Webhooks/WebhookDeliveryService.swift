import AsyncHTTPClient
import FerryCore
import FerryStorage
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

/// Delivers the outbox's events, each video's in the order they were made, until the service group shuts down.
///
/// Each event is POSTed as its stored JSON body with `Content-Type: application/json` and a
/// `WebhookSignature.headerName` header signed at send time. A 2xx marks it delivered; anything else (a status, a
/// connection error, no whole answer within `attemptTimeout`) schedules the next attempt after an exponential backoff
/// with jitter, up to `maxBackoff`. The events of one video (or image; events about neither form one line of their own)
/// go in creation order: a later one waits while an earlier one is retried. Another video's events do not wait for it
/// when the receiver refuses that one event (a 4xx other than 408 and 429), so that an event the app server keeps
/// refusing holds back its own video's events only. When the receiver cannot be reached, times out, or answers 5xx, 408
/// or 429, delivery pauses as a whole, with the same backoff counted in failures in a row, so an outage costs no more
/// attempts than one event's would. After `maxAttempts` the event is marked failed (kept in the catalog, logged at
/// warning with its id) and its video's next event goes. Delivery is at least once: an event whose acknowledgement is
/// lost (shutdown, crash) is sent again. The secret and signatures are never logged; neither is the URL (it may carry a
/// token).
package struct WebhookDeliveryService: Service {
    let outbox: WebhookOutbox
    let configuration: WebhookConfiguration
    let logger: Logger
    /// Nodes sharing a catalog deliver one at a time: the one holding this lease.
    let leases: any ServiceLeaseStore
    /// This node's name in leases.
    let node: String
    /// Who hears how attempts end (the server's metrics).
    package var events: (any ServiceEvents)?

    /// Creates the service.
    package init(
        outbox: WebhookOutbox, configuration: WebhookConfiguration, logger: Logger, leases: any ServiceLeaseStore,
        node: String
    ) {
        self.outbox = outbox
        self.configuration = configuration
        self.logger = logger
        self.leases = leases
        self.node = node
    }

    /// The lease that lets one node deliver.
    static let leaseName = "webhook-delivery"
    /// How long it lasts unless renewed (a third of it before it runs out).
    static let leaseDuration: Duration = .seconds(30)

    package func run() async throws {
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.redirectConfiguration = .disallow
        let timeout = TimeAmount(configuration.attemptTimeout)
        clientConfiguration.timeout = .init(connect: timeout, read: timeout)
        // Fail an attempt at once when the receiver refuses connections (the backoff is ours).
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        // No spans of the client's own: they would carry the URL whole, and its path or query may be the receiver's
        // secret. The delivery's span is ours, and its `traceparent` is sent by hand.
        clientConfiguration.tracing.tracer = nil
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: clientConfiguration)
        await deliverUntilShutdown(client)
        try await client.shutdown()
    }

    private func deliverUntilShutdown(_ client: HTTPClient) async {
        let poll = configuration.pollInterval.timeInterval
        var heldUntil = Date.distantPast
        // While the receiver is down (not one event refused): no attempt before this, and how many failed in a row.
        var pausedUntil = Date.distantPast
        var receiverFailures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            var wait = poll
            do {
                let now = Date()
                if heldUntil.timeIntervalSince(now) < Self.leaseDuration.timeInterval * 2 / 3 {
                    if try await leases.acquireLease(Self.leaseName, owner: node, duration: Self.leaseDuration, now: now) {
                        heldUntil = now.addingTimeInterval(Self.leaseDuration.timeInterval)
                    } else {
                        // Another node delivers; look again in a while.
                        heldUntil = .distantPast
                        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
                        continue
                    }
                }
                if pausedUntil > now {
                    // The receiver is down: nothing goes before the pause ends (the lease is renewed meanwhile).
                    wait = min(pausedUntil.timeIntervalSince(now), Self.leaseDuration.timeInterval / 3)
                } else if let next = try await outbox.catalog.nextPendingWebhookEvent() {
                    let untilDue = next.nextAttemptAt.timeIntervalSinceNow
                    if untilDue <= 0 {
                        switch await attempt(next, client) {
                        case .notRecorded:
                            break
                        case .recorded(receiverAnswered: true):
                            receiverFailures = 0
                            continue
                        case .recorded(receiverAnswered: false):
                            receiverFailures += 1
                            pausedUntil = Date().addingTimeInterval(backoff(afterAttempts: receiverFailures))
                            continue
                        }
                    } else {
                        // A new event of another video may be due before this one: looked for every second at least.
                        wait = min(untilDue, max(poll, 1))
                    }
                }
            } catch {
                logger.warning("webhook outbox unavailable", metadata: ["error": .string(String(describing: error))])
                wait = max(poll, 1)
            }
            // Graceful shutdown ends the wait at once.
            let delay = Duration.seconds(max(wait, 0.001))
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
        }
        // Another node may take over at once instead of when the lease runs out.
        guard heldUntil > Date() else { return }
        let (leases, name, node) = (self.leases, Self.leaseName, self.node)
        do {
            try await whileIgnoringCancellation { try await leases.releaseLease(name, owner: node) }
        } catch {
            logger.warning("webhook delivery lease not released", metadata: ["error": .string(String(describing: error))])
        }
    }

    /// How an attempt ended.
    private enum AttemptOutcome {
        /// Recorded in the catalog; `receiverAnswered` unless the receiver was down (unreachable, timed out, 5xx, 408
        /// or 429) rather than refusing this event.
        case recorded(receiverAnswered: Bool)
        /// Nothing could be recorded (shutdown or a catalog error): the loop waits before looking again.
        case notRecorded
    }

    /// One delivery attempt, recorded in the catalog.
    private func attempt(_ stored: StoredWebhookEvent, _ client: HTTPClient) async -> AttemptOutcome {
        let event = stored.event
        let failure: String?
        var receiverAnswered = true
        do {
            // The delivery continues the trace of what made the event; the app server gets it as `traceparent`.
            try await TraceContext.withSpan("webhook.deliver", parent: stored.traceParent, ofKind: .client) {
                // With a tracer, the delivery's own `traceparent`; without one, the stored one.
                let traceParent = TraceContext.current() ?? stored.traceParent
                try await cancelWhenGracefulShutdown { try await post(stored.body, client, traceParent: traceParent) }
            }
            failure = nil
        } catch {
            // Interrupted by shutdown: not an attempt; it is sent again on the next start.
            if Task.isCancelled || Task.isShuttingDownGracefully { return .notRecorded }
            failure = String(describing: error)
            let status = (error as? StatusError)?.code
            receiverAnswered = status.map { (400..<500).contains($0) && $0 != 408 && $0 != 429 } ?? false
        }
        let now = Date()
        do {
            guard let failure else {
                try await outbox.catalog.markWebhookEventDelivered(event.id, at: now)
                events?.webhookDeliveryEnded("delivered", lag: now.timeIntervalSince(event.createdAt))
                logger.debug("webhook delivered", metadata: ["ferry.event-id": "\(event.id)", "ferry.attempts": "\(event.attempts + 1)"])
                return .recorded(receiverAnswered: true)
            }
            let attempts = event.attempts + 1
            let exhausted = attempts >= max(configuration.maxAttempts, 1)
            let next = exhausted ? nil : now.addingTimeInterval(backoff(afterAttempts: attempts))
            try await outbox.catalog.recordWebhookAttemptFailure(event.id, error: failure, nextAttemptAt: next, now: now)
            events?.webhookDeliveryEnded(exhausted ? "failed" : "retry", lag: now.timeIntervalSince(event.createdAt))
            logger.log(
                level: exhausted ? .warning : .debug,
                exhausted ? "webhook delivery failed; giving up on the event" : "webhook delivery attempt failed",
                metadata: ["ferry.event-id": "\(event.id)", "ferry.attempts": "\(attempts)", "error": "\(failure)"])
            return .recorded(receiverAnswered: receiverAnswered)
        } catch {
            logger.warning(
                "webhook delivery not recorded",
                metadata: ["ferry.event-id": "\(event.id)", "error": .string(String(describing: error))])
            return .notRecorded
        }
    }

    private struct StatusError: Error, CustomStringConvertible {
        let code: UInt
        var description: String { "HTTP status \(code)" }
    }

    /// POSTs a body; throws unless the receiver answers 2xx.
    private func post(_ body: [UInt8], _ client: HTTPClient, traceParent: String?) async throws {
        var request = HTTPClientRequest(url: configuration.requestURL)
        request.method = .POST
        if let authorization = configuration.basicAuthorization {
            request.headers.add(name: "Authorization", value: authorization)
        }
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "Ferry-Webhooks")
        if let traceParent { request.headers.add(name: "traceparent", value: traceParent) }
        request.headers.add(
            name: WebhookSignature.headerName,
            value: WebhookSignature.sign(body: body, secret: configuration.secret, timestamp: Date()))
        request.body = .bytes(ByteBuffer(bytes: body))
        // The attempt's limit holds for the answer's body too: a receiver trickling it would hold back every event
        // behind this one.
        let status = await withTimeLimit(configuration.attemptTimeout) { [request] () async -> Result<UInt, any Error> in
            do {
                let response = try await client.execute(request, timeout: TimeAmount(configuration.attemptTimeout))
                // Read (and drop) a little of the answer so the connection can be reused; its content does not matter.
                var received = 0
                do {
                    for try await chunk in response.body {
                        received += chunk.readableBytes
                        if received > 64 * 1024 { break }
                    }
                } catch {}
                return .success(response.status.code)
            } catch {
                return .failure(error)
            }
        }
        let code = try (status ?? .failure(HTTPClientError.deadlineExceeded)).get()
        guard (200..<300).contains(code) else { throw StatusError(code: code) }
    }

    /// The wait after `attempts` failed attempts: `initialBackoff * 2^(attempts-1)` capped at `maxBackoff`, of which
    /// the upper half is random (so many retrying senders spread out).
    func backoff(afterAttempts attempts: Int) -> TimeInterval {
        let initial = configuration.initialBackoff.timeInterval
        let maximum = max(configuration.maxBackoff.timeInterval, 0)
        let base = min(maximum, initial * pow(2, Double(min(max(attempts - 1, 0), 40))))
        return base / 2 + Double.random(in: 0...(base / 2))
    }
}
