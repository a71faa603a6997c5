import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The web console: its static files under `/console/`, sign-in at `/_ferry/console/session`, and the media API for
/// the signed-in session at `/_ferry/console/api/<Action>`.
///
/// - `POST /_ferry/console/session` with `{"AccessKeyId", "SecretAccessKey"}` opens a session (see
///   ``ConsoleSessions``) and answers `{"AccessKeyId", "Root", "CSRFToken", "Expiration"}`; `GET` answers the same for
///   the session in the cookie (401 `SessionExpired` without one); `DELETE` ends it.
/// - `POST /_ferry/console/api/<Action>` takes the media API's JSON for `<Action>` and answers as the media API does,
///   authorized by the session and its policy; every such request carries `X-Ferry-CSRF`.
///
/// Every answer forbids framing and inline script (`Content-Security-Policy`), so text from the catalog can never
/// run as code even if a page wrote it as markup, which the console's pages never do.
struct ConsoleAPI: Sendable {
    static let sitePrefix = "/console"
    static let sessionPath = "/_ferry/console/session"
    static let apiPrefix = "/_ferry/console/api/"

    let media: MediaAPI
    let sessions: ConsoleSessions
    let site: ConsoleSite

    /// Whether `path` is the console's.
    static func handles(_ path: String) -> Bool {
        path == sitePrefix || path.hasPrefix(sitePrefix + "/") || path == sessionPath || path.hasPrefix(apiPrefix)
    }

    func respond(to request: Request, logger: Logger) async -> Response {
        var response: Response
        let path = request.uri.path
        if path == Self.sessionPath {
            response = await session(request, logger: logger)
        } else if path.hasPrefix(Self.apiPrefix) {
            response = await api(request, logger: logger)
        } else {
            response = file(request)
        }
        for (name, value) in securityHeaders() { response.headers[name] = value }
        return response
    }

    /// Headers on every console answer.
    func securityHeaders() -> [(HTTPField.Name, String)] {
        // Media and covers may come from the public endpoint when it is another origin.
        var sources = "'self'"
        if let endpoint = media.configuration.publicEndpoint, let url = URL(string: endpoint), let scheme = url.scheme,
            let host = url.host
        {
            sources += " \(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
        }
        let policy = [
            "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src \(sources) data: blob:",
            "media-src \(sources) blob:", "connect-src \(sources)", "base-uri 'none'", "form-action 'self'",
            "frame-ancestors 'none'",
        ].joined(separator: "; ")
        return [
            (.contentSecurityPolicy, policy), (.xContentTypeOptions, "nosniff"), (.referrerPolicy, "no-referrer"),
            (.xFrameOptions, "DENY"),
        ]
    }

    // MARK: Static files

    private func file(_ request: Request) -> Response {
        guard request.method == .get || request.method == .head else {
            return Response(status: .methodNotAllowed, headers: [.allow: "GET, HEAD"])
        }
        let path = request.uri.path
        if path == Self.sitePrefix {
            return Response(status: .movedPermanently, headers: [.location: Self.sitePrefix + "/", .contentLength: "0"])
        }
        var name = String(path.dropFirst(Self.sitePrefix.count + 1))
        if name.isEmpty { name = "index.html" }
        guard let files = site.files else {
            return Response(
                status: .serviceUnavailable, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "The console's files are not installed beside this ferry binary.\n")))
        }
        guard let file = files[name] else {
            return Response(
                status: .notFound, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: "No such console page.\n")))
        }
        var headers: HTTPFields = [
            .contentType: file.contentType, .cacheControl: "no-cache", .eTag: "\"\(file.etag)\"",
            .contentLength: String(file.bytes.count),
        ]
        if request.headers[.ifNoneMatch] == "\"\(file.etag)\"" {
            headers[.contentLength] = nil
            return Response(status: .notModified, headers: headers)
        }
        if request.method == .head { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: file.bytes)))
    }

    // MARK: Session

    /// Whether the browser reached the server over https (directly or through a proxy that says so).
    func isSecure(_ request: Request) -> Bool {
        if request.uri.scheme == .https || request.headers[.xForwardedProto]?.lowercased() == "https" { return true }
        return media.configuration.publicEndpoint?.lowercased().hasPrefix("https:") == true
    }

    private struct SignInInput: Decodable {
        var AccessKeyId: String?
        var SecretAccessKey: String?
    }

    private func session(_ request: Request, logger: Logger) async -> Response {
        let secure = isSecure(request)
        var setCookie: String?
        var response = await MediaAPI.respondJSON(
            to: request, prefix: Self.sessionPath, title: "Console session", name: "console", methods: [.get, .post, .delete],
            logger: logger
        ) { _, data, request, _ in
            switch request.method {
            case .post:
                let input = try media.decode(SignInInput.self, data)
                guard let id = input.AccessKeyId, !id.isEmpty else { throw MediaError.missing("AccessKeyId") }
                guard let secret = input.SecretAccessKey, !secret.isEmpty else { throw MediaError.missing("SecretAccessKey") }
                let session: ConsoleSessions.Session
                do {
                    session = try await sessions.signIn(accessKeyId: id, secretAccessKey: secret)
                } catch let refusal as ConsoleSessions.Refusal {
                    logger.info("console sign-in refused", metadata: ["ferry.access-key-id": .string(String(id.prefix(64)))])
                    throw MediaError(refusal.code, refusal.message, status: 401)
                }
                setCookie = ConsoleSessions.setCookie(session, secure: secure)
                return Self.describe(session)
            case .delete:
                let session = try await requireSession(request)
                guard ConsoleSessions.hasCSRFToken(request.headers, session: session) else { throw Self.csrfMissing }
                setCookie = ConsoleSessions.clearCookie(secure: secure)
                return [:]
            default:
                return Self.describe(try await requireSession(request))
            }
        }
        if let setCookie, response.status.code < 300 { response.headers[.setCookie] = setCookie }
        response.headers[.cacheControl] = "no-store"
        return response
    }

    static func describe(_ session: ConsoleSessions.Session) -> [String: Any] {
        [
            "AccessKeyId": session.principal.parentAccessKeyId, "Root": session.principal.isRoot,
            "CSRFToken": session.csrf, "Expiration": session.expiration.formatted(.iso8601),
        ]
    }

    static let csrfMissing = MediaError(
        "InvalidCSRFToken", "The request does not carry the session's X-Ferry-CSRF token; reload the console.", status: 403)

    /// The session of the request's cookie; throws 401 `SessionExpired` without a valid one.
    func requireSession(_ request: Request) async throws -> ConsoleSessions.Session {
        do {
            guard let session = try await sessions.session(of: request.headers) else {
                throw MediaError("SessionExpired", "Sign in to the console first.", status: 401)
            }
            return session
        } catch let refusal as ConsoleSessions.Refusal {
            throw MediaError(refusal.code, refusal.message, status: 401)
        }
    }

    // MARK: Media API for the session

    private func api(_ request: Request, logger: Logger) async -> Response {
        var response = await MediaAPI.respondJSON(
            to: request, prefix: Self.apiPrefix, title: "Console API", name: "console", logger: logger
        ) { action, data, request, logger in
            let session = try await requireSession(request)
            guard ConsoleSessions.hasCSRFToken(request.headers, session: session) else { throw Self.csrfMissing }
            guard session.principal.allows(action: "media:" + action) else { throw MediaError.forbidden }
            logger.debug("console request", metadata: ["ferry.action": .string(action)])
            return try await media.perform(action, data, principal: session.principal, host: request.head.authority ?? "localhost")
        }
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

/// The console's static files, read once from the server target's resources.
final class ConsoleSite: Sendable {
    struct File: Sendable {
        var bytes: [UInt8]
        var contentType: String
        var etag: String
    }

    /// The files by name (`index.html`, `app.js`), nil when they are not installed.
    let files: [String: File]?

    /// The files of the first directory that has them: `FERRY_CONSOLE_DIR`, then the resource bundle beside the
    /// executable or the test bundle.
    static let shared = ConsoleSite(directory: locate())

    init(directory: String?) {
        guard let directory, let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            files = nil
            return
        }
        var files: [String: File] = [:]
        for name in names where !name.hasPrefix(".") {
            guard let data = FileManager.default.contents(atPath: directory + "/" + name) else { continue }
            let types = [
                "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
                "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon", "json": "application/json",
            ]
            let ext = (name as NSString).pathExtension.lowercased()
            files[name] = File(
                bytes: [UInt8](data), contentType: types[ext] ?? "application/octet-stream",
                etag: String(SigV4.hexSHA256(data).prefix(16)))
        }
        self.files = files
    }

    static func locate() -> String? {
        if let directory = ProcessInfo.processInfo.environment["FERRY_CONSOLE_DIR"] { return directory }
        var places = [Bundle.main.bundleURL]
        if let executable = Bundle.main.executableURL { places.append(executable.deletingLastPathComponent()) }
        places.append(URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent())
        for place in places {
            for bundle in ["Ferry_FerryServer.resources", "Ferry_FerryServer.bundle/Contents/Resources", "Ferry_FerryServer.bundle"] {
                let directory = place.appendingPathComponent(bundle).appendingPathComponent("Site").path
                if FileManager.default.fileExists(atPath: directory + "/index.html") { return directory }
            }
        }
        return nil
    }
}

extension HTTPField.Name {
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}
