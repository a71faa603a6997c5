import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    static let owner = S3Owner(id: "ferry", displayName: "ferry")

    func listBuckets(_ request: S3Request) async throws -> Response {
        let buckets = try await store.listBuckets().filter {
            request.principal.allows(action: Operation.listObjectsV2.action, bucket: $0.name)
                || request.principal.allows(action: Operation.listBuckets.action)
        }
        let result = ListAllMyBucketsResult(
            owner: Self.owner,
            buckets: buckets.map { .init(name: $0.name, creationDate: S3Date.xml($0.createdAt)) })
        return try Self.xmlResponse(result, root: "ListAllMyBucketsResult")
    }

    func createBucket(_ request: S3Request) async throws -> Response {
        try Self.validateBucketName(request.bucket)
        // The body, when there is one, is a CreateBucketConfiguration; the location is this server's region.
        var body = request.request
        let data = try await body.collectBody(upTo: 64 * 1024)
        if data.readableBytes > 0, (try? S3XML.decode(CreateBucketConfiguration.self, from: Data(buffer: data))) == nil {
            throw S3Error(.malformedXML, "The XML you provided was not well-formed or did not validate against our published schema.")
        }
        try await store.createBucket(request.bucket)
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

    func listObjectsV2(_ request: S3Request) async throws -> Response {
        let prefix = request.queryValue("prefix") ?? ""
        let delimiter = request.queryValue("delimiter").flatMap { $0.isEmpty ? nil : $0 }
        let maxKeys = try Self.intQuery(request, "max-keys", default: 1000, range: 0...Int.max).clamped(to: 0...1000)
        let token = request.queryValue("continuation-token")
        var startAfter = request.queryValue("start-after")
        if let token {
            guard let data = Data(base64Encoded: token), let marker = String(data: data, encoding: .utf8) else {
                throw S3Error(.invalidArgument, "The continuation token provided is incorrect", details: ["ArgumentName": "continuation-token"])
            }
            // A common prefix as marker: skip every key under it.
            startAfter = marker.hasSuffix(delimiter ?? "\u{0}") && delimiter != nil ? marker + "\u{10FFFF}" : marker
        }
        let listing = try await store.listObjects(
            bucket: request.bucket, prefix: prefix, delimiter: delimiter, startAfter: startAfter, maxKeys: maxKeys)
        let encodeURL = request.queryValue("encoding-type") == "url"
        let encode = { (s: String) in encodeURL ? SigV4.uriEncode(s, encodeSlash: false) : s }
        let result = ListBucketResult(
            name: request.bucket, prefix: encode(prefix), delimiter: delimiter.map(encode), maxKeys: maxKeys,
            keyCount: listing.objects.count + listing.commonPrefixes.count, isTruncated: listing.isTruncated,
            continuationToken: token,
            nextContinuationToken: listing.isTruncated ? listing.nextMarker.map { Data($0.utf8).base64EncodedString() } : nil,
            startAfter: request.queryValue("start-after").map(encode),
            contents: listing.objects.map {
                .init(
                    key: encode($0.key), lastModified: S3Date.xml($0.lastModified), eTag: "\"\($0.etag)\"",
                    size: $0.size, checksumAlgorithm: $0.checksums.keys.sorted().first)
            },
            commonPrefixes: listing.commonPrefixes.map { S3CommonPrefix(prefix: encode($0)) })
        var response = try Self.xmlResponse(result, root: "ListBucketResult")
        if encodeURL {
            response = try Self.xmlResponse(ListBucketResultWithEncoding(result: result), root: "ListBucketResult")
        }
        return response
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

/// A listing with `EncodingType` set, for `encoding-type=url`.
struct ListBucketResultWithEncoding: Encodable {
    var result: ListBucketResult
    func encode(to encoder: any Encoder) throws {
        try result.encode(to: encoder)
        var container = encoder.container(keyedBy: S3ChecksumFields.Key.self)
        try container.encode("url", forKey: .init(stringValue: "EncodingType"))
    }
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
