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
        @Option(help: "Only videos with this status (Uploading, Uploaded).") var status: String?
        @Option(help: "Page number, from 1.") var page: Int = 1
        @Option(name: .customLong("page-size"), help: "Videos per page, 1–100.") var pageSize: Int = 20
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let (videos, total) = try await service.with { connection in
                try await report { try await connection.media().listVideos(status: status, pageNo: page, pageSize: pageSize) }
            }
            if json {
                printJSON(["Total": total, "VideoList": videos.map(VideosCommand.object)])
            } else {
                for video in videos {
                    print("\(video.videoId)\t\(video.status)\t\(video.size.map(String.init) ?? "-")\t\(video.title)")
                }
                print("\(total) video(s)")
            }
        }
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a video: id, title, status, size and playback URL.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The VideoId.") var videoId: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let (video, url) = try await service.with { connection in
                try await report {
                    let media = connection.media()
                    let video = try await media.getVideoInfo(videoId: videoId)
                    let url = video.status == "Uploaded" ? try await media.getPlayInfo(videoId: videoId).first?.url : nil
                    return (video, url)
                }
            }
            var object = VideosCommand.object(video)
            object["PlayURL"] = url ?? ""
            if json {
                printJSON(object)
            } else {
                for name in ["VideoId", "Title", "Status", "Size", "PlayURL"] { print("\(name): \(object[name] ?? "-")") }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete videos and their files.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "VideoIds.") var videoIds: [String]

        func run() async throws {
            try await service.with { connection in try await report { try await connection.media().deleteVideos(videoIds) } }
            print("Deleted \(videoIds.joined(separator: ", ")).")
        }
    }

    struct PlayURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "play-url", abstract: "Print a signed playback URL.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The VideoId.") var videoId: String
        @Option(help: "Seconds the URL is valid, 1–604800.") var expires: Int = 3600

        func run() async throws {
            let url = try await service.with { connection in
                try await report { try await connection.media().getPlayInfo(videoId: videoId, authTimeout: expires).first?.url }
            }
            guard let url else { throw ExitCode(ExitCodes.failed) }
            print(url)
        }
    }

    static func object(_ video: MediaServiceClient.VideoInfo) -> [String: Any] {
        var object: [String: Any] = ["VideoId": video.videoId, "Title": video.title, "Status": video.status]
        if let size = video.size { object["Size"] = size }
        return object
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
        guard object.contains("/"), !object.hasPrefix("/"), !object.hasSuffix("/") else {
            throw ValidationError("Name the object as BUCKET/KEY.")
        }
        guard (1...604_800).contains(expires) else { throw ValidationError("--expires must be between 1 and 604800.") }
    }

    func run() async throws {
        let slash = object.firstIndex(of: "/")!
        let bucket = String(object[..<slash])
        let key = String(object[object.index(after: slash)...])
        let url = try await service.with { connection -> String in
            let base = connection.publicEndpoint
            let host = base.port.map { "\(base.host ?? "localhost"):\($0)" } ?? (base.host ?? "localhost")
            let path = "/" + SigV4.uriEncode(bucket, encodeSlash: true) + "/" + SigV4.uriEncode(key, encodeSlash: false)
            let signer = SigV4Signer(credentials: connection.credentials.sigV4, region: connection.region)
            let query = try signer.presign(method: method.uppercased(), path: path, query: [], host: host, expires: expires, date: Date())
            return (base.scheme ?? "http") + "://" + host + path + "?" + query.map {
                SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
            }.joined(separator: "&")
        }
        print(url)
    }
}

func printJSON(_ object: [String: Any]) {
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
        print(String(decoding: data, as: UTF8.self))
    }
}
