import Foundation

/// Small media files made with ffmpeg's lavfi sources (nothing large is committed), and ffprobe to check what the
/// service made of them.
public enum MediaFixtures {
    /// ffmpeg and ffprobe behind a wrapper that holds the ladder's encode (the run that writes `progress.txt`) until
    /// `gate` exists, so that a test sees a video between its first stream and its ladder.
    public static func heldTools(gate: String) throws -> String {
        try tools(ladder: "while [ ! -f '\(gate)' ]; do sleep 0.1; done")
    }

    /// A directory of ffmpeg and ffprobe behind a wrapper that runs `ladder` (shell) before the ladder's encode, and
    /// `firstStream` before the encode of a first stream (its progress file is `$progress`).
    public static func tools(ladder: String, firstStream: String = "") throws -> String {
        let directory = TemporaryDirectory.make("ferry-held-tools")
        for tool in ["ffmpeg", "ffprobe"] {
            guard
                let real = ["/usr/bin/\(tool)", "/usr/local/bin/\(tool)"]
                    .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
            else { throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: tool]) }
            let first = firstStream.isEmpty ? "" : """
                *"/first-progress.txt"*) for a in "$@"; do case "$a" in */first-progress.txt) progress="$a";; esac; done
                \(firstStream);;

                """
            let hold = tool == "ffmpeg" ? "case \"$*\" in *\"/progress.txt\"*) \(ladder);;\n\(first)esac\n" : ""
            try "#!/bin/sh\n\(hold)exec \(real) \"$@\"\n".write(toFile: directory + "/" + tool, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory + "/" + tool)
        }
        return directory
    }

    /// A kind of source file.
    public enum Kind: String, Sendable, CaseIterable {
        /// 854×480, 30 fps, H.264 + AAC (a "480p" source: LD and SD, no upscaling).
        case landscape480
        /// 480×270 picture stored with a 90° rotation (displayed 270×480), H.264 + AAC.
        case rotatedPortrait
        /// Sound only (AAC in M4A).
        case audioOnly
        /// Picture only, 320×180, no audio track.
        case noAudio
        /// 321×241 (odd sizes), MPEG-4 Part 2 in MP4.
        case oddSize
        /// Variable frame rate: one second at 10 fps, then one at 30 fps, in Matroska.
        case variableFrameRate
        /// 10-bit HEVC, 426×240, with sound.
        case hevc10Bit
        /// One black second, then a test pattern: its cover must not be black.
        case blackStart
        /// A long 640×360 clip (`seconds`), for transcodes that must still run when a test acts.
        case long
        /// 854×480, 30 fps, 8-bit HEVC + AAC: a 480p source that players cannot all play as it is.
        case hevc480
        /// 320×240, 25 fps, H.264 + AAC, with a 64×64 cover picture stored before its tracks: the cover is stream 0.
        case coverArtFirst
        /// 854×480, 30 fps, H.264 + AAC in MPEG-TS (the sound in ADTS frames), as recorders and broadcast captures
        /// write it.
        case transportStream480
        /// 360×240 stored with pixels 32:27 wide (displayed 426×240, as a DVD's 16:9 picture is), H.264 + AAC.
        case anamorphic
        /// 854×480, 30 fps, a bare H.264 stream (Annex B, no container, no sound): its frames carry no times.
        case rawH264

        /// The file name extension.
        public var fileExtension: String {
            switch self {
            case .audioOnly: return "m4a"
            case .variableFrameRate: return "mkv"
            case .transportStream480: return "ts"
            case .rawH264: return "h264"
            default: return "mp4"
            }
        }
    }

    /// Whether ffmpeg and ffprobe are on PATH.
    public static var available: Bool {
        ["ffmpeg", "ffprobe"].allSatisfy { tool in
            (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":").contains {
                FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
            }
        }
    }

    /// Makes a fixture of `seconds` in `directory`; returns its path.
    public static func make(_ kind: Kind, seconds: Int = 3, in directory: String) async throws -> String {
        let path = "\(directory)/\(kind.rawValue).\(kind.fileExtension)"
        let d = String(seconds)
        let sine = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(d)"]
        let x264 = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
        let aac = ["-c:a", "aac", "-b:a", "64k", "-shortest"]
        var arguments: [String]
        switch kind {
        case .landscape480:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=854x480:rate=30:duration=\(d)"] + sine + x264 + aac + [path]
        case .rotatedPortrait:
            let plain = "\(directory)/rotated-source.mp4"
            try await ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=480x270:rate=25:duration=\(d)"] + sine + x264 + aac + [plain])
            arguments = ["-i", plain, "-c", "copy", "-metadata:s:v:0", "rotate=90", path]
        case .audioOnly:
            arguments = sine + ["-c:a", "aac", "-b:a", "96k", path]
        case .noAudio:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=320x180:rate=30:duration=\(d)"] + x264 + [path]
        case .oddSize:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=321x241:rate=25:duration=\(d)"] + sine
                + ["-c:v", "mpeg4", "-q:v", "5"] + aac + [path]
        case .variableFrameRate:
            arguments = [
                "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10:duration=1", "-f", "lavfi", "-i",
                "testsrc2=size=320x240:rate=30:duration=1", "-filter_complex", "[0:v][1:v]concat=n=2:v=1[v]", "-map", "[v]",
                "-fps_mode", "vfr",
            ] + x264 + [path]
        case .hevc10Bit:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=426x240:rate=30:duration=\(d)"] + sine
                + ["-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le", "-tag:v", "hvc1", "-x265-params", "log-level=error"]
                + aac + [path]
        case .hevc480:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=854x480:rate=30:duration=\(d)"] + sine
                + ["-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-tag:v", "hvc1", "-x265-params", "log-level=error"]
                + aac + [path]
        case .blackStart:
            arguments = [
                "-f", "lavfi", "-i", "color=c=black:size=640x360:rate=30:duration=1", "-f", "lavfi", "-i",
                "testsrc2=size=640x360:rate=30:duration=\(max(seconds - 1, 1))", "-filter_complex",
                "[0:v][1:v]concat=n=2:v=1[v]", "-map", "[v]",
            ] + x264 + [path]
        case .long:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30:duration=\(d)"] + sine + x264 + aac + [path]
        case .transportStream480:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=854x480:rate=30:duration=\(d)"] + sine + x264 + aac
                + ["-f", "mpegts", path]
        case .rawH264:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=854x480:rate=30:duration=\(d)"] + x264 + ["-f", "h264", path]
        case .anamorphic:
            arguments = ["-f", "lavfi", "-i", "testsrc2=size=360x240:rate=25:duration=\(d)"] + sine
                + ["-vf", "setsar=32/27"] + x264 + aac + [path]
        case .coverArtFirst:
            let plain = "\(directory)/cover-art-source.mp4"
            let cover = "\(directory)/cover-art.jpg"
            try await ffmpeg(["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(d)"] + sine + x264 + aac + [plain])
            try await ffmpeg(["-f", "lavfi", "-i", "color=c=red:size=64x64", "-frames:v", "1", cover])
            arguments = ["-i", plain, "-i", cover, "-map", "0", "-map", "1", "-c", "copy", "-disposition:v:1", "attached_pic", path]
        }
        try await ffmpeg(arguments)
        if kind == .coverArtFirst { try moveUserDataFirst(path) }
        return path
    }

    /// Rewrites an MP4 in place with its `moov`'s `udta` (where the MP4 muxer keeps cover art) before its tracks, so
    /// that ffmpeg reads the cover as stream 0. Only boxes move inside `moov`: every size and offset stays.
    static func moveUserDataFirst(_ path: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func boxes(_ range: Range<Int>) -> [(type: String, range: Range<Int>)] {
            var found: [(String, Range<Int>)] = []
            var offset = range.lowerBound
            while offset + 8 <= range.upperBound {
                let size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                guard size >= 8, offset + size <= range.upperBound else { break }
                found.append((String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self), offset..<offset + size))
                offset += size
            }
            return found
        }
        guard let moov = boxes(0..<bytes.count).first(where: { $0.type == "moov" }) else {
            throw ToolFailure(tool: "moveUserDataFirst", output: "no moov box")
        }
        let inside = moov.range.lowerBound + 8..<moov.range.upperBound
        let children = boxes(inside)
        let first = ["mvhd", "udta"]
        let ordered = first.flatMap { type in children.filter { $0.type == type } } + children.filter { !first.contains($0.type) }
        let body = ordered.flatMap { bytes[$0.range] }
        guard children.contains(where: { $0.type == "udta" }), body.count == inside.count else {
            throw ToolFailure(tool: "moveUserDataFirst", output: "moov holds no udta, or boxes that cannot be read")
        }
        bytes.replaceSubrange(inside, with: body)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Runs ffmpeg quietly; throws with its complaint when it fails.
    public static func ffmpeg(_ arguments: [String]) async throws {
        let run = try await tool("ffmpeg", ["-hide_banner", "-nostdin", "-loglevel", "error", "-y"] + arguments)
        guard run.status == 0 else { throw ToolFailure(tool: "ffmpeg", output: run.errorOutput) }
    }

    /// ffprobe's JSON description (format and streams) of a file or URL.
    public static func probe(_ target: String) async throws -> Probe {
        let run = try await tool(
            "ffprobe", ["-v", "error", "-print_format", "json", "-show_format", "-show_streams", target])
        guard run.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any]
        else { throw ToolFailure(tool: "ffprobe", output: run.errorOutput) }
        return Probe(json: object)
    }

    /// What ffprobe said, with accessors for what tests check.
    public struct Probe: @unchecked Sendable {
        // Read-only after init: a JSON tree from JSONSerialization.
        public let json: [String: Any]
        var streams: [[String: Any]] { json["streams"] as? [[String: Any]] ?? [] }
        /// The first stream of a type (`video`, `audio`), cover art aside.
        public func stream(_ type: String) -> [String: Any]? {
            streams.first {
                $0["codec_type"] as? String == type && (($0["disposition"] as? [String: Any])?["attached_pic"] as? Int ?? 0) == 0
            }
        }
        /// Codec of the first stream of a type.
        public func codec(_ type: String) -> String? { stream(type)?["codec_name"] as? String }
        /// Size of the first video stream.
        public var width: Int? { stream("video")?["width"] as? Int }
        public var height: Int? { stream("video")?["height"] as? Int }
        /// Duration of the container, seconds.
        public var duration: Double? { ((json["format"] as? [String: Any])?["duration"] as? String).flatMap(Double.init) }
    }

    /// A tool failed.
    public struct ToolFailure: Error, CustomStringConvertible {
        public var tool: String
        public var output: String
        public var description: String { "\(tool) failed: \(output)" }
    }

    /// Runs a tool from PATH to its end.
    public static func tool(_ name: String, _ arguments: [String]) async throws -> CapturedRun {
        try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [name] + arguments
            return try process.runCapturing()
        }
    }

    /// Process ids of running ffmpeg processes whose command line mentions `text` (a data directory).
    public static func ffmpegProcesses(mentioning text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard let first = arguments.first, first.hasSuffix("ffmpeg") else { return false }
            // A zombie (exited, not yet reaped) is not running.
            let status = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            if let close = status.lastIndex(of: ")"), status[status.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z") {
                return false
            }
            return arguments.contains { $0.contains(text) }
        }
    }
}
