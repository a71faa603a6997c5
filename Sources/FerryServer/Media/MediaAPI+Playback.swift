import FerryCore
import Foundation

extension MediaAPI {
    /// The file name a video's cover taken from its source is served as.
    static let coverFileName = "cover.jpg"
    /// How long the playback URLs in a video's description (cover, snapshots) are valid.
    static let descriptionURLLifetime: TimeInterval = 7 * 24 * 3600

    /// A playback URL for a file of the video, valid for `lifetime` seconds.
    func playURL(videoId: String, file: String, host: String, lifetime: TimeInterval) -> String {
        let token = PlaybackToken.make(
            videoId: videoId, expiration: Date().addingTimeInterval(lifetime), codec: credentials.tokens)
        return endpoint(host: host) + PlaybackToken.pathPrefix + token + "/" + videoId + "/" + file
    }

    /// The video's cover: the URL it was given, else the cover taken from its source, else nil.
    func coverURL(of video: VideoRecord, host: String) -> String? {
        if let url = video.coverURL { return url }
        guard video.snapshotKey != nil else { return nil }
        return playURL(videoId: video.videoId, file: Self.coverFileName, host: host, lifetime: Self.descriptionURLLifetime)
    }

    /// A video as GetVideoInfo and ListVideos answer it; `detailed` adds what takes another look-up (progress).
    func videoJSON(_ video: VideoRecord, host: String, detailed: Bool) async throws -> [String: Any] {
        var object: [String: Any] = [
            "VideoId": video.videoId, "Title": video.title, "Status": video.status, "FileName": video.fileName,
            "CreationTime": video.createdAt.formatted(.iso8601), "ModificationTime": video.updatedAt.formatted(.iso8601),
            "TemplateGroupId": video.templateGroup ?? TranscodeTemplates.defaultGroupName,
        ]
        if let size = video.size { object["Size"] = size }
        if let value = video.description { object["Description"] = value }
        if let value = coverURL(of: video, host: host) { object["CoverURL"] = value }
        if video.snapshotKey != nil {
            object["Snapshots"] = [
                playURL(videoId: video.videoId, file: Self.coverFileName, host: host, lifetime: Self.descriptionURLLifetime)
            ]
        }
        if let value = video.cateId { object["CateId"] = value }
        if let value = video.tags { object["Tags"] = value }
        if let value = video.userData { object["UserData"] = value }
        if let info = video.mezzanine {
            Self.addMeasurements(
                width: info.width, height: info.height, duration: info.duration, fps: info.fps, bitrate: info.bitrate,
                to: &object)
            object["MediaType"] = info.hasVideo ? "video" : "audio"
        }
        if let value = video.errorCode { object["ErrorCode"] = value }
        if let value = video.errorMessage { object["ErrorMessage"] = value }
        if video.status == VideoStatus.uploadSucc || video.status == VideoStatus.transcoding {
            if let reason = processingUnavailable {
                object["StatusMessage"] = reason
            } else if detailed {
                let jobs = try await catalog.jobs(videoId: video.videoId)
                if let job = jobs.last(where: { $0.kind == .transcode && !$0.state.isFinished }) {
                    object["ProcessingProgress"] = Int(((job.progress ?? 0) * 100).rounded(.down))
                    if let error = job.lastError, job.state == .queued, job.attempts > 0 {
                        object["StatusMessage"] = "Transcoding will be tried again: " + error
                    }
                }
            }
        }
        return object
    }

    func getPlayInfo(_ input: PlayInfoInput, principal: Principal, host: String) async throws -> [String: Any] {
        let video = try await liveVideo(input.VideoId, principal: principal)
        let timeout = try Self.authTimeout(input.AuthTimeout)
        func list(_ text: String?) -> Set<String>? {
            let items = (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            return items.isEmpty ? nil : Set(items)
        }
        let formats = list(input.Formats)
        let definitions = list(input.Definition)
        guard video.status == VideoStatus.normal, let size = video.size else {
            throw MediaError(
                "InvalidVideo.NoneStream", "The video has no playable stream yet (status \(video.status)).", status: 404)
        }
        let expiration = Date().addingTimeInterval(TimeInterval(timeout)).formatted(.iso8601)
        var entries: [[String: Any]] = []
        if let renditions = video.renditions, !renditions.isEmpty {
            let token = PlaybackToken.make(
                videoId: video.videoId, expiration: Date().addingTimeInterval(TimeInterval(timeout)), codec: credentials.tokens)
            let base = endpoint(host: host) + PlaybackToken.pathPrefix + token + "/" + video.videoId + "/"
            for rendition in renditions {
                var entry = Self.playInfo(rendition)
                entry["PlayURL"] = base + rendition.path
                entry["Expiration"] = expiration
                entries.append(entry)
            }
        } else {
            // NoTranscode: the original is the only definition.
            var entry: [String: Any] = [
                "Definition": "OD", "Format": (video.key as NSString).pathExtension.lowercased(), "Size": size,
                "Status": "Normal", "PlayURL": try signedURL(key: video.key, host: host, expires: timeout),
                "Expiration": expiration,
            ]
            if let info = video.mezzanine {
                Self.addMeasurements(
                    width: info.width, height: info.height, duration: info.duration, fps: info.fps, bitrate: info.bitrate,
                    to: &entry)
            }
            entries.append(entry)
        }
        entries = entries.filter { entry in
            (formats?.contains(entry["Format"] as? String ?? "") ?? true)
                && (definitions?.contains(entry["Definition"] as? String ?? "") ?? true)
        }
        guard !entries.isEmpty else {
            throw MediaError("InvalidVideo.NoneStream", "No stream of the video matches the Formats and Definition asked for.", status: 404)
        }
        var base: [String: Any] = [
            "VideoId": video.videoId, "Title": video.title, "Status": video.status,
            "CreationTime": video.createdAt.formatted(.iso8601),
            "MediaType": video.mezzanine?.hasVideo == false ? "audio" : "video",
        ]
        if let value = coverURL(of: video, host: host) { base["CoverURL"] = value }
        if let value = video.mezzanine?.duration { base["Duration"] = value }
        return ["VideoBase": base, "PlayInfoList": entries]
    }

    /// A rendition as a PlayInfo entry (without its URL).
    static func playInfo(_ rendition: Rendition) -> [String: Any] {
        var entry: [String: Any] = [
            "Definition": rendition.definition, "Format": rendition.format, "Size": rendition.size, "Status": "Normal",
        ]
        addMeasurements(
            width: rendition.width, height: rendition.height, duration: rendition.duration, fps: rendition.fps,
            bitrate: rendition.bitrate, to: &entry)
        return entry
    }

    /// `Width`, `Height`, `Duration` (s), `Fps` and `Bitrate` (kbit/s, from bit/s), those that are known.
    static func addMeasurements(
        width: Int?, height: Int?, duration: Double?, fps: Double?, bitrate: Int?, to object: inout [String: Any]
    ) {
        if let width { object["Width"] = width }
        if let height { object["Height"] = height }
        if let duration { object["Duration"] = duration }
        if let fps { object["Fps"] = fps }
        if let bitrate { object["Bitrate"] = bitrate / 1000 }
    }

    func getMezzanineInfo(_ input: VideoIdInput, principal: Principal, host: String) async throws -> [String: Any] {
        let video = try await liveVideo(input.VideoId, principal: principal)
        let timeout = try Self.authTimeout(input.AuthTimeout)
        guard video.status != VideoStatus.uploading, video.status != VideoStatus.uploadFailed, let size = video.size else {
            throw MediaError("InvalidVideo.NoneStream", "The video's source is not stored (status \(video.status)).", status: 404)
        }
        var mezzanine: [String: Any] = [
            "VideoId": video.videoId, "FileName": video.fileName, "Size": size,
            "FileURL": try signedURL(key: video.key, host: host, expires: timeout),
            "CreationTime": video.createdAt.formatted(.iso8601),
            "Status": video.mezzanine == nil ? (video.status == VideoStatus.uploadSucc ? "Analysing" : "AnalysisFail") : "Normal",
        ]
        if let info = video.mezzanine {
            Self.addMeasurements(
                width: info.width, height: info.height, duration: info.duration, fps: info.fps, bitrate: info.bitrate,
                to: &mezzanine)
            if let value = info.formatName { mezzanine["FormatName"] = value }
            if info.hasVideo {
                var stream: [String: Any] = ["CodecName": info.videoCodec ?? "", "Rotate": info.rotation ?? 0]
                if let value = info.width { stream["Width"] = value }
                if let value = info.height { stream["Height"] = value }
                if let value = info.fps { stream["Fps"] = value }
                if let value = info.pixelFormat { stream["PixFmt"] = value }
                if let value = info.videoBitrate { stream["Bitrate"] = value / 1000 }
                mezzanine["VideoStreamList"] = [stream]
            } else {
                mezzanine["VideoStreamList"] = [[String: Any]]()
            }
            if info.hasAudio {
                var stream: [String: Any] = ["CodecName": info.audioCodec ?? ""]
                if let value = info.audioSampleRate { stream["SampleRate"] = value }
                if let value = info.audioChannels { stream["Channels"] = value }
                if let value = info.audioBitrate { stream["Bitrate"] = value / 1000 }
                mezzanine["AudioStreamList"] = [stream]
            } else {
                mezzanine["AudioStreamList"] = [[String: Any]]()
            }
        }
        return ["Mezzanine": mezzanine]
    }
}
