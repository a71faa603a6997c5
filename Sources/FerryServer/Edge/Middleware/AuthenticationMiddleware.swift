import Crypto
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// SigV4 authentication of the object API: an `Authorization` header or a presigned query, verified before the route
/// runs and before any body byte is read (the body's hash is checked as it streams). A request without either passes
/// as ``Caller/anonymous``: a browser's preflight, or a POST upload whose form carries its own signed policy; every
/// other operation refuses it.
struct S3AuthenticationMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let authenticator: RequestAuthenticator

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        try Self.refuseRepeatedAuthorization(request)
        // A path that is not a URI (a `%` without two hex digits) is InvalidURI, not a signature that cannot match;
        // so is a query whose escapes are not UTF-8 (its names and values could not be read as they were signed).
        _ = try ObjectAPI.splitPath(request.uri.path)
        try ObjectAPI.validateQuery(request.uri.query ?? "")
        let query = SigV4.parseQueryString(request.uri.query ?? "")
        var context = context
        if request.headers[.authorization] == nil, !SigV4PresignedQuery.isPresigned(query) {
            // A Signature Version 2 URL (what some SDKs presign by default for a custom endpoint) is signed, with a
            // mechanism Ferry does not take: say so, rather than call it anonymous.
            if query.contains(where: { $0.name == "AWSAccessKeyId" }), query.contains(where: { $0.name == "Signature" }) {
                throw FerryDomainError(
                    .unsupportedAuthorization,
                    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
            }
            context.caller = .anonymous
        } else {
            let authenticated = try await authenticator.authenticate(
                .init(method: request.method.rawValue, rawPath: request.uri.path, query: query, headers: Self.headers(of: request)))
            context.caller = .signed(authenticated.principal, authenticated.verified)
        }
        return try await next(request, context)
    }

    /// Every header of a request as SigV4 reads them, `host` among them.
    static func headers(of request: Request) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("host", request.head.authority ?? "")]
        for field in request.headers { headers.append((field.name.canonicalName, field.value)) }
        return headers
    }

    /// A request with two `Authorization` headers is refused: which one a proxy or a verifier would read is anyone's
    /// guess.
    static func refuseRepeatedAuthorization(_ request: Request) throws {
        if request.headers[values: .authorization].count > 1 {
            throw FerryDomainError(.unsupportedAuthorization, "A request may carry only one Authorization header.")
        }
    }
}

/// SigV4 authentication of the media API (service `ferry`): the JSON body, at most 1 MiB, is read first because its
/// hash is part of what is signed; the route gets the request with its body read. Anonymous requests are refused.
struct MediaAuthenticationMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let authenticator: RequestAuthenticator

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        try S3AuthenticationMiddleware.refuseRepeatedAuthorization(request)
        var request = request
        let body = try await request.collectSmallBody()
        let authenticated = try await authenticator.authenticate(
            .init(
                method: request.method.rawValue, rawPath: request.uri.path,
                query: SigV4.parseQueryString(request.uri.query ?? ""),
                headers: S3AuthenticationMiddleware.headers(of: request), service: MediaAPI.service,
                payloadHash: SigV4.hexSHA256(Data(buffer: body))))
        var context = context
        context.caller = .signed(authenticated.principal, authenticated.verified)
        return try await next(request, context)
    }
}

/// The web console's session (its `HttpOnly` cookie), and its CSRF token on requests that change something; the
/// part-signing endpoints also accept Uppy's `Uppy-Versions` header in place of the token (a header no page of another
/// site can add without a preflight, which Ferry never grants with credentials).
struct ConsoleSessionMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let sessions: ConsoleSessions
    /// Whether every request needs the CSRF token (the console's media routes), or only those that change state.
    var csrfOnEveryRequest = true
    /// Whether `Uppy-Versions` stands in for the CSRF token.
    var acceptsUppy = false

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let session = try await sessions.requireSession(request.headers)
        let changes = request.method != .get && request.method != .head
        if csrfOnEveryRequest || changes, !ConsoleSessions.hasCSRFToken(request.headers, session: session),
            !(acceptsUppy && request.headers[.uppyVersions] != nil)
        {
            throw ConsoleSessions.csrfMissing
        }
        var context = context
        context.caller = Caller(credential: .consoleSession, principal: session.principal, signedRequest: nil)
        return try await next(request, context)
    }
}

/// The publish API's credential: the `signature` field of the JSON body, a ``PublishSignature`` signed with an active
/// long-term key. The body (at most 1 MiB) is read here; the route gets the request with its body read and the
/// signature's fields in ``Caller/publishSignature``.
struct PublishSignatureMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let credentials: CredentialStore

    private struct SignedBody: Decodable {
        var signature: String?
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var request = request
        let body = try await request.collectSmallBody()
        let signed = try JSONBody.decode(SignedBody.self, from: Data(buffer: body))
        let (signature, principal) = try await authenticate(signed.signature)
        var context = context
        context.caller = Caller(credential: .publishSignature, principal: principal, publishSignature: signature)
        return try await next(request, context)
    }

    /// Verifies a signature and returns its fields and the principal of the key that signed it.
    func authenticate(_ signature: String?, now: Date? = nil) async throws -> (PublishSignature, Principal) {
        guard let signature, !signature.isEmpty else { throw MediaError.missing("signature") }
        let now = now ?? credentials.now()
        let parsed: PublishSignature.Parsed
        do {
            parsed = try PublishSignature.parse(signature)
        } catch {
            throw MediaError("InvalidSignature", "The signature cannot be read: \(error.message)", status: 403)
        }
        let invalid = MediaError("InvalidSignature", "The signature does not verify.", status: 403)
        guard let resolved = try await credentials.longTermKey(parsed.signature.secretId, now: now) else { throw invalid }
        guard parsed.isValid(secretKey: resolved.secretAccessKey) else { throw invalid }
        if let problem = parsed.signature.problem(at: now) { throw MediaError("InvalidSignature", problem, status: 403) }
        guard !parsed.signature.isExpired(at: now) else {
            throw MediaError("SignatureExpired", "The signature expired; ask the app server for a new one.", status: 403)
        }
        return (parsed.signature, resolved.principal)
    }
}

extension Request {
    /// The largest body the JSON routes read.
    static let maxSmallBody = 1024 * 1024

    /// Reads a JSON route's body (at most 1 MiB, else `bodyTooLarge`, at once when its `Content-Length` says more;
    /// one the HTTP layer cannot read, such as a `Transfer-Encoding` it does not know, is `malformedBody`) and keeps it
    /// in the request for the route.
    mutating func collectSmallBody() async throws -> ByteBuffer {
        try refuseDeclaredLargeBody()
        do {
            return try await collectBody(upTo: Self.maxSmallBody)
        } catch is NIOTooManyBytesError {
            throw Self.bodyTooLarge
        } catch let error as CancellationError {
            throw error
        } catch {
            throw FerryDomainError(.malformedBody, "The request body could not be read.")
        }
    }

    /// Refuses (`bodyTooLarge`) a `Content-Length` past a JSON route's limit before a byte of the body is read or
    /// invited; a length past what an Int holds (the HTTP layer takes up to 2^64 - 1) is larger still, not no length.
    func refuseDeclaredLargeBody() throws {
        if let declared = headers[.contentLength], Int(declared).map({ $0 > Self.maxSmallBody }) ?? true {
            throw Self.bodyTooLarge
        }
    }

    private static let bodyTooLarge = FerryDomainError(.bodyTooLarge, "The request body is larger than 1 MiB.")
}
