import FerryCore
import FerryStorage
import Foundation
import Logging
import ServiceLifecycle

/// Writes this node's heartbeat to the catalog every ``Configuration/interval`` until the service group shuts down,
/// and forgets nodes silent longer than ``Configuration/forgetAfter``; on a graceful shutdown the node removes its
/// own heartbeat, so only a node that stopped without one shows as stale.
struct NodeHeartbeatService: Service {
    /// How often heartbeats are written and when a node counts as stale or gone.
    struct Configuration: Sendable {
        /// How often the node writes its heartbeat. Default 15 s.
        var interval: Duration = .seconds(15)
        /// A node whose heartbeat is older than this is shown as stale. Default 60 s (four missed heartbeats).
        var staleAfter: TimeInterval = 60
        /// A node whose heartbeat is older than this is forgotten. Default 24 hours.
        var forgetAfter: TimeInterval = 24 * 3600
    }

    let store: any NodeHeartbeatStore
    /// This node, as its heartbeats describe it (``NodeHeartbeat/lastSeen`` is set at each write).
    let node: NodeHeartbeat
    let configuration: Configuration
    let logger: Logger
    let now: @Sendable () -> Date

    func run() async {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await beat()
            // Graceful shutdown ends the wait at once.
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: configuration.interval) }
        }
        do {
            try await store.removeHeartbeat(node.name)
        } catch {
            // It goes stale, then is forgotten.
            logger.warning("node heartbeat not removed", metadata: ["error": .string(String(describing: error))])
        }
    }

    /// Writes one heartbeat and forgets the nodes silent for too long.
    func beat() async {
        let time = now()
        var heartbeat = node
        heartbeat.lastSeen = time
        do {
            try await store.recordHeartbeat(heartbeat)
            try await store.pruneHeartbeats(before: time.addingTimeInterval(-configuration.forgetAfter))
        } catch {
            logger.warning("node heartbeat not written", metadata: ["error": .string(String(describing: error))])
        }
    }
}
