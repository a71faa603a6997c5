import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    static let owner = S3Owner(id: "ferry", displayName: "ferry")

    func listBuckets(_ request: S3Request) async throws -> Response {
        let maxBuckets = try Self.intQuery(request, "max-buckets", default: 10_000, range: 1...10_000)
        let prefix = request.queryValue("prefix") ?? ""
        let after = try Self.continuationMarker(request)
        let visible = try await store.listBuckets().filter { bucket in
            bucket.name.hasPrefix(prefix) && (after.map { bucket.name > $0 } ?? true)
                && (request.principal.allows(action: Operation.listObjectsV2.actions[0], bucket: bucket.name)
                    || (!request.principal.reservedBuckets.contains(bucket.name)
                        && request.principal.allows(action: Operation.listBuckets.actions[0])))
        }
        let page = Array(visible.prefix(maxBuckets))
        let truncated = visible.count > page.count
        let result = ListAllMyBucketsResult(
            owner: Self.owner,
            buckets: page.map { ListAllMyBucketsResult.Bucket(name: $0.name, creationDate: S3Date.xml($0.createdAt)) },
            continuationToken: truncated ? page.last.map { Self.encodeToken($0.name) } : nil,
            prefix: prefix.isEmpty ? nil : prefix)
        return try Self.xmlResponse(result, root: "ListAllMyBucketsResult")
    }

    func createBucket(_ request: S3Request) async throws -> Response {
        try Self.validateBucketName(request.bucket)
        try Self.refuseUnimplementedHeaders(request.request.headers)
        // The body, when there is one, is a CreateBucketConfiguration; the location is this server's region.
        let data = try await Self.collectXMLBody(request, limit: 64 * 1024)
        if !data.isEmpty {
            guard let configuration = try? S3XML.decode(CreateBucketConfiguration.self, from: data, root: "CreateBucketConfiguration") else {
                throw Self.malformedXML
            }
            if let location = configuration.locationConstraint, !location.isEmpty, location != region,
                !(location == "US" && region == "us-east-1")
            {
                throw S3Error(
                    .invalidLocationConstraint, "The specified location-constraint is not valid",
                    details: ["LocationConstraint": String(location.prefix(64))])
            }
        }
        do {
            try await store.createBucket(request.bucket)
        } catch let error as FerryDomainError where error.code == .bucketExists && region == "us-east-1" {
            // S3 in us-east-1 answers a repeated CreateBucket by the bucket's owner with 200, for legacy clients;
            // every other region answers BucketAlreadyOwnedByYou. The bucket and its objects stay as they are.
        }
        return Response(status: .ok, headers: [.location: "/\(request.bucket)", .contentLength: "0"])
    }

    func headBucket(_ request: S3Request) async throws -> Response {
        _ = try await store.bucket(request.bucket)
        return Response(status: .ok, headers: [.amzBucketRegion: region, .contentLength: "0"])
    }

    func deleteBucket(_ request: S3Request) async throws -> Response {
        try await store.deleteBucket(request.bucket)
        return Response(status: .noContent)
    }

    func getBucketLocation(_ request: S3Request) async throws -> Response {
        _ = try await store.bucket(request.bucket)
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"\(s3XMLNamespace)\">\(region == "us-east-1" ? "" : S3XML.escape(region))</LocationConstraint>"
        return Response(status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: xml)))
    }

    /// Versioning has never been enabled on a Ferry bucket: an empty `VersioningConfiguration`, as S3 answers for
    /// such a bucket.
    func getBucketVersioning(_ request: S3Request) async throws -> Response {
        _ = try await store.bucket(request.bucket)
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<VersioningConfiguration xmlns=\"\(s3XMLNamespace)\"/>"
        return Response(status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: xml)))
    }

    /// The listing parameters every list operation shares.
    struct ListingQuery {
        var prefix: String
        var delimiter: String?
        var maxKeys: Int
        var encodeURL: Bool

        init(_ request: S3Request) throws {
            prefix = request.queryValue("prefix") ?? ""
            delimiter = request.queryValue("delimiter").flatMap { $0.isEmpty ? nil : $0 }
            maxKeys = try ObjectAPI.intQuery(request, "max-keys", default: 1000, range: 0...Int.max).clamped(to: 0...1000)
            encodeURL = try Self.encodesURL(request)
        }

        /// Whether the request asks for `encoding-type=url` (any other value is refused).
        static func encodesURL(_ request: S3Request) throws -> Bool {
            switch request.queryValue("encoding-type") {
            case nil: false
            case "url"?: true
            default: throw S3Error(.invalidArgument, "Invalid Encoding Method specified in Request", details: ["ArgumentName": "encoding-type"])
            }
        }

        /// A key or prefix as the response carries it.
        func encode(_ value: String) -> String { Self.encode(value, url: encodeURL) }
        static func encode(_ value: String, url: Bool) -> String { url ? SigV4.uriEncode(value, encodeSlash: false) : value }
    }

    /// ListObjects (version 1): `marker` paging, `NextMarker` when truncated, every entry with its owner.
    func listObjects(_ request: S3Request) async throws -> Response {
        let query = try ListingQuery(request)
        let marker = request.queryValue("marker") ?? ""
        let listing = try await listing(request, query, after: marker)
        // Version 1 returns Prefix as sent even with encoding-type=url (the SDKs decode the other elements only).
        let result = ListBucketResult(
            name: request.bucket, prefix: query.prefix, marker: query.encode(marker),
            // Only with a delimiter, as S3 does (without one, the last key is the next marker).
            nextMarker: listing.isTruncated && query.delimiter != nil ? listing.nextMarker.map(query.encode) : nil,
            delimiter: query.delimiter.map(query.encode), maxKeys: query.maxKeys, isTruncated: listing.isTruncated,
            encodingType: query.encodeURL ? "url" : nil,
            contents: listing.objects.map { Self.listed($0, query, owner: Self.owner) },
            commonPrefixes: listing.commonPrefixes.map { S3CommonPrefix(prefix: query.encode($0)) })
        return try Self.xmlResponse(result, root: "ListBucketResult")
    }

    func listObjectsV2(_ request: S3Request) async throws -> Response {
        let query = try ListingQuery(request)
        let token = request.queryValue("continuation-token")
        let startAfter = request.queryValue("start-after")
        let listing = try await listing(request, query, after: try Self.continuationMarker(request) ?? startAfter)
        let fetchOwner = request.queryValue("fetch-owner") == "true"
        let result = ListBucketResult(
            name: request.bucket, prefix: query.encode(query.prefix), delimiter: query.delimiter.map(query.encode),
            maxKeys: query.maxKeys, keyCount: listing.objects.count + listing.commonPrefixes.count,
            isTruncated: listing.isTruncated, continuationToken: token,
            nextContinuationToken: listing.isTruncated ? listing.nextMarker.map(Self.encodeToken) : nil,
            startAfter: startAfter.map(query.encode), encodingType: query.encodeURL ? "url" : nil,
            contents: listing.objects.map { Self.listed($0, query, owner: fetchOwner ? Self.owner : nil) },
            commonPrefixes: listing.commonPrefixes.map { S3CommonPrefix(prefix: query.encode($0)) })
        return try Self.xmlResponse(result, root: "ListBucketResult")
    }

    /// ListObjectVersions for a bucket without versioning: every object is its only version, `null`, and the latest.
    func listObjectVersions(_ request: S3Request) async throws -> Response {
        let query = try ListingQuery(request)
        let keyMarker = request.queryValue("key-marker") ?? ""
        let versionIdMarker = request.queryValue("version-id-marker") ?? ""
        if !versionIdMarker.isEmpty && keyMarker.isEmpty {
            throw S3Error(.invalidArgument, "A version-id marker cannot be specified without a key marker.", details: ["ArgumentName": "version-id-marker"])
        }
        // The one version of the marker's key, `null`, comes before any other id, so a version-id marker past it
        // means the key is done too.
        let listing = try await listing(request, query, after: keyMarker)
        let result = S3ListVersionsResult(
            name: request.bucket, prefix: query.encode(query.prefix), keyMarker: query.encode(keyMarker),
            versionIdMarker: versionIdMarker,
            nextKeyMarker: listing.isTruncated ? listing.nextMarker.map(query.encode) : nil,
            nextVersionIdMarker: listing.isTruncated && listing.objects.last?.key == listing.nextMarker ? "null" : nil,
            delimiter: query.delimiter.map(query.encode), maxKeys: query.maxKeys, isTruncated: listing.isTruncated,
            encodingType: query.encodeURL ? "url" : nil,
            versions: listing.objects.map { .init(Self.listed($0, query, owner: nil), owner: Self.owner) },
            commonPrefixes: listing.commonPrefixes.map { S3CommonPrefix(prefix: query.encode($0)) })
        return try Self.xmlResponse(result, root: "ListVersionsResult")
    }

    /// A key scoped to a prefix lists only within it: a listing whose prefix does not lie inside the key's scope is
    /// AccessDenied (docs/security.md).
    static func checkListingScope(_ request: S3Request, action: String, prefix: String) throws {
        guard request.principal.allowsListing(action: action, bucket: request.bucket, prefix: prefix) else {
            throw S3Error(.accessDenied, "Access Denied: this key may list only within the prefix its policy names.")
        }
    }

    /// One page of keys for a list operation, after `marker` when it is not empty (the store skips every key under a
    /// marker that is itself a common prefix); `max-keys=0` answers an empty, untruncated page.
    private func listing(_ request: S3Request, _ query: ListingQuery, after marker: String?) async throws
        -> ObjectListing
    {
        try Self.checkListingScope(
            request, action: request.hasQuery("versions") ? "s3:ListBucketVersions" : "s3:ListBucket", prefix: query.prefix)
        guard query.maxKeys > 0 else {
            _ = try await store.bucket(request.bucket)
            return ObjectListing(objects: [], commonPrefixes: [], isTruncated: false, nextMarker: nil)
        }
        return try await store.listObjects(
            bucket: request.bucket, prefix: query.prefix, delimiter: query.delimiter,
            startAfter: marker.flatMap { $0.isEmpty ? nil : $0 }, maxKeys: query.maxKeys)
    }

    private static func listed(_ object: ObjectInfo, _ query: ListingQuery, owner: S3Owner?)
        -> ListBucketResult.Object
    {
        ListBucketResult.Object(
            key: query.encode(object.key), lastModified: S3Date.xml(object.lastModified), eTag: "\"\(object.etag)\"",
            size: object.size, owner: owner, checksumAlgorithm: object.checksums.keys.sorted().first,
            checksumType: object.checksumType)
    }

    static func encodeToken(_ marker: String) -> String { Data(marker.utf8).base64EncodedString() }

    /// The marker the `continuation-token` stands for (``encodeToken(_:)``); nil without one.
    static func continuationMarker(_ request: S3Request) throws -> String? {
        guard let token = request.queryValue("continuation-token"), !token.isEmpty else { return nil }
        // A marker no key could hold (a character XML cannot carry, NUL among them) is no listing's.
        guard let data = Data(base64Encoded: token), let marker = String(data: data, encoding: .utf8),
            !Self.hasXMLForbiddenCharacter(marker)
        else {
            throw S3Error(
                .invalidArgument, "The continuation token provided is incorrect",
                details: ["ArgumentName": "continuation-token"])
        }
        return marker
    }

    static func intQuery(_ request: S3Request, _ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let raw = request.queryValue(name) else { return value }
        guard let parsed = Int(raw), range.contains(parsed) else {
            throw S3Error(
                .invalidArgument, "Provided \(name) not an integer or within integer range",
                details: ["ArgumentName": name, "ArgumentValue": String(raw.prefix(64))])
        }
        return parsed
    }
}

/// `CreateBucketConfiguration`, the optional body of CreateBucket.
struct CreateBucketConfiguration: Decodable {
    var locationConstraint: String?
    enum CodingKeys: String, CodingKey { case locationConstraint = "LocationConstraint" }
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
