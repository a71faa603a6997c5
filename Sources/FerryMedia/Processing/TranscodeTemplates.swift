import Foundation

/// The transcoding template groups a video may be processed with (`--transcode-templates FILE`).
///
/// A group is a ladder of video definitions (each a height, bit rates and the formats to package) plus an audio
/// definition for sources without a picture. `default` is used when a video names none; `NoTranscode` (reserved)
/// skips transcoding, leaving the original as the only definition (`OD`). The file is JSON:
///
/// ```json
/// {
///   "groups": [
///     {
///       "name": "default",
///       "video": [
///         {"definition": "LD", "height": 360, "videoBitrate": 600, "audioBitrate": 64},
///         {"definition": "HD", "height": 720, "videoBitrate": 2500, "audioBitrate": 128}
///       ],
///       "audio": {"definition": "SQ", "audioBitrate": 128},
///       "formats": ["m3u8", "mp4"]
///     }
///   ],
///   "preset": "veryfast",
///   "segmentSeconds": 4
/// }
/// ```
public struct TranscodeTemplates: Sendable, Hashable, Codable {
    /// One rung of a ladder.
    public struct VideoDefinition: Sendable, Hashable, Codable {
        /// Name shown in GetPlayInfo (`LD`, `SD`, `HD`, `FHD`, …): letters and digits, at most 16.
        public var definition: String
        /// Height of a landscape picture (the shorter side, so a portrait video keeps the same quality).
        public var height: Int
        /// Video bit rate, kbit/s.
        public var videoBitrate: Int
        /// Audio bit rate, kbit/s.
        public var audioBitrate: Int

        /// Creates a rung.
        public init(definition: String, height: Int, videoBitrate: Int, audioBitrate: Int) {
            self.definition = definition
            self.height = height
            self.videoBitrate = videoBitrate
            self.audioBitrate = audioBitrate
        }
    }

    /// The rendition of a source without a picture.
    public struct AudioDefinition: Sendable, Hashable, Codable {
        /// Name shown in GetPlayInfo (`SQ`).
        public var definition: String
        /// Audio bit rate, kbit/s.
        public var audioBitrate: Int

        /// Creates an audio definition.
        public init(definition: String, audioBitrate: Int) {
            self.definition = definition
            self.audioBitrate = audioBitrate
        }
    }

    /// A named ladder.
    public struct Group: Sendable, Hashable, Codable {
        /// Name videos ask for (`Transcode` / `TemplateGroupId`, the publish signature's `procedure`).
        public var name: String
        /// Video definitions.
        public var video: [VideoDefinition]
        /// Definition for audio-only sources.
        public var audio: AudioDefinition
        /// Formats each definition is packaged as: `m3u8` (HLS, fMP4 segments) and `mp4` (progressive, faststart;
        /// `m4a` for audio).
        public var formats: [String]

        /// Creates a group.
        public init(name: String, video: [VideoDefinition], audio: AudioDefinition, formats: [String] = ["m3u8", "mp4"]) {
            self.name = name
            self.video = video
            self.audio = audio
            self.formats = formats
        }
    }

    /// The groups by name.
    public var groups: [Group]
    /// x264 preset (`ultrafast` … `veryslow`). Default `veryfast`.
    public var preset: String
    /// Length of an HLS segment in seconds (key frames every 2 s). Default 4.
    public var segmentSeconds: Int

    /// Name of the group used when a video names none.
    public static let defaultGroupName = "default"
    /// The reserved name that skips transcoding.
    public static let noTranscode = "NoTranscode"
    /// Names no definition may take: GetPlayInfo's own (`AUTO`, `OD`), and names of a video's published files and
    /// directories (`master.m3u8`, the first stream's `start/`, `subtitles/`, `storyboard…`), which a definition's
    /// `X.m3u8`, `X.mp4` and `X/` would take over.
    static let reservedDefinitions: Set<String> = ["AUTO", "OD", "master", "start", "subtitles", "storyboard"]

    /// The built-in `default` group: LD 360p, SD 540p, HD 720p, FHD 1080p (H.264 + AAC), SQ for audio.
    public static let builtIn = TranscodeTemplates(
        groups: [
            Group(
                name: defaultGroupName,
                video: [
                    VideoDefinition(definition: "LD", height: 360, videoBitrate: 700, audioBitrate: 64),
                    VideoDefinition(definition: "SD", height: 540, videoBitrate: 1200, audioBitrate: 96),
                    VideoDefinition(definition: "HD", height: 720, videoBitrate: 2500, audioBitrate: 128),
                    VideoDefinition(definition: "FHD", height: 1080, videoBitrate: 4500, audioBitrate: 128),
                ],
                audio: AudioDefinition(definition: "SQ", audioBitrate: 128))
        ], preset: "veryfast", segmentSeconds: 4)

    /// Creates templates.
    public init(groups: [Group], preset: String = "veryfast", segmentSeconds: Int = 4) {
        self.groups = groups
        self.preset = preset
        self.segmentSeconds = segmentSeconds
    }

    private enum CodingKeys: String, CodingKey { case groups, preset, segmentSeconds }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        groups = try container.decode([Group].self, forKey: .groups)
        preset = try container.decodeIfPresent(String.self, forKey: .preset) ?? "veryfast"
        segmentSeconds = try container.decodeIfPresent(Int.self, forKey: .segmentSeconds) ?? 4
    }

    /// A template file that cannot be used, and why.
    public struct InvalidTemplates: Error, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    /// Reads and checks a template file.
    public static func load(path: String) throws -> TranscodeTemplates {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw InvalidTemplates(description: "\(path) cannot be read.")
        }
        let templates: TranscodeTemplates
        do {
            templates = try JSONDecoder().decode(TranscodeTemplates.self, from: data)
        } catch {
            throw InvalidTemplates(description: "\(path) is not a template file: \(error)")
        }
        try templates.validate()
        return templates
    }

    static let presets: Set<String> = [
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow",
    ]

    /// Checks names, numbers and formats.
    public func validate() throws {
        func fail(_ text: String) -> InvalidTemplates { InvalidTemplates(description: text) }
        func isName(_ text: String) -> Bool {
            (1...16).contains(text.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
        guard Self.presets.contains(preset) else { throw fail("preset must be one of \(Self.presets.sorted().joined(separator: ", ")).") }
        guard (1...60).contains(segmentSeconds) else { throw fail("segmentSeconds must be between 1 and 60.") }
        guard !groups.isEmpty else { throw fail("groups is empty.") }
        var names = Set<String>()
        for group in groups {
            guard (1...64).contains(group.name.count),
                group.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            else { throw fail("group name '\(group.name.prefix(64))' must be 1-64 letters, digits, - or _.") }
            guard group.name != Self.noTranscode else { throw fail("\(Self.noTranscode) is reserved.") }
            guard names.insert(group.name).inserted else { throw fail("group \(group.name) appears twice.") }
            guard !group.video.isEmpty else { throw fail("group \(group.name) has no video definitions.") }
            guard !group.formats.isEmpty, group.formats.allSatisfy({ ["m3u8", "mp4"].contains($0) }) else {
                throw fail("group \(group.name): formats must be m3u8 and/or mp4.")
            }
            var definitions = Set<String>()
            for rung in group.video {
                guard isName(rung.definition), !Self.reservedDefinitions.contains(rung.definition) else {
                    throw fail(
                        "group \(group.name): definition '\(rung.definition.prefix(16))' must be 1-16 letters or digits (not "
                            + Self.reservedDefinitions.sorted().joined(separator: ", ") + ").")
                }
                guard definitions.insert(rung.definition).inserted else {
                    throw fail("group \(group.name): definition \(rung.definition) appears twice.")
                }
                guard (64...4320).contains(rung.height), rung.height % 2 == 0 else {
                    throw fail("group \(group.name) \(rung.definition): height must be an even number from 64 to 4320.")
                }
                guard (50...100_000).contains(rung.videoBitrate), (16...512).contains(rung.audioBitrate) else {
                    throw fail("group \(group.name) \(rung.definition): videoBitrate 50-100000, audioBitrate 16-512 kbit/s.")
                }
            }
            guard isName(group.audio.definition), !Self.reservedDefinitions.contains(group.audio.definition),
                (16...512).contains(group.audio.audioBitrate)
            else {
                throw fail("group \(group.name): the audio definition needs a name and an audioBitrate of 16-512 kbit/s.")
            }
        }
        guard names.contains(Self.defaultGroupName) else { throw fail("a group named default is required.") }
    }

    /// The group a video asked for: nil or empty names the default; `NoTranscode` gives nil (no transcoding).
    /// Throws ``UnknownGroup`` for any other name.
    public func group(named name: String?) throws -> Group? {
        let name = name.flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultGroupName
        if name == Self.noTranscode { return nil }
        guard let group = groups.first(where: { $0.name == name }) else { throw UnknownGroup(name: name) }
        return group
    }

    /// A template group no configuration defines.
    public struct UnknownGroup: Error {
        /// The name asked for.
        public var name: String
    }
}
