import FerryCore
import Foundation

/// Authenticates a request signed with AWS Signature Version 4: an `Authorization` header or a presigned query.
///
/// The key id (and session token, when present) resolves to a secret and a principal through the `CredentialStore`;
/// the signature is then verified by FerryCore's `SigV4Verifier`, the same code the client signs with. Anonymous
/// requests are refused.
struct RequestAuthenticator: Sendable {
    let credentials: CredentialStore
    /// The server's region: a signature's credential scope must name it (AuthorizationHeaderMalformed otherwise, as
    /// S3 answers).
    let region: String
    /// The longest a presigned URL may live (S3: 7 days).
    static let maxPresignedExpiry = 604_800

    /// The outcome: who signed, and how the body is protected.
    struct Authenticated: Sendable {
        var principal: Principal
        var verified: SigV4VerifiedRequest
    }

    /// The parts of a request that authentication reads.
    struct Input: Sendable {
        var method: String
        var rawPath: String
        var query: [(name: String, value: String)]
        /// Every header, with `host` among them.
        var headers: [(name: String, value: String)]
        var service: String = "s3"
        /// The body's hex SHA-256 for services that sign the payload without `x-amz-content-sha256`.
        var payloadHash: String?
    }

    /// Authenticates `input` at `now` (the store's clock when nil).
    func authenticate(_ input: Input, now: Date? = nil) async throws -> Authenticated {
        let now = now ?? credentials.now()
        let canonicalURI = SigV4.canonicalURI(fromRawPath: input.rawPath)
        if let header = input.headers.first(where: { $0.name.lowercased() == "authorization" })?.value {
            guard header.hasPrefix(SigV4.algorithm) else {
                throw FerryDomainError(.unsupportedAuthorization, "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
            }
            let authorization = try mapped { () throws(SigV4Error) in try SigV4Authorization(parsing: header) }
            let token = input.headers.first { $0.name.lowercased() == "x-amz-security-token" }?.value
            let resolved = try await credentials.resolve(
                accessKeyId: authorization.accessKeyId, sessionToken: token, now: now)
            if let hash = input.headers.first(where: { $0.name.lowercased() == "x-amz-content-sha256" })?.value {
                try Self.checkPayloadHashValue(hash)
            } else if input.service == "s3" {
                throw FerryDomainError(.missingContentHash, "Missing required header for this request: x-amz-content-sha256")
            }
            let verified = try mapped { () throws(SigV4Error) in
                try SigV4Verifier.verify(
                    authorization: authorization, secretAccessKey: resolved.secretAccessKey, method: input.method,
                    canonicalURI: canonicalURI, query: input.query, headers: input.headers,
                    payloadHash: input.service == "s3" ? nil : input.payloadHash ?? SigV4.emptyPayloadHash, now: now,
                    expectedRegion: region, expectedService: input.service)
            }
            return Authenticated(principal: resolved.principal, verified: verified)
        }
        if SigV4PresignedQuery.isPresigned(input.query) {
            if let expires = input.query.first(where: { $0.name == "X-Amz-Expires" }).flatMap({ Int($0.value) }),
                expires > Self.maxPresignedExpiry
            {
                throw FerryDomainError(
                    .presignedExpiryTooLong,
                    "X-Amz-Expires must be less than a week (in seconds) that is; 604800 seconds")
            }
            let presigned = try mapped { () throws(SigV4Error) in try SigV4PresignedQuery(parsing: input.query) }
            let resolved = try await credentials.resolve(
                accessKeyId: presigned.accessKeyId, sessionToken: presigned.securityToken, now: now)
            let verified = try mapped { () throws(SigV4Error) in
                try SigV4Verifier.verify(
                    presigned: presigned, secretAccessKey: resolved.secretAccessKey, method: input.method,
                    canonicalURI: canonicalURI, query: input.query, headers: input.headers, now: now,
                    expectedRegion: region, expectedService: input.service)
            }
            return Authenticated(principal: resolved.principal, verified: verified)
        }
        throw FerryDomainError(.anonymous, "Anonymous access is forbidden; sign the request with AWS Signature Version 4.")
    }

    /// Accepts a hex SHA-256 or one of the payload modes S3 knows.
    static func checkPayloadHashValue(_ value: String) throws {
        switch value {
        case SigV4.unsignedPayload, SigV4.streamingSignedPayload, SigV4.streamingSignedPayloadTrailer,
            SigV4.streamingUnsignedPayloadTrailer:
            return
        default:
            guard SigV4.isHex64(value) else {
                throw FerryDomainError(
                    .invalidContentHash,
                    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value."
                )
            }
        }
    }

    private func mapped<T>(_ body: () throws(SigV4Error) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw FerryDomainError(error)
        }
    }
}
