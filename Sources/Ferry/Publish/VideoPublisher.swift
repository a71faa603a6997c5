import FerryCore
import Foundation

/// Publishes a video (and a cover) with a publish signature from the app server, as the seed's `TXUGCPublish`:
/// apply for an upload, upload the video and then the cover to storage, commit.
///
/// ```swift
/// let publisher = VideoPublisher(endpoint: URL(string: "https://media.example.com")!, userID: "carol_ios")
/// let task = try publisher.publish(PublishParameters(signature: signature, videoPath: movie.path))
/// Task { for await event in task.events { if case .progress(let sent, let total) = event { … } } }
/// let result = await task.result
/// if result.retCode == 0 { print(result.videoId!, result.videoURL!) } else { print(result.retCode, result.descMsg) }
/// ```
///
/// Parameter errors are thrown at once, before any request; every later outcome is a ``PublishResult``. Cancel with
/// ``PublishTask/cancel()`` (`retCode` 1017); publishing again with the same parameters resumes where it stopped, for
/// 24 hours, as long as the files have not changed.
public final class VideoPublisher: Sendable {
    /// How the publisher behaves; every field has a default.
    public struct Configuration: Sendable {
        /// Where resume records and upload checkpoints are kept. Default: `Ferry/Publish` under the user's caches
        /// directory (the temporary directory when there is none).
        public var recordDirectory: URL
        /// Transport, retries, request timeout and logger for every request.
        public var client = ObjectStorageClient.Configuration()
        /// Size of the video's upload parts (files smaller than this go in one request). Default 5 MiB; a smaller size
        /// is raised to the client's ``ObjectStorageClient/Configuration/smallestPartSize``.
        public var partSize: Int64 = UploadPlan.defaultPartSize
        /// Parts sent at once. Default 4.
        public var concurrency = 4
        /// How long an interrupted publish can be resumed. Default 24 hours, as the seed's cache.
        public var resumeValidity: TimeInterval = 24 * 3600

        /// The defaults.
        public init() {
            let caches =
                FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            recordDirectory = caches.appendingPathComponent("Ferry/Publish", isDirectory: true)
        }
    }

    /// The service's base URL (the publish API is under `/_ferry/ugc/`).
    public let endpoint: URL
    /// Who publishes; keeps the resume records of different users apart.
    public let userID: String
    /// The configuration.
    public let configuration: Configuration

    /// Creates a publisher.
    ///
    /// - Parameters:
    ///   - endpoint: the Ferry service, e.g. `http://127.0.0.1:9000`.
    ///   - userID: who publishes (the seed's `initWithUserID:`); may be empty.
    ///   - configuration: record directory, transport and part size.
    public init(endpoint: URL, userID: String = "", configuration: Configuration = .init()) {
        self.endpoint = endpoint
        self.userID = userID
        self.configuration = configuration
    }

    /// Starts publishing.
    ///
    /// - Parameter parameters: the signature, the video and the optional cover.
    /// - Returns: the running publish: its events, result and cancel.
    /// - Throws: ``FerryError`` before any request, its ``FerryError/publishCode`` the seed's `retCode`:
    ///   `.invalidArgument` with ``PublishCode/invalidSignature`` (1012) for an empty signature, `.invalidArgument`
    ///   with ``PublishCode/invalidVideoPath`` (1013) for an empty video path, `.fileNotFound` with
    ///   ``PublishCode/fileNotExist`` (1008) when the video or cover cannot be read.
    public func publish(_ parameters: PublishParameters) throws(FerryError) -> PublishTask {
        guard !parameters.signature.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw .publish(.invalidArgument, .invalidSignature, "The signature is empty.")
        }
        guard !parameters.videoPath.isEmpty else {
            throw .publish(.invalidArgument, .invalidVideoPath, "The video path is empty.")
        }
        let video = try Self.readableFile(parameters.videoPath, what: "video")
        var cover: (url: URL, size: Int64)?
        if let path = parameters.coverPath, !path.isEmpty {
            cover = try Self.readableFile(path, what: "cover")
        }
        let job = PublishJob(
            endpoint: endpoint, userID: userID, configuration: configuration, parameters: parameters,
            videoURL: video.url,
            videoSize: video.size, coverURL: cover?.url, coverSize: cover?.size ?? 0)
        return PublishTask(job: job)
    }

    /// The absolute URL and size of a regular file that can be read; 1008 otherwise.
    static func readableFile(_ path: String, what: String) throws(FerryError) -> (url: URL, size: Int64) {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let size = try? FileRanges.attributes(of: url.path).size
        else {
            throw .publish(.fileNotFound, .fileNotExist, "The \(what) file \(path) does not exist or cannot be read.")
        }
        return (url, size)
    }
}

/// Everything a publish needs, fixed when it starts.
struct PublishJob: Sendable {
    var endpoint: URL
    var userID: String
    var configuration: VideoPublisher.Configuration
    var parameters: PublishParameters
    var videoURL: URL
    var videoSize: Int64
    var coverURL: URL?
    var coverSize: Int64
    var totalBytes: Int64 { videoSize + coverSize }
}
