import FerryTestSupport
import Foundation
import Testing

@testable import FerryMedia
@testable import FerryServer

@Suite("ffprobe's report: one model for the probe and the transcode's measurements", .timeLimit(.minutes(10)))
struct ProbeReportTests {
    @Test("odd output — strings for numbers, missing or mistyped fields, stray entries — is read as far as it makes sense")
    func oddOutput() throws {
        let json = """
            {"streams":[42, null, "x",
              {"codec_type":"video","codec_name":7,"width":"1920","height":1080.0,"pix_fmt":["yuv420p"],
               "avg_frame_rate":"0/0","r_frame_rate":"25/1","bit_rate":"N/A","level":"31","profile":null,
               "disposition":"none","tags":{"rotate":"90"},"side_data_list":"missing"},
              {"codec_type":"audio","sample_rate":"44100.5","channels":"2","duration":"1e400"}],
             "format":{"duration":"  12.5 ","bit_rate":1e300,"format_name":{"a":1}}}
            """
        let report = try ProbeReport.decode(Data(json.utf8))
        #expect(report.streams.count == 2)
        let video = try #require(report.video)
        #expect(video.codecName == nil && video.width == 1920 && video.height == 1080 && video.pixelFormat == nil)
        #expect(video.level == 31 && video.profile == nil && video.bitRate == nil && !video.isAttachedPicture)
        #expect(video.rotation == 90)
        let audio = try #require(report.audio)
        #expect(audio.sampleRate == nil && audio.channels == 2 && audio.duration == nil)
        #expect(report.format.duration == 12.5 && report.format.bitRate == 1e300 && report.format.formatName == nil)

        let info = try report.mezzanine(size: 1000)
        // Displayed turned by 90°; a rate of 0/0 falls back to the base rate; a bit rate too large for Int is unknown,
        // and worked out from the size instead.
        #expect(info.width == 1080 && info.height == 1920 && info.rotation == 90 && info.fps == 25)
        #expect(info.duration == 12.5 && info.bitrate == Int(1000.0 * 8 / 12.5))
        #expect(info.videoCodec == nil && info.audioChannels == 2)

        // A picture attached as cover art is not the video; the display matrix wins over the old tag.
        let song = try ProbeReport.decode(
            Data(
                """
                {"streams":[{"codec_type":"video","disposition":{"attached_pic":"1"}},{"codec_type":"audio","codec_name":"mp3"},
                {"codec_type":"video","codec_name":"h264","tags":{"rotate":"90"},
                 "side_data_list":[{"rotation":-180.4},{"side_data_type":"x"},7]}]}
                """.utf8))
        #expect(song.video?.codecName == "h264" && song.video?.rotation == 180)

        // Without a stream to play, or without a JSON object at all, the file is unreadable — not a crash.
        for text in ["{}", #"{"streams":{"codec_type":"video"}}"#, "[]", "null", "not json", ""] {
            #expect(throws: MediaProbe.Unreadable.self, "\(text)") { try MediaProbe.parse(Data(text.utf8), size: 1) }
        }
        // A container longer than streams that begin at 0 (a variable frame rate's last frame) counts no late start;
        // one whose streams begin late (an MP4's empty edit) counts it.
        for (start, expected) in [("0.000000", nil), ("10.000000", 10.0)] as [(String, Double?)] {
            let report = try ProbeReport.decode(Data("""
                {"streams":[{"codec_type":"video","codec_name":"h264","start_time":"\(start)","duration":"16.800000"}],
                 "format":{"format_name":"mov,mp4,m4a,3gp,3g2,mj2","start_time":"0.000000","duration":"\(Double(start)! + 16.9)"}}
                """.utf8))
            let info = try report.mezzanine(size: 1000)
            #expect(info.startTime.map { abs($0 - (expected ?? -1)) < 0.001 } ?? (expected == nil), "\(start): \(String(describing: info.startTime))")
        }

        // Pixels that are not square make the picture as wide as it is displayed (before its rotation); a ratio that is
        // unknown, unreadable or past 1:4 to 4:1 is taken as square.
        for (ratio, rotate, width, height) in [
            ("32:27", 0, 852, 480), ("8:9", 0, 640, 480), ("32:27", 90, 480, 852), ("1:1", 0, 720, 480),
            ("0:1", 0, 720, 480), ("100:1", 0, 720, 480), ("1:100", 0, 720, 480), ("x", 0, 720, 480), ("4:0", 0, 720, 480),
        ] {
            let report = try ProbeReport.decode(Data("""
                {"streams":[{"codec_type":"video","codec_name":"h264","width":720,"height":480,
                 "sample_aspect_ratio":"\(ratio)","tags":{"rotate":"\(rotate)"}}]}
                """.utf8))
            let info = try report.mezzanine(size: 1000)
            #expect(info.width == width && info.height == height, "\(ratio) \(rotate)°: \(info.width ?? 0)×\(info.height ?? 0)")
        }

        // The transcode's measurements of an empty report are all unknown.
        let nothing = ProbeReport().measured
        #expect(nothing.width == nil && nothing.duration == nil && nothing.videoLevel == nil)
    }

    @Test("real ffprobe output of every fixture reads as ffprobe says, for the probe and the measurements")
    func realOutput() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let directory = TemporaryDirectory.make("ferry-probe")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for kind in MediaFixtures.Kind.allCases where kind != .long {
            let path = try await MediaFixtures.make(kind, seconds: 2, in: directory)
            let run = try await MediaFixtures.tool("ffprobe", MediaProbe.arguments(for: path))
            #expect(run.status == 0, "\(kind): \(run.errorOutput)")
            let report = try ProbeReport.decode(Data(run.output.utf8))
            let expected = try await MediaFixtures.probe(path)
            let size = Int64((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
            let info = try report.mezzanine(size: size)
            #expect(info.videoCodec == expected.codec("video"), "\(kind)")
            #expect(info.audioCodec == expected.codec("audio"), "\(kind)")
            #expect(info.duration == expected.duration, "\(kind)")
            // A bare H.264 stream declares neither its length nor its bit rate.
            #expect(info.formatName != nil && (info.bitrate ?? 0 > 0) == (kind != .rawH264), "\(kind)")
            let measured = report.measured
            #expect(measured.width == expected.width && measured.height == expected.height, "\(kind)")
            #expect(measured.videoCodec == expected.codec("video") && measured.audioCodec == expected.codec("audio"), "\(kind)")
            switch kind {
            case .rotatedPortrait:
                // Stored 480×270, displayed turned.
                #expect(info.rotation == 90 && info.width == 270 && info.height == 480)
            case .landscape480:
                #expect(info.width == 854 && info.height == 480 && info.fps == 30 && info.pixelFormat == "yuv420p")
                #expect(info.audioSampleRate == 48000 && info.audioChannels == 1)
                #expect(measured.videoProfile != nil && (measured.videoLevel ?? 0) > 0)
            case .audioOnly:
                #expect(!info.hasVideo && info.hasAudio && info.width == nil)
            case .hevc10Bit:
                #expect(info.pixelFormat == "yuv420p10le")
            case .anamorphic:
                // Stored 360×240, displayed as wide as its 32:27 pixels make it.
                #expect(info.width == 426 && info.height == 240)
            default:
                #expect(info.hasVideo, "\(kind)")
            }
        }
    }
}
