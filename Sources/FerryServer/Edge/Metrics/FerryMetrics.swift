import FerryStorage
import Foundation
import NIOConcurrencyHelpers
import Prometheus

/// The Prometheus series of one server, rendered at `GET /metrics` in the text exposition format.
///
/// Each server keeps a registry of its own (several servers in one process, as in tests, never mix their counts).
/// Names follow Prometheus's conventions — the unit in the name, `_total` on counters — and labels take only values
/// from small fixed sets (route groups, methods, status codes, S3 operation names): never a key, a VideoId or an
/// access key id. ``series`` lists every series; docs/operations.md is checked against it.
public final class FerryMetrics: Sendable {
    /// The registry every series lives in.
    public let registry = PrometheusCollectorRegistry()

    /// A series Ferry exports.
    public struct Series: Sendable, Hashable {
        /// The series' name, e.g. `ferry_http_requests_total`.
        public var name: String
        /// `counter`, `gauge` or `histogram`.
        public var type: String
        /// Its label names.
        public var labels: [String]
        /// What it counts.
        public var help: String
    }

    /// Every series Ferry exports.
    public static let series: [Series] = [
        requests, requestDuration, activeRequests, requestBytes, responseBytes, s3Operations, catalogUp, mediaJobs,
        mediaJobQueueAge, webhookPending, webhookLag,
    ]

    static let requests = Series(
        name: "ferry_http_requests_total", type: "counter", labels: ["group", "method", "status"],
        help: "Requests answered, by route group (s3, media, publish, form, playback, console, signing, health, metrics, ferry), method and status.")
    static let requestDuration = Series(
        name: "ferry_http_request_duration_seconds", type: "histogram", labels: ["group", "method"],
        help: "Time from a request's head to its answer's head (a streamed body goes on after).")
    static let activeRequests = Series(
        name: "ferry_http_requests_active", type: "gauge", labels: [],
        help: "Requests being answered now.")
    static let requestBytes = Series(
        name: "ferry_http_request_body_bytes_total", type: "counter", labels: ["group"],
        help: "Body bytes of requests answered with a 2xx status (the decoded length of aws-chunked bodies).")
    static let responseBytes = Series(
        name: "ferry_http_response_body_bytes_total", type: "counter", labels: ["group"],
        help: "Body bytes of answers whose length was known when their head was sent.")
    static let s3Operations = Series(
        name: "ferry_s3_operations_total", type: "counter", labels: ["operation", "status"],
        help: "Object API operations (PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload, …) by status.")

    static let catalogUp = Series(
        name: "ferry_catalog_up", type: "gauge", labels: [],
        help: "1 when the catalog answered the scrape's queries within 2 s, else 0 (the queue series then keep their last values).")
    static let mediaJobs = Series(
        name: "ferry_media_jobs", type: "gauge", labels: ["state"],
        help: "Media jobs in the catalog by state: queued (also waiting to retry), running, failed. Shared by the nodes of one catalog.")
    static let mediaJobQueueAge = Series(
        name: "ferry_media_job_queue_age_seconds", type: "gauge", labels: [],
        help: "How long the job due the longest has waited for a worker; 0 when none is due.")
    static let webhookPending = Series(
        name: "ferry_webhook_events_pending", type: "gauge", labels: [],
        help: "Webhook events waiting for delivery (neither delivered nor given up on).")
    static let webhookLag = Series(
        name: "ferry_webhook_delivery_lag_seconds", type: "gauge", labels: [],
        help: "Age of the oldest webhook event waiting for delivery; 0 when none waits.")

    private static let durationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
    ]

    private let active: Gauge

    /// Creates the registry with the series that have no labels.
    public init() {
        active = registry.makeGauge(descriptor: Self.descriptor(Self.activeRequests))
    }

    /// The exposition text of every series.
    public func render() -> String { registry.emitToString() }

    /// Sets the catalog's series from what it answered for this scrape; nil when it did not answer in time.
    func recordCatalog(_ answer: (jobs: JobBacklog, webhooks: WebhookBacklog)?, now: Date) {
        gauge(Self.catalogUp).set(to: answer == nil ? 0 : 1)
        guard let (jobs, webhooks) = answer else { return }
        for (state, count) in [("queued", jobs.queued), ("running", jobs.running), ("failed", jobs.failed)] {
            registry.makeGauge(descriptor: Self.descriptor(Self.mediaJobs), labels: [("state", state)]).set(to: Double(count))
        }
        gauge(Self.mediaJobQueueAge).set(to: jobs.oldestDue.map { max(0, now.timeIntervalSince($0)) } ?? 0)
        gauge(Self.webhookPending).set(to: Double(webhooks.pending))
        gauge(Self.webhookLag).set(to: webhooks.oldestCreatedAt.map { max(0, now.timeIntervalSince($0)) } ?? 0)
    }

    private func gauge(_ series: Series) -> Gauge { registry.makeGauge(descriptor: Self.descriptor(series)) }

    /// A request began.
    func requestStarted() { active.increment() }

    /// A request was answered: `group` is the route group that answered it, `bytesIn` the body it sent when it was
    /// accepted, `bytesOut` the answer's body when its length is known.
    func requestFinished(
        group: String, method: String, status: Int, duration: Duration, bytesIn: Int64?, bytesOut: Int64?
    ) {
        active.decrement()
        let statusText = String(status)
        registry.makeCounter(
            descriptor: Self.descriptor(Self.requests), labels: [("group", group), ("method", method), ("status", statusText)]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: Self.descriptor(Self.requestDuration), labels: [("group", group), ("method", method)],
            buckets: Self.durationBuckets
        ).record(duration)
        if let bytesIn, bytesIn > 0 {
            registry.makeCounter(descriptor: Self.descriptor(Self.requestBytes), labels: [("group", group)])
                .increment(by: bytesIn)
        }
        if let bytesOut, bytesOut > 0 {
            registry.makeCounter(descriptor: Self.descriptor(Self.responseBytes), labels: [("group", group)])
                .increment(by: bytesOut)
        }
    }

    /// An object API operation was answered with `status`.
    func operationFinished(_ operation: String, status: Int) {
        registry.makeCounter(
            descriptor: Self.descriptor(Self.s3Operations), labels: [("operation", operation), ("status", String(status))]
        ).increment()
    }

    /// The registry's descriptor of `series`: the whole name as the metric name, so that it reads as listed.
    private static func descriptor(_ series: Series) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: series.name, unitName: "", helpText: series.help)
    }
}

/// What the route group that answered a request tells the metrics middleware around it: the group's name and, for
/// the object API, the operation. One per request, shared by the copies of its context.
final class RequestObservation: Sendable {
    private let state = NIOLockedValueBox<(group: String, operation: String?)>(("unrouted", nil))

    /// The route group that answered, `unrouted` before one took the request.
    var group: String {
        get { state.withLockedValue { $0.group } }
        set { state.withLockedValue { $0.group = newValue } }
    }

    /// The object API operation, when the request was one.
    var operation: String? {
        get { state.withLockedValue { $0.operation } }
        set { state.withLockedValue { $0.operation = newValue } }
    }
}
