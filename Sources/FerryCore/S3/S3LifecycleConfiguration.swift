/// `LifecycleConfiguration`, the body of Put/GetBucketLifecycleConfiguration: rules that expire objects and abort
/// multipart uploads left unfinished.
///
/// A rule names what it applies to either with a `Prefix` of its own (the older form) or with a `Filter` (a prefix,
/// a tag, object sizes, or an `And` of them); both forms are kept as given, so a configuration reads back as it was
/// written.
package struct S3LifecycleConfiguration: Codable, Sendable, Hashable {
    /// A tag a filter requires.
    package typealias Tag = S3Tagging.Tag

    /// The conditions of a filter's `And`: every one must hold.
    package struct Conditions: Codable, Sendable, Hashable {
        package var prefix: String?
        package var tags: [Tag] = []
        package var objectSizeGreaterThan: Int64?
        package var objectSizeLessThan: Int64?
        enum CodingKeys: String, CodingKey {
            case prefix = "Prefix", tags = "Tag", objectSizeGreaterThan = "ObjectSizeGreaterThan"
            case objectSizeLessThan = "ObjectSizeLessThan"
        }
        package init(prefix: String? = nil, tags: [Tag] = [], objectSizeGreaterThan: Int64? = nil, objectSizeLessThan: Int64? = nil) {
            self.prefix = prefix
            self.tags = tags
            self.objectSizeGreaterThan = objectSizeGreaterThan
            self.objectSizeLessThan = objectSizeLessThan
        }
        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            prefix = try c.decodeIfPresent(String.self, forKey: .prefix)
            tags = try c.decodeIfPresent([Tag].self, forKey: .tags) ?? []
            objectSizeGreaterThan = try c.decodeIfPresent(Int64.self, forKey: .objectSizeGreaterThan)
            objectSizeLessThan = try c.decodeIfPresent(Int64.self, forKey: .objectSizeLessThan)
        }
    }

    /// A rule's `Filter`: its own conditions (`Prefix`, `Tag`, sizes) and an `And` of more; all of them must hold.
    package struct Filter: Codable, Sendable, Hashable {
        package var prefix: String?
        package var tag: Tag?
        package var objectSizeGreaterThan: Int64?
        package var objectSizeLessThan: Int64?
        package var and: Conditions?
        enum CodingKeys: String, CodingKey {
            case prefix = "Prefix", tag = "Tag", objectSizeGreaterThan = "ObjectSizeGreaterThan"
            case objectSizeLessThan = "ObjectSizeLessThan", and = "And"
        }
        package init(prefix: String? = nil, tag: Tag? = nil, and: Conditions? = nil) {
            self.prefix = prefix
            self.tag = tag
            self.and = and
        }
    }

    /// `Expiration`: after `Days` days, on a `Date` (ISO 8601, midnight UTC), or `ExpiredObjectDeleteMarker`.
    package struct Expiration: Codable, Sendable, Hashable {
        package var days: Int?
        package var date: String?
        package var expiredObjectDeleteMarker: Bool?
        enum CodingKeys: String, CodingKey {
            case days = "Days", date = "Date", expiredObjectDeleteMarker = "ExpiredObjectDeleteMarker"
        }
        package init(days: Int? = nil, date: String? = nil) {
            self.days = days
            self.date = date
        }
    }

    /// `AbortIncompleteMultipartUpload`.
    package struct AbortIncompleteMultipartUpload: Codable, Sendable, Hashable {
        package var daysAfterInitiation: Int?
        enum CodingKeys: String, CodingKey { case daysAfterInitiation = "DaysAfterInitiation" }
        package init(daysAfterInitiation: Int) { self.daysAfterInitiation = daysAfterInitiation }
    }

    /// `NoncurrentVersionExpiration`.
    package struct NoncurrentVersionExpiration: Codable, Sendable, Hashable {
        package var noncurrentDays: Int?
        package var newerNoncurrentVersions: Int?
        enum CodingKeys: String, CodingKey {
            case noncurrentDays = "NoncurrentDays", newerNoncurrentVersions = "NewerNoncurrentVersions"
        }
    }

    /// A storage-class transition (`Transition`, `NoncurrentVersionTransition`), read only to be refused.
    package struct Transition: Codable, Sendable, Hashable {
        package var storageClass: String?
        enum CodingKeys: String, CodingKey { case storageClass = "StorageClass" }
    }

    /// One `Rule`.
    package struct Rule: Codable, Sendable, Hashable {
        package var id: String?
        package var prefix: String?
        package var filter: Filter?
        package var status: String
        package var expiration: Expiration?
        package var abortIncompleteMultipartUpload: AbortIncompleteMultipartUpload?
        package var noncurrentVersionExpiration: NoncurrentVersionExpiration?
        package var transitions: [Transition] = []
        package var noncurrentVersionTransitions: [Transition] = []

        enum CodingKeys: String, CodingKey {
            case id = "ID", prefix = "Prefix", filter = "Filter", status = "Status", expiration = "Expiration"
            case abortIncompleteMultipartUpload = "AbortIncompleteMultipartUpload"
            case noncurrentVersionExpiration = "NoncurrentVersionExpiration", transitions = "Transition"
            case noncurrentVersionTransitions = "NoncurrentVersionTransition"
        }

        package init(
            id: String?, prefix: String? = nil, filter: Filter? = nil, status: String = "Enabled",
            expiration: Expiration? = nil, abortIncompleteMultipartUpload: AbortIncompleteMultipartUpload? = nil
        ) {
            self.id = id
            self.prefix = prefix
            self.filter = filter
            self.status = status
            self.expiration = expiration
            self.abortIncompleteMultipartUpload = abortIncompleteMultipartUpload
        }

        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decodeIfPresent(String.self, forKey: .id)
            prefix = try c.decodeIfPresent(String.self, forKey: .prefix)
            filter = try c.decodeIfPresent(Filter.self, forKey: .filter)
            status = try c.decode(String.self, forKey: .status)
            expiration = try c.decodeIfPresent(Expiration.self, forKey: .expiration)
            abortIncompleteMultipartUpload = try c.decodeIfPresent(
                AbortIncompleteMultipartUpload.self, forKey: .abortIncompleteMultipartUpload)
            noncurrentVersionExpiration = try c.decodeIfPresent(
                NoncurrentVersionExpiration.self, forKey: .noncurrentVersionExpiration)
            transitions = try c.decodeIfPresent([Transition].self, forKey: .transitions) ?? []
            noncurrentVersionTransitions = try c.decodeIfPresent([Transition].self, forKey: .noncurrentVersionTransitions) ?? []
        }

        /// Whether the rule is in force (`Status` is `Enabled`).
        package var isEnabled: Bool { status == "Enabled" }

        /// The tags an object must carry, from the filter and its `And`.
        package var tags: [Tag] {
            (filter?.tag.map { [$0] } ?? []) + (filter?.and?.tags ?? [])
        }

        /// The size an object must exceed, from the filter and its `And` (the larger when both say).
        package var objectSizeGreaterThan: Int64? {
            [filter?.objectSizeGreaterThan, filter?.and?.objectSizeGreaterThan].compactMap { $0 }.max()
        }

        /// The size an object must stay under, from the filter and its `And` (the smaller when both say).
        package var objectSizeLessThan: Int64? {
            [filter?.objectSizeLessThan, filter?.and?.objectSizeLessThan].compactMap { $0 }.min()
        }

        /// Every prefix the rule names (rule, filter, `And`), each of which a key must start with.
        package var prefixes: [String] {
            [prefix, filter?.prefix, filter?.and?.prefix].compactMap { $0 }
        }
    }

    package var rules: [Rule]

    package init(rules: [Rule]) { self.rules = rules }

    enum CodingKeys: String, CodingKey { case rules = "Rule" }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        rules = try c.decodeIfPresent([Rule].self, forKey: .rules) ?? []
    }
}
