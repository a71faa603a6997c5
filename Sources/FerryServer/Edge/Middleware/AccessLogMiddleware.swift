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
    /// A resumable upload's path is read as the router reads it (empty and `.` segments skipped, `;` ending a
    /// segment's name) and as a client may spell it (percent-encoded, in other case): whatever follows
    /// `/_ferry/uploads` is redacted, its query too, but for `s3/<bucket>/<key>`. Elsewhere a path segment holding a
    /// token (``looksLikeToken(_:)``, read percent-decoded) is redacted, wherever a client put it. A query item is
    /// redacted when a name in it names a credential (`;` separating too, as in `a=1;token=…`), when its decoded text
    /// does (`a=1%26token%3D…`), or when it holds a token under any name or none; an item whose name is not a plain
    /// name is written as `<redacted>` whole.
    static func redacted(path: String, query: String?) -> String {
        var path = path
        let segments = (path.removingPercentEncoding ?? path).lowercased().split(separator: "/")
            .filter { $0 != "." }.map { $0.split(separator: ";", omittingEmptySubsequences: false).first ?? "" }
        let resumable = segments.starts(with: ["_ferry", "uploads"]) && (segments.count == 2 || segments[2] != "s3")
        if resumable {
            path = ResumableUploadAPI.pathPrefix + (segments.count > 2 && segments[2] == "grant" ? "grant/" : "")
                + (segments.count > 2 || path.contains(";") ? "<redacted>" : "")
        } else {
            path = path.split(separator: "/", omittingEmptySubsequences: false)
                .map { looksLikeToken(String($0).removingPercentEncoding ?? String($0)) ? "<redacted>" : String($0) }
                .joined(separator: "/")
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
            let decoded = String(item).removingPercentEncoding ?? String(item)
            // A name inside the decoded text (`a=1%26token%3D…`): a credential's word followed by `=`.
            let named = secretParameterParts.contains { part in
                decoded.lowercased().range(of: part + "[^=&;]*=", options: .regularExpression) != nil
            }
            let secret = resumable || named || looksLikeToken(decoded)
                || names.contains { name in secretParameterParts.contains { name.contains($0) } }
            guard secret else { return String(item) }
            let plain = !name.isEmpty && name.utf8.count <= 64 && !looksLikeToken(name)
                && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.%".contains($0)) }
            return plain ? name + "=<redacted>" : "<redacted>"
        }
        return String((path + "?" + items.joined(separator: "&")).prefix(512))
    }

    /// Whether `text` holds a token: a JWT (a playback token, whoever signed it: three or more base64url parts joined
    /// by dots, one holding a JSON object's start, `eyJ` or a spelling with white space), a session token (`FT1.`
    /// and two parts) or an upload token (`AccessKey:sign:policy`), 32 bytes or more, wherever it starts.
    static func looksLikeToken(_ text: String) -> Bool {
        guard text.utf8.count >= 32 else { return false }
        let headers = ["eyJ", "eyA", "ewo", "ew0", "ewk"]
        func runs(_ extra: String) -> [Substring] {
            text.split(whereSeparator: { !($0.isASCII && ($0.isLetter || $0.isNumber || extra.contains($0))) })
                .filter { $0.utf8.count >= 32 }
        }
        let jwtOrSession = runs("-_.").contains { run in
            let parts = run.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count >= 3 && (parts.contains { part in headers.contains { part.contains($0) } } || run.contains("FT1."))
        }
        // An upload token: its signature (an HMAC-SHA1 in base64url, 28 characters) and its policy (a JSON object
        // in base64url, `eyJ…`) after the access key.
        return jwtOrSession || runs("-_=:").contains { run in
            let parts = run.split(separator: ":", omittingEmptySubsequences: false)
            return parts.count == 3 && (27...28).contains(parts[1].count) && parts[2].hasPrefix("eyJ")
        }
    }
}
