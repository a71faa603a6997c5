import Foundation

/// How a video's storyboard is laid out: one tile every ``interval`` seconds, at most ``maxTiles`` of them, in rows of
/// ``maxColumns`` in one JPEG sprite (`storyboard.jpg`), and the WebVTT file (`storyboard.vtt`) whose cues point
/// players at each tile with a `#xywh=` fragment. Pure: the pipeline runs ffmpeg with ``filter`` and writes ``vtt``.
package struct StoryboardPlan: Sendable, Hashable {
    /// The sprite's file name, as the VTT refers to it (relative, beside it).
    package static let imageFileName = "storyboard.jpg"
    /// The cue file's name.
    package static let vttFileName = "storyboard.vtt"
    /// Most tiles in a storyboard.
    package static let maxTiles = 100
    /// Most tiles in a row.
    package static let maxColumns = 10
    /// A tile's width in pixels.
    package static let tileWidth = 160
    /// A tile's greatest height in pixels: a tall phone video's fits (9:19.5 is 347); one taller is squeezed, so the
    /// sprite stays small whatever shape the video has.
    package static let maxTileHeight = 360

    /// The video's duration, seconds.
    package var duration: Double
    /// Seconds between tiles: a whole second at least, else as many as keep the tiles at ``maxTiles``.
    package var interval: Double
    /// Tiles, each covering ``interval`` seconds (the last one what is left).
    package var count: Int
    /// Tiles in a row.
    package var columns: Int { min(count, Self.maxColumns) }
    /// Rows of tiles.
    package var rows: Int { (count + Self.maxColumns - 1) / Self.maxColumns }

    /// The plan for a video of `duration` seconds; nil when it has none.
    package init?(duration: Double?) {
        guard let duration, duration.isFinite, duration > 0, duration <= ProbeReport.maxDuration else { return nil }
        self.duration = duration
        interval = max(1, (duration / Double(Self.maxTiles)).rounded(.up))
        count = min(Self.maxTiles, max(1, Int((duration / interval).rounded(.up))))
    }

    /// The ffmpeg video filter that makes the sprite: one frame per interval, scaled to a tile, laid out in the grid.
    package var filter: String {
        let height = "'max(2,min(\(Self.maxTileHeight),round(ih*\(Self.tileWidth)/iw/2)*2))'"
        // At the end of the video the last frame is passed on: a video shorter than a second has no frame at a
        // whole second, and its one tile would be empty (no sprite at all).
        return "fps=1/\(Int(interval)):round=down:eof_action=pass,\(MediaInput.squarePixels),"
            + "scale=\(Self.tileWidth):\(height),setsar=1,tile=\(columns)x\(rows)"
    }

    /// The ffmpeg arguments that make the sprite from `input`.
    package func arguments(input: String, output: String) -> [String] {
        TranscodePlan.quietFlags + MediaInput.options + [
            "-i", input, "-map", "0:V:0", "-an", "-sn", "-dn", "-vf", filter, "-frames:v", "1", "-q:v", "4", "-f", "image2", output,
        ]
    }

    /// The WebVTT cues: one per tile, back to back from 0 to the duration, each naming its tile of a sprite whose
    /// tiles are `tileHeight` pixels high.
    package func vtt(tileHeight: Int) -> String {
        var lines = ["WEBVTT", ""]
        for index in 0..<count {
            let start = Double(index) * interval
            let end = index == count - 1 ? duration : min(duration, Double(index + 1) * interval)
            let x = (index % Self.maxColumns) * Self.tileWidth
            let y = (index / Self.maxColumns) * tileHeight
            lines.append("\(Self.timestamp(start)) --> \(Self.timestamp(end))")
            lines.append("\(Self.imageFileName)#xywh=\(x),\(y),\(Self.tileWidth),\(tileHeight)")
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    /// `hh:mm:ss.mmm`.
    static func timestamp(_ seconds: Double) -> String {
        let millis = Int((seconds * 1000).rounded())
        return String(
            format: "%02d:%02d:%02d.%03d", millis / 3_600_000, millis / 60_000 % 60, millis / 1000 % 60, millis % 1000)
    }
}
