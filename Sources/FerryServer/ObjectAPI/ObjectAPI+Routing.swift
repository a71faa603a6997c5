import FerryCore
import HTTPTypes

extension ObjectAPI {
    /// An S3 operation Ferry implements, with the IAM actions that authorize it.
    enum Operation: Sendable, CaseIterable {
        case listBuckets, createBucket, headBucket, deleteBucket, getBucketLocation, getBucketVersioning
        case getBucketCors, putBucketCors, deleteBucketCors, getBucketLifecycleConfiguration
        case putBucketLifecycleConfiguration, deleteBucketLifecycle, listObjects, listObjectsV2, listObjectVersions
        case listMultipartUploads, deleteObjects, postObject, putObject, copyObject, getObject, headObject
        case deleteObject, getObjectAttributes, getObjectTagging, putObjectTagging, deleteObjectTagging
        case createMultipartUpload, uploadPart, uploadPartCopy, listParts, completeMultipartUpload
        case abortMultipartUpload

        /// S3's name of the operation: the case's name capitalized (`listBuckets` is `ListBuckets`).
        var rawValue: String {
            let name = String(describing: self)
            return name.prefix(1).uppercased() + name.dropFirst()
        }

        /// The policy actions (S3's IAM names) a request needs, all of them, on the addressed bucket and key.
        ///
        /// DeleteObjects asks for `s3:DeleteObject` per key and the copies for `s3:GetObject` on their source, in
        /// the operations themselves.
        var actions: [String] {
            switch self {
            case .listBuckets: ["s3:ListAllMyBuckets"]
            case .createBucket: ["s3:CreateBucket"]
            case .headBucket, .listObjects, .listObjectsV2: ["s3:ListBucket"]
            case .listObjectVersions: ["s3:ListBucketVersions"]
            case .deleteBucket: ["s3:DeleteBucket"]
            case .getBucketLocation: ["s3:GetBucketLocation"]
            case .getBucketVersioning: ["s3:GetBucketVersioning"]
            case .getBucketCors: ["s3:GetBucketCORS"]
            case .putBucketCors, .deleteBucketCors: ["s3:PutBucketCORS"]
            case .getBucketLifecycleConfiguration: ["s3:GetLifecycleConfiguration"]
            case .putBucketLifecycleConfiguration, .deleteBucketLifecycle: ["s3:PutLifecycleConfiguration"]
            case .listMultipartUploads: ["s3:ListBucketMultipartUploads"]
            case .deleteObjects: []
            case .putObject, .copyObject, .postObject, .createMultipartUpload, .uploadPart, .uploadPartCopy,
                .completeMultipartUpload:
                ["s3:PutObject"]
            case .getObject, .headObject: ["s3:GetObject"]
            case .getObjectAttributes: ["s3:GetObject", "s3:GetObjectAttributes"]
            case .getObjectTagging: ["s3:GetObjectTagging"]
            case .putObjectTagging: ["s3:PutObjectTagging"]
            case .deleteObjectTagging: ["s3:DeleteObjectTagging"]
            case .deleteObject: ["s3:DeleteObject"]
            case .listParts: ["s3:ListMultipartUploadParts"]
            case .abortMultipartUpload: ["s3:AbortMultipartUpload"]
            }
        }
    }

    /// What a write that sets tags needs beside its own actions: `s3:PutObjectTagging`, as S3 asks, for a PutObject,
    /// CreateMultipartUpload or replacing CopyObject with an `x-amz-tagging` header (lifecycle rules expire objects by
    /// their tags). A copy that keeps its source's tags is checked by ``copyObject(_:)``.
    static func taggingActions(_ operation: Operation, _ headers: HTTPFields) -> [String] {
        guard let tagging = headers[.amzTagging], !tagging.isEmpty else { return [] }
        switch operation {
        case .putObject, .createMultipartUpload: return ["s3:PutObjectTagging"]
        case .copyObject where headers[.amzTaggingDirective]?.uppercased() == "REPLACE": return ["s3:PutObjectTagging"]
        default: return []
        }
    }

    /// Query parameters that name a bucket sub-resource Ferry does not implement, with the noun of its operations
    /// (`GET ?policy` is GetBucketPolicy). A request for one answers 501 NotImplemented and changes nothing.
    static let unimplementedBucketSubresources: [String: String] = [
        "accelerate": "BucketAccelerateConfiguration", "acl": "BucketAcl", "analytics": "BucketAnalyticsConfiguration",
        "encryption": "BucketEncryption", "intelligent-tiering": "BucketIntelligentTieringConfiguration",
        "inventory": "BucketInventoryConfiguration",
        "logging": "BucketLogging", "metadataTable": "BucketMetadataTableConfiguration",
        "metadataConfiguration": "BucketMetadataConfiguration", "metadataInventoryTable": "BucketMetadataInventoryTable",
        "metadataJournalTable": "BucketMetadataJournalTable", "metrics": "BucketMetricsConfiguration",
        "notification": "BucketNotificationConfiguration", "object-lock": "ObjectLockConfiguration",
        "ownershipControls": "BucketOwnershipControls", "policy": "BucketPolicy", "policyStatus": "BucketPolicyStatus",
        "publicAccessBlock": "PublicAccessBlock", "replication": "BucketReplication",
        "requestPayment": "BucketRequestPayment", "tagging": "BucketTagging", "website": "BucketWebsite",
        "session": "Session", "abac": "BucketAbac", "storageClassAnalysis": "BucketStorageClassAnalysis",
    ]

    /// Query parameters that name an object sub-resource Ferry does not implement, with the noun of its operations.
    static let unimplementedObjectSubresources: [String: String] = [
        "acl": "ObjectAcl", "legal-hold": "ObjectLegalHold", "retention": "ObjectRetention", "torrent": "ObjectTorrent",
        "restore": "RestoreObject", "select": "SelectObjectContent", "renameObject": "RenameObject",
    ]

    /// Sub-resources an object's path takes (`?tagging`, `?uploads`, `?uploadId`, …), whatever a bucket's path makes of
    /// the same names.
    static let objectSubresources: Set<String> = ["tagging", "acl", "uploads", "uploadId", "partNumber", "attributes"]

    /// Sub-resources Ferry implements; a request naming one is routed to its operation, never to the plain one.
    static let implementedBucketSubresources = Set(bucketSubresourceOperations.map(\.name))

    /// The operations of the bucket sub-resources Ferry implements, by method, in the order they are looked for.
    static let bucketSubresourceOperations: [(name: String, method: HTTPRequest.Method, operation: Operation)] = [
        ("location", .get, .getBucketLocation), ("versioning", .get, .getBucketVersioning),
        ("versions", .get, .listObjectVersions), ("uploads", .get, .listMultipartUploads),
        ("cors", .get, .getBucketCors), ("lifecycle", .get, .getBucketLifecycleConfiguration),
        ("cors", .put, .putBucketCors), ("lifecycle", .put, .putBucketLifecycleConfiguration),
        ("cors", .delete, .deleteBucketCors), ("lifecycle", .delete, .deleteBucketLifecycle),
        ("delete", .post, .deleteObjects),
    ]

    /// Chooses the operation from method, path and query, as S3 does: the sub-resource named in the query decides
    /// first, then the method. Every sub-resource S3 defines is known here, so a request for one Ferry lacks answers
    /// NotImplemented instead of running as the plain operation (a `PUT ?tagging` never overwrites an object).
    static func operation(
        method: HTTPRequest.Method, bucket: String, key: String, query: [(name: String, value: String)],
        headers: HTTPFields = [:]
    ) throws -> Operation {
        let names = Set(query.map(\.name))
        if bucket.isEmpty {
            guard method == .get else { throw methodNotAllowed }
            return .listBuckets
        }
        if key.isEmpty {
            if let noun = unimplementedBucketSubresources.first(where: { names.contains($0.key) })?.value {
                throw notImplemented(verb(method, noun: noun))
            }
            if let noun = unimplementedObjectSubresources.first(where: { names.contains($0.key) })?.value {
                throw notImplemented(noun.hasSuffix("Object") || noun.hasSuffix("Content") ? noun : verb(method, noun: noun))
            }
            // An object's sub-resource without its key (`DELETE /bucket?uploadId=…`) is no operation on the bucket.
            if !names.isDisjoint(with: ["uploadId", "partNumber", "attributes"]) { throw methodNotAllowed }
            if method == .head { return .headBucket }
            if method == .put, names.contains("versioning") { throw notImplemented("PutBucketVersioning") }
            let subresource = bucketSubresourceOperations.first { $0.method == method && names.contains($0.name) }
            if let subresource { return subresource.operation }
            // Another method on an implemented sub-resource (`GET ?delete`, `POST ?cors`) is none of its operations.
            if !names.isDisjoint(with: implementedBucketSubresources) { throw methodNotAllowed }
            switch method {
            case .get: return query.first { $0.name == "list-type" }?.value == "2" ? .listObjectsV2 : .listObjects
            case .put: return .createBucket
            case .delete: return .deleteBucket
            case .post: return .postObject
            default: throw methodNotAllowed
            }
        }
        if let noun = unimplementedObjectSubresources.first(where: { names.contains($0.key) })?.value {
            throw notImplemented(noun.hasSuffix("Object") || noun.hasSuffix("Content") ? noun : verb(method, noun: noun))
        }
        // A bucket's sub-resource on an object's path (`PUT /bucket/key?policy`) is no operation on the object: never
        // the plain one, which would overwrite, delete or read it.
        if let noun = unimplementedBucketSubresources.first(where: { names.contains($0.key) && !objectSubresources.contains($0.key) })?
            .value
        {
            throw notImplemented(verb(method, noun: noun))
        }
        if !names.isDisjoint(with: implementedBucketSubresources.subtracting(objectSubresources)) { throw methodNotAllowed }
        // A read with a customer's encryption key (SSE-C) is not answered with bytes no such key encrypted.
        if method == .get || method == .head,
            let name = headers.first(where: { $0.name.canonicalName.hasPrefix("x-amz-server-side-encryption-customer-") })?
                .name.canonicalName
        {
            throw notImplemented("Server-side encryption (\(name))")
        }
        switch method {
        case .get:
            if names.contains("uploadId") { return .listParts }
            if names.contains("tagging") { return .getObjectTagging }
            if names.contains("attributes") { return .getObjectAttributes }
            if names.contains("uploads") { throw methodNotAllowed }
            return .getObject
        case .head:
            return .headObject
        case .put:
            if names.contains("tagging") { return .putObjectTagging }
            if names.contains("uploadId") || names.contains("partNumber") {
                return headers[.amzCopySource] != nil ? .uploadPartCopy : .uploadPart
            }
            if names.contains("attributes") || names.contains("uploads") { throw methodNotAllowed }
            return headers[.amzCopySource] != nil ? .copyObject : .putObject
        case .delete:
            if names.contains("tagging") { return .deleteObjectTagging }
            if names.contains("uploadId") { return .abortMultipartUpload }
            if names.contains("attributes") || names.contains("uploads") { throw methodNotAllowed }
            return .deleteObject
        case .post:
            if names.contains("uploads") { return .createMultipartUpload }
            if names.contains("uploadId") { return .completeMultipartUpload }
            throw methodNotAllowed
        default:
            throw methodNotAllowed
        }
    }

    /// The operation name for a method on a sub-resource noun: `GET` + `BucketPolicy` is `GetBucketPolicy`.
    static func verb(_ method: HTTPRequest.Method, noun: String) -> String {
        switch method {
        case .get, .head: "Get" + noun
        case .put: "Put" + noun
        case .delete: "Delete" + noun
        case .post: "Post" + noun
        default: method.rawValue + " " + noun
        }
    }

    static func notImplemented(_ operation: String) -> S3Error {
        S3Error(.notImplemented, "\(operation) is not implemented by Ferry.", details: ["Operation": operation])
    }

    static let methodNotAllowed = S3Error(.methodNotAllowed, "The specified method is not allowed against this resource.")

    /// A copy (CopyObject, UploadPartCopy) takes its bytes from its source: one that carries a body of its own is
    /// refused, as S3 refuses it, rather than dropping the body and answering as if it were stored.
    static func refuseCopyBody(_ headers: HTTPFields) throws {
        // An aws-chunked body's own length counts its framing: its decoded length is what it carries.
        if let length = headers[.amzDecodedContentLength] ?? headers[.contentLength], length != "0" {
            throw S3Error(
                .invalidRequest,
                "The request included a body. Requests of this type must not include a non-empty body.")
        }
    }

    /// Request headers that ask for features Ferry does not implement; a write carrying one answers NotImplemented
    /// before anything is stored, rather than storing the object without what the header asked for.
    static func refuseUnimplementedHeaders(_ headers: HTTPFields) throws {
        for field in headers {
            let name = field.name.canonicalName
            if name.hasPrefix("x-amz-server-side-encryption") || name.hasPrefix("x-amz-copy-source-server-side-encryption") {
                throw notImplemented("Server-side encryption (\(name))")
            }
            if name.hasPrefix("x-amz-object-lock-")
                || (name == "x-amz-bucket-object-lock-enabled" && field.value.lowercased() == "true")
            {
                throw notImplemented("Object lock (\(name))")
            }
            if name.hasPrefix("x-amz-grant-") { throw notImplemented("Access control lists (\(name))") }
            if name == "x-amz-website-redirect-location" { throw notImplemented("Website redirects") }
            if name == "x-amz-write-offset-bytes" { throw notImplemented("Appends (x-amz-write-offset-bytes)") }
        }
        if let ownership = headers[.amzObjectOwnership], ownership != "BucketOwnerEnforced" {
            // Ferry has no ACLs: every bucket behaves as BucketOwnerEnforced.
            throw notImplemented("Object ownership \(ownership.prefix(40))")
        }
        if let acl = headers[.amzACL], !["private", "bucket-owner-full-control"].contains(acl) {
            throw notImplemented("Access control lists (x-amz-acl: \(acl.prefix(40)))")
        }
        if let storageClass = headers[.amzStorageClass], storageClass != "STANDARD" {
            guard S3StorageClass.all.contains(storageClass) else {
                throw S3Error(.invalidStorageClass, "The storage class you specified is not valid")
            }
            throw notImplemented("Storage class \(storageClass)")
        }
    }
}

/// S3's storage class names.
enum S3StorageClass {
    static let all: Set<String> = [
        "STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER",
        "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE", "FSX_OPENZFS",
    ]
}
