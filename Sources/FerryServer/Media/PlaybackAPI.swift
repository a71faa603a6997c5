import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Serves a video's published files to players: `GET|HEAD /_ferry/play/<videoId>/<file>[?token=<JWT>]`.
///
/// A public video's files need nothing more; a signed video's need a playback token (``PlaybackToken``), checked by
/// ``PlaybackAuthorizer`` on every request. HLS playlists, DASH manifests and the storyboard VTT of a signed video are
/// rewritten as they are served: every URI in them gets the request's token, so a player that follows relative URIs
/// sends it with each playlist, init segment, segment and sprite. `<file>` is a path under the video's published
/// renditions (`master.m3u8`, `LD/index.m3u8`, `LD/seg_00001.m4s`, `LD.mp4`), or `cover.jpg` for the cover taken from
/// the source. Ranges and conditional requests work as on the object API (a rewritten playlist is always sent whole);
/// responses allow any origin, so a browser player on another site can fetch them. Errors are S3 error documents: 403
/// `AccessDenied` with a `Reason` (``PlaybackAuthorizer/Refusal``), 404 `NoSuchKey` for a file that is not published.
struct PlaybackAPI: Sendable {
    let media: MediaAPI
    /// Makes the stills and animations asked for by name (`thumbnail.jpg`, `animated.gif`, …); nil without ffmpeg.
    var previews: PreviewRenderer?
    /// Subtitle tracks parsed for their segments.
    let subtitleTracks = SubtitleTrackCache()

    /// The largest stored playlist, manifest or subtitle track read to be rewritten or cut (a playlist of a few hours
    /// of 6-second segments is well under this).
    static let maxPlaylistBytes: Int64 = 4 << 20

    /// Answers a playback request (errors are thrown for the group's S3 dialect); its client hanging up from
    /// `connection` stops a picture being made for it alone.
    func answer(_ request: Request, connection: (any Channel)? = nil) async throws -> Response {
        if request.method == .options {
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowMethods: "GET, HEAD",
                    // A range and every conditional the files answer: a player resuming a download sends If-Range.
                    .accessControlAllowHeaders:
                        "Range, If-Range, If-None-Match, If-Modified-Since, If-Match, If-Unmodified-Since",
                    .accessControlMaxAge: "3600",
                ])
        }
        guard request.method == .get || request.method == .head else {
            throw S3Error(.methodNotAllowed, "The specified method is not allowed against this resource.")
        }
        let rest = request.uri.path.dropFirst(PlaybackToken.pathPrefix.count)
        let pieces = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let missing = S3Error(.noSuchKey, "The video has no such file.")
        guard pieces.count == 2, PlaybackToken.isValidVideoId(pieces[0]) else { throw missing }
        let videoId = String(pieces[0])
        let file = String(pieces[1])
        guard PlaybackToken.isValidFilePath(file), let video = try await media.catalog.video(videoId),
            video.status != VideoStatus.deleted
        else { throw missing }
        let token = request.uri.queryParameters.get(PlaybackToken.queryName)
        do throws(PlaybackAuthorizer.Refusal) {
            try await PlaybackAuthorizer(catalog: media.catalog, credentials: media.credentials).authorize(
                video: video, file: file, token: token, referer: request.headers[.referer])
        } catch {
            throw error.error
        }
        // A progressive file is served once published: one of a ladder still being stored is not yet the video's.
        if !file.contains("/"), file.hasSuffix(".mp4") || file.hasSuffix(".m4a"),
            !(video.renditions ?? []).contains(where: { $0.path == file })
        {
            throw missing
        }
        // A progressive file its download policy does not offer is refused, whoever asks.
        if let rendition = video.renditions?.first(where: { $0.path == file }), MediaAPI.isProgressive(rendition),
            !MediaAPI.downloadable(video).contains(file)
        {
            throw S3Error(
                .accessDenied, "The video does not offer \(file) for download (Downloads: \(MediaAPI.downloadPolicy(of: video))).",
                details: ["Reason": "download"])
        }
        // A signed video's playlists, and its storyboard's cues, pass the token on to every file they name.
        let namesFiles = file.hasSuffix(".m3u8") || file.hasSuffix(".mpd") || file == StoryboardPlan.vttFileName
        let playlistToken = video.isPlaybackSigned && namesFiles ? token : nil
        do {
            if let answer = try await subtitleAnswer(file: file, video: video, request: request, token: playlistToken) {
                return answer
            }
        } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
            throw missing
        }
        let key: String
        if file == MediaAPI.coverFileName {
            guard let snapshot = video.snapshotKey else { throw missing }
            key = snapshot
        } else if let picture = try await previewKey(file: file, request: request, video: video, connection: connection) {
            key = picture
        } else {
            guard let prefix = video.outputPrefix else { throw missing }
            key = prefix + "/" + file
        }
        // The first stream's master playlist is replaced by the ladder's: revalidated until then.
        let final = video.status == VideoStatus.normal || !(file.hasSuffix(".m3u8") || file.hasSuffix(".mpd"))
        do {
            return try await ObjectAPI.retryingChanges {
                if let playlistToken {
                    // A playlist (or DASH manifest) with the token added to every URI it names, sent whole.
                    let object = try await media.store.object(bucket: video.bucket, key: key)
                    return generated(
                        try await text(of: object), file: key, etag: object.etag, lastModified: object.lastModified,
                        request: request, token: playlistToken, final: final, shared: !video.isPlaybackSigned)
                }
                return try await serve(
                    bucket: video.bucket, key: key, file: file, request: request, final: final,
                    shared: !video.isPlaybackSigned)
            }
        } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
            throw missing
        }
    }

    private func serve(
        bucket: String, key: String, file: String, request: Request, final: Bool, shared: Bool
    ) async throws -> Response {
        let object = try await media.store.object(bucket: bucket, key: key)
        // A 304 carries the Cache-Control the 200 would (RFC 9110, 15.4.5). The master playlist and the DASH manifest
        // name the subtitle tracks, which are added and deleted at any time: a minute, as generated playlists.
        let lifetime = PlaybackToken.isMasterPlaylist(file) || file == DashManifest.fileName ? 60 : 3600
        let cacheControl = Self.cacheControl(final: final, lifetime: lifetime, shared: shared)
        try ObjectAPI.checkConditions(request.headers, object: object, cacheControl: cacheControl)
        let headers: HTTPFields = [
            .eTag: "\"\(object.etag)\"", .lastModified: S3Date.http(object.lastModified), .acceptRanges: "bytes",
            // A cover the publish API stored keeps its own type (cover.png), whatever the URL's file name says.
            .contentType: WorkFiles.contentType(forPath: file == MediaAPI.coverFileName ? key : file),
            .cacheControl: cacheControl,
        ]
        let range = try ObjectAPI.requestedRange(request.headers, of: object)
        return try await ObjectAPI.objectAnswer(
            object, range: range, headers: headers, head: request.method == .head, store: media.store)
    }
}

extension PlaybackAPI {
    /// Who may keep an answer and for how long (seconds): any cache (a CDN) for a public video's files (`shared`), the
    /// player alone for a signed video's (its URLs carry a token); `no-cache` for one not `final` (a first stream's
    /// playlists, which the ladder's replace).
    static func cacheControl(final: Bool, lifetime: Int, shared: Bool) -> String {
        final ? "\(shared ? "public" : "private"), max-age=\(lifetime)" : "no-cache"
    }
}

extension AnswerMiddleware {
    /// Playback answers go to players on any site (the URL is the credential): every answer, refusals included, allows
    /// any origin, and preflights are answered for `GET` and `HEAD`.
    static let playbackCrossOrigin = AnswerMiddleware { response, _ in
        response.headers[.accessControlAllowOrigin] = "*"
        if response.status.code < 300 {
            response.headers[.accessControlExposeHeaders] = "Content-Length, Content-Range, ETag, Accept-Ranges"
        }
    }
}
