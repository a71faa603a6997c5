import Crypto
import FerryCore
import FerryMedia
import Foundation
import JWTKit

/// Playback addresses and the JWTs that open them.
///
/// A video's published files are at `/_ferry/play/<VideoId>/<file>`. A public video's need nothing more; a signed
/// video's carry `?token=<JWT>`: `sub` the video's id, `aud` what the token grants (``Audience``), `exp` when it
/// ends, optionally `referrers` (the hosts a browser may play it from), signed with ES256 or RS256 by a signing key
/// (CreateSigningKey; `kid` names it) or with the server's own key, which only the server uses, for the URLs
/// GetPlayInfo answers. Playlists are rewritten as they are served so that every URI in them carries the request's
/// token, and players need no changes.
enum PlaybackToken {
    /// Path prefix of playback URLs.
    static let pathPrefix = "/_ferry/play/"
    /// The query parameter that carries the token.
    static let queryName = "token"
    /// The `kid` of the tokens the server mints itself (HS256 under a key derived from its token key; never given out).
    static let serverKeyId = "ferry"
    /// The longest token read (a JWT with a few claims is a few hundred bytes).
    static let maxTokenLength = 4096

    /// What a token grants: its `aud`.
    enum Audience: String, CaseIterable, Sendable {
        /// Playback: playlists, segments, MP4 renditions.
        case video = "v"
        /// Thumbnails and the cover.
        case thumbnail = "t"
        /// The cover only: what the long-lived URLs of video descriptions carry (a `t` token opens a still of any
        /// moment of the video).
        case cover = "c"
        /// Storyboards.
        case storyboard = "s"
        /// Downloads of MP4 renditions.
        case download = "d"

        /// The audiences any of which opens `file` (a path under the video, checked by ``isValidFilePath(_:)``).
        static func accepted(forFile file: String) -> Set<Audience> {
            let name = file.split(separator: "/").last.map(String.init) ?? file
            if name == MediaAPI.coverFileName { return [.thumbnail, .cover] }
            if name.hasPrefix("thumbnail") { return [.thumbnail] }
            // Pictures on demand, as the thumbnail's token opens them; a player's token opens the animations too.
            if name.hasPrefix("animated") { return [.thumbnail, .video] }
            if name.hasPrefix("storyboard") || file.hasPrefix("storyboard/") { return [.storyboard] }
            if !file.contains("/"), name.hasSuffix(".mp4") || name.hasSuffix(".m4a") { return [.video, .download] }
            return [.video]
        }
    }

    /// The claims of a playback token.
    struct Claims: JWTPayload {
        /// The video's id.
        var sub: SubjectClaim
        /// What it grants (``Audience`` values).
        var aud: AudienceClaim
        /// When it ends.
        var exp: ExpirationClaim
        /// When it begins, if not at once.
        var nbf: NotBeforeClaim?
        /// Hosts the request's `Referer` must name (`example.com`, `*.example.com`); nil: any, or none.
        var referrers: [String]?
        /// In a token the server mints: the access key it was minted for, whose being disabled or deleted ends it.
        var iss: IssuerClaim?
        /// The definitions (`LD`, `SD`, …) whose renditions it opens; nil: every one. `AUTO` opens them all (the
        /// master playlist and the DASH manifest name every rendition).
        var definitions: [String]?

        /// Nothing here: ``PlaybackAuthorizer`` checks each claim after the signature, so a refusal says which.
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The server's own key, derived from its token key so every node sharing that key mints and accepts the same
    /// tokens; it signs only what GetPlayInfo and video descriptions answer.
    static func serverKey(codec: SessionTokenCodec) -> HMACKey {
        HMACKey(key: SymmetricKey(data: codec.authenticationCode(for: Data("playback-jwt".utf8), purpose: "play")))
    }

    /// A token the server signs for `videoId`, granting `audiences` until `expiration`, for the access key `issuer`
    /// (the long-term key of the caller it answers): it opens nothing once that key is disabled or deleted.
    /// With `definitions`, it opens only those definitions' renditions (``Claims/definitions``).
    static func mint(
        videoId: String, audiences: [Audience], expiration: Date, issuer: String, definitions: [String]? = nil,
        codec: SessionTokenCodec
    ) async throws -> String {
        let keys = await JWTKeyCollection().add(hmac: serverKey(codec: codec), digestAlgorithm: .sha256, kid: .init(string: serverKeyId))
        let claims = Claims(
            sub: .init(value: videoId), aud: .init(value: audiences.map(\.rawValue)),
            exp: .init(value: expiration.rounded()), nbf: nil, referrers: nil, iss: .init(value: issuer),
            definitions: definitions)
        return try await keys.sign(claims, kid: .init(string: serverKeyId))
    }

    /// The playback URL of `file` of a video under `base` (scheme and authority), with `token` when there is one.
    static func url(base: String, videoId: String, file: String, token: String?) -> String {
        let url = base + pathPrefix + videoId + "/" + file
        guard let token else { return url }
        return url + "?" + queryName + "=" + token
    }

    /// The definition of the rendition `file` belongs to (its MP4, its HLS playlist or a file of its directory, the
    /// master playlist and DASH manifest as `AUTO`); nil for a file of no rendition (subtitles, pictures).
    static func definition(ofFile file: String, in renditions: [Rendition]) -> String? {
        for rendition in renditions {
            if rendition.path == file { return rendition.definition }
            if rendition.format == "m3u8", file.hasPrefix(directory(of: rendition)) { return rendition.definition }
        }
        return nil
    }

    /// The directory of an HLS rendition's files: its playlist's (`LD/index.m3u8`: `LD/`), or the definition's for a
    /// definition's master playlist (`LD.m3u8`).
    private static func directory(of rendition: Rendition) -> String {
        guard let slash = rendition.path.firstIndex(of: "/") else { return rendition.definition + "/" }
        return String(rendition.path[...slash])
    }

    /// Whether `file` is of the HLS playlist of the sound published apart from the picture (`SQ/…` beside `LD`,
    /// `SD`, …; not its progressive download, `SQ.m4a`), `definition`, and `allowed` names a definition of the
    /// picture: each such definition's playlist plays with that sound.
    static func isSound(_ file: String, of definition: String, allowed: [String], in renditions: [Rendition]) -> Bool {
        let own = renditions.filter { $0.definition == definition }
        return file.hasPrefix(definition + "/") && !own.isEmpty && own.allSatisfy { $0.width == nil }
            && renditions.contains { allowed.contains($0.definition) && $0.width != nil }
    }

    /// Whether `file` is one of the first stream's files (``TranscodePlan/firstStreamDirectory``) and `allowed` opens
    /// the definition that stream was published as (``VideoRecord/firstStreamDefinition``).
    static func isFirstStream(_ file: String, of video: VideoRecord, allowed: [String]) -> Bool {
        guard let definition = video.firstStreamDefinition else { return false }
        return file.hasPrefix(TranscodePlan.firstStreamDirectory + "/") && allowed.contains(definition)
    }

    /// Whether `file` is a master playlist: `master.m3u8`, or a definition's with the sound apart (`LD.m3u8`). Both
    /// name the subtitle tracks.
    static func isMasterPlaylist(_ file: String) -> Bool {
        !file.contains("/") && file.hasSuffix(".m3u8")
    }

    /// Whether `file` belongs to no definition whatever the renditions: a subtitle track's files, the cover, a
    /// picture on request, the storyboard.
    static func isOfNoDefinition(_ file: String) -> Bool {
        file.hasPrefix("subtitles/") || file.hasPrefix("storyboard") || file == MediaAPI.coverFileName
            || PreviewRequest.isPreviewFile(file)
    }

    /// Whether a video id in a playback path is well formed: 1 to 64 letters, digits, `_` and `-`.
    static func isValidVideoId(_ id: some StringProtocol) -> Bool {
        (1...64).contains(id.utf8.count) && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
    }

    /// Whether a path below the video (`LD/index.m3u8`, `LD/seg_00001.m4s`, `cover.jpg`) is well formed: one to four
    /// segments of letters, digits, `.`, `_` and `-`, none of them `.` or `..`.
    static func isValidFilePath(_ path: String) -> Bool {
        guard (1...256).contains(path.utf8.count) else { return false }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...4).contains(segments.count) else { return false }
        return segments.allSatisfy { segment in
            !segment.isEmpty && segment != "." && segment != ".."
                && segment.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-") }
        }
    }
}

extension Date {
    /// Whole seconds, as a JWT's NumericDate keeps them (rounded up, so a token never ends earlier than asked).
    fileprivate func rounded() -> Date {
        Date(timeIntervalSince1970: timeIntervalSince1970.rounded(.up))
    }
}
