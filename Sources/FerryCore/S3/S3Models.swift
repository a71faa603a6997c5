import Foundation

/// The S3 XML namespace that response documents declare.
public let s3XMLNamespace = "http://s3.amazonaws.com/doc/2006-03-01/"

/// Formats dates the way S3 XML does: ISO 8601 in UTC with milliseconds, `2009-10-12T17:50:30.000Z`.
public enum S3Date {
    /// Formats a date for an S3 XML element.
    public static func xml(_ date: Date) -> String {
        date.formatted(
            .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true)
                .timeSeparator(.colon).timeZone(separator: .omitted))
    }

    /// Formats a date for an HTTP header (`Last-Modified`, `Upload-Expires`): RFC 9110 IMF-fixdate (years 1 to 9999),
    /// the time taken to the millisecond and then its whole second, as a date formatter does. Computed from the time
    /// alone, without a date formatter, as it is written on every GET.
    public static func http(_ date: Date) -> String {
        let milliseconds = (min(max(date.timeIntervalSince1970, -62_135_596_800), 253_402_300_799) * 1000).rounded()
        let total = Int64((milliseconds / 1000).rounded(.down))
        let days = (total - (total < 0 ? 86_399 : 0)) / 86_400
        let second = total - days * 86_400
        // The civil date of a day count since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
        let shifted = days + 719_468
        let era = (shifted - (shifted < 0 ? 146_096 : 0)) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // March is 0
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday
        func padded(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return "\(weekdays[weekday]), \(padded(day, 2)) \(months[Int(month) - 1]) \(padded(year, 4)) "
            + "\(padded(second / 3600, 2)):\(padded(second / 60 % 60, 2)):\(padded(second % 60, 2)) GMT"
    }

    /// Parses an HTTP date header (`If-Modified-Since`, `Date`): the IMF-fixdate form, with `GMT`, `UTC` or a
    /// numeric zone (`-0000`, as Python's `formatdate` writes it).
    public static func parseHTTP(_ string: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEE, dd MMM yyyy HH:mm:ss 'UTC'", "EEE, dd MMM yyyy HH:mm:ss Z"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: string.trimmingCharacters(in: .whitespaces)) { return date }
        }
        return nil
    }

    /// Parses an S3 XML date, with or without fractional seconds.
    public static func parseXML(_ string: String) -> Date? {
        if let date = try? Date(string, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) {
            return date
        }
        return try? Date(string, strategy: .iso8601)
    }
}

/// The owner element S3 puts into listings.
public struct S3Owner: Codable, Hashable, Sendable {
    /// Owner id.
    public var id: String
    /// Owner display name.
    public var displayName: String
    /// Creates an owner.
    public init(id: String, displayName: String) {
        self.id = id
        self.displayName = displayName
    }
    enum CodingKeys: String, CodingKey {
        case id = "ID"
        case displayName = "DisplayName"
    }
}

/// `ListAllMyBucketsResult`, the answer to ListBuckets.
public struct ListAllMyBucketsResult: Codable, Hashable, Sendable {
    /// One bucket.
    public struct Bucket: Codable, Hashable, Sendable {
        /// Bucket name.
        public var name: String
        /// Creation time, S3 XML format.
        public var creationDate: String
        /// Creates an entry.
        public init(name: String, creationDate: String) {
            self.name = name
            self.creationDate = creationDate
        }
        enum CodingKeys: String, CodingKey {
            case name = "Name"
            case creationDate = "CreationDate"
        }
    }
    /// The `Buckets` wrapper element.
    public struct Buckets: Codable, Hashable, Sendable {
        /// Entries.
        public var bucket: [Bucket]
        /// Creates the wrapper.
        public init(bucket: [Bucket]) { self.bucket = bucket }
        enum CodingKeys: String, CodingKey { case bucket = "Bucket" }
        /// Decodes an empty `<Buckets/>` as no buckets.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            bucket = try container.decodeIfPresent([Bucket].self, forKey: .bucket) ?? []
        }
    }
    /// Owner of the buckets.
    public var owner: S3Owner
    /// The buckets.
    public var buckets: Buckets
    /// The token for the next page, when there is one.
    public var continuationToken: String?
    /// The prefix the listing was limited to.
    public var prefix: String?
    /// Creates the result.
    public init(owner: S3Owner, buckets: [Bucket], continuationToken: String? = nil, prefix: String? = nil) {
        self.owner = owner
        self.buckets = Buckets(bucket: buckets)
        self.continuationToken = continuationToken
        self.prefix = prefix
    }
    enum CodingKeys: String, CodingKey {
        case owner = "Owner"
        case buckets = "Buckets"
        case continuationToken = "ContinuationToken"
        case prefix = "Prefix"
    }
}

/// A `CommonPrefixes` entry of a listing.
public struct S3CommonPrefix: Codable, Hashable, Sendable {
    /// The rolled-up prefix, ending in the delimiter.
    public var prefix: String
    /// Creates an entry.
    public init(prefix: String) { self.prefix = prefix }
    enum CodingKeys: String, CodingKey { case prefix = "Prefix" }
}

/// `ListBucketResult`, the answer to ListObjects (version 1) and ListObjectsV2; the version decides which elements are
/// set (`Marker` and `NextMarker` for version 1, `KeyCount` and the continuation tokens for version 2).
public struct ListBucketResult: Codable, Hashable, Sendable {
    /// One object of the listing.
    public struct Object: Codable, Hashable, Sendable {
        /// Object key.
        public var key: String
        /// Last modification, S3 XML format.
        public var lastModified: String
        /// Quoted ETag.
        public var eTag: String
        /// Size in bytes.
        public var size: Int64
        /// Storage class, always `STANDARD` here.
        public var storageClass: String
        /// The owner: in every version 1 entry, and in version 2 with `fetch-owner=true`.
        public var owner: S3Owner?
        /// Algorithm of the stored checksum, when there is one.
        public var checksumAlgorithm: String?
        /// `FULL_OBJECT` or `COMPOSITE`, when there is a stored checksum.
        public var checksumType: String?
        /// Creates an entry.
        public init(
            key: String, lastModified: String, eTag: String, size: Int64, storageClass: String = "STANDARD",
            owner: S3Owner? = nil, checksumAlgorithm: String? = nil, checksumType: String? = nil
        ) {
            self.key = key
            self.lastModified = lastModified
            self.eTag = eTag
            self.size = size
            self.storageClass = storageClass
            self.owner = owner
            self.checksumAlgorithm = checksumAlgorithm
            self.checksumType = checksumType
        }
        enum CodingKeys: String, CodingKey {
            case key = "Key", lastModified = "LastModified", eTag = "ETag", size = "Size", storageClass = "StorageClass"
            case owner = "Owner", checksumAlgorithm = "ChecksumAlgorithm", checksumType = "ChecksumType"
        }
    }
    /// Bucket name.
    public var name: String
    /// The prefix asked for.
    public var prefix: String
    /// The marker sent (version 1).
    public var marker: String?
    /// Where the next page starts, when truncated (version 1).
    public var nextMarker: String?
    /// The delimiter asked for.
    public var delimiter: String?
    /// The most keys asked for.
    public var maxKeys: Int
    /// Number of keys and common prefixes returned (version 2).
    public var keyCount: Int?
    /// Whether more results follow.
    public var isTruncated: Bool
    /// The continuation token sent (version 2).
    public var continuationToken: String?
    /// The token to send for the next page (version 2).
    public var nextContinuationToken: String?
    /// The start-after key sent (version 2).
    public var startAfter: String?
    /// `url` when keys and prefixes are URL-encoded.
    public var encodingType: String?
    /// Objects of this page.
    public var contents: [Object]
    /// Rolled-up prefixes of this page.
    public var commonPrefixes: [S3CommonPrefix]

    /// Creates a result.
    public init(
        name: String, prefix: String, marker: String? = nil, nextMarker: String? = nil, delimiter: String?,
        maxKeys: Int, keyCount: Int? = nil, isTruncated: Bool, continuationToken: String? = nil,
        nextContinuationToken: String? = nil, startAfter: String? = nil, encodingType: String? = nil,
        contents: [Object], commonPrefixes: [S3CommonPrefix]
    ) {
        self.name = name
        self.prefix = prefix
        self.marker = marker
        self.nextMarker = nextMarker
        self.delimiter = delimiter
        self.maxKeys = maxKeys
        self.keyCount = keyCount
        self.isTruncated = isTruncated
        self.continuationToken = continuationToken
        self.nextContinuationToken = nextContinuationToken
        self.startAfter = startAfter
        self.encodingType = encodingType
        self.contents = contents
        self.commonPrefixes = commonPrefixes
    }
    enum CodingKeys: String, CodingKey {
        case name = "Name", prefix = "Prefix", marker = "Marker", nextMarker = "NextMarker", delimiter = "Delimiter"
        case maxKeys = "MaxKeys", keyCount = "KeyCount", isTruncated = "IsTruncated"
        case continuationToken = "ContinuationToken", nextContinuationToken = "NextContinuationToken"
        case startAfter = "StartAfter", encodingType = "EncodingType", contents = "Contents"
        case commonPrefixes = "CommonPrefixes"
    }
    /// Decodes a listing; absent `Contents` and `CommonPrefixes` are empty.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        prefix = try c.decodeIfPresent(String.self, forKey: .prefix) ?? ""
        marker = try c.decodeIfPresent(String.self, forKey: .marker)
        nextMarker = try c.decodeIfPresent(String.self, forKey: .nextMarker)
        delimiter = try c.decodeIfPresent(String.self, forKey: .delimiter)
        maxKeys = try c.decodeIfPresent(Int.self, forKey: .maxKeys) ?? 1000
        keyCount = try c.decodeIfPresent(Int.self, forKey: .keyCount)
        isTruncated = try c.decodeIfPresent(Bool.self, forKey: .isTruncated) ?? false
        continuationToken = try c.decodeIfPresent(String.self, forKey: .continuationToken)
        nextContinuationToken = try c.decodeIfPresent(String.self, forKey: .nextContinuationToken)
        startAfter = try c.decodeIfPresent(String.self, forKey: .startAfter)
        encodingType = try c.decodeIfPresent(String.self, forKey: .encodingType)
        contents = try c.decodeIfPresent([Object].self, forKey: .contents) ?? []
        commonPrefixes = try c.decodeIfPresent([S3CommonPrefix].self, forKey: .commonPrefixes) ?? []
    }
}

/// `InitiateMultipartUploadResult`, the answer to CreateMultipartUpload.
public struct InitiateMultipartUploadResult: Codable, Hashable, Sendable {
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// The new upload id.
    public var uploadId: String
    /// Creates a result.
    public init(bucket: String, key: String, uploadId: String) {
        self.bucket = bucket
        self.key = key
        self.uploadId = uploadId
    }
    enum CodingKeys: String, CodingKey {
        case bucket = "Bucket"
        case key = "Key"
        case uploadId = "UploadId"
    }
}

/// `CompleteMultipartUpload`, the request body of CompleteMultipartUpload.
public struct CompleteMultipartUpload: Codable, Hashable, Sendable {
    /// One part to assemble.
    public struct Part: Codable, Hashable, Sendable {
        /// Part number, 1–10000.
        public var partNumber: Int
        /// The ETag UploadPart returned (quotes optional).
        public var eTag: String
        /// Checksums of the part, when the upload uses them.
        public var checksums: S3ChecksumFields
        /// Names of the part's `Checksum*` elements of algorithms not read here (`ChecksumSHA512`, …), so that a server
        /// refuses what it would otherwise leave unchecked.
        public var unreadChecksums: [String] = []
        /// Creates a part entry.
        public init(partNumber: Int, eTag: String, checksums: S3ChecksumFields = .init()) {
            self.partNumber = partNumber
            self.eTag = eTag
            self.checksums = checksums
        }
        enum CodingKeys: String, CodingKey {
            case partNumber = "PartNumber"
            case eTag = "ETag"
        }
        /// Decodes a part entry with its checksum elements.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            partNumber = try c.decode(Int.self, forKey: .partNumber)
            eTag = try c.decode(String.self, forKey: .eTag)
            checksums = try S3ChecksumFields(from: decoder)
            unreadChecksums = try decoder.container(keyedBy: S3ChecksumFields.Key.self).allKeys.map(\.stringValue).filter {
                $0.hasPrefix("Checksum") && $0 != "ChecksumType"
                    && !S3ChecksumFields.algorithmNames.contains(String($0.dropFirst("Checksum".count)))
            }
        }
        /// Encodes a part entry with its checksum elements.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
            try c.encode(partNumber, forKey: .init(stringValue: "PartNumber"))
            try c.encode(eTag, forKey: .init(stringValue: "ETag"))
            try checksums.encode(into: &c)
        }
    }
    /// The parts, in ascending part-number order.
    public var parts: [Part]
    /// Creates a request body.
    public init(parts: [Part]) { self.parts = parts }
    enum CodingKeys: String, CodingKey { case parts = "Part" }
    /// Decodes the body; a body without parts decodes to an empty list (the server rejects it).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        parts = try c.decodeIfPresent([Part].self, forKey: .parts) ?? []
    }
}

/// `CompleteMultipartUploadResult`, the answer to CompleteMultipartUpload.
public struct CompleteMultipartUploadResult: Codable, Hashable, Sendable {
    /// URL of the new object.
    public var location: String
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// Quoted multipart ETag (`"<md5 of part md5s>-N"`).
    public var eTag: String
    /// The object's checksum (composite `base64-N` or full-object).
    public var checksums: S3ChecksumFields
    /// `COMPOSITE` or `FULL_OBJECT` when a checksum is present.
    public var checksumType: String?
    /// Creates a result.
    public init(
        location: String, bucket: String, key: String, eTag: String, checksums: S3ChecksumFields = .init(),
        checksumType: String? = nil
    ) {
        self.location = location
        self.bucket = bucket
        self.key = key
        self.eTag = eTag
        self.checksums = checksums
        self.checksumType = checksumType
    }
    /// Decodes a result.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: S3ChecksumFields.Key.self)
        location = try c.decodeIfPresent(String.self, forKey: .init(stringValue: "Location")) ?? ""
        bucket = try c.decode(String.self, forKey: .init(stringValue: "Bucket"))
        key = try c.decode(String.self, forKey: .init(stringValue: "Key"))
        eTag = try c.decode(String.self, forKey: .init(stringValue: "ETag"))
        checksumType = try c.decodeIfPresent(String.self, forKey: .init(stringValue: "ChecksumType"))
        checksums = try S3ChecksumFields(from: decoder)
    }
    /// Encodes a result.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
        try c.encode(location, forKey: .init(stringValue: "Location"))
        try c.encode(bucket, forKey: .init(stringValue: "Bucket"))
        try c.encode(key, forKey: .init(stringValue: "Key"))
        try c.encode(eTag, forKey: .init(stringValue: "ETag"))
        try checksums.encode(into: &c)
        try c.encodeIfPresent(checksumType, forKey: .init(stringValue: "ChecksumType"))
    }
}

/// `ListPartsResult`, the answer to ListParts.
public struct ListPartsResult: Codable, Hashable, Sendable {
    /// One uploaded part.
    public struct Part: Codable, Hashable, Sendable {
        /// Part number.
        public var partNumber: Int
        /// Last modification, S3 XML format.
        public var lastModified: String
        /// Quoted ETag (MD5 of the part).
        public var eTag: String
        /// Size in bytes.
        public var size: Int64
        /// The part's checksums.
        public var checksums: S3ChecksumFields
        /// Creates an entry.
        public init(
            partNumber: Int, lastModified: String, eTag: String, size: Int64, checksums: S3ChecksumFields = .init()
        ) {
            self.partNumber = partNumber
            self.lastModified = lastModified
            self.eTag = eTag
            self.size = size
            self.checksums = checksums
        }
        /// Decodes an entry.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: S3ChecksumFields.Key.self)
            partNumber = try c.decode(Int.self, forKey: .init(stringValue: "PartNumber"))
            lastModified = try c.decodeIfPresent(String.self, forKey: .init(stringValue: "LastModified")) ?? ""
            eTag = try c.decode(String.self, forKey: .init(stringValue: "ETag"))
            size = try c.decode(Int64.self, forKey: .init(stringValue: "Size"))
            checksums = try S3ChecksumFields(from: decoder)
        }
        /// Encodes an entry.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: S3ChecksumFields.Key.self)
            try c.encode(partNumber, forKey: .init(stringValue: "PartNumber"))
            try c.encode(lastModified, forKey: .init(stringValue: "LastModified"))
            try c.encode(eTag, forKey: .init(stringValue: "ETag"))
            try c.encode(size, forKey: .init(stringValue: "Size"))
            try checksums.encode(into: &c)
        }
    }
    /// Bucket name.
    public var bucket: String
    /// Object key.
    public var key: String
    /// Upload id.
    public var uploadId: String
    /// The marker sent.
    public var partNumberMarker: Int
    /// The marker for the next page.
    public var nextPartNumberMarker: Int?
    /// Page size asked for.
    public var maxParts: Int
    /// Whether more parts follow.
    public var isTruncated: Bool
    /// Storage class, `STANDARD`.
    public var storageClass: String
    /// The upload's checksum algorithm, when it has one.
    public var checksumAlgorithm: String?
    /// The upload's checksum type, when it has one.
    public var checksumType: String?
    /// The parts of this page.
    public var parts: [Part]
    /// Creates a result.
    public init(
        bucket: String, key: String, uploadId: String, partNumberMarker: Int, nextPartNumberMarker: Int?,
        maxParts: Int, isTruncated: Bool, storageClass: String = "STANDARD", checksumAlgorithm: String? = nil,
        checksumType: String? = nil, parts: [Part]
    ) {
        self.bucket = bucket
        self.key = key
        self.uploadId = uploadId
        self.partNumberMarker = partNumberMarker
        self.nextPartNumberMarker = nextPartNumberMarker
        self.maxParts = maxParts
        self.isTruncated = isTruncated
        self.storageClass = storageClass
        self.checksumAlgorithm = checksumAlgorithm
        self.checksumType = checksumType
        self.parts = parts
    }
    enum CodingKeys: String, CodingKey {
        case bucket = "Bucket"
        case key = "Key"
        case uploadId = "UploadId"
        case partNumberMarker = "PartNumberMarker"
        case nextPartNumberMarker = "NextPartNumberMarker"
        case maxParts = "MaxParts"
        case isTruncated = "IsTruncated"
        case storageClass = "StorageClass"
        case checksumAlgorithm = "ChecksumAlgorithm"
        case checksumType = "ChecksumType"
        case parts = "Part"
    }
    /// Decodes a result; absent parts are an empty list.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        bucket = try c.decode(String.self, forKey: .bucket)
        key = try c.decode(String.self, forKey: .key)
        uploadId = try c.decode(String.self, forKey: .uploadId)
        partNumberMarker = try c.decodeIfPresent(Int.self, forKey: .partNumberMarker) ?? 0
        nextPartNumberMarker = try c.decodeIfPresent(Int.self, forKey: .nextPartNumberMarker)
        maxParts = try c.decodeIfPresent(Int.self, forKey: .maxParts) ?? 1000
        isTruncated = try c.decodeIfPresent(Bool.self, forKey: .isTruncated) ?? false
        storageClass = try c.decodeIfPresent(String.self, forKey: .storageClass) ?? "STANDARD"
        checksumAlgorithm = try c.decodeIfPresent(String.self, forKey: .checksumAlgorithm)
        checksumType = try c.decodeIfPresent(String.self, forKey: .checksumType)
        parts = try c.decodeIfPresent([Part].self, forKey: .parts) ?? []
    }
}

/// `ListMultipartUploadsResult`, the answer to ListMultipartUploads.
public struct ListMultipartUploadsResult: Codable, Hashable, Sendable {
    /// One upload in progress.
    public struct Upload: Codable, Hashable, Sendable {
        /// Object key.
        public var key: String
        /// Upload id.
        public var uploadId: String
        /// When it was created, S3 XML format.
        public var initiated: String
        /// Storage class, `STANDARD`.
        public var storageClass: String
        /// The upload's checksum algorithm, when it has one.
        public var checksumAlgorithm: String?
        /// Creates an entry.
        public init(
            key: String, uploadId: String, initiated: String, storageClass: String = "STANDARD",
            checksumAlgorithm: String? = nil
        ) {
            self.key = key
            self.uploadId = uploadId
            self.initiated = initiated
            self.storageClass = storageClass
            self.checksumAlgorithm = checksumAlgorithm
        }
        enum CodingKeys: String, CodingKey {
            case key = "Key"
            case uploadId = "UploadId"
            case initiated = "Initiated"
            case storageClass = "StorageClass"
            case checksumAlgorithm = "ChecksumAlgorithm"
        }
        /// Decodes an entry; a store that leaves out the storage class or the time (some gateways do) lists it all
        /// the same.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            key = try c.decode(String.self, forKey: .key)
            uploadId = try c.decode(String.self, forKey: .uploadId)
            initiated = try c.decodeIfPresent(String.self, forKey: .initiated) ?? ""
            storageClass = try c.decodeIfPresent(String.self, forKey: .storageClass) ?? "STANDARD"
            checksumAlgorithm = try c.decodeIfPresent(String.self, forKey: .checksumAlgorithm)
        }
    }
    /// Bucket name.
    public var bucket: String
    /// The key marker sent.
    public var keyMarker: String
    /// The upload-id marker sent.
    public var uploadIdMarker: String
    /// Key marker for the next page.
    public var nextKeyMarker: String?
    /// Upload-id marker for the next page.
    public var nextUploadIdMarker: String?
    /// The delimiter asked for.
    public var delimiter: String?
    /// The prefix asked for.
    public var prefix: String?
    /// Page size asked for.
    public var maxUploads: Int
    /// Whether more uploads follow.
    public var isTruncated: Bool
    /// Uploads of this page.
    public var uploads: [Upload]
    /// Keys' beginnings up to the delimiter, each standing for the uploads of keys that begin with it.
    public var commonPrefixes: [S3CommonPrefix]
    /// `url` when keys, prefixes, markers and the delimiter are URL-encoded (`encoding-type=url`).
    public var encodingType: String?
    /// Creates a result.
    public init(
        bucket: String, keyMarker: String, uploadIdMarker: String, nextKeyMarker: String?,
        nextUploadIdMarker: String?, prefix: String?, maxUploads: Int, isTruncated: Bool, uploads: [Upload],
        delimiter: String? = nil, commonPrefixes: [S3CommonPrefix] = [], encodingType: String? = nil
    ) {
        self.encodingType = encodingType
        self.delimiter = delimiter
        self.commonPrefixes = commonPrefixes
        self.bucket = bucket
        self.keyMarker = keyMarker
        self.uploadIdMarker = uploadIdMarker
        self.nextKeyMarker = nextKeyMarker
        self.nextUploadIdMarker = nextUploadIdMarker
        self.prefix = prefix
        self.maxUploads = maxUploads
        self.isTruncated = isTruncated
        self.uploads = uploads
    }
    enum CodingKeys: String, CodingKey {
        case bucket = "Bucket"
        case keyMarker = "KeyMarker"
        case uploadIdMarker = "UploadIdMarker"
        case nextKeyMarker = "NextKeyMarker"
        case nextUploadIdMarker = "NextUploadIdMarker"
        case delimiter = "Delimiter"
        case prefix = "Prefix"
        case maxUploads = "MaxUploads"
        case isTruncated = "IsTruncated"
        case uploads = "Upload"
        case commonPrefixes = "CommonPrefixes"
        case encodingType = "EncodingType"
    }
    /// Decodes a result; absent uploads are an empty list.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        bucket = try c.decode(String.self, forKey: .bucket)
        keyMarker = try c.decodeIfPresent(String.self, forKey: .keyMarker) ?? ""
        uploadIdMarker = try c.decodeIfPresent(String.self, forKey: .uploadIdMarker) ?? ""
        nextKeyMarker = try c.decodeIfPresent(String.self, forKey: .nextKeyMarker)
        nextUploadIdMarker = try c.decodeIfPresent(String.self, forKey: .nextUploadIdMarker)
        prefix = try c.decodeIfPresent(String.self, forKey: .prefix)
        maxUploads = try c.decodeIfPresent(Int.self, forKey: .maxUploads) ?? 1000
        isTruncated = try c.decodeIfPresent(Bool.self, forKey: .isTruncated) ?? false
        uploads = try c.decodeIfPresent([Upload].self, forKey: .uploads) ?? []
        delimiter = try c.decodeIfPresent(String.self, forKey: .delimiter)
        commonPrefixes = try c.decodeIfPresent([S3CommonPrefix].self, forKey: .commonPrefixes) ?? []
        encodingType = try c.decodeIfPresent(String.self, forKey: .encodingType)
    }
}

/// The S3 `Error` document.
public struct S3ErrorDocument: Codable, Hashable, Sendable {
    /// Error code.
    public var code: String
    /// Message.
    public var message: String
    /// Resource addressed.
    public var resource: String?
    /// Request id.
    public var requestId: String?
    /// Creates a document.
    public init(code: String, message: String, resource: String?, requestId: String?) {
        self.code = code
        self.message = message
        self.resource = resource
        self.requestId = requestId
    }
    enum CodingKeys: String, CodingKey {
        case code = "Code"
        case message = "Message"
        case resource = "Resource"
        case requestId = "RequestId"
    }
    /// Decodes a document; a missing `Message` (some stores and proxies send only the code) is empty.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        code = try c.decode(String.self, forKey: .code)
        message = try c.decodeIfPresent(String.self, forKey: .message) ?? ""
        resource = try c.decodeIfPresent(String.self, forKey: .resource)
        requestId = try c.decodeIfPresent(String.self, forKey: .requestId)
    }
}
