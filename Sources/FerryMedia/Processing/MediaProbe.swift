import FerryStorage
import Foundation

/// How ffprobe is asked to describe a file (`-print_format json -show_format -show_streams`), how its answer is read
/// (``ProbeReport``), and how its complaints are shortened.
enum MediaProbe {
    /// The file is not media ffprobe can read, or holds no audio or video stream.
    struct Unreadable: Error, CustomStringConvertible {
        /// Why, in ffprobe's words where it gave any.
        var reason: String
        var description: String { reason }
    }

    /// ffprobe's arguments for `path`.
    static func arguments(for path: String) -> [String] {
        ["-v", "error", "-print_format", "json", "-show_format", "-show_streams"] + MediaInput.options + ["--", path]
    }

    /// Reads ffprobe's JSON (``ProbeReport``) into what the catalog keeps; `size` is the stored object's size.
    static func parse(_ json: Data, size: Int64) throws -> MezzanineInfo {
        try ProbeReport.decode(json).mezzanine(size: size)
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

    /// A tool's complaint, shortened to its last meaningful lines, or a general reason naming `tool` when it said
    /// nothing.
    static func reason(fromStandardError text: String, tool: String = "ffprobe") -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !lines.isEmpty else { return "The file is not audio or video that \(tool) can read." }
        return String(lines.suffix(3).map(withoutAddresses).joined(separator: " ").prefix(500))
    }

    /// `line` without the heap addresses ffmpeg names its components by (`[h264 @ 0x55d0c8a4e2c0]` → `[h264]`): a
    /// detail of the server's memory, not of the file.
    static func withoutAddresses(_ line: String) -> String {
        var result = ""
        var rest = Substring(line)
        while let at = rest.range(of: " @ 0x") {
            result += rest[..<at.lowerBound]
            rest = rest[at.upperBound...].drop(while: \.isHexDigit)
        }
        return result + rest
    }
}
