import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// A video plays within seconds of its upload: its first stream is published while the ladder is still encoded.
@Suite("First stream: a video plays before its ladder is done (SQLite and PostgreSQL)", .serialized)
struct FirstStreamTests {
    @Test(
        "the first stream plays while the video is Transcoding (VideoPlayable, Playable), then the ladder replaces it and a player that started on it plays on",
        arguments: [
            (MediaFixtures.Kind.landscape480, "OD", QuotaBackend.sqlite), (.hevc480, "LD", .sqlite),
            (.transportStream480, "OD", .sqlite),
            (.landscape480, "OD", .postgres),
        ])
    func firstStream(kind: MediaFixtures.Kind, definition: String, backend: QuotaBackend) async throws {
        let gate = TemporaryDirectory.make("ferry-gate") + "/open"
        defer { try? FileManager.default.removeItem(atPath: (gate as NSString).deletingLastPathComponent) }
        let tools = try MediaFixtures.heldTools(gate: gate)
        defer { try? FileManager.default.removeItem(atPath: tools) }
        try await backend.withCatalog { catalog in
            try await WebhookReceiver.with { receiver in
                try await MediaHarness.with(webhook: receiver.url, configure: {
                    catalog(&$0)
                    $0.mediaProcessing.toolsDirectory = tools
                }) { harness in
                    let source = try await harness.fixture(kind)
                    let videoId = try await harness.upload(source)

                    // Playable while Transcoding: the ladder's encode is held.
                    let deadline = ContinuousClock.now + .seconds(120)
                    var info = try await harness.media.getVideoInfo(videoId: videoId)
                    while info.playable != true, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(100))
                        info = try await harness.media.getVideoInfo(videoId: videoId)
                    }
                    #expect(info.playable == true && info.status == "Transcoding", "\(info.status) \(info.errorMessage ?? "")")
                    #expect(info.playableTime != nil)
                    let early = try await harness.media.getPlayInfo(videoId: videoId)
                    #expect(early.status == "Transcoding")
                    #expect(Set(early.streams.map { "\($0.definition)/\($0.format)" }) == ["\(definition)/m3u8", "AUTO/m3u8"])
                    let master = try #require(early.stream(format: "m3u8", definition: "AUTO"))
                    let first = try #require(early.stream(format: "m3u8", definition: definition))
                    // Asked for its definition alone, the first stream's URL opens that definition only.
                    let narrowed = try await harness.media.getPlayInfo(videoId: videoId, definitions: [definition])
                    let firstAlone = try #require(narrowed.stream(format: "m3u8", definition: definition))
                    #expect(firstAlone.url.contains("start/index.m3u8?token="), "\(firstAlone.url)")
                    // Its master playlist is revalidated (the ladder's replaces it) and names the one stream.
                    let masterAnswer = try await S3TestClient.fetch(master.url)
                    #expect(masterAnswer.status == 200 && masterAnswer.header("cache-control") == "no-cache")
                    let masterText = String(decoding: masterAnswer.body, as: UTF8.self)
                    #expect(masterText.components(separatedBy: "#EXT-X-STREAM-INF").count - 1 == 1)
                    #expect(masterText.contains("start/index.m3u8") && masterText.contains("CODECS=\"avc1."))
                    // ffmpeg plays the whole video through it, picture and sound.
                    let copy = harness.fixtures + "/first.mp4"
                    try await MediaFixtures.ffmpeg(["-i", master.url, "-c", "copy", copy])
                    let copied = try await MediaFixtures.probe(copy)
                    #expect(abs((copied.duration ?? 0) - 3) <= 0.2, "the first stream lasts \(copied.duration ?? 0)")
                    #expect(copied.codec("video") == "h264" && copied.codec("audio") == "aac")
                    // A subtitle track joins the first stream's master playlist, which is still revalidated.
                    _ = try await harness.media.addSubtitle(
                        videoId: videoId, language: "en", content: "WEBVTT\n\n00:00:00.500 --> 00:00:02.000\nHello\n")
                    let subtitled = try await S3TestClient.fetch(master.url)
                    #expect(subtitled.status == 200 && subtitled.header("cache-control") == "no-cache")
                    #expect(String(decoding: subtitled.body, as: UTF8.self).contains("TYPE=SUBTITLES"))
                    let before = await MediaProcessingTests.events(receiver.recorder).map(\.type)
                    #expect(!before.contains("TranscodeComplete") && !before.contains("StreamTranscodeComplete"), "\(before)")

                    // The ladder is let go; the video becomes Normal with every definition under the master playlist.
                    #expect(FileManager.default.createFile(atPath: gate, contents: nil))
                    let done = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
                    #expect(done.status == "Normal" && done.playable == true && done.playableTime == info.playableTime)
                    let play = try await harness.media.getPlayInfo(videoId: videoId)
                    #expect(Set(play.streams.map { "\($0.definition)/\($0.format)" }) == ["LD/m3u8", "LD/mp4", "SD/m3u8", "SD/mp4", "SQ/m3u8", "SQ/m4a", "AUTO/m3u8", "AUTO/mpd"])
                    let ladder = try #require(play.stream(format: "m3u8", definition: "AUTO"))
                    let ladderAnswer = try await S3TestClient.fetch(ladder.url)
                    #expect(ladderAnswer.header("cache-control") != "no-cache")
                    let ladderText = String(decoding: ladderAnswer.body, as: UTF8.self)
                    #expect(ladderText.contains("LD/index.m3u8") && ladderText.contains("SD/index.m3u8") && !ladderText.contains("start/"))
                    // A player that loaded the first stream's playlist before the switch still gets every file it names,
                    // also through the URL restricted to the first stream's definition.
                    for url in [first.url, firstAlone.url] {
                        let answer = try await S3TestClient.fetch(url)
                        #expect(answer.status == 200, "\(url): \(answer.status)")
                        let firstPlaylist = String(decoding: answer.body, as: UTF8.self)
                        let base = try #require(url.components(separatedBy: "index.m3u8").first)
                        var names = firstPlaylist.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map(String.init)
                        #expect(!names.isEmpty)
                        if let map = firstPlaylist.range(of: "#EXT-X-MAP:URI=\"") {
                            names.append(String(firstPlaylist[map.upperBound...].prefix { $0 != "\"" }))
                        }
                        for name in names { #expect(try await S3TestClient.fetch(base + name).status == 200, "\(name)") }
                    }
                    // They stay for the retention time (24 h by default): a job that removes them waits until then.
                    let retire = try await harness.server.server.mediaCatalog.jobs(videoId: videoId).filter { $0.kind == .retireFirstStream }
                    #expect(retire.map(\.state) == [.queued])
                    #expect((retire.first?.runAt.timeIntervalSinceNow ?? 0) > 86_000)

                    // One VideoPlayable, naming the first stream, before the transcode's events.
                    let until = ContinuousClock.now + .seconds(60)
                    while await MediaProcessingTests.events(receiver.recorder).last?.type != "TranscodeComplete", ContinuousClock.now < until {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    let events = await MediaProcessingTests.events(receiver.recorder)
                    let playable = events.filter { $0.type == "VideoPlayable" }
                    #expect(playable.count == 1)
                    #expect(playable.first?.payload["Definition"] as? String == definition)
                    let types = events.map(\.type)
                    #expect(
                        (types.firstIndex(of: "VideoPlayable") ?? .max) < (types.firstIndex(of: "StreamTranscodeComplete") ?? -1),
                        "\(types)")
                }
            }
        }
    }

    @Test("while a first stream's lowest definition is encoded (a source players cannot play as it is), ProcessingProgress counts it, and it never goes back once the ladder runs")
    func progressWhileFirstStreamEncodes() async throws {
        let gate = TemporaryDirectory.make("ferry-gate") + "/open"
        defer { try? FileManager.default.removeItem(atPath: (gate as NSString).deletingLastPathComponent) }
        // The first stream's encode says it is half way (1.5 s of 3 s), then waits for the gate.
        let tools = try MediaFixtures.tools(
            ladder: "", firstStream: """
                printf 'out_time_us=1500000\\nprogress=continue\\n' > "$progress"
                while [ ! -f '\(gate)' ]; do sleep 0.1; done
                """)
        defer { try? FileManager.default.removeItem(atPath: tools) }
        try await MediaHarness.with(configure: {
            $0.mediaProcessing.toolsDirectory = tools
            // The progress is saved with the lease's renewals, every third of it.
            $0.mediaProcessing.lease = .seconds(3)
        }) { harness in
            let videoId = try await harness.upload(try await harness.fixture(.hevc480))
            let deadline = ContinuousClock.now + .seconds(60)
            var info = try await harness.media.getVideoInfo(videoId: videoId)
            while (info.processingProgress ?? 0) == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                info = try await harness.media.getVideoInfo(videoId: videoId)
            }
            // LD (640×360) is about a third of the ladder's pixels (LD and SD 854×480): half of it is about 16 %.
            let during = try #require(info.processingProgress, "\(info.status)")
            #expect((10...25).contains(during), "\(during)")
            #expect(info.status == "Transcoding" && info.playable != true)

            #expect(FileManager.default.createFile(atPath: gate, contents: nil))
            var last = during
            while info.status == "Transcoding", ContinuousClock.now < deadline + .seconds(60) {
                info = try await harness.media.getVideoInfo(videoId: videoId)
                if let now = info.processingProgress {
                    #expect(now >= last, "ProcessingProgress went back from \(last) to \(now)")
                    last = now
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(info.status == "Normal", "\(info.status) \(info.errorMessage ?? "")")
        }
    }

    @Test(
        "a video whose ladder fails after its first stream was published is TranscodeFail and stays playable at that stream, its whole length; a bare H.264 stream's first stream is encoded, its frames having no times to copy",
        arguments: [(MediaFixtures.Kind.landscape480, "OD"), (.rawH264, "LD")])
    func ladderFailsAfterFirstStream(kind: MediaFixtures.Kind, definition: String) async throws {
        let tools = try MediaFixtures.tools(ladder: "echo 'Conversion failed!' >&2; exit 1")
        defer { try? FileManager.default.removeItem(atPath: tools) }
        try await MediaHarness.with(configure: { $0.mediaProcessing.toolsDirectory = tools }) { harness in
            let videoId = try await harness.upload(try await harness.fixture(kind))
            let failed = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            #expect(failed.status == "TranscodeFail" && failed.errorCode == "TranscodeError")
            #expect(failed.playable == true && failed.playableTime != nil)
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            #expect(Set(play.streams.map { "\($0.definition)/\($0.format)" }) == ["\(definition)/m3u8", "AUTO/m3u8"])
            let master = try #require(play.stream(format: "m3u8", definition: "AUTO"))
            let copy = harness.fixtures + "/played.mp4"
            try await MediaFixtures.ffmpeg(["-i", master.url, "-c", "copy", copy])
            #expect(abs((try await MediaFixtures.probe(copy).duration ?? 0) - 3) <= 0.2)
            // The playlist says how long its segments last.
            let first = try #require(play.stream(format: "m3u8", definition: definition))
            let playlist = String(decoding: try await S3TestClient.fetch(first.url).body, as: UTF8.self)
            let listed = playlist.split(separator: "\n").filter { $0.hasPrefix("#EXTINF:") }
                .compactMap { Double($0.dropFirst(8).prefix { $0 != "," }) }.reduce(0, +)
            #expect(abs(listed - 3) <= 0.2, "\(playlist)")
        }
    }

    @Test(
        "once the ladder has replaced the first stream for the retention time, the first stream's files are removed and the ladder plays on",
        arguments: [QuotaBackend.sqlite, .postgres])
    func firstStreamRetired(backend: QuotaBackend) async throws {
        try await backend.withCatalog { catalog in
            try await MediaHarness.with(configure: {
                catalog(&$0)
                $0.mediaProcessing.firstStreamRetention = .zero
            }) { harness in
                let videoId = try await harness.upload(try await harness.fixture(.landscape480))
                let done = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
                #expect(done.status == "Normal" && done.playable == true)
                let server = harness.server.server
                let video = try #require(try await server.mediaCatalog.video(videoId))
                let prefix = try #require(video.outputPrefix)
                func firstStreamKeys() async throws -> [String] {
                    try await server.store.listObjects(
                        bucket: video.bucket, prefix: prefix + "/start/", delimiter: nil, startAfter: nil, maxKeys: 1000
                    ).objects.map(\.key)
                }
                let deadline = ContinuousClock.now + .seconds(60)
                var jobs = try await server.mediaCatalog.jobs(videoId: videoId)
                while jobs.first(where: { $0.kind == .retireFirstStream })?.state != .succeeded, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    jobs = try await server.mediaCatalog.jobs(videoId: videoId)
                }
                #expect(jobs.filter { $0.kind == .retireFirstStream }.map(\.state) == [.succeeded])
                #expect(try await firstStreamKeys() == [])
                // The ladder's files are all there: ffmpeg plays the whole video through its master playlist.
                let play = try await harness.media.getPlayInfo(videoId: videoId)
                let master = try #require(play.stream(format: "m3u8", definition: "AUTO"))
                let copy = harness.fixtures + "/ladder.mp4"
                try await MediaFixtures.ffmpeg(["-i", master.url, "-c", "copy", copy])
                let copied = try await MediaFixtures.probe(copy)
                #expect(abs((copied.duration ?? 0) - 3) <= 0.2, "the ladder plays \(copied.duration ?? 0) s")
                #expect(copied.codec("video") == "h264" && copied.codec("audio") == "aac")
                let gone = master.url.replacingOccurrences(of: "master.m3u8", with: "start/index.m3u8")
                #expect(gone != master.url)
                #expect(try await S3TestClient.fetch(gone).status == 404)
            }
        }
    }
}
