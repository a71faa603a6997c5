/// How a publish ended, as the seed's `TXPublishResult`: `retCode` 0 with the video's id and URLs, or an error code
/// and message.
public struct PublishResult: Sendable, Hashable {
    /// 0 when published, else one of ``PublishError/Code``'s values.
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

    /// Creates a result.
    public init(retCode: Int, descMsg: String, videoId: String? = nil, videoURL: String? = nil, coverURL: String? = nil)
    {
        self.retCode = retCode
        self.descMsg = descMsg
        self.videoId = videoId
        self.videoURL = videoURL
        self.coverURL = coverURL
    }

    /// A failed result.
    init(_ error: PublishError) {
        self.init(retCode: error.code.rawValue, descMsg: error.message)
    }

    /// ``retCode`` as a code.
    public var code: PublishError.Code { PublishError.Code(rawValue: retCode) }
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
