import Foundation

extension MediaContract {
    /// AddSubtitle: a caption or subtitle track for a video (the answer is a ``SubtitleAnswer``).
    ///
    /// `Content` is WebVTT or SubRip (SRT) text; SRT is converted to WebVTT. The track is played with the video's HLS
    /// stream (a `SUBTITLES` group of its master playlist) and can be fetched as one WebVTT file.
    public struct AddSubtitleRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?
        /// The track's language as a BCP 47 tag: `en`, `pt-BR`, `zh-Hans` (required).
        public var language: String?
        /// The name players show for the track, at most 64 bytes; the language tag when absent.
        public var name: String?
        /// Whether players select this track when none is chosen; at most one track of a video is the default.
        public var isDefault: Bool?
        /// The WebVTT or SRT text, at most 1 MiB (required).
        public var content: String?

        /// Creates a request.
        public init(videoId: String?, language: String?, name: String? = nil, isDefault: Bool? = nil, content: String?) {
            self.videoId = videoId
            self.language = language
            self.name = name
            self.isDefault = isDefault
            self.content = content
        }

        enum CodingKeys: String, CodingKey {
            case videoId = "VideoId", language = "Language", name = "Name", isDefault = "Default", content = "Content"
        }
    }

    /// A video's subtitle track, as AddSubtitle and ListSubtitles describe it.
    public struct Subtitle: Codable, Sendable, Hashable {
        /// The track's id.
        public var subtitleId: String
        /// BCP 47 language tag.
        public var language: String
        /// The name players show.
        public var name: String
        /// Whether players select it when none is chosen.
        public var isDefault: Bool
        /// Cues in the track.
        public var cueCount: Int
        /// When it was added, ISO 8601.
        public var creationTime: String

        /// Creates a description.
        public init(subtitleId: String, language: String, name: String, isDefault: Bool, cueCount: Int, creationTime: String) {
            self.subtitleId = subtitleId
            self.language = language
            self.name = name
            self.isDefault = isDefault
            self.cueCount = cueCount
            self.creationTime = creationTime
        }

        enum CodingKeys: String, CodingKey {
            case subtitleId = "SubtitleId", language = "Language", name = "Name", isDefault = "Default"
            case cueCount = "CueCount", creationTime = "CreationTime"
        }
    }

    /// AddSubtitle's answer: the track as stored.
    public struct SubtitleAnswer: Codable, Sendable, Hashable {
        /// The track.
        public var subtitle: Subtitle
        /// Creates an answer.
        public init(subtitle: Subtitle) { self.subtitle = subtitle }
        enum CodingKeys: String, CodingKey { case subtitle = "Subtitle" }
    }

    /// ListSubtitles' answer: a video's tracks, in the order they were added.
    public struct SubtitleListAnswer: Codable, Sendable, Hashable {
        /// The tracks.
        public var subtitles: [Subtitle]
        /// Creates an answer.
        public init(subtitles: [Subtitle]) { self.subtitles = subtitles }
        enum CodingKeys: String, CodingKey { case subtitles = "Subtitles" }
    }

    /// DeleteSubtitle: removes one track of a video (the answer is an ``EmptyAnswer``).
    public struct DeleteSubtitleRequest: Codable, Sendable, Hashable {
        /// The video's id (required).
        public var videoId: String?
        /// The track's id (required).
        public var subtitleId: String?

        /// Creates a request.
        public init(videoId: String?, subtitleId: String?) {
            self.videoId = videoId
            self.subtitleId = subtitleId
        }

        enum CodingKeys: String, CodingKey { case videoId = "VideoId", subtitleId = "SubtitleId" }
    }
}
