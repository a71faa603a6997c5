import FerryMedia
import Foundation

extension FerryServer {
    /// Makes the stills and animations the playback path serves on demand, when ffmpeg is here (on every role: an API
    /// node answers playback too). A request waits for them, so they run at the tools' niceness but never on idle
    /// scheduling.
    var previewRenderer: PreviewRenderer? {
        guard let tools = mediaTools else { return nil }
        var processing = configuration.mediaProcessing
        processing.idleScheduling = false
        processing.minFreeBytes = configuration.minFreeBytes
        let pipeline = MediaPipeline(
            catalog: mediaCatalog, store: store, webhooks: webhooks, tools: tools, configuration: processing,
            workDirectory: configuration.dataDirectory + "/media-work", logger: configuration.logger)
        var limits = PreviewRenderer.Configuration(workDirectory: previewWorkDirectory)
        limits.timeLimit = processing.previewTimeLimit
        limits.maxCached = processing.previewCacheLimit
        limits.cacheGrace = processing.previewCacheGrace
        return PreviewRenderer(pipeline: pipeline, configuration: limits)
    }

    /// Where pictures are made: `<data dir>/preview-work`, one directory per picture, removed once it is made.
    var previewWorkDirectory: String { configuration.dataDirectory + "/preview-work" }

    /// Removes what a process that stopped without cleaning up (a crash, SIGKILL) left in ``previewWorkDirectory``
    /// (a copy of a video's source per picture it was making): pictures are made by the requests of the process that
    /// serves them, so when it starts nothing there is live.
    func removeAbandonedPreviewWork() {
        let directory = previewWorkDirectory
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            try? FileManager.default.removeItem(atPath: directory + "/" + entry)
        }
    }
}
