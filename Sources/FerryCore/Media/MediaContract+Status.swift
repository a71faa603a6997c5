import Foundation

extension MediaContract {
    /// GetServiceStatus (root key only): it takes no parameters (the answer is a ``ServiceStatusAnswer``).
    public struct ServiceStatusRequest: Codable, Sendable, Hashable {
        /// Creates a request.
        public init() {}
    }

    /// A node of the service as GetServiceStatus lists it, from the heartbeat it writes to the catalog.
    public struct ServiceNode: Codable, Sendable, Hashable {
        /// The node's name (host, process id and a random suffix).
        public var name: String
        /// `all`, `api` or `worker`.
        public var role: String
        /// The Ferry version it runs.
        public var version: String
        /// When it started, ISO 8601.
        public var startedAt: String
        /// When its heartbeat was last written, ISO 8601.
        public var lastSeen: String
        /// Whether its heartbeat is older than the service expects (the node stopped or cannot reach the catalog).
        public var stale: Bool

        /// Creates a description.
        public init(name: String, role: String, version: String, startedAt: String, lastSeen: String, stale: Bool) {
            self.name = name
            self.role = role
            self.version = version
            self.startedAt = startedAt
            self.lastSeen = lastSeen
            self.stale = stale
        }

        enum CodingKeys: String, CodingKey {
            case name = "Name", role = "Role", version = "Version", startedAt = "StartedAt", lastSeen = "LastSeen"
            case stale = "Stale"
        }
    }

    /// The media job queue in a status answer.
    public struct JobQueueStatus: Codable, Sendable, Hashable {
        /// Jobs due, waiting for a worker.
        public var queued: Int
        /// Queued jobs not due yet (a retry's delay, a delayed clean-up, a first stream's retirement); nil from a
        /// server that does not tell them apart.
        public var scheduled: Int?
        /// Jobs a worker holds.
        public var running: Int
        /// Jobs given up on.
        public var failed: Int
        /// Seconds the job due the longest has waited for a worker; absent when none is due.
        public var oldestQueuedAgeSeconds: Double?

        /// Creates a description.
        public init(
            queued: Int, scheduled: Int? = 0, running: Int, failed: Int, oldestQueuedAgeSeconds: Double? = nil
        ) {
            self.queued = queued
            self.scheduled = scheduled
            self.running = running
            self.failed = failed
            self.oldestQueuedAgeSeconds = oldestQueuedAgeSeconds
        }

        enum CodingKeys: String, CodingKey {
            case queued = "Queued", scheduled = "Scheduled", running = "Running", failed = "Failed"
            case oldestQueuedAgeSeconds = "OldestQueuedAgeSeconds"
        }
    }

    /// The webhook events waiting for delivery in a status answer.
    public struct WebhookBacklogStatus: Codable, Sendable, Hashable {
        /// Events neither delivered nor given up on.
        public var pending: Int
        /// Seconds since the oldest of them was created; absent when none waits.
        public var oldestPendingAgeSeconds: Double?

        /// Creates a description.
        public init(pending: Int, oldestPendingAgeSeconds: Double? = nil) {
            self.pending = pending
            self.oldestPendingAgeSeconds = oldestPendingAgeSeconds
        }

        enum CodingKeys: String, CodingKey {
            case pending = "Pending", oldestPendingAgeSeconds = "OldestPendingAgeSeconds"
        }
    }

    /// Whether a backend (the catalog, the object store) answered a cheap probe, and how fast.
    public struct BackendHealth: Codable, Sendable, Hashable {
        /// Whether it answered in time and without an error.
        public var healthy: Bool
        /// Milliseconds the probe took (up to the time limit when it did not answer).
        public var latencyMs: Double
        /// What went wrong, when it did not answer.
        public var error: String?

        /// Creates a description.
        public init(healthy: Bool, latencyMs: Double, error: String? = nil) {
            self.healthy = healthy
            self.latencyMs = latencyMs
            self.error = error
        }

        enum CodingKeys: String, CodingKey { case healthy = "Healthy", latencyMs = "LatencyMs", error = "Error" }
    }

    /// Space on the filesystem of the answering node's data directory.
    public struct DiskFree: Codable, Sendable, Hashable {
        /// Bytes free for the service's use.
        public var freeBytes: Int64
        /// The filesystem's size in bytes.
        public var totalBytes: Int64
        /// The bytes uploads leave free (`--min-free-bytes`): below them, uploads are refused 507 while deletes and
        /// reads go on.
        public var reserveBytes: Int64?

        /// Whether uploads are refused for want of space: less than ``reserveBytes`` is free.
        public var refusesUploads: Bool { reserveBytes.map { freeBytes < $0 } ?? false }

        /// Creates a description.
        public init(freeBytes: Int64, totalBytes: Int64, reserveBytes: Int64? = nil) {
            self.freeBytes = freeBytes
            self.totalBytes = totalBytes
            self.reserveBytes = reserveBytes
        }

        enum CodingKeys: String, CodingKey {
            case freeBytes = "FreeBytes", totalBytes = "TotalBytes", reserveBytes = "ReserveBytes"
        }
    }

    /// GetServiceStatus' answer: the service as an operator sees it from the node that answers.
    public struct ServiceStatusAnswer: Codable, Sendable, Hashable {
        /// The answering node's Ferry version.
        public var version: String
        /// The node that answered (its name, as listed in ``nodes``).
        public var node: String
        /// Every node whose heartbeat the catalog holds, by name.
        public var nodes: [ServiceNode]
        /// The media job queue; absent when the catalog did not answer.
        public var jobQueue: JobQueueStatus?
        /// Webhook events waiting; absent when the catalog did not answer.
        public var webhookBacklog: WebhookBacklogStatus?
        /// The catalog's answer to a cheap query.
        public var catalog: BackendHealth
        /// The object store's answer to a cheap probe.
        public var store: BackendHealth
        /// Space on the data directory's filesystem, for a node keeping objects there; absent with a shared store.
        public var diskFree: DiskFree?

        /// Creates an answer.
        public init(
            version: String, node: String, nodes: [ServiceNode], jobQueue: JobQueueStatus?,
            webhookBacklog: WebhookBacklogStatus?, catalog: BackendHealth, store: BackendHealth, diskFree: DiskFree?
        ) {
            self.version = version
            self.node = node
            self.nodes = nodes
            self.jobQueue = jobQueue
            self.webhookBacklog = webhookBacklog
            self.catalog = catalog
            self.store = store
            self.diskFree = diskFree
        }

        enum CodingKeys: String, CodingKey {
            case version = "Version", node = "Node", nodes = "Nodes", jobQueue = "JobQueue"
            case webhookBacklog = "WebhookBacklog", catalog = "Catalog", store = "Store", diskFree = "DiskFree"
        }
    }
}
