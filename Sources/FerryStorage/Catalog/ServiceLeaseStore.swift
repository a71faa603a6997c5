import Foundation

/// Leases that let one node at a time do what must not be done twice at once: deliver webhook events in order, collect
/// unfinished uploads. A node holds a lease until it expires unless it renews it; when the node dies, another takes the
/// lease over once it has expired.
public protocol ServiceLeaseStore: Sendable {
    /// Takes the lease `name` for `owner` until `now + duration` when it is free, expired or already `owner`'s (then
    /// renews it); true when `owner` holds it afterwards.
    func acquireLease(_ name: String, owner: String, duration: Duration, now: Date) async throws -> Bool
    /// Gives the lease up, when `owner` holds it.
    func releaseLease(_ name: String, owner: String) async throws
}
