import FerryStorage
import Foundation

extension MediaPipeline {
    /// Makes a video playable before its ladder is done: packages its first stream (``TranscodePlan/FirstStream``: the
    /// source as it is, or the lowest definition encoded on its own into `encoded`), stores it under `prefix` in
    /// ``TranscodePlan/firstStreamDirectory`` with a master playlist of its own, and publishes both in one catalog
    /// change that sets `playableAt` while the video stays `Transcoding` (then `VideoPlayable`). The ladder is
    /// published later under the same prefix, its master playlist replacing this one; the first stream's files stay for
    /// ``MediaProcessingConfiguration/firstStreamRetention``, so a player that started on them plays to the end.
    ///
    /// Best effort: when the first stream cannot be made the ladder still is, so this logs why and returns false.
    /// Throws ``SourceTooLong`` when what it made shows the source longer than the server transcodes, and otherwise
    /// only what the job should be retried for (the catalog or the store failing, cancellation). While the lowest
    /// definition is encoded, `progress` hears how far it is (0 to 1).
    func publishFirstStream(
        _ first: TranscodePlan.FirstStream, of video: VideoRecord, plan: TranscodePlan, source: String, encoded: String,
        directory: String, prefix: String, declared: Double?, progress: @escaping @Sendable (Double) async -> Void
    ) async throws -> Bool {
        let output = directory + "/first"
        try PrivateFiles.directory(output + "/" + TranscodePlan.firstStreamDirectory)
        defer { try? FileManager.default.removeItem(atPath: output) }
        let errors = directory + "/first.err"
        let definition: String
        let progressive: String
        // Each step, with the progress file it writes when it encodes.
        var steps: [(arguments: [String], progressFile: String?)] = []
        switch first {
        case .source:
            definition = "OD"
            progressive = source
            steps.append((plan.sourcePackageArguments(input: source, directory: output), nil))
        case .lowest(let lowest):
            definition = lowest.definition
            progressive = encoded + "/" + lowest.fileName
            let progressFile = directory + "/first-progress.txt"
            let encode = plan.encoding { $0 == lowest }
                .encodeArguments(input: source, directory: encoded, progressFile: progressFile)
            steps.append((encode, progressFile))
            steps.append((plan.firstStreamPackageArguments(for: lowest, encoded: encoded, directory: output), nil))
        }
        for (arguments, progressFile) in steps {
            let outcome = try await run(\.ffmpeg, arguments, errors: errors, pollInterval: .milliseconds(250)) {
                if let progressFile, let fraction = Self.progress(of: progressFile, lasting: declared) {
                    await progress(fraction)
                }
            }
            guard outcome.succeeded else {
                logger.warning(
                    "first stream not made; the video plays once its ladder is done",
                    metadata: [
                        "ferry.video-id": .string(video.videoId),
                        "reason": .string(Self.reason(errors: errors, directory: directory)),
                    ])
                // A half-encoded definition is encoded again with the ladder.
                if case .lowest(let lowest) = first { try? FileManager.default.removeItem(atPath: encoded + "/" + lowest.fileName) }
                return false
            }
        }
        let measured = try await measure(progressive, directory: directory)
        let streamDirectory = output + "/" + TranscodePlan.firstStreamDirectory
        let (segments, peak, average) = Self.packaged(streamDirectory)
        // A source cut short after its index packages to less than the video it declares, and one read only to just
        // past the longest the server transcodes to less than it holds: not published as that video (the ladder then
        // fails it, saying so), so no player is handed a few seconds of a longer film.
        let made = segments.reduce(0) { $0 + $1.duration }
        if let reason = tooLong(declared: declared, made: made) { throw SourceTooLong(reason: reason) }
        if let reason = made > 0 ? Self.cutShort(made: made, declared: declared) : "its segments have no length" {
            logger.warning(
                "first stream not made", metadata: ["ferry.video-id": .string(video.videoId), "reason": .string(reason)])
            return false
        }
        // The variant's playlist is `start/index.m3u8`: an output named by that directory.
        let variant = TranscodePlan.Output(
            definition: TranscodePlan.firstStreamDirectory, width: measured.width, height: measured.height,
            videoBitrate: nil, audioBitrate: 0, hasAudio: measured.audioCodec != nil)
        let codecs = TranscodePlan.codecs(
            videoProfile: measured.videoProfile, videoLevel: measured.videoLevel, hasVideo: true,
            hasAudio: measured.audioCodec != nil)
        let master = TranscodePlan.masterPlaylist([(variant, max(peak, average), average, codecs, measured.fps)])
        try Data(master.utf8).write(to: URL(fileURLWithPath: output + "/master.m3u8"))
        let stream = Rendition(
            definition: definition, format: "m3u8", path: variant.playlistPath, width: measured.width,
            height: measured.height, bitrate: measured.bitrate, duration: measured.duration, fps: measured.fps,
            size: WorkFiles.size(of: streamDirectory), videoCodec: measured.videoCodec, audioCodec: measured.audioCodec)
        var auto = stream
        auto.definition = "AUTO"
        auto.path = "master.m3u8"
        auto.size = Int64(master.utf8.count)
        auto.videoCodec = nil
        auto.audioCodec = nil

        // The stream's files first, its playlist after them, its master playlist last: nothing names a file not yet
        // stored.
        do {
            for file in WorkFiles.storeOrder(WorkFiles.files(under: output)) {
                try Task.checkCancellation()
                try await WorkFiles.upload(
                    output + "/" + file, to: store, bucket: video.bucket, key: prefix + "/" + file,
                    contentType: WorkFiles.contentType(forPath: file))
            }
        } catch {
            // Stopped (the claim lost, the video deleted, the server shutting down) or failed while storing it, before
            // anything names it: what this run stored under its own prefix is nobody's. (An error of the save below
            // leaves the files: its commit may still land, and the next run removes them when it did not.)
            await removeUnpublished(prefix, bucket: video.bucket)
            throw error
        }
        let renditions = [stream, auto]
        // Saved to the end even when this run is stopped meanwhile (``updateToEnd(_:_:)``).
        let saved = try await updateToEnd(video.videoId) { [webhooks] video in
            guard video.status == VideoStatus.transcoding, video.playableAt == nil else { return .keep }
            video.renditions = renditions
            video.outputPrefix = prefix
            video.firstStreamDefinition = definition
            video.playableAt = Date()
            video.updatedAt = Date()
            let playable = WebhookNotification.videoPlayable(
                videoId: video.videoId, definition: definition, format: "m3u8")
            return .save(notify: try webhooks.events(playable))
        }
        return saved != nil
    }

    /// Removes the first stream's files (``TranscodePlan/firstStreamDirectory`` under the video's prefix, with the
    /// pictures cached there before the ladder) once the ladder has replaced it for the retention time. Only files
    /// stored before the job was made go: a later transcode's first stream, under the same prefix, is its own job's.
    /// Nothing to do when the video is gone, not `Normal`, or still names a file there.
    func retireFirstStream(_ job: MediaJob) async throws {
        let start = TranscodePlan.firstStreamDirectory + "/"
        guard let video = try await catalog.video(job.videoId), video.status == VideoStatus.normal,
            let prefix = video.outputPrefix, !(video.renditions ?? []).contains(where: { $0.path.hasPrefix(start) })
        else { return }
        try await WorkFiles.deleteObjects(
            in: store, bucket: video.bucket, prefix: prefix + "/" + start, storedBefore: job.createdAt)
    }
}
