import FerryCore

/// How a publish ended, as the seed's `TXPublishResult`: `retCode` 0 with the video's id and URLs, or an error code
/// and message — a view of the ``error``, which has the rest (its kind, HTTP status, server code, request ids).
///
/// Two results are equal when their seed fields (`retCode`, `descMsg`, the id and URLs) are.
public struct PublishResult: Sendable, Hashable {
    /// 0 when published, else one of ``PublishCode``'s values: the ``error``'s ``FerryError/publishCode``.
    public var retCode: Int
    /// What happened, for people: `OK`, or the failure.
    public var descMsg: String
    /// The video's id in the catalog (the service's `FileId`).
    public var videoId: String?
    /// A URL that serves the video (signed, valid for 7 days).
    public var videoURL: String?
    /// A URL that serves the cover (signed, valid for 7 days): the cover published with the video, or, without one,
    /// the cover the service takes from the video (when the service processes videos).
    public var coverURL: String?
    /// Why the publish failed; nil when it was published.
    public var error: FerryError?

    /// Creates a result.
    public init(retCode: Int, descMsg: String, videoId: String? = nil, videoURL: String? = nil, coverURL: String? = nil)
    {
        self.retCode = retCode
        self.descMsg = descMsg
        self.videoId = videoId
        self.videoURL = videoURL
        self.coverURL = coverURL
    }

    /// A failed result: the error's ``FerryError/publishCode`` and message.
    public init(_ error: FerryError) {
        self.init(retCode: error.publishCode.rawValue, descMsg: error.message)
        self.error = error
    }

    /// ``retCode`` as a code.
    public var code: PublishCode { PublishCode(rawValue: retCode) }

    public static func == (lhs: PublishResult, rhs: PublishResult) -> Bool {
        (lhs.retCode, lhs.descMsg, lhs.videoId, lhs.videoURL, lhs.coverURL)
            == (rhs.retCode, rhs.descMsg, rhs.videoId, rhs.videoURL, rhs.coverURL)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(retCode)
        hasher.combine(descMsg)
        hasher.combine(videoId)
        hasher.combine(videoURL)
        hasher.combine(coverURL)
    }
}

/// What happens during a publish, as the seed's `TXVideoPublishListener` callbacks; the sequence finishes after
/// `completed`.
public enum PublishEvent: Sendable, Hashable {
    /// `onPublishProgress:totalBytes:`: bytes of the video and cover uploaded so far (including what a resumed publish
    /// found already uploaded) and their total. Never goes backwards; the last report of a success is the total.
    case progress(uploadBytes: Int64, totalBytes: Int64)
    /// `onPublishComplete:`: the publish ended, successfully or not.
    case completed(PublishResult)
}
