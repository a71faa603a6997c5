import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// Collects a short-video uploader's events.
final class ShortVideoLog: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var _events: [ShortVideoEvent] = []
    var events: [ShortVideoEvent] { lock.withLock { _events } }

    static func collect(_ uploader: ShortVideoUploader, onEvent: @escaping @Sendable (ShortVideoEvent) async -> Void = { _ in }) -> (ShortVideoLog, Task<Void, Never>) {
        let log = ShortVideoLog()
        let task = Task {
            for await event in uploader.events {
                log.lock.withLock { log._events.append(event) }
                await onEvent(event)
            }
        }
        return (log, task)
    }

    var progress: [(Int64, Int64)] {
        events.compactMap { if case .progress(let sent, let total) = $0 { (sent, total) } else { nil } }
    }
    func count(_ predicate: (ShortVideoEvent) -> Bool) -> Int { events.filter(predicate).count }
}

@Suite("ShortVideoUploader (VODUploadSVideoClient)", .timeLimit(.minutes(10)))
struct ShortVideoUploaderTests {
    static let mib = 1024 * 1024

    @Test("video + cover with an STS credential that has expired: tokenExpired → refresh, a retry, both stored, the video's cover is the image")
    func uploadsVideoAndCover() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 12 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 200_000, ext: "jpg", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.status(500, code: "InternalError"), when: .partNumber(2))
            let uploader = ShortVideoUploader(
                endpoint: URL(string: proxy.endpoint)!, configuration: UploadQueueTests.configuration(records: directory + "/records"))
            let (log, collector) = ShortVideoLog.collect(uploader) { event in
                if case .tokenExpired = event { await uploader.refresh(credentials: server.stsToken()) }
            }
            let result = try await uploader.upload(
                video: video, cover: cover, info: MediaInfo(title: "Short", tags: "game", desc: "desc", cateId: 10),
                credentials: server.stsToken(validFor: -5))
            try await proxy.shutdown()
            // The last event is delivered just before `upload` returns; give the collector a moment to see it.
            for _ in 0..<3000 where log.count({ if case .succeeded = $0 { true } else { false } }) == 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
            collector.cancel()

            #expect(log.count { if case .tokenExpired = $0 { true } else { false } } == 1)
            #expect(log.count { if case .retry = $0 { true } else { false } } == 1)
            #expect(log.count { if case .retryResumed = $0 { true } else { false } } == 1)
            #expect(log.count { if case .succeeded(let r) = $0 { r == result } else { false } } == 1)
            let total = Int64(12 * Self.mib + 200_000)
            let progress = log.progress
            #expect(progress.allSatisfy { $0.1 == total })
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.0 < $1.0 })
            #expect(progress.last?.0 == total)

            let info = try await server.media().getVideoInfo(videoId: result.videoId)
            #expect(info.status == "UploadSucc")
            #expect(info.size == Int64(12 * Self.mib))
            #expect(info.coverURL == result.imageURL)
            #expect(info.title == "Short")
            let source = try await server.media().getMezzanineInfo(videoId: result.videoId)
            #expect(Data(try await S3TestClient.fetch(source.fileURL).body) == (try Data(contentsOf: video)))
            #expect(Data(try await server.storedBytes(at: result.imageURL)) == (try Data(contentsOf: cover)))
        }
    }

    @Test("cancel stops both files and aborts their multipart uploads; pause and resume continue; a missing file is refused")
    func pauseResumeCancel() async throws {
        let directory = TemporaryDirectory.make("ferry-svideo-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let video = try makeMediaFile(size: 16 * Self.mib, ext: "mp4", in: directory)
        let cover = try makeMediaFile(size: 6 * Self.mib, ext: "png", in: directory)
        try await TestServer.with { server in
            let proxy = try await FaultProxy.start(upstream: server.endpoint)
            proxy.inject(.delay(seconds: 0.3), when: .query(contains: "partNumber"), times: .max)
            var configuration = UploadQueueTests.configuration(records: directory + "/records")
            configuration.partConcurrency = 1
            let uploader = ShortVideoUploader(endpoint: URL(string: proxy.endpoint)!, configuration: configuration)
            let (log, collector) = ShortVideoLog.collect(uploader)
            await #expect(throws: FerryError.self) {
                try await uploader.upload(
                    video: URL(fileURLWithPath: directory + "/missing.mp4"), cover: cover, info: MediaInfo(),
                    credentials: server.stsToken())
            }
            while log.count({ if case .failed = $0 { true } else { false } }) == 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(log.count { if case .failed("fileNotFound", let message) = $0 { message.contains("missing.mp4") } else { false } } == 1)
            let token = server.stsToken()
            let running = Task { try await uploader.upload(video: video, cover: cover, info: MediaInfo(title: "Cancelled"), credentials: token) }
            func sent() -> Int64 { log.progress.last?.0 ?? 0 }
            while sent() == 0 { try await Task.sleep(for: .milliseconds(10)) }
            await uploader.pause()
            // Events emitted before the pause took hold may still be on their way to the log (a busy machine delays
            // the collector).
            try await Task.sleep(for: .seconds(1))
            let paused = sent()
            try await Task.sleep(for: .milliseconds(400))
            #expect(sent() == paused, "nothing is sent while paused")
            #expect(await uploader.resume())
            while sent() <= paused { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await uploader.cancel())
            await #expect(throws: FerryError.self) { try await running.value }
            collector.cancel()
            try await proxy.shutdown()
            #expect(try await server.engine().listMultipartUploads(bucket: "ferry-media").isEmpty)
            #expect(await uploader.cancel() == false)
        }
    }
}
