import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

extension ObjectAPI {
    /// Most rules a lifecycle configuration may hold (S3: 1000).
    static let maxLifecycleRules = 1000

    func getBucketLifecycle(_ request: S3Request) async throws -> Response {
        guard let document = try await store.bucketConfiguration(request.bucket, .lifecycle) else {
            throw S3Error(
                .noSuchLifecycleConfiguration, "The lifecycle configuration does not exist",
                details: ["BucketName": request.bucket])
        }
        return Response(
            status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: document)))
    }

    /// PutBucketLifecycleConfiguration: validates the rules, names the rules without an ID, and stores them; the
    /// collector applies them from its next pass, and object responses name the rule that will expire them.
    func putBucketLifecycle(_ request: S3Request) async throws -> Response {
        // The media bucket's files are the media catalog's: a rule expiring them would leave videos that say they play.
        guard !credentials.reservedBuckets.contains(request.bucket) else {
            throw S3Error(
                .invalidRequest, "The media bucket's files are kept by the media catalog; it takes no lifecycle rules.",
                details: ["BucketName": request.bucket])
        }
        // Decoded after the limits of S3XML.decode are checked, then held to the schema: an unknown, repeated or
        // misplaced element (a typo in a filter) would otherwise be dropped and the rule widened.
        var configuration = try await Self.xmlBody(
            S3LifecycleConfiguration.self, request, limit: 512 * 1024, schema: .lifecycle)
        try Self.validate(&configuration)
        let document = String(decoding: try S3XML.encode(configuration, root: "LifecycleConfiguration"), as: UTF8.self)
        try await store.setBucketConfiguration(request.bucket, .lifecycle, document)
        lifecycleRules.forget(request.bucket)
        return Response(status: .ok, headers: [.contentLength: "0"])
    }

    func deleteBucketLifecycle(_ request: S3Request) async throws -> Response {
        try await store.setBucketConfiguration(request.bucket, .lifecycle, nil)
        lifecycleRules.forget(request.bucket)
        return Response(status: .noContent)
    }

    /// The days a rule may count: a positive 32-bit integer, as S3's schema has it.
    static let lifecycleDays = 1...Int(Int32.max)

    /// Checks a lifecycle configuration as S3 does and gives every rule without an ID a generated one.
    static func validate(_ configuration: inout S3LifecycleConfiguration) throws {
        func invalid(_ message: String) -> S3Error { S3Error(.invalidArgument, message) }
        guard (1...maxLifecycleRules).contains(configuration.rules.count) else {
            throw S3Error(.malformedXML, "A lifecycle configuration holds 1 to \(maxLifecycleRules) rules.")
        }
        var ids = Set<String>()
        for index in configuration.rules.indices {
            var rule = configuration.rules[index]
            if rule.id == nil || rule.id == "" { rule.id = UUID().uuidString.lowercased() }
            let id = rule.id ?? ""
            guard id.count <= 255 else { throw invalid("ID length should not exceed allowed limit of 255") }
            guard ids.insert(id).inserted else { throw invalid("Rule ID must be unique. Found same ID for more than one rule") }
            guard rule.status == "Enabled" || rule.status == "Disabled" else { throw malformedXML }
            guard (rule.prefix == nil) != (rule.filter == nil) else { throw malformedXML }
            if !rule.transitions.isEmpty || !rule.noncurrentVersionTransitions.isEmpty {
                throw notImplemented("Lifecycle transitions between storage classes")
            }
            guard rule.expiration != nil || rule.abortIncompleteMultipartUpload != nil
                || rule.noncurrentVersionExpiration != nil
            else { throw S3Error(.invalidRequest, "At least one action needs to be specified in a rule") }
            if let expiration = rule.expiration {
                let given = [expiration.days != nil, expiration.date != nil, expiration.expiredObjectDeleteMarker != nil]
                guard given.filter({ $0 }).count == 1 else { throw malformedXML }
                if expiration.expiredObjectDeleteMarker != nil, !rule.tags.isEmpty {
                    throw invalid("ExpiredObjectDeleteMarker cannot be specified with Tags")
                }
                if let days = expiration.days, !Self.lifecycleDays.contains(days) {
                    throw invalid("'Days' for Expiration action must be a positive integer")
                }
                if let text = expiration.date {
                    guard let date = BucketLifecycle.parseDate(text) else {
                        throw invalid("'Date' must be an ISO 8601 date and time that exists (2030-01-01T00:00:00Z)")
                    }
                    guard date.timeIntervalSince1970.truncatingRemainder(dividingBy: 86_400) == 0 else {
                        throw invalid("'Date' must be at midnight GMT")
                    }
                }
            }
            if let abort = rule.abortIncompleteMultipartUpload {
                guard let days = abort.daysAfterInitiation, Self.lifecycleDays.contains(days) else {
                    throw invalid("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
                }
                guard rule.tags.isEmpty, rule.objectSizeGreaterThan == nil, rule.objectSizeLessThan == nil else {
                    throw invalid("AbortIncompleteMultipartUpload cannot be specified with Tags or object sizes")
                }
            }
            if let days = rule.noncurrentVersionExpiration?.noncurrentDays, !Self.lifecycleDays.contains(days) {
                throw invalid("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
            }
            // Two conditions on one tag key could never both hold: the rule would silently do nothing.
            guard Set(rule.tags.map(\.key)).count == rule.tags.count else {
                throw invalid("Duplicate Tag Keys are not allowed.")
            }
            let floor = rule.objectSizeGreaterThan ?? 0
            if floor < 0 || (rule.objectSizeLessThan ?? 1) <= 0 || floor >= (rule.objectSizeLessThan ?? .max) {
                throw invalid("ObjectSizeGreaterThan must be less than ObjectSizeLessThan, and both not negative")
            }
            configuration.rules[index] = rule
        }
    }

    /// The `x-amz-expiration` header an object response carries when a lifecycle rule of its bucket will expire it:
    /// `expiry-date="…", rule-id="…"`; nil when none will (or the rules cannot be read now).
    func expirationHeader(for object: ObjectInfo) async -> String? {
        guard let expiration = await lifecycleRules.rules(for: object.bucket, in: store)?.expiration(of: object) else {
            return nil
        }
        // A rule ID is XML text: only its printable ASCII goes into the header.
        let rule = String(expiration.ruleId.unicodeScalars.filter { (0x20..<0x7F).contains($0.value) && $0 != "\"" })
        return "expiry-date=\"\(S3Date.http(expiration.date))\", rule-id=\"\(rule)\""
    }
}

/// The buckets' lifecycle rules, parsed once and kept a few seconds, so that object answers name their expiry
/// without reading and parsing the bucket's document on every request. A change made through this node is seen at
/// once; one made through another node sharing the catalog after at most ``lifetime``.
final class LifecycleRulesCache: Sendable {
    private let entries = NIOLockedValueBox<[String: (rules: BucketLifecycle?, until: ContinuousClock.Instant)]>([:])
    /// How long an entry is used before the catalog is read again.
    static let lifetime: Duration = .seconds(5)
    /// Most buckets kept; the cache starts over beyond it.
    static let capacity = 1000

    /// The bucket's rules in force; nil when it has none (or they cannot be read now).
    func rules(for bucket: String, in store: any ObjectStore) async -> BucketLifecycle? {
        let now = ContinuousClock.now
        if let entry = entries.withLockedValue({ $0[bucket] }), entry.until > now { return entry.rules }
        let document = try? await store.bucketConfiguration(bucket, .lifecycle)
        let rules = document.flatMap { BucketLifecycle(document: $0) }
        entries.withLockedValue { entries in
            if entries.count >= Self.capacity { entries.removeAll() }
            entries[bucket] = (rules, now + Self.lifetime)
        }
        return rules
    }

    /// Drops the bucket's entry (its rules changed here).
    func forget(_ bucket: String) { entries.withLockedValue { _ = $0.removeValue(forKey: bucket) } }
}
