import FerryStorage
import Foundation

/// The catalog's service leases as this node's services take them, each answer reported to the node's metrics
/// (`ferry_service_leases_held`): an operator sees which node collects, applies lifecycle rules or delivers webhooks.
struct ObservedServiceLeases: ServiceLeaseStore {
    let base: any ServiceLeaseStore
    let metrics: FerryMetrics

    func acquireLease(_ name: String, owner: String, duration: Duration, now: Date) async throws -> Bool {
        do {
            let held = try await base.acquireLease(name, owner: owner, duration: duration, now: now)
            metrics.serviceLease(name, held: held)
            return held
        } catch {
            // Unknown, and not to be relied on: the node acts as if it did not hold it.
            metrics.serviceLease(name, held: false)
            throw error
        }
    }

    func releaseLease(_ name: String, owner: String) async throws {
        try await base.releaseLease(name, owner: owner)
        metrics.serviceLease(name, held: false)
    }
}
