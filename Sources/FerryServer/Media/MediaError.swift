import FerryCore
import Foundation

/// An error of the media API, rendered as JSON `{code, message, requestId}`.
public struct MediaError: Error, Sendable {
    /// Error code, e.g. `InvalidParameter`, `InvalidVideo.NotFound`.
    public var code: String
    /// Message for people.
    public var message: String
    /// HTTP status.
    public var status: Int

    init(_ code: String, _ message: String, status: Int = 400) {
        self.code = code
        self.message = message
        self.status = status
    }

    static func invalid(_ name: String, _ why: String) -> MediaError {
        MediaError("InvalidParameter", "\(name) \(why)")
    }
    static func missing(_ name: String) -> MediaError {
        MediaError("MissingParameter", "\(name) is required.")
    }
    static let forbidden = MediaError("Forbidden", "The credentials do not allow this operation.", status: 403)
    static func notFound(_ what: String, _ id: String) -> MediaError {
        MediaError("Invalid\(what).NotFound", "No \(what.lowercased()) has the id \(id.prefix(64)).", status: 404)
    }
}

/// Statuses of a video, in the order they advance. See docs/api.md.
///
/// `Uploading → UploadSucc → Transcoding → Normal`, or `TranscodeFail` (the source kept, the reason recorded); with
/// the `NoTranscode` template group `UploadSucc → Normal` with the original as its only definition (`OD`).
public enum VideoStatus {
    /// Created; its source file is not (completely) in storage yet.
    public static let uploading = "Uploading"
    /// The object service has its complete source file; it waits for (or is in) probing.
    public static let uploadSucc = "UploadSucc"
    /// Probed; its renditions are being encoded.
    public static let transcoding = "Transcoding"
    /// Playable: every rendition of its template group is published (or, with `NoTranscode`, the original).
    public static let normal = "Normal"
    /// Probing or transcoding failed; the source is kept and `ErrorCode` / `ErrorMessage` say why.
    public static let transcodeFail = "TranscodeFail"
    /// Deleted; its files are gone.
    public static let deleted = "Deleted"
    /// Its upload never completed within the server's `uploadingVideoMaxAge`; what had arrived was removed.
    public static let uploadFailed = "UploadFail"
}

/// Statuses of an image.
public enum ImageStatus {
    /// Created; its file is not in storage yet.
    public static let uploading = "Uploading"
    /// Its file is stored.
    public static let uploaded = "Uploaded"
}
