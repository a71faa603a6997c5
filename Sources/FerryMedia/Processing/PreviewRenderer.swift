import FerryCore
import FerryStorage
import Foundation

/// Makes the pictures a video's playback path serves on demand — stills (`thumbnail.{jpg,png,webp}`) and short
/// animations (`animated.{gif,webp}`) — and keeps each in the store, so a picture is made once.
///
/// A picture is taken from the best rendition: its HLS variant of the highest definition, of which only the segments
/// that hold the asked-for time are read (bounded, whatever the video's length); else its best MP4; else, before any
/// rendition is published, the source, through one copy per node shared by its pictures (``PreviewSources``). ffmpeg
/// runs as a child process through the pipeline's runner (niced, in its own process group, killed when every request
/// waiting for it is cancelled); the time limit covers reading the input and ffmpeg's run; what it makes is refused
/// past ``Configuration/maxBytes``. The picture is stored under the video's output prefix (or `video/<id>/`) as
/// `previews/<normalised parameters>.<ext>` through the store's ordinary atomic put; a republished video starts with no
/// pictures. On one node, identical requests at once share one ffmpeg run, and a ``PreviewGate`` bounds the runs at
/// once and those waiting (past it: 503 `SlowDown`); nodes do not coordinate, so two nodes may each make a picture and
/// the last one stored wins.
///
/// The store holds at most ``Configuration/maxCached`` pictures per video, however many distinct parameters callers
/// ask for: after storing one, the renderer lists the video's pictures (the objects are the only record, shared by
/// every node) and deletes the oldest past the limit, each only as listed (a picture made again meanwhile stays), and
/// none stored within ``Configuration/cacheGrace`` (the requests that made them are answered from the store). A
/// deleted picture is made again when asked for. Deleting the video deletes its pictures with its other files; a
/// picture stored after the video was deleted is deleted again at once.
package struct PreviewRenderer: Sendable {
    /// Limits of on-demand pictures.
    package struct Configuration: Sendable {
        /// Longest time one picture takes: reading its input, then ffmpeg. Default 60 s.
        package var timeLimit: Duration = .seconds(60)
        /// Largest picture kept and served. Default 16 MiB.
        package var maxBytes: Int64 = 16 << 20
        /// Where pictures are made (`<data dir>/preview-work`).
        package var workDirectory: String
        /// ffmpeg runs for pictures at once on this node. Default: the cores, at least 2.
        package var maxRuns = max(2, ProcessInfo.processInfo.activeProcessorCount)
        /// Requests for other pictures that may wait for a run; more are refused. Default 32.
        package var maxWaiting = 32
        /// Pictures kept per video; storing one more deletes the oldest. At least 1. Default 64.
        package var maxCached = 64
        /// How long a stored picture is kept whatever ``maxCached``. Default 60 s.
        package var cacheGrace: Duration = .seconds(60)

        /// Creates the defaults, working in `workDirectory`.
        package init(workDirectory: String) {
            self.workDirectory = workDirectory
        }
    }

    let pipeline: MediaPipeline
    let configuration: Configuration
    /// The node's runs; copies of this renderer share it.
    package let gate: PreviewGate
    /// The node's copies of sources pictures are taken from; copies of this renderer share them.
    let sources: PreviewSources

    /// Creates a renderer that runs ffmpeg as `pipeline` runs it, and reads and writes `pipeline`'s store.
    package init(pipeline: MediaPipeline, configuration: Configuration) {
        self.pipeline = pipeline
        self.configuration = configuration
        gate = PreviewGate(limit: configuration.maxRuns, maxWaiting: configuration.maxWaiting)
        sources = PreviewSources(directory: configuration.workDirectory + "/sources")
    }

    /// The key under which the picture `file` asks for is stored, made now when it is not yet; nil when `file` names
    /// no preview.
    ///
    /// - Throws: ``FerryDomainError`` `invalidArgument` for parameters out of bounds, a video without a picture, or
    ///   one ffmpeg cannot take a picture from; `requestRateExceeded` when the node makes as many pictures as its
    ///   ``PreviewGate`` lets it, or when ffmpeg runs out of time (nothing is stored: the picture may be asked for
    ///   again); what the store throws.
    package func picture(file: String, query: [String: String], of video: VideoRecord) async throws -> String? {
        guard
            let request = try PreviewRequest.parse(file: file, query: query, duration: video.mezzanine?.playingDuration)
        else { return nil }
        if let info = video.mezzanine, !info.hasVideo {
            throw FerryDomainError(.invalidArgument, "The video has no picture to take \(file) from.")
        }
        // Without a rendition the source is decoded: not one whose pictures are too large to decode here.
        if let info = video.mezzanine, info.isPictureTooLarge, (video.renditions ?? []).isEmpty {
            throw FerryDomainError(
                .invalidArgument,
                "The video's picture is \(info.width ?? 0)×\(info.height ?? 0) pixels; pictures are taken from at most \(MezzanineInfo.maxPixelsText).")
        }
        guard MediaPipeline.isLive(video.status) else {
            throw FerryDomainError(
                .invalidArgument, "The video has no picture to take \(file) from until it is uploaded (status \(video.status)).")
        }
        let key = Self.places(of: video)[0] + "/" + request.cacheName
        if try await pipeline.store.storedObject(bucket: video.bucket, key: key) != nil { return key }
        try await gate.run(key: video.bucket + "/" + key) { try await render(request, of: video, to: key) }
        return key
    }

    private func render(_ request: PreviewRequest, of video: VideoRecord, to key: String) async throws {
        try PrivateFiles.directory(configuration.workDirectory)
        let directory = configuration.workDirectory + "/" + UUID().uuidString
        try PrivateFiles.directory(directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let started = ContinuousClock.now
        let input = try await fetchInput(for: request, of: video, into: directory)
        let output = directory + "/picture." + request.format
        let errors = directory + "/ffmpeg.err"
        // The time limit covers the picture: reading its input, then ffmpeg.
        let pipeline = self.pipeline
        func run(from offset: Double) async throws -> ChildProcess.Outcome? {
            let remaining = configuration.timeLimit - (ContinuousClock.now - started)
            guard remaining > .zero else { return nil }
            return try await pipeline.run(
                \.ffmpeg,
                request.arguments(
                    input: input.path, offset: offset, countsFromFirstFrame: input.isSegments, output: output),
                errors: errors, timeLimit: remaining)
        }
        var outcome: ChildProcess.Outcome?
        do {
            outcome = try await run(from: input.offset)
            // A time after the last frame began, while it still shows (to the video's end): that frame is the picture,
            // the first from half a frame before, else from a whole frame before (renditions play at most 60 frames a
            // second); never one before it, which a longer step could reach.
            let interval = 1 / min(max(video.mezzanine?.fps ?? 1, 0.01), 60)
            for step in [interval / 2, interval]
            where outcome?.succeeded == true && WorkFiles.size(of: output) == 0 && request.kind == .thumbnail
                && input.offset > 0
            {
                outcome = try await run(from: max(0, input.offset - step))
            }
        } catch {
            if let shared = input.sharedSource { await sources.release(shared) }
            throw error
        }
        if let shared = input.sharedSource { await sources.release(shared) }
        let size = WorkFiles.size(of: output)
        guard let outcome, !outcome.timedOut else {
            throw FerryDomainError(
                .requestRateExceeded, "The picture could not be made in time; ask again in a moment.",
                retryAfterSeconds: 5)
        }
        if outcome.succeeded, size == 0 {
            // ffmpeg read the video and found no frame from the time asked on: one asked for before the probe told
            // the video's length, past its end.
            throw FerryDomainError(.invalidArgument, "No picture can be taken from the video there: it ends before.")
        }
        guard outcome.succeeded, size > 0 else {
            // The file is to blame (a video played as uploaded need not be one ffmpeg reads): the caller's to hear.
            let reason = MediaPipeline.hidingPaths(MediaPipeline.reason(errors: errors, directory: directory), sources.directory)
            throw FerryDomainError(.invalidArgument, "No picture can be taken from the video: \(reason)")
        }
        guard size <= configuration.maxBytes else {
            throw FerryDomainError(
                .invalidArgument,
                "The picture would be larger than \(configuration.maxBytes >> 20) MiB: ask for a smaller width, "
                    + "fewer frames or a shorter stretch.")
        }
        try Task.checkCancellation()
        try await WorkFiles.upload(
            output, to: pipeline.store, bucket: video.bucket, key: key,
            contentType: WorkFiles.contentType(forPath: output))
        // The removal of a video deleted meanwhile may have listed its files before this one was stored.
        guard let current = try await pipeline.catalog.video(video.videoId), MediaPipeline.isLive(current.status) else {
            try await pipeline.store.deleteObject(bucket: video.bucket, key: key, condition: .none)
            throw FerryDomainError(.objectNotFound, "The video is gone.")
        }
        do {
            try await trimCache(of: current)
        } catch {
            // The picture is stored and answered; the next one stored trims again.
            pipeline.logger.warning(
                "cached pictures not trimmed",
                metadata: ["ferry.video-id": .string(video.videoId), "error": .string("\(error)")])
        }
    }

    /// Where `video`'s pictures are kept, the place new ones go first: pictures taken from a first stream are kept
    /// apart from the ladder's (published later under the same prefix), so that the ladder's best rendition is used
    /// once it is there; pictures taken from the source before any rendition are kept under `video/<id>/`.
    private static func places(of video: VideoRecord) -> [String] {
        let source = "video/\(video.videoId)"
        guard let prefix = video.outputPrefix else { return [source] }
        let firstStream = prefix + "/" + TranscodePlan.firstStreamDirectory
        return video.status == VideoStatus.normal ? [prefix, firstStream, source] : [firstStream, prefix, source]
    }

    /// Deletes `video`'s oldest pictures past ``Configuration/maxCached``, in every place they are kept, except those
    /// stored within ``Configuration/cacheGrace``. Each is deleted only as it was listed (its ETag and time): one made
    /// again meanwhile stays, and one another node deleted first is no error.
    private func trimCache(of video: VideoRecord) async throws {
        let store = pipeline.store
        var pictures: [ObjectInfo] = []
        for place in Self.places(of: video) {
            var after: String?
            repeat {
                let page = try await store.listObjects(
                    bucket: video.bucket, prefix: place + "/previews/", delimiter: nil, startAfter: after, maxKeys: 1000)
                pictures += page.objects
                after = page.isTruncated ? page.objects.last?.key : nil
            } while after != nil
        }
        let kept = max(1, configuration.maxCached)
        guard pictures.count > kept else { return }
        let cutoff = Date().addingTimeInterval(-configuration.cacheGrace.timeInterval)
        let newestFirst = pictures.sorted { ($0.lastModified, $0.key) > ($1.lastModified, $1.key) }
        for picture in newestFirst.dropFirst(kept) where picture.lastModified < cutoff {
            do {
                try await store.deleteObject(
                    bucket: video.bucket, key: picture.key,
                    condition: ObjectWriteCondition(ifMatch: [picture.etag], ifMatchLastModified: picture.lastModified))
            } catch let error as FerryDomainError where error.code == .preconditionFailed || error.code == .objectNotFound {
                // Made again, or deleted by another node, since it was listed.
            }
        }
    }

    /// What ffmpeg reads: a file, the offset into it of the request's start, and whether it is joined HLS segments.
    private struct Input {
        var path: String
        var offset: Double
        var isSegments = false
        /// The name of the shared copy of the source read, to release once ffmpeg has run.
        var sharedSource: String?
    }

    /// Writes what ffmpeg reads into `directory`.
    private func fetchInput(for request: PreviewRequest, of video: VideoRecord, into directory: String) async throws
        -> Input
    {
        let renditions = video.renditions ?? []
        func best(_ format: String) -> Rendition? {
            renditions.filter { $0.format == format && $0.definition != "AUTO" && $0.width != nil }
                .max { ($0.width ?? 0) < ($1.width ?? 0) }
        }
        if let prefix = video.outputPrefix, let variant = best("m3u8") {
            let segments = try await hlsInput(
                playlistKey: prefix + "/" + TranscodePlan.mediaPlaylistPath(of: variant), bucket: video.bucket,
                from: request.start, to: request.end,
                into: directory)
            if let segments { return Input(path: segments.0, offset: segments.1, isSegments: true) }
        }
        if let prefix = video.outputPrefix, let mp4 = best("mp4") {
            let path = directory + "/input.mp4"
            let object = try await pipeline.store.object(bucket: video.bucket, key: prefix + "/" + mp4.path)
            try await WorkFiles.download([{ object }], from: pipeline.store, to: path)
            return Input(path: path, offset: request.start)
        }
        // No rendition: the source, copied once for every picture of it on this node, within the picture's time.
        guard let object = try await pipeline.store.storedObject(bucket: video.bucket, key: video.key) else {
            throw FerryDomainError(.objectNotFound, "The video is gone.")
        }
        let ext = (video.key as NSString).pathExtension
        let name = video.videoId + "-" + SigV4.hexSHA256(object.etag.utf8).prefix(16) + (ext.isEmpty ? "" : "." + ext)
        let store = pipeline.store
        do {
            let path = try await sources.lease(name, within: configuration.timeLimit) { path in
                try await WorkFiles.download([{ object }], from: store, to: path)
            }
            return Input(path: path, offset: request.start, sharedSource: name)
        } catch is PreviewSources.WaitExpired {
            throw FerryDomainError(
                .requestRateExceeded, "The picture could not be made in time; ask again in a moment.",
                retryAfterSeconds: 5)
        }
    }

    /// The init section and the segments of an HLS (fMP4) variant that cover `start...end`, joined into one file, and
    /// the offset of `start` in it; nil when the playlist is not one Ferry wrote.
    private func hlsInput(playlistKey: String, bucket: String, from start: Double, to end: Double, into directory: String)
        async throws -> (String, Double)?
    {
        let store = pipeline.store
        let playlistPath = directory + "/index.m3u8"
        let playlist = try await store.object(bucket: bucket, key: playlistKey)
        try await WorkFiles.download([{ playlist }], from: store, to: playlistPath)
        let text = (try? String(contentsOfFile: playlistPath, encoding: .utf8)) ?? ""
        guard text.contains("#EXT-X-MAP:URI=\"init.mp4\"") else { return nil }
        let segments = TranscodePlan.segments(ofPlaylist: text)
        guard !segments.isEmpty else { return nil }
        // The segments whose span meets start...end; a time at the very end takes the last segment.
        var chosen: [String] = []
        var firstStart: Double?
        var position = 0.0
        for (index, segment) in segments.enumerated() {
            let segmentEnd = position + segment.duration
            let isLast = index == segments.count - 1
            if segmentEnd > start || isLast, position <= end {
                if firstStart == nil { firstStart = position }
                chosen.append(segment.uri)
            }
            position = segmentEnd
            if position > end { break }
        }
        guard let firstStart, chosen.allSatisfy({ !$0.contains("/") && !$0.contains("..") }) else { return nil }
        let base = (playlistKey as NSString).deletingLastPathComponent
        let joined = directory + "/input.mp4"
        try await WorkFiles.download(
            (["init.mp4"] + chosen).map { name in { try await store.object(bucket: bucket, key: base + "/" + name) } },
            from: store, to: joined)
        // A still at the very end of the video is the last frame there is.
        let offset = max(0, min(start, position - 0.05) - firstStart)
        return (joined, offset)
    }
}
