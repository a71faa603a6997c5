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

    /// A tag line with `query` added to its `URI` attribute, if it has one. The attribute list is read as RFC 8216
    /// writes it (`NAME=value` pairs separated by commas, quoted strings taken whole), so text inside another
    /// attribute's quoted value (a track's `NAME`) is never mistaken for a URI.
    private static func rewritingAttributes(_ line: String, query: String) -> String {
        guard line.hasPrefix("#EXT"), let colon = line.firstIndex(of: ":") else { return line }
        var output = String(line[...colon])
        var index = line.index(after: colon)
        while index < line.endIndex, let equals = line[index...].firstIndex(of: "=") {
            let name = line[index..<equals]
            output += line[index...equals]
            index = line.index(after: equals)
            let end: String.Index
            if index < line.endIndex, line[index] == "\"" {
                let open = line.index(after: index)
                guard let close = line[open...].firstIndex(of: "\"") else { break }
                output += "\"" + (name == "URI" ? appending(query, to: line[open..<close]) : String(line[open..<close])) + "\""
                end = line.index(after: close)
            } else {
                end = line[index...].firstIndex(of: ",") ?? line.endIndex
                output += line[index..<end]
            }
            index = end
            guard index < line.endIndex, line[index] == "," else { break }
            output += ","
            index = line.index(after: index)
        }
        return output + line[index...]
    }

    /// `uri` with `query` added after its existing query, if any, and before its fragment, if any. A URI that may
    /// name another host (with a scheme, or a network-path reference `//host/…`) is kept as it is: the query carries
    /// the viewer's token, which is for this service alone.
    private static func appending(_ query: String, to uri: some StringProtocol) -> String {
        let uri = String(uri)
        let beforePath = uri.prefix { !"/?#".contains($0) }
        guard !uri.hasPrefix("//"), !beforePath.contains(":") else { return uri }
        let fragmentStart = uri.firstIndex(of: "#") ?? uri.endIndex
        let resource = uri[..<fragmentStart]
        return resource + (resource.contains("?") ? "&" : "?") + query + uri[fragmentStart...]
    }
}
