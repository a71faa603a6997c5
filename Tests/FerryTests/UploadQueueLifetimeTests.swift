import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Says when it is released.
final class Canary: Sendable {
    let released: Flag
    init(_ released: Flag) { self.released = released }
    deinit { released.set() }
}

@Suite("Upload queue lifetime: the queue lives as long as its owner holds it", .serialized, .timeLimit(.minutes(10)))
struct UploadQueueLifetimeTests {
    static let mib = 1024 * 1024

    /// Waits until `condition` holds; false when `timeout` passes first.
    static func eventually(_ timeout: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while await !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    @Test("released mid-upload, the queue finishes its events and pauses the upload; the same file in a new queue continues it")
    func releasedMidUpload() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-released")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 31 * Self.mib, ext: "mp4", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.2), when: .query(contains: "partNumber"), times: .max)
            var configuration = UploadQueueTests.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let endpoint = URL(string: proxy.endpoint)!
            var queue: UploadQueue? = UploadQueue(
                authorization: .sts(endpoint: endpoint, credentials: server.stsToken()), configuration: configuration)
            let events = queue!.events
            let ended = Flag()
            let sent = LatestBytes()
            let consumer = Task {
                for await event in events {
                    if case .progress(_, let bytes, _) = event { sent.set(bytes) }
                }
                ended.set()
            }
            let item = await queue!.addFile(video, info: MediaInfo(title: "Released"))
            await queue!.start()
            #expect(await Self.eventually(.seconds(60)) { sent.value > Int64(10 * Self.mib) })
            let videoId = try #require(await queue!.item(item)?.videoId)
            queue = nil
            #expect(await Self.eventually { ended.value }, "the events of a released queue never finished")
            consumer.cancel()
            await consumer.value
            // Paused: nothing more reaches the server.
            let parts = proxy.log.filter { $0.query.contains("partNumber") }.count
            try await Task.sleep(for: .milliseconds(800))
            #expect(proxy.log.filter { $0.query.contains("partNumber") }.count <= parts + 1)

            let second = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: server.stsToken()), configuration: configuration)
            let (log, collector) = QueueLog.collect(second)
            await second.addFile(video, info: MediaInfo(title: "Released"))
            await second.start()
            try await log.wait("the video", until: { _ in log.finished().count == 1 })
            collector.cancel()
            try await proxy.shutdown()
            let result = try #require(log.finished().first?.1)
            #expect(result.videoId == videoId)
            #expect(result.upload.partsResumed >= 2)
        }
    }

    /// An app's credential closure that takes a minute and owns `canary` (nothing else holds it).
    static func slowProvider(canary: Canary, asked: Flag)
        -> @Sendable (UploadQueue.Item) async throws -> MediaServiceClient.UploadTicket
    {
        { _ in
            _ = canary
            asked.set()
            try await Task.sleep(for: .seconds(60))
            throw CancellationError()
        }
    }

    @Test("released while a file waits for its upload credential, the queue ends; the closure it was given is let go")
    func releasedWhileWaiting() async throws {
        let directory = TemporaryDirectory.make("ferry-queue-waiting")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 1024, ext: "mp4", in: directory)
        let configuration = UploadQueueTests.configuration(records: directory + "/records")

        // Waiting for setUploadAuth.
        var waiting: UploadQueue? = UploadQueue(authorization: .uploadAuth, configuration: configuration)
        let events = waiting!.events
        let ended = Flag()
        let started = Flag()
        let consumer = Task {
            for await event in events { if case .started = event { started.set() } }
            ended.set()
        }
        await waiting!.addFile(video)
        await waiting!.start()
        #expect(await Self.eventually { started.value })
        waiting = nil
        #expect(await Self.eventually { ended.value }, "a queue waiting for a credential outlived its owner")
        consumer.cancel()
        await consumer.value

        // Inside the app's credential closure.
        let released = Flag()
        let asked = Flag()
        var providing: UploadQueue? = UploadQueue(
            authorization: .uploadAuthProvider(Self.slowProvider(canary: Canary(released), asked: asked)),
            configuration: configuration)
        await providing!.addFile(video)
        await providing!.start()
        #expect(await Self.eventually { asked.value })
        providing = nil
        #expect(await Self.eventually { released.value }, "the queue's closure outlived the queue")
    }
}

/// The last byte count a task saw.
final class LatestBytes: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var bytes: Int64 = 0
    var value: Int64 { lock.withLock { bytes } }
    func set(_ value: Int64) { lock.withLock { bytes = value } }
}
