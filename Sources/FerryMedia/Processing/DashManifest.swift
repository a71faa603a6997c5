import FerryStorage
import Foundation

/// A static MPEG-DASH manifest (`manifest.mpd`) over the fMP4 (CMAF) files the HLS renditions already are: each
/// rendition is one `Representation` whose `SegmentList` names its `init.mp4` and its `seg_*.m4s` files, with a
/// `SegmentTimeline` of the durations its HLS playlist gives. No byte is written twice; the manifest only points.
package enum DashManifest {
    /// The manifest's path under the video's output prefix.
    package static let fileName = "manifest.mpd"

    /// One rendition as the manifest lists it.
    package struct Representation: Sendable {
        /// `LD`, `SD`, …: the representation's id and the directory of its files.
        package var definition: String
        /// Peak bits per second.
        package var bandwidth: Int
        /// Pixels, nil for audio only.
        package var width: Int?
        package var height: Int?
        /// RFC 6381 codecs: `avc1.64001f,mp4a.40.2`.
        package var codecs: String
        /// Frames per second, when known.
        package var fps: Double?
        /// Segment durations (seconds) and file names, in order, as the HLS playlist lists them.
        package var segments: [(duration: Double, uri: String)]
    }

    /// Timeline units per second.
    static let timescale = 1000

    /// The manifest: one adaptation set of the video renditions (audio muxed in, as in the HLS files), and one of the
    /// audio-only renditions when there are.
    package static func make(_ representations: [Representation]) -> String {
        let duration = representations.map { $0.segments.reduce(0) { $0 + $1.duration } }.max() ?? 0
        let longestSegment = representations.flatMap { $0.segments.map(\.duration) }.max() ?? 1
        var lines = [
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
            "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" profiles=\"urn:mpeg:dash:profile:isoff-on-demand:2011,urn:mpeg:dash:profile:isoff-live:2011\""
                + " type=\"static\" mediaPresentationDuration=\"\(isoDuration(duration))\" minBufferTime=\"\(isoDuration(max(1, longestSegment)))\">",
            "  <Period id=\"0\" start=\"PT0S\">",
        ]
        let video = representations.filter { $0.width != nil }.sorted { $0.bandwidth < $1.bandwidth }
        let audio = representations.filter { $0.width == nil }.sorted { $0.bandwidth < $1.bandwidth }
        for (index, (set, kind)) in [(video, "video"), (audio, "audio")].filter({ !$0.0.isEmpty }).enumerated() {
            lines.append(
                "    <AdaptationSet id=\"\(index)\" contentType=\"\(kind)\" mimeType=\"\(kind)/mp4\" segmentAlignment=\"true\" startWithSAP=\"1\">")
            for representation in set {
                var attributes = "id=\"\(escape(representation.definition))\" bandwidth=\"\(max(1, representation.bandwidth))\""
                if let width = representation.width, let height = representation.height {
                    attributes += " width=\"\(width)\" height=\"\(height)\""
                }
                if let fps = representation.fps, fps > 0 { attributes += " frameRate=\"\(frameRate(fps))\"" }
                attributes += " codecs=\"\(escape(representation.codecs))\""
                lines.append("      <Representation \(attributes)>")
                lines.append("        <SegmentList timescale=\"\(timescale)\">")
                lines.append("          <Initialization sourceURL=\"\(escape(representation.definition))/init.mp4\"/>")
                lines.append("          <SegmentTimeline>")
                var start = 0
                for segment in representation.segments {
                    let length = max(1, Int((segment.duration * Double(timescale)).rounded()))
                    lines.append("            <S t=\"\(start)\" d=\"\(length)\"/>")
                    start += length
                }
                lines.append("          </SegmentTimeline>")
                for segment in representation.segments {
                    lines.append("          <SegmentURL media=\"\(escape(representation.definition))/\(escape(segment.uri))\"/>")
                }
                lines.append("        </SegmentList>")
                lines.append("      </Representation>")
            }
            lines.append("    </AdaptationSet>")
        }
        lines.append("  </Period>")
        lines.append("</MPD>")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `manifest` with `tracks` as text adaptation sets of its period, each a WebVTT file
    /// (`subtitles/<SubtitleId>.vtt`, the whole track) with its language, its name as `Label` (numbered as in the
    /// master playlist when another track's is the same) and the `subtitle` role (`main` too for the default track);
    /// `manifest` unchanged when there are none.
    package static func addingSubtitles(_ tracks: [SubtitleTrack], to manifest: String) -> String {
        guard !tracks.isEmpty, let period = manifest.range(of: "  </Period>", options: .backwards) else {
            return manifest
        }
        var lines: [String] = []
        var names = Set<String>()
        for (index, track) in tracks.enumerated() {
            let name = SubtitlePlaylists.distinctName(track.name, among: names)
            names.insert(name)
            // Ids after the video's and audio's sets (0 and 1).
            lines.append(
                "    <AdaptationSet id=\"\(100 + index)\" contentType=\"text\" mimeType=\"text/vtt\""
                    + " lang=\"\(escape(track.language))\">")
            lines.append("      <Label>\(escape(name))</Label>")
            lines.append("      <Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"subtitle\"/>")
            if track.isDefault { lines.append("      <Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"main\"/>") }
            lines.append("      <Representation id=\"\(escape(track.subtitleId))\" bandwidth=\"256\">")
            lines.append("        <BaseURL>subtitles/\(escape(track.subtitleId)).vtt</BaseURL>")
            lines.append("      </Representation>")
            lines.append("    </AdaptationSet>")
        }
        return manifest[..<period.lowerBound] + lines.joined(separator: "\n") + "\n" + manifest[period.lowerBound...]
    }

    /// `manifest` with `query` added to every file it names (`sourceURL` and `media` attributes, `BaseURL` elements),
    /// for a signed video whose files each need its token.
    package static func addingQuery(_ query: String, to manifest: String) -> String {
        var text = manifest
        for (opening, closing) in [("sourceURL=\"", "\""), ("media=\"", "\""), ("<BaseURL>", "<")] {
            var result = ""
            var rest = Substring(text)
            while let start = rest.range(of: opening) {
                result += rest[..<start.upperBound]
                rest = rest[start.upperBound...]
                guard let end = rest.firstIndex(of: Character(closing)) else { break }
                let uri = rest[..<end]
                result += uri + (uri.contains("?") ? "&amp;" : "?") + escape(query)
                rest = rest[end...]
            }
            text = result + rest
        }
        return text
    }

    /// `PT12.345S`.
    static func isoDuration(_ seconds: Double) -> String {
        String(format: "PT%.3fS", max(0, seconds))
    }

    /// A frame rate as DASH writes it: an integer, or `30000/1001` for the NTSC rates.
    static func frameRate(_ fps: Double) -> String {
        for (numerator, rate) in [(24000, 23.976), (30000, 29.97), (60000, 59.94)] where abs(fps - rate) < 0.01 {
            return "\(numerator)/1001"
        }
        return abs(fps - fps.rounded()) < 0.001 ? String(Int(fps.rounded())) : String(format: "%.3f", fps)
    }

    /// `text` as XML text or an attribute value: `&`, `"`, `<` and `>` (which `]]>` must not be) escaped, and what XML
    /// cannot carry at all (C0 controls but tab, line feed and carriage return; U+FFFE, U+FFFF) left out.
    private static func escape(_ text: String) -> String {
        let carried = String(
            String.UnicodeScalarView(
                text.unicodeScalars.filter {
                    !($0.value < 0x20 && !["\t", "\n", "\r"].contains($0)) && $0.value != 0xFFFE && $0.value != 0xFFFF
                }))
        return carried.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
