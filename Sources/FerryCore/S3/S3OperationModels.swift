import Foundation

// The XML documents of the S3 operations beyond upload and download: ListObjectVersions,
// GetBucketVersioning, DeleteObjects, CopyObject / UploadPartCopy, object tagging, GetObjectAttributes and bucket
// CORS. Element names are S3's; optional elements are omitted when nil.

/// `ListVersionsResult`, the answer to ListObjectVersions: in a bucket without versioning every object is its one
/// version, `null`.
package struct S3ListVersionsResult: Encodable, Sendable {
    package struct Version: Encodable, Sendable {
        package var key: String
        package var versionId = "null"
        package var isLatest = true
        package var lastModified: String
        package var eTag: String
        package var size: Int64
        package var storageClass = "STANDARD"
        package var owner: S3Owner
        package var checksumAlgorithm: String?
        package var checksumType: String?

        /// The one version, `null`, of an object as ListObjects lists it.
        package init(_ object: ListBucketResult.Object, owner: S3Owner) {
            key = object.key
            lastModified = object.lastModified
            eTag = object.eTag
            size = object.size
            storageClass = object.storageClass
            self.owner = owner
            checksumAlgorithm = object.checksumAlgorithm
            checksumType = object.checksumType
        }

        enum CodingKeys: String, CodingKey {
            case key = "Key", versionId = "VersionId", isLatest = "IsLatest", lastModified = "LastModified"
            case eTag = "ETag", size = "Size", storageClass = "StorageClass", owner = "Owner"
            case checksumAlgorithm = "ChecksumAlgorithm", checksumType = "ChecksumType"
        }
    }
    package var name: String
    package var prefix: String
    package var keyMarker: String
    package var versionIdMarker: String
    package var nextKeyMarker: String?
    package var nextVersionIdMarker: String?
    package var delimiter: String?
    package var maxKeys: Int
    package var isTruncated: Bool
    package var encodingType: String?
    package var versions: [Version]
    package var commonPrefixes: [S3CommonPrefix]

    package init(
        name: String, prefix: String, keyMarker: String, versionIdMarker: String, nextKeyMarker: String?,
        nextVersionIdMarker: String?, delimiter: String?, maxKeys: Int, isTruncated: Bool, encodingType: String?,
        versions: [Version], commonPrefixes: [S3CommonPrefix]
    ) {
        self.name = name
        self.prefix = prefix
        self.keyMarker = keyMarker
        self.versionIdMarker = versionIdMarker
        self.nextKeyMarker = nextKeyMarker
        self.nextVersionIdMarker = nextVersionIdMarker
        self.delimiter = delimiter
        self.maxKeys = maxKeys
        self.isTruncated = isTruncated
        self.encodingType = encodingType
        self.versions = versions
        self.commonPrefixes = commonPrefixes
    }

    enum CodingKeys: String, CodingKey {
        case name = "Name", prefix = "Prefix", keyMarker = "KeyMarker", versionIdMarker = "VersionIdMarker"
        case nextKeyMarker = "NextKeyMarker", nextVersionIdMarker = "NextVersionIdMarker", delimiter = "Delimiter"
        case maxKeys = "MaxKeys", isTruncated = "IsTruncated", encodingType = "EncodingType", versions = "Version"
        case commonPrefixes = "CommonPrefixes"
    }
}

/// `Delete`, the request body of DeleteObjects.
package struct S3DeleteRequest: Decodable, Sendable {
    package struct Object: Decodable, Sendable {
        package var key: String
        package var versionId: String?
        package var eTag: String?
        package var lastModifiedTime: String?
        package var size: Int64?
        enum CodingKeys: String, CodingKey {
            case key = "Key", versionId = "VersionId", eTag = "ETag", lastModifiedTime = "LastModifiedTime", size = "Size"
        }
    }
    package var quiet: Bool
    package var objects: [Object]

    enum CodingKeys: String, CodingKey { case quiet = "Quiet", objects = "Object" }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        // xs:boolean: `true`, `false`, `1` or `0` (white space around it collapsed); anything else (`yes`) is
        // malformed, not a guess.
        switch try c.decodeIfPresent(String.self, forKey: .quiet)?.trimmingCharacters(in: .whitespacesAndNewlines) {
        case nil, "false", "0": quiet = false
        case "true", "1": quiet = true
        default:
            throw DecodingError.dataCorruptedError(forKey: .quiet, in: c, debugDescription: "Quiet is not a boolean.")
        }
        objects = try c.decodeIfPresent([Object].self, forKey: .objects) ?? []
    }
}

/// `DeleteResult`, the answer to DeleteObjects.
package struct S3DeleteResult: Encodable, Sendable {
    package struct Deleted: Encodable, Sendable {
        package var key: String
        package var versionId: String?
        enum CodingKeys: String, CodingKey { case key = "Key", versionId = "VersionId" }
        package init(key: String, versionId: String?) {
            self.key = key
            self.versionId = versionId
        }
    }
    package struct Failure: Encodable, Sendable {
        package var key: String
        package var versionId: String?
        package var code: String
        package var message: String
        enum CodingKeys: String, CodingKey { case key = "Key", versionId = "VersionId", code = "Code", message = "Message" }
        package init(key: String, versionId: String?, code: String, message: String) {
            self.key = key
            self.versionId = versionId
            self.code = code
            self.message = message
        }
    }
    package var deleted: [Deleted]
    package var errors: [Failure]

    package init(deleted: [Deleted], errors: [Failure]) {
        self.deleted = deleted
        self.errors = errors
    }

    enum CodingKeys: String, CodingKey { case deleted = "Deleted", errors = "Error" }
}

/// `CopyObjectResult` (CopyObject) and `CopyPartResult` (UploadPartCopy).
package struct S3CopyResult: Encodable, Sendable {
    package var eTag: String
    package var lastModified: String
    package var checksums: S3ChecksumFields
    package var checksumType: String?

    package init(eTag: String, lastModified: String, checksums: S3ChecksumFields, checksumType: String? = nil) {
        self.eTag = eTag
        self.lastModified = lastModified
        self.checksums = checksums
        self.checksumType = checksumType
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
        try c.encode(eTag, forKey: .init(stringValue: "ETag"))
        try c.encode(lastModified, forKey: .init(stringValue: "LastModified"))
        try c.encodeIfPresent(checksumType, forKey: .init(stringValue: "ChecksumType"))
        try checksums.encode(into: &c)
    }
}

/// `Tagging`, the body of Put/GetObjectTagging.
package struct S3Tagging: Codable, Sendable {
    package struct Tag: Codable, Sendable, Hashable {
        package var key: String
        package var value: String
        enum CodingKeys: String, CodingKey { case key = "Key", value = "Value" }
        package init(key: String, value: String) {
            self.key = key
            self.value = value
        }
        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            key = try c.decode(String.self, forKey: .key)
            // S3's schema requires the element, which may be empty (`<Value/>`): a tag without it is MalformedXML.
            value = try c.decode(String.self, forKey: .value)
        }
    }
    package struct TagSet: Codable, Sendable {
        package var tags: [Tag]
        enum CodingKeys: String, CodingKey { case tags = "Tag" }
        package init(tags: [Tag]) { self.tags = tags }
        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            tags = try c.decodeIfPresent([Tag].self, forKey: .tags) ?? []
        }
    }
    package var tagSet: TagSet

    package init(tags: [Tag]) { tagSet = TagSet(tags: tags) }

    enum CodingKeys: String, CodingKey { case tagSet = "TagSet" }
}

/// `GetObjectAttributesResponse`, the answer to GetObjectAttributes; each element is present when asked for.
package struct S3ObjectAttributesResult: Encodable, Sendable {
    package struct Checksum: Encodable, Sendable {
        package var values: S3ChecksumFields
        package var checksumType: String?
        package func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
            try values.encode(into: &c)
            try c.encodeIfPresent(checksumType, forKey: .init(stringValue: "ChecksumType"))
        }
        package init(values: S3ChecksumFields, checksumType: String?) {
            self.values = values
            self.checksumType = checksumType
        }
    }
    package struct Part: Encodable, Sendable {
        package var partNumber: Int
        package var size: Int64
        package var checksums: S3ChecksumFields
        package func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
            try c.encode(partNumber, forKey: .init(stringValue: "PartNumber"))
            try c.encode(size, forKey: .init(stringValue: "Size"))
            try checksums.encode(into: &c)
        }
        package init(partNumber: Int, size: Int64, checksums: S3ChecksumFields) {
            self.partNumber = partNumber
            self.size = size
            self.checksums = checksums
        }
    }
    package struct ObjectParts: Encodable, Sendable {
        package var totalPartsCount: Int
        package var partNumberMarker: Int
        package var nextPartNumberMarker: Int
        package var maxParts: Int
        package var isTruncated: Bool
        package var parts: [Part]
        enum CodingKeys: String, CodingKey {
            case totalPartsCount = "PartsCount", partNumberMarker = "PartNumberMarker"
            case nextPartNumberMarker = "NextPartNumberMarker", maxParts = "MaxParts", isTruncated = "IsTruncated"
            case parts = "Part"
        }
        package init(
            totalPartsCount: Int, partNumberMarker: Int, nextPartNumberMarker: Int, maxParts: Int, isTruncated: Bool,
            parts: [Part]
        ) {
            self.totalPartsCount = totalPartsCount
            self.partNumberMarker = partNumberMarker
            self.nextPartNumberMarker = nextPartNumberMarker
            self.maxParts = maxParts
            self.isTruncated = isTruncated
            self.parts = parts
        }
    }
    package var eTag: String?
    package var checksum: Checksum?
    package var objectParts: ObjectParts?
    package var storageClass: String?
    package var objectSize: Int64?

    package init() {}

    enum CodingKeys: String, CodingKey {
        case eTag = "ETag", checksum = "Checksum", objectParts = "ObjectParts", storageClass = "StorageClass"
        case objectSize = "ObjectSize"
    }
}

/// `CORSConfiguration`, the body of Put/GetBucketCors.
package struct S3CORSConfiguration: Codable, Sendable, Hashable {
    package struct Rule: Codable, Sendable, Hashable {
        package var id: String?
        package var allowedMethods: [String]
        package var allowedOrigins: [String]
        package var allowedHeaders: [String]
        package var exposeHeaders: [String]
        package var maxAgeSeconds: Int?

        enum CodingKeys: String, CodingKey {
            case id = "ID", allowedMethods = "AllowedMethod", allowedOrigins = "AllowedOrigin"
            case allowedHeaders = "AllowedHeader", exposeHeaders = "ExposeHeader", maxAgeSeconds = "MaxAgeSeconds"
        }

        package init(
            id: String? = nil, allowedMethods: [String], allowedOrigins: [String], allowedHeaders: [String] = [],
            exposeHeaders: [String] = [], maxAgeSeconds: Int? = nil
        ) {
            self.id = id
            self.allowedMethods = allowedMethods
            self.allowedOrigins = allowedOrigins
            self.allowedHeaders = allowedHeaders
            self.exposeHeaders = exposeHeaders
            self.maxAgeSeconds = maxAgeSeconds
        }

        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decodeIfPresent(String.self, forKey: .id)
            allowedMethods = try c.decodeIfPresent([String].self, forKey: .allowedMethods) ?? []
            allowedOrigins = try c.decodeIfPresent([String].self, forKey: .allowedOrigins) ?? []
            allowedHeaders = try c.decodeIfPresent([String].self, forKey: .allowedHeaders) ?? []
            exposeHeaders = try c.decodeIfPresent([String].self, forKey: .exposeHeaders) ?? []
            maxAgeSeconds = try c.decodeIfPresent(Int.self, forKey: .maxAgeSeconds)
        }
    }
    package var rules: [Rule]

    package init(rules: [Rule]) { self.rules = rules }

    enum CodingKeys: String, CodingKey { case rules = "CORSRule" }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        rules = try c.decodeIfPresent([Rule].self, forKey: .rules) ?? []
    }
}
