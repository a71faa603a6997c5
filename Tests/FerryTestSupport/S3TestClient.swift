import AsyncHTTPClient
import FerryCore
import Foundation
import NIOCore
import NIOHTTP1

/// A raw S3 client for tests: signs with FerryCore's SigV4 and sends exactly the bytes a test asks for, so tests can
/// also send what no well-behaved client would.
public struct S3TestClient: Sendable {
    /// `http://host:port`.
    public let endpoint: String
    /// Signing credentials.
    public let credentials: SigV4Credentials
    /// Region in the signature scope.
    public var region = "us-east-1"
    /// The HTTP client requests go through (its connection pool bounds how many connections are open at once).
    public var httpClient: HTTPClient = .shared
    /// The in-memory router requests go to instead, for a server opened with ``TestServer/inMemory(minPartSize:configure:_:)``.
    public var router: InMemoryRouter?

    /// Creates a client.
    public init(endpoint: String, credentials: SigV4Credentials) {
        self.endpoint = endpoint
        self.credentials = credentials
    }

    /// A response: status, headers and the whole body.
    public struct Reply: Sendable {
        /// HTTP status.
        public var status: Int
        /// Headers.
        public var headers: HTTPHeaders
        /// Body bytes.
        public var body: [UInt8]
        /// Body as UTF-8.
        public var text: String { String(decoding: body, as: UTF8.self) }
        /// The `<Code>` of an S3 error document.
        public var errorCode: String? {
            guard let start = text.range(of: "<Code>"), let end = text.range(of: "</Code>") else { return nil }
            return String(text[start.upperBound..<end.lowerBound])
        }
        /// A header value.
        public func header(_ name: String) -> String? { headers.first(name: name) }
    }

    /// How the payload is signed.
    public enum Payload: Sendable {
        /// `x-amz-content-sha256` is the body's hash.
        case signed
        /// `UNSIGNED-PAYLOAD`.
        case unsigned
        /// A given (possibly wrong) hash.
        case hash(String)
    }

    /// Encodes a key for the path, as clients do.
    public static func path(_ bucket: String, _ key: String? = nil) -> String {
        var path = "/" + SigV4.uriEncode(bucket, encodeSlash: true)
        if let key { path += "/" + SigV4.uriEncode(key, encodeSlash: false) }
        return path
    }

    /// Signs and sends a request.
    public func send(
        _ method: String, _ path: String, query: [(name: String, value: String)] = [],
        headers extra: [(name: String, value: String)] = [], body: [UInt8] = [], payload: Payload = .signed,
        date: Date = Date(), mutateSigned: (@Sendable (inout [(name: String, value: String)]) -> Void)? = nil
    ) async throws -> Reply {
        let url = URL(string: endpoint)!
        let host = url.port.map { "\(url.host!):\($0)" } ?? url.host!
        let hash: String
        switch payload {
        case .signed: hash = SigV4.hexSHA256(body)
        case .unsigned: hash = SigV4.unsignedPayload
        case .hash(let value): hash = value
        }
        let signer = SigV4Signer(credentials: credentials, region: region)
        var headers = signer.sign(
            method: method, path: path, query: query, headers: [("host", host)] + extra, payloadHash: hash, date: date
        ).headers
        mutateSigned?(&headers)
        return try await sendRaw(method, path, query: query, headers: headers, body: body)
    }

    /// Sends a request exactly as given (no signing).
    public func sendRaw(
        _ method: String, _ path: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)], body: [UInt8] = []
    ) async throws -> Reply {
        var target = path
        if !query.isEmpty {
            target += "?" + query.map {
                SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
            }.joined(separator: "&")
        }
        if let router { return try await router.send(method, target, headers: headers, body: body) }
        let url = endpoint + target
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method)
        for header in headers where header.name.lowercased() != "host" {
            request.headers.add(name: header.name, value: header.value)
        }
        if !body.isEmpty || method == "PUT" || method == "POST" {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await httpClient.execute(request, timeout: .seconds(120))
        var collected = try await response.body.collect(upTo: 1 << 30)
        return Reply(
            status: Int(response.status.code), headers: response.headers,
            body: collected.readBytes(length: collected.readableBytes) ?? [])
    }

    /// GETs a full URL (e.g. a presigned playback URL) with optional headers, unsigned.
    public static func fetch(_ url: String, headers: [(name: String, value: String)] = []) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        for header in headers { request.headers.add(name: header.name, value: header.value) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        var collected = try await response.body.collect(upTo: 1 << 30)
        return Reply(
            status: Int(response.status.code), headers: response.headers,
            body: collected.readBytes(length: collected.readableBytes) ?? [])
    }

    /// Sends an unsigned request (a browser's preflight or form POST, say) to a full URL and collects the response.
    public static func fetchRaw(
        _ method: String, _ url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method)
        for header in headers { request.headers.add(name: header.name, value: header.value) }
        if !body.isEmpty { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await withoutRedirects.execute(request, timeout: .seconds(60))
        var collected = try await response.body.collect(upTo: 1 << 30)
        return Reply(
            status: Int(response.status.code), headers: response.headers,
            body: collected.readBytes(length: collected.readableBytes) ?? [])
    }

    /// A client that returns redirects instead of following them, as the tests need to see them (it lives as long as
    /// the test process).
    static let withoutRedirects = HTTPClient(
        eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))

    /// A presigned URL for a request on this client's endpoint.
    public func presignedURL(_ method: String, _ path: String, expires: Int = 300) throws -> String {
        let url = URL(string: endpoint)!
        let signer = SigV4Signer(credentials: credentials, region: region)
        let query = try signer.presign(
            method: method, path: path, query: [], host: "\(url.host!):\(url.port!)", expires: expires, date: Date())
        return endpoint + path + "?" + query.map {
            SigV4.uriEncode($0.name, encodeSlash: true) + "=" + SigV4.uriEncode($0.value, encodeSlash: true)
        }.joined(separator: "&")
    }

    // MARK: Conveniences

    /// CreateBucket.
    @discardableResult
    public func createBucket(_ bucket: String) async throws -> Reply {
        try await send("PUT", Self.path(bucket))
    }

    /// PutObject.
    @discardableResult
    public func put(
        _ bucket: String, _ key: String, _ body: [UInt8], headers: [(name: String, value: String)] = []
    ) async throws -> Reply {
        try await send("PUT", Self.path(bucket, key), headers: headers, body: body)
    }

    /// GetObject.
    public func get(_ bucket: String, _ key: String, headers: [(name: String, value: String)] = []) async throws
        -> Reply
    {
        try await send("GET", Self.path(bucket, key), headers: headers)
    }

    /// CreateMultipartUpload; returns the upload id.
    public func createMultipartUpload(
        _ bucket: String, _ key: String, headers: [(name: String, value: String)] = []
    ) async throws -> String {
        let reply = try await send("POST", Self.path(bucket, key), query: [("uploads", "")], headers: headers)
        let result = try S3XML.decode(InitiateMultipartUploadResult.self, from: Data(reply.body))
        return result.uploadId
    }

    /// UploadPart.
    public func uploadPart(
        _ bucket: String, _ key: String, uploadId: String, number: Int, _ body: [UInt8],
        headers: [(name: String, value: String)] = []
    ) async throws -> Reply {
        try await send(
            "PUT", Self.path(bucket, key), query: [("partNumber", String(number)), ("uploadId", uploadId)],
            headers: headers, body: body)
    }

    /// CompleteMultipartUpload with a raw XML body.
    public func complete(_ bucket: String, _ key: String, uploadId: String, xml: String,
        headers: [(name: String, value: String)] = []) async throws -> Reply
    {
        try await send(
            "POST", Self.path(bucket, key), query: [("uploadId", uploadId)], headers: headers, body: Array(xml.utf8))
    }

    /// The CompleteMultipartUpload XML for parts (number, ETag).
    public static func completeXML(_ parts: [(Int, String)], checksums: [Int: (String, String)] = [:]) -> String {
        var xml = "<CompleteMultipartUpload>"
        for (number, etag) in parts {
            xml += "<Part><PartNumber>\(number)</PartNumber><ETag>\(etag)</ETag>"
            if let (name, value) = checksums[number] { xml += "<Checksum\(name)>\(value)</Checksum\(name)>" }
            xml += "</Part>"
        }
        return xml + "</CompleteMultipartUpload>"
    }
}
