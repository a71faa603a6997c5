import Crypto
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The media API: upload credentials, STS, and the video and image catalog, as JSON over HTTP.
///
/// Every operation is `POST /_ferry/v1/<Action>` with a JSON body, signed with AWS Signature Version 4 for the
/// service `ferry` by a long-term access key or a temporary credential whose policy allows `media:<Action>`.
/// Bytes never pass through here: clients upload straight to the object API with the credential it issues.
///
/// Operations decode their request into a `MediaContract` type and answer with one; the route adds `RequestId`.
public struct MediaAPI: Sendable {
    /// Path prefix of the media API.
    public static let pathPrefix = "/_ferry/v1/"
    /// The signing service name.
    public static let service = "ferry"

    /// The videos and images, and how they advance.
    let library: MediaLibrary
    let credentials: CredentialStore
    let configuration: FerryServerConfiguration
    /// The configured public endpoint, checked when the server opened.
    let publicEndpoint: PublicEndpoint?
    /// Why videos are not processed here, when they are not (no ffmpeg, or no workers); nil when they are.
    let processingUnavailable: String?
    /// The service's status as GetServiceStatus reports it.
    let status: ServiceStatusProbe

    var catalog: any MediaCatalog { library.catalog }
    var store: any ObjectStore { library.store }
    var webhooks: WebhookOutbox { library.webhooks }
    var bucket: String { library.bucket }
    var templates: TranscodeTemplates { configuration.mediaProcessing.templates }

    /// Who asks, and where they reached the service: what every operation needs beyond its request.
    struct Call: Sendable {
        var principal: Principal
        /// The endpoint the request reached (its validated `Host`).
        var endpoint: PublicEndpoint
    }

    // MARK: Route

    /// Answers `POST /_ferry/v1/<action>` for the caller the media API's authentication established.
    func respond(action: String, request: Request, context: FerryRequestContext) async throws -> Response {
        let principal = try context.requireCaller().requirePrincipal()
        guard principal.allows(action: "media:" + action) else { throw MediaError.forbidden }
        var request = request
        let body = try await request.collectSmallBody()
        context.logger.debug("media request", metadata: ["ferry.action": .string(action)])
        let call = Call(principal: principal, endpoint: try context.endpoint())
        MediaActionMiddleware.name(action, in: context)
        let answer = try await perform(action, Data(buffer: body), call)
        return try JSONAnswer.response(WithRequestId(answer: answer, requestId: context.requestId), requestId: context.requestId)
    }

    /// The refusal of an action no operation has.
    static func invalidAction(_ action: some StringProtocol) -> MediaError {
        MediaError("InvalidAction", "\(action.prefix(64)) is not a media API operation.", status: 404)
    }

    /// One operation: decodes its request from the body, runs, and gives its typed answer.
    typealias Operation = @Sendable (MediaAPI, Data, Call) async throws -> any Encodable & Sendable

    /// The media API's operations by name (`POST /_ferry/v1/<name>`; a policy allows one as `media:<name>`).
    static let operations: [String: Operation] = [
        "CreateUploadVideo": decoding({ $0.createUploadVideo }),
        "RefreshUploadVideo": decoding({ $0.refreshUploadVideo }),
        "CreateUploadImage": decoding({ $0.createUploadImage }),
        "RefreshUploadImage": decoding({ $0.refreshUploadImage }),
        "GetVideoInfo": decoding({ $0.getVideoInfo }),
        "GetPlayInfo": decoding({ $0.getPlayInfo }),
        "GetMezzanineInfo": decoding({ $0.getMezzanineInfo }),
        "ListVideos": decoding({ $0.listVideos }),
        "UpdateVideoInfo": decoding({ $0.updateVideoInfo }),
        "DeleteVideo": decoding({ $0.deleteVideo }),
        "DeleteImage": decoding({ $0.deleteImage }),
        "GetImageInfo": decoding({ $0.getImageInfo }),
        "AssumeRole": decoding({ $0.assumeRole }),
        "CreateAccessKey": decoding({ $0.createAccessKey }),
        "ListAccessKeys": decoding({ $0.listAccessKeys }),
        "ListWebhookEvents": decoding({ $0.listWebhookEvents }),
        "RetryWebhookEvent": decoding({ $0.retryWebhookEvent }),
        "DisableAccessKey": decoding({ $0.disableAccessKey }),
        "UpdateAccessKey": decoding({ $0.updateAccessKey }),
        "GetUsage": decoding({ $0.getUsage }),
        "CreateSigningKey": decoding({ $0.createSigningKey }),
        "ListSigningKeys": decoding({ $0.listSigningKeys }),
        "DeleteSigningKey": decoding({ $0.deleteSigningKey }),
        "AddSubtitle": decoding({ $0.addSubtitle }),
        "ListSubtitles": decoding({ $0.listSubtitles }),
        "DeleteSubtitle": decoding({ $0.deleteSubtitle }),
        "GetServiceStatus": decoding({ $0.getServiceStatus }),
    ]

    /// The operation that decodes its request as `method`'s input and runs `method`.
    private static func decoding<Input: Decodable & SendableMetatype, Answer: Encodable & Sendable>(
        _ method: @escaping @Sendable (MediaAPI) -> (Input, Call) async throws -> Answer
    ) -> Operation {
        { api, data, call in try await method(api)(JSONBody.decode(Input.self, from: data), call) }
    }

    /// Runs one operation: its request decoded from `data`, its typed answer.
    func perform(_ action: String, _ data: Data, _ call: Call) async throws -> any Encodable & Sendable {
        guard let operation = Self.operations[action] else { throw Self.invalidAction(action) }
        return try await operation(self, data, call)
    }

    // MARK: Validation

    /// A text field: at most `max` bytes, and no NUL (which neither catalog's text matching takes).
    static func checkText(_ value: String?, _ name: String, max: Int) throws {
        guard let value else { return }
        if value.utf8.count > max { throw MediaError.invalid(name, "is longer than \(max) bytes.") }
        if value.utf8.contains(0) { throw MediaError.invalid(name, "must not contain the NUL character.") }
    }

    /// Whether `text` can end an object key as its file's extension: 1 to 8 ASCII letters and digits (`mp4`).
    static func isFileExtension(_ text: String) -> Bool {
        (1...8).contains(text.utf8.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    /// A cover URL: empty, or an http or https URL of at most 1024 bytes (players and consoles put it in `<img>`).
    static func checkCoverURL(_ cover: String?) throws {
        try checkText(cover, "CoverURL", max: 1024)
        guard let cover, !cover.isEmpty else { return }
        guard let url = URL(string: cover), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
        else { throw MediaError.invalid("CoverURL", "must be an http or https URL.") }
    }

    static func checkTags(_ tags: String?) throws {
        guard let tags else { return }
        if tags.utf8.contains(0) { throw MediaError.invalid("Tags", "must not contain the NUL character.") }
        let list = tags.split(separator: ",")
        if list.count > 16 || list.contains(where: { $0.utf8.count > 32 }) {
            throw MediaError.invalid("Tags", "must be at most 16 comma-separated tags of at most 32 bytes.")
        }
    }

    /// A `ClientToken` (CreateUploadVideo, CreateUploadImage): 1 to 64 printable ASCII characters.
    static func checkClientToken(_ token: String?) throws {
        guard let token else { return }
        guard (1...64).contains(token.utf8.count), token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw MediaError.invalid("ClientToken", "must be 1 to 64 printable ASCII characters.")
        }
    }

    /// Largest session token AssumeRole issues (its policies packed in it), so that it fits in a request's headers
    /// behind any proxy.
    static let maxSessionTokenBytes = 8192

    /// A play or download URL's lifetime: `AuthTimeout` seconds (default 3600), 1 to 604800 as presigned URLs allow.
    static func authTimeout(_ value: Int?) throws -> Int {
        let timeout = value ?? 3600
        guard (1...604_800).contains(timeout) else {
            throw MediaError.invalid("AuthTimeout", "must be between 1 and 604800 seconds.")
        }
        return timeout
    }

    // MARK: Endpoints

    /// Where playback and download URLs point: the public endpoint, else the endpoint the request reached.
    func publicBase(_ call: Call) -> PublicEndpoint {
        publicEndpoint ?? call.endpoint
    }

    /// Where clients upload: the public endpoint, unless uploads follow each request's Host.
    func uploadBase(_ call: Call) -> PublicEndpoint {
        configuration.uploadAddressesFollowRequests ? call.endpoint : publicBase(call)
    }

    // MARK: Credentials for named objects

    /// A credential that may write only `keys` (and run their multipart uploads), valid for the configured time.
    func uploadAuth(for keys: [String], principal: Principal) -> UploadAuth {
        let (issued, expiration) = uploadCredentials(for: keys, principal: principal)
        return UploadAuth(
            accessKeyId: issued.accessKeyId, accessKeySecret: issued.secretAccessKey,
            securityToken: issued.sessionToken ?? "", expiration: expiration, region: configuration.region)
    }

    /// The temporary credential behind ``uploadAuth(for:principal:)``, and when it expires.
    func uploadCredentials(for keys: [String], principal: Principal) -> (SigV4Credentials, Date) {
        let actions = ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:GetObject"]
        let scope = AccessPolicy(statements: keys.map { .init(actions: actions, bucket: bucket, key: $0) })
        let expiration = uploadExpiration(principal)
        // The service decides what an upload credential may do: these objects, nothing else. It ends early if the
        // key of whoever asked for it is disabled.
        let issued = credentials.tokens.issue(
            parent: principal.parentAccessKeyId, policies: [scope], expiration: expiration)
        return (issued, expiration)
    }

    /// When upload credentials issued now to `principal` expire: after ``FerryServerConfiguration/uploadAuthLifetime``,
    /// or with the temporary credential that asked for them, when that ends first (a credential never outlives its
    /// caller's).
    func uploadExpiration(_ principal: Principal) -> Date {
        min(credentials.now().addingTimeInterval(configuration.uploadAuthLifetime), principal.expiration ?? .distantFuture)
    }

    /// The answer to CreateUpload*/RefreshUpload*: where to upload `key` and with what.
    func ticket(videoId: String? = nil, imageId: String? = nil, key: String, _ call: Call) -> MediaContract.UploadTicketAnswer {
        let auth = uploadAuth(for: [key], principal: call.principal)
        let grant = UploadGrant(
            bucket: bucket, key: key, owner: call.principal.parentAccessKeyId, mediaId: videoId ?? imageId,
            expiry: Int64(uploadExpiration(call.principal).timeIntervalSince1970))
        return MediaContract.UploadTicketAnswer(
            videoId: videoId, imageId: imageId, imageURL: imageId.map { _ in objectURL(key: key, call) },
            uploadAddress: UploadAddress(endpoint: uploadBase(call).base, bucket: bucket, fileName: key).encoded(),
            uploadAuth: auth.encoded(),
            resumableUploadURL: uploadBase(call).base + UploadGrant.pathPrefix + grant.token(codec: credentials.tokens))
    }

    /// The plain (unsigned) URL of an object of the media bucket.
    func objectURL(key: String, _ call: Call) -> String {
        publicBase(call).base + "/" + bucket + "/" + key
    }

    /// A presigned GET URL for an object of the media bucket, valid for `expires` seconds: signed with a temporary
    /// credential that may read only that object, under the key of whoever asked. So it ends early, as the play tokens
    /// handed out with it do, once that key is disabled.
    func signedURL(key: String, _ call: Call, expires: Int) throws -> String {
        let reader = credentials.tokens.issue(
            parent: call.principal.parentAccessKeyId,
            policy: AccessPolicy(statements: [.init(actions: ["s3:GetObject"], bucket: bucket, key: key)]),
            expiration: credentials.now().addingTimeInterval(TimeInterval(expires)))
        return try presignedURL(method: "GET", key: key, at: publicBase(call), credentials: reader, expires: expires)
    }

    /// A presigned URL of `method` on the media bucket's `key` at `endpoint` (with `query` signed too).
    func presignedURL(
        method: String, key: String, query: [(name: String, value: String)] = [], at endpoint: PublicEndpoint,
        credentials: SigV4Credentials, expires: Int
    ) throws -> String {
        let path = "/" + SigV4.uriEncode(bucket, encodeSlash: true) + "/" + SigV4.uriEncode(key, encodeSlash: false)
        let signer = SigV4Signer(credentials: credentials, region: configuration.region)
        let items = try signer.presign(
            method: method, path: path, query: query, host: endpoint.authority, expires: expires,
            date: self.credentials.now())
        return endpoint.base + path + "?"
            + items.map {
                SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
            }.joined(separator: "&")
    }

    // MARK: Videos

    func createUploadVideo(_ input: MediaContract.CreateUploadVideoRequest, _ call: Call) async throws
        -> MediaContract.UploadTicketAnswer
    {
        guard let title = input.title, !title.isEmpty else { throw MediaError.missing("Title") }
        // As UpdateVideoInfo refuses it: a title of spaces alone could not be kept through an edit.
        guard !title.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw MediaError.invalid("Title", "must not be empty.")
        }
        guard let fileName = input.fileName, !fileName.isEmpty else { throw MediaError.missing("FileName") }
        try Self.checkText(title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkText(input.userData, "UserData", max: 1024)
        try Self.checkCoverURL(input.coverURL)
        try Self.checkText(fileName, "FileName", max: 255)
        try Self.checkTags(input.tags)
        let ext = (fileName as NSString).pathExtension.lowercased()
        guard Self.isFileExtension(ext) else {
            throw MediaError("InvalidFileName.Extension", "FileName must end in an extension such as .mp4.")
        }
        if let size = input.fileSize, size < 0 || size > CatalogObjectStore.Limits.maxObjectSize {
            throw MediaError.invalid("FileSize", "must be between 0 and 5 TiB.")
        }
        let group = try templateGroup(input.templateGroupId ?? input.transcode)
        let policy = try Self.playbackPolicy(input.playbackPolicy) ?? .signed
        let downloads = try Self.downloadPolicy(input.downloads)
        try Self.checkClientToken(input.clientToken)
        if let token = input.clientToken {
            // Asked again with the same token (a client that lost the answer, or one that retries a cancelled upload
            // with another title or cover): the same video, described as this request describes it, fresh credentials.
            let owner = call.principal.parentAccessKeyId
            if let video = try await catalog.uploadingVideo(owner: owner, clientToken: token),
                try await catalog.updateVideo(video.videoId, { video in
                    guard video.status == VideoStatus.uploading else { return .keep }
                    (video.title, video.description, video.coverURL) = (title, input.description, input.coverURL)
                    (video.cateId, video.tags, video.userData) = (input.cateId, input.tags, input.userData)
                    video.transcode = group
                    (video.playbackPolicy, video.downloads) = (policy.rawValue, downloads.map(\.rawValue))
                    video.updatedAt = Date()
                    return .save()
                })?.status == VideoStatus.uploading
            {
                return ticket(videoId: video.videoId, key: video.key, call)
            }
            // Stored (or failed) meanwhile: the token makes a new video, as it does once the video left Uploading.
        }
        try await checkStorageQuota(forVideoOf: input.fileSize, call.principal)
        try await library.ensureBucket()
        let id = Hex.randomId()
        let now = Date()
        // With a ClientToken, a request racing this one (the same client retrying) gets the same video; past the
        // key's Videos quota, none.
        var record = VideoRecord(
            videoId: id, title: title, fileName: fileName, description: input.description, coverURL: input.coverURL,
            cateId: input.cateId, tags: input.tags, transcode: group, userData: input.userData,
            status: VideoStatus.uploading, size: nil, declaredSize: input.fileSize, bucket: bucket,
            key: "video/\(id)/source.\(ext)", owner: call.principal.parentAccessKeyId, createdAt: now, updatedAt: now,
            clientToken: input.clientToken)
        record.playbackPolicy = policy.rawValue
        record.downloads = downloads.map(\.rawValue)
        let video = try await catalog.createVideo(record, videoLimit: call.principal.quota.videos)
        return ticket(videoId: video.videoId, key: video.key, call)
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

    /// A video that is not deleted (or also a deleted one, with `orDeleted`) and that `principal` may act on: the root
    /// key acts on every video, any other key only on the videos created with it (or with credentials issued under
    /// it). Another key's deleted video is not found, as before it was deleted.
    func liveVideo(_ id: String?, principal: Principal, orDeleted: Bool = false) async throws -> VideoRecord {
        guard let id, !id.isEmpty else { throw MediaError.missing("VideoId") }
        guard let video = try await catalog.video(id), video.status != VideoStatus.deleted
            || (orDeleted && (principal.isRoot || video.owner == principal.parentAccessKeyId))
        else { throw MediaError.notFound("Video", id) }
        try Self.checkOwner(video.owner, principal: principal, what: "video")
        return video
    }

    static func checkOwner(_ owner: String?, principal: Principal, what: String) throws {
        guard principal.isRoot || owner == principal.parentAccessKeyId else {
            throw MediaError("Forbidden", "The \(what) belongs to another access key.", status: 403)
        }
    }

    func refreshUploadVideo(_ input: MediaContract.VideoIdRequest, _ call: Call) async throws
        -> MediaContract.UploadTicketAnswer
    {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        // A stored video takes no more uploads: new write credentials would let its bytes be replaced. One whose source
        // was stored by a request the server stopped before advancing it is stored too (its client then finishes it).
        guard video.status == VideoStatus.uploading else { throw MediaError.closedToUploads("Video", status: video.status) }
        if try await library.advanceIfStored(video) {
            throw MediaError.closedToUploads("Video", status: VideoStatus.uploadSucc)
        }
        return ticket(videoId: video.videoId, key: video.key, call)
    }

    func getVideoInfo(_ input: MediaContract.VideoIdRequest, _ call: Call) async throws -> MediaContract.VideoInfoAnswer {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        return MediaContract.VideoInfoAnswer(video: try await describe(video, call, detailed: true))
    }

    func listVideos(_ input: MediaContract.ListVideosRequest, _ call: Call) async throws -> MediaContract.VideoListAnswer {
        let page = input.pageNo ?? 1
        let size = input.pageSize ?? 20
        // Both are checked before the offset is computed, so no PageNo can overflow it.
        let pages = MediaContract.ListVideosRequest.pageNumbers, sizes = MediaContract.ListVideosRequest.pageSizes
        guard pages.contains(page) else {
            throw MediaError.invalid("PageNo", "must be between 1 and \(pages.upperBound).")
        }
        guard sizes.contains(size) else {
            throw MediaError.invalid("PageSize", "must be between 1 and \(sizes.upperBound).")
        }
        if let status = input.status, !MediaContract.ListVideosRequest.statuses.contains(status) {
            throw MediaError.invalid(
                "Status", "must be one of \(MediaContract.ListVideosRequest.statuses.joined(separator: ", ")).")
        }
        try Self.checkText(input.title, "Title", max: 128)
        try Self.checkText(input.tag, "Tag", max: 32)
        // One tag: a comma would span two; an empty one filters nothing, as an empty Title does.
        if input.tag?.utf8.contains(UInt8(ascii: ",")) == true {
            throw MediaError.invalid("Tag", "is one tag, without a comma.")
        }
        let principal = call.principal
        let tag = input.tag?.isEmpty == true ? nil : input.tag
        let (videos, total) = try await catalog.videos(
            status: input.status, cateId: input.cateId, tag: tag, title: input.title,
            owner: principal.isRoot ? nil : principal.parentAccessKeyId, offset: (page - 1) * size, limit: size)
        var list: [MediaContract.Video] = []
        for video in videos { list.append(try await describe(video, call, detailed: false)) }
        return MediaContract.VideoListAnswer(videoList: list, total: total, pageNo: page, pageSize: size)
    }

    /// Changes a video's title, description, tags, category, cover or playback policy; fields left out stay as they are, an empty
    /// Description, Tags or CoverURL clears it.
    func updateVideoInfo(_ input: MediaContract.UpdateVideoInfoRequest, _ call: Call) async throws
        -> MediaContract.EmptyAnswer
    {
        let video = try await liveVideo(input.videoId, principal: call.principal)
        if let title = input.title, title.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            throw MediaError.invalid("Title", "must not be empty.")
        }
        try Self.checkText(input.title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkCoverURL(input.coverURL)
        try Self.checkTags(input.tags)
        let policy = try Self.playbackPolicy(input.playbackPolicy)
        let downloads = try Self.downloadPolicy(input.downloads)
        if input.title == nil, input.description == nil, input.tags == nil, input.cateId == nil, input.coverURL == nil,
            policy == nil, downloads == nil
        {
            throw MediaError(
                "MissingParameter",
                "Name at least one of Title, Description, Tags, CateId, CoverURL, PlaybackPolicy, Downloads.")
        }
        try await catalog.updateVideo(video.videoId) { video in
            if let title = input.title { video.title = title }
            if let description = input.description { video.description = description.isEmpty ? nil : description }
            if let tags = input.tags { video.tags = tags.isEmpty ? nil : tags }
            if let cateId = input.cateId { video.cateId = cateId }
            if let cover = input.coverURL { video.coverURL = cover.isEmpty ? nil : cover }
            if let policy { video.playbackPolicy = policy.rawValue }
            if let downloads { video.downloads = downloads.rawValue }
            video.updatedAt = Date()
            return .save()
        }
        return MediaContract.EmptyAnswer()
    }

    func deleteVideo(_ input: MediaContract.DeleteVideoRequest, _ call: Call) async throws -> MediaContract.DeleteVideoAnswer {
        var videos: [VideoRecord] = []
        for id in try Self.idList(input.videoIds, "VideoIds", of: "video") {
            // A video deleted already is deleted again (a retry whose answer was lost, one a stopped node left
            // unfinished, or one racing it): its removal finishes now if it had not (its VideoDeleted may then come
            // twice), and the answer names it.
            videos.append(try await liveVideo(id, principal: call.principal, orDeleted: true))
        }
        var deleted: [String] = []
        for video in videos {
            if video.removedWith != VideoStatus.deleted { try await library.delete(video) }
            deleted.append(video.videoId)
        }
        return MediaContract.DeleteVideoAnswer(deletedVideoIds: deleted)
    }

    /// The ids of a deletion (`VideoIds`, `ImageIds`): comma-separated, none empty, at most 20, each once.
    static func idList(_ ids: String?, _ field: String, of what: String) throws -> [String] {
        guard let ids, !ids.isEmpty else { throw MediaError.missing(field) }
        var list: [String] = []
        for item in ids.split(separator: ",", omittingEmptySubsequences: false) {
            let id = item.trimmingCharacters(in: .whitespaces)
            guard !id.isEmpty else {
                throw MediaError.invalid(field, "must be \(what) ids separated by commas, none empty.")
            }
            if !list.contains(id) { list.append(id) }
            guard list.count <= 20 else { throw MediaError.invalid(field, "may name at most 20 \(what)s.") }
        }
        return list
    }

    // MARK: Images

    func createUploadImage(_ input: MediaContract.CreateUploadImageRequest, _ call: Call) async throws
        -> MediaContract.UploadTicketAnswer
    {
        guard let type = input.imageType, !type.isEmpty else { throw MediaError.missing("ImageType") }
        guard ["default", "cover"].contains(type) else { throw MediaError.invalid("ImageType", "must be default or cover.") }
        let ext = (input.imageExt ?? "png").lowercased()
        guard ["png", "jpg", "jpeg", "gif", "webp", "heic"].contains(ext) else {
            throw MediaError.invalid("ImageExt", "must be one of png, jpg, jpeg, gif, webp, heic.")
        }
        try Self.checkText(input.title, "Title", max: 128)
        try Self.checkText(input.description, "Description", max: 1024)
        try Self.checkTags(input.tags)
        try Self.checkClientToken(input.clientToken)
        try await library.ensureBucket()
        let id = Hex.randomId()
        // Asked again with the same token (a client that lost the answer): the same image, fresh credentials.
        let image = try await catalog.createImage(
            ImageRecord(
                imageId: id, imageType: type, title: input.title, tags: input.tags, cateId: input.cateId,
                description: input.description, status: ImageStatus.uploading, size: nil, bucket: bucket,
                key: "image/\(type)/\(id).\(ext)", createdAt: Date(), owner: call.principal.parentAccessKeyId,
                clientToken: input.clientToken))
        return ticket(imageId: image.imageId, key: image.key, call)
    }

    /// A fresh credential for the same image file, while it is still being uploaded.
    func refreshUploadImage(_ input: MediaContract.ImageIdRequest, _ call: Call) async throws
        -> MediaContract.UploadTicketAnswer
    {
        let image = try await image(input.imageId, principal: call.principal)
        guard image.status == ImageStatus.uploading else { throw MediaError.closedToUploads("Image", status: image.status) }
        if try await library.advanceIfStored(image) {
            throw MediaError.closedToUploads("Image", status: ImageStatus.uploaded)
        }
        return ticket(imageId: image.imageId, key: image.key, call)
    }

    /// An image of `principal` (any, for the root key), not deleted unless `orDeleted`. Another key's deleted image is
    /// not found, as before it was deleted.
    func image(_ id: String?, principal: Principal, orDeleted: Bool = false) async throws -> ImageRecord {
        guard let id, !id.isEmpty else { throw MediaError.missing("ImageId") }
        guard let image = try await catalog.image(id), image.status != ImageStatus.deleted
            || (orDeleted && (principal.isRoot || image.owner == principal.parentAccessKeyId))
        else { throw MediaError.notFound("Image", id) }
        try Self.checkOwner(image.owner, principal: principal, what: "image")
        return image
    }

    /// Deletes images. As for videos, an image deleted already is deleted again (a retry whose answer was lost, or
    /// one a stopped node left unfinished): what is left of it is removed and the answer names it.
    func deleteImage(_ input: MediaContract.DeleteImageRequest, _ call: Call) async throws
        -> MediaContract.DeleteImageAnswer
    {
        var images: [ImageRecord] = []
        for id in try Self.idList(input.imageIds, "ImageIds", of: "image") {
            let image = try await image(id, principal: call.principal, orDeleted: true)
            // A cover a video's snapshot made lives in the video's directory and goes with the video.
            let parts = image.key.split(separator: "/")
            if parts.first == "video", parts.count > 1, let video = try await catalog.video(String(parts[1])),
                video.status != VideoStatus.deleted
            {
                throw MediaError(
                    "InvalidImage.VideoSnapshot",
                    "The image is a snapshot of video \(video.videoId) and goes with it; delete the video instead.",
                    status: 409)
            }
            images.append(image)
        }
        for image in images { try await library.delete(image) }
        return MediaContract.DeleteImageAnswer(deletedImageIds: images.map(\.imageId))
    }

    func getImageInfo(_ input: MediaContract.ImageInfoRequest, _ call: Call) async throws -> MediaContract.ImageInfoAnswer {
        let image = try await image(input.imageId, principal: call.principal)
        var info = MediaContract.ImageInfo(
            imageId: image.imageId, imageType: image.imageType, status: image.status,
            creationTime: image.createdAt.formatted(.iso8601),
            url: try signedURL(key: image.key, call, expires: try Self.authTimeout(input.authTimeout)),
            size: image.size, title: image.title)
        if image.size != nil { info.eTag = try await storedETag(bucket: bucket, key: image.key) }
        return MediaContract.ImageInfoAnswer(imageInfo: info)
    }

    /// The ETag of a video's or image's stored file, nil when it is not stored (any more).
    func storedETag(bucket: String, key: String) async throws -> String? {
        try await store.storedObject(bucket: bucket, key: key)?.etag
    }

    // MARK: STS and access keys

    func assumeRole(_ input: MediaContract.AssumeRoleRequest, _ call: Call) async throws -> MediaContract.AssumeRoleAnswer {
        let principal = call.principal
        guard principal.expiration == nil else {
            throw MediaError("Forbidden", "Temporary credentials cannot assume a role; use a long-term key.", status: 403)
        }
        let duration = input.durationSeconds ?? 3600
        guard (900...43_200).contains(duration) else {
            throw MediaError.invalid("DurationSeconds", "must be between 900 and 43200.")
        }
        let expiration = credentials.now().addingTimeInterval(TimeInterval(duration))
        if let policy = input.policy { try Self.checkActions(of: policy) }
        let policies = principal.policies + (input.policy.map { [$0] } ?? [])
        let issued = credentials.tokens.issue(parent: principal.parentAccessKeyId, policies: policies, expiration: expiration)
        // The policies travel in the token, which travels in every request's headers: one too large for a header would
        // make a credential that no request can carry.
        let packed = issued.sessionToken?.utf8.count ?? 0
        guard packed <= Self.maxSessionTokenBytes else {
            throw MediaError(
                "PackedPolicyTooLarge",
                "The policies take \(packed) bytes in the session token; at most \(Self.maxSessionTokenBytes). Use fewer statements.")
        }
        return MediaContract.AssumeRoleAnswer(
            credentials: .init(
                accessKeyId: issued.accessKeyId, accessKeySecret: issued.secretAccessKey,
                securityToken: issued.sessionToken ?? "", expiration: expiration.formatted(.iso8601)))
    }

    /// Every action a policy can allow: the S3 operations' IAM actions and `media:<operation>` for the media and
    /// publish APIs' operations.
    static let knownActions: Set<String> = Set(ObjectAPI.Operation.allCases.flatMap(\.actions))
        .union(operations.keys.map { "media:" + $0 })
        .union(PublishAPI.operations.map { "media:" + $0 })

    /// Refuses a policy naming an action no operation checks (a misspelt `s3:PutObjcet` would otherwise allow
    /// nothing, silently), a pattern (`s3:Get*`) that matches none, or no action at all.
    static func checkActions(of policy: AccessPolicy) throws {
        guard !policy.statements.isEmpty, policy.statements.allSatisfy({ !$0.actions.isEmpty }) else {
            throw MediaError.invalid("Policy", "has a statement naming no action, or no statement: it would allow nothing.")
        }
        for action in policy.statements.flatMap(\.actions) {
            let known =
                action.hasSuffix("*")
                ? knownActions.contains { $0.hasPrefix(action.dropLast()) } : knownActions.contains(action)
            guard known else {
                throw MediaError.invalid(
                    "Policy", "names the action \(action.prefix(64).debugDescription), which is not one of Ferry's (s3:PutObject, media:CreateUploadVideo, …).")
            }
        }
    }

    /// Refuses any caller but the root key: `what` it alone does, as the refusal says.
    func requireRoot(_ principal: Principal, _ what: String = "manages access keys") throws {
        guard principal.isRoot else { throw MediaError("Forbidden", "Only the root key \(what).", status: 403) }
    }

    func createAccessKey(_ input: MediaContract.CreateAccessKeyRequest, _ call: Call) async throws
        -> MediaContract.CreateAccessKeyAnswer
    {
        try requireRoot(call.principal)
        guard let policy = input.policy else { throw MediaError.missing("Policy") }
        try Self.checkActions(of: policy)
        try Self.checkText(input.description, "Description", max: 256)
        let quota = input.quota ?? .unlimited
        try Self.checkQuota(quota)
        let generated = ServerKeys.generatedKey()
        let key = StoredAccessKey(
            accessKeyId: generated.accessKeyId, secretAccessKey: generated.secretAccessKey,
            policy: policy, status: .active, description: input.description ?? "", createdAt: Date(), quota: quota)
        try await catalog.insertAccessKey(key)
        return MediaContract.CreateAccessKeyAnswer(
            accessKey: .init(accessKeyId: key.accessKeyId, accessKeySecret: key.secretAccessKey, status: "active"))
    }

    /// Its request takes no parameters, but is read as every other's: a body that is not JSON is refused.
    func listAccessKeys(_: MediaContract.ListAccessKeysRequest, _ call: Call) async throws
        -> MediaContract.ListAccessKeysAnswer
    {
        try requireRoot(call.principal)
        return MediaContract.ListAccessKeysAnswer(accessKeys: try await catalog.accessKeys().map(Self.describe))
    }

    /// The newest webhook events (root only), newest first, with their delivery state.
    func listWebhookEvents(_ input: MediaContract.ListWebhookEventsRequest, _ call: Call) async throws
        -> MediaContract.WebhookEventsAnswer
    {
        try requireRoot(call.principal, "reads and retries webhook deliveries")
        let limit = input.limit ?? 50
        guard (1...500).contains(limit) else { throw MediaError.invalid("Limit", "must be between 1 and 500.") }
        let events = try await webhooks.catalog.recentWebhookEvents(limit: limit).map { delivery in
            let event = delivery.event
            var described = MediaContract.WebhookEvent(
                eventId: event.id, eventType: event.type.rawValue, creationTime: event.createdAt.formatted(.iso8601),
                attempts: event.attempts,
                state: event.deliveredAt != nil ? "Delivered" : event.failedAt != nil ? "Failed" : "Pending")
            described.videoId = event.payload.videoId
            described.deliveryTime = event.deliveredAt?.formatted(.iso8601)
            described.failureTime = event.failedAt?.formatted(.iso8601)
            if event.deliveredAt == nil, event.failedAt == nil {
                described.nextAttemptTime = delivery.nextAttemptAt.formatted(.iso8601)
            }
            described.lastError = delivery.lastError
            return described
        }
        return MediaContract.WebhookEventsAnswer(events: events, webhookURL: webhooks.configuration?.redactedURL)
    }

    /// Delivers a failed webhook event again (root only), from a fresh count of attempts.
    func retryWebhookEvent(_ input: MediaContract.WebhookEventIdRequest, _ call: Call) async throws
        -> MediaContract.WebhookEventStateAnswer
    {
        try requireRoot(call.principal, "reads and retries webhook deliveries")
        guard let id = input.eventId, !id.isEmpty else { throw MediaError.missing("EventId") }
        guard try await webhooks.catalog.retryWebhookEvent(id, now: Date()) else {
            throw MediaError("InvalidEvent.NotFailed", "No failed webhook event has the id \(id.prefix(64)).", status: 404)
        }
        return MediaContract.WebhookEventStateAnswer(eventId: id, state: "Pending")
    }

    func disableAccessKey(_ input: MediaContract.AccessKeyIdRequest, _ call: Call) async throws
        -> MediaContract.AccessKeyStatusAnswer
    {
        try requireRoot(call.principal)
        guard let id = input.accessKeyId, !id.isEmpty else { throw MediaError.missing("AccessKeyId") }
        // The root key is where the server starts, not in the catalog: "no such key" would send its owner looking.
        guard id != call.principal.parentAccessKeyId else {
            throw MediaError(
                "InvalidParameter",
                "The root key cannot be disabled; it is replaced where the server reads it at start (the data "
                    + "directory's root-credentials.json, or FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY).",
                status: 400)
        }
        guard try await catalog.setAccessKeyStatus(id, .disabled) else { throw MediaError.notFound("AccessKey", id) }
        return MediaContract.AccessKeyStatusAnswer(accessKeyId: id, status: "disabled")
    }
}
