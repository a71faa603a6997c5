import Foundation
import HTTPTypes
import Hummingbird

/// Cross-origin access for browser apps on the origins `ferry serve --cors-origin` names: the object API, the media
/// API, the publish API, form uploads and resumable uploads answer their preflights and expose the headers a browser
/// needs for multipart uploads (`ETag`, the checksums, request ids) and for tus and the IETF draft (`Upload-Offset`
/// and the rest). Credentials (cookies) are never allowed across origins, so the
/// console's session stays on its own origin; requests still need their signature or token.
///
/// Origins not listed fall back to each bucket's own CORS configuration (PutBucketCors) on the object API.
public struct CrossOriginPolicy: Sendable, Hashable {
    /// Allowed origins (`https://app.example.com`), or `*` for any.
    public var origins: [String]

    /// Creates a policy.
    public init(origins: [String]) {
        self.origins = origins
    }

    /// Checks an origin given on the command line: `*`, or `scheme://host[:port]` with nothing after it.
    public static func validate(_ origin: String) throws {
        if origin == "*" { return }
        guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
            url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
        else {
            throw InvalidOrigin(description: "The origin '\(origin.prefix(100))' must be * or scheme://host[:port].")
        }
    }

    /// An origin that cannot be allowed.
    public struct InvalidOrigin: Error, CustomStringConvertible {
        /// Why.
        public var description: String
    }

    /// Headers a browser may read from responses.
    static let exposed = [
        "ETag", "x-amz-request-id", "x-amz-version-id", "x-amz-checksum-crc32", "x-amz-checksum-crc32c",
        "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1", "x-amz-checksum-sha256", "x-amz-checksum-type",
        "x-amz-mp-parts-count", "Content-Range", "Content-Length", "Location",
        // Resumable uploads: tus (tus-js-client reads these) and the IETF draft.
        "Tus-Resumable", "Tus-Version", "Tus-Extension", "Tus-Max-Size", "Tus-Checksum-Algorithm", "Upload-Offset",
        "Upload-Length", "Upload-Defer-Length", "Upload-Metadata", "Upload-Expires", "Upload-Concat", "Upload-Complete",
        "Upload-Incomplete", "Upload-Draft-Interop-Version", "Upload-Limit", "Ferry-Received-CRC64NVME",
    ].joined(separator: ", ")

    func allows(_ origin: String) -> Bool {
        origins.contains("*") || origins.contains(origin)
    }

    /// The answer to a preflight from an allowed origin, nil when `request` is not one.
    func preflight(_ request: Request) -> Response? {
        guard request.method == .options, let origin = request.headers[.origin], allows(origin),
            let method = request.headers[.accessControlRequestMethod],
            ["GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"].contains(method)
        else { return nil }
        var headers: HTTPFields = [
            .accessControlAllowOrigin: origin, .accessControlAllowMethods: "GET, HEAD, PUT, POST, PATCH, DELETE",
            .accessControlMaxAge: "600", .vary: "Origin", .contentLength: "0",
        ]
        if let requested = request.headers[.accessControlRequestHeaders], requested.utf8.count <= 4096 {
            headers[.accessControlAllowHeaders] = requested
        }
        return Response(status: .noContent, headers: headers)
    }

    /// Adds the headers of an allowed origin to a response.
    func decorate(_ response: inout Response, for request: Request) {
        guard let origin = request.headers[.origin], allows(origin) else { return }
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlExposeHeaders] = Self.exposed
        response.headers[.vary] = "Origin"
    }
}
