import Crypto
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

@testable import FerryMedia
@testable import FerryServer

@Suite("Transcode plans, probes and playback tokens (pure)", .timeLimit(.minutes(10)))
struct TranscodePlanTests {
    @Test("a ladder's files are stored before the playlists that name them: segments, then each rendition's playlist and the storyboard's cues, then a definition's master playlist, then master.m3u8 and manifest.mpd (a playlist stored before its segments was served with them missing)")
    func storeOrder() {
        let files = [
            "HD.m3u8", "HD/index.m3u8", "HD/init.mp4", "HD/seg_00000.m4s", "LD.mp4", "SQ.m4a", "SQ/index.m3u8",
            "SQ/init.mp4", "SQ/seg_00000.m4s", "manifest.mpd", "master.m3u8", "storyboard.jpg", "storyboard.vtt",
            "start/index.m3u8", "start/seg_00000.m4s",
        ]
        #expect(WorkFiles.storeOrder(files) == [
            "HD/init.mp4", "HD/seg_00000.m4s", "LD.mp4", "SQ.m4a", "SQ/init.mp4", "SQ/seg_00000.m4s", "start/seg_00000.m4s",
            "storyboard.jpg", "HD/index.m3u8", "SQ/index.m3u8", "start/index.m3u8", "storyboard.vtt", "HD.m3u8",
            "manifest.mpd", "master.m3u8",
        ])
    }

    static let group = TranscodeTemplates.builtIn.groups[0]

    static func source(_ width: Int, _ height: Int, audio: Bool = true) -> MezzanineInfo {
        var info = MezzanineInfo(size: 1000)
        info.width = width
        info.height = height
        info.videoCodec = "h264"
        info.duration = 10
        if audio { info.audioCodec = "aac" }
        return info
    }

    static func ladder(_ info: MezzanineInfo) throws -> [String] {
        try TranscodePlan.make(for: info, group: group, templates: .builtIn).outputs.map {
            "\($0.definition)=\($0.width.map(String.init) ?? "-")x\($0.height.map(String.init) ?? "-")"
        }
    }

    @Test("the ladder never upscales: each definition that fits the shorter side, and the next one at the source's size")
    func ladderSelection() throws {
        #expect(try Self.ladder(Self.source(1920, 1080)) == ["LD=640x360", "SD=960x540", "HD=1280x720", "FHD=1920x1080"])
        #expect(try Self.ladder(Self.source(1280, 720)) == ["LD=640x360", "SD=960x540", "HD=1280x720"])
        #expect(try Self.ladder(Self.source(854, 480)) == ["LD=640x360", "SD=854x480"])
        #expect(try Self.ladder(Self.source(640, 360)) == ["LD=640x360"])
        #expect(try Self.ladder(Self.source(320, 240)) == ["LD=320x240"])
        // Portrait keeps its orientation and the same quality per definition (the shorter side is the width).
        #expect(try Self.ladder(Self.source(1080, 1920)) == ["LD=360x640", "SD=540x960", "HD=720x1280", "FHD=1080x1920"])
        // Odd sizes come out even.
        #expect(try Self.ladder(Self.source(321, 241)) == ["LD=320x240"])
        // Larger than the top rung: every rung, none bigger.
        #expect(try Self.ladder(Self.source(3840, 2160)) == ["LD=640x360", "SD=960x540", "HD=1280x720", "FHD=1920x1080"])
        // Sound only: the audio definition; neither: refused.
        var audio = MezzanineInfo(size: 1)
        audio.audioCodec = "opus"
        #expect(try Self.ladder(audio) == ["SQ=-x-"])
        #expect(throws: MediaProbe.Unreadable.self) { try Self.ladder(MezzanineInfo(size: 1)) }
        // A few kilobytes whose timestamps run for 22 hours are not a video; a minute of them, or a day in 1 MB, is.
        var gaps = Self.source(320, 240, audio: false)
        gaps.size = 8_400
        gaps.duration = 80_000
        #expect { try Self.ladder(gaps) } throws: {
            ($0 as? MediaProbe.Unreadable)?.reason.contains("80000 s of picture in 8400 bytes") == true
        }
        gaps.duration = 60
        #expect(try Self.ladder(gaps) == ["LD=320x240"])
        gaps.duration = 86_400
        gaps.size = 1_000_000
        #expect(try Self.ladder(gaps) == ["LD=320x240"])
        // A sliver would make a rendition no encoder takes: refused with its size.
        #expect { try Self.ladder(Self.source(1, 65_000)) } throws: {
            ($0 as? MediaProbe.Unreadable)?.reason.contains("would be 2×130000") == true
        }
        // A long strip within the bound is taken at its own size.
        #expect(try Self.ladder(Self.source(4096, 256)) == ["LD=4096x256"])
        // A picture whose size ffprobe gave as 0×0 (or none: past the decoders' pixel limit) is named as such, not as
        // no stream at all.
        #expect { try Self.ladder(Self.source(0, 0, audio: false)) } throws: {
            ($0 as? MediaProbe.Unreadable)?.reason.hasPrefix("The picture's size is not known") == true
        }
        // Past 8192×4320 pixels nothing is decoded: refused with its size (8K itself is taken).
        #expect(try Self.ladder(Self.source(8192, 4320)).count == 4)
        #expect { try Self.ladder(Self.source(16_000, 16_000)) } throws: {
            ($0 as? MediaProbe.Unreadable)?.reason.contains("16000×16000") == true
        }
    }

    @Test("a source longer than the server transcodes is read only to just past the limit, and its refusal names the seconds as set")
    func durationLimit() throws {
        #expect(MediaPipeline.seconds(3) == "3" && MediaPipeline.seconds(99.99) == "99.99")
        #expect(MediaPipeline.seconds(100.4) == "100.4" && MediaPipeline.seconds(43_200) == "43200")
        var plan = try TranscodePlan.make(for: Self.source(1280, 720), group: TranscodeTemplates.builtIn.groups[0], templates: .builtIn)
        #expect(!plan.encodeArguments(input: "in.mp4", directory: "out", progressFile: "p").contains("-t"))
        plan.sourceLimit = 61
        let arguments = plan.encodeArguments(input: "in.mp4", directory: "out", progressFile: "p")
        // An input option: before the source's -i.
        let limit = try #require(arguments.firstIndex(of: "-t"))
        #expect(arguments[limit + 1] == "61.000" && limit < (arguments.firstIndex(of: "-i") ?? 0))
        let packaging = plan.sourcePackageArguments(input: "in.mp4", directory: "out")
        #expect((packaging.firstIndex(of: "-t") ?? .max) < (packaging.firstIndex(of: "-i") ?? 0))
    }

    @Test("the first stream: the source when every player plays it as it is, else the lowest of two or more definitions")
    func firstStream() throws {
        func first(_ info: MezzanineInfo, group: TranscodeTemplates.Group = Self.group) throws -> String {
            switch try TranscodePlan.make(for: info, group: group, templates: .builtIn).firstStream(for: info) {
            case .source: "source"
            case .lowest(let output): output.definition
            case nil: "none"
            }
        }
        var h264 = Self.source(1920, 1080)
        h264.pixelFormat = "yuv420p"
        h264.fps = 30
        #expect(try first(h264) == "source")
        var silent = h264
        silent.audioCodec = nil
        #expect(try first(silent) == "source")
        // What some player cannot play as it is: the lowest definition is encoded first.
        for change in [
            { (info: inout MezzanineInfo) in info.videoCodec = "hevc" }, { $0.pixelFormat = "yuv420p10le" },
            { $0.rotation = 90 }, { $0.audioCodec = "opus" }, { $0.fps = 120 }, { $0.width = 3840; $0.height = 2160 },
        ] {
            var info = h264
            change(&info)
            #expect(try first(info) == "LD", "\(info)")
        }
        // One definition only (a 270p HEVC source), sound only, or no HLS: nothing would be gained.
        var small = h264
        small.videoCodec = "hevc"
        small.width = 480
        small.height = 270
        #expect(try first(small) == "none")
        var sound = MezzanineInfo(size: 1)
        sound.audioCodec = "aac"
        #expect(try first(sound) == "none")
        var mp4Only = Self.group
        mp4Only.formats = ["mp4"]
        #expect(try first(h264, group: mp4Only) == "none")
        // The lowest is encoded alone; the ladder then encodes only the others.
        var hevc = h264
        hevc.videoCodec = "hevc"
        let plan = try TranscodePlan.make(for: hevc, group: Self.group, templates: .builtIn)
        let rest = plan.encoding { $0.definition != "LD" }.encodeArguments(input: "in.mp4", directory: "/w", progressFile: "/w/p")
        #expect(!rest.contains("/w/LD.mp4") && rest.contains("/w/FHD.mp4"))
        let package = plan.sourcePackageArguments(input: "in.mp4", directory: "/w")
        #expect(package.contains("copy") && package.last == "/w/start/index.m3u8")
    }

    @Test("a rung encoded below its height gets a proportionally lower bit rate")
    func bitrates() throws {
        let plan = try TranscodePlan.make(for: Self.source(854, 480), group: Self.group, templates: .builtIn)
        // SD (540p, 1200 kbit/s) at 480p: 1200 × (480/540)² ≈ 948.
        #expect(plan.outputs.map(\.videoBitrate) == [700, 948])
    }

    @Test("one ffmpeg process decodes once and splits the picture; arguments are an array, the source a plain argument")
    func encodeArguments() throws {
        let plan = try TranscodePlan.make(for: Self.source(1280, 720), group: Self.group, templates: .builtIn)
        let input = "/work/job/source; rm -rf $HOME.mp4"
        let arguments = plan.encodeArguments(input: input, directory: "/work/job/out", progressFile: "/work/job/p.txt")
        #expect(arguments.filter { $0 == "-i" }.count == 1)
        #expect(arguments[arguments.firstIndex(of: "-i")! + 1] == input)
        let graph = try #require(arguments.firstIndex(of: "-filter_complex").map { arguments[$0 + 1] })
        #expect(graph.hasPrefix("[0:V:0]split=3[s0][s1][s2];"))
        #expect(graph.contains("scale=640:360") && graph.contains("scale=1280:720"))
        #expect(arguments.filter { $0.hasSuffix(".mp4") && $0.hasPrefix("/work/job/out/") }.count == 3)
        #expect(arguments.contains("+faststart") && arguments.contains("libx264") && arguments.contains("yuv420p"))
        let package = plan.packageArguments(for: plan.outputs[0], directory: "/w")
        #expect(package.contains("fmp4") && package.contains("copy") && package.last == "/w/LD/index.m3u8")
        // Picture and sound: the variants carry the picture only, and the sound of the highest definition becomes
        // the audio rendition SQ, copied, not encoded again.
        #expect(plan.separateAudio == "SQ")
        #expect(package[package.firstIndex(of: "-map")! + 1] == "0:v:0")
        let extract = try #require(plan.audioExtractArguments(directory: "/w"))
        #expect(extract[extract.firstIndex(of: "-i")! + 1] == "/w/HD.mp4" && extract.last == "/w/SQ.m4a")
        #expect(extract.contains("0:a:0") && extract.contains("copy") && !extract.contains("aac"))
        let audio = try #require(plan.audioOutput)
        #expect(audio.width == nil && audio.audioBitrate == plan.outputs[2].audioBitrate)
        #expect(plan.packageArguments(for: audio, directory: "/w").contains("/w/SQ.m4a"))
        var silent = Self.source(1280, 720)
        silent.audioCodec = nil
        #expect(try TranscodePlan.make(for: silent, group: Self.group, templates: .builtIn).separateAudio == nil)
    }

    @Test("ffprobe's JSON: size after rotation, frame rate, codecs; a cover picture is not the video")
    func probeParsing() throws {
        let json = """
            {"streams":[{"codec_type":"video","codec_name":"hevc","width":1920,"height":1080,"avg_frame_rate":"30000/1001",
            "pix_fmt":"yuv420p10le","side_data_list":[{"side_data_type":"Display Matrix","rotation":-90}]},
            {"codec_type":"audio","codec_name":"aac","sample_rate":"48000","channels":2,"bit_rate":"128000"}],
            "format":{"format_name":"mov,mp4","duration":"12.345","bit_rate":"5000000"}}
            """
        let info = try MediaProbe.parse(Data(json.utf8), size: 99)
        #expect(info.width == 1080 && info.height == 1920 && info.rotation == 270)
        // Only quarter turns (within a degree) turn the picture; other angles keep the stored size.
        for (angle, rotation) in [(-9.0, 0), (351.0, 0), (135.0, 0), (359.6, 0), (89.5, 90), (-180.0, 180), (45.0, 0)] {
            let tilted = try MediaProbe.parse(
                Data(#"{"streams":[{"codec_type":"video","width":320,"height":240,"side_data_list":[{"rotation":\#(angle)}]}],"format":{}}"#.utf8),
                size: 1)
            #expect(tilted.rotation == rotation, "\(angle)")
            #expect(rotation == 90 || (tilted.width == 320 && tilted.height == 240), "\(angle)")
        }
        #expect(info.fps == 29.97 && info.videoCodec == "hevc" && info.pixelFormat == "yuv420p10le")
        #expect(info.audioCodec == "aac" && info.audioSampleRate == 48000 && info.audioChannels == 2)
        #expect(info.duration == 12.345 && info.bitrate == 5_000_000 && info.size == 99)
        let cover = """
            {"streams":[{"codec_type":"video","codec_name":"mjpeg","width":500,"height":500,"disposition":{"attached_pic":1}},
            {"codec_type":"audio","codec_name":"mp3"}],"format":{"duration":"200"}}
            """
        let song = try MediaProbe.parse(Data(cover.utf8), size: 1)
        #expect(!song.hasVideo && song.hasAudio)
        // A length past any video's (a container that lies) is kept as unknown, whichever field says it.
        let lying = try MediaProbe.parse(
            Data(#"{"streams":[{"codec_type":"audio","duration":"1e300"}],"format":{"duration":"1e300"}}"#.utf8), size: 1)
        #expect(lying.duration == nil)
        #expect(SubtitlePlaylists.segmentCount(duration: 1e300, segmentSeconds: 4) == SubtitlePlaylists.maxSegments)
        #expect(throws: MediaProbe.Unreadable.self) { try MediaProbe.parse(Data("{}".utf8), size: 1) }
        #expect(throws: MediaProbe.Unreadable.self) { try MediaProbe.parse(Data("not json".utf8), size: 1) }
        #expect(MediaProbe.reason(fromStandardError: "") == "The file is not audio or video that ffprobe can read.")
        // The tool that said nothing is the one named (an ffmpeg run that made no cover is not ffprobe's).
        #expect(MediaPipeline.reason(errors: "/nonexistent/errors", directory: "/nonexistent") == "The file is not audio or video that ffmpeg can read.")
        // ffmpeg's heap addresses are left out of the reason a client reads.
        #expect(
            MediaProbe.reason(fromStandardError: "[h264 @ 0x55d0c8a4e2c0] no frame!\n[mov,mp4 @ 0x7f] moov atom not found\n")
                == "[h264] no frame! [mov,mp4] moov atom not found")
    }

    @Test("a master playlist lists every variant with bandwidth, resolution and codecs, lowest first")
    func masterPlaylist() throws {
        let plan = try TranscodePlan.make(for: Self.source(1280, 720), group: Self.group, templates: .builtIn)
        let text = TranscodePlan.masterPlaylist([
            (plan.outputs[2], 3_000_000, 2_500_000, "avc1.64001f,mp4a.40.2", 30),
            (plan.outputs[0], 900_000, 700_000, "avc1.64001e,mp4a.40.2", 30),
        ])
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[0] == "#EXTM3U")
        #expect(lines[3].contains("BANDWIDTH=900000") && lines[3].contains("RESOLUTION=640x360"))
        #expect(lines[4] == "LD/index.m3u8" && lines[6] == "HD/index.m3u8")
        let audio = try #require(plan.audioOutput)
        let grouped = TranscodePlan.masterPlaylist(
            [(plan.outputs[0], 900_000, 700_000, "avc1.64001e,mp4a.40.2", 30)], audio: (audio, 130_000, 128_000)
        ).split(separator: "\n").map(String.init)
        #expect(grouped[3] == "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME=\"Audio\",DEFAULT=YES,AUTOSELECT=YES,CHANNELS=\"2\",URI=\"SQ/index.m3u8\"")
        #expect(grouped[4].contains("BANDWIDTH=1030000") && grouped[4].contains("AVERAGE-BANDWIDTH=828000"))
        #expect(grouped[4].hasSuffix("AUDIO=\"audio\"") && grouped[5] == "LD/index.m3u8")
        #expect(TranscodePlan.codecs(videoProfile: "High", videoLevel: 31, hasVideo: true, hasAudio: true) == "avc1.64001f,mp4a.40.2")
        #expect(TranscodePlan.codecs(videoProfile: nil, videoLevel: nil, hasVideo: false, hasAudio: true) == "mp4a.40.2")
        let segments = TranscodePlan.segments(ofPlaylist: "#EXTM3U\n#EXTINF:4.000000,\nseg_00000.m4s\n#EXTINF:1.5,\nseg_00001.m4s\n#EXT-X-ENDLIST\n")
        #expect(segments.map(\.uri) == ["seg_00000.m4s", "seg_00001.m4s"] && segments.map(\.duration) == [4, 1.5])
        #expect(TranscodePlan.targetDuration(ofPlaylist: "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n") == 2)
        // The peak segment bit rate counts runs of 1 to 3 s for a 2 s target: a 33 ms last segment holding a key frame
        // (12 KB, 2.9 Mbit/s alone) is counted with the segment before it; a heavier full segment is the peak.
        let tail: [(duration: Double, bytes: Int64)] = [(2, 250_000), (2, 300_000), (2, 250_000), (0.033, 12_000)]
        #expect(TranscodePlan.peakSegmentBitrate(tail, targetDuration: 2) == 1_200_000)
        #expect(TranscodePlan.peakSegmentBitrate([(2, 250_000), (0.5, 100_000)], targetDuration: 2) == 1_120_000)
        #expect(TranscodePlan.peakSegmentBitrate([(0.1, 1000)], targetDuration: 2) == nil)
        #expect(TranscodePlan.peakSegmentBitrate([], targetDuration: 2) == nil)
        #expect(MediaPipeline.progressSeconds("frame=10\nout_time_us=1500000\nprogress=continue\n") == 1.5)
    }

    @Test("template files: checked names, numbers and formats; NoTranscode reserved; a default group required")
    func templateValidation() throws {
        #expect(throws: Never.self) { try TranscodeTemplates.builtIn.validate() }
        #expect(try TranscodeTemplates.builtIn.group(named: nil)?.name == "default")
        #expect(try TranscodeTemplates.builtIn.group(named: "NoTranscode") == nil)
        #expect(throws: TranscodeTemplates.UnknownGroup.self) { try TranscodeTemplates.builtIn.group(named: "x") }
        var bad = TranscodeTemplates.builtIn
        bad.groups[0].video[0].height = 361
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try bad.validate() }
        bad = TranscodeTemplates.builtIn
        bad.groups[0].name = "other"
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try bad.validate() }
        bad = TranscodeTemplates.builtIn
        bad.groups.append(.init(name: "NoTranscode", video: bad.groups[0].video, audio: bad.groups[0].audio))
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try bad.validate() }
        bad = TranscodeTemplates.builtIn
        bad.groups[0].formats = ["flv"]
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try bad.validate() }
        bad = TranscodeTemplates.builtIn
        bad.preset = "; rm -rf /"
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try bad.validate() }
        // A definition named as a video's own files would take them over (`master.m3u8`, the first stream's `start/`).
        for reserved in ["master", "start", "subtitles", "storyboard", "AUTO", "OD"] {
            bad = TranscodeTemplates.builtIn
            bad.groups[0].video[0].definition = reserved
            #expect(throws: TranscodeTemplates.InvalidTemplates.self, "\(reserved)") { try bad.validate() }
            bad = TranscodeTemplates.builtIn
            bad.groups[0].audio.definition = reserved
            #expect(throws: TranscodeTemplates.InvalidTemplates.self, "audio \(reserved)") { try bad.validate() }
        }
        // A rendition's media playlist: its own path, or the picture's playlist a definition's master names.
        let master = Rendition(
            definition: "LD", format: "m3u8", path: "LD.m3u8", width: 640, height: 360, bitrate: nil, duration: nil,
            fps: nil, size: 0, videoCodec: nil, audioCodec: nil)
        #expect(TranscodePlan.mediaPlaylistPath(of: master) == "LD/index.m3u8")
        var first = master
        first.path = "start/index.m3u8"
        #expect(TranscodePlan.mediaPlaylistPath(of: first) == "start/index.m3u8")
        let file = NSTemporaryDirectory() + "templates-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try Data(#"{"groups":[{"name":"default","video":[{"definition":"LD","height":360,"videoBitrate":600,"audioBitrate":64}],"audio":{"definition":"SQ","audioBitrate":96},"formats":["mp4"]}]}"#.utf8)
            .write(to: URL(fileURLWithPath: file))
        let loaded = try TranscodeTemplates.load(path: file)
        #expect(loaded.preset == "veryfast" && loaded.segmentSeconds == 4 && loaded.groups[0].video.count == 1)
        try Data("{".utf8).write(to: URL(fileURLWithPath: file))
        #expect(throws: TranscodeTemplates.InvalidTemplates.self) { try TranscodeTemplates.load(path: file) }
    }

    @Test("playback paths stay inside the video; each file asks for its audience; playlists carry a token to every URI of this service, and none to another host")
    func playbackPaths() throws {
        for good in ["master.m3u8", "LD/index.m3u8", "LD/seg_00001.m4s", "cover.jpg"] {
            #expect(PlaybackToken.isValidFilePath(good))
        }
        for bad in ["", "..", "../x", "LD/../x", "a//b", "/abs", "LD/", "a b", "x%2e", "a/b/c/d/e", "./x"] {
            #expect(!PlaybackToken.isValidFilePath(bad), "\(bad)")
        }
        #expect(PlaybackToken.Audience.accepted(forFile: "master.m3u8") == [.video])
        #expect(PlaybackToken.Audience.accepted(forFile: "LD/seg_00001.m4s") == [.video])
        #expect(PlaybackToken.Audience.accepted(forFile: "LD/init.mp4") == [.video])
        #expect(PlaybackToken.Audience.accepted(forFile: "LD.mp4") == [.video, .download])
        #expect(PlaybackToken.Audience.accepted(forFile: "cover.jpg") == [.thumbnail, .cover])
        #expect(PlaybackToken.Audience.accepted(forFile: "thumbnail.webp") == [.thumbnail])
        #expect(PlaybackToken.Audience.accepted(forFile: "animated.gif") == [.thumbnail, .video])
        #expect(PlaybackToken.Audience.accepted(forFile: "storyboard.vtt") == [.storyboard])
        let playlist = """
            #EXTM3U\r
            #EXT-X-MAP:URI="init.mp4"\r
            #EXTINF:2.0,\r
            seg_00001.m4s\r
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="SQ",URI="SQ/index.m3u8?x=1"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="a,xURI=",LANGUAGE="fr",URI="subtitles/a.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=800000,CODECS="avc1.64001f,mp4a.40.2",SUBTITLES="subs"
            LD/index.m3u8
            https://other.example/HD/index.m3u8
            //other.example/SD/index.m3u8
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="b",NAME="X",URI="HTTP://other.example/a.m3u8"
            #EXT-X-ENDLIST

            """
        #expect(
            PlaylistRewriter.addingQuery("token=T", to: playlist) == """
                #EXTM3U\r
                #EXT-X-MAP:URI="init.mp4?token=T"\r
                #EXTINF:2.0,\r
                seg_00001.m4s?token=T\r
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="SQ",URI="SQ/index.m3u8?x=1&token=T"
                #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="a,xURI=",LANGUAGE="fr",URI="subtitles/a.m3u8?token=T"
                #EXT-X-STREAM-INF:BANDWIDTH=800000,CODECS="avc1.64001f,mp4a.40.2",SUBTITLES="subs"
                LD/index.m3u8?token=T
                https://other.example/HD/index.m3u8
                //other.example/SD/index.m3u8
                #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="b",NAME="X",URI="HTTP://other.example/a.m3u8"
                #EXT-X-ENDLIST

                """)
        // A storyboard's cues name the sprite with the token before the tile's fragment; the header, a cue's
        // identifier and its timing line stay as they are.
        let storyboard = "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nstoryboard.jpg#xywh=0,0,160,90\n\n"
            + "00:00:01.000 --> 00:00:02.000\r\nstoryboard.jpg#xywh=160,0,160,90\r\n"
        #expect(
            PlaylistRewriter.addingQueryToCues("token=T", to: storyboard)
                == "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nstoryboard.jpg?token=T#xywh=0,0,160,90\n\n"
                + "00:00:01.000 --> 00:00:02.000\r\nstoryboard.jpg?token=T#xywh=160,0,160,90\r\n")
        #expect(PlaybackAuthorizer.allows(referer: "https://www.example.com/page", hosts: ["*.example.com"]))
        #expect(!PlaybackAuthorizer.allows(referer: "https://example.com/page", hosts: ["*.example.com"]))
        #expect(PlaybackAuthorizer.allows(referer: "https://Example.com/", hosts: ["example.com"]))
        #expect(!PlaybackAuthorizer.allows(referer: "https://evil.test/", hosts: ["example.com"]))
        #expect(!PlaybackAuthorizer.allows(referer: nil, hosts: ["example.com"]))
    }

    @Test("the DASH manifest lists each rendition's init and segments with their durations, video and audio apart")
    func dashManifest() throws {
        let ld = DashManifest.Representation(
            definition: "LD", bandwidth: 800_000, width: 640, height: 360, codecs: "avc1.64001e,mp4a.40.2", fps: 29.97,
            segments: [(4.004, "seg_00000.m4s"), (2.5, "seg_00001.m4s")])
        let sq = DashManifest.Representation(
            definition: "SQ", bandwidth: 130_000, width: nil, height: nil, codecs: "mp4a.40.2", fps: nil,
            segments: [(4, "seg_00000.m4s"), (2.5, "seg_00001.m4s")])
        let text = DashManifest.make([ld, sq])
        #expect(text.contains("type=\"static\" mediaPresentationDuration=\"PT6.504S\""))
        #expect(text.contains("<AdaptationSet id=\"0\" contentType=\"video\" mimeType=\"video/mp4\""))
        #expect(text.contains("<AdaptationSet id=\"1\" contentType=\"audio\" mimeType=\"audio/mp4\""))
        #expect(text.contains("<Representation id=\"LD\" bandwidth=\"800000\" width=\"640\" height=\"360\" frameRate=\"30000/1001\" codecs=\"avc1.64001e,mp4a.40.2\">"))
        #expect(text.contains("<Initialization sourceURL=\"LD/init.mp4\"/>"))
        #expect(text.contains("<S t=\"0\" d=\"4004\"/>\n            <S t=\"4004\" d=\"2500\"/>"))
        #expect(text.contains("<SegmentURL media=\"SQ/seg_00001.m4s\"/>"))
        // A signed video's manifest names every file with the token.
        let signed = DashManifest.addingQuery("token=a.b-c_d", to: text)
        #expect(signed.contains("<Initialization sourceURL=\"LD/init.mp4?token=a.b-c_d\"/>"))
        #expect(signed.contains("<SegmentURL media=\"SQ/seg_00001.m4s?token=a.b-c_d\"/>"))
        #expect(signed.components(separatedBy: "?token=").count - 1 == 6)
        // Well-formed XML, whose representations name every segment.
        let document = try? XMLDocument(xmlString: text)
        #expect(try document?.nodes(forXPath: "//*[local-name()='SegmentURL']").count == 4)
    }
}
