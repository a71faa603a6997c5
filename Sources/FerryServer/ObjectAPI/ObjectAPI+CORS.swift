import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    /// Most rules a CORS configuration may hold (S3: 100).
    static let maxCORSRules = 100

    func getBucketCors(_ request: S3Request) async throws -> Response {
        guard let document = try await store.bucketConfiguration(request.bucket, .cors) else {
            throw S3Error(.noSuchCORSConfiguration, "The CORS configuration does not exist", details: ["BucketName": request.bucket])
        }
        return Response(
            status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: document)))
    }

    /// PutBucketCors: validates the rules and stores them; preflights and cross-origin requests follow them at once.
    func putBucketCors(_ request: S3Request) async throws -> Response {
        let configuration = try await Self.xmlBody(
            S3CORSConfiguration.self, request, limit: 64 * 1024, root: "CORSConfiguration")
        guard (1...Self.maxCORSRules).contains(configuration.rules.count) else {
            throw S3Error(.malformedXML, "A CORS configuration holds 1 to \(Self.maxCORSRules) rules.")
        }
        let methods: Set<String> = ["GET", "PUT", "POST", "DELETE", "HEAD"]
        for rule in configuration.rules {
            guard !rule.allowedMethods.isEmpty, !rule.allowedOrigins.isEmpty else {
                throw S3Error(.malformedXML, "Every CORSRule needs an AllowedMethod and an AllowedOrigin.")
            }
            for method in rule.allowedMethods where !methods.contains(method) {
                throw S3Error(
                    .invalidRequest, "Found unsupported HTTP method in CORS config. Unsupported method is \(method.prefix(16))")
            }
            for pattern in rule.allowedOrigins + rule.allowedHeaders where pattern.filter({ $0 == "*" }).count > 1 {
                throw S3Error(.invalidRequest, "AllowedOrigin and AllowedHeader may contain at most one wildcard: \(pattern.prefix(64))")
            }
            if let age = rule.maxAgeSeconds, age < 0 {
                throw S3Error(.malformedXML, "MaxAgeSeconds must not be negative.")
            }
        }
        let document = String(decoding: try S3XML.encode(configuration, root: "CORSConfiguration"), as: UTF8.self)
        try await store.setBucketConfiguration(request.bucket, .cors, document)
        return Response(status: .ok, headers: [.contentLength: "0"])
    }

    func deleteBucketCors(_ request: S3Request) async throws -> Response {
        try await store.setBucketConfiguration(request.bucket, .cors, nil)
        return Response(status: .noContent)
    }

    /// The bucket's CORS rules, nil when it has none (or no such bucket).
    func corsRules(_ bucket: String) async -> [S3CORSConfiguration.Rule]? {
        guard !bucket.isEmpty, let document = try? await store.bucketConfiguration(bucket, .cors),
            let configuration = try? S3XML.decode(S3CORSConfiguration.self, from: Data(document.utf8))
        else { return nil }
        return configuration.rules
    }

    /// Answers a CORS preflight (`OPTIONS`), which browsers send without credentials: 200 with the allowed method and
    /// headers when a rule of the bucket matches the origin, method and requested headers, 403 otherwise.
    func preflight(_ request: Request, bucket: String) async throws -> Response {
        guard let origin = request.headers[.origin] else {
            throw S3Error(.badRequest, "Insufficient information. Origin request header needed.")
        }
        guard let method = request.headers[.accessControlRequestMethod] else {
            throw S3Error(.badRequest, "Invalid Access-Control-Request-Method: nil")
        }
        guard let rules = await corsRules(bucket) else {
            throw S3Error(.accessDenied, "CORSResponse: CORS is not enabled for this bucket.")
        }
        let requested = (request.headers[.accessControlRequestHeaders] ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        guard
            let rule = rules.first(where: { rule in
                rule.allowedMethods.contains(method) && rule.allowedOrigins.contains { Self.matches(origin, $0) }
                    && requested.allSatisfy { header in rule.allowedHeaders.contains { Self.matches(header, $0.lowercased()) } }
            })
        else {
            throw S3Error(
                .accessDenied,
                "CORSResponse: This CORS request is not allowed. This is usually because the evaluation of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.")
        }
        var headers = Self.corsHeaders(rule, origin: origin)
        if !requested.isEmpty { headers[.accessControlAllowHeaders] = requested.joined(separator: ", ") }
        headers[.contentLength] = "0"
        return Response(status: .ok, headers: headers)
    }

    /// The CORS headers an ordinary cross-origin request gets when a rule matches its origin and method.
    func corsHeaders(for request: Request, bucket: String) async -> HTTPFields? {
        guard let origin = request.headers[.origin], let rules = await corsRules(bucket) else { return nil }
        let method = request.method == .head ? "HEAD" : request.method.rawValue
        guard
            let rule = rules.first(where: { rule in
                rule.allowedMethods.contains(method) && rule.allowedOrigins.contains { Self.matches(origin, $0) }
            })
        else { return nil }
        return Self.corsHeaders(rule, origin: origin)
    }

    private static func corsHeaders(_ rule: S3CORSConfiguration.Rule, origin: String) -> HTTPFields {
        var headers: HTTPFields = [:]
        let any = rule.allowedOrigins.contains("*")
        headers[.accessControlAllowOrigin] = any ? "*" : origin
        if !any { headers[.accessControlAllowCredentials] = "true" }
        headers[.accessControlAllowMethods] = rule.allowedMethods.joined(separator: ", ")
        if !rule.exposeHeaders.isEmpty { headers[.accessControlExposeHeaders] = rule.exposeHeaders.joined(separator: ", ") }
        if let age = rule.maxAgeSeconds { headers[.accessControlMaxAge] = String(age) }
        headers[.vary] = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"
        return headers
    }

    /// Whether `value` matches a CORS pattern with at most one `*` (which matches any run of characters).
    static func matches(_ value: String, _ pattern: String) -> Bool {
        guard let star = pattern.firstIndex(of: "*") else { return value == pattern }
        let prefix = pattern[..<star]
        let suffix = pattern[pattern.index(after: star)...]
        return value.count >= prefix.count + suffix.count && value.hasPrefix(prefix) && value.hasSuffix(suffix)
    }
}
