import FerryStorage
import Foundation

/// What ffprobe prints of a file (`-print_format json -show_format -show_streams`), as far as Ferry reads it: the one
/// model both the probe of a source and the measuring of encoded files decode.
///
/// ffprobe's output varies with the file and the version: numbers arrive as JSON numbers or as strings (`"bit_rate":
/// "128000"`), fields are missing, and a field may hold something else entirely. Decoding is lenient field by field —
/// anything that is not what a field should be reads as absent — so odd output never fails a job by itself; only a
/// document that is not a JSON object is ``MediaProbe/Unreadable``.
struct ProbeReport: Decodable, Sendable, Equatable {
    /// The container's streams, in file order.
    var streams: [Stream] = []
    /// The container.
    var format = Format()

    /// One stream.
    struct Stream: Decodable, Sendable, Equatable {
        /// `video`, `audio`, `subtitle`, `data`, …
        var codecType: String?
        /// `h264`, `hevc`, `aac`, …
        var codecName: String?
        /// `High`, `Main 10`, `LC`, …
        var profile: String?
        /// The codec level as ffprobe numbers it (`31` for H.264 level 3.1).
        var level: Int?
        /// Pixels, as stored.
        var width: Int?
        /// Pixels, as stored.
        var height: Int?
        /// `yuv420p`, `yuv420p10le`, …
        var pixelFormat: String?
        /// Bits per second.
        var bitRate: Double?
        /// Seconds.
        var duration: Double?
        /// Seconds: the time of its first packet.
        var startTime: Double?
        /// Average frame rate as a fraction (`30000/1001`; `0/0` when unknown).
        var averageFrameRate: String?
        /// The stream's base frame rate as a fraction.
        var baseFrameRate: String?
        /// Audio samples per second.
        var sampleRate: Int?
        /// Audio channels.
        var channels: Int?
        /// Whether the stream is a picture attached as cover art (`disposition.attached_pic`) or thumbnails
        /// (`timed_thumbnails`), not the video: the streams ffmpeg's `V` stream specifier skips, as every command does.
        var isAttachedPicture: Bool
        /// The `rotate` tag of older files, in degrees.
        var rotateTag: Double?
        /// The display matrix's rotation (`side_data_list[].rotation`), in degrees; the last one given.
        var displayRotation: Double?
        /// The shape of a pixel as displayed (`sample_aspect_ratio`, `32:27`; `0:1` or absent when unknown).
        var sampleAspectRatio: String?

        enum CodingKeys: String, CodingKey {
            case codecType = "codec_type", codecName = "codec_name", profile, level, width, height
            case pixelFormat = "pix_fmt", bitRate = "bit_rate", duration, startTime = "start_time"
            case averageFrameRate = "avg_frame_rate", baseFrameRate = "r_frame_rate", sampleRate = "sample_rate"
            case channels, disposition, tags
            case sideDataList = "side_data_list"
            case sampleAspectRatio = "sample_aspect_ratio"
        }

        private enum DispositionKeys: String, CodingKey {
            case attachedPicture = "attached_pic", timedThumbnails = "timed_thumbnails"
        }

        private enum TagKeys: String, CodingKey { case rotate }

        /// An entry of `side_data_list`: the display matrix's rotation, when it is one.
        private struct SideData: Decodable {
            private enum CodingKeys: String, CodingKey { case rotation }
            var rotation: Double?

            init(from decoder: any Decoder) throws {
                rotation = try decoder.container(keyedBy: CodingKeys.self).lenientNumber(.rotation)
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            codecType = container.lenientString(.codecType)
            codecName = container.lenientString(.codecName)
            profile = container.lenientString(.profile)
            level = container.lenientInteger(.level)
            width = container.lenientInteger(.width)
            height = container.lenientInteger(.height)
            pixelFormat = container.lenientString(.pixelFormat)
            bitRate = container.lenientNumber(.bitRate)
            duration = container.lenientNumber(.duration)
            startTime = container.lenientNumber(.startTime)
            averageFrameRate = container.lenientString(.averageFrameRate)
            baseFrameRate = container.lenientString(.baseFrameRate)
            sampleRate = container.lenientInteger(.sampleRate)
            channels = container.lenientInteger(.channels)
            let disposition = try? container.nestedContainer(keyedBy: DispositionKeys.self, forKey: .disposition)
            isAttachedPicture = [DispositionKeys.attachedPicture, .timedThumbnails].contains { (disposition?.lenientInteger($0) ?? 0) != 0 }
            let tags = try? container.nestedContainer(keyedBy: TagKeys.self, forKey: .tags)
            rotateTag = tags?.lenientNumber(.rotate)
            displayRotation = container.lenientArray(SideData.self, .sideDataList).compactMap(\.rotation).last
            sampleAspectRatio = container.lenientString(.sampleAspectRatio)
        }

        /// The width the picture is displayed at before its rotation: the coded width times the sample aspect ratio,
        /// to an even number, for pixels that are not square (anamorphic DVD, HDV's 1440×1080); as coded otherwise.
        /// The rule of ``MediaInput/squarePixels``, which makes the pictures made from the video that wide.
        var displayWidth: Int? {
            guard let width else { return nil }
            let parts = (sampleAspectRatio ?? "").split(separator: ":").compactMap { Double($0) }
            guard parts.count == 2, parts[1] > 0, case let ratio = parts[0] / parts[1],
                MediaInput.isNonSquare(ratio)
            else { return width }
            return ProbeReport.integer(Double(width) * ratio / 2).map { max(2, $0 * 2) }
        }

        /// Degrees (0, 90, 180, 270) the picture turns when displayed: from the display matrix, or the old `rotate`
        /// tag. Only an angle within a degree of a quarter turn is one, as ffmpeg turns pictures: any other angle
        /// (350°, 135°) is drawn tilted inside the frame as stored, whose size stays.
        var rotation: Int {
            guard let degrees = displayRotation ?? rotateTag else { return 0 }
            let normalized = (((ProbeReport.integer(degrees.rounded()) ?? 0) % 360) + 360) % 360
            return [90, 180, 270].first { abs($0 - normalized) <= 1 } ?? 0
        }
    }

    /// The container.
    struct Format: Decodable, Sendable, Equatable {
        /// `mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`, …
        var formatName: String?
        /// Seconds.
        var duration: Double?
        /// Bits per second of the whole file.
        var bitRate: Double?
        /// Seconds before the first packet: counted in an MP4's or Matroska's ``duration`` (an edit list's empty
        /// edit, timestamps that start late), not in an MPEG-TS's.
        var startTime: Double?

        enum CodingKeys: String, CodingKey {
            case formatName = "format_name", duration, bitRate = "bit_rate", startTime = "start_time"
        }

        init() {}

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            formatName = container.lenientString(.formatName)
            duration = container.lenientNumber(.duration)
            bitRate = container.lenientNumber(.bitRate)
            startTime = container.lenientNumber(.startTime)
        }
    }

    enum CodingKeys: String, CodingKey { case streams, format }

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        streams = container.lenientArray(Stream.self, .streams)
        format = (try? container.decode(Format.self, forKey: .format)) ?? Format()
    }

    /// Reads ffprobe's JSON; throws ``MediaProbe/Unreadable`` when it is not a JSON object.
    static func decode(_ json: Data) throws -> ProbeReport {
        do {
            return try JSONDecoder().decode(ProbeReport.self, from: json)
        } catch {
            throw MediaProbe.Unreadable(reason: "ffprobe's answer cannot be read.")
        }
    }

    /// The first video stream that is not cover art.
    var video: Stream? { streams.first { $0.codecType == "video" && !$0.isAttachedPicture } }
    /// The first audio stream.
    var audio: Stream? { streams.first { $0.codecType == "audio" } }

    /// What the catalog keeps of a source file of `size` bytes; ``MediaProbe/Unreadable`` when it holds no audio or
    /// video stream.
    func mezzanine(size: Int64) throws -> MezzanineInfo {
        let video = self.video
        let audio = self.audio
        guard video != nil || audio != nil else {
            throw MediaProbe.Unreadable(reason: "The file holds no audio or video stream.")
        }
        var info = MezzanineInfo(size: size)
        info.formatName = format.formatName
        // A length past any video's is a file that lies about itself: kept as unknown, so nothing is planned from it.
        info.duration = [format.duration, video?.duration, audio?.duration].lazy.compactMap { $0 }.first
            .flatMap { (0...Self.maxDuration).contains($0) ? $0 : nil }
        info.bitrate = format.bitRate.flatMap(Self.integer)
        info.startTime = Self.countedStart(format, streams: [video, audio].compactMap { $0 }, duration: info.duration)
        if let video {
            info.videoCodec = video.codecName
            info.pixelFormat = video.pixelFormat
            info.videoBitrate = video.bitRate.flatMap(Self.integer)
            info.fps = MediaProbe.rate(video.averageFrameRate) ?? MediaProbe.rate(video.baseFrameRate)
            let rotation = video.rotation
            info.rotation = rotation
            // A picture larger than any encoder takes is a file that lies about itself: no size is kept, so no plan is
            // made from it (and no arithmetic on it can overflow).
            if let width = video.displayWidth, let height = video.height, (1...Self.maxDimension).contains(width),
                (1...Self.maxDimension).contains(height)
            {
                let turned = rotation == 90 || rotation == 270
                info.width = turned ? height : width
                info.height = turned ? width : height
            }
        }
        if let audio {
            info.audioCodec = audio.codecName
            info.audioSampleRate = audio.sampleRate
            info.audioChannels = audio.channels
            info.audioBitrate = audio.bitRate.flatMap(Self.integer)
        }
        if info.bitrate == nil, let duration = info.playingDuration, duration > 0 {
            info.bitrate = Self.integer(Double(size) * 8 / duration)
        }
        return info
    }

    /// The seconds before what plays that a container counts in its `duration` (an MP4's empty edit, Matroska
    /// timestamps that begin late; an MPEG-TS or FLV counts none): its duration less the span from the earliest
    /// stream's start to the latest stream's end, when the streams give both and begin late, at most that start (a
    /// container longer than its streams' span may count the last frame's display, as a variable frame rate's
    /// does); else the `start_time` of an MP4 or Matroska file, which count it. Nil for none (less than 50 ms).
    static func countedStart(_ format: Format, streams: [Stream], duration: Double?) -> Double? {
        guard let duration, duration > 0 else { return nil }
        let spans = streams.compactMap { stream in
            stream.startTime.flatMap { start in stream.duration.map { (start: start, end: start + $0) } }
        }
        let counted: Double?
        if let first = spans.map(\.start).min(), let end = spans.map(\.end).max(), end > first {
            counted = first > 0.05 ? min(first, duration - (end - first)) : nil
        } else if let name = format.formatName, name.hasPrefix("mov,") || name.hasPrefix("matroska") {
            counted = format.startTime
        } else {
            counted = nil
        }
        return counted.flatMap { $0.isFinite && $0 > 0.05 && $0 < duration ? $0 : nil }
    }

    /// What the transcode measures of a file it encoded.
    var measured: MediaPipeline.Measured {
        let video = self.video
        return MediaPipeline.Measured(
            width: video?.width, height: video?.height, bitrate: format.bitRate.flatMap(Self.integer),
            duration: format.duration.flatMap { (0...Self.maxDuration).contains($0) ? $0 : nil },
            fps: MediaProbe.rate(video?.averageFrameRate), videoCodec: video?.codecName,
            audioCodec: audio?.codecName, videoProfile: video?.profile, videoLevel: video?.level)
    }

    /// The largest width or height kept (H.264's limit is lower).
    static let maxDimension = 65_536
    /// The longest duration kept, in seconds (about 11.5 days).
    static let maxDuration = 1_000_000.0

    /// `value` as an integer (toward zero); nil when it is not finite or out of `Int`'s range.
    static func integer(_ value: Double) -> Int? {
        guard value.isFinite, value >= Double(Int.min), value < Double(Int.max) else { return nil }
        return Int(value)
    }

}

/// Any JSON value, read and dropped.
private struct SkippedValue: Decodable {
    init(from decoder: any Decoder) throws {}
}

extension UnkeyedDecodingContainer {
    /// Moves past the next value, whatever it is; false when it cannot.
    fileprivate mutating func skip() -> Bool {
        if (try? decodeNil()) == true { return true }
        return (try? decode(SkippedValue.self)) != nil
    }
}

extension KeyedDecodingContainer {
    /// The elements of an array that read as `T` (an entry that does not, such as one that is not an object, is
    /// skipped); none when the field is missing or not an array.
    fileprivate func lenientArray<T: Decodable>(_ type: T.Type, _ key: Key) -> [T] {
        guard var list = try? nestedUnkeyedContainer(forKey: key) else { return [] }
        var elements: [T] = []
        while !list.isAtEnd {
            if let element = try? list.decode(T.self) {
                elements.append(element)
            } else if !list.skip() {
                break
            }
        }
        return elements
    }

    /// A string, or nil when the field is missing or holds something else.
    fileprivate func lenientString(_ key: Key) -> String? {
        (try? decodeIfPresent(String.self, forKey: key)) ?? nil
    }

    /// A finite number given as a JSON number or a numeric string (`"128000"`, `"12.345"`); nil otherwise.
    fileprivate func lenientNumber(_ key: Key) -> Double? {
        if let value = (try? decodeIfPresent(Double.self, forKey: key)) ?? nil, value.isFinite { return value }
        if let text = (try? decodeIfPresent(String.self, forKey: key)) ?? nil,
            let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite
        {
            return value
        }
        return nil
    }

    /// A whole number given as a JSON number or a numeric string; nil otherwise (a fraction too).
    fileprivate func lenientInteger(_ key: Key) -> Int? {
        guard let value = lenientNumber(key), value.rounded() == value else { return nil }
        return ProbeReport.integer(value)
    }
}
