import FerryCore
import Hummingbird
import Logging

/// One debug record per request: client address, method, path with every credential in it redacted, status and
/// duration. Query values that carry signatures, credentials or tokens (a playback URL's `token` among them), and the
/// capability in resumable upload paths (an upload's id, a media upload URL's grant) are written as `<redacted>`;
/// headers and bodies are never logged.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext

    /// What the names of query parameters whose values are credentials contain, lowercased and percent-decoded
    /// (`X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`, a playback or form `token`, `AWSAccessKeyId`,
    /// and any spelling with more around them, as `X-Amz-Signature%00`).
    static let secretParameterParts = ["signature", "credential", "token", "accesskeyid"]

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard context.logger.logLevel <= .debug else { return try await next(request, context) }
        let start = ContinuousClock.now
        let status: Int
        do {
            let response = try await next(request, context)
            status = Int(response.status.code)
            log(request, context: context, status: status, since: start)
            return response
        } catch {
            status = (error as? any HTTPResponseError).map { Int($0.status.code) } ?? 500
            log(request, context: context, status: status, since: start)
            throw error
        }
    }

    private func log(_ request: Request, context: Context, status: Int, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        context.logger.debug(
            "access",
            metadata: [
                "ferry.client": .string(context.clientAddress ?? "-"),
                "ferry.method": .string(request.method.rawValue),
                "ferry.path": .string(Self.redacted(path: request.uri.path, query: request.uri.query)),
                "ferry.status": .stringConvertible(status),
                "ferry.duration-ms": .stringConvertible(
                    elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000),
            ])
    }

    /// The path and query with credentials replaced; at most 512 bytes.
    ///
    /// A resumable upload's path is read as the router reads it (empty segments skipped) and as a client may spell it
    /// (percent-encoded, in other case): whatever follows `/_ferry/uploads/` is redacted, but for `s3/<bucket>/<key>`.
    /// Elsewhere a path segment holding a JWT is redacted, wherever a client put it. A query item is redacted whole when anything in it names a credential, so
    /// that `a=1;token=…` (one item to the parser) is too.
    static func redacted(path: String, query: String?) -> String {
        var path = path
        let segments = (path.removingPercentEncoding ?? path).lowercased().split(separator: "/")
        if segments.starts(with: ["_ferry", "uploads"]), segments.count > 2, segments[2] != "s3" {
            path = ResumableUploadAPI.pathPrefix + (segments[2] == "grant" ? "grant/" : "") + "<redacted>"
        } else if path.contains("eyJ") {
            path = path.split(separator: "/", omittingEmptySubsequences: false)
                .map { looksLikeToken($0) ? "<redacted>" : String($0) }.joined(separator: "/")
        }
        guard let query, !query.isEmpty else { return String(path.prefix(512)) }
        let items = query.split(separator: "&", omittingEmptySubsequences: false).map { item -> String in
            let name = item.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            // Every name in it, `;` separating too (as some servers read a query), compared decoded, as authentication
            // reads it (`X-Amz-Signatur%65` is the signature too).
            let names = item.split(separator: ";", omittingEmptySubsequences: false).map { part in
                let name = part.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                return (SigV4.parseQueryString(name).first?.name ?? name).lowercased()
            }
            let secret = names.contains { name in secretParameterParts.contains { name.contains($0) } }
            return secret || looksLikeToken(item) ? name + "=<redacted>" : String(item)
        }
        return String((path + "?" + items.joined(separator: "&")).prefix(512))
    }

    /// Whether `text` holds a JWT (a playback token, whoever signed it): three base64url parts joined by dots, the
    /// first a JSON object's (`eyJ`).
    static func looksLikeToken(_ text: Substring) -> Bool {
        let tokenCharacter = { (c: Character) in c.isASCII && (c.isLetter || c.isNumber || "-_.".contains(c)) }
        return text.split(whereSeparator: { !tokenCharacter($0) }).contains { run in
            let parts = run.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 3 && parts[0].hasPrefix("eyJ") && parts.allSatisfy { !$0.isEmpty }
        }
    }
}
