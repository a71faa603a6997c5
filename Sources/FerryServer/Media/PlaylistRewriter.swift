import Foundation

/// Adds a query to every URI an HLS playlist names (RFC 8216): each URI line, and each `URI="…"` attribute of a tag
/// (`EXT-X-MAP`, `EXT-X-MEDIA`, `EXT-X-I-FRAME-STREAM-INF`, `EXT-X-KEY`, …). Everything else is kept byte for byte.
/// Also the cue payloads of a storyboard's WebVTT file, which name the sprite (`storyboard.jpg#xywh=…`).
enum PlaylistRewriter {
    /// `playlist` with `query` (`name=value`, already URL-safe) appended to every URI it names.
    static func addingQuery(_ query: String, to playlist: String) -> String {
        mappingLines(of: playlist) { line in
            if line.isEmpty { return line }
            if line.hasPrefix("#") { return rewritingAttributes(line, query: query) }
            return appending(query, to: line.trimmingCharacters(in: .whitespaces))
        }
    }

    /// A storyboard's WebVTT file with `query` added to the URI of every cue (each line after a timing line, up to
    /// the blank line that ends the cue), before its fragment: `storyboard.jpg?token=…#xywh=0,0,160,90`, which a
    /// player resolves against the VTT's URL. Everything else is kept byte for byte.
    static func addingQueryToCues(_ query: String, to vtt: String) -> String {
        var inCue = false
        return mappingLines(of: vtt) { line in
            let content = line.trimmingCharacters(in: .whitespaces)
            if content.isEmpty {
                inCue = false
            } else if line.contains("-->") {
                inCue = true
            } else if inCue {
                return appending(query, to: content)
            }
            return line
        }
    }

    /// `text` with each line (without its line ending) replaced by what `transform` makes of it; line endings, LF or
    /// CR LF, are kept.
    private static func mappingLines(of text: String, _ transform: (String) -> String) -> String {
        // Split on LF bytes: as characters, CR LF is one and would not split.
        let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        return lines.map { line in
            line.hasSuffix("\r") ? transform(String(line.dropLast())) + "\r" : transform(line)
        }.joined(separator: "\n")
    }

    /// A tag line with `query` added to its `URI="…"` attribute, if it has one.
    private static func rewritingAttributes(_ line: some StringProtocol, query: String) -> String {
        guard line.hasPrefix("#EXT"), let start = line.range(of: "URI=\"") else { return String(line) }
        let rest = line[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return String(line) }
        return String(line[..<start.upperBound]) + appending(query, to: rest[..<end]) + String(rest[end...])
    }

    /// `uri` with `query` added after its existing query, if any, and before its fragment, if any.
    private static func appending(_ query: String, to uri: some StringProtocol) -> String {
        let uri = String(uri)
        let fragmentStart = uri.firstIndex(of: "#") ?? uri.endIndex
        let resource = uri[..<fragmentStart]
        return resource + (resource.contains("?") ? "&" : "?") + query + uri[fragmentStart...]
    }
}
