import FerryCore
import FerryMedia
import Foundation
import NIOCore

/// AddSubtitle, ListSubtitles, DeleteSubtitle: a video's caption and subtitle tracks.
///
/// A track's WebVTT (SRT is converted) is stored as `video/<id>/subtitles/<SubtitleId>.vtt` in the video's bucket, and
/// the track is recorded in the video's catalog record: the file first, so a recorded track always has its file; a
/// file whose recording failed is deleted again (and anything left under `video/<id>/` goes with the video).
extension MediaAPI {
    /// Most tracks of one video.
    static let maxSubtitles = 32

    func addSubtitle(_ input: MediaContract.AddSubtitleRequest, _ call: Call) async throws -> MediaContract.SubtitleAnswer {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        guard let language = input.language, !language.isEmpty else { throw MediaError.missing("Language") }
        guard Self.isLanguageTag(language) else {
            throw MediaError.invalid("Language", "must be a BCP 47 language tag such as en, pt-BR or zh-Hans.")
        }
        let name = (input.name ?? language).trimmingCharacters(in: .whitespaces)
        // It goes into the master playlist's quoted NAME: no quote, and nothing any reader takes for a line's end; and
        // into the DASH manifest's XML, which cannot carry U+FFFE or U+FFFF.
        guard !name.isEmpty, name.utf8.count <= 64, !name.contains("\""),
            !name.unicodeScalars.contains(where: {
                [.control, .lineSeparator, .paragraphSeparator].contains($0.properties.generalCategory)
            }),
            !ObjectAPI.hasXMLForbiddenCharacter(name)
        else {
            throw MediaError.invalid(
                "Name", "must be 1 to 64 bytes without quotes, control characters, line separators, U+FFFE or U+FFFF.")
        }
        guard let content = input.content, !content.isEmpty else { throw MediaError.missing("Content") }
        let track: WebVTT
        do {
            track = try WebVTT(parsing: content)
        } catch {
            throw MediaError.invalid("Content", "is not WebVTT or SRT: it \(error.reason)")
        }
        let full = MediaError.invalid("VideoId", "has \(Self.maxSubtitles) subtitle tracks already.")
        guard (video.subtitles ?? []).count < Self.maxSubtitles else { throw full }

        let subtitleId = "st" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        let key = "video/\(video.videoId)/subtitles/\(subtitleId).vtt"
        let text = ByteBuffer(string: track.text())
        _ = try await store.putObject(
            bucket: video.bucket, key: key, attributes: ObjectAttributes(contentType: "text/vtt; charset=utf-8"), tags: [],
            body: AsyncStream { $0.yield(text); $0.finish() }, checksums: [], condition: .none, verify: { _ in })
        let record = SubtitleTrack(
            subtitleId: subtitleId, language: language, name: name, isDefault: input.isDefault ?? false, key: key,
            cueCount: track.cues.count, createdAt: Date())
        let saved: VideoRecord?
        do {
            saved = try await catalog.updateVideo(video.videoId) { video in
                guard video.status != VideoStatus.deleted, (video.subtitles ?? []).count < Self.maxSubtitles else {
                    return .keep
                }
                var tracks = video.subtitles ?? []
                // Names tell the tracks apart in players' menus, and HLS wants them to differ: a name asked for that
                // another track has is refused; one taken from the language is numbered (`fr (2)`).
                var added = record
                let names = Set(tracks.map(\.name))
                if names.contains(added.name) {
                    guard input.name == nil else { return .keep }
                    added.name = SubtitlePlaylists.distinctName(record.name, among: names)
                }
                if record.isDefault { for index in tracks.indices { tracks[index].isDefault = false } }
                tracks.append(added)
                video.subtitles = tracks
                video.updatedAt = Date()
                return .save()
            }
        } catch {
            try? await store.deleteObject(bucket: video.bucket, key: key, condition: .none)
            throw error
        }
        guard saved != nil else {
            try? await store.deleteObject(bucket: video.bucket, key: key, condition: .none)
            // Kept as it was: deleted meanwhile, its tracks filled by calls made at the same time, or its name taken.
            if let now = try await catalog.video(video.videoId), now.status != VideoStatus.deleted {
                if input.name != nil, (now.subtitles ?? []).contains(where: { $0.name == name }) {
                    throw MediaError.invalid(
                        "Name", "is the name of another of the video's tracks; each needs its own.")
                }
                throw full
            }
            throw MediaError.notFound("Video", video.videoId)
        }
        let added = saved?.subtitles?.first { $0.subtitleId == subtitleId } ?? record
        return MediaContract.SubtitleAnswer(subtitle: Self.describe(added))
    }

    func listSubtitles(_ input: MediaContract.VideoIdRequest, _ call: Call) async throws -> MediaContract.SubtitleListAnswer {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        return MediaContract.SubtitleListAnswer(subtitles: (video.subtitles ?? []).map(Self.describe))
    }

    func deleteSubtitle(_ input: MediaContract.DeleteSubtitleRequest, _ call: Call) async throws -> MediaContract.EmptyAnswer {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        guard let subtitleId = input.subtitleId, !subtitleId.isEmpty else { throw MediaError.missing("SubtitleId") }
        guard let track = video.subtitles?.first(where: { $0.subtitleId == subtitleId }) else {
            throw MediaError.notFound("Subtitle", subtitleId)
        }
        try await catalog.updateVideo(video.videoId) { video in
            guard let index = video.subtitles?.firstIndex(where: { $0.subtitleId == subtitleId }) else { return .keep }
            video.subtitles?.remove(at: index)
            if video.subtitles?.isEmpty == true { video.subtitles = nil }
            video.updatedAt = Date()
            return .save()
        }
        try await store.deleteObject(bucket: video.bucket, key: track.key, condition: .none)
        return MediaContract.EmptyAnswer()
    }

    static func describe(_ track: SubtitleTrack) -> MediaContract.Subtitle {
        MediaContract.Subtitle(
            subtitleId: track.subtitleId, language: track.language, name: track.name, isDefault: track.isDefault,
            cueCount: track.cueCount, creationTime: track.createdAt.formatted(.iso8601))
    }

    /// A BCP 47 tag as players read it: a 2- or 3-letter language, then subtags of 1 to 8 letters or digits
    /// (`en`, `pt-BR`, `zh-Hans-CN`, `es-419`), 35 characters at most.
    static func isLanguageTag(_ tag: String) -> Bool {
        let subtags = tag.split(separator: "-", omittingEmptySubsequences: false)
        guard tag.count <= 35, let language = subtags.first, (2...3).contains(language.count),
            language.allSatisfy({ $0.isASCII && $0.isLetter })
        else { return false }
        return subtags.dropFirst().allSatisfy { (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    }
}
