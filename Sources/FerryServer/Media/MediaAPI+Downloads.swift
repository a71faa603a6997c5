import FerryCore
import FerryStorage

extension MediaAPI {
    /// The video's download policy; `all` for a video that names none.
    static func downloadPolicy(of video: VideoRecord) -> DownloadPolicy {
        video.downloads.flatMap(DownloadPolicy.parse) ?? .all
    }

    /// Whether a rendition is a progressive file (an MP4 of a definition, or the audio rendition's `.m4a`).
    static func isProgressive(_ rendition: Rendition) -> Bool { rendition.format == "mp4" || rendition.format == "m4a" }

    /// The paths of the video's progressive files that its download policy offers: every one (`all`); the MP4 of the
    /// highest definition whose shorter side is at most 1080 pixels (`capped-1080p`); the audio rendition
    /// (`audio-only`); none (`none`).
    static func downloadable(_ video: VideoRecord) -> Set<String> {
        let progressive = (video.renditions ?? []).filter(isProgressive)
        let policy = downloadPolicy(of: video)
        if policy == .all { return Set(progressive.map(\.path)) }
        var paths: Set<String> = []
        func shortSide(_ rendition: Rendition) -> Int? {
            guard let width = rendition.width, let height = rendition.height else { return nil }
            return min(width, height)
        }
        if policy.includesCapped1080p,
            let top = progressive.filter({ $0.format == "mp4" && (shortSide($0) ?? .max) <= 1080 })
                .max(by: { (shortSide($0) ?? 0) < (shortSide($1) ?? 0) })
        {
            paths.insert(top.path)
        }
        if policy.includesAudio {
            for rendition in progressive where rendition.width == nil { paths.insert(rendition.path) }
        }
        return paths
    }
}
