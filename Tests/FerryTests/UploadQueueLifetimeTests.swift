import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Says when it is released.
final class Canary: Sendable {
    let released: Signals
    init(_ released: Signals) { self.released = released }
    deinit { released.signal() }
}

@Suite("Upload queue lifetime: the queue lives as long as its owner holds it", .serialized, .timeLimit(.minutes(10)))
struct UploadQueueLifetimeTests {
    static let mib = 1024 * 1024

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
            let ended = Signals()
            let sent = EventRecord<Int64>()
            let consumer = Task {
                for await event in events {
                    if case .progress(_, let bytes, _) = event { sent.append(bytes) }
                }
                ended.signal()
            }
            let item = await queue!.addFile(video, info: MediaInfo(title: "Released"))
            await queue!.start()
            #expect(await sent.wait(within: .seconds(60)) { $0.contains { $0 > Int64(10 * Self.mib) } })
            let videoId = try #require(await queue!.item(item)?.videoId)
            queue = nil
            #expect(await ended.wait(for: 1, within: .seconds(10)), "the events of a released queue never finished")
            consumer.cancel()
            await consumer.value
            // Paused (by a task the released queue left behind, so at a moment the test cannot see): nothing more
            // reaches the server. Watching for a while is what this checks.
            // First until the count stops moving (the pause may come late on a loaded machine), then for 800 ms.
            func partRequests() -> Int { proxy.log.filter { $0.query.contains("partNumber") }.count }
            var parts = partRequests()
            for _ in 0..<60 {
                try await Task.sleep(for: .milliseconds(500))
                let now = partRequests()
                if now == parts { break }
                parts = now
            }
            try await Task.sleep(for: .milliseconds(800))
            #expect(partRequests() <= parts + 1)

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
    static func slowProvider(canary: Canary, asked: Signals)
        -> @Sendable (UploadQueue.Item) async throws -> MediaServiceClient.UploadTicket
    {
        { _ in
            _ = canary
            asked.signal()
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
        let ended = Signals()
        let started = Signals()
        let consumer = Task {
            for await event in events { if case .started = event { started.signal() } }
            ended.signal()
        }
        await waiting!.addFile(video)
        await waiting!.start()
        #expect(await started.wait(for: 1, within: .seconds(10)))
        waiting = nil
        #expect(await ended.wait(for: 1, within: .seconds(10)), "a queue waiting for a credential outlived its owner")
        consumer.cancel()
        await consumer.value

        // Inside the app's credential closure.
        let released = Signals()
        let asked = Signals()
        var providing: UploadQueue? = UploadQueue(
            authorization: .uploadAuthProvider(Self.slowProvider(canary: Canary(released), asked: asked)),
            configuration: configuration)
        await providing!.addFile(video)
        await providing!.start()
        #expect(await asked.wait(for: 1, within: .seconds(10)))
        providing = nil
        #expect(await released.wait(for: 1, within: .seconds(10)), "the queue's closure outlived the queue")
    }
}
