import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Serves a video's published files to players: `GET|HEAD /_ferry/play/<token>/<videoId>/<file>`.
///
/// `<token>` (``PlaybackToken``) authorizes every file of the video until it expires, so HLS playlists use relative
/// URIs and any player follows them. `<file>` is a path under the video's published renditions (`master.m3u8`,
/// `LD/index.m3u8`, `LD/seg_00001.m4s`, `LD.mp4`), or `cover.jpg` for the cover taken from the source. Ranges and
/// conditional requests work as on the object API; responses allow any origin (the URL is the credential), so a
/// browser player on another site can fetch them. Errors are S3 error documents: 403 `AccessDenied` for a token that
/// is altered, expired or for another video, 404 `NoSuchKey` for a file that is not published.
struct PlaybackAPI: Sendable {
    let media: MediaAPI
    /// Makes the stills and animations asked for by name (`thumbnail.jpg`, `animated.gif`, …); nil without ffmpeg.
    var previews: PreviewRenderer?

    /// Answers a playback request (errors are thrown for the group's S3 dialect).
    func respond(to request: Request, context: FerryRequestContext) async throws -> Response {
        try await answer(request)
    }

    private func answer(_ request: Request) async throws -> Response {
        if request.method == .options {
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowMethods: "GET, HEAD", .accessControlAllowHeaders: "Range, If-None-Match, If-Modified-Since",
                    .accessControlMaxAge: "3600",
                ])
        }
        guard request.method == .get || request.method == .head else {
            throw S3Error(.methodNotAllowed, "The specified method is not allowed against this resource.")
        }
        let rest = request.uri.path.dropFirst(PlaybackToken.pathPrefix.count)
        let pieces = rest.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        let denied = S3Error(.accessDenied, "The playback URL is not valid.")
        guard pieces.count == 3, !pieces[1].isEmpty else { throw denied }
        let token = String(pieces[0])
        let videoId = String(pieces[1])
        let file = String(pieces[2])
        switch PlaybackToken.verify(token, videoId: videoId, now: media.credentials.now(), codec: media.credentials.tokens) {
        case .valid: break
        case .expired: throw S3Error(.accessDenied, "The playback URL has expired.")
        case .invalid: throw denied
        }
        let missing = S3Error(.noSuchKey, "The video has no such file.")
        guard PlaybackToken.isValidFilePath(file), let video = try await media.catalog.video(videoId),
            video.status != VideoStatus.deleted
        else { throw missing }
        let key: String
        if file == MediaAPI.coverFileName {
            guard let snapshot = video.snapshotKey else { throw missing }
            key = snapshot
        } else if let picture = try await previewKey(file: file, request: request, video: video) {
            key = picture
        } else {
            guard let prefix = video.outputPrefix else { throw missing }
            key = prefix + "/" + file
        }
        var attempts = 0
        while true {
            do {
                return try await serve(bucket: video.bucket, key: key, file: file, request: request)
            } catch is ObjectChangedError where attempts < 3 {
                attempts += 1
            } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
                throw missing
            }
        }
    }

    private func serve(bucket: String, key: String, file: String, request: Request) async throws -> Response {
        let object = try await media.store.object(bucket: bucket, key: key)
        try ObjectAPI.checkConditions(request.headers, object: object)
        var headers: HTTPFields = [
            .eTag: "\"\(object.etag)\"", .lastModified: S3Date.http(object.lastModified), .acceptRanges: "bytes",
            .contentType: WorkFiles.contentType(forPath: file), .cacheControl: "private, max-age=3600",
        ]
        let range = try request.headers[.range].flatMap { try ObjectAPI.parseRange($0, size: object.size) }
        let status: HTTPResponse.Status
        let length: Int64
        if let range {
            status = .partialContent
            length = range.upperBound - range.lowerBound + 1
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(object.size)"
        } else {
            status = .ok
            length = object.size
        }
        headers[.contentLength] = String(length)
        if request.method == .head { return Response(status: status, headers: headers) }
        let bytes = try await media.store.readObject(object, range: range)
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(length)) { writer in
                for try await buffer in bytes { try await writer.write(buffer) }
                try await writer.finish(nil)
            })
    }
}

/// Playback answers go to players on any site (the URL is the credential): every answer, refusals included, allows any
/// origin, and preflights are answered for `GET` and `HEAD`.
struct PlaybackCrossOriginMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.accessControlAllowOrigin] = "*"
        if response.status.code < 300 {
            response.headers[.accessControlExposeHeaders] = "Content-Length, Content-Range, ETag, Accept-Ranges"
        }
        return response
    }
}
