import FerryCore
import Foundation

/// A client of Ferry's media API (upload credentials, STS, videos and images), for app servers written in Swift and
/// for the `ferry` command line. Requests are JSON, signed with SigV4 for the service `ferry`.
///
/// ```swift
/// let media = MediaServiceClient(endpoint: endpoint, credentials: appServerKey)
/// let ticket = try await media.createUploadVideo(.init(title: "Holiday", fileName: "holiday.mp4"))
/// // hand ticket.uploadAddress / ticket.uploadAuth (base64) to the device, or upload here:
/// let upload = try await ticket.objectStorageClient().upload(file: movie, bucket: ticket.address.bucket, key: ticket.address.fileName)
/// ```
public final class MediaServiceClient: Sendable {
    /// The service's base URL.
    public let endpoint: URL
    /// Signing region.
    public let region: String
    /// Where credentials come from.
    public let credentialProvider: any CredentialProvider
    /// Transport and retries.
    public let configuration: ObjectStorageClient.Configuration
    /// Told of each retry of a call, before its wait: which retry, the failure, the wait.
    public let onRetry: (@Sendable (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void)?

    /// Creates a client; `onRetry` is told of each retry of a call before its wait.
    public init(
        endpoint: URL, region: String = "us-east-1", credentialProvider: any CredentialProvider,
        configuration: ObjectStorageClient.Configuration = .init(),
        onRetry: (@Sendable (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void)? = nil
    ) {
        self.endpoint = endpoint
        self.region = region
        self.credentialProvider = credentialProvider
        self.configuration = configuration
        self.onRetry = onRetry
    }

    /// Creates a client with fixed credentials.
    public convenience init(
        endpoint: URL, region: String = "us-east-1", credentials: Credentials,
        configuration: ObjectStorageClient.Configuration = .init()
    ) {
        self.init(endpoint: endpoint, region: region, credentialProvider: StaticCredentialProvider(credentials), configuration: configuration)
    }

    /// Calls an operation with an `Encodable` input and decodes its answer; for operations this client has no method
    /// for. The request is signed and retried as every other.
    public func call<Output: Decodable>(_ action: String, _ input: some Encodable, as output: Output.Type)
        async throws(FerryError) -> Output
    {
        let body = try FerryError.catching(.invalidArgument, "Encoding the \(action) request") {
            try MediaContract.encode(input)
        }
        let answer = try await callJSON(action, body: body)
        do {
            return try MediaContract.decode(output, from: answer)
        } catch {
            throw FerryError(.server, "The media service's \(action) answer cannot be read: \(error)")
        }
    }

    /// Calls an operation with a JSON body and returns the JSON answer as it came (for tools that print it).
    public func callJSON(_ action: String, body: Data) async throws(FerryError) -> Data {
        try await FerryError.catching(.network, "The media service's \(action)") {
            Data(try await send(action, body: [UInt8](body)))
        }
    }

    /// Signs and sends one operation with the retry policy; returns the body of a 2xx answer.
    private func send(_ action: String, body: [UInt8]) async throws -> [UInt8] {
        let host = HTTPTarget.authority(of: endpoint) ?? "localhost"
        var base = endpoint.path
        if base.hasSuffix("/") { base.removeLast() }
        let path = base + "/_ferry/v1/" + SigV4.uriEncode(action, encodeSlash: true)
        let (onRetry, told) = (self.onRetry, configuration.onRetry)
        return try await configuration.retryPolicy.run(
            clock: configuration.clock,
            retrying: { attempt, error, delay in
                told?(attempt, error, delay)
                onRetry?(attempt, error, delay)
            }
        ) { attempt in
            let credentials = try await credentialProvider.credentials()
            let signer = SigV4Signer(credentials: credentials.sigV4, region: region, service: "ferry")
            let headers = signer.sign(
                method: "POST", path: path, query: [], headers: [("host", host), ("content-type", "application/json")],
                payloadHash: SigV4.hexSHA256(body), date: ServiceClock.now(for: host)
            ).headers
            let request = TransportRequest(
                method: "POST", url: (endpoint.scheme ?? "http") + "://" + host + path, headers: headers + attempt.headers,
                body: body,
                timeout: configuration.timeoutIntervalForRequest)
            let response = try await Self.send(request, configuration: configuration)
            if (200..<300).contains(response.status) { return response.body }
            let refusal = try? MediaContract.decode(MediaContract.ErrorAnswer.self, from: Data(response.body))
            var error = FerryError(
                .server, refusal?.message ?? "The media service answered HTTP \(response.status).",
                httpStatus: response.status, serverCode: refusal?.code, requestId: refusal?.requestId)
            error.retryAfter = RetryPolicy.retryAfter(of: response)
            throw error
        }
    }

    /// Sends one request, a transport failure becoming the ``FerryError`` the retry policy judges.
    static func send(_ request: TransportRequest, configuration: ObjectStorageClient.Configuration) async throws
        -> TransportResponse
    {
        do {
            let response = try await configuration.transport.send(request, bodyProgress: { _ in }, responseSink: nil)
            if let host = URL(string: request.url).flatMap(HTTPTarget.authority(of:)) {
                ServiceClock.observe(
                    status: response.status, body: response.body, dateHeader: response.header("Date"), from: host)
            }
            return response
        } catch let error as TransportError {
            if Task.isCancelled { throw CancellationError() }
            throw FerryError(error.isTimeout ? .timeout : .network, error.message, underlying: error)
        }
    }

    // MARK: Videos and images

    /// What a new video is.
    public struct VideoDescription: Sendable {
        /// Title (at most 128 bytes).
        public var title: String
        /// File name with its extension, e.g. `holiday.mp4`.
        public var fileName: String
        /// Size in bytes, when known.
        public var fileSize: Int64?
        /// Description.
        public var description: String?
        /// Cover image URL.
        public var coverURL: String?
        /// Category id.
        public var cateId: Int?
        /// Comma-separated tags.
        public var tags: String?
        /// Transcoding template group.
        public var transcode: String?
        /// Free data for the app.
        public var userData: String?
        /// Makes the call idempotent: while a video created with this token is still uploading, creating again with
        /// it answers that video (with fresh credentials, and described as the new call describes it: title, cover,
        /// and the rest) instead of a new one. At most 64 characters.
        /// ``MediaUploadJournal/clientToken(for:scope:)`` makes one per local file.
        public var clientToken: String?
        /// Who may play it: `.signed` (the server's default: playback URLs need a token) or `.public`.
        public var playbackPolicy: PlaybackPolicy?
        /// Which progressive files are offered for download: `.all` (the server's default), `.none`, `.capped1080p`,
        /// `.audioOnly` or `.capped1080pAndAudio`.
        public var downloads: DownloadPolicy?

        /// Creates a description.
        public init(title: String, fileName: String) {
            self.title = title
            self.fileName = fileName
        }
    }

    /// Where and with what to upload a media file. Printed, it shows no credential: not `uploadAuth`, nor the
    /// `resumableUploadURL` that is one.
    public struct UploadTicket: Sendable, SecretRedacting {
        /// The video or image id.
        public var id: String
        /// The image URL (images only).
        public var imageURL: String?
        /// The base64 `UploadAddress` as the service sent it.
        public var uploadAddress: String
        /// The base64 `UploadAuth` as the service sent it.
        public var uploadAuth: String
        /// The decoded address.
        public var address: UploadAddress
        /// The decoded credential.
        public var auth: UploadAuth
        /// Where a tus client or a URLSession upload task (IETF resumable uploads) uploads the file without the SDK:
        /// the URL is its own credential (see the "Resumable uploads without the SDK" article).
        public var resumableUploadURL: URL?

        /// Reads a ticket from the base64 `UploadAddress` and `UploadAuth` an app server handed over.
        /// - Throws: ``FerryError/Code/invalidArgument`` when either cannot be decoded.
        public init(id: String, imageURL: String? = nil, address: String, auth: String) throws(FerryError) {
            guard let decodedAddress = UploadAddress(encoded: address), let decodedAuth = UploadAuth(encoded: auth) else {
                throw FerryError(
                    .invalidArgument,
                    "The upload address or credential cannot be read: both are base64 JSON, as CreateUploadVideo, "
                        + "CreateUploadImage and RefreshUploadVideo answer them.")
            }
            self.id = id
            self.imageURL = imageURL
            self.uploadAddress = address
            self.uploadAuth = auth
            self.address = decodedAddress
            self.auth = decodedAuth
        }

        /// The id and where the file goes; no credential.
        public var description: String { "UploadTicket(\(id), \(address.bucket)/\(address.fileName))" }

        /// The fields without the credential and the upload URL.
        public var redactedFields: KeyValuePairs<String, Any> {
            [
                "id": id, "imageURL": imageURL as Any, "uploadAddress": uploadAddress, "uploadAuth": "<redacted>",
                "address": address, "auth": auth,
                "resumableUploadURL": resumableUploadURL == nil ? "nil" : "<redacted>",
            ]
        }

        /// A client of the object service the ticket points at, signing with the ticket's credential.
        public func objectStorageClient(configuration: ObjectStorageClient.Configuration = .init()) throws(FerryError)
            -> ObjectStorageClient
        {
            guard let url = URL(string: address.endpoint) else {
                throw FerryError(.invalidArgument, "The upload address has no valid endpoint.")
            }
            return ObjectStorageClient(
                endpoint: url, region: auth.region, credentials: auth.ferryCredentials, configuration: configuration)
        }
    }

    /// Creates a video and returns where to upload its file.
    public func createUploadVideo(_ video: VideoDescription) async throws(FerryError) -> UploadTicket {
        let request = MediaContract.CreateUploadVideoRequest(
            title: video.title, fileName: video.fileName, fileSize: video.fileSize, description: video.description,
            coverURL: video.coverURL, cateId: video.cateId, tags: video.tags, transcode: video.transcode,
            userData: video.userData, clientToken: video.clientToken, playbackPolicy: video.playbackPolicy,
            downloads: video.downloads)
        let answer = try await call("CreateUploadVideo", request, as: MediaContract.UploadTicketAnswer.self)
        return try Self.ticket(answer, id: answer.videoId ?? "")
    }

    /// A fresh credential for the same video upload.
    public func refreshUploadVideo(videoId: String) async throws(FerryError) -> UploadTicket {
        let answer = try await call(
            "RefreshUploadVideo", MediaContract.VideoIdRequest(videoId: videoId), as: MediaContract.UploadTicketAnswer.self)
        return try Self.ticket(answer, id: videoId)
    }

    /// Creates an image and returns where to upload it. With a `clientToken` (1 to 64 printable ASCII characters),
    /// asking again while the image it made is still uploading answers that image, so a client that lost the answer
    /// (or was killed before it recorded it) makes one image, not two.
    public func createUploadImage(
        type: String = "default", ext: String = "png", title: String? = nil, tags: String? = nil, cateId: Int? = nil,
        description: String? = nil, clientToken: String? = nil
    ) async throws(FerryError) -> UploadTicket {
        let request = MediaContract.CreateUploadImageRequest(
            imageType: type, imageExt: ext, title: title, tags: tags, cateId: cateId, description: description,
            clientToken: clientToken)
        let answer = try await call("CreateUploadImage", request, as: MediaContract.UploadTicketAnswer.self)
        return try Self.ticket(answer, id: answer.imageId ?? "")
    }

    /// A fresh credential for the same image file, while the image is still being uploaded.
    public func refreshUploadImage(imageId: String) async throws(FerryError) -> UploadTicket {
        let answer = try await call(
            "RefreshUploadImage", MediaContract.ImageIdRequest(imageId: imageId), as: MediaContract.UploadTicketAnswer.self)
        return try Self.ticket(answer, id: imageId)
    }

    /// The ticket a CreateUpload… or RefreshUpload… answer carries; one that cannot be read is the service's fault.
    private static func ticket(_ answer: MediaContract.UploadTicketAnswer, id: String) throws(FerryError)
        -> UploadTicket
    {
        guard
            var ticket = try? UploadTicket(
                id: id, imageURL: answer.imageURL, address: answer.uploadAddress, auth: answer.uploadAuth)
        else {
            throw FerryError(.server, "The media service sent an upload address or credential that cannot be read.")
        }
        ticket.resumableUploadURL = answer.resumableUploadURL.flatMap(URL.init(string:))
        return ticket
    }

    /// The video's catalog entry.
    public func getVideoInfo(videoId: String) async throws(FerryError) -> VideoInfo {
        try await call("GetVideoInfo", MediaContract.VideoIdRequest(videoId: videoId), as: MediaContract.VideoInfoAnswer.self)
            .video
    }

    /// The video's playable streams with signed URLs valid for `authTimeout` seconds (1–604800): every published
    /// rendition (HLS `m3u8` and `mp4` per definition, `AUTO` for the HLS master playlist), or the original (`OD`)
    /// for a video stored with `NoTranscode`; while the video is still `Transcoding` with `playable` set, its first
    /// stream. `formats` and `definitions` narrow the list. Fails with `InvalidVideo.NoneStream` (404) until the video
    /// is playable.
    public func getPlayInfo(
        videoId: String, authTimeout: Int = 3600, formats: [String]? = nil, definitions: [String]? = nil
    ) async throws(FerryError) -> PlayInfo {
        let request = MediaContract.PlayInfoRequest(
            videoId: videoId, authTimeout: authTimeout, formats: formats?.joined(separator: ","),
            definition: definitions?.joined(separator: ","))
        return PlayInfo(try await call("GetPlayInfo", request, as: MediaContract.PlayInfoAnswer.self))
    }

    /// The video's source file: what ffprobe found in it, and a signed URL to download it (valid `authTimeout`
    /// seconds). Available once the source is stored (also when processing failed: the source is kept).
    public func getMezzanineInfo(videoId: String, authTimeout: Int = 3600) async throws(FerryError) -> MezzanineInfo {
        try await call(
            "GetMezzanineInfo", MediaContract.MezzanineInfoRequest(videoId: videoId, authTimeout: authTimeout),
            as: MediaContract.MezzanineInfoAnswer.self
        ).mezzanine
    }

    /// The size and ETag of a video's stored source file: GetMezzanineInfo's `ETag` (Ferry's), or else a read of the
    /// first byte at its signed URL. Tells whether the file an earlier run sent is the one stored, when that run's
    /// last answer was lost.
    public func storedSource(videoId: String) async throws(FerryError) -> (size: Int64, etag: String) {
        let mezzanine = try await getMezzanineInfo(videoId: videoId, authTimeout: 300)
        if let etag = mezzanine.eTag { return (mezzanine.size, etag) }
        return (mezzanine.size, try await storedETag(at: mezzanine.fileURL, size: mezzanine.size, of: "video \(videoId)"))
    }

    /// The size and ETag of an image's stored file, and its URL as CreateUploadImage gives it: GetImageInfo's `ETag`
    /// (Ferry's), or else a read of the first byte at its signed URL, as ``storedSource(videoId:)`` for a video.
    public func storedImage(imageId: String) async throws(FerryError) -> (size: Int64, etag: String, url: String) {
        let info = try await getImageInfo(imageId: imageId, authTimeout: 300)
        guard let size = info.size, let url = info.unsignedURL else {
            throw FerryError(.server, "Image \(imageId) has no stored file.")
        }
        if let etag = info.eTag { return (size, etag, url) }
        let etag = try await storedETag(at: info.url, size: size, of: "image \(imageId)")
        return (size, etag, url)
    }

    /// The ETag a stored file's signed URL answers with, read with its first byte (nothing when it is empty).
    private func storedETag(at url: String, size: Int64, of what: String) async throws(FerryError) -> String {
        let request = TransportRequest(
            method: "GET", url: url, headers: size > 0 ? [("Range", "bytes=0-0")] : [], timeout: .seconds(60))
        let response: TransportResponse
        do {
            // The byte asked for is not kept (nor the whole file, from a server that would send it).
            response = try await configuration.transport.send(request, bodyProgress: { _ in }, responseSink: { _ in })
        } catch let error as TransportError {
            throw FerryError(error.isTimeout ? .timeout : .network, error.message, underlying: error)
        } catch {
            throw FerryError(.cancelled, "Reading the stored file of \(what) was cancelled.")
        }
        guard (200..<300).contains(response.status), let etag = response.header("ETag") else {
            throw FerryError(
                .server, "Reading the stored file of \(what) answered HTTP \(response.status).", httpStatus: response.status)
        }
        return ObjectStorageClient.unquote(etag)
    }

    /// A page of videos, newest first, and how many match.
    public func listVideos(status: String? = nil, pageNo: Int = 1, pageSize: Int = 20) async throws(FerryError) -> (videos: [VideoInfo], total: Int) {
        let request = MediaContract.ListVideosRequest(status: status, pageNo: pageNo, pageSize: pageSize)
        let answer = try await call("ListVideos", request, as: MediaContract.VideoListAnswer.self)
        return (answer.videoList, answer.total)
    }

    /// Deletes videos (at most 20) and their files.
    public func deleteVideos(_ videoIds: [String]) async throws(FerryError) {
        _ = try await call(
            "DeleteVideo", MediaContract.DeleteVideoRequest(videoIds: videoIds), as: MediaContract.DeleteVideoAnswer.self)
    }

    /// Deletes images (at most 20) and their files.
    public func deleteImages(_ imageIds: [String]) async throws(FerryError) {
        let request = MediaContract.DeleteImageRequest(imageIds: imageIds)
        _ = try await call("DeleteImage", request, as: MediaContract.DeleteImageAnswer.self)
    }

    /// Deletes a video whose upload was given up (cancelled, started over, or its file changed), when it is still
    /// `Uploading`: a video that received its file is kept. Returns whether it was deleted; a video that cannot be
    /// read or deleted is left to the service, which expires it.
    @discardableResult
    public func deleteAbandonedVideo(_ videoId: String) async -> Bool {
        guard (try? await getVideoInfo(videoId: videoId).status) == "Uploading" else { return false }
        return (try? await deleteVideos([videoId])) != nil
    }

    /// An image and a signed URL of its file, valid for `authTimeout` seconds (1–604800; an hour when nil).
    public func getImageInfo(imageId: String, authTimeout: Int? = nil) async throws(FerryError) -> MediaContract.ImageInfo {
        try await call(
            "GetImageInfo", MediaContract.ImageInfoRequest(imageId: imageId, authTimeout: authTimeout),
            as: MediaContract.ImageInfoAnswer.self
        ).imageInfo
    }

    /// Deletes an image whose upload was given up, when it is still `Uploading`, as ``deleteAbandonedVideo(_:)`` does
    /// a video. Returns whether it was deleted.
    @discardableResult
    public func deleteAbandonedImage(_ imageId: String) async -> Bool {
        guard (try? await getImageInfo(imageId: imageId).status) == "Uploading" else { return false }
        return (try? await deleteImages([imageId])) != nil
    }

    // MARK: Subtitles

    /// Adds a caption or subtitle track to a video: `content` is WebVTT or SRT text (SRT is converted to WebVTT),
    /// `language` a BCP 47 tag. Players of the video's HLS stream list the track; `isDefault` makes it the one they
    /// show when none is chosen.
    ///
    /// ```swift
    /// let track = try await media.addSubtitle(videoId: id, language: "en", name: "English", content: srtText)
    /// ```
    public func addSubtitle(
        videoId: String, language: String, name: String? = nil, isDefault: Bool = false, content: String
    ) async throws(FerryError) -> MediaContract.Subtitle {
        try await call(
            "AddSubtitle",
            MediaContract.AddSubtitleRequest(
                videoId: videoId, language: language, name: name, isDefault: isDefault, content: content),
            as: MediaContract.SubtitleAnswer.self
        ).subtitle
    }

    /// A video's subtitle tracks, in the order they were added.
    public func listSubtitles(videoId: String) async throws(FerryError) -> [MediaContract.Subtitle] {
        try await call(
            "ListSubtitles", MediaContract.VideoIdRequest(videoId: videoId), as: MediaContract.SubtitleListAnswer.self
        ).subtitles
    }

    /// Removes one subtitle track of a video.
    public func deleteSubtitle(videoId: String, subtitleId: String) async throws(FerryError) {
        _ = try await call(
            "DeleteSubtitle", MediaContract.DeleteSubtitleRequest(videoId: videoId, subtitleId: subtitleId),
            as: MediaContract.EmptyAnswer.self)
    }

    // MARK: STS and access keys

    /// Temporary credentials for `durationSeconds` (900–43200), narrowed by `policy` when given.
    public func assumeRole(durationSeconds: Int = 3600, policy: AccessPolicy? = nil) async throws(FerryError) -> Credentials {
        let issued = try await call(
            "AssumeRole", MediaContract.AssumeRoleRequest(durationSeconds: durationSeconds, policy: policy),
            as: MediaContract.AssumeRoleAnswer.self
        ).credentials
        return Credentials(
            accessKeyId: issued.accessKeyId, secretAccessKey: issued.accessKeySecret, sessionToken: issued.securityToken,
            expiration: issued.expirationDate)
    }

    /// Creates a long-term access key with a policy (root key only), limited by `quota` when given (its temporary
    /// credentials share the limits).
    public func createAccessKey(policy: AccessPolicy, description: String = "", quota: AccessKeyQuota? = nil)
        async throws(FerryError) -> Credentials
    {
        let key = try await call(
            "CreateAccessKey", MediaContract.CreateAccessKeyRequest(policy: policy, description: description, quota: quota),
            as: MediaContract.CreateAccessKeyAnswer.self
        ).accessKey
        return Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.accessKeySecret)
    }

    /// Access keys as (id, status, description) (root key only).
    public func listAccessKeys() async throws(FerryError) -> [(accessKeyId: String, status: String, description: String)] {
        try await accessKeys().map { ($0.accessKeyId, $0.status, $0.description) }
    }

    /// Access keys with their creation time and policy (root key only).
    public func accessKeys() async throws(FerryError) -> [MediaContract.AccessKey] {
        try await call("ListAccessKeys", MediaContract.ListAccessKeysRequest(), as: MediaContract.ListAccessKeysAnswer.self)
            .accessKeys
    }

    /// The service's status (root key only): its nodes and their heartbeats, the media job queue, the webhook
    /// backlog, whether the catalog and the object store answer, and the space left on the answering node's disk.
    public func serviceStatus() async throws(FerryError) -> MediaContract.ServiceStatusAnswer {
        try await call("GetServiceStatus", MediaContract.ServiceStatusRequest(), as: MediaContract.ServiceStatusAnswer.self)
    }

    /// Sets an access key's quota (root key only); ``AccessKeyQuota/unlimited`` removes every limit. Its temporary
    /// credentials follow at once. Returns the key as it is now.
    @discardableResult
    public func updateAccessKey(_ accessKeyId: String, quota: AccessKeyQuota) async throws(FerryError)
        -> MediaContract.AccessKey
    {
        try await call(
            "UpdateAccessKey", MediaContract.UpdateAccessKeyRequest(accessKeyId: accessKeyId, quota: quota),
            as: MediaContract.AccessKeyAnswer.self
        ).accessKey
    }

    /// What a long-term key holds against its quota — stored bytes, videos, multipart uploads in progress — with the
    /// quota. Without `accessKeyId`, the caller's own key (a temporary credential's parent); the root key may name any.
    ///
    /// ```swift
    /// let usage = try await media.usage()
    /// print(usage.usage.storageBytes, "of", usage.quota?.storageBytes ?? .max)
    /// ```
    public func usage(accessKeyId: String? = nil) async throws(FerryError) -> MediaContract.UsageAnswer {
        try await call("GetUsage", MediaContract.GetUsageRequest(accessKeyId: accessKeyId), as: MediaContract.UsageAnswer.self)
    }

    /// Disables an access key (root key only); its temporary credentials stop working too.
    public func disableAccessKey(_ accessKeyId: String) async throws(FerryError) {
        let request = MediaContract.AccessKeyIdRequest(accessKeyId: accessKeyId)
        let body = try FerryError.catching(.invalidArgument, "Encoding the DisableAccessKey request") {
            try MediaContract.encode(request)
        }
        _ = try await callJSON("DisableAccessKey", body: body)
    }

    /// Creates a playback signing key: the answer's `privateKey` (PEM) is shown this once; keep it on the app server,
    /// which signs playback tokens with it (see <doc:PlayingVideos>).
    ///
    /// - Parameter algorithm: `ES256` (the default) or `RS256`.
    public func createSigningKey(algorithm: String? = nil) async throws(FerryError) -> MediaContract.CreateSigningKeyAnswer {
        try await call(
            "CreateSigningKey", MediaContract.CreateSigningKeyRequest(algorithm: algorithm),
            as: MediaContract.CreateSigningKeyAnswer.self)
    }

    /// The caller's signing keys (every key for the root key), public halves only.
    public func signingKeys() async throws(FerryError) -> [MediaContract.SigningKey] {
        try await call("ListSigningKeys", MediaContract.ListSigningKeysRequest(), as: MediaContract.ListSigningKeysAnswer.self)
            .signingKeys
    }

    /// Deletes a signing key: tokens it signed are refused from now on.
    public func deleteSigningKey(_ keyId: String) async throws(FerryError) {
        _ = try await call(
            "DeleteSigningKey", MediaContract.SigningKeyIdRequest(keyId: keyId), as: MediaContract.EmptyAnswer.self)
    }

    /// Changes which of a video's progressive files are offered for download (listed in GetPlayInfo, served at their
    /// playback addresses); the HLS and DASH streams are not affected.
    public func setDownloads(_ policy: DownloadPolicy, videoId: String) async throws(FerryError) {
        _ = try await call(
            "UpdateVideoInfo", MediaContract.UpdateVideoInfoRequest(videoId: videoId, downloads: policy),
            as: MediaContract.EmptyAnswer.self)
    }

    /// Changes a video's playback policy.
    public func setPlaybackPolicy(_ policy: PlaybackPolicy, videoId: String) async throws(FerryError) {
        _ = try await call(
            "UpdateVideoInfo", MediaContract.UpdateVideoInfoRequest(videoId: videoId, playbackPolicy: policy),
            as: MediaContract.EmptyAnswer.self)
    }
}

extension UploadAuth {
    /// The engine's credentials for this upload credential.
    public var ferryCredentials: Credentials {
        Credentials(accessKeyId: accessKeyId, secretAccessKey: accessKeySecret, sessionToken: securityToken, expiration: expirationDate)
    }
}
