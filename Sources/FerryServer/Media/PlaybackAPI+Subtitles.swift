import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A video's subtitle tracks on its playback URLs: the master playlist gains their `SUBTITLES` group, and
/// `subtitles/…` serves each track's playlist, its WebVTT segments and the whole track (``SubtitlePlaylists``). Also
/// what every playlist made or rewritten on serve goes through: ``text(of:)`` and
/// ``generated(_:file:etag:lastModified:request:token:final:shared:)``.
extension PlaybackAPI {
    /// The answer for `file` when the video's subtitles shape it; nil when the file is served as stored. A playlist
    /// made here names its files with `token` when one is given (a signed video).
    func subtitleAnswer(file: String, video: VideoRecord, request: Request, token: String?) async throws -> Response? {
        let tracks = video.subtitles ?? []
        // The master playlist and the DASH manifest name the tracks.
        let naming: ((String) -> String)? =
            if PlaybackToken.isMasterPlaylist(file) {
                { SubtitlePlaylists.master($0, tracks: tracks) }
            } else if file == DashManifest.fileName {
                { DashManifest.addingSubtitles(tracks, to: $0) }
            } else {
                nil
            }
        if let naming {
            guard !tracks.isEmpty, let prefix = video.outputPrefix else { return nil }
            let stored = try await media.store.object(bucket: video.bucket, key: prefix + "/" + file)
            let version = tracks.map(\.subtitleId).joined(separator: ",")
            return generated(
                naming(try await text(of: stored)), file: file, etag: stored.etag + "-" + Self.shortHash(version),
                request: request, token: token, final: video.status == VideoStatus.normal, shared: !video.isPlaybackSigned)
        }
        guard let wanted = SubtitlePlaylists.file(file) else { return nil }
        let missing = S3Error(.noSuchKey, "The video has no such file.")
        // Tracks are served with the stream they go with: not before the video plays (their playlists are cut by
        // its length).
        guard MediaAPI.isPlayable(video) else { throw missing }
        let segmentSeconds = media.templates.segmentSeconds
        switch wanted {
        case .playlist(let id):
            guard tracks.contains(where: { $0.subtitleId == id }) else { throw missing }
            let playlist = SubtitlePlaylists.mediaPlaylist(
                subtitleId: id, duration: Self.duration(of: video), segmentSeconds: segmentSeconds)
            return generated(
                playlist, file: file, etag: Self.shortHash(playlist), request: request, token: token,
                shared: !video.isPlaybackSigned)
        case .segment(let id, let index):
            guard let track = tracks.first(where: { $0.subtitleId == id }),
                index < SubtitlePlaylists.segmentCount(duration: Self.duration(of: video), segmentSeconds: segmentSeconds)
            else { throw missing }
            let stored = try await media.store.object(bucket: video.bucket, key: track.key)
            let vtt = try await subtitleTracks.track(key: track.key, etag: stored.etag) {
                try WebVTT(parsing: try await text(of: stored))
            }
            let window = SubtitlePlaylists.window(index: index, segmentSeconds: segmentSeconds)
            return generated(
                vtt.segment(from: window.start, to: window.end), file: file, etag: stored.etag + "-\(index)", request: request,
                token: nil, shared: !video.isPlaybackSigned)
        case .track(let id):
            guard let track = tracks.first(where: { $0.subtitleId == id }) else { throw missing }
            let stored = try await media.store.object(bucket: video.bucket, key: track.key)
            return generated(
                try await text(of: stored), file: file, etag: stored.etag, request: request, token: nil,
                shared: !video.isPlaybackSigned)
        }
    }

    /// The video's length: its longest rendition, else its source.
    static func duration(of video: VideoRecord) -> Double {
        video.renditions?.compactMap(\.duration).max() ?? video.mezzanine?.playingDuration ?? 0
    }

    /// A stored playlist, manifest or track, read whole (they are small; anything past ``maxPlaylistBytes`` is
    /// refused).
    func text(of object: ObjectInfo) async throws -> String {
        let tooLarge = S3Error(.invalidRequest, "The playlist is too large to be served.")
        guard object.size <= Self.maxPlaylistBytes else { throw tooLarge }
        var bytes = ByteBuffer()
        for try await buffer in try await media.store.readObject(object, range: nil) {
            var buffer = buffer
            bytes.writeBuffer(&buffer)
            guard bytes.readableBytes <= Self.maxPlaylistBytes else { throw tooLarge }
        }
        return String(decoding: bytes.readableBytesView, as: UTF8.self)
    }

    /// An answer made here: 304 when the client has it, else the text (HEAD: its headers). A playlist, DASH
    /// manifest or storyboard VTT with a `token` names its files with it, and its ETag follows the text it then is.
    /// One that is not `final` (a first stream's master playlist) is revalidated on every use; one that is `shared`
    /// (a public video's) may be kept by any cache (``cacheControl(final:lifetime:shared:)``).
    func generated(
        _ text: String, file: String, etag: String, lastModified: Date? = nil, request: Request, token: String?,
        final: Bool = true, shared: Bool
    ) -> Response {
        var text = text
        var etag = etag
        if let token {
            let query = PlaybackToken.queryName + "=" + token
            if file.hasSuffix(".mpd") {
                text = DashManifest.addingQuery(query, to: text)
            } else if file.hasSuffix(".vtt") {
                text = PlaylistRewriter.addingQueryToCues(query, to: text)
            } else {
                text = PlaylistRewriter.addingQuery(query, to: text)
            }
            etag += "-" + Self.shortHash(text)
        }
        var headers: HTTPFields = [
            .eTag: "\"\(etag)\"", .contentType: file.hasSuffix(".vtt") ? "text/vtt; charset=utf-8" : WorkFiles.contentType(forPath: file),
            .cacheControl: Self.cacheControl(final: final, lifetime: 60, shared: shared),
        ]
        if let lastModified { headers[.lastModified] = S3Date.http(lastModified) }
        if let match = request.headers[.ifNoneMatch], ObjectWriteCondition.etags(match, weak: true).contains(where: { $0 == etag || $0 == "*" }) {
            return Response(status: .notModified, headers: headers)
        }
        let body = ByteBuffer(string: text)
        headers[.contentLength] = String(body.readableBytes)
        if request.method == .head { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
    }

    /// 16 hex digits of a text's SHA-256: an ETag part that changes when the text does.
    private static func shortHash(_ text: String) -> String {
        String(SigV4.hexSHA256(Array(text.utf8)).prefix(16))
    }
}
