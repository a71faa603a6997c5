import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import FerryServer
@testable import FerryStorage

/// Per-video downloads (`Downloads`): which progressive files GetPlayInfo lists and the playback addresses serve.
@Suite("Downloads: all, none, capped-1080p, audio-only, per video")
struct DownloadPolicyTests {
    @Test("the text of a download policy: canonical order, unknown items and mixtures refused")
    func parsing() {
        #expect(DownloadPolicy.parse("all") == .all && DownloadPolicy.parse("none") == DownloadPolicy.none)
        #expect(DownloadPolicy.parse("capped-1080p") == .capped1080p && DownloadPolicy.parse("audio-only") == .audioOnly)
        #expect(DownloadPolicy.parse("capped-1080p,audio-only") == .capped1080pAndAudio)
        #expect(DownloadPolicy.parse("audio-only, capped-1080p") == .capped1080pAndAudio)
        for bad in ["", "standard", "all,none", "none,audio-only", "capped-1080p,", "capped-720p", "ALL"] {
            #expect(DownloadPolicy.parse(bad) == nil, "\(bad)")
        }
    }

    /// A public video made `Normal` with these renditions (no transcode: the catalog holds them as a transcode
    /// would publish them), and its SQ.m4a and FHD.mp4 stored.
    static let renditions = [
        ("LD", "mp4", 640, 360), ("HD", "mp4", 1280, 720), ("FHD", "mp4", 1920, 1080), ("UHD", "mp4", 3840, 2160),
        ("LD", "m3u8", 640, 360), ("AUTO", "m3u8", 3840, 2160),
    ].map { definition, format, width, height in
        Rendition(
            definition: definition, format: format, path: format == "mp4" ? "\(definition).mp4" : definition == "AUTO" ? "master.m3u8" : "LD/index.m3u8",
            width: width, height: height, bitrate: 1000, duration: 3, fps: 30, size: 100, videoCodec: "h264",
            audioCodec: nil)
    } + [
        Rendition(
            definition: "SQ", format: "m4a", path: "SQ.m4a", width: nil, height: nil, bitrate: 128_000, duration: 3, fps: nil,
            size: 100, videoCodec: nil, audioCodec: "aac")
    ]

    @Test("GetPlayInfo lists, and playback serves, only the progressive files a video's Downloads offers; bad values change nothing", arguments: QuotaBackend.allCases)
    func downloads(backend: QuotaBackend) async throws {
        try await backend.withNodes { servers in
            let server = servers[0]
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            var description = MediaServiceClient.VideoDescription(title: "Downloads", fileName: "d.mp4")
            description.playbackPolicy = .public
            description.downloads = .capped1080p
            let videoId = try await media.createUploadVideo(description).id
            #expect(try await media.getVideoInfo(videoId: videoId).downloads == .capped1080p)

            // A video that names none offers every file.
            let other = try await media.createUploadVideo(.init(title: "Default", fileName: "e.mp4")).id
            #expect(try await media.getVideoInfo(videoId: other).downloads == .all)

            let prefix = "video/\(videoId)/out/job"
            let saved = try await server.server.mediaCatalog.updateVideo(videoId) { video in
                video.status = VideoStatus.normal
                video.size = 100
                video.outputPrefix = prefix
                video.renditions = Self.renditions
                return .save()
            }
            #expect(saved != nil)
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: server.root)
            for file in ["SQ.m4a", "FHD.mp4", "UHD.mp4"] {
                #expect(try await s3.put("ferry-media", prefix + "/" + file, Array(file.utf8)).status == 200)
            }
            func listed() async throws -> Set<String> {
                Set(try await media.getPlayInfo(videoId: videoId).streams.map { "\($0.definition)/\($0.format)" })
            }
            func fetch(_ file: String) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetch(server.endpoint + "/_ferry/play/\(videoId)/" + file)
            }
            let streams: Set<String> = ["LD/m3u8", "AUTO/m3u8"]

            // capped-1080p: the highest MP4 at most 1080p (FHD, not UHD), and no sound file.
            #expect(try await listed() == streams.union(["FHD/mp4"]))
            #expect(try await fetch("FHD.mp4").body == Array("FHD.mp4".utf8))
            let refused = try await fetch("UHD.mp4")
            #expect(refused.status == 403 && refused.text.contains("<Code>AccessDenied</Code>") && refused.text.contains("download"))
            #expect(try await fetch("SQ.m4a").status == 403)

            try await media.setDownloads(.audioOnly, videoId: videoId)
            #expect(try await media.getVideoInfo(videoId: videoId).downloads == .audioOnly)
            #expect(try await listed() == streams.union(["SQ/m4a"]))
            #expect(try await fetch("SQ.m4a").body == Array("SQ.m4a".utf8))
            #expect(try await fetch("FHD.mp4").status == 403)

            try await media.setDownloads(.capped1080pAndAudio, videoId: videoId)
            #expect(try await listed() == streams.union(["FHD/mp4", "SQ/m4a"]))

            try await media.setDownloads(.none, videoId: videoId)
            #expect(try await listed() == streams)
            #expect(try await fetch("SQ.m4a").status == 403)
            // The streams are not affected.
            #expect(try await fetch("master.m3u8").status != 403)

            // A bad value is refused and changes nothing.
            for bad in ["standard", "all,none", ""] {
                await #expect(throws: FerryError.self) {
                    try await media.setDownloads(DownloadPolicy(rawValue: bad), videoId: videoId)
                }
                var bogus = MediaServiceClient.VideoDescription(title: "Bad", fileName: "b.mp4")
                bogus.downloads = DownloadPolicy(rawValue: bad)
                await #expect(throws: FerryError.self) { try await media.createUploadVideo(bogus) }
            }
            #expect(try await media.getVideoInfo(videoId: videoId).downloads == DownloadPolicy.none)

            try await media.setDownloads(.all, videoId: videoId)
            #expect(try await listed() == streams.union(["LD/mp4", "HD/mp4", "FHD/mp4", "UHD/mp4", "SQ/m4a"]))
            #expect(try await fetch("UHD.mp4").body == Array("UHD.mp4".utf8))
        }
    }
}
