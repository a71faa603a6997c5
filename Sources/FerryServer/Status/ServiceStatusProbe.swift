import FerryCore
import FerryStorage
import Foundation
import Logging

/// Gathers the service's status as an operator sees it from this node: the nodes whose heartbeats the catalog holds,
/// the media job queue, the webhook backlog, whether the catalog and the object store answer (and how fast), and the
/// space left where this node keeps objects. Each backend gets ``timeLimit`` to answer, so a report never hangs on
/// one that does not.
struct ServiceStatusProbe: Sendable {
    /// The catalog of heartbeats, jobs and webhook events.
    let catalog: any JobQueue & WebhookStore & NodeHeartbeatStore
    /// The object store.
    let store: CatalogObjectStore
    /// The data directory when this node keeps objects in it (the embedded default); nil with a shared store.
    let dataDirectory: String?
    /// The bytes uploads leave free on the data directory's disk (`--min-free-bytes`).
    let reserveBytes: Int64
    /// This node as its heartbeats describe it.
    let node: NodeHeartbeat
    /// A heartbeat older than this is stale.
    let staleAfter: TimeInterval
    let logger: Logger
    let now: @Sendable () -> Date
    /// How long each backend has to answer.
    var timeLimit: Duration = .seconds(2)
    /// How long writes to this node's SQLite catalog have waited for a lock another process holds; nil when none
    /// waits.
    var lockWait: @Sendable () -> Duration? = { nil }

    /// The status answer.
    func report() async -> MediaContract.ServiceStatusAnswer {
        async let storeHealth = probeStore()
        async let pending = backlogs()
        let (catalogHealth, heartbeats) = await probeCatalog()
        let (jobs, webhooks) = await pending
        let time = now()
        return MediaContract.ServiceStatusAnswer(
            version: FerryCoreVersion.string, node: node.name,
            nodes: nodes(heartbeats ?? [], at: time).map { heartbeat in
                MediaContract.ServiceNode(
                    name: heartbeat.name, role: heartbeat.role, version: heartbeat.version,
                    startedAt: heartbeat.startedAt.formatted(.iso8601), lastSeen: heartbeat.lastSeen.formatted(.iso8601),
                    stale: isStale(heartbeat, at: time))
            },
            jobQueue: jobs.map { jobs in
                MediaContract.JobQueueStatus(
                    queued: jobs.queued, scheduled: jobs.scheduled, running: jobs.running, failed: jobs.failed,
                    oldestQueuedAgeSeconds: jobs.oldestDue.map { max(0, time.timeIntervalSince($0)) })
            },
            webhookBacklog: webhooks.map { webhooks in
                MediaContract.WebhookBacklogStatus(
                    pending: webhooks.pending,
                    oldestPendingAgeSeconds: webhooks.oldestCreatedAt.map { max(0, time.timeIntervalSince($0)) })
            },
            catalog: catalogHealth, store: await storeHealth,
            diskFree: dataDirectory.flatMap(Self.diskFree(at:)).map { disk in
                var disk = disk
                disk.reserveBytes = reserveBytes
                return disk
            })
    }

    /// The nodes whose heartbeats are fresh, nil when the catalog did not answer in time (for the metrics).
    func freshNodeCount() async -> Int? {
        guard let heartbeats = await probeCatalog().heartbeats else { return nil }
        let time = now()
        return nodes(heartbeats, at: time).filter { !isStale($0, at: time) }.count
    }

    /// The heartbeats with this node among them: the node answering is alive even before its first heartbeat is
    /// written.
    func nodes(_ heartbeats: [NodeHeartbeat], at time: Date) -> [NodeHeartbeat] {
        guard !heartbeats.contains(where: { $0.name == node.name }) else { return heartbeats }
        var current = node
        current.lastSeen = time
        return (heartbeats + [current]).sorted { $0.name < $1.name }
    }

    func isStale(_ heartbeat: NodeHeartbeat, at time: Date) -> Bool {
        time.timeIntervalSince(heartbeat.lastSeen) > staleAfter
    }

    /// The catalog's health from reading the heartbeats (a small table), and the heartbeats when it answered.
    func probeCatalog() async -> (health: MediaContract.BackendHealth, heartbeats: [NodeHeartbeat]?) {
        let catalog = self.catalog
        let (result, milliseconds) = await timed { try await catalog.nodeHeartbeats() }
        let waited = lockWait() ?? .zero
        switch result {
        case .success(let heartbeats)? where waited >= FerryServer.lockedCatalogWait:
            let waited = waited.components.seconds
            let error = "Writes have waited \(waited) s for a lock another process holds on the catalog (reads answer)."
            return (MediaContract.BackendHealth(healthy: false, latencyMs: milliseconds, error: error), heartbeats)
        case .success(let heartbeats)?:
            return (MediaContract.BackendHealth(healthy: true, latencyMs: milliseconds), heartbeats)
        case .failure(let error)?:
            logger.warning("status: catalog query failed", metadata: ["error": .string(String(describing: error))])
            return (MediaContract.BackendHealth(healthy: false, latencyMs: milliseconds, error: "The catalog's query failed."), nil)
        case nil:
            return (MediaContract.BackendHealth(healthy: false, latencyMs: milliseconds, error: timeoutMessage("catalog")), nil)
        }
    }

    /// The object store's health from its probe (the blob directory is writable, or the bucket answers HEAD).
    func probeStore() async -> MediaContract.BackendHealth {
        let store = self.store
        let (result, milliseconds) = await timed { try await store.probeBlobStorage() }
        switch result {
        case .success?:
            return MediaContract.BackendHealth(healthy: true, latencyMs: milliseconds)
        case .failure(let error)?:
            logger.warning("status: object store probe failed", metadata: ["error": .string(String(describing: error))])
            // Store errors name the operation and status only, never a credential.
            return MediaContract.BackendHealth(healthy: false, latencyMs: milliseconds, error: String(describing: error))
        case nil:
            return MediaContract.BackendHealth(healthy: false, latencyMs: milliseconds, error: timeoutMessage("object store"))
        }
    }

    /// The job queue and the webhook backlog; each nil when the catalog did not answer for it in time.
    func backlogs() async -> (jobs: JobBacklog?, webhooks: WebhookBacklog?) {
        let catalog = self.catalog
        let time = now()
        async let jobs = timed { try await catalog.backlog(now: time) }
        async let webhooks = timed { try await catalog.webhookBacklog() }
        return (try? await jobs.0?.get(), try? await webhooks.0?.get())
    }

    private func timeoutMessage(_ what: String) -> String {
        "The \(what) did not answer within \(Int(timeLimit.timeInterval.rounded(.up))) s."
    }

    /// Runs `body` within ``timeLimit``: its result (nil when it took longer) and the milliseconds it took.
    private func timed<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async
        -> (Result<T, any Error>?, Double)
    {
        let start = ContinuousClock.now
        let result = await withTimeLimit(timeLimit) { () async -> Result<T, any Error> in
            do { return .success(try await body()) } catch { return .failure(error) }
        }
        let elapsed = ContinuousClock.now - start
        return (result, (elapsed.timeInterval * 1000 * 1000).rounded() / 1000)
    }

    /// Bytes free and in total on the filesystem holding `path`; nil when it cannot be read.
    static func diskFree(at path: String) -> MediaContract.DiskFree? {
        DiskSpace.of(path).map { MediaContract.DiskFree(freeBytes: $0.free, totalBytes: $0.total) }
    }
}
