import FerryCore
import Foundation

/// The credential in a playback URL: one video, until a time, signed by the server.
///
/// HLS needs one credential for many files (master playlist, variant playlists, init segments, segments), fetched by
/// players that resolve relative URIs and add nothing to a request. So the credential is a path segment:
/// `/_ferry/play/<token>/<videoId>/<file>`, where `<token>` is `<expiry unix seconds>.<base64url HMAC-SHA256 of
/// "<videoId>\n<expiry>", first 16 bytes>` under a key derived from the server's token key. Every file of the video
/// is reachable with it until it expires; nothing else is.
enum PlaybackToken {
    /// Path prefix of playback URLs.
    static let pathPrefix = "/_ferry/play/"

    /// A token for `videoId` valid until `expiration`.
    static func make(videoId: String, expiration: Date, codec: SessionTokenCodec) -> String {
        let expiry = Int64(expiration.timeIntervalSince1970.rounded(.up))
        return "\(expiry)." + mac(videoId: videoId, expiry: expiry, codec: codec)
    }

    /// Whether `token` authorizes `videoId` at `now`.
    enum Verdict: Equatable {
        case valid
        case expired
        case invalid
    }

    static func verify(_ token: String, videoId: String, now: Date, codec: SessionTokenCodec) -> Verdict {
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 2, pieces[0].count <= 12, let expiry = Int64(pieces[0]), expiry > 0 else { return .invalid }
        guard SigV4.constantTimeEquals(mac(videoId: videoId, expiry: expiry, codec: codec), String(pieces[1])) else {
            return .invalid
        }
        return Double(expiry) > now.timeIntervalSince1970 ? .valid : .expired
    }

    private static func mac(videoId: String, expiry: Int64, codec: SessionTokenCodec) -> String {
        let code = codec.authenticationCode(for: Data("\(videoId)\n\(expiry)".utf8), purpose: "play")
        return SessionTokenCodec.base64url(code.prefix(16))
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
