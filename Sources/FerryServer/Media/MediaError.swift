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
    /// Whole seconds after which the request may be tried again, sent as `Retry-After`; nil sends none.
    public var retryAfterSeconds: Int?

    init(_ code: String, _ message: String, status: Int = 400, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfterSeconds = retryAfterSeconds
    }

    static func invalid(_ name: String, _ why: String) -> MediaError {
        MediaError("InvalidParameter", "\(name) \(why)")
    }
    static func missing(_ name: String) -> MediaError {
        MediaError("MissingParameter", "\(name) is required.")
    }
    static let forbidden = MediaError("Forbidden", "The credentials do not allow this operation.", status: 403)
    /// 404 `Invalid<what>.NotFound`; the message spells `what` in words (`AccessKey`: "No access key has…").
    static func notFound(_ what: String, _ id: String) -> MediaError {
        let words = what.reduce(into: "") { words, letter in
            words += letter.isUppercase && !words.isEmpty ? " " + letter.lowercased() : letter.lowercased()
        }
        return MediaError("Invalid\(what).NotFound", "No \(words) has the id \(id.prefix(64)).", status: 404)
    }
    /// 409 for a video or image (`what`) that takes no more uploads: `Invalid<what>.Uploaded` once its file is
    /// stored, `Invalid<what>.UploadExpired` once its upload expired (status `UploadFail`).
    static func closedToUploads(_ what: String, status: String) -> MediaError {
        status == ImageStatus.uploadFailed
            ? MediaError(
                "Invalid\(what).UploadExpired",
                "The \(what.lowercased())'s upload expired; it takes no more uploads. Create a new one.", status: 409)
            : MediaError(
                "Invalid\(what).Uploaded", "The \(what.lowercased()) is stored already; it takes no more uploads.",
                status: 409)
    }
}
