import FerryStorage
import Foundation

/// How a video's subtitle tracks join its HLS stream: a `SUBTITLES` group in the master playlist, and for each track
/// a media playlist of WebVTT segments as long as the video's segments.
///
/// Paths are relative to the master playlist: `subtitles/<SubtitleId>.m3u8` (the track's playlist),
/// `subtitles/<SubtitleId>/<n>.vtt` (its segments) and `subtitles/<SubtitleId>.vtt` (the whole track, for players that
/// take one file, such as a `<track>` element).
package enum SubtitlePlaylists {
    /// The group id every variant names.
    static let groupId = "subs"
    /// Most segments of one track's playlist.
    package static let maxSegments = 100_000

    /// What a path under `subtitles/` asks for.
    package enum File: Equatable {
        case playlist(subtitleId: String)
        case segment(subtitleId: String, index: Int)
        case track(subtitleId: String)
    }

    /// Reads `subtitles/<id>.m3u8`, `subtitles/<id>/<n>.vtt` or `subtitles/<id>.vtt`; nil for anything else.
    package static func file(_ path: String) -> File? {
        let pieces = path.split(separator: "/", omittingEmptySubsequences: false)
        guard pieces.first == "subtitles" else { return nil }
        if pieces.count == 2 {
            let name = pieces[1]
            if name.hasSuffix(".m3u8") { return .playlist(subtitleId: String(name.dropLast(5))) }
            if name.hasSuffix(".vtt") { return .track(subtitleId: String(name.dropLast(4))) }
        } else if pieces.count == 3, pieces[2].hasSuffix(".vtt"), let index = Int(pieces[2].dropLast(4)),
            index >= 0, String(index) + ".vtt" == pieces[2]
        {
            return .segment(subtitleId: String(pieces[1]), index: index)
        }
        return nil
    }

    /// The master playlist `text` with `tracks` as its `SUBTITLES` group, named by every variant; `text` unchanged when
    /// there are none. A name an earlier track of the group has is numbered (`fr (2)`): the group's names must differ
    /// (RFC 8216), and tracks added before AddSubtitle kept them apart may share one.
    package static func master(_ text: String, tracks: [SubtitleTrack]) -> String {
        guard !tracks.isEmpty else { return text }
        var media: [String] = []
        var names = Set<String>()
        for track in tracks {
            let isDefault = track.isDefault ? "YES" : "NO"
            let name = distinctName(track.name, among: names)
            names.insert(name)
            media.append(
                "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"\(groupId)\",NAME=\"\(name)\",LANGUAGE=\"\(track.language)\","
                    + "DEFAULT=\(isDefault),AUTOSELECT=YES,FORCED=NO,URI=\"subtitles/\(track.subtitleId).m3u8\"")
        }
        var lines: [String] = []
        var inserted = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("#EXT-X-STREAM-INF:") {
                if !inserted {
                    lines += media
                    inserted = true
                }
                lines.append(line + ",SUBTITLES=\"\(groupId)\"")
            } else {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `name`, or when one of `names` is already it, the first of `name (2)`, `name (3)`, … none of them is: the
    /// names of a `SUBTITLES` group must differ.
    package static func distinctName(_ name: String, among names: Set<String>) -> String {
        guard names.contains(name) else { return name }
        return (2...).lazy.map { "\(name) (\($0))" }.first { !names.contains($0) } ?? name
    }

    /// Segments of a track for a video of `duration` seconds cut every `segmentSeconds`.
    package static func segmentCount(duration: Double, segmentSeconds: Int) -> Int {
        let seconds = max(1, segmentSeconds)
        guard duration.isFinite, duration > 0 else { return 1 }
        return max(1, Int(min((duration / Double(seconds)).rounded(.up), Double(maxSegments))))
    }

    /// A track's media playlist: one WebVTT segment per `segmentSeconds` of the video.
    package static func mediaPlaylist(subtitleId: String, duration: Double, segmentSeconds: Int) -> String {
        let seconds = max(1, segmentSeconds)
        let count = segmentCount(duration: duration, segmentSeconds: seconds)
        let total = duration.isFinite && duration > 0 ? duration : Double(seconds)
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:\(seconds)", "#EXT-X-MEDIA-SEQUENCE:0",
            "#EXT-X-PLAYLIST-TYPE:VOD",
        ]
        for index in 0..<count {
            let length = min(Double(seconds), total - Double(index * seconds))
            lines.append(String(format: "#EXTINF:%.3f,", max(0.001, length)))
            lines.append("\(subtitleId)/\(index).vtt")
        }
        lines.append("#EXT-X-ENDLIST")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Milliseconds segment `index` covers.
    package static func window(index: Int, segmentSeconds: Int) -> (start: Int64, end: Int64) {
        let length = Int64(max(1, segmentSeconds)) * 1000
        return (Int64(index) * length, Int64(index + 1) * length)
    }
}
