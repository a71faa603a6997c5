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
    static let path = "/s3/multipart"

    let media: MediaAPI
    let console: ConsoleAPI

    static func handles(_ path: String) -> Bool { path == Self.path || path.hasPrefix(Self.path + "/") }

    private struct Failure: Error {
        var status: Int
        var code: String
        var message: String
    }

    func respond(to request: Request, logger: Logger) async -> Response {
        var request = request
        let answer: (status: HTTPResponse.Status, body: Any)
        do {
            let body = try await request.collectBody(upTo: 1024 * 1024)
            answer = (.ok, try await perform(request, body: Data(buffer: body)))
        } catch let failure as Failure {
            answer = (.init(code: failure.status), Self.error(failure.code, failure.message))
        } catch let error as MediaError {
            answer = (.init(code: error.status), Self.error(error.code, error.message))
        } catch let error as S3Error {
            answer = (.init(code: error.code.httpStatus), Self.error(error.code.rawValue, error.message))
        } catch {
            logger.error("multipart signing internal error", metadata: ["error": .string("\(error)")])
            answer = (.internalServerError, Self.error("InternalError", "The service failed to answer; try again."))
        }
        let data = (try? JSONSerialization.data(withJSONObject: answer.body, options: [.sortedKeys])) ?? Data("{}".utf8)
        var response = Response(
            status: answer.status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
        for (name, value) in console.securityHeaders() { response.headers[name] = value }
        return response
    }

    static func error(_ code: String, _ message: String) -> [String: Any] {
        ["error": ["code": code, "message": message], "message": message]
    }

    private func perform(_ request: Request, body: Data) async throws -> Any {
        let session = try await console.requireSession(request)
        let principal = session.principal
        let changes = request.method != .get && request.method != .head
        if changes && !ConsoleSessions.hasCSRFToken(request.headers, session: session)
            && request.headers[.uppyVersions] == nil
        {
            throw ConsoleAPI.csrfMissing
        }
        let rest = request.uri.path.dropFirst(Self.path.count).split(separator: "/", omittingEmptySubsequences: false)
            .dropFirst().map(String.init)
        let host = request.head.authority ?? "localhost"
        switch (request.method, rest.count) {
        case (.post, 0):
            return try await create(body, principal: principal, host: host)
        case (.get, 1), (.delete, 1):
            let upload = try await ownedUpload(rest[0], request, principal: principal)
            if request.method == .delete {
                try await media.store.abortMultipartUpload(upload)
                return [String: Any]()
            }
            return try await parts(upload)
        case (.get, 2):
            let upload = try await ownedUpload(rest[0], request, principal: principal)
            guard let number = Int(rest[1]), (1...10_000).contains(number) else {
                throw Failure(status: 400, code: "InvalidArgument", message: "The part number must be an integer from 1 to 10000.")
            }
            return try sign(upload, partNumber: number, principal: principal, host: host)
        case (.post, 2) where rest[1] == "complete":
            return try await complete(rest[0], request, body, principal: principal, host: host)
        default:
            throw Failure(status: 404, code: "NotFound", message: "No such multipart signing endpoint.")
        }
    }

    private struct CreateInput: Decodable {
        var filename: String?
        var type: String?
        var metadata: [String: String]?
    }

    /// Creates the video or image and starts its multipart upload.
    private func create(_ body: Data, principal: Principal, host: String) async throws -> [String: Any] {
        let input = try media.decode(CreateInput.self, body)
        guard let filename = input.filename, !filename.isEmpty else { throw MediaError.missing("filename") }
        let metadata = input.metadata ?? [:]
        let title = String((metadata["title"] ?? metadata["name"] ?? filename).prefix(128))
        let type = input.type ?? ""
        var answer: [String: Any]
        let key: String
        if type.hasPrefix("image/") {
            guard principal.allows(action: "media:CreateUploadImage") else { throw MediaError.forbidden }
            let image = MediaContract.CreateUploadImageRequest(
                imageExt: (filename as NSString).pathExtension.lowercased(), title: title, tags: metadata["tags"],
                description: metadata["description"])
            let created = try await media.createUploadImage(image, principal: principal, host: host)
            guard let id = created["ImageId"] as? String, let record = try await media.catalog.image(id) else {
                throw Failure(status: 500, code: "InternalError", message: "The image was not recorded.")
            }
            key = record.key
            answer = ["imageId": id]
        } else {
            guard principal.allows(action: "media:CreateUploadVideo") else { throw MediaError.forbidden }
            let video = MediaContract.CreateUploadVideoRequest(
                title: title, fileName: filename, fileSize: metadata["size"].flatMap(Int64.init),
                description: metadata["description"], cateId: metadata["cateId"].flatMap(Int.init), tags: metadata["tags"])
            let created = try await media.createUploadVideo(video, principal: principal, host: host)
            guard let id = created["VideoId"] as? String, let record = try await media.catalog.video(id) else {
                throw Failure(status: 500, code: "InternalError", message: "The video was not recorded.")
            }
            key = record.key
            answer = ["videoId": id]
        }
        let contentType = type.isEmpty || type.utf8.count > 128 ? nil : type
        let upload = try await media.store.createMultipartUpload(
            bucket: media.bucket, key: key, attributes: ObjectAttributes(contentType: contentType), tags: [],
            checksumAlgorithm: nil, checksumType: nil)
        answer["key"] = key
        answer["uploadId"] = upload.uploadId
        answer["bucket"] = media.bucket
        return answer
    }

    /// The upload `uploadId` of the object `?key=`, when it is a video or image the principal owns that is still
    /// being uploaded.
    private func ownedUpload(_ uploadId: String, _ request: Request, principal: Principal) async throws -> MultipartUploadInfo {
        guard let key = request.uri.queryParameters.get("key"), !key.isEmpty else { throw MediaError.missing("key") }
        try await checkOwner(key: key, principal: principal)
        return try await media.store.multipartUpload(uploadId, bucket: media.bucket, key: key)
    }

    private func checkOwner(key: String, principal: Principal) async throws {
        let notFound = Failure(status: 404, code: "NoSuchUpload", message: "No upload of yours has that key.")
        if let video = try await media.catalog.video(bucket: media.bucket, key: key) {
            guard video.status != VideoStatus.deleted else { throw notFound }
            try MediaAPI.checkOwner(video.owner, principal: principal, what: "video")
        } else if let image = try await media.catalog.image(bucket: media.bucket, key: key) {
            try MediaAPI.checkOwner(image.owner, principal: principal, what: "image")
        } else {
            throw notFound
        }
    }

    private func parts(_ upload: MultipartUploadInfo) async throws -> [[String: Any]] {
        var list: [[String: Any]] = []
        var marker = 0
        while true {
            let page = try await media.store.listParts(upload, after: marker, maxParts: 1000)
            for part in page.parts {
                list.append(["PartNumber": part.number, "Size": part.size, "ETag": "\"\(part.etag)\""])
            }
            guard page.isTruncated, let last = page.parts.last else { return list }
            marker = last.number
        }
    }

    /// A presigned `PUT` of one part, under a credential that may write only this object.
    private func sign(_ upload: MultipartUploadInfo, partNumber: Int, principal: Principal, host: String) throws
        -> [String: Any]
    {
        let (credentials, expiration) = media.uploadCredentials(for: upload.key, principal: principal)
        let expires = max(1, min(3600, Int(expiration.timeIntervalSinceNow)))
        let url = try media.presignedURL(
            method: "PUT", key: upload.key,
            query: [(name: "partNumber", value: String(partNumber)), (name: "uploadId", value: upload.uploadId)],
            base: media.uploadEndpoint(host: host), host: host, credentials: credentials, expires: expires)
        return ["url": url, "method": "PUT", "expires": expires, "headers": [String: String]()]
    }

    private struct CompleteInput: Decodable {
        struct Part: Decodable {
            var PartNumber: Int?
            var ETag: String?
        }
        var parts: [Part]?
    }

    private func complete(_ uploadId: String, _ request: Request, _ body: Data, principal: Principal, host: String)
        async throws -> [String: Any]
    {
        let input = try media.decode(CompleteInput.self, body)
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
        try await checkOwner(key: key, principal: principal)
        let location = media.endpoint(host: host) + "/" + media.bucket + "/" + key
        let upload: MultipartUploadInfo
        do {
            upload = try await media.store.multipartUpload(uploadId, bucket: media.bucket, key: key)
        } catch let error as S3Error where error.code == .noSuchUpload {
            // A repeated Complete whose first answer was lost: the object is there, the video past uploading.
            if let video = try await media.catalog.video(bucket: media.bucket, key: key), video.status != VideoStatus.uploading {
                return ["location": location, "key": key, "videoId": video.videoId]
            }
            throw error
        }
        let object = try await media.store.completeMultipartUpload(
            upload, parts: parts, fullObjectChecksums: [:], condition: .none)
        await media.objectStored(object)
        return ["location": location, "key": key, "size": object.size]
    }
}

extension HTTPField.Name {
    static let uppyVersions = Self("Uppy-Versions")!
}
