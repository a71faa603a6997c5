import Foundation

/// Where ffmpeg and ffprobe are.
public struct MediaTools: Sendable, Hashable {
    /// Absolute path of ffmpeg.
    public var ffmpeg: String
    /// Absolute path of ffprobe.
    public var ffprobe: String

    /// Creates a pair of paths.
    public init(ffmpeg: String, ffprobe: String) {
        self.ffmpeg = ffmpeg
        self.ffprobe = ffprobe
    }

    /// Finds both tools: in `directory` when given, else on `PATH`; nil when either is missing or not executable.
    public static func locate(directory: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        -> MediaTools?
    {
        let directories =
            directory.map { [$0] }
            ?? (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        func find(_ name: String) -> String? {
            for directory in directories where !directory.isEmpty {
                let path = URL(fileURLWithPath: directory).appendingPathComponent(name).standardizedFileURL.path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                    FileManager.default.isExecutableFile(atPath: path)
                {
                    return path
                }
            }
            return nil
        }
        guard let ffmpeg = find("ffmpeg"), let ffprobe = find("ffprobe") else { return nil }
        return MediaTools(ffmpeg: ffmpeg, ffprobe: ffprobe)
    }
}
