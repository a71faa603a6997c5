import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The S3-compatible object API: path-style addressing (`/bucket/key`), S3 XML bodies and S3 error documents.
///
/// Every request is authenticated with SigV4 and authorized against the principal's policy before it touches the
/// store; nothing is allowed by default.
public struct ObjectAPI: Sendable {
    let store: any ObjectStore
    let authenticator: RequestAuthenticator
    let region: String
    /// Told about every object stored (PutObject, CompleteMultipartUpload), so the media catalog follows storage.
    var objectStored: @Sendable (ObjectInfo) async -> Void = { _ in }

    /// An S3 operation with the IAM action that authorizes it.
    enum Operation: String, Sendable {
        case listBuckets = "ListBuckets"
        case createBucket = "CreateBucket"
        case headBucket = "HeadBucket"
        case deleteBucket = "DeleteBucket"
        case getBucketLocation = "GetBucketLocation"
        case listObjectsV2 = "ListObjectsV2"
        case listMultipartUploads = "ListMultipartUploads"
        case putObject = "PutObject"
        case getObject = "GetObject"
        case headObject = "HeadObject"
        case deleteObject = "DeleteObject"
        case createMultipartUpload = "CreateMultipartUpload"
        case uploadPart = "UploadPart"
        case listParts = "ListParts"
        case completeMultipartUpload = "CompleteMultipartUpload"
        case abortMultipartUpload = "AbortMultipartUpload"

        /// The policy action (S3's IAM names).
        var action: String {
            switch self {
            case .listBuckets: "s3:ListAllMyBuckets"
            case .createBucket: "s3:CreateBucket"
            case .headBucket, .listObjectsV2: "s3:ListBucket"
            case .deleteBucket: "s3:DeleteBucket"
            case .getBucketLocation: "s3:GetBucketLocation"
            case .listMultipartUploads: "s3:ListBucketMultipartUploads"
            case .putObject, .createMultipartUpload, .uploadPart, .completeMultipartUpload: "s3:PutObject"
            case .getObject, .headObject: "s3:GetObject"
            case .deleteObject: "s3:DeleteObject"
            case .listParts: "s3:ListMultipartUploadParts"
            case .abortMultipartUpload: "s3:AbortMultipartUpload"
            }
        }
    }

    /// A request as the operations see it.
    struct S3Request: Sendable {
        var request: Request
        var requestId: String
        var bucket: String
        var key: String
        var query: [(name: String, value: String)]
        var principal: Principal
        var verified: SigV4VerifiedRequest
        var logger: Logger

        func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
        func hasQuery(_ name: String) -> Bool { query.contains { $0.name == name } }
        func header(_ name: HTTPField.Name) -> String? { request.headers[name] }
        var resource: String { key.isEmpty ? "/\(bucket)" : "/\(bucket)/\(key)" }
    }

    /// Answers one request; never throws, every failure becomes an S3 error response.
    func respond(to request: Request, logger: Logger) async -> Response {
        let requestId = Self.newRequestId()
        var logger = logger
        logger[metadataKey: "ferry.request-id"] = .string(requestId)
        let rawPath = request.uri.path
        var bucket = ""
        var key = ""
        var resource = rawPath
        do {
            let query = SigV4.parseQueryString(request.uri.query ?? "")
            (bucket, key) = try Self.splitPath(rawPath)
            resource = key.isEmpty ? "/\(bucket)" : "/\(bucket)/\(key)"
            var headers: [(name: String, value: String)] = [("host", request.head.authority ?? "")]
            for field in request.headers { headers.append((field.name.canonicalName, field.value)) }
            let authenticated = try await authenticator.authenticate(
                .init(method: request.method.rawValue, rawPath: rawPath, query: query, headers: headers))
            let operation = try Self.operation(method: request.method, bucket: bucket, key: key, query: query)
            logger.debug(
                "request",
                metadata: [
                    "ferry.operation": .string(operation.rawValue), "ferry.bucket": .string(bucket),
                    "ferry.access-key-id": .string(authenticated.principal.accessKeyId),
                ])
            guard
                authenticated.principal.allows(
                    action: operation.action, bucket: bucket.isEmpty ? nil : bucket, key: key.isEmpty ? nil : key)
            else {
                throw S3Error(.accessDenied, "Access Denied")
            }
            if !key.isEmpty { try Self.validateKey(key) }
            let s3 = S3Request(
                request: request, requestId: requestId, bucket: bucket, key: key, query: query,
                principal: authenticated.principal, verified: authenticated.verified, logger: logger)
            var response = try await perform(operation, s3)
            response.headers[.amzRequestId] = requestId
            response.headers[.amzId2] = requestId
            return response
        } catch {
            var s3Error: S3Error
            if let error = error as? S3Error {
                s3Error = error
            } else {
                logger.error("internal error", metadata: ["error": .string(String(describing: error))])
                s3Error = S3Error(.internalError, "We encountered an internal error. Please try again.")
            }
            s3Error.resource = resource
            s3Error.requestId = requestId
            logger.debug(
                "request failed", metadata: ["ferry.error-code": .string(s3Error.code.rawValue)])
            return Self.errorResponse(s3Error, head: request.method == .head)
        }
    }

    func perform(_ operation: Operation, _ request: S3Request) async throws -> Response {
        switch operation {
        case .listBuckets: try await listBuckets(request)
        case .createBucket: try await createBucket(request)
        case .headBucket: try await headBucket(request)
        case .deleteBucket: try await deleteBucket(request)
        case .getBucketLocation: try await getBucketLocation(request)
        case .listObjectsV2: try await listObjectsV2(request)
        case .listMultipartUploads: try await listMultipartUploads(request)
        case .putObject: try await putObject(request)
        case .getObject: try await getObject(request, head: false)
        case .headObject: try await getObject(request, head: true)
        case .deleteObject: try await deleteObject(request)
        case .createMultipartUpload: try await createMultipartUpload(request)
        case .uploadPart: try await uploadPart(request)
        case .listParts: try await listParts(request)
        case .completeMultipartUpload: try await completeMultipartUpload(request)
        case .abortMultipartUpload: try await abortMultipartUpload(request)
        }
    }

    /// Chooses the operation from method, path and query, as S3 does.
    static func operation(method: HTTPRequest.Method, bucket: String, key: String, query: [(name: String, value: String)])
        throws -> Operation
    {
        let has = { (name: String) in query.contains { $0.name == name } }
        if bucket.isEmpty {
            guard method == .get else { throw methodNotAllowed }
            return .listBuckets
        }
        if key.isEmpty {
            switch method {
            case .put: return .createBucket
            case .head: return .headBucket
            case .delete: return .deleteBucket
            case .get:
                if has("location") { return .getBucketLocation }
                if has("uploads") { return .listMultipartUploads }
                if has("list-type") || query.allSatisfy({ ["prefix", "delimiter", "max-keys", "continuation-token", "start-after", "encoding-type", "fetch-owner"].contains($0.name) }) {
                    return .listObjectsV2
                }
                throw S3Error(.notImplemented, "A header or query you provided implies functionality that is not implemented.")
            default: throw methodNotAllowed
            }
        }
        switch method {
        case .put: return has("uploadId") || has("partNumber") ? .uploadPart : .putObject
        case .get: return has("uploadId") ? .listParts : .getObject
        case .head: return .headObject
        case .delete: return has("uploadId") ? .abortMultipartUpload : .deleteObject
        case .post:
            if has("uploads") { return .createMultipartUpload }
            if has("uploadId") { return .completeMultipartUpload }
            throw methodNotAllowed
        default: throw methodNotAllowed
        }
    }

    static let methodNotAllowed = S3Error(.methodNotAllowed, "The specified method is not allowed against this resource.")

    /// Splits a raw path into a bucket and a decoded key.
    static func splitPath(_ rawPath: String) throws -> (bucket: String, key: String) {
        var path = Substring(rawPath)
        if path.hasPrefix("/") { path = path.dropFirst() }
        guard let slash = path.firstIndex(of: "/") else {
            return (SigV4.percentDecode(String(path)), "")
        }
        let bucket = SigV4.percentDecode(String(path[..<slash]))
        let key = SigV4.percentDecode(String(path[path.index(after: slash)...]))
        return (bucket, key)
    }

    /// Keys are at most 1024 bytes of UTF-8 and carry no `.` or `..` path segment.
    static func validateKey(_ key: String) throws {
        guard key.utf8.count <= 1024 else {
            throw S3Error(.keyTooLong, "Your key is too long", details: ["MaxSizeAllowed": "1024"])
        }
        for segment in key.split(separator: "/", omittingEmptySubsequences: false) where segment == "." || segment == ".." {
            throw S3Error(
                .invalidArgument, "Object keys must not contain '.' or '..' path segments.",
                details: ["ArgumentName": "key"])
        }
        if key.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) {
            throw S3Error(.invalidArgument, "Object keys must not contain control characters.", details: ["ArgumentName": "key"])
        }
    }

    /// Bucket names as S3 allows them: 3–63 characters of lowercase letters, digits, dots and hyphens.
    static func validateBucketName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-")
        guard (3...63).contains(name.count), name.allSatisfy({ allowed.contains($0) }),
            let first = name.first, let last = name.last, first.isLetter || first.isNumber,
            last.isLetter || last.isNumber, !name.contains("..")
        else {
            throw S3Error(.invalidBucketName, "The specified bucket is not valid.", details: ["BucketName": name])
        }
    }

    static func newRequestId() -> String {
        (0..<8).map { _ in String(format: "%02X", UInt8.random(in: 0...255)) }.joined()
    }

    // MARK: Responses

    static func xmlResponse<T: Encodable>(_ value: T, root: String, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try S3XML.encode(value, root: root)
        return Response(
            status: status, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func errorResponse(_ error: S3Error, head: Bool) -> Response {
        var headers: HTTPFields = [.amzRequestId: error.requestId ?? "", .amzId2: error.requestId ?? ""]
        if head || error.code == .notModified {
            headers[.contentLength] = "0"
            return Response(status: .init(code: error.code.httpStatus), headers: headers)
        }
        headers[.contentType] = "application/xml"
        let data = S3XML.errorDocument(error)
        return Response(
            status: .init(code: error.code.httpStatus), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
