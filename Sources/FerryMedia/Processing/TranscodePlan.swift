import FerryStorage
import Foundation

/// What a transcode makes of one source with one template group, and the ffmpeg command lines that make it: a pure
/// value, tested without running anything.
///
/// The ladder never upscales: it takes every definition whose height fits the source's shorter side and, when the
/// source lies between two definitions, the next one up encoded at the source's own size (a 480p source gets LD at
/// 360p and SD at 480p). Every rendition is encoded once, by one ffmpeg process that decodes the source once and
/// splits the picture, into a progressive MP4 (faststart); HLS is then packaged from each MP4 without re-encoding.
package struct TranscodePlan: Sendable, Hashable {
    /// One rendition to encode.
    struct Output: Sendable, Hashable {
        /// `LD`, `SD`, … or the audio definition.
        var definition: String
        /// Picture size; nil for audio.
        var width: Int?
        var height: Int?
        /// kbit/s; nil for audio.
        var videoBitrate: Int?
        /// kbit/s.
        var audioBitrate: Int
        /// Whether the output carries sound.
        var hasAudio: Bool

        /// The progressive file: `LD.mp4`, or `SQ.m4a` for audio.
        var fileName: String { definition + (width == nil ? ".m4a" : ".mp4") }
        /// The progressive file's format name.
        var progressiveFormat: String { width == nil ? "m4a" : "mp4" }
        /// The HLS playlist: `LD/index.m3u8`.
        var playlistPath: String { definition + "/index.m3u8" }
    }

    /// Renditions, lowest first.
    var outputs: [Output]
    /// The audio rendition's definition (`SQ`) when a source with picture and sound is published with its sound
    /// apart: HLS variants and DASH representations of picture only, and one audio rendition taken without encoding
    /// again from the highest definition's MP4 (`SQ.m4a`, and `SQ/` as HLS) that every variant plays with. Nil for
    /// a source without sound, for a sound-only source (its one output is the audio rendition), and for a group that
    /// publishes no HLS.
    var separateAudio: String?
    /// Formats to publish (`m3u8`, `mp4`).
    var formats: [String]
    /// x264 preset.
    var preset: String
    /// HLS segment length, seconds.
    var segmentSeconds: Int
    /// Seconds of the source read at most (ffmpeg's input `-t`), nil for all: a source whose header understates its
    /// length, or gives none, is encoded only to just past the longest the server transcodes.
    var sourceLimit: Double?

    /// The fewest bits a second of a source with a picture longer than a minute: a still encoded for an hour takes
    /// far more (each frame a few bytes at least), a file whose timestamps lie far less.
    static let minBitsPerSecond = 64

    /// The longest side of a rendition (H.264 at 8K).
    static let maxOutputSide = 8192

    /// Key frames come every this many seconds, so segments of any multiple of it cut cleanly.
    static let keyFrameSeconds = 2

    /// The options every ffmpeg run starts with: no banner, no reading of standard input, no statistics, errors only
    /// in its standard error, and outputs overwritten.
    static let quietFlags = ["-hide_banner", "-nostdin", "-nostats", "-loglevel", "error", "-y"]

    /// Plans the renditions of a source; throws when the source has neither picture nor sound.
    static func make(for source: MezzanineInfo, group: TranscodeTemplates.Group, templates: TranscodeTemplates) throws
        -> TranscodePlan
    {
        var outputs: [Output] = []
        if source.hasVideo, source.isPictureTooLarge, let width = source.width, let height = source.height {
            throw MediaProbe.Unreadable(
                reason: "The picture is \(width)×\(height) pixels; at most \(MezzanineInfo.maxPixelsText) are transcoded.")
        }
        // Frames are made at a constant rate: a few kilobytes whose timestamps run for a day would keep a worker
        // encoding copies of three frames until its time limit.
        if source.hasVideo, let duration = source.duration, duration > 60,
            Double(source.size) * 8 / duration < Double(minBitsPerSecond)
        {
            throw MediaProbe.Unreadable(
                reason: "The file declares \(Int(duration)) s of picture in \(source.size) bytes (fewer than \(minBitsPerSecond) bits a second): its timestamps are not those of a video.")
        }
        // A picture of unknown size (past the decoders' pixel limit, or one ffmpeg cannot decode) is not dropped for
        // the sound beside it: refused.
        if source.hasVideo, (source.width ?? 0) <= 0 || (source.height ?? 0) <= 0 {
            throw MediaProbe.Unreadable(
                reason: "The picture's size is not known: it is larger than \(MezzanineInfo.maxPixelsText) pixels, which are not decoded, or ffmpeg cannot decode its frames (as an animated WebP's).")
        }
        if source.hasVideo, let width = source.width, let height = source.height, width > 0, height > 0 {
            let shortSide = min(width, height)
            let rungs = group.video.sorted { $0.height < $1.height }
            var chosen = rungs.filter { $0.height <= shortSide }.map { ($0, $0.height) }
            if chosen.last.map({ $0.1 < shortSide }) ?? true, let next = rungs.first(where: { $0.height > shortSide }) {
                // Between two rungs (or below the first): the next one up, at the source's own size.
                chosen.append((next, max(2, shortSide / 2 * 2)))
            }
            for (rung, target) in chosen {
                let (w, h) = size(sourceWidth: width, sourceHeight: height, shortSide: target)
                // A sliver (1×65000) would become a rendition no encoder takes.
                guard max(w, h) <= maxOutputSide else {
                    throw MediaProbe.Unreadable(
                        reason: "The picture is \(width)×\(height) pixels: its \(rung.definition) rendition would be \(w)×\(h), more than \(maxOutputSide) a side.")
                }
                let scale = Double(target) / Double(rung.height)
                outputs.append(
                    Output(
                        definition: rung.definition, width: w, height: h,
                        videoBitrate: max(100, Int((Double(rung.videoBitrate) * scale * scale).rounded())),
                        audioBitrate: rung.audioBitrate, hasAudio: source.hasAudio))
            }
        } else if source.hasAudio {
            outputs.append(
                Output(
                    definition: group.audio.definition, width: nil, height: nil, videoBitrate: nil,
                    audioBitrate: group.audio.audioBitrate, hasAudio: true))
        } else {
            throw MediaProbe.Unreadable(reason: "The file holds no audio or video stream.")
        }
        return TranscodePlan(
            outputs: outputs,
            separateAudio: source.hasVideo && source.hasAudio && outputs.contains { $0.width != nil } && group.formats.contains("m3u8")
                ? group.audio.definition : nil,
            formats: group.formats, preset: templates.preset, segmentSeconds: templates.segmentSeconds)
    }

    /// The picture size whose shorter side is `shortSide`, keeping the source's aspect; both even.
    static func size(sourceWidth: Int, sourceHeight: Int, shortSide: Int) -> (Int, Int) {
        func even(_ value: Double) -> Int { max(2, Int((value / 2).rounded()) * 2) }
        if sourceWidth >= sourceHeight {
            return (even(Double(sourceWidth) * Double(shortSide) / Double(sourceHeight)), shortSide)
        }
        return (shortSide, even(Double(sourceHeight) * Double(shortSide) / Double(sourceWidth)))
    }

    /// The input options that read at most ``sourceLimit`` seconds of the source.
    private var inputLimit: [String] { sourceLimit.map { ["-t", String(format: "%.3f", $0)] } ?? [] }

    /// The ffmpeg arguments that encode every output into `directory`, writing progress to `progressFile`.
    func encodeArguments(input: String, directory: String, progressFile: String) -> [String] {
        var arguments = Self.quietFlags + ["-progress", progressFile] + MediaInput.options + inputLimit + ["-i", input]
        let video = outputs.filter { $0.width != nil }
        if !video.isEmpty {
            // `V`: the first video stream that is not cover art, the one the probe described (`v` would take a cover
            // stored before the video).
            var graph = video.count == 1 ? "[0:V:0]" : "[0:V:0]split=\(video.count)" + (0..<video.count).map { "[s\($0)]" }.joined() + ";"
            graph += video.enumerated().map { index, output in
                (video.count == 1 ? "" : "[s\(index)]") + "scale=\(output.width ?? 2):\(output.height ?? 2),setsar=1[v\(index)]"
            }.joined(separator: ";")
            arguments += ["-filter_complex", graph]
        }
        var videoIndex = 0
        for output in outputs {
            if output.width != nil {
                let rate = output.videoBitrate ?? 100
                arguments += [
                    "-map", "[v\(videoIndex)]", "-c:v", "libx264", "-preset", preset, "-profile:v", "high",
                    "-pix_fmt", "yuv420p", "-b:v", "\(rate)k", "-maxrate", "\(rate * 3 / 2)k", "-bufsize", "\(rate * 2)k",
                    "-force_key_frames", "expr:gte(t,n_forced*\(Self.keyFrameSeconds))", "-sc_threshold", "0",
                    "-fpsmax", "60",
                ]
                videoIndex += 1
                if output.hasAudio { arguments += ["-map", "0:a:0"] }
            } else {
                arguments += ["-map", "0:a:0", "-vn"]
            }
            // The sound starts with the picture, with silence where the source has none yet (and in its gaps of more
            // than 0.1 s; overlaps that long are dropped): its place in time is kept by its samples, which a
            // rendition of the sound alone keeps too, where a start offset is lost once its segments are made on
            // their own (the picture, for its part, repeats frames).
            if output.hasAudio {
                arguments += ["-af", "aresample=async=1:first_pts=0"]
                arguments += ["-c:a", "aac", "-b:a", "\(output.audioBitrate)k", "-ac", "2"]
            }
            arguments += [
                "-map_metadata", "-1", "-movflags", "+faststart", "-f", "mp4", directory + "/" + output.fileName,
            ]
        }
        return arguments
    }

    /// How a video is made playable before its whole ladder is done: the first stream, published on its own.
    enum FirstStream: Sendable, Hashable {
        /// The source itself, packaged as HLS without encoding (``TranscodePlan/sourceIsPlayable(_:)``), as `OD`.
        case source
        /// The lowest definition, encoded on its own before the others (and not again with them).
        case lowest(Output)
    }

    /// The directory of the first stream's HLS files under the published prefix: apart from the ladder's, so that a
    /// player that started on it plays on after the ladder is published.
    package static let firstStreamDirectory = "start"

    /// The first stream of this plan for `source`: the source when it plays as it is, else the lowest definition when
    /// the ladder has more than one; nil when the ladder is no slower (one definition, sound only) or makes no HLS.
    func firstStream(for source: MezzanineInfo) -> FirstStream? {
        guard formats.contains("m3u8"), source.hasVideo else { return nil }
        if Self.sourceIsPlayable(source) { return .source }
        let pictures = outputs.filter { $0.width != nil }
        guard pictures.count > 1, let lowest = pictures.first else { return nil }
        return .lowest(lowest)
    }

    /// Whether every HLS player plays the source's streams as they are: H.264 in 8-bit 4:2:0, at most 1920×1080,
    /// not rotated, at most 60 frames a second, with AAC sound or none, in a container that gives its frames their
    /// times (a raw H.264 stream has none: copied into segments, it made one segment of no length).
    static func sourceIsPlayable(_ source: MezzanineInfo) -> Bool {
        guard source.videoCodec == "h264", ["yuv420p", "yuvj420p"].contains(source.pixelFormat ?? ""),
            !elementaryStreamFormats.contains(source.formatName ?? ""),
            let width = source.width, let height = source.height, max(width, height) <= 1920, min(width, height) <= 1080,
            (source.rotation ?? 0) % 360 == 0, (source.fps ?? 0) <= 60
        else { return false }
        return source.audioCodec == nil || source.audioCodec == "aac"
    }

    /// The formats (ffprobe's `format_name`) of a bare video stream, whose frames carry no times of their own.
    static let elementaryStreamFormats: Set = ["h264", "hevc", "m4v", "mpegvideo"]

    /// The ffmpeg arguments that package the source as HLS without encoding, into `directory`/``firstStreamDirectory``.
    /// Its sound, AAC (``sourceIsPlayable(_:)``), goes into MP4 segments as MP4 keeps it: a source that carries it in
    /// ADTS frames (MPEG-TS) has them taken off.
    func sourcePackageArguments(input: String, directory: String) -> [String] {
        let target = directory + "/" + Self.firstStreamDirectory
        return Self.quietFlags + MediaInput.options + inputLimit + [
            "-i", input, "-map", "0:V:0", "-map", "0:a:0?", "-c", "copy", "-bsf:a", "aac_adtstoasc", "-map_metadata", "-1",
        ] + hlsOutput(target)
    }

    /// The ffmpeg arguments that package an encoded output with its sound as the first stream, into
    /// `directory`/``firstStreamDirectory`` (`encoded` holds the output's MP4).
    func firstStreamPackageArguments(for output: Output, encoded: String, directory: String) -> [String] {
        copyArguments(encoded + "/" + output.fileName, map: "0", target: directory + "/" + Self.firstStreamDirectory)
    }

    /// The ffmpeg arguments that copy the streams `map` of the encoded file `input`, without encoding again, into an
    /// HLS media playlist in `target` (``hlsOutput(_:)``).
    func copyArguments(_ input: String, map: String, target: String) -> [String] {
        Self.quietFlags + ["-i", input, "-map", map, "-c", "copy"] + hlsOutput(target)
    }

    /// The ffmpeg output arguments of an HLS (fMP4) media playlist `index.m3u8` and its segments in `target`.
    ///
    /// Timestamps are kept as encoded (`-avoid_negative_ts disabled`): the picture starts at 0 and the sound's AAC
    /// priming before it, each skipped by its init segment's edit list. Shifted to start at 0 one rendition at a time
    /// (ffmpeg's default), the picture moved by its B-frame delay (67 ms at 30 fps) and the sound by its priming
    /// (21 ms), and separate video and audio renditions played 45 ms apart in browsers (Media Source Extensions)
    /// and AVPlayer alike.
    func hlsOutput(_ target: String) -> [String] {
        [
            "-avoid_negative_ts", "disabled", "-f", "hls", "-hls_time", String(segmentSeconds), "-hls_playlist_type", "vod",
            "-hls_segment_type", "fmp4",
            "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", target + "/seg_%05d.m4s",
            target + "/index.m3u8",
        ]
    }

    /// The part of the plan's pixels (width × height, summed over its renditions with a picture) that `output` makes:
    /// a measure of its share of the encode's work; 0 for a rendition without picture.
    func pixelShare(of output: Output) -> Double {
        func pixels(_ output: Output) -> Double { Double((output.width ?? 0) * (output.height ?? 0)) }
        let total = outputs.reduce(0) { $0 + pixels($1) }
        return total > 0 ? pixels(output) / total : 0
    }

    /// This plan with only the outputs `keep` accepts (the ladder once its first stream's definition is encoded).
    func encoding(only keep: (Output) -> Bool) -> TranscodePlan {
        var plan = self
        plan.outputs = outputs.filter(keep)
        return plan
    }

    /// The audio rendition of a plan with ``separateAudio``: the highest definition's sound, at its bit rate.
    var audioOutput: Output? {
        guard let separateAudio, let top = outputs.last(where: { $0.width != nil && $0.hasAudio }) else { return nil }
        return Output(
            definition: separateAudio, width: nil, height: nil, videoBitrate: nil, audioBitrate: top.audioBitrate, hasAudio: true)
    }

    /// The ffmpeg arguments that copy the sound of the highest definition's MP4 into the audio rendition's `.m4a`.
    func audioExtractArguments(directory: String) -> [String]? {
        guard let audio = audioOutput, let top = outputs.last(where: { $0.width != nil && $0.hasAudio }) else { return nil }
        return Self.quietFlags + [
            "-i", directory + "/" + top.fileName, "-map", "0:a:0", "-c", "copy", "-map_metadata", "-1", "-movflags",
            "+faststart", "-f", "mp4", directory + "/" + audio.fileName,
        ]
    }

    /// The ffmpeg arguments that package one encoded output as HLS (fMP4 segments) under `directory`: its picture
    /// only when the sound is a rendition of its own (``separateAudio``).
    func packageArguments(for output: Output, directory: String) -> [String] {
        let streams = separateAudio != nil && output.width != nil ? "0:v:0" : "0"
        return copyArguments(
            directory + "/" + output.fileName, map: streams, target: directory + "/" + output.definition)
    }

    /// The ffmpeg arguments that take a cover from the source: a representative frame (the `thumbnail` filter's
    /// pick among 50 frames from a tenth of the way in, so not a black first frame; from the start with
    /// `fromStart`), at most 1280 pixels wide, with the picture's aspect as displayed (square pixels; a JPEG's sides
    /// may be odd).
    static func snapshotArguments(input: String, duration: Double?, output: String, fromStart: Bool = false)
        -> [String]
    {
        let start = duration.map { max(0, min($0 * 0.1, 10)) } ?? 0
        return Self.quietFlags + (fromStart ? [] : ["-ss", String(format: "%.3f", start)]) + MediaInput.options + [
            "-i", input, "-map", "0:V:0", "-vf", "thumbnail=50,\(MediaInput.squarePixels),scale='min(1280,iw)':-1",
            "-frames:v", "1",
            "-q:v", "3", "-f", "image2", output,
        ]
    }

    /// The master playlist of one definition's picture with the sound (``separateAudio``): `LD.m3u8`, beside the
    /// master playlist of every definition, naming `LD/index.m3u8` and the audio rendition's playlist. It is what
    /// plays that definition alone with its sound.
    package static func definitionMasterPath(_ definition: String) -> String { definition + ".m3u8" }

    /// The media playlist of an HLS rendition: its path (`LD/index.m3u8`, `start/index.m3u8`), or for a definition's
    /// master playlist (`LD.m3u8`) the playlist of its picture it names, `LD/index.m3u8`.
    package static func mediaPlaylistPath(of rendition: Rendition) -> String {
        rendition.path.contains("/") ? rendition.path : rendition.definition + "/index.m3u8"
    }

    /// The group id of the audio rendition in the master playlist.
    static let audioGroup = "audio"

    /// An HLS master playlist listing every output's playlist with its bandwidth, resolution and codecs; with `audio`
    /// (the separate audio rendition), that rendition as the `AUDIO` group every variant plays with, its bit rate
    /// counted in theirs (`codecs` of a variant already name the sound).
    static func masterPlaylist(
        _ variants: [(output: Output, peakBitrate: Int, averageBitrate: Int, codecs: String, fps: Double?)],
        audio: (output: Output, peakBitrate: Int, averageBitrate: Int)? = nil
    ) -> String {
        var lines = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-INDEPENDENT-SEGMENTS"]
        if let audio {
            lines.append(
                "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"\(audioGroup)\",NAME=\"Audio\",DEFAULT=YES,AUTOSELECT=YES,CHANNELS=\"2\","
                    + "URI=\"\(audio.output.playlistPath)\"")
        }
        for variant in variants.sorted(by: { $0.peakBitrate < $1.peakBitrate }) {
            var attributes = [
                "BANDWIDTH=\(max(1, variant.peakBitrate + (audio?.peakBitrate ?? 0)))",
                "AVERAGE-BANDWIDTH=\(max(1, variant.averageBitrate + (audio?.averageBitrate ?? 0)))",
            ]
            if let width = variant.output.width, let height = variant.output.height {
                attributes.append("RESOLUTION=\(width)x\(height)")
            }
            if let fps = variant.fps { attributes.append(String(format: "FRAME-RATE=%.3f", fps)) }
            attributes.append("CODECS=\"\(variant.codecs)\"")
            if audio != nil { attributes.append("AUDIO=\"\(audioGroup)\"") }
            lines.append("#EXT-X-STREAM-INF:" + attributes.joined(separator: ","))
            lines.append(variant.output.playlistPath)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The RFC 6381 codecs string of an output from ffprobe's profile and level: `avc1.64001f,mp4a.40.2`.
    static func codecs(videoProfile: String?, videoLevel: Int?, hasVideo: Bool, hasAudio: Bool) -> String {
        var codecs: [String] = []
        if hasVideo {
            let profile: String
            switch videoProfile?.lowercased() {
            case "baseline", "constrained baseline": profile = "42e0"
            case "main": profile = "4d40"
            default: profile = "6400"
            }
            codecs.append("avc1." + profile + String(format: "%02x", min(max(videoLevel ?? 40, 0), 255)))
        }
        if hasAudio { codecs.append("mp4a.40.2") }
        return codecs.joined(separator: ",")
    }

    /// `playlist` with `#EXT-X-TARGETDURATION:0` made 1; nil when it has no such line.
    static func withPositiveTargetDuration(_ playlist: String) -> String? {
        let zero = "#EXT-X-TARGETDURATION:0\n"
        guard let range = playlist.range(of: zero) else { return nil }
        return playlist.replacingCharacters(in: range, with: "#EXT-X-TARGETDURATION:1\n")
    }

    /// The `#EXT-X-TARGETDURATION` of a media playlist, in seconds; nil when it has none.
    static func targetDuration(ofPlaylist text: String) -> Double? {
        let tag = "#EXT-X-TARGETDURATION:"
        let line = text.split(whereSeparator: \.isNewline).first { $0.hasPrefix(tag) }
        return line.flatMap { Double($0.dropFirst(tag.count)) }
    }

    /// The peak segment bit rate of a media playlist's segments (RFC 8216 §4.1, what `BANDWIDTH` states): the largest
    /// bit rate of any run of consecutive segments lasting 0.5 to 1.5 times the target duration, so that a short last
    /// segment (a frame or two past the last key frame) is counted with the one before it rather than alone, where
    /// its key frame made it look many times the stream's rate. Nil when no run lasts that long (a playlist shorter
    /// than half its target duration).
    static func peakSegmentBitrate(_ segments: [(duration: Double, bytes: Int64)], targetDuration: Double) -> Int? {
        var peak: Int?
        for start in segments.indices {
            var (duration, bytes) = (0.0, Int64(0))
            for segment in segments[start...] {
                duration += segment.duration
                bytes += segment.bytes
                if duration > targetDuration * 1.5 { break }
                if duration >= targetDuration * 0.5, let rate = ProbeReport.integer(Double(bytes) * 8 / duration) {
                    peak = max(peak ?? 0, rate)
                }
            }
        }
        return peak
    }

    /// Segment durations (seconds) and file names of a media playlist, in order.
    static func segments(ofPlaylist text: String) -> [(duration: Double, uri: String)] {
        var result: [(Double, String)] = []
        var pending: Double?
        for line in text.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("#EXTINF:") {
                pending = Double(line.dropFirst("#EXTINF:".count).split(separator: ",").first ?? "")
            } else if !line.isEmpty, !line.hasPrefix("#"), let duration = pending {
                result.append((duration, line))
                pending = nil
            }
        }
        return result
    }
}
