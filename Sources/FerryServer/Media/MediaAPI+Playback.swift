import FerryCore
import Foundation

extension MediaAPI {
    /// The file name a video's cover taken from its source is served as.
    static let coverFileName = "cover.jpg"
    /// How long the playback URLs in a video's description (cover, snapshots) are valid.
    static let descriptionURLLifetime: TimeInterval = 7 * 24 * 3600

    /// A playback URL for `file` of the video, with a token the server signs when the video is signed (granting
    /// `audiences` for `lifetime` seconds); a public video's URL has none.
    func playURL(
        _ video: VideoRecord, file: String, audiences: [PlaybackToken.Audience], _ call: Call, lifetime: TimeInterval
    ) async throws -> String {
        PlaybackToken.url(
            base: publicBase(call).base, videoId: video.videoId, file: file,
            token: try await playToken(video, audiences: audiences, call, lifetime: lifetime))
    }

    /// The token a signed video's playback URLs carry, minted for the caller's access key; nil for a public video.
    func playToken(
        _ video: VideoRecord, audiences: [PlaybackToken.Audience], _ call: Call, lifetime: TimeInterval,
        definitions: Set<String>? = nil
    ) async throws -> String? {
        guard video.isPlaybackSigned else { return nil }
        return try await PlaybackToken.mint(
            videoId: video.videoId, audiences: audiences, expiration: credentials.now().addingTimeInterval(lifetime),
            issuer: call.principal.parentAccessKeyId, definitions: definitions.map { $0.sorted() },
            codec: credentials.tokens)
    }

    /// The video's cover: the URL it was given, else the cover taken from its source, else nil. A URL given whose path
    /// names a stored image of the video's owner in the media bucket (the `ImageURL` of the cover a short-video upload
    /// makes first, which reading needs a signature for) is answered as a presigned URL of that image, valid as long
    /// as a playback URL of the description, to a caller that may read images (`media:GetImageInfo`); as given
    /// otherwise.
    func coverURL(of video: VideoRecord, _ call: Call) async throws -> String? {
        if let url = video.coverURL {
            guard call.principal.allows(action: "media:GetImageInfo"), let path = URLComponents(string: url)?.path,
                path.hasPrefix("/" + bucket + "/"),
                let image = try await catalog.image(bucket: bucket, key: String(path.dropFirst(bucket.count + 2))),
                image.owner == video.owner, image.status == ImageStatus.uploaded
            else { return url }
            return try signedURL(key: image.key, call, expires: Int(Self.descriptionURLLifetime))
        }
        guard video.snapshotKey != nil else { return nil }
        return try await playURL(
            video, file: Self.coverFileName, audiences: [.cover], call, lifetime: Self.descriptionURLLifetime)
    }

    /// A video as GetVideoInfo and ListVideos answer it; `detailed` adds what takes another look-up (progress).
    func describe(_ video: VideoRecord, _ call: Call, detailed: Bool) async throws -> MediaContract.Video {
        var object = MediaContract.Video(videoId: video.videoId, title: video.title, status: video.status)
        object.fileName = video.fileName
        object.creationTime = video.createdAt.formatted(.iso8601)
        object.modificationTime = video.updatedAt.formatted(.iso8601)
        object.templateGroupId = video.templateGroup ?? TranscodeTemplates.defaultGroupName
        object.size = video.size
        object.description = video.description
        object.coverURL = try await coverURL(of: video, call)
        if video.snapshotKey != nil {
            object.snapshots = [
                try await playURL(
                    video, file: Self.coverFileName, audiences: [.cover], call, lifetime: Self.descriptionURLLifetime)
            ]
        }
        object.playbackPolicy = video.isPlaybackSigned ? .signed : .public
        object.playable = Self.isPlayable(video)
        object.playableTime = video.playableAt?.formatted(.iso8601)
        object.downloads = Self.downloadPolicy(of: video)
        object.cateId = video.cateId
        object.tags = video.tags
        object.userData = video.userData
        if let info = video.mezzanine {
            object.width = info.width
            object.height = info.height
            object.duration = info.playingDuration
            object.fps = info.fps
            object.bitrate = info.bitrate.map { $0 / 1000 }
            object.mediaType = info.hasVideo ? "video" : "audio"
        }
        object.errorCode = video.errorCode
        object.errorMessage = video.errorMessage
        if video.status == VideoStatus.uploadSucc || video.status == VideoStatus.transcoding {
            if let reason = processingUnavailable {
                object.statusMessage = reason
            } else if detailed {
                let jobs = try await catalog.jobs(videoId: video.videoId)
                if let job = jobs.last(where: { $0.kind == .transcode && !$0.state.isFinished }) {
                    object.processingProgress = Int(((job.progress ?? 0) * 100).rounded(.down))
                    // A failed attempt, or what a job given back waits for (disk space, the store).
                    if let error = job.lastError {
                        let again = job.state == .queued ? "will be tried again" : "is being tried again"
                        object.statusMessage = "Transcoding \(again): " + error
                    }
                }
            }
        }
        return object
    }

    /// Whether GetPlayInfo answers: `Normal`, or a first stream published (while `Transcoding`, and after a ladder
    /// that failed: the video stays playable at its first stream).
    static func isPlayable(_ video: VideoRecord) -> Bool {
        video.status == VideoStatus.normal
            || ([VideoStatus.transcoding, VideoStatus.transcodeFail].contains(video.status) && video.playableAt != nil
                && !(video.renditions ?? []).isEmpty)
    }

    func getPlayInfo(_ input: MediaContract.PlayInfoRequest, _ call: Call) async throws -> MediaContract.PlayInfoAnswer {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        let timeout = try Self.authTimeout(input.authTimeout)
        func list(_ text: String?) -> Set<String>? {
            let items = (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            return items.isEmpty ? nil : Set(items)
        }
        let formats = list(input.formats)
        let definitions = list(input.definition)
        guard Self.isPlayable(video), let size = video.size else {
            throw MediaError(
                "InvalidVideo.NoneStream",
                video.status == "TranscodeFail" || video.status == "UploadFail"
                    ? "The video has no playable stream (status \(video.status))."
                    : "The video has no playable stream yet (status \(video.status)).", status: 404)
        }
        let expires = credentials.now().addingTimeInterval(TimeInterval(timeout))
        let expiration = expires.formatted(.iso8601)
        var streams: [MediaContract.PlayStream] = []
        var storyboard: String?
        if let renditions = video.renditions, !renditions.isEmpty {
            // Asked for some definitions, the URLs open only those (as a CDN's per-URL signatures would).
            let token = try await playToken(
                video, audiences: [.video], call, lifetime: TimeInterval(timeout), definitions: definitions)
            let storyboardToken = try await playToken(video, audiences: [.storyboard], call, lifetime: TimeInterval(timeout))
            storyboard = try await storyboardURL(of: video, call, token: storyboardToken)
            let downloadable = Self.downloadable(video)
            for rendition in renditions where !Self.isProgressive(rendition) || downloadable.contains(rendition.path) {
                let url = PlaybackToken.url(
                    base: publicBase(call).base, videoId: video.videoId, file: rendition.path, token: token)
                var stream = Self.playStream(rendition, url: url)
                stream.expiration = expiration
                streams.append(stream)
            }
        } else {
            // NoTranscode: the original is the only definition.
            var stream = MediaContract.PlayStream(
                definition: "OD", format: (video.key as NSString).pathExtension.lowercased(),
                url: try signedURL(key: video.key, call, expires: timeout), size: size)
            stream.expiration = expiration
            if let info = video.mezzanine {
                stream.width = info.width
                stream.height = info.height
                stream.duration = info.playingDuration
                stream.fps = info.fps
                stream.bitrate = info.bitrate.map { $0 / 1000 }
            }
            streams.append(stream)
        }
        streams = streams.filter { stream in
            (formats?.contains(stream.format) ?? true) && (definitions?.contains(stream.definition) ?? true)
        }
        guard !streams.isEmpty else {
            throw MediaError("InvalidVideo.NoneStream", "No stream of the video matches the Formats and Definition asked for.", status: 404)
        }
        var base = MediaContract.VideoBase(videoId: video.videoId, title: video.title, status: video.status)
        base.creationTime = video.createdAt.formatted(.iso8601)
        base.mediaType = video.mezzanine?.hasVideo == false ? "audio" : "video"
        base.coverURL = try await coverURL(of: video, call)
        base.duration = video.mezzanine?.playingDuration
        base.storyboardURL = storyboard
        return MediaContract.PlayInfoAnswer(videoBase: base, playInfoList: streams)
    }

    /// A rendition as a PlayInfo stream.
    static func playStream(_ rendition: Rendition, url: String) -> MediaContract.PlayStream {
        var stream = MediaContract.PlayStream(
            definition: rendition.definition, format: rendition.format, url: url, size: rendition.size)
        stream.width = rendition.width
        stream.height = rendition.height
        stream.duration = rendition.duration
        stream.fps = rendition.fps
        stream.bitrate = rendition.bitrate.map { $0 / 1000 }
        return stream
    }

    func getMezzanineInfo(_ input: MediaContract.MezzanineInfoRequest, _ call: Call) async throws
        -> MediaContract.MezzanineInfoAnswer
    {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        let timeout = try Self.authTimeout(input.authTimeout)
        guard video.status != VideoStatus.uploading, video.status != VideoStatus.uploadFailed, let size = video.size else {
            throw MediaError("InvalidVideo.NoneStream", "The video's source is not stored (status \(video.status)).", status: 404)
        }
        var mezzanine = MediaContract.Mezzanine(
            videoId: video.videoId, fileName: video.fileName, size: size,
            fileURL: try signedURL(key: video.key, call, expires: timeout),
            status: video.mezzanine == nil ? (video.status == VideoStatus.uploadSucc ? "Analysing" : "AnalysisFail") : "Normal")
        mezzanine.eTag = try await storedETag(bucket: video.bucket, key: video.key)
        mezzanine.creationTime = video.createdAt.formatted(.iso8601)
        if let info = video.mezzanine {
            mezzanine.width = info.width
            mezzanine.height = info.height
            mezzanine.duration = info.duration
            mezzanine.fps = info.fps
            mezzanine.bitrate = info.bitrate.map { $0 / 1000 }
            mezzanine.formatName = info.formatName
            mezzanine.videoStreamList = []
            if info.hasVideo {
                var stream = MediaContract.MezzanineStream(codecName: info.videoCodec ?? "")
                stream.rotate = info.rotation ?? 0
                stream.width = info.width
                stream.height = info.height
                stream.fps = info.fps
                stream.pixFmt = info.pixelFormat
                stream.bitrate = info.videoBitrate.map { $0 / 1000 }
                mezzanine.videoStreamList = [stream]
            }
            mezzanine.audioStreamList = []
            if info.hasAudio {
                var stream = MediaContract.MezzanineStream(codecName: info.audioCodec ?? "")
                stream.sampleRate = info.audioSampleRate
                stream.channels = info.audioChannels
                stream.bitrate = info.audioBitrate.map { $0 / 1000 }
                mezzanine.audioStreamList = [stream]
            }
        }
        return MediaContract.MezzanineInfoAnswer(mezzanine: mezzanine)
    }
}
