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
        requests, throttledRequests, quotaRefusals, requestDuration, activeRequests, requestBytes, responseBytes, s3Operations, mediaActions,
        checksumMismatches, multipartUploads, multipartUploadsInProgress, partsReplaced, storageCallDuration, storageCallErrors, catalogUp, mediaJobs,
        mediaJobQueueAge, mediaJobsEnded, mediaJobDuration, mediaJobLeases, serviceLeases, timeToNormal, webhookPending, webhookLag,
        webhookDeliveries, webhookDeliveryDelay, nodesSeen, dataDirectoryFree,
    ]

    static let requests = Series(
        name: "ferry_http_requests_total", type: "counter", labels: ["group", "method", "status"],
        help: "Requests answered, by route group (s3, media, publish, form, playback, resumable, console, signing, health, metrics, ferry), method and status.")
    static let throttledRequests = Series(
        name: "ferry_http_requests_throttled_total", type: "counter", labels: ["group"],
        help: "Requests refused for their access key's RequestsPerSecond (503 SlowDown or Throttling, the form's 573), by route group: counted in ferry_http_requests_total too, so subtract them where a 5xx means a fault of the service.")
    static let quotaRefusals = Series(
        name: "ferry_quota_refusals_total", type: "counter", labels: ["group", "quota"],
        help: "Requests refused because they would take their access key past a quota (StorageBytes, ConcurrentUploads or Videos: 403 QuotaExceeded, the form's 403, nothing stored), by route group and quota. The request rate's refusals are ferry_http_requests_throttled_total.")
    static let requestDuration = Series(
        name: "ferry_http_request_duration_seconds", type: "histogram", labels: ["group", "method"],
        help: "Time from a request's head to its answer's head (a streamed body goes on after).")
    static let activeRequests = Series(
        name: "ferry_http_requests_active", type: "gauge", labels: [],
        help: "Requests being answered now, downloads whose body is still being sent included.")
    static let requestBytes = Series(
        name: "ferry_http_request_body_bytes_total", type: "counter", labels: ["group"],
        help: "Body bytes read of requests answered with a 2xx status (the decoded length of aws-chunked bodies, never more than was read; a declared length alone counts nothing).")
    static let responseBytes = Series(
        name: "ferry_http_response_body_bytes_total", type: "counter", labels: ["group"],
        help: "Body bytes of answers handed to the connection (an answer cut off counts what it had handed over, not its declared length).")
    static let s3Operations = Series(
        name: "ferry_s3_operations_total", type: "counter", labels: ["operation", "status"],
        help: "Object API operations (PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload, …) by status, refusals of authentication and of the request rate included.")

    static let mediaActions = Series(
        name: "ferry_media_actions_total", type: "counter", labels: ["action", "status"],
        help: "Media API actions (CreateUploadVideo, RefreshUploadVideo (a credential refresh), AssumeRole, GetPlayInfo, …) by status, the console's included, refusals of authentication and of the request rate too.")
    static let checksumMismatches = Series(
        name: "ferry_checksum_mismatches_total", type: "counter", labels: ["group"],
        help: "Uploads refused because their bytes did not match a declared checksum or digest (nothing was stored), by route group.")
    static let multipartUploads = Series(
        name: "ferry_multipart_uploads_total", type: "counter", labels: ["event"],
        help: "Multipart uploads started, completed, aborted (by their client), expired (aborted by the collector, a lifecycle rule, or with a video or image whose upload expired) and resumed (their parts listed, as a client does when it picks an upload up again).")
    static let multipartUploadsInProgress = Series(
        name: "ferry_multipart_uploads_in_progress", type: "gauge", labels: [],
        help: "Multipart uploads begun and neither completed nor aborted, tus and IETF uploads' included, as the catalog counts them at each scrape (the last value when it does not answer).")
    static let partsReplaced = Series(
        name: "ferry_upload_parts_replaced_total", type: "counter", labels: [],
        help: "Parts uploaded again under a number that had one: clients' retries.")
    static let storageCallDuration = Series(
        name: "ferry_storage_call_duration_seconds", type: "histogram", labels: ["layer", "operation"],
        help: "Time of the object store's calls to the catalog (layer catalog) and the blob storage (layer blobs), by operation.")
    static let storageCallErrors = Series(
        name: "ferry_storage_call_errors_total", type: "counter", labels: ["layer", "operation"],
        help: "Calls to the catalog or the blob storage that failed (a file system, database or object-store error, a full disk; not a refusal such as a quota), by operation; blob reads and writes count as operations read and write.")

    static let catalogUp = Series(
        name: "ferry_catalog_up", type: "gauge", labels: [],
        help: "1 when the catalog answered the scrape's queries within 2 s, else 0 (the queue series then keep their last values).")
    static let mediaJobs = Series(
        name: "ferry_media_jobs", type: "gauge", labels: ["state"],
        help: "Media jobs in the catalog by state: queued (due, waiting for a worker), scheduled (not due yet: waiting out a retry's delay, a delayed clean-up, or a first stream's retirement, --first-stream-retention after its video is Normal), running, failed. Shared by the nodes of one catalog.")
    static let mediaJobQueueAge = Series(
        name: "ferry_media_job_queue_age_seconds", type: "gauge", labels: [],
        help: "How long the job due the longest has waited for a worker; 0 when none is due.")
    static let mediaJobsEnded = Series(
        name: "ferry_media_jobs_ended_total", type: "counter", labels: ["kind", "outcome"],
        help: "Media job attempts this node ran, by kind (probe, snapshot, transcode, retire-first-stream, remove-files, remove-image-file) and outcome: done, retry, failed (given up), released (handed back at shutdown or for an outage), lost (lease lost), cancelled (video deleted).")
    static let mediaJobDuration = Series(
        name: "ferry_media_job_duration_seconds", type: "histogram", labels: ["kind"],
        help: "Time a media job attempt ran on this node, by kind.")
    static let mediaJobLeases = Series(
        name: "ferry_media_job_leases_held", type: "gauge", labels: [],
        help: "Media jobs this node holds the lease of (running here now).")
    static let serviceLeases = Series(
        name: "ferry_service_leases_held", type: "gauge", labels: ["lease"],
        help: "Whether this node holds a service's lease in the catalog (1) or not (0), by lease: collector and collector-expiry (the latter with a short --multipart-max-age or --uploading-video-max-age; each held during a pass), lifecycle (taken for two lifecycle intervals, 20 minutes, and renewed by each pass, so the node applying the rules holds it throughout; a node whose objects are its own, with --catalog alone, applies the rules to them whether it holds it or not, while the catalog answers), webhook-delivery (held while this node delivers).")
    static let timeToNormal = Series(
        name: "ferry_video_time_to_normal_seconds", type: "histogram", labels: [],
        help: "Time from a video's file being stored to the video becoming Normal (probed, and transcoded when it has a template).")
    static let webhookPending = Series(
        name: "ferry_webhook_events_pending", type: "gauge", labels: [],
        help: "Webhook events waiting for delivery (neither delivered nor given up on).")
    static let webhookLag = Series(
        name: "ferry_webhook_delivery_lag_seconds", type: "gauge", labels: [],
        help: "Age of the oldest webhook event waiting for delivery; 0 when none waits.")

    static let webhookDeliveries = Series(
        name: "ferry_webhook_deliveries_total", type: "counter", labels: ["outcome"],
        help: "Webhook delivery attempts by outcome: delivered, retry (to be tried again), failed (given up).")
    static let webhookDeliveryDelay = Series(
        name: "ferry_webhook_delivery_delay_seconds", type: "histogram", labels: [],
        help: "Time from a webhook event being made to its delivery.")
    static let nodesSeen = Series(
        name: "ferry_nodes_seen", type: "gauge", labels: [],
        help: "Nodes whose heartbeat in the catalog is fresh (written within the last 60 s), this one included. Shared by the nodes of one catalog.")
    static let dataDirectoryFree = Series(
        name: "ferry_data_dir_free_bytes", type: "gauge", labels: [],
        help: "Bytes free on the filesystem of the data directory, on a node that keeps objects there (absent with a shared store).")

    /// Buckets of the histograms of media work (job attempts, time to Normal, webhook delays).
    private static let longBuckets: [Duration] = [
        .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(20), .seconds(30), .seconds(60), .seconds(120),
        .seconds(300), .seconds(600), .seconds(1800), .seconds(3600),
    ]

    private static let durationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30),
    ]

    private let active: Gauge

    /// Creates the registry with the series that have no labels.
    public init() {
        active = registry.makeGauge(descriptor: Self.descriptor(Self.activeRequests))
        // The series without labels exist from the start, at zero, so that a query of them has data before an event.
        _ = counter(Self.partsReplaced)
        _ = histogram(Self.timeToNormal, buckets: Self.longBuckets)
        _ = histogram(Self.webhookDeliveryDelay, buckets: Self.longBuckets)
    }

    /// The exposition text of every series.
    public func render() -> String { registry.emitToString() }

    /// Sets the catalog's series from what it answered for this scrape; nil when it did not answer in time.
    func recordCatalog(_ answer: (jobs: JobBacklog, webhooks: WebhookBacklog, uploads: Int)?, now: Date) {
        gauge(Self.catalogUp).set(to: answer == nil ? 0 : 1)
        guard let (jobs, webhooks, uploads) = answer else { return }
        gauge(Self.multipartUploadsInProgress).set(to: Double(uploads))
        let states = [
            ("queued", jobs.queued), ("scheduled", jobs.scheduled), ("running", jobs.running), ("failed", jobs.failed),
        ]
        for (state, count) in states {
            gauge(Self.mediaJobs, [("state", state)]).set(to: Double(count))
        }
        gauge(Self.mediaJobQueueAge).set(to: jobs.oldestDue.map { max(0, now.timeIntervalSince($0)) } ?? 0)
        gauge(Self.webhookPending).set(to: Double(webhooks.pending))
        gauge(Self.webhookLag).set(to: webhooks.oldestCreatedAt.map { max(0, now.timeIntervalSince($0)) } ?? 0)
    }

    /// Sets the status series from this scrape: the nodes with a fresh heartbeat (nil when the catalog did not answer,
    /// which leaves the last value) and the data directory's free bytes (nil on a node without objects on its disk).
    func recordStatus(nodesSeen: Int?, dataDirectoryFreeBytes: Int64?) {
        if let nodesSeen { gauge(Self.nodesSeen).set(to: Double(nodesSeen)) }
        if let dataDirectoryFreeBytes { gauge(Self.dataDirectoryFree).set(to: Double(dataDirectoryFreeBytes)) }
    }

    private func gauge(_ series: Series, _ labels: [(String, String)] = []) -> Gauge {
        registry.makeGauge(descriptor: Self.descriptor(series), labels: labels)
    }

    /// A request began.
    func requestStarted() { active.increment() }

    /// A request's answer has been sent (or dropped unsent).
    func requestEnded() { active.decrement() }

    /// A request was answered: `group` is the route group that answered it, `bytesIn` the body it sent when it was
    /// accepted.
    func requestFinished(group: String, method: String, status: Int, duration: Duration, bytesIn: Int64?) {
        counter(Self.requests, [("group", group), ("method", method), ("status", String(status))]).increment()
        histogram(Self.requestDuration, [("group", group), ("method", method)], buckets: Self.durationBuckets)
            .record(duration)
        if let bytesIn, bytesIn > 0 { counter(Self.requestBytes, [("group", group)]).increment(by: bytesIn) }
    }

    /// The counter of the answer bytes of `group` sent.
    func responseBytesCounter(group: String) -> Counter {
        counter(Self.responseBytes, [("group", group)])
    }

    /// A request was answered `status` before any route group took it (a head the HTTP parser or the connection guard
    /// refused): counted as group `unrouted`, method `other`.
    func requestRefusedUnrouted(status: Int) {
        counter(Self.requests, [("group", "unrouted"), ("method", "other"), ("status", String(status))]).increment()
    }

    /// A request of `group` was refused for its access key's request rate.
    func requestThrottled(group: String) {
        counter(Self.throttledRequests, [("group", group)]).increment()
    }

    /// A request of `group` was refused for its access key's `quota` (its `QuotaName`).
    func quotaRefused(group: String, quota: String) {
        counter(Self.quotaRefusals, [("group", group), ("quota", quota)]).increment()
    }

    /// An object API operation (group `s3`) or a media API action (group `media`, or `console` for a session's) was
    /// answered with `status`.
    func operationFinished(_ operation: String, group: String, status: Int) {
        switch group {
        case "s3": counter(Self.s3Operations, [("operation", operation), ("status", String(status))]).increment()
        case "media", "console":
            counter(Self.mediaActions, [("action", operation), ("status", String(status))]).increment()
        default: break
        }
    }

    /// A request's bytes did not match what it declared.
    func checksumMismatch(group: String) { counter(Self.checksumMismatches, [("group", group)]).increment() }

    /// Records whether this node now holds the service lease `name`.
    func serviceLease(_ name: String, held: Bool) {
        gauge(Self.serviceLeases, [("lease", name)]).set(to: held ? 1 : 0)
    }

    /// Sets the series of this node's own state at a scrape.
    func recordNode(runningJobs: Int) { gauge(Self.mediaJobLeases).set(to: Double(runningJobs)) }

    private func counter(_ series: Series, _ labels: [(String, String)] = []) -> Counter {
        registry.makeCounter(descriptor: Self.descriptor(series), labels: labels)
    }

    private func histogram(_ series: Series, _ labels: [(String, String)] = [], buckets: [Duration]) -> DurationHistogram {
        registry.makeDurationHistogram(descriptor: Self.descriptor(series), labels: labels, buckets: buckets)
    }

    /// The registry's descriptor of `series`: the whole name as the metric name, so that it reads as listed.
    private static func descriptor(_ series: Series) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: series.name, unitName: "", helpText: series.help)
    }
}

extension FerryMetrics: ServiceEvents {
    package func multipartUpload(_ event: MultipartUploadEvent, count: Int) {
        counter(Self.multipartUploads, [("event", event.rawValue)]).increment(by: Int64(count))
    }

    package func partReplaced() { counter(Self.partsReplaced).increment() }

    package func mediaJobEnded(kind: String, outcome: String, duration: Duration) {
        counter(Self.mediaJobsEnded, [("kind", kind), ("outcome", outcome)]).increment()
        histogram(Self.mediaJobDuration, [("kind", kind)], buckets: Self.longBuckets).record(duration)
    }

    package func videoBecameNormal(after seconds: TimeInterval) {
        histogram(Self.timeToNormal, buckets: Self.longBuckets).record(.seconds(max(0, seconds)))
    }

    package func webhookDeliveryEnded(_ outcome: String, lag: TimeInterval) {
        counter(Self.webhookDeliveries, [("outcome", outcome)]).increment()
        if outcome == "delivered" { histogram(Self.webhookDeliveryDelay, buckets: Self.longBuckets).record(.seconds(max(0, lag))) }
    }

    package func storageCall(layer: String, operation: String, duration: Duration, failed: Bool) {
        histogram(Self.storageCallDuration, [("layer", layer), ("operation", operation)], buckets: Self.durationBuckets)
            .record(duration)
        if failed { storageCallFailed(layer: layer, operation: operation) }
    }

    package func storageCallFailed(layer: String, operation: String) {
        counter(Self.storageCallErrors, [("layer", layer), ("operation", operation)]).increment()
    }
}

/// What the route group that answered a request tells the metrics middleware around it: the group's name and, for
/// the object API, the operation. One per request, shared by the copies of its context.
final class RequestObservation: Sendable {
    private let state = NIOLockedValueBox<
        (group: String, operation: String?, checksumMismatch: Bool, throttled: Bool, quotaRefused: String?)
    >(("unrouted", nil, false, false, nil))

    /// The route group that answered, `unrouted` before one took the request.
    var group: String {
        get { state.withLockedValue { $0.group } }
        set { state.withLockedValue { $0.group = newValue } }
    }

    /// The object API operation or media API action, when the request was one.
    var operation: String? {
        get { state.withLockedValue { $0.operation } }
        set { state.withLockedValue { $0.operation = newValue } }
    }

    /// Whether the request was refused because its bytes did not match a declared checksum or digest.
    var checksumMismatch: Bool {
        get { state.withLockedValue { $0.checksumMismatch } }
        set { state.withLockedValue { $0.checksumMismatch = newValue } }
    }

    /// Whether the request was refused for its access key's request rate.
    var throttled: Bool {
        get { state.withLockedValue { $0.throttled } }
        set { state.withLockedValue { $0.throttled = newValue } }
    }

    /// The quota (its `QuotaName`) the request was refused for, when it would have taken its access key past one.
    var quotaRefused: String? {
        get { state.withLockedValue { $0.quotaRefused } }
        set { state.withLockedValue { $0.quotaRefused = newValue } }
    }
}
