import FerryCore
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers

/// Sign-in for the web console and for browser apps on the same origin: an access key id and secret are exchanged
/// once for a short-lived session, kept in an `HttpOnly`, `SameSite=Strict` cookie. The secret itself is never stored
/// in the browser, nor anywhere else by the session.
///
/// A session is a temporary credential issued under the key (the same self-contained token as STS credentials, so any
/// node verifies it and it ends when the key is disabled), carrying the key's policy. Requests that change state also
/// carry the session's CSRF token in `X-Ferry-CSRF`, a value a page of another site can neither read nor send. Signing
/// out records the digest of the session's temporary key id in the catalog, so the session is refused from then on, on
/// every node, even where a copy of the cookie survives. The cookie carries a seal (an authentication code only the
/// service can make) over the credential, so only a session made here by a sign-in opens the console: an STS or upload
/// credential put in the cookie by hand is refused, whatever its parent.
struct ConsoleSessions: Sendable {
    /// The cookie holding the session.
    static let cookieName = "ferry_console"
    /// The header carrying the CSRF token.
    static let csrfHeader = HTTPField.Name.ferryCSRF
    /// How long a session lasts.
    static let lifetime: TimeInterval = 3600

    let credentials: CredentialStore
    /// The sign-in turns this node counts.
    var throttle = SignInThrottle()

    /// A verified session.
    struct Session: Sendable {
        /// Who the session acts as: the key's policy, and the root key's powers when it was the root key.
        var principal: Principal
        /// The token in the cookie.
        var token: String
        /// The value `X-Ferry-CSRF` must carry.
        var csrf: String
        /// When it ends.
        var expiration: Date
    }

    /// Why a sign-in or a session was refused, as a message for people (never naming a secret).
    struct Refusal: Error {
        var code: String
        var message: String
        /// Whether the sign-in named an access key that exists: only then may its id be logged (what was typed as an
        /// id may be a secret pasted into the wrong field).
        var namesKey = false
        /// The answer's status.
        var status = 401
    }

    /// The longest session cookie value made: with its name and attributes within the 4,096 bytes a browser keeps of
    /// a cookie (RFC 6265, 6.1), which drops a longer one without a word.
    static let maxCookieValue = 3800

    /// Checks an access key id and secret and opens a session for the key; throws ``Refusal`` for a wrong, unknown or
    /// disabled key.
    func signIn(accessKeyId: String, secretAccessKey: String, now: Date? = nil) async throws -> Session {
        let now = now ?? credentials.now()
        let wrong = Refusal(code: "InvalidCredentials", message: "The access key id or secret is wrong.")
        guard !accessKeyId.isEmpty, accessKeyId.utf8.count <= 128, secretAccessKey.utf8.count <= 256 else { throw wrong }
        let policies: [AccessPolicy]
        if accessKeyId == credentials.root.accessKeyId {
            guard SigV4.constantTimeEquals(secretAccessKey, credentials.root.secretAccessKey) else {
                throw Refusal(code: wrong.code, message: wrong.message, namesKey: true)
            }
            policies = [.fullAccess]
        } else {
            guard let key = try await credentials.catalog.accessKey(accessKeyId) else { throw wrong }
            guard SigV4.constantTimeEquals(secretAccessKey, key.secretAccessKey) else {
                throw Refusal(code: wrong.code, message: wrong.message, namesKey: true)
            }
            guard key.status == .active else {
                throw Refusal(code: "AccessKeyDisabled", message: "The access key \(accessKeyId) is disabled.", namesKey: true)
            }
            policies = [key.policy]
        }
        let expiration = now.addingTimeInterval(Self.lifetime)
        let issued = credentials.tokens.issue(parent: accessKeyId, policies: policies, expiration: expiration)
        let credential = issued.accessKeyId + "~" + (issued.sessionToken ?? "")
        let cookie = credential + "~" + seal(credential)
        // The session carries the key's policy: one too large for a cookie would sign in and then be forgotten.
        guard cookie.utf8.count <= Self.maxCookieValue else {
            throw Refusal(
                code: "PolicyTooLarge",
                message: "The access key's policy is too large for a console session: its cookie would be "
                    + "\(cookie.utf8.count) bytes, over the \(Self.maxCookieValue) a session cookie may take for a browser "
                    + "to keep it. Sign in with a key of fewer or shorter statements, or use the media API.",
                namesKey: true, status: 403)
        }
        return try await session(cookie: cookie, now: now)
    }

    /// The authentication code that marks `credential` (`id~token`) as a console session.
    private func seal(_ credential: String) -> String {
        SessionTokenCodec.base64url(credentials.tokens.authenticationCode(for: Data(credential.utf8), purpose: "console-session"))
    }

    /// The session a cookie value (`id~token~seal`) stands for; throws ``Refusal`` when it is missing, forged, not
    /// made by a sign-in, expired, or its key was disabled since.
    func session(cookie value: String, now: Date? = nil) async throws -> Session {
        let now = now ?? credentials.now()
        let expired = Refusal(code: "SessionExpired", message: "The console session has ended; sign in again.")
        guard value.utf8.count <= 8192, let last = value.lastIndex(of: "~") else { throw expired }
        let credential = String(value[..<last])
        guard SigV4.constantTimeEquals(String(value[value.index(after: last)...]), seal(credential)),
            let separator = credential.firstIndex(of: "~")
        else { throw expired }
        let accessKeyId = String(credential[..<separator])
        let token = String(credential[credential.index(after: separator)...])
        let resolved: CredentialStore.Resolved
        do {
            resolved = try await credentials.resolve(accessKeyId: accessKeyId, sessionToken: token, now: now)
        } catch {
            guard let refusal = error as? FerryDomainError,
                [.invalidSessionToken, .expiredSessionToken, .unknownAccessKey].contains(refusal.code)
            else { throw error }
            throw expired
        }
        // Revocation names the session's temporary key id: the token binds it, and unlike the token's text it has
        // one spelling (a token's base64 decodes the same with or without padding, in either alphabet).
        guard !(try await credentials.catalog.isSessionRevoked(Self.digest(accessKeyId))) else { throw expired }
        var principal = resolved.principal
        principal.isRoot = principal.parentAccessKeyId == credentials.root.accessKeyId
        let csrf = SessionTokenCodec.base64url(
            credentials.tokens.authenticationCode(for: Data(value.utf8), purpose: "console-csrf"))
        return Session(principal: principal, token: value, csrf: csrf, expiration: principal.expiration ?? now)
    }

    /// Ends `session`: its token is refused from now on, however it is spelt.
    func signOut(_ session: Session) async throws {
        try await credentials.catalog.revokeSession(
            Self.digest(session.principal.accessKeyId), expiration: session.expiration, now: credentials.now())
    }

    /// What the catalog keeps of an ended session: the SHA-256 of its temporary key id.
    static func digest(_ temporaryKeyId: String) -> String {
        SigV4.hexSHA256(temporaryKeyId)
    }

    /// The session of a request's cookie, nil when it has none. A request with two session cookies is refused: a page
    /// of the same site (another port of the host, a sibling subdomain) can add one on a longer path, which the
    /// browser sends first, to sign the console in to a key of its choosing; which one the user signed in with cannot
    /// be told.
    func session(of headers: HTTPFields) async throws -> Session? {
        let values = Self.cookies(Self.cookieName, in: headers)
        guard values.count <= 1 else {
            throw Refusal(
                code: "AmbiguousSession",
                message: "The request carries more than one console session cookie (another page of this site set one): "
                    + "clear this site's cookies, then sign in again.")
        }
        guard let value = values.first else { return nil }
        return try await session(cookie: value)
    }

    /// The session of a request's cookie; throws 401 `SessionExpired` without a valid one.
    func requireSession(_ headers: HTTPFields) async throws -> Session {
        do {
            guard let session = try await session(of: headers) else {
                throw MediaError("SessionExpired", "Sign in to the console first.", status: 401)
            }
            return session
        } catch let refusal as Refusal {
            throw MediaError(refusal.code, refusal.message, status: 401)
        }
    }

    /// The refusal of a state-changing request without the session's CSRF token.
    static let csrfMissing = MediaError(
        "InvalidCSRFToken", "The request does not carry the session's X-Ferry-CSRF token; reload the console.", status: 403)

    /// Whether a state-changing request carries the session's CSRF token.
    static func hasCSRFToken(_ headers: HTTPFields, session: Session) -> Bool {
        guard let sent = headers[csrfHeader] else { return false }
        return SigV4.constantTimeEquals(sent, session.csrf)
    }

    /// The `Set-Cookie` value that stores `session` (`Secure` when the browser reached the server over https).
    static func setCookie(_ session: Session, secure: Bool) -> String {
        var value = "\(cookieName)=\(session.token); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(Int(lifetime))"
        if secure { value += "; Secure" }
        return value
    }

    /// The `Set-Cookie` value that ends a session.
    static func clearCookie(secure: Bool) -> String {
        "\(cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" + (secure ? "; Secure" : "")
    }

    /// The values of a cookie among a request's `Cookie` headers, in order.
    static func cookies(_ name: String, in headers: HTTPFields) -> [String] {
        headers[values: .cookie].flatMap { header in
            header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix(name + "=") }
                .map { String($0.dropFirst(name.count + 1)) }
        }
    }
}

/// Console sign-ins on this node, per client address and access key id. Each sign-in takes a turn before its secret
/// is checked; after ``limit`` turns within ``window`` seconds, sign-ins from that address for that key are refused
/// without being checked until the window ends; a right secret gives the turns back. Another address, or another key, is not held back, so a stranger who knows a
/// key's id cannot lock its owner out from another address. (Behind a load balancer every client has the balancer's
/// address: there the count is per key.) Each node counts on its own; at most ``capacity`` pairs are tracked, those
/// whose window has ended given up first.
final class SignInThrottle: Sendable {
    /// Turns (sign-ins whose secret is checked) within a window.
    static let limit = 10
    /// The window's length, in seconds.
    static let window = 60.0
    /// Most address and key pairs tracked.
    static let capacity = 10_000

    private struct Failures {
        var count: Int
        /// When the first failure of the window happened.
        var since: Double
    }

    private let failures = NIOLockedValueBox<[String: Failures]>([:])
    /// Seconds on a monotonic clock.
    private let now: @Sendable () -> Double

    /// Creates a throttle reading time from `now` (seconds on a monotonic clock; the system's uptime by default).
    init(now: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.now = now
    }

    /// The pair a sign-in is counted under.
    static func attempt(address: String?, accessKeyId: String) -> String {
        (address ?? "") + " " + accessKeyId.prefix(128)
    }

    /// Takes a turn for `attempt` before its secret is checked, counted as a failure until ``succeeded(_:)`` says
    /// otherwise (so sign-ins sent at once get no more turns than sign-ins sent one after another): nil when it may
    /// sign in now, else the whole seconds (at least one) until it may.
    func begin(_ attempt: String) -> Int? {
        let time = now()
        return failures.withLockedValue { failures -> Int? in
            if var recorded = failures[attempt], time - recorded.since < Self.window {
                guard recorded.count < Self.limit else {
                    return max(1, Int((Self.window - (time - recorded.since)).rounded(.up)))
                }
                recorded.count += 1
                failures[attempt] = recorded
                return nil
            }
            if failures.count >= Self.capacity {
                failures = failures.filter { time - $0.value.since < Self.window }
                if failures.count >= Self.capacity, let any = failures.keys.first { failures[any] = nil }
            }
            failures[attempt] = Failures(count: 1, since: time)
            return nil
        }
    }

    /// How many address and key pairs are counted now.
    var trackedPairs: Int { failures.withLockedValue { $0.count } }

    /// Clears the count of `attempt` after a sign-in with the right secret.
    func succeeded(_ attempt: String) {
        failures.withLockedValue { $0[attempt] = nil }
    }
}
