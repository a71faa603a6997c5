import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The part-signing endpoints that Uppy's AWS S3 plugin calls (`endpoint` pointed at the Ferry server), so an existing
/// Uppy front end uploads to Ferry unchanged; the console's own uploader uses them too.
///
/// - `POST /s3/multipart` with `{"filename", "type", "metadata"}` creates a video (an image for `image/…` types)
///   through the media API, titled `metadata.title` or `metadata.name` or the file name, and starts its multipart
///   upload: `{"key", "uploadId", "bucket", "videoId" | "imageId"}`.
/// - `GET /s3/multipart/{uploadId}?key=K` lists the stored parts: `[{"PartNumber", "Size", "ETag"}]`.
/// - `GET /s3/multipart/{uploadId}/{partNumber}?key=K` signs one part: `{"url", "method": "PUT", "expires"}`, a
///   presigned URL on the object API under a temporary credential that may write only that object.
/// - `POST /s3/multipart/{uploadId}/complete?key=K` with `{"parts": [{"PartNumber", "ETag"}]}` completes it:
///   `{"location", "key", …}`; the video then advances as after any upload (processing, events).
/// - `DELETE /s3/multipart/{uploadId}?key=K` aborts it.
///
/// Requests are authorized by the console session's cookie; those that change state also carry `X-Ferry-CSRF` or
/// Uppy's `Uppy-Versions` header (a header no page of another site can add without a CORS preflight, which Ferry
/// never grants with credentials). Only the owner of a video (or the root key) signs, lists, completes or aborts
/// its upload. Errors are `{"error": {"code", "message"}, "message"}` with their HTTP status.
struct MultipartSigningAPI: Sendable {
    let media: MediaAPI

    /// What a route of the signing endpoints needs: the principal of the session, and where the request came.
    private func call(_ context: FerryRequestContext) throws -> MediaAPI.Call {
        MediaAPI.Call(principal: try context.requireCaller().requirePrincipal(), endpoint: try context.endpoint())
    }

    private func answer(_ value: some Encodable, _ context: FerryRequestContext) throws -> Response {
        try JSONAnswer.response(value, requestId: context.requestId, headers: [.cacheControl: "no-store"])
    }

    /// `POST /s3/multipart`: creates the video or image and starts its multipart upload.
    func create(_ request: Request, context: FerryRequestContext) async throws -> Response {
        var request = request
        let body = Data(buffer: try await request.collectSmallBody())
        return try answer(try await create(body, try call(context)), context)
    }

    /// `GET /s3/multipart/{uploadId}?key=K`: the stored parts.
    func listParts(_ request: Request, context: FerryRequestContext) async throws -> Response {
        let call = try call(context)
        let upload = try await ownedUpload(try Self.uploadId(context), request, principal: call.principal)
        return try answer(try await parts(upload), context)
    }

    /// `DELETE /s3/multipart/{uploadId}?key=K`: aborts the upload.
    func abort(_ request: Request, context: FerryRequestContext) async throws -> Response {
        let call = try call(context)
        let upload = try await ownedUpload(try Self.uploadId(context), request, principal: call.principal)
        try await media.store.abortMultipartUpload(upload)
        return try answer(MediaContract.EmptyAnswer(), context)
    }

    /// `GET /s3/multipart/{uploadId}/{partNumber}?key=K`: a presigned URL for one part.
    func signPart(_ request: Request, context: FerryRequestContext) async throws -> Response {
        let call = try call(context)
        let upload = try await ownedUpload(try Self.uploadId(context), request, principal: call.principal, uploading: true)
        guard let number = context.parameters.get("partNumber").flatMap({ Int($0) }), (1...10_000).contains(number) else {
            throw MediaError("InvalidArgument", "The part number must be an integer from 1 to 10000.", status: 400)
        }
        return try answer(try sign(upload, partNumber: number, call), context)
    }

    /// `POST /s3/multipart/{uploadId}/complete?key=K`: completes the upload.
    func complete(_ request: Request, context: FerryRequestContext) async throws -> Response {
        var request = request
        let body = Data(buffer: try await request.collectSmallBody())
        return try answer(try await complete(try Self.uploadId(context), request, body, try call(context)), context)
    }

    /// Any other path or method under `/s3/multipart`.
    static let notFound = MediaError("NotFound", "No such multipart signing endpoint.", status: 404)

    private static func uploadId(_ context: FerryRequestContext) throws -> String {
        guard let id = context.parameters.get("uploadId"), !id.isEmpty else { throw notFound }
        return id
    }

    private struct CreateInput: Decodable {
        var filename: String?
        var type: String?
        var metadata: [String: String]?
    }

    /// What creating an upload answers.
    private struct Created: Encodable {
        var videoId: String?
        var imageId: String?
        var key: String
        var uploadId: String
        var bucket: String
    }

    /// Creates the video or image and starts its multipart upload.
    private func create(_ body: Data, _ call: MediaAPI.Call) async throws -> Created {
        let principal = call.principal
        let input = try JSONBody.decode(CreateInput.self, from: body)
        guard let filename = input.filename, !filename.isEmpty else { throw MediaError.missing("filename") }
        let metadata = input.metadata ?? [:]
        // A title given is checked as CreateUploadVideo checks it; one taken from the file's name (Uppy's `name`) is
        // cut to the 128 bytes a title takes, between characters.
        var title = metadata["title"] ?? String((metadata["name"] ?? filename).prefix(128))
        if metadata["title"] == nil {
            while title.utf8.count > 128 { title.removeLast() }
        }
        let type = input.type ?? ""
        var videoId: String?
        var imageId: String?
        let key: String
        if type.hasPrefix("image/") {
            guard principal.allows(action: "media:CreateUploadImage") else { throw MediaError.forbidden }
            let image = MediaContract.CreateUploadImageRequest(
                imageType: "default", imageExt: (filename as NSString).pathExtension.lowercased(), title: title,
                tags: metadata["tags"],
                description: metadata["description"])
            let created = try await media.createUploadImage(image, call)
            guard let id = created.imageId, let record = try await media.catalog.image(id) else {
                throw MediaError("InternalError", "The image was not recorded.", status: 500)
            }
            key = record.key
            imageId = id
        } else {
            guard principal.allows(action: "media:CreateUploadVideo") else { throw MediaError.forbidden }
            // A video's category (an image has none); an empty field is none.
            var cateId: Int?
            if let text = metadata["cateId"], !text.isEmpty {
                guard let number = Int(text) else { throw MediaError.invalid("metadata.cateId", "must be a whole number.") }
                cateId = number
            }
            let video = MediaContract.CreateUploadVideoRequest(
                title: title, fileName: filename, fileSize: metadata["size"].flatMap(Int64.init),
                description: metadata["description"], cateId: cateId, tags: metadata["tags"])
            let created = try await media.createUploadVideo(video, call)
            guard let id = created.videoId, let record = try await media.catalog.video(id) else {
                throw MediaError("InternalError", "The video was not recorded.", status: 500)
            }
            key = record.key
            videoId = id
        }
        let contentType = type.isEmpty || type.utf8.count > 128 ? nil : type
        let upload: MultipartUploadInfo
        do {
            upload = try await media.store.createMultipartUpload(
                bucket: media.bucket, key: key, attributes: ObjectAttributes(contentType: contentType), tags: [],
                checksumAlgorithm: nil, checksumType: nil, charge: StorageCharge(principal: principal))
        } catch {
            // A refused request makes nothing (a quota, a full store): the video or image made for it goes. Should
            // that fail too, the record is left Uploading and expires as any upload never sent.
            if let videoId, let record = try? await media.catalog.video(videoId) {
                try? await media.library.delete(record)
            }
            if let imageId, let record = try? await media.catalog.image(imageId) {
                try? await media.library.delete(record)
            }
            throw error
        }
        return Created(videoId: videoId, imageId: imageId, key: key, uploadId: upload.uploadId, bucket: media.bucket)
    }

    /// The upload `uploadId` of the object `?key=`, when it is of a video or image the principal owns (and, with
    /// `uploading`, that still takes uploads).
    private func ownedUpload(_ uploadId: String, _ request: Request, principal: Principal, uploading: Bool = false)
        async throws -> MultipartUploadInfo
    {
        guard let key = request.uri.queryParameters.get("key"), !key.isEmpty else { throw MediaError.missing("key") }
        try await checkOwner(key: key, principal: principal, uploading: uploading)
        return try await media.store.multipartUpload(uploadId, bucket: media.bucket, key: key)
    }

    /// Refuses a key that is not the file of a video or image the principal owns, or (with `uploading`) one whose
    /// video or image takes no more uploads, as RefreshUploadVideo and RefreshUploadImage refuse it.
    private func checkOwner(key: String, principal: Principal, uploading: Bool) async throws {
        let notFound = MediaError("NoSuchUpload", "No upload of yours has that key.", status: 404)
        let (what, owner, status): (String, String?, String)
        if let video = try await media.catalog.video(bucket: media.bucket, key: key) {
            (what, owner, status) = ("Video", video.owner, video.status)
        } else if let image = try await media.catalog.image(bucket: media.bucket, key: key) {
            (what, owner, status) = ("Image", image.owner, image.status)
        } else {
            throw notFound
        }
        // VideoStatus and ImageStatus name Deleted and Uploading alike.
        guard status != VideoStatus.deleted else { throw notFound }
        try MediaAPI.checkOwner(owner, principal: principal, what: what.lowercased())
        if uploading, status != VideoStatus.uploading { throw MediaError.closedToUploads(what, status: status) }
    }

    /// A stored part, as Uppy lists them.
    private struct Part: Encodable {
        var PartNumber: Int
        var Size: Int64
        var ETag: String
    }

    private func parts(_ upload: MultipartUploadInfo) async throws -> [Part] {
        var list: [Part] = []
        var marker = 0
        while true {
            let page = try await media.store.listParts(upload, after: marker, maxParts: 1000)
            for part in page.parts {
                list.append(Part(PartNumber: part.number, Size: part.size, ETag: "\"\(part.etag)\""))
            }
            guard page.isTruncated, let last = page.parts.last else { return list }
            marker = last.number
        }
    }

    /// A signed part upload, as Uppy takes it.
    private struct SignedPart: Encodable {
        var url: String
        var method: String
        var expires: Int
        var headers: [String: String]
    }

    /// A presigned `PUT` of one part, under a credential that may write only this object.
    private func sign(_ upload: MultipartUploadInfo, partNumber: Int, _ call: MediaAPI.Call) throws -> SignedPart {
        let (credentials, expiration) = media.uploadCredentials(for: [upload.key], principal: call.principal)
        let expires = max(1, min(3600, Int(expiration.timeIntervalSinceNow)))
        let url = try media.presignedURL(
            method: "PUT", key: upload.key,
            query: [(name: "partNumber", value: String(partNumber)), (name: "uploadId", value: upload.uploadId)],
            at: media.uploadBase(call), credentials: credentials, expires: expires)
        return SignedPart(url: url, method: "PUT", expires: expires, headers: [:])
    }

    private struct CompleteInput: Decodable {
        struct Part: Decodable {
            var PartNumber: Int?
            var ETag: String?
        }
        var parts: [Part]?
    }

    /// What completing an upload answers.
    private struct Completed: Encodable {
        var location: String
        var key: String
        var size: Int64
    }

    private func complete(_ uploadId: String, _ request: Request, _ body: Data, _ call: MediaAPI.Call) async throws
        -> Completed
    {
        let principal = call.principal
        let input = try JSONBody.decode(CompleteInput.self, from: body)
        guard let given = input.parts, !given.isEmpty else { throw MediaError.missing("parts") }
        guard given.count <= 10_000 else { throw MediaError.invalid("parts", "may list at most 10000 parts.") }
        var parts: [CompleteMultipartUpload.Part] = []
        for part in given {
            guard let number = part.PartNumber, (1...10_000).contains(number), let etag = part.ETag, !etag.isEmpty,
                etag.utf8.count <= 128
            else { throw MediaError.invalid("parts", "need a PartNumber from 1 to 10000 and an ETag each.") }
            parts.append(.init(partNumber: number, eTag: etag))
        }
        guard let key = request.uri.queryParameters.get("key"), !key.isEmpty else { throw MediaError.missing("key") }
        try await checkOwner(key: key, principal: principal, uploading: false)
        let location = media.objectURL(key: key, call)
        // The same Complete sent again when its first answer was lost, or while the first was under way, answers the
        // same: the file is stored, its video or image past uploading (advanced now, when the server stopped between
        // storing the file and advancing it). Another upload id, or other parts, is refused as the object API
        // refuses it.
        func answerAgain(_ error: FerryDomainError) async throws -> Completed {
            let repeated = try await media.store.repeatedCompletion(
                uploadId, bucket: media.bucket, key: key, parts: parts)
            guard let object = repeated?.object else { throw error }
            if let video = try await media.catalog.video(bucket: media.bucket, key: key) {
                try await media.library.videoStored(video.videoId, object: object)
            } else if let image = try await media.catalog.image(bucket: media.bucket, key: key) {
                try await media.library.imageStored(image.imageId, object: object)
            }
            return Completed(location: location, key: key, size: object.size)
        }
        let upload: MultipartUploadInfo
        do {
            upload = try await media.store.multipartUpload(uploadId, bucket: media.bucket, key: key)
        } catch let error as FerryDomainError where error.code == .uploadNotFound {
            return try await answerAgain(error)
        }
        // A stored video's or image's file takes only the same parts again, as through the object API.
        let stored = try await MediaLibrary.StoredFile.forCompletion(
            bucket: media.bucket, key: key, check: media.library.checkWritable)
        try stored?.checkCompletion(partETags: parts.map(\.eTag))
        let object: ObjectInfo
        do {
            object = try await media.store.completeMultipartUpload(
                upload, parts: parts, fullObjectChecksums: [:], objectSize: nil,
                condition: ObjectWriteCondition.none.forFile(stored))
        } catch let error as FerryDomainError where [.uploadNotFound, .partNotFound].contains(error.code) {
            return try await answerAgain(error)
        }
        await media.library.objectStored(object)
        return Completed(location: location, key: key, size: object.size)
    }
}

extension HTTPField.Name {
    static let uppyVersions = Self("Uppy-Versions")!
}
