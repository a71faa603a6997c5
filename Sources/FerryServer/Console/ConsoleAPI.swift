import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The web console: its static files under `/console/`, sign-in at `/_ferry/console/session`, and the media API for
/// the signed-in session at `/_ferry/console/api/<Action>`.
///
/// - `POST /_ferry/console/session` with `{"AccessKeyId", "SecretAccessKey"}` opens a session (see
///   ``ConsoleSessions``) and answers `{"AccessKeyId", "Root", "CSRFToken", "Expiration"}`; after repeated failures
///   for one key from one address it answers 429 `TooManySignInAttempts` for a while (``SignInThrottle``).
/// - `GET` answers the same for the session in the cookie when the request carries the session's `X-Ferry-CSRF`
///   token (401 `SessionExpired` without either); `DELETE` ends it (its token is refused from then on, by every node).
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

    /// Headers on every console answer.
    func securityHeaders() -> [(HTTPField.Name, String)] {
        // Media and covers may come from the public endpoint when it is another origin.
        var sources = "'self'"
        if let endpoint = media.configuration.publicEndpoint, let url = URL(string: endpoint), let scheme = url.scheme,
            let authority = HTTPTarget.authority(of: url)
        {
            sources += " \(scheme)://\(authority)"
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

    /// Serves one of the console's static files (`GET`/`HEAD` `/console/…`).
    func file(_ request: Request) -> Response {
        guard request.method == .get || request.method == .head else {
            return Response(status: .methodNotAllowed, headers: [.allow: "GET, HEAD"])
        }
        let path = request.uri.path
        if path == Self.sitePrefix {
            return Response(status: .movedPermanently, headers: [.location: Self.sitePrefix + "/", .contentLength: "0"])
        }
        var name = String(path.dropFirst(Self.sitePrefix.count + 1))
        if name.isEmpty { name = "index.html" }
        let plain = { (status: HTTPResponse.Status, text: String) in
            Response(
                status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        guard let files = site.files else {
            return plain(.serviceUnavailable, "The console's files are not installed beside this ferry binary.\n")
        }
        guard let file = files[name] else { return plain(.notFound, "No such console page.\n") }
        var headers: HTTPFields = [.contentType: file.contentType, .cacheControl: "no-cache", .eTag: "\"\(file.etag)\""]
        if request.headers[.ifNoneMatch] == headers[.eTag] { return Response(status: .notModified, headers: headers) }
        headers[.contentLength] = String(file.bytes.count)
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

    /// What a session is, as `/_ferry/console/session` answers it.
    struct SessionAnswer: Encodable, Sendable {
        var accessKeyId: String
        var root: Bool
        var csrfToken: String
        var expiration: String

        init(_ session: ConsoleSessions.Session) {
            accessKeyId = session.principal.parentAccessKeyId
            root = session.principal.isRoot
            csrfToken = session.csrf
            expiration = session.expiration.formatted(.iso8601)
        }

        enum CodingKeys: String, CodingKey {
            case accessKeyId = "AccessKeyId", root = "Root", csrfToken = "CSRFToken", expiration = "Expiration"
        }
    }

    /// `/_ferry/console/session`: `POST` signs in, `GET` describes the session in the cookie, `DELETE` ends it.
    func session(_ request: Request, context: FerryRequestContext) async throws -> Response {
        let secure = isSecure(request)
        var request = request
        let data = Data(buffer: try await request.collectSmallBody())
        let answer: any Encodable & Sendable
        var setCookie: String?
        switch request.method {
        case .post:
            // A page of another site can make a browser POST a form here without asking (text/plain, urlencoded,
            // multipart), and a form's answer stores its cookie: the browser would be signed in to a key of the
            // attacker's choosing, and its uploads land there. Only a script of this origin (or one `--cors-origin`
            // allows, after a preflight) can send JSON.
            let mediaType = request.headers[.contentType]?.split(separator: ";").first?
                .trimmingCharacters(in: .whitespaces).lowercased()
            guard mediaType == "application/json" else {
                throw MediaError("UnsupportedMediaType", "Sign in with a JSON body (Content-Type: application/json).", status: 415)
            }
            if request.headers[.secFetchSite] == "cross-site" {
                throw MediaError("CrossSiteSignIn", "A page of another site cannot sign in to the console.", status: 403)
            }
            let input = try JSONBody.decode(SignInInput.self, from: data)
            guard let id = input.AccessKeyId, !id.isEmpty else { throw MediaError.missing("AccessKeyId") }
            // Each spelling of an id is throttled on its own: one with characters no id has (a NUL, which a catalog
            // lookup may stop at) is not another try at the key.
            guard id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MediaError("InvalidParameter", "AccessKeyId holds characters no access key id has.", status: 400)
            }
            guard let secret = input.SecretAccessKey, !secret.isEmpty else { throw MediaError.missing("SecretAccessKey") }
            let attempt = SignInThrottle.attempt(address: ClientAddress.limitGroup(of: context.clientAddress), accessKeyId: id)
            if let wait = sessions.throttle.begin(attempt) {
                throw MediaError(
                    "TooManySignInAttempts", "Too many failed sign-ins for this key from this address; try again in \(wait) s.",
                    status: 429, retryAfterSeconds: wait)
            }
            let session: ConsoleSessions.Session
            do {
                session = try await sessions.signIn(accessKeyId: id, secretAccessKey: secret)
                sessions.throttle.succeeded(attempt)
            } catch let refusal as ConsoleSessions.Refusal {
                context.logger.info(
                    "console sign-in refused",
                    metadata: ["ferry.access-key-id": .string(refusal.namesKey ? String(id.prefix(64)) : "(no such key)")])
                throw MediaError(refusal.code, refusal.message, status: refusal.status)
            }
            setCookie = ConsoleSessions.setCookie(session, secure: secure)
            answer = SessionAnswer(session)
        case .delete:
            let session = try await sessions.requireSession(request.headers)
            guard ConsoleSessions.hasCSRFToken(request.headers, session: session) else { throw ConsoleSessions.csrfMissing }
            try await sessions.signOut(session)
            setCookie = ConsoleSessions.clearCookie(secure: secure)
            answer = MediaContract.EmptyAnswer()
        case .get, .head:
            // The cookie alone does not say whose console this is: a page of another origin of this host (another
            // port) can set a cookie of this name over the one the user signed in with (cookies do not keep ports
            // apart), signing the console in to a key of its choosing. The token the sign-in answered is kept in the
            // page's own origin: a session is the page's only when the page sends it.
            let session = try await sessions.requireSession(request.headers)
            guard ConsoleSessions.hasCSRFToken(request.headers, session: session) else {
                throw MediaError("SessionExpired", "Sign in to the console first.", status: 401)
            }
            answer = SessionAnswer(session)
        default:
            throw MediaError("MethodNotAllowed", "Console session answers DELETE, GET, POST requests.", status: 405)
        }
        var response = try JSONAnswer.response(
            WithRequestId(answer: answer, requestId: context.requestId), requestId: context.requestId)
        if let setCookie { response.headers[.setCookie] = setCookie }
        return response
    }
}

extension AnswerMiddleware {
    /// The console's answers forbid framing, inline script and caching of anything that carries a session
    /// (``ConsoleAPI/securityHeaders()``), refusals included. `noStore`: whether answers may not be stored
    /// (`Cache-Control: no-store`): everything but the static files.
    static func consoleHeaders(_ console: ConsoleAPI, noStore: Bool = true) -> AnswerMiddleware {
        AnswerMiddleware { response, _ in
            for (name, value) in console.securityHeaders() { response.headers[name] = value }
            if noStore { response.headers[.cacheControl] = "no-store" }
        }
    }
}

extension FerryServer {
    /// Whether the web console's files are installed: in the resource directory beside this binary
    /// (`Ferry_FerryServer.resources`) or in `FERRY_CONSOLE_DIR`. Without them its pages answer 503.
    public static var consoleInstalled: Bool { ConsoleSite.shared.files?["index.html"] != nil }
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
    /// Where the browser says the request comes from (`same-origin`, `same-site`, `cross-site`, `none`).
    static let secFetchSite = Self("Sec-Fetch-Site")!

    static let referrerPolicy = Self("Referrer-Policy")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}
