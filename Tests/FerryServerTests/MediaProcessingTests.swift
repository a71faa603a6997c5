import Ferry
import FerryCore
@testable import FerryMedia
import FerryServer
import FerryTestSupport
import Foundation
import Testing

@Suite("Media processing with ffmpeg: probe, cover, renditions, HLS, play info, events", .serialized, .timeLimit(.minutes(10)))
struct MediaProcessingTests {
    /// The payload of each delivered event, in delivery order, with its type.
    static func events(_ recorder: WebhookRecorder) async -> [(type: String, payload: [String: Any])] {
        await recorder.deliveries.compactMap { delivery in
            guard let json = try? JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any],
                let type = json["type"] as? String
            else { return nil }
            return (type, json["payload"] as? [String: Any] ?? [:])
        }
    }

    @Test("an uploaded 480p video becomes Normal: probed, a cover, LD and SD as HLS and MP4 under a master playlist, events in order")
    func ladder() async throws {
        try await WebhookReceiver.with { receiver in
            try await MediaHarness.with(webhook: receiver.url) { harness in
                let source = try await harness.fixture(.landscape480)
                let videoId = try await harness.upload(source)
                let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
                #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
                #expect(abs((info.duration ?? 0) - 3) <= 0.1)
                #expect(info.width == 854 && info.height == 480)
                #expect(info.mediaType == "video")
                #expect(info.snapshots?.count == 1)

                // The source as probed.
                let mezzanine = try await harness.media.getMezzanineInfo(videoId: videoId)
                #expect(mezzanine.status == "Normal")
                #expect(mezzanine.videoCodec == "h264" && mezzanine.audioCodec == "aac")
                #expect(mezzanine.fps == 30)
                #expect(try await S3TestClient.fetch(mezzanine.fileURL).body == [UInt8](try Data(contentsOf: URL(fileURLWithPath: source))))

                // Renditions: never above the source (480p gets LD at 360p and SD at 480p), each as HLS and MP4.
                let play = try await harness.media.getPlayInfo(videoId: videoId)
                #expect(play.status == "Normal")
                #expect(Set(play.streams.map { "\($0.definition)/\($0.format)" }) == ["LD/m3u8", "LD/mp4", "SD/m3u8", "SD/mp4", "SQ/m3u8", "SQ/m4a", "AUTO/m3u8", "AUTO/mpd"])
                for (definition, width, height) in [("LD", 640, 360), ("SD", 854, 480)] {
                    let mp4 = try #require(play.stream(format: "mp4", definition: definition))
                    #expect(mp4.width == width && mp4.height == height)
                    let probed = try await MediaFixtures.probe(mp4.url)
                    #expect(probed.codec("video") == "h264" && probed.codec("audio") == "aac")
                    #expect(probed.width == width && probed.height == height)
                    #expect(abs((probed.duration ?? 0) - 3) <= 0.1, "\(definition) lasts \(probed.duration ?? 0)")
                    // Progressive MP4 for browsers: the index (moov) comes before the media (faststart).
                    let head = try await S3TestClient.fetch(mp4.url, headers: [("Range", "bytes=0-4095")])
                    #expect(head.status == 206)
                    let text = String(decoding: head.body, as: UTF8.self)
                    #expect(text.range(of: "moov") != nil, "\(definition).mp4 has its moov atom at the end")
                }
                // A definition's stream (`LD.m3u8`: its picture with the sound) counts the bytes of both.
                let stored = try await harness.server.server.store.listObjects(
                    bucket: harness.server.server.configuration.mediaBucket, prefix: "video/\(videoId)/out/",
                    delimiter: nil, startAfter: nil, maxKeys: 1000)
                func bytes(under directory: String) -> Int64 {
                    stored.objects.filter { $0.key.split(separator: "/").dropFirst(4).first.map(String.init) == directory }
                        .reduce(0) { $0 + $1.size }
                }
                let ldStream = try #require(play.stream(format: "m3u8", definition: "LD"))
                #expect(bytes(under: "LD") > 0 && bytes(under: "SQ") > 0)
                #expect(ldStream.size == bytes(under: "LD") + bytes(under: "SQ"), "LD.m3u8 counts \(ldStream.size) bytes")
                // The master playlist lists both variants; ffmpeg reads the whole stream through it (relative URIs).
                let master = try #require(play.stream(format: "m3u8", definition: "AUTO"))
                // Its bitrate is its best variant's with the sound (which the audio rendition carries apart): never
                // below a lower definition's, which counts its sound.
                let lower = try #require(play.stream(format: "m3u8", definition: "LD")?.bitrate)
                #expect((master.bitrate ?? 0) > lower, "AUTO \(master.bitrate ?? 0), LD \(lower)")
                let playlist = String(decoding: try await S3TestClient.fetch(master.url).body, as: UTF8.self)
                #expect(playlist.components(separatedBy: "#EXT-X-STREAM-INF").count - 1 == 2)
                #expect(playlist.contains("RESOLUTION=640x360") && playlist.contains("RESOLUTION=854x480"))
                #expect(playlist.contains("LD/index.m3u8") && playlist.contains("SD/index.m3u8"))
                let copy = harness.fixtures + "/copied.mp4"
                try await MediaFixtures.ffmpeg(["-i", master.url, "-c", "copy", copy])
                let copied = try await MediaFixtures.probe(copy)
                #expect(abs((copied.duration ?? 0) - 3) <= 0.1, "the HLS copy lasts \(copied.duration ?? 0)")
                #expect(copied.width == 854 && copied.codec("audio") == "aac")
                // Picture and sound start together: the video rendition's first frame at 0, the audio rendition's
                // first packet its AAC priming before 0 (each init segment's edit list skips what is before 0). Each
                // shifted to 0 on its own, the picture lagged the sound by 45 ms.
                func firstTime(_ definition: String, _ stream: String) async throws -> Double {
                    let url = try #require(play.stream(format: "m3u8", definition: definition)).url
                    let run = try await MediaFixtures.tool(
                        "ffprobe",
                        ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-read_intervals", "%+#1",
                         "-of", "csv=p=0", url])
                    return try #require(Double(run.output.split(separator: "\n").first.map(String.init) ?? ""), "\(run.output)")
                }
                let pictureStarts = try await firstTime("LD", "v:0")
                let soundStarts = try await firstTime("SQ", "a:0")
                #expect(abs(pictureStarts) < 0.005, "the picture starts at \(pictureStarts) s")
                #expect(soundStarts > -0.05 && soundStarts <= 0.001, "the sound starts at \(soundStarts) s")
                // LD's stream is a master playlist of its picture with the sound, so it plays alone with sound.
                let variant = try #require(play.stream(format: "m3u8", definition: "LD"))
                let single = String(decoding: try await S3TestClient.fetch(variant.url).body, as: UTF8.self)
                #expect(single.components(separatedBy: "#EXT-X-STREAM-INF").count - 1 == 1, "\(single)")
                #expect(single.contains("\nLD/index.m3u8?token=") && single.contains("URI=\"SQ/index.m3u8?token="), "\(single)")
                let variantURL = variant.url.replacingOccurrences(of: "/LD.m3u8?", with: "/LD/index.m3u8?")
                let variantText = String(decoding: try await S3TestClient.fetch(variantURL).body, as: UTF8.self)
                // A signed video's playlist passes its token on to the init segment and every segment.
                #expect(variantText.contains("#EXT-X-MAP:URI=\"init.mp4?token=") && variantText.contains(".m4s?token="))
                // The same fMP4 files as MPEG-DASH: ffmpeg reads the manifest back, both representations and the
                // whole duration.
                let dash = try #require(play.stream(format: "mpd", definition: "AUTO"))
                let manifest = try await S3TestClient.fetch(dash.url)
                #expect(manifest.header("content-type") == "application/dash+xml")
                let manifestText = String(decoding: manifest.body, as: UTF8.self)
                #expect(manifestText.contains("<Representation id=\"LD\"") && manifestText.contains("<Representation id=\"SD\""))
                // A signed video's manifest passes its token on to every file it names, as its playlists do.
                #expect(manifestText.contains("<Initialization sourceURL=\"SD/init.mp4?token="))
                let dashCopy = harness.fixtures + "/dash-copy.mp4"
                try await MediaFixtures.ffmpeg(["-i", dash.url, "-map", "0:v:0", "-map", "0:a:0", "-c", "copy", dashCopy])
                let fromDash = try await MediaFixtures.probe(dashCopy)
                #expect(abs((fromDash.duration ?? 0) - 3) <= 0.2, "the DASH copy lasts \(fromDash.duration ?? 0)")
                #expect(fromDash.codec("video") == "h264" && fromDash.codec("audio") == "aac")

                // The cover, taken from the video.
                let cover = try #require(info.coverURL)
                let picture = try await MediaFixtures.probe(cover)
                #expect(picture.codec("video") == "mjpeg" && picture.width == 854)

                // Events, in order, with their fields.
                let deadline = ContinuousClock.now + .seconds(60)
                while await !Set(Self.events(receiver.recorder).map(\.type)).isSuperset(of: ["TranscodeComplete", "SnapshotComplete"]),
                    ContinuousClock.now < deadline
                {
                    try await Task.sleep(for: .milliseconds(50))
                }
                let all = await Self.events(receiver.recorder)
                // The cover is taken in the quick lane while the transcode runs: its event comes after the analysis,
                // anywhere among the transcode's.
                let coverEvent = try #require(all.firstIndex { $0.type == "SnapshotComplete" })
                #expect(coverEvent > 1 && all[coverEvent].payload["Status"] as? String == "success")
                var events = all
                events.remove(at: coverEvent)
                // The source (H.264 + AAC at 480p) plays as it is: it is published first, before the ladder.
                #expect(events.map(\.type) == [
                    "FileUploadComplete", "VideoAnalysisComplete", "VideoPlayable", "StreamTranscodeComplete",
                    "StreamTranscodeComplete", "StreamTranscodeComplete", "StreamTranscodeComplete", "StreamTranscodeComplete",
                    "StreamTranscodeComplete", "TranscodeComplete",
                ])
                #expect(all.allSatisfy { $0.payload["VideoId"] as? String == videoId })
                #expect(events[1].payload["Width"] as? Int == 854 && events[1].payload["Status"] as? String == "success")
                #expect(events[2].payload["Definition"] as? String == "OD" && events[2].payload["Format"] as? String == "m3u8")
                let streams = events.filter { $0.type == "StreamTranscodeComplete" }.map {
                    "\($0.payload["Definition"] as? String ?? "")/\($0.payload["Format"] as? String ?? "")"
                }
                #expect(Set(streams) == ["LD/m3u8", "LD/mp4", "SD/m3u8", "SD/mp4", "SQ/m3u8", "SQ/m4a"])
                let done = try #require(events.last?.payload)
                #expect(done["Status"] as? String == "success")
                #expect((done["StreamInfos"] as? [[String: Any]])?.count == 6)

                // Nothing of the job is left in its working directory, and only the published outputs are stored.
                let work = harness.server.dataDirectory + "/media-work"
                #expect(((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).isEmpty)
                let outputs = try await harness.keys(under: "video/\(videoId)/out/")
                #expect(Set(outputs.map { $0.split(separator: "/")[3] }).count == 1, "\(outputs)")
            }
        }
    }

    @Test("GetPlayInfo filters by format and definition; playback URLs refuse altered and expired tokens and other videos")
    func playbackURLs() async throws {
        // Playback tokens expire by the server's clock, which the test moves instead of waiting.
        let time = ManualTime()
        try await MediaHarness.with(configure: { $0.now = time.now }) { harness in
            let first = try await harness.upload(try await harness.fixture(.noAudio))
            #expect(try await harness.waitFor(first, ["Normal", "TranscodeFail"]).status == "Normal")
            let play = try await harness.media.getPlayInfo(videoId: first, formats: ["mp4"])
            #expect(play.streams.map(\.format) == ["mp4"])
            #expect(play.streams.map(\.definition) == ["LD"])
            let mp4 = try #require(play.streams.first)
            let probed = try await MediaFixtures.probe(mp4.url)
            #expect(probed.width == 320 && probed.height == 180 && probed.codec("audio") == nil)
            let narrowed = try await harness.media.getPlayInfo(videoId: first, definitions: ["AUTO"])
            #expect(narrowed.streams.map(\.format) == ["m3u8", "mpd"])
            await #expect(throws: FerryError.self) {
                try await harness.media.getPlayInfo(videoId: first, formats: ["flv"])
            }

            // A browser on another site may fetch it (the URL is the credential).
            let fetched = try await S3TestClient.fetch(mp4.url, headers: [("Origin", "https://player.example")])
            #expect(fetched.status == 200)
            #expect(fetched.headers.first(name: "access-control-allow-origin") == "*")
            #expect(fetched.headers.first(name: "content-type") == "video/mp4")

            // Altered: another signature, another video's id, a path outside the video.
            let url = mp4.url
            let token = try #require(url.components(separatedBy: "?token=").last)
            var signature = Array(try #require(token.split(separator: ".").last))
            signature[2] = signature[2] == "A" ? "B" : "A"
            let altered = url.replacingOccurrences(of: token, with: token.split(separator: ".").dropLast().joined(separator: ".") + "." + String(signature))
            #expect(try await S3TestClient.fetch(altered).status == 403)
            let second = try await harness.upload(try await harness.fixture(.audioOnly))
            #expect(try await S3TestClient.fetch(url.replacingOccurrences(of: first, with: second)).status == 403)
            for path in ["../source.mp4", "LD/../../x", "%2e%2e/source.mp4", "source.mp4"] {
                let outside = url.replacingOccurrences(of: "LD.mp4", with: path)
                #expect([403, 404].contains(try await S3TestClient.fetch(outside).status), "\(path)")
            }
            // Expired.
            let brief = try await harness.media.getPlayInfo(videoId: first, authTimeout: 1, formats: ["mp4"])
            let briefURL = try #require(brief.streams.first).url
            #expect(try await S3TestClient.fetch(briefURL).status == 200)
            time.advance(by: 2)
            let expired = try await S3TestClient.fetch(briefURL)
            #expect(expired.status == 403)
            #expect(String(decoding: expired.body, as: UTF8.self).contains("expired"))
            _ = try await harness.waitFor(second, ["Normal", "TranscodeFail"])
        }
    }

    @Test(
        "files that are not video end in TranscodeFail with ffprobe's reason, the source kept and downloadable, and a failure event",
        arguments: ["text", "empty", "truncated", "random", "playlist"])
    func notVideo(_ kind: String) async throws {
        try await WebhookReceiver.with { receiver in
            try await MediaHarness.with(webhook: receiver.url) { harness in
                let path = harness.fixtures + "/bad-\(kind)" + (kind == "playlist" ? ".m3u8" : ".mp4")
                switch kind {
                case "playlist":
                    // An HLS playlist whose segment is a video on the server's own disk: read, it would be published
                    // as the uploader's video.
                    let local = try await harness.fixture(.landscape480)
                    let playlist = """
                        #EXTM3U
                        #EXT-X-VERSION:3
                        #EXT-X-TARGETDURATION:10
                        #EXT-X-MEDIA-SEQUENCE:0
                        #EXTINF:10.0,
                        file://\(local)
                        #EXT-X-ENDLIST

                        """
                    try Data(playlist.utf8).write(to: URL(fileURLWithPath: path))
                case "text": try Data("This is a shopping list, not a film.\n".utf8).write(to: URL(fileURLWithPath: path))
                case "empty": try Data().write(to: URL(fileURLWithPath: path))
                case "truncated":
                    let whole = try Data(contentsOf: URL(fileURLWithPath: try await harness.fixture(.landscape480)))
                    try whole.prefix(whole.count / 3).write(to: URL(fileURLWithPath: path))
                default:
                    var generator = SystemRandomNumberGenerator()
                    try Data((0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: path))
                }
                let videoId = try await harness.upload(path)
                let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
                #expect(info.status == "TranscodeFail")
                #expect(info.errorCode == "InvalidMedia" || info.errorCode == "TranscodeError")
                let message = try #require(info.errorMessage)
                if kind == "playlist" {
                    // Refused when probed: nothing of the local file was read (its size would show in the probe).
                    #expect(info.errorCode == "InvalidMedia" && message.contains("whitelist"), "\(message)")
                    #expect(info.width == nil && info.duration == nil)
                }
                #expect(!message.isEmpty && !message.contains(harness.server.dataDirectory), "\(message)")
                let source = try await harness.media.getMezzanineInfo(videoId: videoId)
                #expect(try await S3TestClient.fetch(source.fileURL).body == [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
                let refused = await #expect(throws: FerryError.self) { try await harness.media.getPlayInfo(videoId: videoId) }
                // Failed for good: no "yet".
                #expect(refused?.serverCode == "InvalidVideo.NoneStream" && refused?.message.contains("yet") == false, "\(String(describing: refused))")

                let deadline = ContinuousClock.now + .seconds(60)
                while await !Self.events(receiver.recorder).contains(where: { $0.type == "TranscodeComplete" }),
                    ContinuousClock.now < deadline
                {
                    try await Task.sleep(for: .milliseconds(50))
                }
                let failure = try #require(await Self.events(receiver.recorder).first { $0.type == "TranscodeComplete" })
                #expect(failure.payload["Status"] as? String == "fail")
                #expect(failure.payload["ErrorMessage"] as? String == message)
            }
        }
    }

    @Test("a 31 KB PNG declaring 16000×16000 pixels is not decoded, not even by the probe: its size is unknown and it is not transcoded, saying why")
    func hugePictureIsNotDecoded() async throws {
        try await MediaHarness.with { harness in
            // One bit a pixel, all black: 32 MB of rows that deflate to 31 KB (decoded as RGB, 768 MB a frame).
            let path = harness.fixtures + "/huge.png"
            let script = """
                import zlib, struct, sys
                w = h = 16000
                raw = (b'\\x00' * (1 + w // 8)) * h
                def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
                png = b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 1, 0, 0, 0, 0))
                png += chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b'')
                open(sys.argv[1], 'wb').write(png)
                """
            let python = Process()
            python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            python.arguments = ["python3", "-c", script, path]
            try python.run()
            python.waitUntilExit()
            #expect(python.terminationStatus == 0)
            let videoId = try await harness.upload(path)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "TranscodeFail" && info.errorCode == "InvalidMedia", "\(info)")
            // Without the decoders' pixel limit the probe decodes the picture and records 16000×16000.
            #expect(info.width == nil && info.height == nil)
            let message = info.errorMessage ?? ""
            #expect(message.hasPrefix("The picture's size is not known: it is larger than 35389440 (8192×4320) pixels"), "\(message)")
            // With sound beside it the picture is not dropped for a sound-only ladder, and no cover is tried.
            let withSound = harness.fixtures + "/huge-with-sound.mkv"
            try await MediaFixtures.ffmpeg([
                "-i", path, "-f", "lavfi", "-i", "sine=duration=1", "-map", "0", "-map", "1", "-c:v", "copy", "-c:a", "aac", withSound,
            ])
            let both = try await harness.upload(withSound)
            let refused = try await harness.waitFor(both, ["Normal", "TranscodeFail"])
            #expect(refused.status == "TranscodeFail" && refused.errorCode == "InvalidMedia", "\(refused)")
            #expect(refused.errorMessage == message, "\(refused.errorMessage ?? "")")
            let kinds = try await harness.server.server.mediaCatalog.jobs(videoId: both).map(\.kind)
            #expect(!kinds.contains(.snapshot), "\(kinds)")
        }
    }

    @Test("a source longer than the server transcodes ends in TranscodeFail (MediaTooLong) before any encoding, its source kept; NoTranscode still publishes it")
    func tooLongToTranscode() async throws {
        try await MediaHarness.with(configure: { $0.mediaProcessing.maxTranscodeDuration = .seconds(2) }) { harness in
            let path = try await harness.fixture(.landscape480, seconds: 3)
            let videoId = try await harness.upload(path)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "TranscodeFail" && info.errorCode == "MediaTooLong", "\(info)")
            #expect(info.errorMessage == "The source lasts 3 s; this server transcodes sources of at most 2 s.", "\(info.errorMessage ?? "")")
            // Refused once probed: no transcode was queued.
            let kinds = try await harness.server.server.mediaCatalog.jobs(videoId: videoId).map(\.kind)
            #expect(kinds.contains(.probe) && !kinds.contains(.transcode), "\(kinds)")
            // Nothing was encoded: the transcode ended before its first stream.
            let outputs = try await harness.server.server.store.listObjects(
                bucket: harness.server.server.configuration.mediaBucket, prefix: "video/\(videoId)/out/", delimiter: nil,
                startAfter: nil, maxKeys: 10)
            #expect(outputs.objects.isEmpty, "\(outputs.objects.map(\.key))")
            let source = try await harness.media.getMezzanineInfo(videoId: videoId)
            #expect(try await S3TestClient.fetch(source.fileURL).body == [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
            let kept = try await harness.upload(path, transcode: "NoTranscode")
            #expect(try await harness.waitFor(kept, ["Normal", "TranscodeFail"]).status == "Normal")
            // A raw H.264 stream gives no duration: it is read only to just past the limit, and refused for what it
            // held. Playable as it is (4:2:0), its first stream is packaged first, and shows it: nothing is published.
            let raw = harness.fixtures + "/raw.h264"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc=size=640x360:rate=25", "-t", "5", "-c:v", "libx264", "-preset", "ultrafast",
                "-pix_fmt", "yuv420p", "-f", "h264", raw,
            ])
            let unknown = try await harness.upload(raw)
            let refused = try await harness.waitFor(unknown, ["Normal", "TranscodeFail"])
            #expect(refused.status == "TranscodeFail" && refused.errorCode == "MediaTooLong", "\(refused)")
            #expect(
                refused.errorMessage == "The source runs past 2 s (its header gives no usable duration); this server transcodes sources of at most 2 s.",
                "\(refused.errorMessage ?? "")")
            let published = try await harness.server.server.store.listObjects(
                bucket: harness.server.server.configuration.mediaBucket, prefix: "video/\(unknown)/out/", delimiter: nil,
                startAfter: nil, maxKeys: 10)
            #expect(published.objects.isEmpty, "\(published.objects.map(\.key))")
        }
    }

    @Test("a file cut short after its index (moov first, half its data): TranscodeFail saying so, not Normal with half the video; a whole file whose media starts late is Normal")
    func cutShortSource() async throws {
        try await MediaHarness.with { harness in
            let whole = harness.fixtures + "/indexed-first.mp4"
            try await MediaFixtures.ffmpeg([
                "-i", try await harness.fixture(.landscape480, seconds: 12), "-c", "copy", "-movflags", "+faststart", whole,
            ])
            let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
            let path = harness.fixtures + "/cut-short.mp4"
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: path))
            let videoId = try await harness.upload(path)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "TranscodeFail" && info.errorCode == "TranscodeError", "\(info.status)")
            #expect(info.errorMessage?.contains("cut short") == true, "\(info.errorMessage ?? "")")
            // Its first seconds were not published as the video either: nothing plays a fraction of it as the whole.
            #expect(info.playable != true)
            await #expect(throws: FerryError.self) { try await harness.media.getPlayInfo(videoId: videoId) }
            // A whole file whose media starts late (an edit list's empty edit of 2 s, counted in its duration) is
            // not cut short.
            let late = harness.fixtures + "/starts-late.mp4"
            try await MediaFixtures.ffmpeg([
                "-itsoffset", "2", "-i", try await harness.fixture(.landscape480, seconds: 4), "-map", "0", "-c", "copy", late,
            ])
            let lateId = try await harness.upload(late)
            let lateInfo = try await harness.waitFor(lateId, ["Normal", "TranscodeFail"])
            #expect(lateInfo.status == "Normal", "\(lateInfo.errorMessage ?? "")")
        }
        #expect(MediaPipeline.cutShort(made: 11.9, declared: 12) == nil && MediaPipeline.cutShort(made: nil, declared: 12) == nil)
        #expect(MediaPipeline.cutShort(made: 95.5, declared: 100) == nil && MediaPipeline.cutShort(made: 94, declared: 100) != nil)
    }

    @Test("sound that starts after the picture keeps its place: every HLS rendition plays silence until it begins")
    func lateSoundKeepsItsPlace() async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(.landscape480, seconds: 4)
            let late = harness.fixtures + "/late-sound.mp4"
            try await MediaFixtures.ffmpeg([
                "-i", source, "-itsoffset", "0.5", "-i", source, "-map", "0:v", "-map", "1:a", "-c", "copy", "-t", "4", late,
            ])
            let videoId = try await harness.upload(late)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            // The master playlist plays the audio rendition (made on its own); LD's, its picture with it.
            for definition in ["AUTO", "LD"] {
                let url = try #require(play.stream(format: "m3u8", definition: definition)).url
                let run = try await MediaFixtures.tool(
                    "ffmpeg",
                    ["-hide_banner", "-nostdin", "-i", url, "-map", "0:a:0", "-af", "silencedetect=noise=-40dB:duration=0.2",
                     "-f", "null", "-"])
                let report = run.errorOutput.split(separator: "\n").first { $0.contains("silence_end: ") }
                let end = report.flatMap { line in
                    line.range(of: "silence_end: ").flatMap { Double(line[$0.upperBound...].prefix { $0 != " " }) }
                }
                #expect(end.map { (0.4...0.6).contains($0) } == true, "\(definition): \(run.errorOutput.suffix(600))")
            }
        }
    }

    @Test("a clip under half a second: its media playlists' target duration is 1, not the 0 ffmpeg rounds to")
    func clipUnderHalfASecond() async throws {
        try await MediaHarness.with { harness in
            let clip = harness.fixtures + "/short.mp4"
            try await MediaFixtures.ffmpeg(["-i", try await harness.fixture(.landscape480, seconds: 1), "-t", "0.3", clip])
            let videoId = try await harness.upload(clip)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let variants = play.streams.filter { $0.format == "m3u8" && $0.definition != "AUTO" }
            #expect(!variants.isEmpty)
            for variant in variants {
                // A definition's stream is its master playlist (`LD.m3u8`, with the sound): its media playlist is
                // `LD/index.m3u8`.
                let url = variant.url.replacingOccurrences(of: "/\(variant.definition).m3u8", with: "/\(variant.definition)/index.m3u8")
                let playlist = String(decoding: try await S3TestClient.fetch(url).body, as: UTF8.self)
                #expect(playlist.contains("#EXT-X-TARGETDURATION:1\n"), "\(variant.definition): \(playlist)")
            }
        }
        #expect(TranscodePlan.withPositiveTargetDuration("#EXTM3U\n#EXT-X-TARGETDURATION:10\n") == nil)
    }

    @Test("a source that cannot be published as it is (MPEG-4 Part 2): VideoPlayable comes with the ladder, before its StreamTranscodeComplete events")
    func playableBeforeStreams() async throws {
        try await WebhookReceiver.with { receiver in
            try await MediaHarness.with(webhook: receiver.url) { harness in
                let videoId = try await harness.upload(try await harness.fixture(.oddSize, seconds: 2))
                #expect(try await harness.waitFor(videoId, ["Normal", "TranscodeFail"]).status == "Normal")
                let deadline = ContinuousClock.now + .seconds(60)
                while await !Self.events(receiver.recorder).contains(where: { $0.type == "TranscodeComplete" }),
                    ContinuousClock.now < deadline
                {
                    try await Task.sleep(for: .milliseconds(50))
                }
                let types = await Self.events(receiver.recorder).map(\.type)
                let playable = try #require(types.firstIndex(of: "VideoPlayable"), "\(types)")
                #expect(types.filter { $0 == "VideoPlayable" }.count == 1)
                #expect(playable < (types.firstIndex(of: "StreamTranscodeComplete") ?? -1), "\(types)")
            }
        }
    }

    @Test(
        "odd sources play in every rendition: a rotated portrait, sound only, no sound, odd sizes, a variable frame rate, 10-bit HEVC, cover art stored before the video, pixels that are not square",
        arguments: [
            MediaFixtures.Kind.rotatedPortrait, .audioOnly, .noAudio, .oddSize, .variableFrameRate, .hevc10Bit,
            .coverArtFirst, .anamorphic,
        ])
    func oddSources(_ kind: MediaFixtures.Kind) async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(kind)
            let videoId = try await harness.upload(source)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal", "\(kind): \(info.errorMessage ?? "")")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let original = try await MediaFixtures.probe(source)
            for stream in play.streams where stream.format != "m3u8" {
                let probed = try await MediaFixtures.probe(stream.url)
                #expect(abs((probed.duration ?? 0) - (original.duration ?? 0)) <= 0.15, "\(kind) \(stream.definition): \(probed.duration ?? 0)")
                // The sound of a source with picture is a rendition of its own.
                if stream.definition == "SQ", kind != .audioOnly {
                    #expect(stream.format == "m4a" && probed.codec("audio") == "aac" && probed.codec("video") == nil)
                    continue
                }
                switch kind {
                case .audioOnly:
                    #expect((stream.definition == "SQ" && stream.format == "m4a") || (stream.definition == "AUTO" && stream.format == "mpd"))
                    #expect(probed.codec("audio") == "aac" && probed.codec("video") == nil)
                case .rotatedPortrait:
                    // Displayed 270×480: the rendition is upright (no rotation left to apply) and portrait.
                    #expect(info.width == 270 && info.height == 480)
                    #expect(probed.width == 270 && probed.height == 480)
                case .coverArtFirst:
                    // The video, not the 64×64 cover before it, at its 25 frames a second.
                    #expect(info.width == 320 && info.height == 240)
                    #expect(probed.codec("video") == "h264" && probed.width == 320 && probed.height == 240)
                    #expect(probed.stream("video")?["avg_frame_rate"] as? String == "25/1", "\(stream.definition)")
                case .anamorphic:
                    // Displayed 426×240: every rendition keeps that shape in square pixels.
                    #expect(info.width == 426 && info.height == 240)
                    let (width, height) = (Double(probed.width ?? 0), Double(probed.height ?? 1))
                    #expect(abs(width / height - 426.0 / 240) < 0.02, "\(stream.definition): \(width)×\(height)")
                    #expect(["1:1", nil].contains(probed.stream("video")?["sample_aspect_ratio"] as? String), "\(stream.definition)")
                default:
                    #expect(probed.codec("video") == "h264")
                    #expect((probed.stream("video")?["pix_fmt"] as? String) == "yuv420p")
                    #expect((probed.width ?? 1) % 2 == 0 && (probed.height ?? 1) % 2 == 0)
                    #expect((probed.height ?? 10_000) <= (info.height ?? 0))
                }
            }
            // Every HLS stream reads to its end.
            if let hls = play.stream(format: "m3u8", definition: "AUTO") {
                let copy = harness.fixtures + "/copy-\(kind.rawValue).mp4"
                try await MediaFixtures.ffmpeg(["-i", hls.url, "-c", "copy", copy])
                #expect(abs(((try await MediaFixtures.probe(copy)).duration ?? 0) - (original.duration ?? 0)) <= 0.15)
            }
            if kind == .coverArtFirst || kind == .anamorphic {
                // The cover taken from the source is a frame of the video, not the picture stored before it, as wide
                // as it is displayed.
                let deadline = ContinuousClock.now + .seconds(30)
                var cover = try await harness.media.getVideoInfo(videoId: videoId).coverURL
                while cover == nil, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    cover = try await harness.media.getVideoInfo(videoId: videoId).coverURL
                }
                let picture = try await MediaFixtures.probe(try #require(cover))
                #expect(picture.width == info.width && picture.height == info.height, "\(kind)")
            }
        }
    }

    @Test("completion is detected from storage, whoever writes the source: a presigned PUT, the form endpoint")
    func anyWriter() async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(.noAudio)
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
            // A presigned PUT to the video's key (what an app server hands a browser).
            let presigned = try await harness.media.createUploadVideo(.init(title: "Presigned", fileName: "p.mp4"))
            let url = try harness.server.client().presignedURL(
                "PUT", S3TestClient.path(presigned.address.bucket, presigned.address.fileName))
            #expect(try await S3TestClient.fetchRaw("PUT", url, body: bytes).status == 200)
            // A form upload (Qiniu-style token) of the same key layout.
            let form = try await harness.media.createUploadVideo(.init(title: "Form", fileName: "f.mp4"))
            let token = UploadToken.make(
                accessKey: harness.server.root.accessKeyId, secretKey: harness.server.root.secretAccessKey,
                policy: PutPolicy(scope: form.address.bucket + ":" + form.address.fileName, deadline: Date().addingTimeInterval(3600)))
            let upload = FormUploader(endpoint: URL(string: harness.server.endpoint)!, token: token)
                .upload(file: URL(fileURLWithPath: source), key: form.address.fileName)
            _ = try await upload.result
            for videoId in [presigned.id, form.id] {
                let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
                #expect(info.status == "Normal" && info.size == Int64(bytes.count), "\(info.status) \(info.errorMessage ?? "")")
            }
        }
    }

    @Test("NoTranscode: UploadSucc → Normal with the original as the only definition (OD); the cover is still taken")
    func noTranscode() async throws {
        try await MediaHarness.with { harness in
            let source = try await harness.fixture(.landscape480)
            let videoId = try await harness.upload(source, transcode: "NoTranscode")
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(info.status == "Normal")
            #expect(info.templateGroupId == "NoTranscode")
            #expect(info.playable == true && info.playableTime != nil)
            #expect(abs((info.duration ?? 0) - 3) <= 0.1)
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            #expect(play.streams.map(\.definition) == ["OD"])
            #expect(play.streams.first?.format == "mp4" && play.streams.first?.width == 854)
            #expect(try await S3TestClient.fetch(try #require(play.streams.first).url).body == [UInt8](try Data(contentsOf: URL(fileURLWithPath: source))))
            #expect(try await harness.keys(under: "video/\(videoId)/out/").isEmpty)
            // The snapshot job runs after the status changed; wait for it.
            let deadline = ContinuousClock.now + .seconds(30)
            while try await harness.media.getVideoInfo(videoId: videoId).coverURL == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await harness.media.getVideoInfo(videoId: videoId).coverURL != nil)
        }
    }

    @Test("template groups: an unknown name is a 400 at creation; a configured group makes its own ladder")
    func templateGroups() async throws {
        let custom = TranscodeTemplates(
            groups: TranscodeTemplates.builtIn.groups + [
                .init(
                    name: "tiny", video: [.init(definition: "XS", height: 144, videoBitrate: 200, audioBitrate: 32)],
                    audio: .init(definition: "SQ", audioBitrate: 64), formats: ["mp4"])
            ], preset: "ultrafast", segmentSeconds: 2)
        try await MediaHarness.with(configure: { $0.mediaProcessing.templates = custom }) { harness in
            let refused = await #expect(throws: FerryError.self) {
                _ = try await harness.media.createUploadVideo(
                    { var d = MediaServiceClient.VideoDescription(title: "x", fileName: "x.mp4"); d.transcode = "nonesuch"; return d }())
            }
            #expect(refused?.httpStatus == 400)
            #expect(refused?.serverCode == "InvalidTemplateGroup.NotFound")
            let videoId = try await harness.upload(try await harness.fixture(.landscape480), transcode: "tiny")
            #expect(try await harness.waitFor(videoId, ["Normal", "TranscodeFail"]).status == "Normal")
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            #expect(play.streams.map { "\($0.definition)/\($0.format)" } == ["XS/mp4"])
            #expect(play.streams.first?.height == 144 && play.streams.first?.width == 256)
        }
    }

    @Test("the cover is a representative frame, not the black first second")
    func coverIsNotBlack() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.blackStart, seconds: 4), transcode: "NoTranscode")
            let deadline = ContinuousClock.now + .seconds(60)
            var cover: String?
            while cover == nil, ContinuousClock.now < deadline {
                cover = try await harness.media.getVideoInfo(videoId: videoId).coverURL
                if cover == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
            let url = try #require(cover)
            let picture = harness.fixtures + "/cover.jpg"
            try Data(try await S3TestClient.fetch(url).body).write(to: URL(fileURLWithPath: picture))
            // The mean luma of the picture (signalstats' YAVG): black is 16.
            let run = try await MediaFixtures.tool(
                "ffprobe", ["-v", "error", "-f", "lavfi", "-i", "movie=\(picture),signalstats",
                            "-show_entries", "frame_tags=lavfi.signalstats.YAVG", "-of", "csv=p=0"])
            let luma = Double(run.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").first ?? "") ?? 0
            #expect(luma > 40, "cover luma \(luma): \(run.errorOutput)")
        }
    }

    @Test("a cover is taken where a seek finds no frame (a clip of one frame, a raw H.264 stream), at the picture's own odd size")
    func coverWhereASeekFindsNoFrame() async throws {
        try await MediaHarness.with { harness in
            let clips: [(name: String, arguments: [String], size: (Int, Int))] = [
                ("one-frame.mp4", ["-f", "lavfi", "-i", "testsrc=size=640x360:rate=25", "-frames:v", "1", "-c:v", "libx264"], (640, 360)),
                ("raw.h264", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:d=3", "-c:v", "libx264", "-f", "h264"], (320, 240)),
                ("odd.mp4", ["-f", "lavfi", "-i", "testsrc=size=17x9:rate=25:d=2", "-c:v", "libx264", "-pix_fmt", "yuv444p"], (17, 9)),
            ]
            for clip in clips {
                let path = harness.fixtures + "/" + clip.name
                try await MediaFixtures.ffmpeg(clip.arguments + [path])
                let videoId = try await harness.upload(path, transcode: "NoTranscode")
                let deadline = ContinuousClock.now + .seconds(60)
                var info = try await harness.media.getVideoInfo(videoId: videoId)
                while info.coverURL == nil, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    info = try await harness.media.getVideoInfo(videoId: videoId)
                }
                let url = try #require(info.coverURL, "\(clip.name): \(info.status)")
                let picture = harness.fixtures + "/cover-" + clip.name + ".jpg"
                try Data(try await S3TestClient.fetch(url).body).write(to: URL(fileURLWithPath: picture))
                let probed = try await MediaFixtures.probe(picture)
                #expect(probed.width == clip.size.0 && probed.height == clip.size.1, "\(clip.name): \(probed.width ?? 0)×\(probed.height ?? 0)")
            }
        }
    }

    @Test("without ffmpeg the server runs, GetVideoInfo says why the uploaded video waits at UploadSucc, and its workers still finish the removal of a deleted video's files that a stopped node left")
    func withoutTools() async throws {
        let empty = TemporaryDirectory.make("ferry-no-tools")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        var webhook = WebhookConfiguration(url: URL(string: "http://127.0.0.1:9/none")!, secret: "s")
        webhook.initialBackoff = .seconds(600)
        try await TestServer.with(configure: { [webhook] in
            $0.mediaProcessing.workers = 1
            $0.mediaProcessing.pollInterval = .milliseconds(50)
            $0.mediaProcessing.toolsDirectory = empty
            $0.webhook = webhook
        }) { server in
            #expect(server.server.mediaTools == nil)
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            let ticket = try await media.createUploadVideo(.init(title: "Waits", fileName: "waits.mp4"))
            #expect(try await server.client(ticket.auth.credentials).put(ticket.address.bucket, ticket.address.fileName, [1, 2, 3]).status == 200)
            try await Task.sleep(for: .milliseconds(500))
            let info = try await media.getVideoInfo(videoId: ticket.id)
            #expect(info.status == "UploadSucc")
            #expect(info.statusMessage?.contains("ffmpeg and ffprobe are not installed") == true)
            let jobs = try await server.server.catalog.jobs(videoId: ticket.id)
            #expect(jobs.map(\.kind) == [.probe] && jobs.map(\.state) == [.queued])

            // A deletion a stopped node left half done: the video is Deleted with its removal job, its file is still
            // stored. The worker here (no ffmpeg) runs the removal: the file goes and VideoDeleted is sent. The probe
            // job above, which needs ffprobe, is never claimed.
            let deleted = try await media.createUploadVideo(.init(title: "Deleted", fileName: "deleted.mp4"))
            #expect(try await server.client(deleted.auth.credentials).put(deleted.address.bucket, deleted.address.fileName, [4]).status == 200)
            try await server.server.mediaCatalog.updateVideo(deleted.id) { video in
                video.status = VideoStatus.deleted
                return .save(enqueue: [MediaJob(videoId: video.videoId, kind: .removeFiles, maxAttempts: 10)], cancelJobs: true)
            }
            let deadline = ContinuousClock.now + .seconds(60)
            while try await server.server.catalog.jobs(videoId: deleted.id).contains(where: { $0.kind == .removeFiles && $0.state != .succeeded }),
                ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await server.server.catalog.jobs(videoId: deleted.id).filter { $0.kind == .removeFiles }.map(\.state) == [.succeeded])
            #expect(try await server.client().get(deleted.address.bucket, deleted.address.fileName).status == 404)
            #expect(try await server.server.webhooks.pending().contains { $0.type == .videoDeleted && $0.payload.videoId == deleted.id })
            let waiting = try await server.server.catalog.jobs(videoId: ticket.id)
            #expect(waiting.map(\.state) == [.queued] && waiting.map(\.attempts) == [0])
        }
    }
}
