import Foundation

/// Reads what ffprobe says of a file (`-print_format json -show_format -show_streams`).
enum MediaProbe {
    /// The file is not media ffprobe can read, or holds no audio or video stream.
    struct Unreadable: Error, CustomStringConvertible {
        /// Why, in ffprobe's words where it gave any.
        var reason: String
        var description: String { reason }
    }

    /// ffprobe's arguments for `path`.
    static func arguments(for path: String) -> [String] {
        ["-v", "error", "-print_format", "json", "-show_format", "-show_streams", "--", path]
    }

    /// Parses ffprobe's JSON into what the catalog keeps; `size` is the stored object's size.
    static func parse(_ json: Data, size: Int64) throws -> MezzanineInfo {
        guard let root = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw Unreadable(reason: "ffprobe's answer cannot be read.")
        }
        let streams = root["streams"] as? [[String: Any]] ?? []
        let format = root["format"] as? [String: Any] ?? [:]
        // A still picture stored as cover art (attached_pic) is not the video.
        let video = streams.first {
            $0["codec_type"] as? String == "video" && (($0["disposition"] as? [String: Any])?["attached_pic"] as? Int ?? 0) == 0
        }
        let audio = streams.first { $0["codec_type"] as? String == "audio" }
        guard video != nil || audio != nil else {
            throw Unreadable(reason: "The file holds no audio or video stream.")
        }
        var info = MezzanineInfo(size: size)
        info.formatName = format["format_name"] as? String
        info.duration = number(format["duration"]) ?? number(video?["duration"]) ?? number(audio?["duration"])
        info.bitrate = number(format["bit_rate"]).map { Int($0) }
        if let video {
            info.videoCodec = video["codec_name"] as? String
            info.pixelFormat = video["pix_fmt"] as? String
            info.videoBitrate = number(video["bit_rate"]).map { Int($0) }
            info.fps = rate(video["avg_frame_rate"] as? String) ?? rate(video["r_frame_rate"] as? String)
            let rotation = Self.rotation(of: video)
            info.rotation = rotation
            let width = (video["width"] as? Int) ?? 0
            let height = (video["height"] as? Int) ?? 0
            if width > 0, height > 0 {
                let turned = rotation == 90 || rotation == 270
                info.width = turned ? height : width
                info.height = turned ? width : height
            }
        }
        if let audio {
            info.audioCodec = audio["codec_name"] as? String
            info.audioSampleRate = number(audio["sample_rate"]).map { Int($0) }
            info.audioChannels = audio["channels"] as? Int
            info.audioBitrate = number(audio["bit_rate"]).map { Int($0) }
        }
        if info.bitrate == nil, let duration = info.duration, duration > 0 {
            info.bitrate = Int(Double(size) * 8 / duration)
        }
        return info
    }

    /// Degrees (0, 90, 180, 270) the picture turns when displayed: from the display matrix, or the old `rotate` tag.
    static func rotation(of stream: [String: Any]) -> Int {
        var degrees: Double?
        for side in stream["side_data_list"] as? [[String: Any]] ?? [] {
            if let value = number(side["rotation"]) { degrees = value }
        }
        if degrees == nil, let tags = stream["tags"] as? [String: Any], let value = number(tags["rotate"]) {
            degrees = value
        }
        guard let degrees else { return 0 }
        let normalized = ((Int(degrees.rounded()) % 360) + 360) % 360
        return [0, 90, 180, 270].min { abs($0 - normalized) < abs($1 - normalized) } ?? 0
    }

    /// A JSON number or numeric string.
    static func number(_ value: Any?) -> Double? {
        if let number = value as? NSNumber { return number.doubleValue }
        if let text = value as? String, let number = Double(text), number.isFinite { return number }
        return nil
    }

    /// A frame rate written as a fraction (`30000/1001`); nil for `0/0`.
    static func rate(_ text: String?) -> Double? {
        guard let text else { return nil }
        let parts = text.split(separator: "/")
        guard parts.count == 2, let top = Double(parts[0]), let bottom = Double(parts[1]), bottom > 0, top > 0 else {
            return nil
        }
        return (top / bottom * 1000).rounded() / 1000
    }

    /// ffprobe's complaint, shortened to its last meaningful lines, or a general reason when it said nothing.
    static func reason(fromStandardError text: String) -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !lines.isEmpty else { return "The file is not audio or video that ffprobe can read." }
        return String(lines.suffix(3).joined(separator: " ").prefix(500))
    }
}
