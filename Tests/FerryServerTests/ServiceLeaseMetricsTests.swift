@testable import FerryServer
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Each node's metrics say which service leases of the shared catalog it holds.
@Suite("Service leases in the metrics: the node that holds a lease reports 1, the others 0", .timeLimit(.minutes(1)))
struct ServiceLeaseMetricsTests {
    @Test("two nodes on one catalog: the holder reports 1 and the other 0; after a release the other takes it over")
    func leasesHeldPerNode() async throws {
        let directory = TemporaryDirectory.make("ferry-lease-metrics")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let catalog = try SQLiteCatalog(path: directory + "/catalog.sqlite")
        let (first, second) = (FerryMetrics(), FerryMetrics())
        let (one, two) = (
            ObservedServiceLeases(base: catalog, metrics: first), ObservedServiceLeases(base: catalog, metrics: second)
        )
        func held(_ metrics: FerryMetrics) -> Double? {
            PrometheusText.sample(metrics.render(), "ferry_service_leases_held", ["lease": "collector"])
        }
        let now = Date()
        #expect(try await one.acquireLease("collector", owner: "node-1", duration: .seconds(60), now: now))
        #expect(try await !two.acquireLease("collector", owner: "node-2", duration: .seconds(60), now: now))
        #expect(held(first) == 1 && held(second) == 0)

        try await one.releaseLease("collector", owner: "node-1")
        #expect(try await two.acquireLease("collector", owner: "node-2", duration: .seconds(60), now: now))
        #expect(held(first) == 0 && held(second) == 1)
        // Other leases are series of their own.
        #expect(PrometheusText.sample(first.render(), "ferry_service_leases_held", ["lease": "webhook-delivery"]) == nil)
    }
}
