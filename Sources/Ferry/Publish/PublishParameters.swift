/// What to publish, as the seed's `TXPublishParam`.
///
/// ```swift
/// var parameters = PublishParameters(signature: signatureFromAppServer, videoPath: movie.path)
/// parameters.coverPath = cover.path
/// let task = try publisher.publish(parameters)
/// ```
public struct PublishParameters: Sendable, Hashable {
    /// The publish signature from the app server (made with `PublishSignature` of FerryCore). Required.
    public var signature: String
    /// Path of the local video file. Required. Its extension (`mp4`, `mov`, …) is the video's type.
    public var videoPath: String
    /// Path of a cover image (png, jpg, jpeg, gif, webp or heic), or nil for none. The seed takes a `UIImage`; write it
    /// to a file first (e.g. `image.jpegData(compressionQuality:)`).
    public var coverPath: String?
    /// Whether an interrupted publish resumes when published again with the same parameters. Default true.
    public var enableResume: Bool
    /// The video's title in the catalog. Default: the video file's name.
    public var videoName: String?

    /// Creates parameters.
    public init(signature: String, videoPath: String, coverPath: String? = nil, enableResume: Bool = true) {
        self.signature = signature
        self.videoPath = videoPath
        self.coverPath = coverPath
        self.enableResume = enableResume
    }
}

extension PublishParameters: SecretRedacting {
    /// The files and options, without the signature (a credential until it expires).
    public var description: String {
        "PublishParameters(videoPath: \(videoPath), coverPath: \(coverPath ?? "nil"), enableResume: \(enableResume))"
    }

    /// The fields, the signature as `<redacted>`.
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "signature": "<redacted>", "videoPath": videoPath, "coverPath": coverPath as Any,
            "enableResume": enableResume, "videoName": videoName as Any,
        ]
    }
}
