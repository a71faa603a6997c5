import FerryCore
import Foundation

/// What ``ShortVideoUploader`` reports (the seed's `VODUploadSVideoClientDelegate`).
public enum ShortVideoEvent: Sendable {
    /// Bytes of the video and the cover together: never backwards, ending at `totalSize`.
    case progress(uploadedSize: Int64, totalSize: Int64)
    /// Both files are stored and the video has its cover.
    case succeeded(ShortVideoResult)
    /// The upload failed with a code and message.
    case failed(code: String, message: String)
    /// The STS credential expired; call ``ShortVideoUploader/refresh(credentials:)``.
    case tokenExpired
    /// A request failed and is tried again.
    case retry
    /// A request succeeded again after retries.
    case retryResumed
}

/// The outcome of a short-video upload (the seed's `VodSVideoUploadResult`).
public struct ShortVideoResult: Sendable, Hashable {
    /// The video id.
    public var videoId: String
    /// The URL of the cover image, which is also the video's CoverURL: the image's address in the media bucket, which
    /// a reader needs a signature for. GetVideoInfo's `CoverURL` reads it (presigned), as GetImageInfo's URL does.
    public var imageURL: String
    /// The cover image's id.
    public var imageId: String
}

/// Uploads a short video and its cover image together with an STS credential, in one call: the Swift form of
/// `VODUploadSVideoClient`.
///
/// ```swift
/// let uploader = ShortVideoUploader(endpoint: serviceURL)
/// Task { for await event in uploader.events { … } }
/// let result = try await uploader.upload(
///     video: clipURL, cover: coverURL, info: MediaInfo(title: "Short", tags: "game", cateId: 10),
///     credentials: stsToken)
/// print(result.videoId, result.imageURL)
/// ```
///
/// The cover image is created first (CreateUploadImage, type `cover`), the video is created with its URL as CoverURL,
/// then both files upload at once through an ``UploadQueue``, each resumable from its checkpoint.
public actor ShortVideoUploader {
    /// The same settings as the queue's (transcode, maxRetryCount, timeoutIntervalForRequest, recordDirectoryPath,
    /// recordUploadProgress, resumeValidity, uploadPartSize, region), but for `maxConcurrentUploads`: the video and
    /// its cover always upload at once (two).
    public typealias Configuration = UploadQueue.Configuration

    /// What happens, across uploads; finishes when the uploader is released.
    public nonisolated let events: AsyncStream<ShortVideoEvent>
    private let continuation: AsyncStream<ShortVideoEvent>.Continuation
    /// The media service.
    public nonisolated let endpoint: URL
    /// The configuration.
    public nonisolated let configuration: Configuration

    /// The STS credential of the upload under way; only the app renews it, with ``refresh(credentials:)``.
    private var token: CredentialCache?
    private var queue: UploadQueue?
    private var tokenWaiter: CheckedContinuation<Void, any Error>?
    private var cancelled = false
    /// Whether a ``ShortVideoEvent/tokenExpired`` was reported and no credential taken since: the files wait for one.
    private var awaitingToken = false
    /// Why the upload under way ends, when it ends for something said outside its events (an expired credential
    /// given to files that wait for one).
    private var failure: FerryError?
    /// Whether ``pause()`` came after the last ``resume()``: a pause while the cover's ticket is being made holds
    /// the files' uploads from starting.
    private var paused = false

    /// An uploader for the media service at `endpoint`.
    public init(endpoint: URL, configuration: Configuration = .init()) {
        (events, continuation) = AsyncStream.makeStream(of: ShortVideoEvent.self, bufferingPolicy: .unbounded)
        self.endpoint = endpoint
        self.configuration = configuration
    }

    deinit {
        continuation.finish()
        tokenWaiter?.resume(throwing: CancellationError())
    }

    /// Uploads `video` with `cover` as its cover image and returns the video id and image URL.
    ///
    /// When either file fails, the other is paused, not cancelled: its checkpoint (and the video, or the cover image)
    /// stays, and calling this again with the same files continues both.
    ///
    /// - Throws: ``FerryError`` — `fileNotFound` for a missing file, `invalidArgument` while another upload runs,
    ///   `cancelled` after ``cancel()``, `credentialsExpired` when ``refresh(credentials:)`` gave files that wait for a
    ///   credential one that has expired already, or the failure of either file (with the server's code).
    public func upload(video: URL, cover: URL, info: MediaInfo, credentials: Credentials) async throws(FerryError)
        -> ShortVideoResult
    {
        guard queue == nil else { throw FerryError(.invalidArgument, "A short video is already being uploaded.") }
        do {
            return try await run(video: video, cover: cover, info: info, credentials: credentials)
        } catch {
            let failure = FerryError(error, fallback: .network, "The short-video upload")
            if failure.code != .cancelled {
                continuation.yield(.failed(code: failure.serverCode ?? failure.code.description, message: failure.message))
            }
            throw failure
        }
    }

    private func run(video: URL, cover: URL, info: MediaInfo, credentials: Credentials) async throws -> ShortVideoResult {
        let videoSize = try FileRanges.attributes(of: video.path).size
        let coverSize = try FileRanges.attributes(of: cover.path).size
        let token = CredentialCache(credentials, now: configuration.objectStorage.now) {
            throw FerryError(.credentialsExpired, "The STS credential expired; refresh it.")
        }
        self.token = token
        cancelled = false
        paused = false
        awaitingToken = false
        failure = nil
        let queue = UploadQueue(authorization: .sts(endpoint: endpoint, credentials: credentials), configuration: settings)
        self.queue = queue
        defer { self.queue = nil }

        let coverTicket = try await coverTicket(for: cover, info: info, token: token)
        if cancelled {
            // Cancelled while the cover image was being made: it would wait, `Uploading`, for a file that never comes.
            let media = media(token)
            Task { await media.deleteAbandonedImage(coverTicket.id) }
            throw FerryError.cancelledError()
        }
        var videoInfo = info
        videoInfo.coverURL = coverTicket.imageURL
        let coverId = await queue.add(cover, info: info, kind: .image, imageType: "cover", ticket: coverTicket)
        let videoId = await queue.addFile(video, info: videoInfo, kind: .video)
        let total = videoSize + coverSize
        // Paused meanwhile: the files wait for ``resume()``, which starts the queue.
        if !paused { await queue.start() }

        var uploaded: [UploadQueue.Item.ID: Int64] = [:]
        var results: [UploadQueue.Item.ID: MediaUploadResult] = [:]
        var lastReported: Int64 = -1
        for await event in queue.events {
            switch event {
            case .progress(let item, let size, _):
                uploaded[item.id] = size
                let sum = uploaded.values.reduce(0, +)
                if sum > lastReported {
                    lastReported = sum
                    continuation.yield(.progress(uploadedSize: sum, totalSize: total))
                }
            case .finished(let item, let result):
                results[item.id] = result
                uploaded[item.id] = result.upload.size
                guard let videoResult = results[videoId], results[coverId] != nil else { continue }
                let outcome = ShortVideoResult(
                    videoId: videoResult.videoId ?? "", imageURL: coverTicket.imageURL ?? "", imageId: coverTicket.id)
                if lastReported < total { continuation.yield(.progress(uploadedSize: total, totalSize: total)) }
                continuation.yield(.succeeded(outcome))
                return outcome
            case .failed(_, let code, let message):
                // The other file keeps what it has sent: the same call again continues both.
                await queue.pause()
                // A failure on the device's side keeps its own code (network, timeout, …); the rest are the server's.
                if let local = FerryError.Code(name: code) { throw FerryError(local, message) }
                throw FerryError(.server, message, serverCode: code)
            case .tokenExpired:
                // Both files meet one expiry: the app hears of it once, and one refresh answers both.
                if !awaitingToken { continuation.yield(.tokenExpired) }
                awaitingToken = true
            case .retry:
                continuation.yield(.retry)
            case .retryResumed:
                continuation.yield(.retryResumed)
            case .started:
                break
            }
            if cancelled || failure != nil { break }
        }
        if let failure {
            // Both files have stopped (their checkpoints' locks let go) when the call ends.
            await queue.pause()
            throw failure
        }
        throw FerryError.cancelledError()
    }

    /// Pauses both files; the upload ids and checkpoints stay.
    public func pause() async {
        guard let queue else { return }
        paused = true
        await queue.pause()
    }

    /// Continues after ``pause()``. False when nothing is being uploaded.
    @discardableResult
    public func resume() async -> Bool {
        guard let queue else { return false }
        paused = false
        await queue.resume()
        return true
    }

    /// Cancels the upload: both multipart uploads are aborted and their checkpoints deleted, and the video and cover
    /// image made for them are deleted in the background unless stored; ``upload(video:cover:info:credentials:)``
    /// throws `cancelled`. False when nothing is being uploaded.
    @discardableResult
    public func cancel() async -> Bool {
        guard let queue else { return false }
        cancelled = true
        tokenWaiter?.resume(throwing: FerryError.cancelledError())
        tokenWaiter = nil
        await queue.clearFiles()
        await queue.finishEvents()
        return true
    }

    /// Continues with a new STS credential after ``ShortVideoEvent/tokenExpired`` (the seed's
    /// `refreshWithAccessKeyId:accessKeySecret:accessToken:expireTime:`).
    ///
    /// A credential that has expired already by the service's time (asked of the service when none of its answers
    /// has told it yet, so a device whose clock is wrong is not misled), given while the files wait for one, ends the
    /// upload with ``FerryError/Code/credentialsExpired`` instead of another ``ShortVideoEvent/tokenExpired``; the
    /// files are paused, their checkpoints kept. Given while they upload with a valid one, it changes nothing.
    public func refresh(credentials: Credentials) async {
        if credentials.isExpired(at: configuration.engine.now()) {
            await ServiceClock.calibrate(against: endpoint, transport: configuration.engine.transport)
        }
        if credentials.isExpired(at: configuration.engine.now()) {
            let expiry = credentials.expiration.map { " (at \($0.formatted(.iso8601)))" } ?? ""
            let expired = FerryError(
                .credentialsExpired,
                "The credential given has expired already\(expiry), by the service's time "
                    + "\(configuration.engine.now().formatted(.iso8601)); ask the app server for a fresh one.")
            if let waiter = tokenWaiter {
                tokenWaiter = nil
                waiter.resume(throwing: expired)
            } else if awaitingToken, let queue, failure == nil {
                // The upload's loop ends, pausing the files.
                failure = expired
                await queue.finishEvents()
            }
            return
        }
        awaitingToken = false
        token?.replace(with: credentials)
        tokenWaiter?.resume()
        tokenWaiter = nil
        await queue?.resume(withToken: credentials)
    }

    /// The queue's settings: two files at once.
    private var settings: Configuration {
        var settings = configuration
        settings.maxConcurrentUploads = 2
        return settings
    }

    /// The media API, with the STS credential in `token`.
    private func media(_ token: CredentialCache) -> MediaServiceClient {
        MediaServiceClient(
            endpoint: endpoint, region: configuration.region,
            credentialProvider: ClosureCredentialProvider { try await token.credentials() },
            configuration: configuration.engine)
    }

    /// Creates the cover image (so the video can name its URL), waiting for a fresh credential when it expired.
    private func coverTicket(for cover: URL, info: MediaInfo, token: CredentialCache) async throws
        -> MediaServiceClient.UploadTicket
    {
        let media = media(token)
        let ext = cover.pathExtension.lowercased()
        while true {
            do {
                return try await media.createUploadImage(
                    type: "cover", ext: ext.isEmpty ? "png" : ext, title: info.title, tags: info.tags, cateId: info.cateId,
                    description: info.desc, clientToken: try? MediaUploadJournal.clientToken(for: cover))
            } catch {
                guard UploadQueue.isExpiredToken(error) else { throw error }
                continuation.yield(.tokenExpired)
                try await withCheckedThrowingContinuation { tokenWaiter = $0 }
            }
        }
    }
}
