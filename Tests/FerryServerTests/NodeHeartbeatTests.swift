import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

extension JobQueueImplementation {
    /// A fresh, empty catalog of this implementation as a heartbeat store (with its job queue and webhook store, which
    /// the status report reads too); `body` runs with it.
    func withHeartbeats<T>(_ body: (any NodeHeartbeatStore & JobQueue & WebhookStore) async throws -> T) async throws -> T {
        try await with { catalog in
            try await body(try #require(catalog as? any NodeHeartbeatStore & JobQueue & WebhookStore))
        }
    }
}

@Suite("Node heartbeats: recorded, listed, replaced, pruned, removed (every catalog implementation)", .timeLimit(.minutes(10)))
struct NodeHeartbeatTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func heartbeat(_ name: String, role: String = "all", seen seconds: Double = 0) -> NodeHeartbeat {
        NodeHeartbeat(
            name: name, role: role, version: "9.8.7", startedAt: t0.addingTimeInterval(-100),
            lastSeen: t0.addingTimeInterval(seconds))
    }

    @Test("a heartbeat is listed as written, nodes by name; a node's next heartbeat replaces its last", arguments: JobQueueImplementation.allCases)
    func recordAndReplace(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withHeartbeats { store in
            #expect(try await store.nodeHeartbeats().isEmpty)
            try await store.recordHeartbeat(heartbeat("node-b", role: "worker"))
            try await store.recordHeartbeat(heartbeat("node-a", role: "api", seen: 5))
            #expect(try await store.nodeHeartbeats() == [heartbeat("node-a", role: "api", seen: 5), heartbeat("node-b", role: "worker")])
            var next = heartbeat("node-b", role: "worker", seen: 15)
            next.version = "9.8.8"
            try await store.recordHeartbeat(next)
            let listed = try await store.nodeHeartbeats()
            #expect(listed.count == 2)
            #expect(listed.last == next)
        }
    }

    @Test("nodes last seen before the cutoff are pruned and counted; removing a node leaves the others", arguments: JobQueueImplementation.allCases)
    func pruneAndRemove(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withHeartbeats { store in
            for (name, seen) in [("old-1", -90_000.0), ("old-2", -86_401.0), ("fresh-1", -10.0), ("fresh-2", 0.0)] {
                try await store.recordHeartbeat(heartbeat(name, seen: seen))
            }
            #expect(try await store.pruneHeartbeats(before: t0.addingTimeInterval(-86_400)) == 2)
            #expect(try await store.nodeHeartbeats().map(\.name) == ["fresh-1", "fresh-2"])
            #expect(try await store.pruneHeartbeats(before: t0.addingTimeInterval(-86_400)) == 0)
            try await store.removeHeartbeat("fresh-1")
            try await store.removeHeartbeat("never-seen")
            #expect(try await store.nodeHeartbeats().map(\.name) == ["fresh-2"])
        }
    }

    @Test("a beat writes this node's heartbeat at the clock's time and forgets nodes silent for a day", arguments: JobQueueImplementation.allCases)
    func serviceBeat(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withHeartbeats { store in
            try await store.recordHeartbeat(heartbeat("gone", seen: -86_500))
            try await store.recordHeartbeat(heartbeat("quiet", seen: -3_600))
            let clock = ManualTime(t0)
            let service = NodeHeartbeatService(
                store: store, node: heartbeat("me", role: "worker", seen: -100), configuration: .init(),
                logger: Logger(label: "test"), now: clock.now)
            await service.beat()
            #expect(try await store.nodeHeartbeats() == [heartbeat("me", role: "worker"), heartbeat("quiet", seen: -3_600)])
            clock.advance(by: 15)
            await service.beat()
            #expect(try await store.nodeHeartbeats().first?.lastSeen == t0.addingTimeInterval(15))
        }
    }

    @Test("a heartbeat service that is cancelled (not shut down gracefully) still removes its node's heartbeat", arguments: JobQueueImplementation.allCases)
    func cancelledServiceRemovesItsHeartbeat(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withHeartbeats { store in
            let service = NodeHeartbeatService(
                store: store, node: heartbeat("me"), configuration: .init(), logger: Logger(label: "test"),
                now: { Date() })
            let running = Task { await service.run() }
            while try await store.nodeHeartbeats().isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            running.cancel()
            await running.value
            #expect(try await store.nodeHeartbeats().isEmpty)
        }
    }

    @Test("the status lists a node stale once its heartbeat is older than a minute, and the answering node even before its first heartbeat", arguments: JobQueueImplementation.allCases)
    func staleness(_ implementation: JobQueueImplementation) async throws {
        let directory = TemporaryDirectory.make("ferry-status-probe")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let files = try SQLiteCatalog(path: directory + "/objects.sqlite")
        let objects = try CatalogObjectStore(directory: directory + "/objects", catalog: files, logger: Logger(label: "test"))
        try await implementation.withHeartbeats { store in
            try await store.recordHeartbeat(heartbeat("node-a", seen: -60))
            try await store.recordHeartbeat(heartbeat("node-b", seen: -61))
            var probe = ServiceStatusProbe(
                catalog: store, store: objects, dataDirectory: directory, reserveBytes: 1 << 20,
                node: heartbeat("node-c", seen: -500),
                staleAfter: 60, logger: Logger(label: "test"), now: { [t0] in t0 })
            // Not the two seconds of a status: a loaded machine's catalog may take longer, and is healthy.
            probe.timeLimit = .seconds(60)
            let status = await probe.report()
            #expect(status.nodes.map(\.name) == ["node-a", "node-b", "node-c"])
            #expect(status.nodes.map(\.stale) == [false, true, false])
            #expect(status.nodes.last?.lastSeen == t0.formatted(.iso8601))
            #expect(status.catalog.healthy && status.store.healthy)
            #expect(status.jobQueue == MediaContract.JobQueueStatus(queued: 0, running: 0, failed: 0))
            #expect(status.webhookBacklog == MediaContract.WebhookBacklogStatus(pending: 0))
            let disk = try #require(status.diskFree)
            #expect(disk.totalBytes > 0 && (0...disk.totalBytes).contains(disk.freeBytes))
            #expect(await probe.freshNodeCount() == 2)
        }
    }
}

/// A catalog that never answers: every call waits until it is cancelled.
struct SilentHeartbeatStore: NodeHeartbeatStore {
    func recordHeartbeat(_ heartbeat: NodeHeartbeat) async throws { try await Task.sleep(for: .seconds(3600)) }
    func nodeHeartbeats() async throws -> [NodeHeartbeat] {
        try await Task.sleep(for: .seconds(3600))
        return []
    }
    func pruneHeartbeats(before date: Date) async throws -> Int {
        try await Task.sleep(for: .seconds(3600))
        return 0
    }
    func removeHeartbeat(_ name: String) async throws { try await Task.sleep(for: .seconds(3600)) }
}

@Suite("Node heartbeats against a catalog that does not answer", .timeLimit(.minutes(1)))
struct SilentCatalogHeartbeatTests {
    @Test("a heartbeat the catalog does not take counts as missed, and a graceful shutdown does not wait for the catalog")
    func silentCatalogDoesNotHoldUpShutdown() async throws {
        var configuration = NodeHeartbeatService.Configuration()
        configuration.writeLimit = .milliseconds(200)
        configuration.removeLimit = .milliseconds(200)
        let service = NodeHeartbeatService(
            store: SilentHeartbeatStore(),
            node: NodeHeartbeat(name: "n", role: "all", version: "1", startedAt: Date(), lastSeen: Date()),
            configuration: configuration, logger: Logger(label: "test"), now: { Date() })
        // The catalog would answer after an hour: a beat and a shutdown that end well within a minute did not wait for
        // it (they give up after 0.2 s; the rest of the bound is room for a machine busy with other tests).
        let beat = ContinuousClock.now
        await service.beat()
        #expect(ContinuousClock.now - beat < .seconds(30))

        let group = ServiceGroup(
            configuration: .init(services: [service], gracefulShutdownSignals: [], logger: Logger(label: "test")))
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await Task.sleep(for: .milliseconds(300))
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(ContinuousClock.now - started < .seconds(30))
    }
}
