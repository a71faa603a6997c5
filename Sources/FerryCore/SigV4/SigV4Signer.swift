import Crypto
import Foundation

// `@unchecked Sendable`: `SymmetricKey` is not declared `Sendable` by swift-crypto on Linux, but it is
// an immutable value whose copy-on-write storage is never mutated once shared, so sharing it across
// concurrency domains is safe.
/// Everything produced while signing one request: the headers to send plus the intermediate
/// values, which tests compare with published examples and which seed aws-chunked signing.
public struct SigV4SignedRequest: @unchecked Sendable {
    /// The full header list to send: the caller's headers, the added `x-amz-*` headers and `Authorization`.
    public var headers: [(name: String, value: String)]
    /// The `Authorization` header value.
    public var authorization: String
    /// The request signature (lowercase hex); the seed signature of an aws-chunked body.
    public var signature: String
    /// The signed header names, lowercase and sorted.
    public var signedHeaders: [String]
    /// The canonical request that was signed.
    public var canonicalRequest: String
    /// The string to sign.
    public var stringToSign: String
    /// The amz timestamp (`x-amz-date`).
    public var timestamp: String
    /// The credential scope.
    public var scope: SigV4Scope
    /// The derived signing key (secret: do not log).
    public var signingKey: SymmetricKey

    /// The aws-chunked mode whose chunk signatures chain from this request's signature
    /// (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD` / `...-TRAILER`).
    public var chunkedSigningMode: AWSChunkedMode {
        .signed(seedSignature: signature, signingKey: signingKey, timestamp: timestamp, scope: scope)
    }
}

/// Client-side SigV4 signer for one set of credentials, region and service.
public struct SigV4Signer: Sendable {
    /// The credentials requests are signed with.
    public var credentials: SigV4Credentials
    /// The region of the credential scope.
    public var region: String
    /// The service of the credential scope (`s3`).
    public var service: String

    /// Header names never signed even when present: hop-by-hop headers and headers that proxies
    /// or HTTP stacks commonly add or rewrite after signing.
    public static let unsignableHeaders: Set<String> = [
        "authorization", "connection", "expect", "keep-alive", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id",
    ]

    /// Creates a signer.
    public init(credentials: SigV4Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// Signs a request: ``SigV4SignedRequest/headers`` is the new full header list, and the intermediate values
    /// (the seed signature and signing key of an aws-chunked body among them) come with it.
    ///
    /// Adds `x-amz-date`, `x-amz-content-sha256` (for service `s3`, set to `payloadHash`) and
    /// `x-amz-security-token` (when the credentials have a session token), replacing any headers of
    /// the same names, then `Authorization`. Every header given is signed except
    /// ``unsignableHeaders``; `host` must already be among `headers`.
    ///
    /// - Parameters:
    ///   - method: the HTTP method, e.g. `PUT`.
    ///   - path: the URI-encoded path exactly as sent on the wire (it is the canonical URI).
    ///   - query: decoded query names and values.
    ///   - headers: the request headers, including `host`.
    ///   - payloadHash: hex SHA-256 of the body, ``SigV4/unsignedPayload`` or a `STREAMING-*` value.
    ///   - date: the signing time.
    public func sign(
        method: String,
        path: String,
        query: [(name: String, value: String)],
        headers: [(name: String, value: String)],
        payloadHash: String,
        date: Date
    ) -> SigV4SignedRequest {
        let timestamp = SigV4.timestamp(date)
        let scope = SigV4Scope(date: String(timestamp.prefix(8)), region: region, service: service)

        var replaced: Set<String> = ["x-amz-date", "authorization"]
        if service == "s3" { replaced.insert("x-amz-content-sha256") }
        if credentials.sessionToken != nil { replaced.insert("x-amz-security-token") }
        var all = headers.filter { !replaced.contains($0.name.lowercased()) }
        all.append((name: "x-amz-date", value: timestamp))
        if service == "s3" { all.append((name: "x-amz-content-sha256", value: payloadHash)) }
        if let token = credentials.sessionToken { all.append((name: "x-amz-security-token", value: token)) }

        let signedHeaders = SigV4.normalizedSignedHeaders(
            all.map { $0.name }.filter { !Self.unsignableHeaders.contains($0.lowercased()) })
        let canonicalRequest = SigV4.canonicalRequest(
            method: method, canonicalURI: path, query: query, headers: all,
            signedHeaders: signedHeaders, payloadHash: payloadHash)
        let stringToSign = SigV4.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonicalRequest)
        let key = SigV4.signingKey(secretAccessKey: credentials.secretAccessKey, scope: scope)
        let signature = SigV4.signature(signingKey: key, stringToSign: stringToSign)
        let authorization = SigV4Authorization.headerValue(
            accessKeyId: credentials.accessKeyId, scope: scope, signedHeaders: signedHeaders, signature: signature)
        all.append((name: "Authorization", value: authorization))
        return SigV4SignedRequest(
            headers: all, authorization: authorization, signature: signature, signedHeaders: signedHeaders,
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, timestamp: timestamp, scope: scope,
            signingKey: key)
    }

    /// The query items of a presigned URL for `path` and `query` on `host`.
    ///
    /// Returns `query` followed by `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`,
    /// `X-Amz-Expires`, `X-Amz-SignedHeaders` (`host` plus the names of `extraHeaders`),
    /// `X-Amz-Security-Token` (when the credentials have one) and `X-Amz-Signature`, all decoded:
    /// encode them with ``SigV4/uriEncode(_:encodeSlash:)`` (slash included) or
    /// ``SigV4/canonicalQueryString(_:)`` to build the URL. The payload is `UNSIGNED-PAYLOAD`.
    ///
    /// - Parameters:
    ///   - path: the URI-encoded path as it will appear in the URL.
    ///   - expires: validity in seconds, 1...604800.
    ///   - extraHeaders: headers the user of the URL must send with exactly these values.
    /// - Throws: ``SigV4Error`` with code ``SigV4Error/Code/invalidExpires`` when `expires` is out of range.
    public func presign(
        method: String,
        path: String,
        query: [(name: String, value: String)],
        host: String,
        expires: Int,
        date: Date,
        extraHeaders: [(name: String, value: String)] = []
    ) throws(SigV4Error) -> [(name: String, value: String)] {
        guard (1...604_800).contains(expires) else {
            throw SigV4Error(.invalidExpires, "X-Amz-Expires must be between 1 and 604800 seconds, got \(expires)")
        }
        let timestamp = SigV4.timestamp(date)
        let scope = SigV4Scope(date: String(timestamp.prefix(8)), region: region, service: service)
        var headers = extraHeaders.filter { $0.name.lowercased() != "host" }
        headers.insert((name: "host", value: host), at: 0)
        let signedHeaders = SigV4.normalizedSignedHeaders(headers.map { $0.name })

        var items = query
        items.append((name: "X-Amz-Algorithm", value: SigV4.algorithm))
        items.append((name: "X-Amz-Credential", value: "\(credentials.accessKeyId)/\(scope.string)"))
        items.append((name: "X-Amz-Date", value: timestamp))
        items.append((name: "X-Amz-Expires", value: String(expires)))
        if let token = credentials.sessionToken {
            items.append((name: "X-Amz-Security-Token", value: token))
        }
        items.append((name: "X-Amz-SignedHeaders", value: signedHeaders.joined(separator: ";")))

        let canonicalRequest = SigV4.canonicalRequest(
            method: method, canonicalURI: path, query: items, headers: headers,
            signedHeaders: signedHeaders, payloadHash: SigV4.unsignedPayload)
        let stringToSign = SigV4.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonicalRequest)
        let key = SigV4.signingKey(secretAccessKey: credentials.secretAccessKey, scope: scope)
        items.append((name: "X-Amz-Signature", value: SigV4.signature(signingKey: key, stringToSign: stringToSign)))
        return items
    }
}

// `@unchecked Sendable`: `SymmetricKey` is not declared `Sendable` by swift-crypto on Linux, but it is
// an immutable value whose copy-on-write storage is never mutated once shared, so sharing it across
// concurrency domains is safe.
/// The running signature chain of an aws-chunked body, shared by ``AWSChunkedEncoder`` (which
/// signs) and ``AWSChunkedDecoder`` (which verifies).
///
/// Each payload chunk's signature covers the previous signature (the request's seed signature
/// for the first chunk), so chunks cannot be reordered, dropped or replayed.
public struct SigV4ChunkSigner: @unchecked Sendable {
    /// The signing key of the request.
    public let signingKey: SymmetricKey
    /// The request's amz timestamp.
    public let timestamp: String
    /// The request's credential scope.
    public let scope: SigV4Scope
    /// The signature the next chunk (or the trailer) chains from.
    public private(set) var previousSignature: String

    private let payloadPrefix: [UInt8]
    private let trailerPrefix: [UInt8]

    /// Starts a chain from a request's seed signature.
    public init(seedSignature: String, signingKey: SymmetricKey, timestamp: String, scope: SigV4Scope) {
        self.signingKey = signingKey
        self.timestamp = timestamp
        self.scope = scope
        self.previousSignature = seedSignature.lowercased()
        self.payloadPrefix = Array("\(SigV4.chunkPayloadAlgorithm)\n\(timestamp)\n\(scope.string)\n".utf8)
        self.trailerPrefix = Array("\(SigV4.chunkTrailerAlgorithm)\n\(timestamp)\n\(scope.string)\n".utf8)
    }

    /// The signature of the next payload chunk whose data hashes to `chunkHash` (32-byte SHA-256
    /// digest), without advancing the chain.
    public func peekChunkSignature(chunkHash: SHA256.Digest) -> String {
        var mac = HMAC<SHA256>(key: signingKey)
        mac.update(data: payloadPrefix)
        mac.update(data: Array(previousSignature.utf8))
        mac.update(data: Self.newlineEmptyHashNewline)
        mac.update(data: Array(Hex.encode(chunkHash).utf8))
        return Hex.encode(mac.finalize())
    }

    /// Signs the next payload chunk whose data hashes to `chunkHash` and advances the chain.
    public mutating func signChunk(chunkHash: SHA256.Digest) -> String {
        let signature = peekChunkSignature(chunkHash: chunkHash)
        previousSignature = signature
        return signature
    }

    /// Signs the next payload chunk and advances the chain.
    public mutating func signChunk(_ data: some Collection<UInt8>) -> String {
        signChunk(chunkHash: Self.sha256(data))
    }

    /// Checks `signature` (lowercase hex) against the next chunk's and, when it matches, advances
    /// the chain to it. The comparison is constant-time.
    public mutating func verifyChunk(chunkHash: SHA256.Digest, signature: String) -> Bool {
        let expected = peekChunkSignature(chunkHash: chunkHash)
        guard SigV4.constantTimeEquals(expected, signature) else { return false }
        previousSignature = expected
        return true
    }

    /// The trailer signature over `canonicalTrailers` (see ``SigV4/canonicalTrailers(_:)``),
    /// chained from the final (zero-length) chunk's signature. Does not advance the chain.
    public func trailerSignature(canonicalTrailers: some Collection<UInt8>) -> String {
        var mac = HMAC<SHA256>(key: signingKey)
        mac.update(data: trailerPrefix)
        mac.update(data: Array(previousSignature.utf8))
        mac.update(data: [UInt8(ascii: "\n")])
        mac.update(data: Array(Hex.encode(Self.sha256(canonicalTrailers)).utf8))
        return Hex.encode(mac.finalize())
    }

    static let newlineEmptyHashNewline: [UInt8] = Array("\n\(SigV4.emptyPayloadHash)\n".utf8)

    static func sha256(_ data: some Collection<UInt8>) -> SHA256.Digest {
        if let digest = data.withContiguousStorageIfAvailable({ SHA256.hash(data: UnsafeRawBufferPointer($0)) }) {
            return digest
        }
        return SHA256.hash(data: Array(data))
    }
}
