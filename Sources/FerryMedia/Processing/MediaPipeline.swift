import FerryCore
import FerryStorage
import Foundation
import Logging
import Tracing

/// What the media jobs do: probe the source, take a cover, transcode the ladder and publish it.
///
/// Every job reads the video's source from the object store into a working directory of its own, runs ffprobe or
/// ffmpeg there, and writes what it made back to the store. A transcode run writes its files under a prefix of its own
/// (`video/<id>/out/<job>.<run>/`, or the prefix of a first stream an earlier run of the job published) and publishes
/// them all at once, in one catalog change that also makes the video `Normal`: a player never sees half a ladder, and
/// a run that died leaves only files no one points at, which the next run deletes. Status changes and the jobs they
/// call for are saved in one transaction, only while the worker still holds the job (``JobLease``).
///
/// A failure the file is to blame for (ffprobe cannot read it, ffmpeg refuses it) ends the video in `TranscodeFail`
/// with the tool's reason, at once. Anything else (the store, the catalog) is thrown for the worker to retry.
package struct MediaPipeline: Sendable {
    let catalog: any MediaCatalog & WebhookStore
    let store: any ObjectStore
    let webhooks: WebhookOutbox
    /// ffmpeg and ffprobe; nil where they are not installed, where the pipeline runs only the jobs that need neither
    /// (``claimedKinds``).
    let tools: MediaTools?
    let configuration: MediaProcessingConfiguration
    /// Where jobs keep their files while they run (`<data dir>/media-work`).
    let workDirectory: String
    let logger: Logger
    /// Who hears how jobs end and how long videos took to become `Normal` (the server's metrics).
    package var events: (any ServiceEvents)?

    /// Creates the pipeline.
    package init(
        catalog: any MediaCatalog & WebhookStore, store: any ObjectStore, webhooks: WebhookOutbox, tools: MediaTools?,
        configuration: MediaProcessingConfiguration, workDirectory: String, logger: Logger
    ) {
        self.catalog = catalog
        self.store = store
        self.webhooks = webhooks
        self.tools = tools
        self.configuration = configuration
        self.workDirectory = workDirectory
        self.logger = logger
    }

    /// The kinds of job this pipeline runs: all (nil) with its tools; without them, only the removal of files a
    /// stopped node left (``MediaJobKind/removeFiles``, ``MediaJobKind/removeImageFile``), so that no video's or
    /// image's files outlive it on a server without ffmpeg.
    package var claimedKinds: [MediaJobKind]? { tools == nil ? [.removeFiles, .removeImageFile] : nil }

    /// The kinds of job the quick lane runs: every kind but the transcode, so that a long transcode holding every
    /// worker delays no other video's probe and cover and no removal. Nil (no quick lane) without the tools, where only
    /// removals run.
    package var quickKinds: [MediaJobKind]? {
        tools == nil ? nil : [.probe, .snapshot, .retireFirstStream, .removeFiles, .removeImageFile]
    }

    /// Runs a job to its end: done, or nothing left to do (the video was deleted, or is past this step); throws what
    /// the worker should retry. `progress` takes the fraction done (0–1).
    func run(_ job: MediaJob, progress: @escaping @Sendable (Double) async -> Void) async throws {
        let directory = workDirectory + "/" + job.id
        try? FileManager.default.removeItem(atPath: directory)
        try PrivateFiles.directory(directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        switch job.kind {
        case .probe: try await probe(job, directory: directory)
        case .snapshot: try await snapshot(job, directory: directory)
        case .transcode: try await transcode(job, directory: directory, progress: progress)
        case .retireFirstStream: try await retireFirstStream(job)
        case .removeFiles: try await finishRemoval(job)
        case .removeImageFile: try await finishImageRemoval(job)
        default: logger.warning("unknown media job kind", metadata: ["ferry.job-kind": "\(job.kind)"])
        }
    }

    /// Ends a job whose attempts ran out: the video fails with the last error, unless it is past that step.
    func giveUp(_ job: MediaJob, reason: String) async throws {
        let message = "Processing failed \(job.attempts) times; last: \(reason)"
        switch job.kind {
        case .probe, .transcode:
            try await fail(job.videoId, code: "ProcessingFailed", message: message, expecting: [
                VideoStatus.uploadSucc, VideoStatus.transcoding,
            ])
        case .snapshot:
            try await webhooks.enqueue(
                .snapshotFailed(videoId: job.videoId, errorCode: "ProcessingFailed", errorMessage: message))
        default: break
        }
    }

    /// Finishes a video's deletion or expiry whose node stopped before it had (``MediaLibrary/removalJob(_:kind:)``):
    /// the files go (an expiry's unfinished uploads counted as expired), then the event (sent again if that node had
    /// sent it: webhooks are delivered at least once).
    func finishRemoval(_ job: MediaJob) async throws {
        guard let video = try await catalog.video(job.videoId), video.removedWith != video.status else { return }
        let event: WebhookNotification
        switch video.status {
        case VideoStatus.deleted: event = .videoDeleted(videoId: video.videoId)
        case VideoStatus.uploadFailed: event = .videoUploadExpired(videoId: video.videoId)
        default: return
        }
        try await MediaLibrary.removeFiles(
            of: video, in: store, expired: video.status == VideoStatus.uploadFailed)
        try await webhooks.enqueue(event)
    }

    /// Finishes an image's deletion or expiry whose node stopped before it had (``MediaLibrary/removalJob(_:kind:)``):
    /// its file and unfinished multipart uploads go while it is still `Deleted` or `UploadFail` (the uploads counted as
    /// expired for the latter). Its event was stored with its status change: none is sent.
    func finishImageRemoval(_ job: MediaJob) async throws {
        guard let image = try await catalog.image(job.videoId),
            [ImageStatus.deleted, ImageStatus.uploadFailed].contains(image.status)
        else { return }
        try await MediaLibrary.removeFile(of: image, in: store, expired: image.status == ImageStatus.uploadFailed)
    }

    // MARK: Probe

    func probe(_ job: MediaJob, directory: String) async throws {
        guard let video = try await catalog.video(job.videoId), video.status == VideoStatus.uploadSucc else { return }
        let group: TranscodeTemplates.Group?
        do {
            group = try configuration.templates.group(named: video.templateGroup)
        } catch {
            try await fail(video.videoId, code: "InvalidTemplateGroup", message: "The template group \(video.templateGroup ?? "") is not configured.", expecting: [VideoStatus.uploadSucc])
            return
        }
        guard let (source, object) = try await download(video, into: directory) else { return }
        // What the probe found; nil for a file it cannot read that NoTranscode plays as it is, whatever it holds.
        let info: MezzanineInfo?
        let analysis: WebhookNotification
        do {
            let probed = try await runProbe(source, size: object.size, directory: directory)
            (info, analysis) = (probed, .videoAnalysisComplete(videoId: video.videoId, info: probed))
        } catch let unreadable as MediaProbe.Unreadable {
            let analysisFailed = WebhookNotification.videoAnalysisFailed(
                videoId: video.videoId, errorCode: "InvalidMedia", errorMessage: unreadable.reason)
            guard group == nil else {
                try await fail(
                    video.videoId, code: "InvalidMedia", message: unreadable.reason,
                    expecting: [VideoStatus.uploadSucc], after: [analysisFailed])
                return
            }
            (info, analysis) = (nil, analysisFailed)
        }
        let maxAttempts = configuration.maxAttempts
        let tooLongReason = group == nil ? nil : info.flatMap { tooLong(declared: Self.declaredLength($0)) }
        let saved = try await catalog.updateVideo(video.videoId) { [webhooks] video in
            guard video.status == VideoStatus.uploadSucc else { return .keep }
            if let info { video.mezzanine = info }
            video.updatedAt = Date()
            var jobs: [MediaJob] = []
            var notify = [analysis]
            if video.coverURL == nil, video.snapshotKey == nil, let info, info.hasVideo, info.width != nil,
                !info.isPictureTooLarge
            {
                jobs.append(MediaJob(videoId: video.videoId, kind: .snapshot, maxAttempts: maxAttempts))
            }
            if group == nil {
                video.status = VideoStatus.normal
                video.playableAt = Date()
                notify.append(.videoPlayable(videoId: video.videoId, definition: "OD", format: Self.originalFormat(video)))
            } else if let tooLongReason {
                // Known too long once probed: failed here, not after the transcodes queued before it.
                video.status = VideoStatus.transcodeFail
                video.errorCode = Self.tooLongCode
                video.errorMessage = tooLongReason
                notify.append(
                    .transcodeFailed(videoId: video.videoId, errorCode: Self.tooLongCode, errorMessage: tooLongReason))
            } else {
                video.status = VideoStatus.transcoding
                jobs.append(MediaJob(videoId: video.videoId, kind: .transcode, maxAttempts: maxAttempts))
            }
            return .save(enqueue: jobs, notify: try webhooks.events(for: notify))
        }
        if saved?.status == VideoStatus.normal {
            events?.videoBecameNormal(after: Date().timeIntervalSince(object.lastModified))
        }
    }

    /// The format GetPlayInfo names the original by (`NoTranscode`): its file name's extension.
    static func originalFormat(_ video: VideoRecord) -> String { (video.key as NSString).pathExtension.lowercased() }

    /// Runs ffprobe on a file.
    func runProbe(_ path: String, size: Int64, directory: String) async throws -> MezzanineInfo {
        let output = directory + "/probe.json"
        let errors = directory + "/probe.err"
        let outcome = try await run(\.ffprobe, MediaProbe.arguments(for: path), output: output, errors: errors)
        guard outcome.succeeded else {
            throw MediaProbe.Unreadable(
                reason: Self.reason(errors: errors, directory: directory, timedOut: outcome.timedOut, tool: "ffprobe"))
        }
        let data = (try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data()
        return try MediaProbe.parse(data, size: size)
    }

    // MARK: Snapshot

    func snapshot(_ job: MediaJob, directory: String) async throws {
        guard let video = try await catalog.video(job.videoId), Self.isLive(video.status), video.coverURL == nil,
            video.snapshotKey == nil
        else { return }
        guard let (source, _) = try await download(video, into: directory) else { return }
        let output = directory + "/cover.jpg"
        let errors = directory + "/snapshot.err"
        func attempt(fromStart: Bool) async throws -> ChildProcess.Outcome {
            try await run(
                \.ffmpeg,
                TranscodePlan.snapshotArguments(
                    input: source, duration: video.mezzanine?.playingDuration, output: output, fromStart: fromStart),
                errors: errors)
        }
        var outcome = try await attempt(fromStart: false)
        // A seek may land where no frame decodes (a clip of one frame, of one key frame interval in MPEG-TS, a raw
        // H.264 stream): then the cover is taken from the start.
        if !outcome.timedOut, WorkFiles.size(of: output) == 0 { outcome = try await attempt(fromStart: true) }
        guard outcome.succeeded, WorkFiles.size(of: output) > 0 else {
            let reason = Self.reason(errors: errors, directory: directory, timedOut: outcome.timedOut)
            try await webhooks.enqueue(
                .snapshotFailed(videoId: video.videoId, errorCode: "SnapshotFailed", errorMessage: reason))
            return
        }
        try Task.checkCancellation()
        // A key of this run's own: a run that stalled past its lease and woke after another took the job over deletes
        // only its own file when its save is refused, never the cover the other run published.
        let key = "video/\(video.videoId)/snapshots/\(job.id).\(Hex.randomId().prefix(8)).jpg"
        let stored = try await WorkFiles.upload(output, to: store, bucket: video.bucket, key: key, contentType: "image/jpeg")
        let imageId = Hex.randomId()
        let image = ImageRecord(
            imageId: imageId, imageType: "cover", title: video.title, tags: nil, cateId: video.cateId,
            description: nil, status: ImageStatus.uploaded, size: stored.size, bucket: video.bucket, key: key,
            createdAt: Date(), owner: video.owner)
        // The cover's image record is saved with the video that names it, in one transaction, or not at all.
        let saved = try await updateToEnd(video.videoId) { [webhooks] video in
            guard Self.isLive(video.status), video.coverURL == nil, video.snapshotKey == nil else { return .keep }
            video.snapshotKey = key
            video.snapshotImageId = imageId
            video.updatedAt = Date()
            return .save(
                notify: try webhooks.events(.snapshotComplete(videoId: video.videoId, imageId: imageId, size: stored.size)),
                images: [image])
        }
        if saved == nil {
            try await whileIgnoringCancellation { [store, bucket = video.bucket] in
                try await store.deleteObject(bucket: bucket, key: key, condition: .none)
            }
        }
    }

    // MARK: Transcode

    func transcode(_ job: MediaJob, directory: String, progress: @escaping @Sendable (Double) async -> Void)
        async throws
    {
        // Files stored from now on are this run's or a later one's: only older ones may be an earlier run's leftovers.
        let started = Date()
        guard let video = try await catalog.video(job.videoId), video.status == VideoStatus.transcoding else { return }
        guard let info = video.mezzanine else {
            try await fail(video.videoId, code: "InvalidMedia", message: "The source was not probed.", expecting: [VideoStatus.transcoding])
            return
        }
        if let reason = tooLong(declared: Self.declaredLength(info)) {
            try await fail(video.videoId, code: Self.tooLongCode, message: reason, expecting: [VideoStatus.transcoding])
            return
        }
        var plan: TranscodePlan
        do {
            guard let group = try configuration.templates.group(named: video.templateGroup) else { return }
            plan = try TranscodePlan.make(for: info, group: group, templates: configuration.templates)
            plan.sourceLimit = configuration.maxTranscodeDuration.map { $0.timeInterval + Self.tooLongMargin * 2 }
        } catch let unreadable as MediaProbe.Unreadable {
            try await fail(video.videoId, code: "InvalidMedia", message: unreadable.reason, expecting: [VideoStatus.transcoding])
            return
        } catch {
            try await fail(video.videoId, code: "InvalidTemplateGroup", message: "The template group \(video.templateGroup ?? "") is not configured.", expecting: [VideoStatus.transcoding])
            return
        }
        // What earlier runs of this job (killed mid-way) left behind is not published: delete it. Only what was stored
        // before this run began: a worker that stalled past its lease and woke here after another took the job over
        // must not delete what the new owner stores (or has published, which the video read then does not name).
        let outputs = "video/\(video.videoId)/out/"
        try await WorkFiles.deleteObjects(
            in: store, bucket: video.bucket, prefix: outputs, keeping: video.outputPrefix.map { $0 + "/" },
            storedBefore: started)
        guard let (source, object) = try await download(video, into: directory) else { return }
        // Every file of this run goes under one prefix: its first stream, then the whole ladder. When an earlier run of
        // this job published a first stream, the ladder joins it under that run's prefix (players that started on it
        // go on); otherwise the prefix is this run's own. A run that lost its claim (its worker stalled past its lease
        // and another took the job over) then writes only into its own prefix, or stops before each file it would
        // store in a shared one, and deletes only an unpublished prefix of its own; its record changes are refused
        // (``JobLease``).
        let jobPrefix = "video/\(video.videoId)/out/\(job.id)"
        let earlier = video.playableAt == nil ? nil : video.outputPrefix.flatMap {
            $0 == jobPrefix || $0.hasPrefix(jobPrefix + ".") ? $0 : nil
        }
        let prefix = earlier ?? jobPrefix + "." + Hex.randomId().prefix(8)
        let encoded = directory + "/out"
        try PrivateFiles.directory(encoded)

        // A playable stream first, unless an earlier run of this job published it. Its encode, when it encodes the
        // lowest definition, counts for that definition's share of the ladder's pixels.
        var firstPublished = earlier != nil
        var firstShare = 0.0
        if video.playableAt == nil, let first = plan.firstStream(for: info) {
            if case .lowest(let lowest) = first { firstShare = plan.pixelShare(of: lowest) }
            do {
                firstPublished = try await publishFirstStream(
                    first, of: video, plan: plan, source: source, encoded: encoded, directory: directory, prefix: prefix,
                    declared: Self.declaredLength(info)
                ) { [firstShare] fraction in await progress(fraction * firstShare * 0.9) }
            } catch let tooLong as SourceTooLong {
                // Known from the first stream: the ladder is not encoded to the limit only to be refused.
                try await fail(video.videoId, code: Self.tooLongCode, message: tooLong.reason, expecting: [VideoStatus.transcoding])
                return
            }
            if !firstPublished {
                // Not published (cut short, or refused: the video changed, or this run lost its claim and the run that
                // took the job over publishes its own): its files go, and a run without its claim stops here.
                await removeUnpublished(prefix, bucket: video.bucket)
                try await checkClaim()
            }
        }

        // Encode every rendition not encoded yet in one ffmpeg process.
        let progressFile = directory + "/progress.txt"
        let errors = directory + "/transcode.err"
        let ladder = plan.encoding { !FileManager.default.fileExists(atPath: encoded + "/" + $0.fileName) }
        // The first stream's encode already counted for its share, when its definition was kept for the ladder.
        let done = ladder.outputs.count < plan.outputs.count ? firstShare : 0
        let outcome = try await run(
            \.ffmpeg, ladder.encodeArguments(input: source, directory: encoded, progressFile: progressFile),
            errors: errors, pollInterval: .milliseconds(250)
        ) {
            if let fraction = Self.progress(of: progressFile, lasting: info.playingDuration) {
                await progress((done + fraction * (1 - done)) * 0.9)
            }
        }
        guard outcome.succeeded else {
            let reason = Self.reason(errors: errors, directory: directory, timedOut: outcome.timedOut)
            try await failTranscode(video.videoId, plan: plan, message: reason)
            return
        }
        // The sound of a source with picture and sound becomes a rendition of its own, copied from the highest
        // definition without encoding again.
        var packaged = plan.outputs
        if let arguments = plan.audioExtractArguments(directory: encoded), let audio = plan.audioOutput {
            guard try await copyStep(arguments, errors: errors, directory: directory, videoId: video.videoId, plan: plan) else {
                return
            }
            packaged.append(audio)
        }
        // Package HLS from each encoded file, without encoding again, and measure what was made.
        var renditions: [Rendition] = []
        var variants: [(output: TranscodePlan.Output, peakBitrate: Int, averageBitrate: Int, codecs: String, fps: Double?)] = []
        var audioVariant: (output: TranscodePlan.Output, peakBitrate: Int, averageBitrate: Int)?
        var dash: [DashManifest.Representation] = []
        var progressiveFiles: [String] = []
        for output in packaged {
            try Task.checkCancellation()
            let file = encoded + "/" + output.fileName
            progressiveFiles.append(file)
            let measured = try await measure(file, directory: directory)
            let fileSize = WorkFiles.size(of: file)
            let base = Rendition(
                definition: output.definition, format: output.progressiveFormat, path: output.fileName,
                width: measured.width ?? output.width, height: measured.height ?? output.height,
                bitrate: measured.bitrate, duration: measured.duration, fps: measured.fps, size: fileSize,
                videoCodec: measured.videoCodec, audioCodec: measured.audioCodec)
            if plan.formats.contains("m3u8") {
                try PrivateFiles.directory(encoded + "/" + output.definition)
                guard
                    try await copyStep(
                        plan.packageArguments(for: output, directory: encoded), errors: errors, directory: directory,
                        videoId: video.videoId, plan: plan)
                else { return }
                let (segments, peak, average) = Self.packaged(encoded + "/" + output.definition)
                // A variant's codecs name its sound also when the sound is the audio rendition; a DASH
                // representation names only what its own files hold.
                let hasPicture = output.width != nil
                let codecs = TranscodePlan.codecs(
                    videoProfile: measured.videoProfile, videoLevel: measured.videoLevel, hasVideo: hasPicture,
                    hasAudio: measured.audioCodec != nil)
                let ownCodecs = TranscodePlan.codecs(
                    videoProfile: measured.videoProfile, videoLevel: measured.videoLevel, hasVideo: hasPicture,
                    hasAudio: measured.audioCodec != nil && !(plan.separateAudio != nil && hasPicture))
                if plan.separateAudio != nil, !hasPicture {
                    audioVariant = (output, max(peak, average), average)
                } else {
                    variants.append((output, max(peak, average), average, codecs, measured.fps))
                }
                dash.append(
                    DashManifest.Representation(
                        definition: output.definition, bandwidth: max(peak, average), width: base.width, height: base.height,
                        codecs: ownCodecs, fps: hasPicture ? measured.fps : nil, segments: segments))
                var hls = base
                hls.format = "m3u8"
                hls.path = output.playlistPath
                hls.size = WorkFiles.size(of: encoded + "/" + output.definition)
                if plan.separateAudio != nil, hasPicture {
                    // A definition's own playlist holds its picture alone: played as `LD.m3u8`, a master playlist of
                    // that one variant with the sound, which is written once the sound is packaged.
                    hls.path = TranscodePlan.definitionMasterPath(output.definition)
                }
                renditions.append(hls)
            }
            if plan.formats.contains("mp4") {
                renditions.append(base)
            }
        }
        let declared = Self.declaredLength(info)
        // A source whose header understates its length (or gives none) was read to just past the limit: refused.
        if let reason = tooLong(declared: declared, made: renditions.compactMap(\.duration).max()) {
            try await fail(video.videoId, code: Self.tooLongCode, message: reason, expecting: [VideoStatus.transcoding])
            return
        }
        // A source whose index declares more than its data holds (a file cut short after its index, as an upload of
        // a file still being written) encodes without error to what is there: refused, not published as whole.
        if let reason = Self.cutShort(made: renditions.compactMap(\.duration).max(), declared: declared) {
            try await failTranscode(video.videoId, plan: plan, message: reason)
            return
        }
        if !plan.formats.contains("mp4") {
            for file in progressiveFiles { try? FileManager.default.removeItem(atPath: file) }
        }
        if plan.formats.contains("m3u8") {
            let master = TranscodePlan.masterPlaylist(variants, audio: audioVariant)
            try Data(master.utf8).write(to: URL(fileURLWithPath: encoded + "/master.m3u8"))
            if let audioVariant {
                // A definition played as `LD.m3u8` is its picture and the sound: its size counts both.
                let sound = WorkFiles.size(of: encoded + "/" + audioVariant.output.definition)
                for index in renditions.indices
                where renditions[index].path == TranscodePlan.definitionMasterPath(renditions[index].definition) {
                    renditions[index].size += sound
                }
                for variant in variants {
                    let single = TranscodePlan.masterPlaylist([variant], audio: audioVariant)
                    let path = TranscodePlan.definitionMasterPath(variant.output.definition)
                    try Data(single.utf8).write(to: URL(fileURLWithPath: encoded + "/" + path))
                }
            }
            renditions.append(
                Rendition(
                    definition: "AUTO", format: "m3u8", path: "master.m3u8", width: plan.outputs.compactMap(\.width).max(),
                    height: plan.outputs.compactMap(\.height).max(), bitrate: variants.map(\.averageBitrate).max().map { $0 + (audioVariant?.averageBitrate ?? 0) },
                    duration: renditions.compactMap(\.duration).max(), fps: renditions.compactMap(\.fps).max(),
                    size: Int64(master.utf8.count), videoCodec: nil, audioCodec: nil))
            // The same fMP4 files as MPEG-DASH.
            let manifest = DashManifest.make(dash)
            try Data(manifest.utf8).write(to: URL(fileURLWithPath: encoded + "/" + DashManifest.fileName))
            var mpd = renditions[renditions.count - 1]
            mpd.format = "mpd"
            mpd.path = DashManifest.fileName
            mpd.size = Int64(manifest.utf8.count)
            renditions.append(mpd)
        }
        // A source whose container tells no length (a raw H.264 stream) lasts what its renditions play.
        let made = renditions.compactMap(\.duration).max()
        var measuredInfo = info
        // (Without a duration, the probe counted no late start: see ProbeReport.countedStart.)
        if info.duration == nil, let made { measuredInfo.duration = made }
        try await makeStoryboard(
            source: source, info: measuredInfo, into: encoded, work: directory, videoId: video.videoId)
        await progress(0.9)

        // Store every file under this job's prefix; nothing points at them yet but the first stream's master
        // playlist, which the ladder's replaces: stored last, and every playlist once every file it names is.
        let files = WorkFiles.storeOrder(WorkFiles.files(under: encoded).filter { !$0.hasSuffix(".err") })
        do {
            for (index, file) in files.enumerated() {
                try Task.checkCancellation()
                try await checkClaim()
                try await WorkFiles.upload(
                    encoded + "/" + file, to: store, bucket: video.bucket, key: prefix + "/" + file,
                    contentType: WorkFiles.contentType(forPath: file))
                await progress(0.9 + 0.1 * Double(index + 1) / Double(max(files.count, 1)))
            }
        } catch {
            // Stopped (the video deleted, the server shutting down) or failed: what was stored is nobody's, unless
            // the first stream is published under the same prefix (the next run stores the ladder again over it).
            // Removed even when this task is cancelled; what cannot be removed now goes with the next run's leftovers.
            if !firstPublished { await removeUnpublished(prefix, bucket: video.bucket) }
            throw error
        }

        // Publish all at once; the first stream's files are retired later, in a job published with the ladder.
        let published = renditions
        var retire = MediaJob(
            videoId: video.videoId, kind: .retireFirstStream, maxAttempts: configuration.maxAttempts,
            runAt: Date().addingTimeInterval(configuration.firstStreamRetention.timeInterval))
        retire.createdAt = Date()  // what it removes was stored before this
        let retiring = firstPublished ? [retire] : []
        let streams = renditions.filter { $0.definition != "AUTO" }.map(Self.streamInfo)
        let saved = try await updateToEnd(video.videoId) { [webhooks, firstPublished, measuredInfo] video in
            guard video.status == VideoStatus.transcoding else { return .keep }
            // VideoPlayable first (when no first stream sent it), then the streams, as the events' order is documented.
            var notify: [WebhookNotification] = []
            if !firstPublished, video.playableAt == nil, let stream = published.last(where: { $0.format != "mpd" }) {
                // The master playlist (listed last but for the DASH manifest), or the one progressive file of a group
                // without HLS.
                notify.append(.videoPlayable(videoId: video.videoId, definition: stream.definition, format: stream.format))
            }
            notify += streams.map { .streamTranscodeComplete(videoId: video.videoId, stream: $0) }
            notify.append(.transcodeComplete(videoId: video.videoId, streams: streams))
            video.renditions = published
            if video.mezzanine?.duration == nil { video.mezzanine?.duration = measuredInfo.duration }
            // The first stream's files, and so its definition, are kept only when published under this prefix.
            if video.outputPrefix != prefix { video.firstStreamDefinition = nil }
            video.outputPrefix = prefix
            video.playableAt = video.playableAt ?? Date()
            video.status = VideoStatus.normal
            video.errorCode = nil
            video.errorMessage = nil
            video.updatedAt = Date()
            return .save(enqueue: retiring, notify: try webhooks.events(for: notify))
        }
        guard saved != nil else {
            // Not published (the video changed meanwhile, or this run lost its claim): its files go, unless its
            // prefix holds a published first stream, which the run that took the job over publishes its ladder with.
            if !firstPublished { await removeUnpublished(prefix, bucket: video.bucket) }
            return
        }
        events?.videoBecameNormal(after: Date().timeIntervalSince(object.lastModified))
        try await WorkFiles.deleteObjects(in: store, bucket: video.bucket, prefix: outputs, keeping: prefix + "/")
    }

    /// Changes the video as `catalog.updateVideo` does, to the end even when this run is stopped meanwhile: a run that
    /// stored files the change names learns whether they are named (saved, or refused because the video changed or the
    /// run lost its claim), where a save cut short would leave them behind with no answer.
    func updateToEnd(_ videoId: String, _ change: @escaping @Sendable (inout VideoRecord) throws -> RecordChange)
        async throws -> VideoRecord?
    {
        let catalog = self.catalog
        return try await whileIgnoringCancellation { try await catalog.updateVideo(videoId, change) }
    }

    /// Deletes the files under `prefix`, a prefix of this run's own that holds nothing published, even when this task
    /// is cancelled; what cannot be removed now goes with the next run's leftovers.
    func removeUnpublished(_ prefix: String, bucket: String) async {
        let store = self.store
        do {
            try await whileIgnoringCancellation {
                try await WorkFiles.deleteObjects(in: store, bucket: bucket, prefix: prefix + "/")
            }
        } catch {
            logger.warning(
                "unpublished transcode outputs not removed",
                metadata: ["ferry.prefix": .string(prefix), "error": .string(String(describing: error))])
        }
    }

    /// Throws `CancellationError` when the job this task runs (``JobLease/current``) is no longer claimed by its
    /// worker: another worker took it over after its lease ran out. A catalog that cannot answer now stops nothing
    /// (the worker's heartbeat judges outages).
    func checkClaim() async throws {
        guard let lease = JobLease.current, let job = try? await catalog.job(lease.jobId) else { return }
        guard job.state == .running, job.leaseOwner == lease.worker else {
            logger.warning(
                "media job taken over by another worker; this run stops",
                metadata: ["ferry.job-id": .string(lease.jobId), "ferry.worker": .string(lease.worker)])
            throw CancellationError()
        }
    }

    /// The segments of the HLS media playlist `index.m3u8` in `directory`, and their peak and average bit rates. A
    /// playlist whose target duration ffmpeg rounded down to 0 (a clip under half a second) is given 1 (RFC 8216: a
    /// positive integer no segment's rounded duration passes).
    static func packaged(_ directory: String) -> (segments: [(duration: Double, uri: String)], peak: Int, average: Int) {
        let path = directory + "/index.m3u8"
        var playlist = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        if let fixed = TranscodePlan.withPositiveTargetDuration(playlist) {
            playlist = fixed
            try? Data(fixed.utf8).write(to: URL(fileURLWithPath: path))
        }
        let segments = TranscodePlan.segments(ofPlaylist: playlist)
        let initSize = WorkFiles.size(of: directory + "/init.mp4")
        let sized = segments.map { (duration: $0.duration, bytes: WorkFiles.size(of: directory + "/" + $0.uri)) }
        let target = TranscodePlan.targetDuration(ofPlaylist: playlist) ?? Double(TranscodePlan.keyFrameSeconds)
        let total = segments.reduce(0) { $0 + $1.duration }
        let encodedBytes = WorkFiles.size(of: directory) - initSize
        let average = total > 0 ? ProbeReport.integer(Double(encodedBytes) * 8 / total) ?? 0 : 0
        // A stream shorter than half its target duration has no run to measure: its average is its peak.
        let peak = TranscodePlan.peakSegmentBitrate(sized, targetDuration: target) ?? average
        return (segments, peak, average)
    }

    /// What ffprobe says of an encoded file.
    struct Measured: Sendable {
        var width: Int?
        var height: Int?
        var bitrate: Int?
        var duration: Double?
        var fps: Double?
        var videoCodec: String?
        var audioCodec: String?
        var videoProfile: String?
        var videoLevel: Int?
    }

    func measure(_ file: String, directory: String) async throws -> Measured {
        let output = directory + "/measure.json"
        _ = try await run(\.ffprobe, MediaProbe.arguments(for: file), output: output)
        // What cannot be measured (no output, odd output) is left out of the stream's description.
        let data = (try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data()
        return ((try? ProbeReport.decode(data)) ?? ProbeReport()).measured
    }

    /// The fields of a stream in StreamTranscodeComplete and TranscodeComplete's `StreamInfos`.
    static func streamInfo(_ rendition: Rendition) -> WebhookStreamInfo {
        WebhookStreamInfo(
            definition: rendition.definition, format: rendition.format, size: rendition.size, width: rendition.width,
            height: rendition.height, bitrate: rendition.bitrate.map { $0 / 1000 }, duration: rendition.duration,
            fps: rendition.fps)
    }

    // MARK: Shared steps

    /// Runs a tool with `arguments`, its standard output and error into the files `output` and `errors` (nil discards
    /// them), killed past `timeLimit` (by default the job time limit), checked every `pollInterval` (by default
    /// ``ChildProcess``'s) with `poll` called each time; logs (at debug) its arguments, as a JSON array, and how it
    /// ended.
    func run(
        _ tool: KeyPath<MediaTools, String>, _ arguments: [String], output: String? = nil, errors: String? = nil,
        timeLimit: Duration? = nil, pollInterval: Duration? = nil, poll: @Sendable () async -> Void = {}
    ) async throws -> ChildProcess.Outcome {
        guard let tools else { throw FerryDomainError(.notImplemented, "ffmpeg and ffprobe are not installed here.") }
        var process = ChildProcess(executable: tools[keyPath: tool], arguments: arguments)
        process.standardOutput = output
        process.standardError = errors
        process.timeLimit = timeLimit ?? configuration.jobTimeLimit
        if let pollInterval { process.pollInterval = pollInterval }
        process.keepFree = (workDirectory, configuration.minFreeBytes)
        process.niceness = configuration.niceness
        process.idleScheduling = configuration.idleScheduling
        process.cpuFloor =
            configuration.cpuFloorShare > 0
            ? ChildProcess.CPUFloor(share: configuration.cpuFloorShare, window: configuration.cpuFloorWindow) : nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let arguments = (try? encoder.encode(process.arguments)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        logger.debug(
            "media tool started",
            metadata: ["ferry.tool": .string(process.executable), "ferry.arguments": .string(arguments)])
        let started = ContinuousClock.now
        let tool = URL(fileURLWithPath: process.executable).lastPathComponent
        let outcome = try await withSpan("media.tool " + tool) { span in
            let outcome = try await process.run(poll: poll)
            span.attributes["process.exit.code"] = Int(outcome.exitCode ?? -1)
            return outcome
        }
        if outcome.promoted {
            logger.info(
                "media tool moved to normal scheduling: it got less than its CPU floor while the machine was busy",
                metadata: ["ferry.tool": .string(tool), "ferry.cpu-floor": "\(configuration.cpuFloorShare)"])
        }
        logger.debug(
            "media tool ended",
            metadata: [
                "ferry.tool": .string(process.executable), "ferry.exit-code": "\(outcome.exitCode ?? -1)",
                "ferry.seconds": "\((ContinuousClock.now - started).timeInterval)",
            ])
        return outcome
    }

    /// Writes the video's source into the job's directory; nil when it is gone (deleted meanwhile).
    func download(_ video: VideoRecord, into directory: String) async throws -> (String, ObjectInfo)? {
        guard let object = try await store.storedObject(bucket: video.bucket, key: video.key) else {
            // Deleted meanwhile: nothing to do. Otherwise the bytes are not in this node's store (yet): an error, so
            // the job is tried again (on whichever node claims it) rather than dropped.
            guard let current = try await catalog.video(video.videoId), current.status != VideoStatus.deleted else {
                return nil
            }
            throw WorkFileError(path: video.key, action: "find the stored source")
        }
        let ext = (video.key as NSString).pathExtension
        let path = directory + "/source" + (ext.isEmpty ? "" : "." + ext)
        do {
            try await WorkFiles.download([{ object }], from: store, to: path)
            return (path, object)
        } catch is ObjectChangedError {
            // Replaced between the lookup and the read: read what is there now.
            return try await download(video, into: directory)
        }
    }

    /// Ends a video in `TranscodeFail`, when it is still in one of `expecting`, and says so: the events `earlier`,
    /// then `TranscodeFailed`, stored with the change.
    func fail(
        _ videoId: String, code: String, message: String, expecting: Set<String>, after earlier: [WebhookNotification] = []
    ) async throws {
        try await catalog.updateVideo(videoId) { [webhooks] video in
            guard expecting.contains(video.status) else { return .keep }
            video.status = VideoStatus.transcodeFail
            video.errorCode = code
            video.errorMessage = message
            video.updatedAt = Date()
            return .save(
                notify: try webhooks.events(
                    for: earlier + [.transcodeFailed(videoId: videoId, errorCode: code, errorMessage: message)]))
        }
    }

    /// Runs one ffmpeg step that copies streams of the encoded files (packaging, the audio rendition); false when it
    /// failed, the video then `TranscodeFail` with ffmpeg's reason.
    private func copyStep(
        _ arguments: [String], errors: String, directory: String, videoId: String, plan: TranscodePlan
    ) async throws -> Bool {
        guard try await run(\.ffmpeg, arguments, errors: errors).succeeded else {
            try await failTranscode(videoId, plan: plan, message: Self.reason(errors: errors, directory: directory))
            return false
        }
        return true
    }

    /// The error code of a source longer than the server transcodes.
    static let tooLongCode = "MediaTooLong"
    /// How far past the limit encoded media may run before its source counts as longer (encoders end streams a
    /// frame or so apart); sources are read to twice this past the limit.
    static let tooLongMargin = 0.5

    /// Why a source is longer than this server transcodes (``MediaProcessingConfiguration/maxTranscodeDuration``): by
    /// the duration it `declared`, or by what its encoding `made` (read to just past the limit); nil when it is not.
    func tooLong(declared: Double?, made: Double? = nil) -> String? {
        guard let limit = configuration.maxTranscodeDuration?.timeInterval else { return nil }
        let most = "this server transcodes sources of at most \(Self.seconds(limit)) s."
        if let declared, declared > limit { return "The source lasts \(Self.seconds(declared)) s; " + most }
        guard let made, made > limit + Self.tooLongMargin else { return nil }
        let header = declared.map { "its header says \(Self.seconds($0)) s" } ?? "its header gives no usable duration"
        return "The source runs past \(Self.seconds(limit)) s (\(header)); " + most
    }

    /// A source found longer than the server transcodes by what its first stream made (``tooLong(declared:made:)``).
    struct SourceTooLong: Error {
        var reason: String
    }

    /// How long a source's media lasts by its header: its duration less what comes before its first packet.
    static func declaredLength(_ info: MezzanineInfo) -> Double? {
        info.playingDuration
    }

    /// Seconds as people read them: whole, or to two decimals (`99.99`, `100.4`).
    static func seconds(_ value: Double) -> String {
        let rounded = (value * 100).rounded() / 100
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.2f", rounded).replacingOccurrences(
            of: #"0$"#, with: "", options: .regularExpression)
    }

    /// A transcode ffmpeg refused: every planned stream fails, then the video.
    /// Why renditions lasting `made` seconds do not stand for a source that declares `declared`: nil when they fall
    /// short by at most a second or 5 % (encoders end streams a little apart), or either is unknown.
    static func cutShort(made: Double?, declared: Double?) -> String? {
        guard let made, let declared, made.isFinite, declared.isFinite, declared - made > max(1, declared * 0.05) else {
            return nil
        }
        return String(
            format: "The file's media ends at %.1f s of the %.1f s its index declares: the file is cut short.", made,
            declared)
    }

    func failTranscode(_ videoId: String, plan: TranscodePlan, message: String) async throws {
        let streams = plan.outputs.flatMap { output in
            plan.formats.map { format in
                WebhookNotification.streamTranscodeFailed(
                    videoId: videoId, definition: output.definition,
                    format: format == "mp4" ? output.progressiveFormat : format, errorCode: "TranscodeError",
                    errorMessage: message)
            }
        }
        try await fail(videoId, code: "TranscodeError", message: message, expecting: [VideoStatus.transcoding], after: streams)
    }

    /// Whether a video still exists and got past its upload.
    static func isLive(_ status: String) -> Bool {
        [VideoStatus.uploadSucc, VideoStatus.transcoding, VideoStatus.normal, VideoStatus.transcodeFail].contains(status)
    }

    /// How far an encode writing the progress file `file` is through a source lasting `duration` (0 to 1); nil before
    /// it says, or for a source of unknown length.
    static func progress(of file: String, lasting duration: Double?) -> Double? {
        guard let duration, duration > 0, let seconds = progressSeconds(ChildProcess.tail(of: file, limit: 1024)) else {
            return nil
        }
        return min(max(seconds / duration, 0), 1)
    }

    /// The position ffmpeg last reported (`out_time_us=` in its progress output), in seconds.
    static func progressSeconds(_ text: String) -> Double? {
        for line in text.split(whereSeparator: \.isNewline).reversed() where line.hasPrefix("out_time_us=") {
            if let micros = Double(line.dropFirst("out_time_us=".count)), micros >= 0 { return micros / 1_000_000 }
        }
        return nil
    }

    /// Why a tool failed: that it did not finish within the time limit when `timedOut`, else the end of its standard
    /// error (the file `errors`), shortened and without `directory`'s paths.
    static func reason(errors: String, directory: String, timedOut: Bool = false, tool: String = "ffmpeg") -> String {
        timedOut
            ? "\(tool) did not finish within the time limit."
            : MediaProbe.reason(fromStandardError: hidingPaths(ChildProcess.tail(of: errors), directory), tool: tool)
    }

    /// A tool's message without the server's directories in it.
    static func hidingPaths(_ text: String, _ directory: String) -> String {
        text.replacingOccurrences(of: directory + "/", with: "")
    }
}
