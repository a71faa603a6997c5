import Crypto
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers

/// The media API: upload credentials, STS, and the video and image catalog, as JSON over HTTP.
///
/// Every operation is `POST /_ferry/v1/<Action>` with a JSON body, signed with AWS Signature Version 4 for the
/// service `ferry` by a long-term access key or a temporary credential whose policy allows `media:<Action>`.
/// Bytes never pass through here: clients upload straight to the object API with the credential it issues.
public struct MediaAPI: Sendable {
    /// Path prefix of the media API.
    public static let pathPrefix = "/_ferry/v1/"
    /// The signing service name.
    public static let service = "ferry"
    /// Largest request body.
    static let maxBody = 1024 * 1024

    let catalog: any MediaCatalog
    let store: any ObjectStore
    let credentials: CredentialStore
    let authenticator: RequestAuthenticator
    let webhooks: WebhookOutbox
    let configuration: FerryServerConfiguration
    /// Media jobs running in this process (a deletion stops them).
    let running: RunningJobs
    /// Why videos are not processed here, when they are not (no ffmpeg, or no workers); nil when they are.
    let processingUnavailable: String?

    var bucket: String { configuration.mediaBucket }
    var templates: TranscodeTemplates { configuration.mediaProcessing.templates }

    /// Answers a media API request; never throws.
    func respond(to request: Request, logger: Logger) async -> Response {
        await Self.respondJSON(to: request, prefix: Self.pathPrefix, title: "Media API", name: "media", logger: logger) {
            action, data, request, logger in
            var headers: [(name: String, value: String)] = [("host", request.head.authority ?? "")]
            for field in request.headers { headers.append((field.name.canonicalName, field.value)) }
            let principal: Principal
            do {
                principal = try await authenticator.authenticate(
                    .init(
                        method: "POST", rawPath: request.uri.path, query: SigV4.parseQueryString(request.uri.query ?? ""),
                        headers: headers, service: Self.service, payloadHash: SigV4.hexSHA256(data))
                ).principal
            } catch let error as S3Error {
                throw MediaError(error.code.rawValue, error.message, status: error.code.httpStatus)
            }
            guard principal.allows(action: "media:" + action) else { throw MediaError.forbidden }
            logger.debug("media request", metadata: ["ferry.action": .string(action)])
            return try await perform(action, data, principal: principal, host: request.head.authority ?? "localhost")
        }
    }

    /// The JSON envelope the media and publish APIs share: POST only, a body of at most 1 MiB, `RequestId` in every
    /// answer, errors as `{code, message, requestId}` with their status, anything unexpected as a 500 `InternalError`.
    ///
    /// - Parameters:
    ///   - prefix: the path prefix; the rest of the path is the action.
    ///   - title: the API's name in messages (`Media API`).
    ///   - name: the API's name in log lines (`media`).
    ///   - methods: the HTTP methods it answers (POST unless named).
    ///   - perform: answers `(action, body, request, logger)`; the logger carries the request id (`ferry.request-id`)
    ///     and the id the client gave the call (`ferry.client-request-id`), when it sent a plausible one.
    static func respondJSON(
        to request: Request, prefix: String, title: String, name: String, methods: Set<HTTPRequest.Method> = [.post],
        logger: Logger,
        _ perform: (_ action: String, _ body: Data, _ request: Request, _ logger: Logger) async throws -> [String: Any]
    ) async -> Response {
        let requestId = ObjectAPI.newRequestId()
        var logger = logger
        logger[metadataKey: "ferry.request-id"] = .string(requestId)
        if let clientRequestId = request.headers.clientRequestId {
            logger[metadataKey: "ferry.client-request-id"] = .string(clientRequestId)
        }
        var request = request
        do {
            guard methods.contains(request.method) else {
                throw MediaError(
                    "MethodNotAllowed",
                    methods == [.post]
                        ? "\(title) operations are POST requests."
                        : "\(title) answers \(methods.map(\.rawValue).sorted().joined(separator: ", ")) requests.",
                    status: 405)
            }
            let action = String(request.uri.path.dropFirst(prefix.count))
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: Self.maxBody)
            } catch {
                throw MediaError("RequestTooLarge", "The request body is larger than 1 MiB.", status: 413)
            }
            var result = try await perform(action, Data(buffer: body), request, logger)
            result["RequestId"] = requestId
            return json(result, status: .ok, requestId: requestId)
        } catch let error as MediaError {
            return json(
                MediaContract.ErrorAnswer(code: error.code, message: error.message, requestId: requestId),
                status: .init(code: error.status), requestId: requestId)
        } catch {
            logger.error(
                "\(name) internal error", metadata: ["error": .string("\(error)")])
            return json(
                MediaContract.ErrorAnswer(
                    code: "InternalError", message: "The service failed to answer; try again.", requestId: requestId),
                status: .internalServerError, requestId: requestId)
        }
    }

    /// A refusal as its JSON answer.
    static func json(_ refusal: MediaContract.ErrorAnswer, status: HTTPResponse.Status, requestId: String) -> Response {
        json((try? object(refusal)) ?? [:], status: status, requestId: requestId)
    }

    static func json(_ object: [String: Any], status: HTTPResponse.Status, requestId: String) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json", .amzRequestId: requestId],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data.isEmpty ? Data("{}".utf8) : data)
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let name = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw MediaError.invalid(name.isEmpty ? "The body" : name, "has the wrong type.")
        } catch {
            throw MediaError("MalformedJSON", "The request body is not a valid JSON object.")
        }
    }

    func perform(_ action: String, _ data: Data, principal: Principal, host: String) async throws -> [String: Any] {
        switch action {
        case "CreateUploadVideo": return try await createUploadVideo(decode(MediaContract.CreateUploadVideoRequest.self, data), principal: principal, host: host)
        case "RefreshUploadVideo": return try await refreshUploadVideo(decode(MediaContract.VideoIdRequest.self, data), principal: principal, host: host)
        case "CreateUploadImage": return try await createUploadImage(decode(MediaContract.CreateUploadImageRequest.self, data), principal: principal, host: host)
        case "RefreshUploadImage": return try await refreshUploadImage(decode(MediaContract.ImageIdRequest.self, data), principal: principal, host: host)
        case "GetVideoInfo": return try await getVideoInfo(decode(MediaContract.VideoIdRequest.self, data), principal: principal, host: host)
        case "GetPlayInfo": return try await getPlayInfo(decode(MediaContract.PlayInfoRequest.self, data), principal: principal, host: host)
        case "GetMezzanineInfo": return try await getMezzanineInfo(decode(MediaContract.MezzanineInfoRequest.self, data), principal: principal, host: host)
        case "ListVideos": return try await listVideos(decode(MediaContract.ListVideosRequest.self, data), principal: principal, host: host)
        case "UpdateVideoInfo": return try await updateVideoInfo(decode(MediaContract.UpdateVideoInfoRequest.self, data), principal: principal)
        case "DeleteVideo": return try await deleteVideo(decode(MediaContract.DeleteVideoRequest.self, data), principal: principal)
        case "GetImageInfo": return try await getImageInfo(decode(MediaContract.ImageInfoRequest.self, data), principal: principal, host: host)
        case "AssumeRole": return try await assumeRole(decode(MediaContract.AssumeRoleRequest.self, data), principal: principal)
        case "CreateAccessKey": return try await createAccessKey(decode(MediaContract.CreateAccessKeyRequest.self, data), principal: principal)
        case "ListAccessKeys": return try await listAccessKeys(principal: principal)
        case "ListWebhookEvents": return try await listWebhookEvents(decode(MediaContract.ListWebhookEventsRequest.self, data), principal: principal)
        case "RetryWebhookEvent": return try await retryWebhookEvent(decode(MediaContract.WebhookEventIdRequest.self, data), principal: principal)
        case "DisableAccessKey": return try await disableAccessKey(decode(MediaContract.AccessKeyIdRequest.self, data), principal: principal)
        default: throw MediaError("InvalidAction", "\(action.prefix(64)) is not a media API operation.", status: 404)
        }
    }

    // MARK: Validation

    static func checkText(_ value: String?, _ name: String, max: Int) throws {
        if let value, value.utf8.count > max { throw MediaError.invalid(name, "is longer than \(max) bytes.") }
    }

    static func checkTags(_ tags: String?) throws {
        guard let tags else { return }
        let list = tags.split(separator: ",")
        if list.count > 16 || list.contains(where: { $0.utf8.count > 32 }) {
            throw MediaError.invalid("Tags", "must be at most 16 comma-separated tags of at most 32 bytes.")
        }
    }

    /// Largest `PageNo` of ListVideos (a page beyond the last is empty, not an error).
    static let maxPageNo = 1_000_000

    /// A play or download URL's lifetime: `AuthTimeout` seconds (default 3600), 1 to 604800 as presigned URLs allow.
    static func authTimeout(_ value: Int?) throws -> Int {
        let timeout = value ?? 3600
        guard (1...604_800).contains(timeout) else {
            throw MediaError.invalid("AuthTimeout", "must be between 1 and 604800 seconds.")
        }
        return timeout
    }

    static func newId() -> String {
        (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    // MARK: Credentials for one object

    /// A credential that may write only `key` (and run its multipart upload), valid for the configured time.
    func uploadAuth(for key: String, principal: Principal) -> UploadAuth {
        let (issued, expiration) = uploadCredentials(for: key, principal: principal)
        return UploadAuth(
            accessKeyId: issued.accessKeyId, accessKeySecret: issued.secretAccessKey,
            securityToken: issued.sessionToken ?? "", expiration: expiration, region: configuration.region)
    }

    /// The temporary credential behind ``uploadAuth(for:principal:)``, and when it expires.
    func uploadCredentials(for key: String, principal: Principal) -> (SigV4Credentials, Date) {
        let scope = AccessPolicy(statements: [
            .init(
                actions: ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:GetObject"],
                bucket: bucket, key: key)
        ])
        let expiration = credentials.now().addingTimeInterval(configuration.uploadAuthLifetime)
        // The service decides what an upload credential may do: this one object, nothing else. It ends early if the
        // key of whoever asked for it is disabled.
        let issued = credentials.tokens.issue(
            parent: principal.parentAccessKeyId, policies: [scope], expiration: expiration)
        return (issued, expiration)
    }

    /// The answer to CreateUpload*/RefreshUpload*: where to upload `key` and with what.
    func ticket(videoId: String? = nil, imageId: String? = nil, key: String, principal: Principal, host: String) throws
        -> [String: Any]
    {
        try Self.object(
            MediaContract.UploadTicketAnswer(
                videoId: videoId, imageId: imageId,
                imageURL: imageId.map { _ in endpoint(host: host) + "/" + bucket + "/" + key },
                uploadAddress: address(for: key, host: host).encoded(), uploadAuth: uploadAuth(for: key, principal: principal).encoded()))
    }

    func address(for key: String, host: String) -> UploadAddress {
        UploadAddress(endpoint: uploadEndpoint(host: host), bucket: bucket, fileName: key)
    }

    /// Where clients upload: the public endpoint, unless uploads follow each request's Host.
    func uploadEndpoint(host: String) -> String {
        configuration.uploadAddressesFollowRequests ? "http://\(host)" : endpoint(host: host)
    }

    func endpoint(host: String) -> String {
        configuration.publicEndpoint ?? "http://\(host)"
    }

    /// A presigned GET URL for an object, signed with the root key.
    func signedURL(key: String, host: String, expires: Int) throws -> String {
        try presignedURL(
            method: "GET", key: key, base: endpoint(host: host), host: host, credentials: credentials.root, expires: expires)
    }

    /// A presigned URL of `method` on the media bucket's `key` at `base` (with `query` signed too).
    func presignedURL(
        method: String, key: String, query: [(name: String, value: String)] = [], base: String, host: String,
        credentials: SigV4Credentials, expires: Int
    ) throws -> String {
        let url = URL(string: base)!
        let signedHost = url.port.map { "\(url.host ?? host):\($0)" } ?? (url.host ?? host)
        let path = "/" + SigV4.uriEncode(bucket, encodeSlash: true) + "/" + SigV4.uriEncode(key, encodeSlash: false)
        let signer = SigV4Signer(credentials: credentials, region: configuration.region)
        let items = try signer.presign(method: method, path: path, query: query, host: signedHost, expires: expires, date: self.credentials.now())
        return base + path + "?" + items.map {
            SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
        }.joined(separator: "&")
    }

    func ensureBucket() async throws {
        do { try await store.createBucket(bucket) } catch let error as S3Error where error.code == .bucketAlreadyOwnedByYou {}
    }

    // MARK: Videos

    func createUploadVideo(_ input: MediaContract.CreateUploadVideoRequest, principal: Principal, host: String) async throws -> [String: Any] {
        guard let title = input.title, !title.isEmpty else { throw MediaError.missing("Title") }
        guard let fileName = input.fileName, !fileName.isEmpty else { throw MediaError.missing("FileName") }
        try Self.checkText(title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkText(input.userData, "UserData", max: 1024)
        try Self.checkText(input.coverURL, "CoverURL", max: 1024)
        try Self.checkText(fileName, "FileName", max: 255)
        try Self.checkTags(input.tags)
        let ext = (fileName as NSString).pathExtension.lowercased()
        guard !ext.isEmpty, ext.count <= 8, ext.allSatisfy({ $0.isLetter || $0.isNumber }) else {
            throw MediaError("InvalidFileName.Extension", "FileName must end in an extension such as .mp4.")
        }
        if let size = input.fileSize, size < 0 || size > UploadLimits.maxObjectSize {
            throw MediaError.invalid("FileSize", "must be between 0 and 5 TiB.")
        }
        let group = try templateGroup(input.templateGroupId ?? input.transcode)
        if let token = input.clientToken {
            guard (1...64).contains(token.utf8.count), token.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw MediaError.invalid("ClientToken", "must be 1 to 64 printable ASCII characters.")
            }
            // Asked again with the same token (a client that lost the answer): the same video, fresh credentials.
            if let video = try await catalog.uploadingVideo(owner: principal.parentAccessKeyId, clientToken: token) {
                return try ticket(videoId: video.videoId, key: video.key, principal: principal, host: host)
            }
        }
        try await ensureBucket()
        let id = Self.newId()
        let now = Date()
        // With a ClientToken, a request racing this one (the same client retrying) gets the same video.
        let video = try await catalog.createVideo(
            VideoRecord(
                videoId: id, title: title, fileName: fileName, description: input.description, coverURL: input.coverURL,
                cateId: input.cateId, tags: input.tags, transcode: group, userData: input.userData,
                status: VideoStatus.uploading, size: nil, declaredSize: input.fileSize, bucket: bucket,
                key: "video/\(id)/source.\(ext)", owner: principal.parentAccessKeyId, createdAt: now, updatedAt: now,
                clientToken: input.clientToken))
        return try ticket(videoId: video.videoId, key: video.key, principal: principal, host: host)
    }

    /// The template group a video asks for, checked now so that an unknown name is a 400 at creation rather than a
    /// failed job later: nil for the default group, `NoTranscode`, or a configured group's name.
    func templateGroup(_ name: String?) throws -> String? {
        guard let name, !name.isEmpty else { return nil }
        do {
            _ = try templates.group(named: name)
        } catch {
            throw MediaError(
                "InvalidTemplateGroup.NotFound",
                "No transcoding template group is named \(name.prefix(64)); use NoTranscode or one of: "
                    + templates.groups.map(\.name).joined(separator: ", ") + ".")
        }
        return name
    }

    /// A video that is not deleted and that `principal` may act on: the root key acts on every video, any other key
    /// only on the videos created with it (or with credentials issued under it).
    func liveVideo(_ id: String?, principal: Principal) async throws -> VideoRecord {
        guard let id, !id.isEmpty else { throw MediaError.missing("VideoId") }
        guard let video = try await catalog.video(id), video.status != VideoStatus.deleted else {
            throw MediaError.notFound("Video", id)
        }
        try Self.checkOwner(video.owner, principal: principal, what: "video")
        return video
    }

    static func checkOwner(_ owner: String?, principal: Principal, what: String) throws {
        guard principal.isRoot || owner == principal.parentAccessKeyId else {
            throw MediaError("Forbidden", "The \(what) belongs to another access key.", status: 403)
        }
    }

    func refreshUploadVideo(_ input: MediaContract.VideoIdRequest, principal: Principal, host: String) async throws -> [String: Any] {
        let video = try await liveVideo(input.videoId, principal: principal)
        // A stored video takes no more uploads: new write credentials would let its bytes be replaced.
        guard video.status == VideoStatus.uploading else {
            throw MediaError("InvalidVideo.Uploaded", "The video is stored already; it takes no more uploads.", status: 409)
        }
        return try ticket(videoId: video.videoId, key: video.key, principal: principal, host: host)
    }

    func getVideoInfo(_ input: MediaContract.VideoIdRequest, principal: Principal, host: String) async throws -> [String: Any] {
        let video = try await liveVideo(input.videoId, principal: principal)
        return try Self.object(MediaContract.VideoInfoAnswer(video: try await videoJSON(video, host: host, detailed: true)))
    }

    func listVideos(_ input: MediaContract.ListVideosRequest, principal: Principal, host: String) async throws -> [String: Any] {
        let page = input.pageNo ?? 1
        let size = input.pageSize ?? 20
        // Both are checked before the offset is computed, so no PageNo can overflow it.
        guard (1...Self.maxPageNo).contains(page) else {
            throw MediaError.invalid("PageNo", "must be between 1 and \(Self.maxPageNo).")
        }
        guard (1...100).contains(size) else { throw MediaError.invalid("PageSize", "must be between 1 and 100.") }
        try Self.checkText(input.title, "Title", max: 128)
        let (videos, total) = try await catalog.videos(
            status: input.status, cateId: input.cateId, tag: input.tag, title: input.title,
            owner: principal.isRoot ? nil : principal.parentAccessKeyId, offset: (page - 1) * size, limit: size)
        var list: [MediaContract.Video] = []
        for video in videos { list.append(try await videoJSON(video, host: host, detailed: false)) }
        return try Self.object(MediaContract.VideoListAnswer(videoList: list, total: total, pageNo: page, pageSize: size))
    }

    /// Changes a video's title, description, tags, category or cover; fields left out stay as they are, an empty
    /// Description, Tags or CoverURL clears it.
    func updateVideoInfo(_ input: MediaContract.UpdateVideoInfoRequest, principal: Principal) async throws -> [String: Any] {
        let video = try await liveVideo(input.videoId, principal: principal)
        if let title = input.title, title.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            throw MediaError.invalid("Title", "must not be empty.")
        }
        try Self.checkText(input.title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkText(input.coverURL, "CoverURL", max: 1024)
        try Self.checkTags(input.tags)
        if let cover = input.coverURL, !cover.isEmpty {
            guard let url = URL(string: cover), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
            else { throw MediaError.invalid("CoverURL", "must be an http or https URL.") }
        }
        if input.title == nil, input.description == nil, input.tags == nil, input.cateId == nil, input.coverURL == nil {
            throw MediaError("MissingParameter", "Name at least one of Title, Description, Tags, CateId, CoverURL.")
        }
        try await catalog.updateVideo(video.videoId) { video in
            if let title = input.title { video.title = title }
            if let description = input.description { video.description = description.isEmpty ? nil : description }
            if let tags = input.tags { video.tags = tags.isEmpty ? nil : tags }
            if let cateId = input.cateId { video.cateId = cateId }
            if let cover = input.coverURL { video.coverURL = cover.isEmpty ? nil : cover }
            video.updatedAt = Date()
            return .save()
        }
        return [:]
    }

    func deleteVideo(_ input: MediaContract.DeleteVideoRequest, principal: Principal) async throws -> [String: Any] {
        guard let ids = input.videoIds, !ids.isEmpty else { throw MediaError.missing("VideoIds") }
        let list = ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard list.count <= 20 else { throw MediaError.invalid("VideoIds", "may name at most 20 videos.") }
        var videos: [VideoRecord] = []
        for id in list { videos.append(try await liveVideo(id, principal: principal)) }
        var deleted: [String] = []
        for video in videos {
            // Deleted and its jobs cancelled in one change; a job running here stops at once (its ffmpeg killed),
            // one running on another node at its next heartbeat.
            try await catalog.updateVideo(video.videoId) { video in
                video.status = VideoStatus.deleted
                video.updatedAt = Date()
                return .save(cancelJobs: true)
            }
            running.cancel(videoId: video.videoId)
            try await removeFiles(of: video)
            try await webhooks.enqueue(.videoDeleted(videoId: video.videoId))
            deleted.append(video.videoId)
        }
        return try Self.object(MediaContract.DeleteVideoAnswer(deletedVideoIds: deleted))
    }

    // MARK: Images

    func createUploadImage(_ input: MediaContract.CreateUploadImageRequest, principal: Principal, host: String) async throws -> [String: Any] {
        let type = input.imageType ?? "default"
        guard ["default", "cover"].contains(type) else { throw MediaError.invalid("ImageType", "must be default or cover.") }
        let ext = (input.imageExt ?? "png").lowercased()
        guard ["png", "jpg", "jpeg", "gif", "webp", "heic"].contains(ext) else {
            throw MediaError.invalid("ImageExt", "must be one of png, jpg, jpeg, gif, webp, heic.")
        }
        try Self.checkText(input.title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkTags(input.tags)
        try await ensureBucket()
        let id = Self.newId()
        let key = "image/\(type)/\(id).\(ext)"
        try await catalog.saveImage(
            ImageRecord(
                imageId: id, imageType: type, title: input.title, tags: input.tags, cateId: input.cateId,
                description: input.description, status: ImageStatus.uploading, size: nil, bucket: bucket, key: key,
                createdAt: Date(), owner: principal.parentAccessKeyId))
        return try ticket(imageId: id, key: key, principal: principal, host: host)
    }

    /// A fresh credential for the same image file, while it is still being uploaded.
    func refreshUploadImage(_ input: MediaContract.ImageIdRequest, principal: Principal, host: String) async throws -> [String: Any] {
        guard let id = input.imageId, !id.isEmpty else { throw MediaError.missing("ImageId") }
        guard let image = try await catalog.image(id) else { throw MediaError.notFound("Image", id) }
        try Self.checkOwner(image.owner, principal: principal, what: "image")
        guard image.status == ImageStatus.uploading else {
            throw MediaError("InvalidImage.Uploaded", "The image is stored already; it takes no more uploads.", status: 409)
        }
        return try ticket(imageId: image.imageId, key: image.key, principal: principal, host: host)
    }

    func getImageInfo(_ input: MediaContract.ImageInfoRequest, principal: Principal, host: String) async throws -> [String: Any] {
        guard let id = input.imageId, !id.isEmpty else { throw MediaError.missing("ImageId") }
        guard let image = try await catalog.image(id) else { throw MediaError.notFound("Image", id) }
        try Self.checkOwner(image.owner, principal: principal, what: "image")
        var info: [String: Any] = [
            "ImageId": image.imageId, "ImageType": image.imageType, "Status": image.status,
            "CreationTime": image.createdAt.formatted(.iso8601),
            "URL": try signedURL(key: image.key, host: host, expires: try Self.authTimeout(input.authTimeout)),
        ]
        if let size = image.size { info["Size"] = size }
        if let title = image.title { info["Title"] = title }
        return ["ImageInfo": info]
    }

    // MARK: Unfinished uploads

    /// Videos whose upload did not complete within `uploadingVideoMaxAge` become `UploadFail`: what had arrived of
    /// their file (object and unfinished multipart uploads) is removed and a `VideoUploadExpired` event is sent.
    /// Returns how many.
    @discardableResult
    func expireUnfinishedUploads(now: Date = Date()) async throws -> Int {
        var count = 0
        for video in try await catalog.uploadingVideos(
            createdBefore: now.addingTimeInterval(-configuration.uploadingVideoMaxAge), limit: 1000)
        {
            // Stored after all (the server stopped between storing it and recording it): it advances instead.
            if let object = try? await store.object(bucket: video.bucket, key: video.key) {
                await objectStored(object)
                continue
            }
            let expired = try await catalog.updateVideo(video.videoId) { video in
                guard video.status == VideoStatus.uploading else { return .keep }
                video.status = VideoStatus.uploadFailed
                video.updatedAt = now
                return .save(cancelJobs: true)
            }
            guard expired != nil else { continue }
            try await removeFiles(of: video)
            try await webhooks.enqueue(.videoUploadExpired(videoId: video.videoId))
            count += 1
        }
        return count
    }

    /// Deletes a video's files (source, cover, renditions: everything under `video/<id>/`) and aborts the multipart
    /// uploads of its source.
    func removeFiles(of video: VideoRecord) async throws {
        try await store.deleteObject(bucket: video.bucket, key: video.key, condition: .none)
        try await WorkFiles.deleteObjects(in: store, bucket: video.bucket, prefix: "video/\(video.videoId)/")
        for upload in try await store.listMultipartUploads(
            bucket: video.bucket, prefix: video.key, keyMarker: "", uploadIdMarker: "", maxUploads: 1000
        ).uploads where upload.key == video.key {
            try? await store.abortMultipartUpload(upload)
        }
    }

    // MARK: Storage events

    /// Called when the object service has stored an object: advances the video or image it belongs to.
    func objectStored(_ object: ObjectInfo) async {
        guard object.bucket == bucket else { return }
        do {
            if let video = try await catalog.video(bucket: object.bucket, key: object.key) {
                try await videoStored(video.videoId, object: object)
            } else if var image = try await catalog.image(bucket: object.bucket, key: object.key) {
                let first = image.status == ImageStatus.uploading
                image.status = ImageStatus.uploaded
                image.size = object.size
                try await catalog.saveImage(image)
                if first {
                    try await webhooks.enqueue(.imageUploadComplete(imageId: image.imageId, size: object.size))
                }
            }
        } catch {
            configuration.logger.warning("media status update failed", metadata: ["error": .string("\(error)")])
        }
    }

    /// A video's source is in storage: the first time, `Uploading → UploadSucc` and its probe job, in one change,
    /// then `FileUploadComplete`. Later writes of the source only update its size (the catalog describes the bytes
    /// stored, whoever wrote them).
    func videoStored(_ videoId: String, object: ObjectInfo) async throws {
        let maxAttempts = configuration.mediaProcessing.maxAttempts
        let arrived = NIOLockedValueBox(false)
        try await catalog.updateVideo(videoId) { video in
            guard video.status != VideoStatus.deleted, video.key == object.key else { return .keep }
            video.size = object.size
            video.updatedAt = Date()
            guard video.status == VideoStatus.uploading else { return .save() }
            video.status = VideoStatus.uploadSucc
            arrived.withLockedValue { $0 = true }
            return .save(enqueue: [MediaJob(videoId: video.videoId, kind: .probe, maxAttempts: maxAttempts)])
        }
        if arrived.withLockedValue({ $0 }) {
            try await webhooks.enqueue(.fileUploadComplete(videoId: videoId, size: object.size))
        }
    }

    // MARK: STS and access keys

    func assumeRole(_ input: MediaContract.AssumeRoleRequest, principal: Principal) async throws -> [String: Any] {
        guard principal.expiration == nil else {
            throw MediaError("Forbidden", "Temporary credentials cannot assume a role; use a long-term key.", status: 403)
        }
        let duration = input.durationSeconds ?? 3600
        guard (900...43_200).contains(duration) else {
            throw MediaError.invalid("DurationSeconds", "must be between 900 and 43200.")
        }
        let expiration = credentials.now().addingTimeInterval(TimeInterval(duration))
        let policies = principal.policies + (input.policy.map { [$0] } ?? [])
        let issued = credentials.tokens.issue(parent: principal.parentAccessKeyId, policies: policies, expiration: expiration)
        return try Self.object(
            MediaContract.AssumeRoleAnswer(
                credentials: .init(
                    accessKeyId: issued.accessKeyId, accessKeySecret: issued.secretAccessKey,
                    securityToken: issued.sessionToken ?? "", expiration: expiration.formatted(.iso8601))))
    }

    func requireRoot(_ principal: Principal) throws {
        guard principal.isRoot else { throw MediaError("Forbidden", "Only the root key manages access keys.", status: 403) }
    }

    func createAccessKey(_ input: MediaContract.CreateAccessKeyRequest, principal: Principal) async throws -> [String: Any] {
        try requireRoot(principal)
        guard let policy = input.policy else { throw MediaError.missing("Policy") }
        try Self.checkText(input.description, "Description", max: 256)
        let key = StoredAccessKey(
            accessKeyId: "FKIA" + SessionTokenCodec.randomAlphanumeric(16),
            secretAccessKey: SessionTokenCodec.base64url(Data((0..<30).map { _ in UInt8.random(in: 0...255) })),
            policy: policy, status: .active, description: input.description ?? "", createdAt: Date())
        try await catalog.insertAccessKey(key)
        return try Self.object(
            MediaContract.CreateAccessKeyAnswer(
                accessKey: .init(accessKeyId: key.accessKeyId, accessKeySecret: key.secretAccessKey, status: "active")))
    }

    func listAccessKeys(principal: Principal) async throws -> [String: Any] {
        try requireRoot(principal)
        let keys = try await catalog.accessKeys().map { key in
            MediaContract.AccessKey(
                accessKeyId: key.accessKeyId, status: key.status.rawValue, description: key.description,
                creationTime: key.createdAt.formatted(.iso8601), policy: key.policy)
        }
        return try Self.object(MediaContract.ListAccessKeysAnswer(accessKeys: keys))
    }

    /// The newest webhook events (root only), newest first, with their delivery state.
    func listWebhookEvents(_ input: MediaContract.ListWebhookEventsRequest, principal: Principal) async throws -> [String: Any] {
        try requireRoot(principal)
        let limit = input.limit ?? 50
        guard (1...500).contains(limit) else { throw MediaError.invalid("Limit", "must be between 1 and 500.") }
        let events = try await webhooks.catalog.recentWebhookEvents(limit: limit).map { delivery -> [String: Any] in
            let event = delivery.event
            var object: [String: Any] = [
                "EventId": event.id, "EventType": event.type.rawValue, "CreationTime": event.createdAt.formatted(.iso8601),
                "Attempts": event.attempts,
                "State": event.deliveredAt != nil ? "Delivered" : event.failedAt != nil ? "Failed" : "Pending",
            ]
            if let id = event.payload.videoId { object["VideoId"] = id }
            if let date = event.deliveredAt { object["DeliveryTime"] = date.formatted(.iso8601) }
            if let date = event.failedAt { object["FailureTime"] = date.formatted(.iso8601) }
            if event.deliveredAt == nil, event.failedAt == nil { object["NextAttemptTime"] = delivery.nextAttemptAt.formatted(.iso8601) }
            if let error = delivery.lastError { object["LastError"] = error }
            return object
        }
        var answer: [String: Any] = ["Events": events]
        if let url = webhooks.configuration?.url { answer["WebhookURL"] = url.absoluteString }
        return answer
    }

    /// Delivers a failed webhook event again (root only), from a fresh count of attempts.
    func retryWebhookEvent(_ input: MediaContract.WebhookEventIdRequest, principal: Principal) async throws -> [String: Any] {
        try requireRoot(principal)
        guard let id = input.eventId, !id.isEmpty else { throw MediaError.missing("EventId") }
        guard try await webhooks.catalog.retryWebhookEvent(id, now: Date()) else {
            throw MediaError("InvalidEvent.NotFailed", "No failed webhook event has the id \(id.prefix(64)).", status: 404)
        }
        return ["EventId": id, "State": "Pending"]
    }

    func disableAccessKey(_ input: MediaContract.AccessKeyIdRequest, principal: Principal) async throws -> [String: Any] {
        try requireRoot(principal)
        guard let id = input.accessKeyId, !id.isEmpty else { throw MediaError.missing("AccessKeyId") }
        guard try await catalog.setAccessKeyStatus(id, .disabled) else { throw MediaError.notFound("AccessKey", id) }
        return ["AccessKeyId": id, "Status": "disabled"]
    }
}

/// S3's size limits, shared by the media API's checks.
enum UploadLimits {
    static let maxObjectSize: Int64 = 5 * 1024 * 1024 * 1024 * 1024
}
