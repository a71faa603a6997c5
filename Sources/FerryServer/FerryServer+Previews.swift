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
        let pipeline = MediaPipeline(
            catalog: mediaCatalog, store: store, webhooks: webhooks, tools: tools, configuration: processing,
            workDirectory: configuration.dataDirectory + "/media-work", logger: configuration.logger)
        var limits = PreviewRenderer.Configuration(workDirectory: configuration.dataDirectory + "/preview-work")
        limits.timeLimit = processing.previewTimeLimit
        limits.maxCached = processing.previewCacheLimit
        limits.cacheGrace = processing.previewCacheGrace
        return PreviewRenderer(pipeline: pipeline, configuration: limits)
    }
}
