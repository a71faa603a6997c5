import Ferry
import FerryCore
import FerryServer
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A test server that processes videos with the real ffmpeg, and what the media tests do with it.
struct MediaHarness: Sendable {
    let server: TestServer
    let media: MediaServiceClient
    /// Where fixtures are made.
    let fixtures: String

    /// Runs `body` with a processing server (one worker, short lease and polls), optionally sending webhooks.
    static func with<T: Sendable>(
        webhook: URL? = nil, configure: @Sendable (inout FerryServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (MediaHarness) async throws -> T
    ) async throws -> T {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let fixtures = TemporaryDirectory.make("ferry-media-fixtures")
        defer { try? FileManager.default.removeItem(atPath: fixtures) }
        return try await TestServer.with(configure: { configuration in
            configuration.mediaProcessing.workers = 1
            configuration.mediaProcessing.pollInterval = .milliseconds(50)
            configuration.mediaProcessing.lease = .seconds(3)
            configuration.mediaProcessing.retryDelay = .milliseconds(200)
            if let webhook { configuration.webhook = WebhookTests.configuration(webhook) }
            configure(&configuration)
        }) { server in
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            return try await body(MediaHarness(server: server, media: media, fixtures: fixtures))
        }
    }

    /// Makes a fixture.
    func fixture(_ kind: MediaFixtures.Kind, seconds: Int = 3) async throws -> String {
        try await MediaFixtures.make(kind, seconds: seconds, in: fixtures)
    }

    /// Creates a video for a file and uploads it with the engine and the video's own upload credential.
    func upload(_ path: String, transcode: String? = nil, coverURL: String? = nil) async throws -> String {
        let url = URL(fileURLWithPath: path)
        var description = MediaServiceClient.VideoDescription(
            title: url.deletingPathExtension().lastPathComponent, fileName: url.lastPathComponent)
        description.transcode = transcode
        description.coverURL = coverURL
        let ticket = try await media.createUploadVideo(description)
        let upload = try await ticket.objectStorageClient().upload(
            file: url, bucket: ticket.address.bucket, key: ticket.address.fileName)
        _ = try await upload.result
        return ticket.id
    }

    /// Polls GetVideoInfo until the video reaches one of `statuses`; a video that reached `Normal` or `TranscodeFail`
    /// once its cover is taken too (the quick lane takes it beside the transcode, which may end first).
    func waitFor(_ videoId: String, _ statuses: Set<String>, timeout: Duration = .seconds(240)) async throws
        -> MediaServiceClient.VideoInfo
    {
        let deadline = ContinuousClock.now + timeout
        while true {
            let info = try await media.getVideoInfo(videoId: videoId)
            if statuses.contains(info.status) {
                guard ["Normal", "TranscodeFail"].contains(info.status), ContinuousClock.now < deadline else { return info }
                let jobs = try await server.server.mediaCatalog.jobs(videoId: videoId)
                if !jobs.contains(where: { $0.kind == .snapshot && [.queued, .running].contains($0.state) }) {
                    return try await media.getVideoInfo(videoId: videoId)
                }
            }
            guard ContinuousClock.now < deadline else {
                Issue.record("video \(videoId) is still \(info.status) after \(timeout)")
                return info
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The keys stored under a prefix of the media bucket.
    func keys(under prefix: String) async throws -> [String] {
        var keys: [String] = []
        var after: String?
        while true {
            let page = try await server.server.store.listObjects(
                bucket: "ferry-media", prefix: prefix, delimiter: nil, startAfter: after, maxKeys: 1000)
            keys += page.objects.map(\.key)
            guard page.isTruncated, let last = page.objects.last?.key else { return keys }
            after = last
        }
    }
}
