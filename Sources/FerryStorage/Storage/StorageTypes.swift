import Foundation

/// A bucket as the store knows it.
public struct BucketInfo: Sendable, Hashable {
    /// Bucket name.
    public var name: String
    /// When it was created.
    public var createdAt: Date
}

/// The HTTP attributes and user metadata stored with an object.
public struct ObjectAttributes: Codable, Sendable, Hashable {
    /// `Content-Type`.
    public var contentType: String?
    /// `Content-Disposition`.
    public var contentDisposition: String?
    /// `Cache-Control`.
    public var cacheControl: String?
    /// `Content-Encoding` (with `aws-chunked` removed).
    public var contentEncoding: String?
    /// `Content-Language`.
    public var contentLanguage: String?
    /// `Expires`.
    public var expires: String?
    /// User metadata from `x-amz-meta-*`, names lowercased without the prefix.
    public var userMetadata: [String: String]

    /// Creates attributes.
    public init(
        contentType: String? = nil, contentDisposition: String? = nil, cacheControl: String? = nil,
        contentEncoding: String? = nil, contentLanguage: String? = nil, expires: String? = nil,
        userMetadata: [String: String] = [:]
    ) {
        self.contentType = contentType
        self.contentDisposition = contentDisposition
        self.cacheControl = cacheControl
        self.contentEncoding = contentEncoding
        self.contentLanguage = contentLanguage
        self.expires = expires
        self.userMetadata = userMetadata
    }
}

/// One stored file an object's bytes come from; an object is the concatenation of its segments.
public struct BlobSegment: Codable, Sendable, Hashable {
    /// Blob name inside the store (never derived from a key).
    public var blob: String
    /// Bytes of the blob that belong to the object.
    public var size: Int64
    /// Where those bytes start in the blob; nil is 0. A copied range shares its source's file and starts inside it.
    public var offset: Int64?

    /// Creates a segment of `size` bytes at `offset` in `blob`.
    public init(blob: String, size: Int64, offset: Int64? = nil) {
        self.blob = blob
        self.size = size
        self.offset = offset == 0 ? nil : offset
    }
}

/// A tag on an object (S3 object tagging): up to 10 per object, keys of at most 128 and values of at most 256
/// characters.
public struct ObjectTag: Codable, Sendable, Hashable {
    /// Tag key.
    public var key: String
    /// Tag value.
    public var value: String

    /// Creates a tag.
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}

/// One part of a multipart object, as GetObjectAttributes and `GET ?partNumber=` describe it.
public struct ObjectPart: Codable, Sendable, Hashable {
    /// Part number in the completed object (the number the part was uploaded with).
    public var number: Int
    /// Size in bytes.
    public var size: Int64
    /// The part's checksums by S3 algorithm name, base64.
    public var checksums: [String: String]

    /// Creates a part description.
    public init(number: Int, size: Int64, checksums: [String: String] = [:]) {
        self.number = number
        self.size = size
        self.checksums = checksums
    }
}

/// An object's catalog entry.
public struct ObjectInfo: Sendable, Hashable {
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// Size in bytes.
    public var size: Int64
    /// ETag without quotes: hex MD5, or `hex-N` for a multipart object.
    public var etag: String
    /// When it was written.
    public var lastModified: Date
    /// HTTP attributes and user metadata.
    public var attributes: ObjectAttributes
    /// Checksums by S3 algorithm name (`CRC32`, …), base64; composite values end in `-N`.
    public var checksums: [String: String]
    /// `COMPOSITE` or `FULL_OBJECT` when there is a checksum.
    public var checksumType: String?
    /// Where the bytes are.
    public var manifest: [BlobSegment]
    /// Number of parts for a multipart object, nil for a single PUT.
    public var partCount: Int?
    /// Tags, in the order they were given.
    public var tags: [ObjectTag] = []
    /// The parts of a multipart object in order (nil for a single PUT, and for objects stored before parts were
    /// recorded).
    public var parts: [ObjectPart]?
    /// The long-term access key the object's bytes count against (whoever wrote it, through a temporary credential
    /// too); nil for objects the service wrote itself or stored before quotas.
    public var owner: String? = nil
}

/// A multipart upload in progress.
public struct MultipartUploadInfo: Sendable, Hashable {
    /// Upload id.
    public var uploadId: String
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// Creation time.
    public var initiated: Date
    /// Attributes the completed object will carry.
    public var attributes: ObjectAttributes
    /// S3 name of the checksum algorithm the upload was created with.
    public var checksumAlgorithm: String?
    /// `COMPOSITE` or `FULL_OBJECT`.
    public var checksumType: String?
    /// Tags the completed object will carry (`x-amz-tagging` on CreateMultipartUpload).
    public var tags: [ObjectTag] = []
    /// The long-term access key the upload and its parts count against (the completed object is its too); nil for
    /// uploads started before quotas.
    public var owner: String? = nil
}

/// A stored part of a multipart upload.
public struct PartInfo: Sendable, Hashable {
    /// Part number, 1–10000.
    public var number: Int
    /// Size in bytes.
    public var size: Int64
    /// Hex MD5 of the part, without quotes.
    public var etag: String
    /// Checksums by S3 algorithm name, base64.
    public var checksums: [String: String]
    /// Where the bytes are: one new blob for an uploaded part; for a copied part, ranges of blobs it shares with its
    /// source. The first segment's blob is new with every write of the part, so it names this version of the part.
    public var segments: [BlobSegment]
    /// When it was written.
    public var lastModified: Date

    /// The blob that names this version of the part.
    public var blob: String { segments[0].blob }
}

/// A completed multipart upload, remembered for a while so that a client retrying CompleteMultipartUpload after a
/// lost response gets the same answer instead of NoSuchUpload.
public struct CompletedUpload: Sendable, Hashable {
    /// The upload id.
    public var uploadId: String
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// The part numbers and ETags (unquoted) the completion listed, in order.
    public var parts: [CompletedUploadPart]
    /// The ETag of the object it produced (unquoted).
    public var etag: String
    /// When it completed.
    public var completedAt: Date
}

/// A part as a completion listed it.
public struct CompletedUploadPart: Codable, Sendable, Hashable {
    /// Part number.
    public var number: Int
    /// ETag without quotes.
    public var etag: String

    /// Creates a part of a completed upload.
    package init(number: Int, etag: String) {
        self.number = number
        self.etag = etag
    }
}

/// A page of ListObjectsV2.
public struct ObjectListing: Sendable {
    /// Objects of the page.
    public var objects: [ObjectInfo]
    /// Common prefixes of the page.
    public var commonPrefixes: [String]
    /// Whether more results follow.
    public var isTruncated: Bool
    /// The last key or prefix returned, from which the next page starts.
    public var nextMarker: String?

    /// Creates a page.
    package init(objects: [ObjectInfo], commonPrefixes: [String], isTruncated: Bool, nextMarker: String? = nil) {
        self.objects = objects
        self.commonPrefixes = commonPrefixes
        self.isTruncated = isTruncated
        self.nextMarker = nextMarker
    }
}

/// A page of ListMultipartUploads.
public struct MultipartUploadListing: Sendable {
    /// Uploads of the page.
    public var uploads: [MultipartUploadInfo] = []
    /// Common prefixes of the page.
    public var commonPrefixes: [String] = []
    /// Whether more results follow.
    public var isTruncated = false
    /// The last key or common prefix returned, from which the next page starts.
    public var nextKeyMarker: String?
    /// The last upload's id, when the page ended with an upload.
    public var nextUploadIdMarker: String?
}

/// How a listing with a delimiter rolls keys up: a key that has the delimiter after the listing's prefix stands as
/// its bytes through that delimiter. Matched by UTF-8 bytes.
struct KeyRollup: Sendable {
    let prefix: [UInt8]
    let delimiter: [UInt8]?

    init(prefix: String, delimiter: String?) {
        self.prefix = Array(prefix.utf8)
        self.delimiter = delimiter.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
    }

    /// A key marker after every key that begins with `common` and before every later key, in byte order: keys are at
    /// most 1,024 bytes, and this one continues `common` with more bytes of the greatest scalar than any key holds.
    static func pastEveryKey(under common: String) -> String {
        common + String(repeating: "\u{10FFFF}", count: 257)
    }

    /// The common prefix `key` (which begins with the prefix) rolls up into, if any.
    func commonPrefix(_ key: String) -> String? {
        guard let delimiter else { return nil }
        let rest = Array(key.utf8.dropFirst(prefix.count))
        guard let match = rest.firstRange(of: delimiter) else { return nil }
        return String(decoding: prefix + rest[..<match.upperBound], as: UTF8.self)
    }
}

/// What the store computed while it wrote a body, handed to the request's verifier before anything becomes visible.
public struct BodyDigests: Sendable {
    /// Bytes written.
    public var size: Int64
    /// MD5 of the body.
    public var md5: [UInt8]
    /// Raw checksums by S3 algorithm name (`CRC32`, `SHA256`, …) that the request asked for.
    public var checksums: [String: [UInt8]]

    /// Creates the digests of a body.
    package init(size: Int64, md5: [UInt8], checksums: [String: [UInt8]]) {
        self.size = size
        self.md5 = md5
        self.checksums = checksums
    }
}
