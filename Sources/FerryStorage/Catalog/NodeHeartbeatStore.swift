import Foundation

/// A node of the service as its last heartbeat recorded it.
public struct NodeHeartbeat: Sendable, Hashable {
    /// The node's name, unique per process (host, process id and a random suffix).
    public var name: String
    /// What the node does: `all`, `api` or `worker`.
    public var role: String
    /// The Ferry version it runs.
    public var version: String
    /// When the node started.
    public var startedAt: Date
    /// When it last wrote its heartbeat.
    public var lastSeen: Date

    /// Creates a heartbeat.
    public init(name: String, role: String, version: String, startedAt: Date, lastSeen: Date) {
        self.name = name
        self.role = role
        self.version = version
        self.startedAt = startedAt
        self.lastSeen = lastSeen
    }
}

/// Where the nodes sharing a catalog record that they are alive, so an operator sees every node from any one of them:
/// the catalog (SQLite for a node on its own; PostgreSQL when several share one).
///
/// Each node writes its heartbeat periodically; a node whose heartbeat is old is shown as stale, and one silent for
/// long is forgotten (``pruneHeartbeats(before:)``). A node that shuts down cleanly removes its own.
public protocol NodeHeartbeatStore: Sendable {
    /// Records `heartbeat`, replacing the node's previous one.
    func recordHeartbeat(_ heartbeat: NodeHeartbeat) async throws
    /// Every node's last heartbeat, by name.
    func nodeHeartbeats() async throws -> [NodeHeartbeat]
    /// Forgets the nodes last seen before `date`; returns how many.
    @discardableResult
    func pruneHeartbeats(before date: Date) async throws -> Int
    /// Forgets the node `name` (it shut down).
    func removeHeartbeat(_ name: String) async throws
}
