import ArgumentParser
import Ferry
import FerryCore
import Foundation

/// `ferry videos`: the video catalog.
struct VideosCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "videos", abstract: "List, inspect and delete videos; print playback URLs.",
        subcommands: [List.self, Info.self, Delete.self, PlayURL.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List videos, newest first.")
        @OptionGroup var service: ServiceOptions
        @Option(help: "Only videos with this status (Uploading, UploadSucc, Transcoding, Normal, TranscodeFail, UploadFail).") var status: String?
        @Option(help: "Page number, from 1.") var page: Int = 1
        @Option(name: .customLong("page-size"), help: "Videos per page, 1–100.") var pageSize: Int = 20
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            let statuses = MediaContract.ListVideosRequest.statuses
            if let status, !statuses.contains(status) {
                throw ValidationError("--status must be one of \(statuses.joined(separator: ", ")).")
            }
            let pages = MediaContract.ListVideosRequest.pageNumbers, sizes = MediaContract.ListVideosRequest.pageSizes
            if !pages.contains(page) { throw ValidationError("--page must be between 1 and \(pages.upperBound).") }
            if !sizes.contains(pageSize) {
                throw ValidationError("--page-size must be between 1 and \(sizes.upperBound).")
            }
        }

        func run() async throws {
            let (videos, total) = try await service.with { connection in
                try await report { try await connection.media().listVideos(status: status, pageNo: page, pageSize: pageSize) }
            }
            if json {
                printJSON(["Total": total, "VideoList": videos.map(VideosCommand.object)])
            } else {
                for video in videos {
                    say(
                        [video.videoId, video.status, video.size.map(String.init) ?? "-", video.title]
                            .map(TerminalText.field).joined(separator: "\t"))
                }
                say("\(total) video(s)")
            }
        }
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a video: status, duration, resolution, cover and renditions.",
            discussion: "With --json: {\"Video\": …, \"PlayInfoList\": […]} exactly as GetVideoInfo and GetPlayInfo answer (PlayInfoList is empty until the video plays: Normal, or Playable with its first stream while it is transcoded).")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The VideoId.") var videoId: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let (info, play) = try await service.with { connection in
                try await report {
                    let media = connection.media()
                    let video = try await media.call(
                        "GetVideoInfo", MediaContract.VideoIdRequest(videoId: videoId), as: MediaContract.VideoInfoAnswer.self
                    ).video
                    let play = video.status == "Normal" || video.playable == true
                        ? try await media.call(
                            "GetPlayInfo", MediaContract.PlayInfoRequest(videoId: videoId), as: MediaContract.PlayInfoAnswer.self)
                        : nil
                    return (video, play)
                }
            }
            if json {
                // Exactly as GetVideoInfo and GetPlayInfo answer.
                struct Output: Encodable {
                    var Video: MediaContract.Video
                    var PlayInfoList: [MediaContract.PlayStream]
                }
                sayJSON(String(decoding: try MediaContract.encode(Output(Video: info, PlayInfoList: play?.playInfoList ?? [])), as: UTF8.self))
                return
            }
            say("VideoId: \(info.videoId)")
            say("Title: \(info.title)")
            say("Status: \(VideosCommand.statusText(info))")
            if let code = info.errorCode { say("Error: \(code): \(info.errorMessage ?? "")") }
            if let size = info.size { say("Size: \(size) bytes") }
            if let duration = info.duration { say(String(format: "Duration: %.2f s", duration)) }
            if let width = info.width, let height = info.height {
                say("Resolution: \(width)x\(height)" + (info.fps.map { String(format: " at %.3g fps", $0) } ?? ""))
            }
            if let cover = info.coverURL { say("Cover: \(cover)") }
            if let play {
                for row in VideosCommand.renditionTable(play.playInfoList) { say(row) }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete videos and their files.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "VideoIds.") var videoIds: [String]

        func run() async throws {
            try await service.with { connection in try await report { try await connection.media().deleteVideos(videoIds) } }
            say("Deleted \(videoIds.joined(separator: ", ")).")
        }
    }

    struct PlayURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "play-url", abstract: "Print a signed playback URL.",
            discussion: "Without options: the HLS master playlist (AUTO) when the video has one, else its first stream.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The VideoId.") var videoId: String
        @Option(
            help: ArgumentHelp(
                "Definition: LD, SD, HD, FHD, SQ (or one a transcode template names), AUTO (the HLS master playlist) "
                    + "or OD (the original)."))
        var definition: String?
        @Option(help: "Format: m3u8, mpd, mp4 or m4a (the original's own with OD).") var format: String?
        @Option(help: "Seconds the URL is valid, 1–604800.") var expires: Int = 3600

        func run() async throws {
            let play = try await service.with { connection in
                try await report {
                    try await connection.media().getPlayInfo(
                        videoId: videoId, authTimeout: expires, formats: format.map { [$0] },
                        definitions: definition.map { [$0] })
                }
            }
            let stream =
                definition == nil && format == nil
                ? (play.stream(format: "m3u8", definition: "AUTO") ?? play.streams.first) : play.streams.first
            guard let stream else { throw ExitCode(ExitCodes.failed) }
            sayWhole(stream.url)
        }
    }

    static func object(_ video: MediaServiceClient.VideoInfo) -> [String: Any] {
        var object: [String: Any] = ["VideoId": video.videoId, "Title": video.title, "Status": video.status]
        if let size = video.size { object["Size"] = size }
        return object
    }

    static func object(_ stream: MediaServiceClient.PlayInfo.Stream) -> [String: Any] {
        var object: [String: Any] = [
            "Definition": stream.definition, "Format": stream.format, "Size": stream.size, "PlayURL": stream.url,
        ]
        if let value = stream.width { object["Width"] = value }
        if let value = stream.height { object["Height"] = value }
        if let value = stream.bitrate { object["Bitrate"] = value }
        if let value = stream.duration { object["Duration"] = value }
        return object
    }

    /// A video's status as people read it: `Transcoding 42%`, `Transcoding 42%, playable`, or with the reason it
    /// waits.
    static func statusText(_ video: MediaServiceClient.VideoInfo) -> String {
        var text = video.status
        if let percent = video.processingProgress, video.status == "Transcoding" { text += " \(percent)%" }
        if video.playable == true, video.status != "Normal" { text += ", playable" }
        if let message = video.statusMessage { text += " (\(message))" }
        return text
    }

    /// The renditions as a table: definition, format, resolution, bit rate, size, URL.
    static func renditionTable(_ streams: [MediaContract.PlayStream]) -> [String] {
        var rows = ["DEFINITION\tFORMAT\tRESOLUTION\tBITRATE\tSIZE\tURL"]
        for stream in streams {
            let resolution = stream.width.flatMap { w in stream.height.map { "\(w)x\($0)" } } ?? "-"
            let bitrate = stream.bitrate.map { "\($0) kb/s" } ?? "-"
            rows.append(
                [stream.definition, stream.format, resolution, bitrate, "\(stream.size)", stream.url]
                    .map(TerminalText.field).joined(separator: "\t"))
        }
        return rows
    }
}

/// `ferry presign`: signed URLs for GET or PUT of an object.
struct PresignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presign", abstract: "Print a presigned URL to GET or PUT BUCKET/KEY.",
        discussion: "With the embedded default the URL is signed for `ferry serve` on http://127.0.0.1:9000 over the same data directory.")

    @Argument(help: "get or put.") var method: String
    @Argument(help: "BUCKET/KEY.") var object: String
    @Option(help: "Seconds the URL is valid, 1–604800. Default 3600.") var expires: Int = 3600
    @OptionGroup var service: ServiceOptions

    func validate() throws {
        guard ["get", "put"].contains(method.lowercased()) else { throw ValidationError("The method must be get or put.") }
        guard Self.split(object) != nil else { throw ValidationError("Name the object as BUCKET/KEY.") }
        guard (1...604_800).contains(expires) else { throw ValidationError("--expires must be between 1 and 604800.") }
    }

    /// The bucket and key of `BUCKET/KEY`: the bucket up to the first slash, the key (which may end in a slash, as a
    /// "folder" object's does) after it; nil when either is empty.
    static func split(_ object: String) -> (bucket: String, key: String)? {
        guard let slash = object.firstIndex(of: "/"), slash != object.startIndex,
            object.index(after: slash) != object.endIndex
        else { return nil }
        return (String(object[..<slash]), String(object[object.index(after: slash)...]))
    }

    func run() async throws {
        guard let (bucket, key) = Self.split(object) else { throw ValidationError("Name the object as BUCKET/KEY.") }
        let url = try await service.with { connection -> String in
            let base = connection.publicEndpoint
            let host = HTTPTarget.authority(of: base) ?? "localhost"
            let path = "/" + SigV4.uriEncode(bucket, encodeSlash: true) + "/" + SigV4.uriEncode(key, encodeSlash: false)
            let signer = SigV4Signer(credentials: connection.credentials.sigV4, region: connection.region)
            let query = try signer.presign(method: method.uppercased(), path: path, query: [], host: host, expires: expires, date: Date())
            return (base.scheme ?? "http") + "://" + host + path + "?" + query.map {
                SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
            }.joined(separator: "&")
        }
        sayWhole(url)
    }
}

func printJSON(_ object: [String: Any]) {
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
        sayJSON(String(decoding: data, as: UTF8.self))
    }
}
