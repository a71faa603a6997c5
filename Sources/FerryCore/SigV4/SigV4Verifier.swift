import Crypto
import Foundation

/// A parsed `Authorization` header:
/// `AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=…`.
///
/// Parsing is as tolerant as AWS: the three parameters may come in any order, separated by
/// commas with or without spaces.
public struct SigV4Authorization: Sendable, Hashable {
    /// The access key id from `Credential`.
    public var accessKeyId: String
    /// The credential scope from `Credential`.
    public var scope: SigV4Scope
    /// The signed header names, lowercase, in the order given.
    public var signedHeaders: [String]
    /// The signature, lowercase hex.
    public var signature: String

    /// Creates a value from its parts.
    public init(accessKeyId: String, scope: SigV4Scope, signedHeaders: [String], signature: String) {
        self.accessKeyId = accessKeyId
        self.scope = scope
        self.signedHeaders = signedHeaders
        self.signature = signature
    }

    /// Parses an `Authorization` header value.
    /// - Throws: ``SigV4Error`` with code ``SigV4Error/Code/malformedAuthorization``.
    public init(parsing header: String) throws(SigV4Error) {
        let trimmed = header.drop { $0 == " " || $0 == "\t" }
        guard trimmed.hasPrefix(SigV4.algorithm) else {
            throw .malformedAuthorization("the authorization header does not use \(SigV4.algorithm)")
        }
        let rest = trimmed.dropFirst(SigV4.algorithm.count)
        guard let first = rest.first, first == " " || first == "\t" else {
            throw .malformedAuthorization("the authorization header does not use \(SigV4.algorithm)")
        }
        var credential: String?
        var signedHeaders: String?
        var signature: String?
        for part in rest.split(separator: ",") {
            let item = SigV4.canonicalHeaderValue(String(part))
            if item.isEmpty { continue }
            guard let eq = item.firstIndex(of: "=") else {
                throw .malformedAuthorization("the authorization header has a component without '='")
            }
            let key = item[..<eq].trimmingCharacters(in: .whitespaces)
            let value = item[item.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            switch key.lowercased() {
            case "credential":
                guard credential == nil else { throw .malformedAuthorization("Credential is given twice") }
                credential = value
            case "signedheaders":
                guard signedHeaders == nil else { throw .malformedAuthorization("SignedHeaders is given twice") }
                signedHeaders = value
            case "signature":
                guard signature == nil else { throw .malformedAuthorization("Signature is given twice") }
                signature = value
            default:
                throw .malformedAuthorization("the authorization header has an unknown component '\(key.prefix(32))'")
            }
        }
        guard let credential else { throw .malformedAuthorization("the authorization header has no Credential") }
        guard let signedHeaders else { throw .malformedAuthorization("the authorization header has no SignedHeaders") }
        guard let signature else { throw .malformedAuthorization("the authorization header has no Signature") }
        let (accessKeyId, scope) = try Self.parseCredential(credential, error: SigV4Error.Code.malformedAuthorization)
        self.accessKeyId = accessKeyId
        self.scope = scope
        self.signedHeaders = try Self.parseSignedHeaders(signedHeaders, error: .malformedAuthorization)
        guard SigV4.isHex64(signature) else {
            throw .malformedAuthorization("Signature is not 64 hex digits")
        }
        self.signature = signature.lowercased()
    }

    /// The `Authorization` header value for these parts, in the layout of the AWS S3 examples:
    /// `AWS4-HMAC-SHA256 Credential=…,SignedHeaders=…,Signature=…`.
    public var headerValue: String {
        Self.headerValue(accessKeyId: accessKeyId, scope: scope, signedHeaders: signedHeaders, signature: signature)
    }

    static func headerValue(accessKeyId: String, scope: SigV4Scope, signedHeaders: [String], signature: String)
        -> String
    {
        "\(SigV4.algorithm) Credential=\(accessKeyId)/\(scope.string),SignedHeaders=\(signedHeaders.joined(separator: ";")),Signature=\(signature)"
    }

    /// Splits `AKID/date/region/service/aws4_request` (the access key id may not be empty).
    static func parseCredential(_ credential: String, error code: SigV4Error.Code) throws(SigV4Error) -> (
        String, SigV4Scope
    ) {
        let parts = credential.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 5 else {
            throw SigV4Error(code, "the credential is not access-key/date/region/service/aws4_request")
        }
        let accessKeyId = parts[..<(parts.count - 4)].joined(separator: "/")
        guard !accessKeyId.isEmpty else { throw SigV4Error(code, "the credential has an empty access key id") }
        guard let scope = SigV4Scope(parsing: parts[(parts.count - 4)...].joined(separator: "/")) else {
            throw SigV4Error(code, "the credential scope is not date/region/service/aws4_request")
        }
        return (accessKeyId, scope)
    }

    static func parseSignedHeaders(_ value: String, error code: SigV4Error.Code) throws(SigV4Error) -> [String] {
        let names = value.split(separator: ";", omittingEmptySubsequences: false).map { $0.lowercased() }
        guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty && !$0.contains(" ") }) else {
            throw SigV4Error(code, "SignedHeaders is empty or has an empty name")
        }
        return names
    }
}

/// The parsed `X-Amz-*` parameters of a presigned URL.
public struct SigV4PresignedQuery: Sendable, Hashable {
    /// The access key id from `X-Amz-Credential`.
    public var accessKeyId: String
    /// The credential scope from `X-Amz-Credential`.
    public var scope: SigV4Scope
    /// `X-Amz-SignedHeaders`, lowercase.
    public var signedHeaders: [String]
    /// `X-Amz-Signature`, lowercase hex.
    public var signature: String
    /// `X-Amz-Date`, the amz timestamp the URL was signed at.
    public var timestamp: String
    /// `X-Amz-Date` as a date.
    public var date: Date
    /// `X-Amz-Expires`, seconds of validity after ``date`` (1...604800).
    public var expires: Int
    /// `X-Amz-Security-Token`, when the URL was signed with temporary credentials.
    public var securityToken: String?

    /// Whether the query carries presigned-URL authentication (an `X-Amz-Algorithm`,
    /// `X-Amz-Credential` or `X-Amz-Signature` parameter).
    public static func isPresigned(_ items: [(name: String, value: String)]) -> Bool {
        items.contains { ["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"].contains($0.name) }
    }

    /// The moment the URL stops being valid.
    public var expiration: Date { date.addingTimeInterval(TimeInterval(expires)) }

    /// Parses decoded query items.
    /// - Throws: ``SigV4Error`` with code ``SigV4Error/Code/malformedPresignedQuery`` or
    ///   ``SigV4Error/Code/invalidExpires``.
    public init(parsing items: [(name: String, value: String)]) throws(SigV4Error) {
        func single(_ name: String) throws(SigV4Error) -> String? {
            let values = items.filter { $0.name == name }
            guard values.count <= 1 else { throw .malformedPresignedQuery("\(name) is given more than once") }
            return values.first?.value
        }
        func required(_ name: String) throws(SigV4Error) -> String {
            guard let value = try single(name) else { throw .malformedPresignedQuery("\(name) is missing") }
            return value
        }
        guard try required("X-Amz-Algorithm") == SigV4.algorithm else {
            throw .malformedPresignedQuery("X-Amz-Algorithm must be \(SigV4.algorithm)")
        }
        let (accessKeyId, scope) = try SigV4Authorization.parseCredential(
            try required("X-Amz-Credential"), error: .malformedPresignedQuery)
        let timestamp = try required("X-Amz-Date")
        guard let date = SigV4.parseTimestamp(timestamp) else {
            throw .malformedPresignedQuery("X-Amz-Date is not yyyyMMdd'T'HHmmss'Z'")
        }
        guard timestamp.hasPrefix(scope.date) else {
            throw .malformedPresignedQuery("X-Amz-Date is not on the credential scope's date")
        }
        let expiresText = try required("X-Amz-Expires")
        if expiresText.hasPrefix("-"), expiresText.utf8.count <= 8,
            expiresText.utf8.dropFirst().allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        {
            // A URL that was valid for a negative time has expired before anyone could use it.
            throw SigV4Error(.requestExpired, "the request has expired")
        }
        guard expiresText.utf8.count <= 7,
            expiresText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let expires = Int(expiresText)
        else {
            throw SigV4Error(.invalidExpires, "X-Amz-Expires is not a number of seconds")
        }
        guard (1...604_800).contains(expires) else {
            throw SigV4Error(.invalidExpires, "X-Amz-Expires must be between 1 and 604800 seconds")
        }
        let signedHeaders = try SigV4Authorization.parseSignedHeaders(
            try required("X-Amz-SignedHeaders"), error: .malformedPresignedQuery)
        let signature = try required("X-Amz-Signature")
        guard SigV4.isHex64(signature) else { throw .malformedPresignedQuery("X-Amz-Signature is not 64 hex digits") }
        self.accessKeyId = accessKeyId
        self.scope = scope
        self.signedHeaders = signedHeaders
        self.signature = signature.lowercased()
        self.timestamp = timestamp
        self.date = date
        self.expires = expires
        self.securityToken = try single("X-Amz-Security-Token")
    }
}

// `@unchecked Sendable`: `SymmetricKey` is not declared `Sendable` by swift-crypto on Linux, but it is
// an immutable value whose copy-on-write storage is never mutated once shared, so sharing it across
// concurrency domains is safe.
/// The outcome of a successful verification: who signed, and what an aws-chunked body's
/// chunk signatures must chain from.
public struct SigV4VerifiedRequest: @unchecked Sendable {
    /// The access key id that signed the request.
    public var accessKeyId: String
    /// The credential scope of the signature.
    public var scope: SigV4Scope
    /// The amz timestamp of the signature.
    public var timestamp: String
    /// The verified request signature (the seed of an aws-chunked body).
    public var signature: String
    /// The signing key (secret: do not log).
    public var signingKey: SymmetricKey
    /// The payload hash that was signed (a hex hash, `UNSIGNED-PAYLOAD` or a `STREAMING-*` value).
    public var payloadHash: String
    /// The signed header names, lowercase and sorted.
    public var signedHeaders: [String]
    /// The session token (`x-amz-security-token`), when one was sent and signed.
    public var securityToken: String?

    /// The ``AWSChunkedDecoder`` mode for the body of this request: `.signed` chained from this
    /// signature for `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`, `.unsigned` for
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, `nil` when the body is not aws-chunked.
    public var chunkedDecoderMode: AWSChunkedMode? {
        switch payloadHash {
        case SigV4.streamingSignedPayload, SigV4.streamingSignedPayloadTrailer:
            return .signed(seedSignature: signature, signingKey: signingKey, timestamp: timestamp, scope: scope)
        case SigV4.streamingUnsignedPayloadTrailer:
            return .unsigned
        default:
            return nil
        }
    }
}

/// Server-side verification of SigV4 header-signed and presigned requests.
///
/// The server parses the authentication (``SigV4Authorization`` or ``SigV4PresignedQuery``), looks
/// up the secret of its access key id, then calls one of these functions with the request as
/// received. They recompute the signature with the same canonicalization the signer uses and
/// compare in constant time.
public enum SigV4Verifier {
    /// The default maximum difference between a header-signed request's time and the server clock (15 minutes, as S3).
    public static let defaultMaxClockSkew: TimeInterval = 15 * 60

    /// Refuses a request carrying an `x-amz-*` header that `signedHeaders` leaves out, as S3 does: such a header
    /// would change what the signer allowed (an unsigned `x-amz-copy-source` turns a presigned PUT into a copy of
    /// another object; `x-amz-tagging` or `x-amz-meta-*` add what was not signed). `x-amz-content-sha256` may go
    /// unsigned, as S3 accepts.
    static func requireSigned(_ present: Set<String>, signedHeaders: [String]) throws(SigV4Error) {
        let signed = Set(signedHeaders)
        let unsigned = present.filter { $0.hasPrefix("x-amz-") && $0 != "x-amz-content-sha256" && !signed.contains($0) }
        guard unsigned.isEmpty else {
            throw SigV4Error(
                .headersNotSigned,
                "There were headers present in the request which were not signed: "
                    + unsigned.sorted().prefix(8).map { String($0.prefix(64)) }.joined(separator: ", "))
        }
    }

    /// Verifies a request signed with an `Authorization` header.
    ///
    /// - Parameters:
    ///   - authorization: the parsed `Authorization` header.
    ///   - secretAccessKey: the secret of `authorization.accessKeyId`.
    ///   - method: the HTTP method.
    ///   - canonicalURI: the canonical URI, usually ``SigV4/canonicalURI(fromRawPath:)`` of the raw path.
    ///   - query: decoded query items (``SigV4/parseQueryString(_:)`` of the raw query).
    ///   - headers: all request headers as received.
    ///   - payloadHash: the payload hash to verify against; `nil` takes the `x-amz-content-sha256`
    ///     header, which S3 requires. Checking that the body matches a hex hash is the caller's job.
    ///   - now: the server time, checked against `x-amz-date` within `maxClockSkew`; `nil` skips the check.
    ///   - expectedRegion: when set, the scope's region must equal it.
    ///   - expectedService: the scope's service must equal it.
    /// - Throws: ``SigV4Error`` (malformed authorization, skew, an unsigned `x-amz-*` header, or signature mismatch).
    public static func verify(
        authorization: SigV4Authorization,
        secretAccessKey: String,
        method: String,
        canonicalURI: String,
        query: [(name: String, value: String)],
        headers: [(name: String, value: String)],
        payloadHash: String? = nil,
        now: Date?,
        maxClockSkew: TimeInterval = defaultMaxClockSkew,
        expectedRegion: String? = nil,
        expectedService: String = "s3"
    ) throws(SigV4Error) -> SigV4VerifiedRequest {
        let scope = authorization.scope
        try checkScope(
            scope, expectedRegion: expectedRegion, expectedService: expectedService, code: .malformedAuthorization)
        let signedHeaders = SigV4.normalizedSignedHeaders(authorization.signedHeaders)
        guard signedHeaders.contains("host") else {
            throw .malformedAuthorization("the host header must be signed")
        }
        let present = Set(headers.map { $0.name.lowercased() })
        for name in signedHeaders where !present.contains(name) {
            throw .malformedAuthorization("the signed header '\(name.prefix(64))' is not in the request")
        }
        try requireSigned(present, signedHeaders: signedHeaders)
        // The request time comes from x-amz-date or, without it, from Date (as S3 accepts either); the string to
        // sign always carries it in the basic ISO 8601 form.
        let timestamp: String
        let date: Date
        if let amzDate = value(of: "x-amz-date", in: headers) {
            guard signedHeaders.contains("x-amz-date") else {
                throw .malformedAuthorization("x-amz-date must be signed")
            }
            guard let parsed = SigV4.parseTimestamp(amzDate) else {
                throw .malformedAuthorization("x-amz-date is not yyyyMMdd'T'HHmmss'Z'")
            }
            (timestamp, date) = (amzDate, parsed)
        } else if let httpDate = value(of: "date", in: headers), !httpDate.isEmpty {
            guard signedHeaders.contains("date") else {
                throw .malformedAuthorization("the date header must be signed")
            }
            guard let parsed = S3Date.parseHTTP(httpDate) else {
                throw .malformedAuthorization("the date header is not an HTTP date")
            }
            (timestamp, date) = (SigV4.timestamp(parsed), parsed)
        } else {
            throw .malformedAuthorization("x-amz-date (or date) is missing")
        }
        guard timestamp.hasPrefix(scope.date) else {
            throw .malformedAuthorization("the credential scope date is not the date of x-amz-date")
        }
        if let now, abs(date.timeIntervalSince(now)) > maxClockSkew {
            // As S3 does, the refusal names both times, so a client can correct its clock from it.
            let sent = value(of: "x-amz-date", in: headers) ?? value(of: "date", in: headers) ?? timestamp
            throw SigV4Error(
                .requestTimeTooSkewed, "the difference between the request time and the server's time is too large",
                details: [
                    "RequestTime": sent, "ServerTime": S3Date.xml(now),
                    "MaxAllowedSkewMilliseconds": String(Int64(maxClockSkew * 1000)),
                ])
        }
        let hash: String
        if let payloadHash {
            hash = payloadHash
        } else if let header = value(of: "x-amz-content-sha256", in: headers) {
            hash = header
        } else {
            throw .malformedAuthorization("x-amz-content-sha256 is missing")
        }
        let securityToken = value(of: "x-amz-security-token", in: headers)
        if securityToken != nil, !signedHeaders.contains("x-amz-security-token") {
            throw .malformedAuthorization("x-amz-security-token must be signed")
        }
        let canonical = SigV4.canonicalRequest(
            method: method, canonicalURI: canonicalURI, query: query, headers: headers,
            signedHeaders: signedHeaders, payloadHash: hash)
        let stringToSign = SigV4.stringToSign(timestamp: timestamp, scope: scope, canonicalRequest: canonical)
        let key = SigV4.signingKey(secretAccessKey: secretAccessKey, scope: scope)
        let expected = SigV4.signature(signingKey: key, stringToSign: stringToSign)
        guard SigV4.constantTimeEquals(expected, authorization.signature) else {
            throw .signatureDoesNotMatch(
                "the request signature we calculated does not match the signature you provided")
        }
        return SigV4VerifiedRequest(
            accessKeyId: authorization.accessKeyId, scope: scope, timestamp: timestamp, signature: expected,
            signingKey: key, payloadHash: hash, signedHeaders: signedHeaders, securityToken: securityToken)
    }

    /// Verifies a presigned-URL request.
    ///
    /// - Parameters:
    ///   - presigned: the parsed `X-Amz-*` parameters.
    ///   - secretAccessKey: the secret of `presigned.accessKeyId`.
    ///   - query: all decoded query items as received (`X-Amz-Signature` is left out of the
    ///     canonical query here).
    ///   - headers: all request headers as received; those in `X-Amz-SignedHeaders` must be present.
    ///   - now: the server time: the URL must not be expired, nor dated more than `maxClockSkew` in the future.
    /// - Returns: the verification result; its payload hash is `UNSIGNED-PAYLOAD` unless the URL
    ///   signed an `X-Amz-Content-Sha256` parameter, or the request sends the body's SHA-256 (hex) in an
    ///   `x-amz-content-sha256` header, which the body is then checked against.
    public static func verify(
        presigned: SigV4PresignedQuery,
        secretAccessKey: String,
        method: String,
        canonicalURI: String,
        query: [(name: String, value: String)],
        headers: [(name: String, value: String)],
        now: Date,
        maxClockSkew: TimeInterval = defaultMaxClockSkew,
        expectedRegion: String? = nil,
        expectedService: String = "s3"
    ) throws(SigV4Error) -> SigV4VerifiedRequest {
        let scope = presigned.scope
        try checkScope(
            scope, expectedRegion: expectedRegion, expectedService: expectedService, code: .malformedPresignedQuery)
        let signedHeaders = SigV4.normalizedSignedHeaders(presigned.signedHeaders)
        guard signedHeaders.contains("host") else {
            throw .malformedPresignedQuery("the host header must be signed")
        }
        let present = Set(headers.map { $0.name.lowercased() })
        for name in signedHeaders where !present.contains(name) {
            throw .malformedPresignedQuery("the signed header '\(name.prefix(64))' is not in the request")
        }
        try requireSigned(present, signedHeaders: signedHeaders)
        if presigned.date.timeIntervalSince(now) > maxClockSkew {
            throw SigV4Error(.requestNotYetValid, "the request is not valid yet")
        }
        if now > presigned.expiration {
            throw SigV4Error(.requestExpired, "the request has expired")
        }
        let canonicalQuery = query.filter { $0.name != "X-Amz-Signature" }
        let hash = query.first { $0.name == "X-Amz-Content-Sha256" }?.value ?? SigV4.unsignedPayload
        let canonical = SigV4.canonicalRequest(
            method: method, canonicalURI: canonicalURI, query: canonicalQuery, headers: headers,
            signedHeaders: signedHeaders, payloadHash: hash)
        let stringToSign = SigV4.stringToSign(timestamp: presigned.timestamp, scope: scope, canonicalRequest: canonical)
        let key = SigV4.signingKey(secretAccessKey: secretAccessKey, scope: scope)
        let expected = SigV4.signature(signingKey: key, stringToSign: stringToSign)
        guard SigV4.constantTimeEquals(expected, presigned.signature) else {
            throw .signatureDoesNotMatch(
                "the request signature we calculated does not match the signature you provided")
        }
        // A body hash the client sends beside the URL is checked as a header-signed request's is.
        let sent = value(of: "x-amz-content-sha256", in: headers)
        let bodyHash = hash == SigV4.unsignedPayload ? sent.flatMap { SigV4.isHex64($0) ? $0 : nil } ?? hash : hash
        return SigV4VerifiedRequest(
            accessKeyId: presigned.accessKeyId, scope: scope, timestamp: presigned.timestamp, signature: expected,
            signingKey: key, payloadHash: bodyHash, signedHeaders: signedHeaders,
            securityToken: presigned.securityToken)
    }

    private static func checkScope(
        _ scope: SigV4Scope, expectedRegion: String?, expectedService: String, code: SigV4Error.Code
    ) throws(SigV4Error) {
        if let expectedRegion, scope.region != expectedRegion {
            throw SigV4Error(
                code, "the credential scope region '\(scope.region.prefix(64))' is wrong; expecting '\(expectedRegion)'"
            )
        }
        guard scope.service == expectedService else {
            throw SigV4Error(
                code,
                "the credential scope service '\(scope.service.prefix(64))' is wrong; expecting '\(expectedService)'")
        }
    }

    /// The value of the first header named `name` (case-insensitive), trimmed.
    static func value(of name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name.lowercased() == name }.map { SigV4.canonicalHeaderValue($0.value) }
    }
}
