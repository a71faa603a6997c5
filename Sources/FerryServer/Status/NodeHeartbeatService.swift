import FerryCore
import FerryStorage
import Foundation
import Logging
import ServiceLifecycle

/// Writes this node's heartbeat to the catalog every ``Configuration/interval`` until the service group shuts down,
/// and forgets nodes silent longer than ``Configuration/forgetAfter``; on a graceful shutdown the node removes its
/// own heartbeat, so only a node that stopped without one shows as stale. It does so as soon as the process says it
/// is leaving (``leaving``), not only when the group's shutdown reaches this service: that waits for the HTTP server's
/// requests, and past the shutdown's time limit the catalog's connections are gone with everything else.
///
/// Every call to the catalog has a time limit: a catalog that does not answer (a PostgreSQL pool waiting for a
/// connection) costs a missed heartbeat, never a held-up shutdown.
struct NodeHeartbeatService: Service {
    /// How often heartbeats are written and when a node counts as stale or gone.
    struct Configuration: Sendable {
        /// How often the node writes its heartbeat. Default 15 s.
        var interval: Duration = .seconds(15)
        /// A node whose heartbeat is older than this is shown as stale. Default 60 s (four missed heartbeats).
        var staleAfter: TimeInterval = 60
        /// A node whose heartbeat is older than this is forgotten. Default 24 hours.
        var forgetAfter: TimeInterval = 24 * 3600
        /// How long one heartbeat's writes may take before it counts as missed. Default 5 s.
        var writeLimit: Duration = .seconds(5)
        /// How long removing the heartbeat at shutdown may take. Default 2 s.
        var removeLimit: Duration = .seconds(2)
    }

    let store: any NodeHeartbeatStore
    /// This node, as its heartbeats describe it (``NodeHeartbeat/lastSeen`` is set at each write).
    let node: NodeHeartbeat
    let configuration: Configuration
    let logger: Logger
    let now: @Sendable () -> Date
    /// Whether the process is shutting down; looked at a few times a second.
    var leaving: @Sendable () -> Bool = { false }

    func run() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully && !leaving() {
            await beat()
            // Graceful shutdown ends the wait at once; the process's leaving within a quarter second.
            let next = ContinuousClock.now + configuration.interval
            while ContinuousClock.now < next, !leaving(), !Task.isCancelled, !Task.isShuttingDownGracefully {
                try? await cancelWhenGracefulShutdown {
                    try await Task.sleep(for: min(.milliseconds(250), next - ContinuousClock.now))
                }
            }
        }
        let (store, name, limit) = (self.store, node.name, configuration.removeLimit)
        // Also when the service was cancelled: the removal still has its time.
        let failure = await whileIgnoringCancellation {
            await withTimeLimit(limit) { () async -> String? in
                do {
                    try await store.removeHeartbeat(name)
                    return nil
                } catch {
                    return String(describing: error)
                }
            }
        }
        // Not removed, it goes stale, then is forgotten.
        warn("node heartbeat not removed", failure)
        // Removed early, the service stays until the group's shutdown reaches it (a service that ends shuts the group
        // down at once, cutting the requests that drain).
        if leaving(), !Task.isCancelled, !Task.isShuttingDownGracefully { try? await gracefulShutdown() }
    }

    /// Writes one heartbeat and forgets the nodes silent for too long.
    func beat() async {
        let time = now()
        var heartbeat = node
        heartbeat.lastSeen = time
        let (store, cutoff) = (self.store, time.addingTimeInterval(-configuration.forgetAfter))
        let failure = await withTimeLimit(configuration.writeLimit) { [heartbeat] () async -> String? in
            do {
                try await store.recordHeartbeat(heartbeat)
                try await store.pruneHeartbeats(before: cutoff)
                return nil
            } catch {
                return String(describing: error)
            }
        }
        warn("node heartbeat not written", failure)
    }

    /// Logs `message` unless `outcome` is a success: the error a call threw, or nil when it did not answer in time.
    private func warn(_ message: Logger.Message, _ outcome: String??) {
        switch outcome {
        case .some(nil): return
        case .some(let error?): logger.warning(message, metadata: ["error": .string(error)])
        case nil: logger.warning(message, metadata: ["error": "no answer in time"])
        }
    }
}
