import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import FerryServer

@Suite("Video pictures: thumbnails and animations on demand, the storyboard", .serialized, .timeLimit(.minutes(10)))
struct MediaPreviewTests {
    @Test("a storyboard's sprite holds its grid of tiles, also for a video of one frame (shorter than its one second)")
    func storyboardSprites() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let directory = TemporaryDirectory.make("ferry-storyboard")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (seconds, tiles) in [(0.04, 1), (3.0, 3), (12.5, 13)] {
            let source = directory + "/source-\(seconds).mp4"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25:duration=\(seconds)", "-c:v", "libx264", "-pix_fmt",
                "yuv420p", source,
            ])
            let plan = try #require(StoryboardPlan(duration: seconds))
            #expect(plan.count == tiles)
            let sprite = directory + "/sprite-\(seconds).jpg"
            let run = try await MediaFixtures.tool("ffmpeg", plan.arguments(input: source, output: sprite))
            #expect(run.status == 0, "\(seconds) s: \(run.errorOutput)")
            let probed = try await MediaFixtures.probe(sprite)
            #expect(probed.width == StoryboardPlan.tileWidth * plan.columns && probed.height == 90 * plan.rows, "\(seconds) s")
        }
    }

    /// ffmpeg's PSNR (average, dB) between two pictures of the same size; infinity when they are identical.
    static func psnr(_ first: String, _ second: String) async throws -> Double {
        let run = try await MediaFixtures.tool(
            "ffmpeg", ["-hide_banner", "-nostdin", "-i", first, "-i", second, "-lavfi", "psnr", "-f", "null", "-"])
        let text = run.errorOutput
        guard let range = text.range(of: "average:") else {
            Issue.record("no PSNR in ffmpeg's output: \(text.suffix(500))")
            return 0
        }
        let value = text[range.upperBound...].prefix { !$0.isWhitespace }
        return value == "inf" ? .infinity : Double(value) ?? 0
    }

    /// The frame at `time` of `source`, as ffmpeg itself extracts it, scaled like the thumbnail asked for.
    static func referenceFrame(_ source: String, time: Double, width: Int, height: Int, to path: String) async throws {
        try await MediaFixtures.ffmpeg([
            "-ss", String(format: "%.3f", time), "-i", source, "-frames:v", "1", "-vf", "scale=\(width):\(height)", path,
        ])
    }

    /// The playback URL of `file` (with its own query) beside the storyboard (the video's playback prefix), with
    /// `token`.
    static func url(_ storyboard: String, _ file: String, token: String) -> String {
        let base = String(storyboard[..<(storyboard.range(of: "storyboard.vtt")?.lowerBound ?? storyboard.endIndex)])
        return base + file + (file.contains("?") ? "&" : "?") + "token=" + token
    }

    /// A token of the server's own key that opens every file of `videoId` (what GetPlayInfo and the cover carry,
    /// each for its own audience).
    static func token(_ harness: MediaHarness, _ videoId: String) async throws -> String {
        try await PlaybackToken.mint(
            videoId: videoId, audiences: PlaybackToken.Audience.allCases, expiration: Date().addingTimeInterval(600),
            issuer: harness.server.root.accessKeyId, codec: harness.server.server.credentials.tokens)
    }

    /// Writes a fetched picture to a file and returns its path.
    static func save(_ reply: S3TestClient.Reply, _ path: String) throws -> String {
        try Data(reply.body).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("thumbnails match the frame at their time (PSNR against ffmpeg's own frame), in each format and fit; a second request comes from the store; bad parameters are 400")
    func thumbnails() async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(.landscape480, seconds: 12)
            let videoId = try await harness.upload(source)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let storyboard = try #require(play.storyboardURL)
            let token = try await Self.token(harness, videoId)
            let directory = harness.fixtures

            // Frames at several times, in three segments of the HLS rendition: each matches ffmpeg's frame of the
            // source at that time far better than a frame a second away.
            for time in [0.0, 1.5, 5.2, 9.9] {
                let reply = try await S3TestClient.fetch(
                    Self.url(storyboard, "thumbnail.png?time=\(time)&width=854&height=480", token: token))
                #expect(reply.status == 200, "\(reply.text)")
                #expect(reply.headers.first(name: "content-type") == "image/png")
                let picture = try Self.save(reply, directory + "/thumb-\(time).png")
                let reference = directory + "/ref-\(time).png"
                try await Self.referenceFrame(source, time: time, width: 854, height: 480, to: reference)
                let other = directory + "/other-\(time).png"
                try await Self.referenceFrame(source, time: time < 9 ? time + 1 : time - 1, width: 854, height: 480, to: other)
                let matching = try await Self.psnr(picture, reference)
                let elsewhere = try await Self.psnr(picture, other)
                #expect(matching > 25, "thumbnail at \(time) s: PSNR \(matching) dB")
                #expect(matching > elsewhere + 3, "thumbnail at \(time) s: \(matching) dB, a second away \(elsewhere) dB")
            }

            // Formats and fits.
            let cases: [(query: String, file: String, codec: String, width: Int, height: Int)] = [
                ("time=2", "thumbnail.jpg", "mjpeg", 854, 480),
                ("time=2&width=320", "thumbnail.webp", "webp", 320, 180),
                ("time=2&height=90", "thumbnail.jpg", "mjpeg", 160, 90),
                ("time=2&width=200&height=200&fit_mode=preserve", "thumbnail.png", "png", 200, 112),
                ("time=2&width=200&height=200&fit_mode=crop", "thumbnail.png", "png", 200, 200),
                ("time=2&width=200&height=200&fit_mode=pad", "thumbnail.png", "png", 200, 200),
                ("time=2&width=200&height=200&fit_mode=stretch", "thumbnail.png", "png", 200, 200),
                // Odd sides are kept exactly in every format.
                ("time=2&width=17&height=17&fit_mode=crop", "thumbnail.jpg", "mjpeg", 17, 17),
                ("time=2&width=101&height=100&fit_mode=pad", "thumbnail.webp", "webp", 101, 100),
                ("time=2&width=641&height=361&fit_mode=pad", "thumbnail.jpg", "mjpeg", 641, 361),
                ("time=2&width=101&height=101&fit_mode=crop", "thumbnail.webp", "webp", 101, 101),
            ]
            for (index, item) in cases.enumerated() {
                let reply = try await S3TestClient.fetch(Self.url(storyboard, item.file + "?" + item.query, token: token))
                #expect(reply.status == 200, "\(item.query): \(reply.text.prefix(300))")
                let probed = try await MediaFixtures.probe(try Self.save(reply, directory + "/case-\(index)." + item.file))
                #expect(probed.codec("video") == item.codec, "\(item.file)?\(item.query)")
                #expect(probed.width == item.width && probed.height == item.height,
                        "\(item.file)?\(item.query) is \(probed.width ?? 0)×\(probed.height ?? 0)")
            }

            // Kept in the store under the video's published prefix, by its normalised parameters: the same picture
            // asked for in other words is what the store holds, not made again (the stored bytes are replaced here
            // to tell the two apart).
            let stored = try await harness.keys(under: "video/\(videoId)/out/").filter { $0.contains("/previews/") }
            let key = try #require(stored.first { $0.hasSuffix("/previews/thumbnail-t2000-w320-hauto-preserve.webp") }, "\(stored)")
            let marker = "kept in the store"
            _ = try await harness.server.server.store.putObject(
                bucket: "ferry-media", key: key, attributes: ObjectAttributes(contentType: "image/webp"), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: marker))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            let again = try await S3TestClient.fetch(Self.url(storyboard, "thumbnail.webp?width=320&time=2.0000", token: token))
            #expect(again.status == 200 && again.text == marker)
            let ranged = try await S3TestClient.fetch(
                Self.url(storyboard, "thumbnail.webp?width=320&time=2", token: token), headers: [("Range", "bytes=0-3")])
            #expect(ranged.status == 206 && ranged.text == "kept")
            // A progressive file stored under the video's prefix but not published (a ladder still being stored) is
            // not served.
            let prefix = String(key[..<(key.range(of: "/previews/")?.lowerBound ?? key.endIndex)])
            _ = try await harness.server.server.store.putObject(
                bucket: "ferry-media", key: prefix + "/UHD.mp4", attributes: ObjectAttributes(contentType: "video/mp4"),
                tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: "not published"))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            #expect(try await S3TestClient.fetch(Self.url(storyboard, "UHD.mp4", token: token)).status == 404)
            // An If-Range that no longer names the picture gets all of it; one that does, the range.
            let etag = try #require(again.headers.first(name: "ETag"))
            let stale = try await S3TestClient.fetch(
                Self.url(storyboard, "thumbnail.webp?width=320&time=2", token: token),
                headers: [("Range", "bytes=0-3"), ("If-Range", "\"nope\"")])
            #expect(stale.status == 200 && stale.text == marker)
            let current = try await S3TestClient.fetch(
                Self.url(storyboard, "thumbnail.webp?width=320&time=2", token: token),
                headers: [("Range", "bytes=0-3"), ("If-Range", etag)])
            #expect(current.status == 206 && current.text == "kept")

            // Identical requests at once: each answered with a whole picture, one copy kept.
            let concurrent = try await withThrowingTaskGroup(of: S3TestClient.Reply.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await S3TestClient.fetch(Self.url(storyboard, "thumbnail.jpg?time=7&width=400", token: token)) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(concurrent.allSatisfy { $0.status == 200 && $0.body.starts(with: [0xFF, 0xD8]) && $0.body.suffix(2) == [0xFF, 0xD9] })
            let kept = try await harness.keys(under: "video/\(videoId)/out/").filter { $0.hasSuffix("thumbnail-t7000-w400-hauto-preserve.jpg") }
            #expect(kept.count == 1)

            // Parameters out of bounds: 400 in the playback group's envelope (S3's error document), with the reason.
            let refused: [(String, String)] = [
                ("thumbnail.jpg?time=30", "past the end"), ("thumbnail.jpg?time=-1", "time must be"),
                ("thumbnail.jpg?time=soon", "time must be"), ("thumbnail.jpg?width=4000", "width must be"),
                ("thumbnail.jpg?width=8", "width must be"), ("thumbnail.jpg?height=1.5", "height must be"),
                ("thumbnail.jpg?fit_mode=zoom", "fit_mode must be"), ("thumbnail.jpg?fps=10", "does not apply"),
                ("animated.gif?start=0&end=11", "at most 10 seconds"), ("animated.gif?start=5&end=4", "after start"),
                ("animated.gif?fps=60", "fps must be"), ("animated.gif?width=1000", "width must be"),
                ("animated.webp?time=1", "does not apply"),
            ]
            for (query, reason) in refused {
                let reply = try await S3TestClient.fetch(Self.url(storyboard, query, token: token))
                #expect(reply.status == 400, "\(query): \(reply.status)")
                #expect(reply.text.contains("<Code>InvalidArgument</Code>") && reply.text.contains(reason), "\(query): \(reply.text)")
            }
            // A file name that is no picture is no file of the video.
            #expect(try await S3TestClient.fetch(Self.url(storyboard, "thumbnail.bmp?time=1", token: token)).status == 404)

            // A video not uploaded yet (its duration unknown): times past any video's length, and pictures at all,
            // are refused with a reason; the server goes on serving.
            let waiting = try await harness.media.createUploadVideo(.init(title: "waiting", fileName: "waiting.mp4")).id
            let waitingToken = try await Self.token(harness, waiting)
            let waitingBase = harness.server.endpoint + "/_ferry/play/\(waiting)/"
            for (query, reason) in [
                ("thumbnail.jpg?time=1e300", "time must be"), ("animated.gif?start=9300000000000000&end=9300000000000002", "start must be"),
                ("thumbnail.jpg", "until it is uploaded"), ("animated.webp?start=1&end=2", "until it is uploaded"),
            ] {
                let reply = try await S3TestClient.fetch(waitingBase + query + (query.contains("?") ? "&" : "?") + "token=" + waitingToken)
                #expect(reply.status == 400, "\(query): \(reply.status) \(reply.text)")
                #expect(reply.text.contains(reason), "\(query): \(reply.text)")
            }
            #expect(try await S3TestClient.fetch(Self.url(storyboard, "thumbnail.jpg?time=7&width=400", token: token)).status == 200)
        }
    }

    @Test("animations: a GIF and an animated WebP of a stretch, at the frame rate and width asked for")
    func animations() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 10))
            #expect(try await harness.waitFor(videoId, ["Normal", "TranscodeFail"]).status == "Normal")
            let storyboard = try #require(try await harness.media.getPlayInfo(videoId: videoId).storyboardURL)
            let token = try await Self.token(harness, videoId)

            let gif = try await S3TestClient.fetch(Self.url(storyboard, "animated.gif?start=3&end=6&width=240&fps=10", token: token))
            #expect(gif.status == 200, "\(gif.text.prefix(300))")
            #expect(gif.headers.first(name: "content-type") == "image/gif")
            let path = try Self.save(gif, harness.fixtures + "/animated.gif")
            let probed = try await MediaFixtures.probe(path)
            #expect(probed.codec("video") == "gif" && probed.width == 240 && probed.height == 134)
            let frames = try await MediaFixtures.tool(
                "ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames",
                            "-of", "csv=p=0", path])
            let count = Int(frames.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect((28...32).contains(count), "\(count) frames in 3 s at 10 fps")
            // Its first frame is the source's frame at the start.
            let first = harness.fixtures + "/animated-first.png"
            try await MediaFixtures.ffmpeg(["-i", path, "-frames:v", "1", first])
            let reference = harness.fixtures + "/animated-reference.png"
            try await Self.referenceFrame(
                harness.fixtures + "/landscape480.mp4", time: 3, width: 240, height: 134, to: reference)
            #expect(try await Self.psnr(first, reference) > 25)

            let webp = try await S3TestClient.fetch(Self.url(storyboard, "animated.webp?start=0&end=2", token: token))
            #expect(webp.status == 200)
            #expect(webp.headers.first(name: "content-type") == "image/webp")
            #expect(webp.body.starts(with: Array("RIFF".utf8)) && Array(webp.body[8..<12]) == Array("WEBP".utf8))
            #expect(webp.text.contains("ANIM"), "not an animated WebP")
        }
    }

    @Test(
        "a thumbnail at a time after the last frame began, up to the video's end, is that frame (a frame every 2 s), from the source and from renditions",
        arguments: ["NoTranscode", nil] as [String?])
    func thumbnailInTheLastFrame(_ transcode: String?) async throws {
        try await MediaHarness.with { harness in
            let source = harness.fixtures + "/slow.mp4"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=0.5:duration=20", "-c:v", "libx264", "-preset", "ultrafast",
                "-pix_fmt", "yuv420p", source,
            ])
            let videoId = try await harness.upload(source, transcode: transcode)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            try #require(info.status == "Normal", "\(info.errorMessage ?? "")")
            let base = harness.server.endpoint + "/_ferry/play/\(videoId)/"
            let token = try await Self.token(harness, videoId)
            func picture(_ time: String) async throws -> [UInt8] {
                let picture = try await S3TestClient.fetch(Self.url(base, "thumbnail.png?time=\(time)&width=160", token: token))
                #expect(picture.status == 200 && picture.body.starts(with: [0x89, 0x50, 0x4E, 0x47]), "time=\(time): \(picture.status) \(picture.text.prefix(200))")
                return picture.body
            }
            // The last frame shows from 18 s to the end: every time there is that frame, not the one before.
            let last = try await picture("18")
            #expect(try await picture("16") != last)
            for time in ["18.2", "18.5", "19.5", "19.9", "20"] {
                #expect(try await picture(time) == last, "time=\(time)")
            }
        }
    }

    @Test("a raw H.264 stream, whose container tells no length, has the Duration its renditions play, and a storyboard")
    func durationOfARawStream() async throws {
        try await MediaHarness.with { harness in
            let source = harness.fixtures + "/raw.h264"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-c:v", "libx264", "-preset", "ultrafast",
                "-f", "h264", source,
            ])
            let videoId = try await harness.upload(source)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            try #require(info.status == "Normal", "\(info.errorMessage ?? "")")
            #expect(info.duration.map { abs($0 - 3) < 0.2 } == true, "Duration \(String(describing: info.duration))")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let vtt = try await S3TestClient.fetch(try #require(play.storyboardURL, "no storyboard"))
            #expect(vtt.status == 200 && vtt.text.hasPrefix("WEBVTT"), "\(vtt.status)")
        }
    }

    @Test(
        "a source whose timestamps begin late has the Duration, storyboard and thumbnail bounds of what plays, whether its container counts the late start in its duration (an MP4's empty edit, Matroska) or not (MPEG-TS)",
        arguments: ["mp4", "mkv", "ts"])
    func lateStart(_ container: String) async throws {
        try await MediaHarness.with { harness in
            let source = harness.fixtures + "/late-start." + container
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-f", "lavfi", "-i",
                "sine=frequency=440:sample_rate=48000:duration=3", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt",
                "yuv420p", "-c:a", "aac", "-shortest",
                // An MPEG-TS begins 1.4 s late by itself (the muxer's delay), less than it lasts.
            ] + (container == "ts" ? [] : ["-output_ts_offset", "10"]) + [source])
            let videoId = try await harness.upload(source)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            try #require(info.status == "Normal", "\(info.errorMessage ?? "")")
            let duration = try #require(info.duration)
            #expect(abs(duration - 3) < 0.2, "Duration \(duration) of 3 s")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            #expect(play.duration.map { abs($0 - 3) < 0.2 } == true, "\(String(describing: play.duration))")
            let rendition = try #require(play.streams.first { $0.format == "m3u8" && $0.definition != "AUTO" }?.duration)
            #expect(abs(rendition - duration) < 0.2, "rendition \(rendition), Duration \(duration)")
            let vttURL = try #require(play.storyboardURL)
            let vtt = try await S3TestClient.fetch(vttURL)
            let ends = vtt.text.components(separatedBy: "\n").filter { $0.contains("-->") }.compactMap {
                $0.components(separatedBy: "-->").last?.trimmingCharacters(in: .whitespaces)
                    .split(separator: ":").reduce(0.0) { $0 * 60 + (Double($1) ?? .nan) }
            }
            #expect(ends.last.map { abs($0 - duration) < 0.01 } == true, "storyboard ends at \(ends.last ?? -1)")
            let token = try await Self.token(harness, videoId)
            #expect(try await S3TestClient.fetch(Self.url(vttURL, "thumbnail.jpg?time=2.5", token: token)).status == 200)
            let past = try await S3TestClient.fetch(Self.url(vttURL, "thumbnail.jpg?time=8", token: token))
            #expect(past.status == 400 && past.text.contains("past the end"), "\(past.status) \(past.text)")
        }
    }

    @Test("the storyboard: a sprite of 160-pixel tiles and a WebVTT file whose cues run from 0 to the duration, each tile inside the sprite; before any rendition, thumbnails come from the source; a file that is no video gets a 400 with the reason")
    func storyboard() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 12))
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal")
            let duration = try #require(info.duration)
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let vttURL = try #require(play.storyboardURL)
            // A signed video's storyboard URL carries a token for storyboards (`s`), which opens the sprite too.
            #expect(vttURL.contains("/" + videoId + "/storyboard.vtt?token="))
            let storyboardToken = String(vttURL[vttURL.range(of: "?token=")!.upperBound...])
            let vtt = try await S3TestClient.fetch(vttURL)
            #expect(vtt.status == 200)
            #expect(vtt.headers.first(name: "content-type")?.hasPrefix("text/vtt") == true)

            let lines = vtt.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.first == "WEBVTT")
            func seconds(_ stamp: String) -> Double {
                stamp.trimmingCharacters(in: .whitespaces).split(separator: ":").reduce(0) { $0 * 60 + (Double($1) ?? .nan) }
            }
            var cues: [(start: Double, end: Double, image: String, x: Int, y: Int, w: Int, h: Int)] = []
            for (index, line) in lines.enumerated() where line.contains("-->") {
                let times = line.components(separatedBy: "-->")
                let target = lines[index + 1]
                let parts = target.components(separatedBy: "#xywh=")
                let numbers = (parts.count == 2 ? parts[1] : "").split(separator: ",").compactMap { Int($0) }
                #expect(numbers.count == 4, "\(target)")
                guard numbers.count == 4 else { continue }
                cues.append((seconds(times[0]), seconds(times[1]), parts[0], numbers[0], numbers[1], numbers[2], numbers[3]))
            }
            #expect((12...13).contains(cues.count), "\(cues.count) cues for \(duration) s at one a second")
            #expect(cues.first?.start == 0)
            for (previous, next) in zip(cues, cues.dropFirst()) { #expect(next.start == previous.end) }
            #expect(abs((cues.last?.end ?? 0) - duration) < 0.01, "the cues end at \(cues.last?.end ?? 0), the video at \(duration)")
            // The cues name the sprite with the token, so a player that resolves them against the VTT's URL (as
            // players do, dropping the VTT's own query) is let in.
            #expect(
                cues.allSatisfy {
                    $0.end > $0.start && $0.image == "storyboard.jpg?token=" + storyboardToken && $0.w == 160 && $0.h == 90
                })
            let firstCue = try #require(cues.first)
            let spriteURL = try #require(URL(string: firstCue.image, relativeTo: URL(string: vttURL)))
            let sprite = try await S3TestClient.fetch(spriteURL.absoluteString)
            #expect(sprite.status == 200 && sprite.headers.first(name: "content-type") == "image/jpeg")
            // Asked again with its ETag: 304, with the Cache-Control the 200 had (RFC 9110, 15.4.5).
            let unchanged = try await S3TestClient.fetch(
                spriteURL.absoluteString, headers: [("If-None-Match", sprite.header("ETag") ?? "none")])
            #expect(unchanged.status == 304 && sprite.header("Cache-Control") != nil)
            #expect(unchanged.header("Cache-Control") == sprite.header("Cache-Control"), "\(unchanged.headers)")
            let probed = try await MediaFixtures.probe(try Self.save(sprite, harness.fixtures + "/storyboard.jpg"))
            let width = try #require(probed.width)
            let height = try #require(probed.height)
            #expect(width == 1600 && height == 180)
            #expect(cues.allSatisfy { $0.x >= 0 && $0.y >= 0 && $0.x + $0.w <= width && $0.y + $0.h <= height })
            // Tiles in reading order, no two the same.
            #expect(Set(cues.map { "\($0.x),\($0.y)" }).count == cues.count)

            // A video played as uploaded (no renditions) has no storyboard; its thumbnails come from the source.
            let source = try await harness.fixture(.noAudio, seconds: 4)
            let plain = try await harness.upload(source, transcode: "NoTranscode")
            let plainInfo = try await harness.waitFor(plain, ["Normal", "TranscodeFail"])
            #expect(try await harness.media.getPlayInfo(videoId: plain).storyboardURL == nil)
            // Its cover's playback URL names the video's playback prefix.
            let deadline = ContinuousClock.now + .seconds(60)
            var cover = plainInfo.coverURL
            while cover == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                cover = try await harness.media.getVideoInfo(videoId: plain).coverURL
            }
            let coverURL = try #require(cover)
            #expect(coverURL.contains("/_ferry/play/\(plain)/cover.jpg?token="))
            // Its token opens the cover alone; a thumbnail token opens stills.
            let stillQuery = "thumbnail.png?time=2.5&width=320&height=180&"
            let coverOnly = try await S3TestClient.fetch(coverURL.replacingOccurrences(of: "cover.jpg?", with: stillQuery))
            #expect(coverOnly.status == 403 && coverOnly.text.contains("<Reason>audience</Reason>"), "\(coverOnly.text.prefix(300))")
            let still = try await S3TestClient.fetch(
                PlaybackToken.url(base: harness.server.endpoint, videoId: plain, file: "thumbnail.png", token: try await Self.token(harness, plain))
                    + "&time=2.5&width=320&height=180")
            #expect(still.status == 200, "\(still.text.prefix(300))")
            let picture = try Self.save(still, harness.fixtures + "/plain-thumb.png")
            let reference = harness.fixtures + "/plain-ref.png"
            try await Self.referenceFrame(source, time: 2.5, width: 320, height: 180, to: reference)
            #expect(try await Self.psnr(picture, reference) > 25)
            #expect(try await harness.keys(under: "video/\(plain)/previews/").count == 1)
            // Asked for before the probe tells the video's length (its record has none yet), a still past the end is
            // looked for in the source; none is there, and the caller is told so.
            _ = try await harness.server.server.mediaCatalog.updateVideo(plain) { video in
                video.mezzanine = nil
                return .save()
            }
            let past = try await S3TestClient.fetch(
                PlaybackToken.url(base: harness.server.endpoint, videoId: plain, file: "thumbnail.jpg", token: try await Self.token(harness, plain))
                    + "&time=999")
            #expect(past.status == 400 && past.text.contains("it ends before"), "\(past.status) \(past.text)")
            #expect(try await harness.keys(under: "video/\(plain)/previews/").count == 1)

            // A file played as uploaded that is no video: no picture, and the caller is told why (not a server error).
            let text = harness.fixtures + "/notes.mp4"
            try Data("This is a shopping list, not a film.\n".utf8).write(to: URL(fileURLWithPath: text))
            let notes = try await harness.upload(text, transcode: "NoTranscode")
            #expect(try await harness.waitFor(notes, ["Normal", "TranscodeFail"]).status == "Normal")
            let refused = try await S3TestClient.fetch(
                PlaybackToken.url(
                    base: harness.server.endpoint, videoId: notes, file: "thumbnail.jpg", token: try await Self.token(harness, notes))
                    + "&time=0")
            #expect(refused.status == 400, "\(refused.status) \(refused.text)")
            #expect(refused.text.contains("<Code>InvalidArgument</Code>") && refused.text.contains("No picture can be taken"))
            #expect(!refused.text.contains(harness.server.dataDirectory))
        }
    }

    /// The pictures of `videoId` the store holds, by their normalised names.
    static func cachedPictures(_ harness: MediaHarness, _ videoId: String) async throws -> Set<String> {
        Set(try await harness.keys(under: "video/\(videoId)/").filter { $0.contains("/previews/") }.map {
            String($0[$0.range(of: "/previews/")!.upperBound...])
        })
    }

    /// Asks for the still of `videoId` at 1 s, `width` pixels wide.
    static func still(_ harness: MediaHarness, _ videoId: String, width: Int) async throws -> S3TestClient.Reply {
        try await S3TestClient.fetch(
            PlaybackToken.url(
                base: harness.server.endpoint, videoId: videoId, file: "thumbnail.jpg",
                token: try await Self.token(harness, videoId)) + "&time=1&width=\(width)")
    }

    @Test("the store keeps at most previewCacheLimit pictures of a video: storing one more deletes the oldest, which is made again when asked for; a picture served from the store deletes nothing; deleting the video deletes them all")
    func cacheLimit() async throws {
        try await MediaHarness.with(configure: {
            $0.mediaProcessing.previewCacheLimit = 3
            $0.mediaProcessing.previewCacheGrace = .zero
        }) { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 2), transcode: "NoTranscode")
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            func name(_ width: Int) -> String { "thumbnail-t1000-w\(width)-hauto-preserve.jpg" }
            for width in [100, 200, 300] {
                let reply = try await Self.still(harness, videoId, width: width)
                #expect(reply.status == 200, "\(reply.text)")
            }
            #expect(try await Self.cachedPictures(harness, videoId) == [name(100), name(200), name(300)])
            // A fourth: the oldest goes.
            #expect(try await Self.still(harness, videoId, width: 400).status == 200)
            #expect(try await Self.cachedPictures(harness, videoId) == [name(200), name(300), name(400)])
            // The one deleted is made again when asked for, and the oldest left goes in its place.
            let again = try await Self.still(harness, videoId, width: 100)
            #expect(again.status == 200 && again.body.starts(with: [0xFF, 0xD8]))
            #expect(try await Self.cachedPictures(harness, videoId) == [name(300), name(400), name(100)])
            // Served from the store, a picture is not stored again and deletes nothing.
            #expect(try await Self.still(harness, videoId, width: 300).status == 200)
            #expect(try await Self.cachedPictures(harness, videoId) == [name(300), name(400), name(100)])

            // Deleting the video deletes its pictures with its other files.
            try await harness.media.deleteVideos([videoId])
            let deadline = ContinuousClock.now + .seconds(60)
            while try await !harness.keys(under: "video/\(videoId)/").isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await harness.keys(under: "video/\(videoId)/").isEmpty)
        }
    }

    @Test("pictures of a video played as uploaded read one copy of its source on the node, shared, not a copy each: three stills copy it once")
    func sharedSourceCopy() async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(.landscape480, seconds: 2)
            let videoId = try await harness.upload(source, transcode: "NoTranscode")
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let size = try #require(try FileManager.default.attributesOfItem(atPath: source)[.size] as? NSNumber).intValue
            let sources = harness.server.dataDirectory + "/preview-work/sources"
            // The copy each still read: its file number and modification time (a copy made again has another).
            var copies: Set<String> = []
            for width in [100, 200, 300] {
                let reply = try await Self.still(harness, videoId, width: width)
                #expect(reply.status == 200 && reply.body.starts(with: [0xFF, 0xD8]), "\(reply.text)")
                let names = try FileManager.default.contentsOfDirectory(atPath: sources)
                #expect(names.count == 1, "\(names)")
                let attributes = try FileManager.default.attributesOfItem(atPath: sources + "/" + (names.first ?? ""))
                #expect((attributes[.size] as? NSNumber)?.intValue == size)
                copies.insert("\(attributes[.systemFileNumber] ?? "") \(attributes[.modificationDate] ?? "")")
            }
            #expect(copies.count == 1, "the source was copied again: \(copies)")
        }
    }

    @Test("a source whose picture is larger than 8K is decoded for no picture on request: 400 naming its size, nothing stored")
    func pictureTooLarge() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.noAudio, seconds: 2), transcode: "NoTranscode")
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            #expect(try await Self.still(harness, videoId, width: 100).status == 200)
            // As the probe of a 16000×16000 picture (a few hundred bytes of PNG can declare it) records it.
            _ = try await harness.server.server.mediaCatalog.updateVideo(videoId) { video in
                video.mezzanine?.width = 16_000
                video.mezzanine?.height = 16_000
                return .save()
            }
            let refused = try await Self.still(harness, videoId, width: 200)
            #expect(refused.status == 400 && refused.text.contains("16000×16000"), "\(refused.status) \(refused.text)")
            #expect(try await Self.cachedPictures(harness, videoId).count == 1)
        }
    }

    @Test("a video 2 pixels wide and 4,098 high: storyboard tiles stay 160 wide and at most 360 high, a still asked for by its width and an animation keep the other side within bounds (unbounded, ffmpeg wanted a gigabyte for each)")
    func extremeShapesStayBounded() async throws {
        try await MediaHarness.with { harness in
            let tall = harness.fixtures + "/tall.mp4"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc2=size=2x4098:rate=10", "-t", "3", "-c:v", "libx264", "-pix_fmt", "yuv420p", tall,
            ])
            let videoId = try await harness.upload(tall)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let token = try await Self.token(harness, videoId)
            func size(_ file: String, _ query: String = "") async throws -> (Int, Int) {
                let reply = try await S3TestClient.fetch(
                    PlaybackToken.url(base: harness.server.endpoint, videoId: videoId, file: file, token: token) + query)
                #expect(reply.status == 200, "\(file): \(reply.status) \(reply.text.prefix(300))")
                let probed = try await MediaFixtures.probe(try Self.save(reply, harness.fixtures + "/extreme-" + file))
                return (probed.width ?? 0, probed.height ?? 0)
            }
            let (spriteWidth, spriteHeight) = try await size("storyboard.jpg")
            #expect(spriteWidth == 160 * 3 && (2...360).contains(spriteHeight), "\(spriteWidth)×\(spriteHeight)")
            let (stillWidth, stillHeight) = try await size("thumbnail.png", "&time=1&width=160")
            #expect(stillWidth == 160 && stillHeight == 1920, "\(stillWidth)×\(stillHeight)")
            let (animationWidth, animationHeight) = try await size("animated.gif")
            #expect(animationWidth == 320 && animationHeight == 1280, "\(animationWidth)×\(animationHeight)")
        }
    }

    @Test("a picture stored within previewCacheGrace is kept past previewCacheLimit: the request that made it is answered from the store")
    func cacheGrace() async throws {
        try await MediaHarness.with(configure: { $0.mediaProcessing.previewCacheLimit = 1 }) { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 2), transcode: "NoTranscode")
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            for width in [100, 200] {
                let reply = try await Self.still(harness, videoId, width: width)
                #expect(reply.status == 200, "\(reply.text)")
            }
            #expect(try await Self.cachedPictures(harness, videoId).count == 2)
        }
    }

    @Test("a picture not made within the preview time limit (reading its input, then ffmpeg) is 503 SlowDown with Retry-After, and nothing is stored")
    func previewTimeLimit() async throws {
        try await MediaHarness.with(configure: { $0.mediaProcessing.previewTimeLimit = .milliseconds(1) }) { harness in
            let source = try await harness.fixture(.landscape480, seconds: 2)
            let videoId = try await harness.upload(source)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let url =
                PlaybackToken.url(
                    base: harness.server.endpoint, videoId: videoId, file: "thumbnail.jpg",
                    token: try await Self.token(harness, videoId)) + "&time=1"
            // Twice: the first refusal stored nothing the second could be served from.
            for _ in 0..<2 {
                let reply = try await S3TestClient.fetch(url)
                #expect(reply.status == 503, "\(reply.status) \(reply.text)")
                #expect(reply.text.contains("<Code>SlowDown</Code>"), "\(reply.text)")
                #expect(reply.headers.first(name: "Retry-After") == "5")
                #expect(!reply.text.contains(harness.server.dataDirectory))
            }
            #expect(try await harness.keys(under: "video/\(videoId)/").filter { $0.contains("/previews/") }.isEmpty)
        }
    }

    @Test("what a killed process left in the picture work directory (a copy of a source per picture being made) is removed when the server starts")
    func abandonedPictureWorkIsRemoved() async throws {
        var left = ""
        try await TestServer.inMemory(configure: { configuration in
            // A process killed while making a picture left its directory.
            left = configuration.dataDirectory + "/preview-work/" + UUID().uuidString
            try? FileManager.default.createDirectory(atPath: left, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: left + "/source.mp4", contents: Data(repeating: 7, count: 4096))
        }) { server async throws in
            #expect(FileManager.default.fileExists(atPath: server.dataDirectory + "/preview-work"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/preview-work").isEmpty)
        }
        #expect(!left.isEmpty)
    }

    /// Processes whose command line names `text` (ffmpeg making a picture in a test server's work directory).
    static func processes(naming text: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let pid = Int32(entry),
                let line = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                String(decoding: line, as: UTF8.self).contains(text)
            else { return nil }
            return pid
        }
    }

    @Test("a picture whose only client went away is not made: its ffmpeg is killed and nothing is stored")
    func abandonedPictureIsNotMade() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 10))
            #expect(try await harness.waitFor(videoId, ["Normal", "TranscodeFail"]).status == "Normal")
            let target = PlaybackToken.url(
                base: "", videoId: videoId, file: "animated.gif", token: try await Self.token(harness, videoId))
                + "&start=0&end=10&fps=30&width=640"
            let socket = try RawSocket.connect(port: harness.server.port)
            try RawSocket.write(
                socket, Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(harness.server.port)\r\n\r\n".utf8))
            // Once its ffmpeg runs, the client hangs up.
            let work = harness.server.dataDirectory + "/preview-work"
            var running: [Int32] = []
            for _ in 0..<400 where running.isEmpty {
                running = Self.processes(naming: work)
                if running.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            close(socket)
            try #require(!running.isEmpty, "no ffmpeg was started for the picture")
            var gone = false
            for _ in 0..<300 where !gone {
                gone = Self.processes(naming: work).isEmpty
                if !gone { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(gone, "the picture's ffmpeg ran on without a client")
            // Its work directory goes once the killed ffmpeg is reaped.
            for _ in 0..<300 where !(try FileManager.default.contentsOfDirectory(atPath: work).isEmpty) {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: work).isEmpty)
            #expect(try await Self.cachedPictures(harness, videoId).isEmpty)
        }
    }
}
