import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

/// A browser's side of the console, scripted: a cookie jar and the session's CSRF token.
struct ConsoleBrowser {
    let server: TestServer
    var cookie: String?
    var csrf: String?

    init(_ server: TestServer) { self.server = server }

    func send(
        _ method: String, _ path: String, json: Any? = nil, raw: [UInt8] = [],
        headers extra: [(name: String, value: String)] = [], csrf sendCSRF: Bool = true
    ) async throws -> S3TestClient.Reply {
        var headers = extra
        if let cookie { headers.append(("Cookie", "\(ConsoleSessions.cookieName)=\(cookie)")) }
        if sendCSRF, let csrf { headers.append(("X-Ferry-CSRF", csrf)) }
        var body = raw
        if let json {
            body = [UInt8](try JSONSerialization.data(withJSONObject: json))
            headers.append(("Content-Type", "application/json"))
        }
        var path = path
        var query: [(name: String, value: String)] = []
        if let mark = path.firstIndex(of: "?") {
            query = path[path.index(after: mark)...].split(separator: "&").map {
                let pair = $0.split(separator: "=", maxSplits: 1)
                return (String(pair[0]), String(pair.count > 1 ? pair[1] : "").removingPercentEncoding ?? "")
            }
            path = String(path[..<mark])
        }
        return try await server.client().sendRaw(method, path, query: query, headers: headers, body: body)
    }

    /// Signs in; returns the answer.
    mutating func signIn(_ id: String, _ secret: String, headers: [(name: String, value: String)] = []) async throws
        -> S3TestClient.Reply
    {
        let reply = try await send("POST", ConsoleAPI.sessionPath, json: ["AccessKeyId": id, "SecretAccessKey": secret], headers: headers)
        if reply.status == 200, let set = reply.header("Set-Cookie"),
            let value = set.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last
        {
            cookie = String(value)
            csrf = Self.json(reply)["CSRFToken"] as? String
        }
        return reply
    }

    /// Calls a media API action for the session.
    func api(_ action: String, _ input: [String: Any] = [:]) async throws -> S3TestClient.Reply {
        try await send("POST", ConsoleAPI.apiPrefix + action, json: input)
    }

    static func json(_ reply: S3TestClient.Reply) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]) ?? [:]
    }

    static func code(_ reply: S3TestClient.Reply) -> String? {
        let object = json(reply)
        return object["code"] as? String ?? (object["error"] as? [String: Any])?["code"] as? String
    }
}

@Suite("Web console: pages, sessions, the media API for a session, part signing for browsers, CORS", .timeLimit(.minutes(10)))
struct ConsoleTests {
    @Test("the console's pages are served with a policy that forbids inline script; every module they import is there")
    func pages() async throws {
        try await TestServer.with { server in
            let browser = ConsoleBrowser(server)
            let bare = try await S3TestClient.fetchRaw("GET", server.endpoint + "/console")
            #expect(bare.status == 301 && bare.header("Location") == "/console/")
            let index = try await browser.send("GET", "/console/")
            #expect(index.status == 200 && index.header("Content-Type")?.hasPrefix("text/html") == true)
            let policy = try #require(index.header("Content-Security-Policy"))
            #expect(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline") && policy.contains("frame-ancestors 'none'"))
            #expect(index.header("X-Content-Type-Options") == "nosniff")
            #expect(!index.text.contains("<script>"), "the page has an inline script")
            // Follow every module import from app.js: each must be served as JavaScript.
            var pending = ["app.js"]
            var seen: Set<String> = []
            while let name = pending.popLast() {
                guard seen.insert(name).inserted else { continue }
                let file = try await browser.send("GET", "/console/" + name)
                #expect(file.status == 200 && file.header("Content-Type")?.hasPrefix("text/javascript") == true, "\(name)")
                #expect(!file.text.contains("innerHTML"), "\(name) writes markup")
                let pattern = /from '\.\/([a-z-]+\.js)'/
                for match in file.text.matches(of: pattern) { pending.append(String(match.output.1)) }
            }
            #expect(seen.count >= 8)
            #expect(try await browser.send("GET", "/console/console.css").header("Content-Type")?.hasPrefix("text/css") == true)
            #expect(try await browser.send("GET", "/console/nope.js").status == 404)
            #expect(try await browser.send("GET", "/console/../root-credentials.json").status != 200)
            #expect(try await browser.send("GET", "/console/%2e%2e/root-credentials.json").status == 404)
            #expect(try await browser.send("POST", "/console/app.js").status == 405)
            // The path is the console's: no bucket can be made there.
            #expect(try await server.client().createBucket("console").status == 405)
            #expect(throws: S3Error.self) { try ObjectAPI.validateBucketName("console") }
            #expect(!(try await server.client().send("GET", "/").text.contains("<Name>console</Name>")))
        }
    }

    @Test("sign-in: a wrong secret is refused, the right one opens an HttpOnly SameSite=Strict session; state changes need the CSRF token; sign-out clears the cookie")
    func session() async throws {
        let log = LogRecorder()
        try await TestServer.with(configure: { $0.logger = log.logger(level: .info) }) { server in
            var browser = ConsoleBrowser(server)
            let wrong = try await browser.signIn(server.root.accessKeyId, "not-the-secret")
            #expect(wrong.status == 401 && ConsoleBrowser.code(wrong) == "InvalidCredentials" && wrong.header("Set-Cookie") == nil)
            // Refused sign-ins are logged at the service's level (info here), for whoever audits them.
            #expect(log.records.contains { $0.message == "console sign-in refused" && $0.level == .info })
            let unknown = try await browser.signIn("FKIANOSUCHKEY0000", "whatever")
            #expect(unknown.status == 401 && ConsoleBrowser.code(unknown) == "InvalidCredentials")
            #expect(try await browser.send("GET", ConsoleAPI.sessionPath).status == 401)
            #expect(try await browser.api("ListVideos").status == 401)

            let reply = try await browser.signIn(server.root.accessKeyId, server.root.secretAccessKey)
            #expect(reply.status == 200)
            let cookie = try #require(reply.header("Set-Cookie"))
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/"))
            #expect(!cookie.contains("Secure"), "plain http gets no Secure cookie")
            #expect(!reply.text.contains(server.root.secretAccessKey) && !cookie.contains(server.root.secretAccessKey))
            #expect(ConsoleBrowser.json(reply)["Root"] as? Bool == true)
            let current = try await browser.send("GET", ConsoleAPI.sessionPath)
            #expect(current.status == 200 && ConsoleBrowser.json(current)["CSRFToken"] as? String == browser.csrf)

            #expect(try await browser.api("ListVideos").status == 200)
            let noToken = try await browser.send("POST", ConsoleAPI.apiPrefix + "ListVideos", json: [:], csrf: false)
            #expect(noToken.status == 403 && ConsoleBrowser.code(noToken) == "InvalidCSRFToken")
            let wrongToken = try await browser.send(
                "POST", ConsoleAPI.apiPrefix + "ListVideos", json: [:], headers: [("X-Ferry-CSRF", "x")], csrf: false)
            #expect(wrongToken.status == 403)
            var forged = browser
            forged.cookie = browser.cookie.map { String($0.dropLast(3)) + "AAA" }
            #expect(try await forged.api("ListVideos").status == 401)

            // Only a sign-in makes a session: a temporary credential of the root key (an STS credential, say) put in the
            // cookie by hand is refused, with or without a seal of its own.
            let issued = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: AccessPolicy(statements: [.init(actions: ["media:GetVideoInfo"])]),
                expiration: Date().addingTimeInterval(600))
            var handmade = ConsoleBrowser(server)
            handmade.csrf = browser.csrf
            for cookie in [
                issued.accessKeyId + "~" + (issued.sessionToken ?? ""),
                issued.accessKeyId + "~" + (issued.sessionToken ?? "") + "~" + String(browser.cookie?.split(separator: "~").last ?? ""),
            ] {
                handmade.cookie = cookie
                #expect(try await handmade.send("GET", ConsoleAPI.sessionPath).status == 401)
                #expect(try await handmade.api("ListAccessKeys").status == 401)
            }
            // A page of another site cannot sign a browser in: a form posts text/plain (no preflight), and a browser
            // names a cross-site request.
            let credentials = ["AccessKeyId": server.root.accessKeyId, "SecretAccessKey": server.root.secretAccessKey]
            var stranger = ConsoleBrowser(server)
            let form = try await stranger.send(
                "POST", ConsoleAPI.sessionPath, raw: [UInt8](try JSONSerialization.data(withJSONObject: credentials)),
                headers: [("Content-Type", "text/plain")])
            #expect(form.status == 415 && form.header("Set-Cookie") == nil, "\(form.status) \(form.text)")
            let crossSite = try await stranger.signIn(
                server.root.accessKeyId, server.root.secretAccessKey, headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(crossSite.status == 403 && crossSite.header("Set-Cookie") == nil && stranger.cookie == nil)

            // Behind an https proxy the cookie is Secure.
            var proxied = ConsoleBrowser(server)
            let secure = try await proxied.signIn(
                server.root.accessKeyId, server.root.secretAccessKey, headers: [("X-Forwarded-Proto", "https")])
            #expect(secure.header("Set-Cookie")?.contains("Secure") == true)

            let out = try await browser.send("DELETE", ConsoleAPI.sessionPath)
            #expect(out.status == 200 && out.header("Set-Cookie")?.contains("Max-Age=0") == true)
            // A copy of the cookie kept past sign-out (another tab, a stolen cookie) is refused from then on, however its
            // token is spelt (base64 with padding added decodes to the same token).
            let signedOut = try #require(browser.cookie)
            for spelling in [signedOut, signedOut + "=", signedOut + "=="] {
                var copy = browser
                copy.cookie = spelling
                #expect(try await copy.send("GET", ConsoleAPI.sessionPath).status == 401, "\(spelling.suffix(4))")
            }
            let kept = try await browser.send("GET", ConsoleAPI.sessionPath)
            #expect(kept.status == 401 && ConsoleBrowser.code(kept) == "SessionExpired")
            #expect(try await browser.api("ListVideos").status == 401)
            #expect(try await proxied.api("ListVideos").status == 200, "other sessions of the key go on")
        }
    }

    @Test("sign-in: ten failures for one key from one address hold that pair back with 429 and Retry-After, the right secret too; other keys are not held back")
    func signInThrottle() async throws {
        try await TestServer.with { server in
            var admin = ConsoleBrowser(server)
            #expect(try await admin.signIn(server.root.accessKeyId, server.root.secretAccessKey).status == 200)
            let created = try await admin.api("CreateAccessKey", ["Policy": ["statements": [["actions": ["media:*"]]]]])
            let key = try #require(ConsoleBrowser.json(created)["AccessKey"] as? [String: Any])

            var browser = ConsoleBrowser(server)
            for _ in 0..<SignInThrottle.limit {
                #expect(try await browser.signIn(server.root.accessKeyId, "not-the-secret").status == 401)
            }
            let held = try await browser.signIn(server.root.accessKeyId, server.root.secretAccessKey)
            #expect(held.status == 429 && ConsoleBrowser.code(held) == "TooManySignInAttempts")
            let wait = try #require(held.header("Retry-After").flatMap { Int($0) })
            #expect(wait >= 1 && wait <= Int(SignInThrottle.window))
            #expect(browser.cookie == nil && held.header("Set-Cookie") == nil)

            #expect(try await admin.api("ListVideos").status == 200, "sessions opened before go on")
            let other = try await browser.signIn(
                try #require(key["AccessKeyId"] as? String), try #require(key["AccessKeySecret"] as? String))
            #expect(other.status == 200, "another key from the same address is not held back")

            // An id with a NUL (which SQLite's comparison may stop at) is not another spelling of the key with turns
            // of its own: refused before its secret is checked, and never a session.
            let keyId = try #require(key["AccessKeyId"] as? String)
            for _ in 0..<SignInThrottle.limit {
                #expect(try await browser.signIn(keyId, "not-the-secret").status == 401)
            }
            var spelled = ConsoleBrowser(server)
            let nul = try await spelled.signIn(keyId + "\u{0}zz", try #require(key["AccessKeySecret"] as? String))
            #expect(nul.status == 400 && ConsoleBrowser.code(nul) == "InvalidParameter", "\(nul.text)")
            #expect(spelled.cookie == nil)
            #expect(try await server.server.catalog.accessKey(keyId + "\u{0}zz") == nil)
        }
    }

    @Test("a request carrying two console session cookies (one added by another page of the same site on a longer path) is refused, not signed in as the first; a cookie put in place of the user's is not the page's session")
    func twoSessionCookies() async throws {
        try await TestServer.with { server in
            var victim = ConsoleBrowser(server)
            #expect(try await victim.signIn(server.root.accessKeyId, server.root.secretAccessKey).status == 200)
            var attacker = ConsoleBrowser(server)
            #expect(try await attacker.signIn(server.root.accessKeyId, server.root.secretAccessKey).status == 200)
            let planted = try #require(attacker.cookie)
            let own = try #require(victim.cookie)
            // The browser sends the longer path's cookie first.
            var both = victim
            both.cookie = nil
            let reply = try await both.send(
                "POST", ConsoleAPI.apiPrefix + "ListVideos", json: [String: Any](),
                headers: [("Cookie", "\(ConsoleSessions.cookieName)=\(planted); \(ConsoleSessions.cookieName)=\(own)")])
            #expect(reply.status == 401 && ConsoleBrowser.code(reply) == "AmbiguousSession", "\(reply.text)")
            #expect(try await victim.api("ListVideos").status == 200)

            // Cookies do not keep ports apart: a page on another port of the host can set one of the same name and
            // path, replacing the user's. The console page holds its own session's token (in its origin's storage):
            // the planted session is not described to it, nor does it act.
            var replaced = victim
            replaced.cookie = planted
            let described = try await replaced.send("GET", ConsoleAPI.sessionPath)
            #expect(described.status == 401 && ConsoleBrowser.code(described) == "SessionExpired", "\(described.text)")
            #expect(try await replaced.send("GET", ConsoleAPI.sessionPath, csrf: false).status == 401)
            #expect(try await replaced.api("ListVideos").status == 403)
            #expect(try await attacker.send("GET", ConsoleAPI.sessionPath).status == 200)
        }
    }

    static func forwarded(_ value: String) -> [(name: String, value: String)] { [(name: "X-Forwarded-For", value: value)] }

    @Test("behind a trusted proxy the sign-in throttle counts the client X-Forwarded-For names; without --trusted-proxy the header is not believed")
    func signInThrottleBehindProxy() async throws {
        let wrong = "not-the-secret"
        try await TestServer.with(configure: { $0.trustedProxies = ["127.0.0.0/8"] }) { server in
            var browser = ConsoleBrowser(server)
            let id = server.root.accessKeyId
            // The client wrote a first hop of its own; the proxy added the address it saw.
            for _ in 0..<SignInThrottle.limit {
                let reply = try await browser.signIn(id, wrong, headers: Self.forwarded("198.51.100.7, 203.0.113.5"))
                #expect(reply.status == 401)
            }
            let held = try await browser.signIn(id, wrong, headers: Self.forwarded("203.0.113.5"))
            #expect(held.status == 429)
            let viaTwo = try await browser.signIn(id, wrong, headers: Self.forwarded("203.0.113.5, 127.0.0.9"))
            #expect(viaTwo.status == 429, "through two proxies")
            let another = try await browser.signIn(id, wrong, headers: Self.forwarded("203.0.113.6"))
            #expect(another.status == 401, "another client")
            let right = try await browser.signIn(id, server.root.secretAccessKey, headers: Self.forwarded("203.0.113.6"))
            #expect(right.status == 200)
        }
        try await TestServer.with { server in
            var browser = ConsoleBrowser(server)
            for index in 0..<SignInThrottle.limit {
                let reply = try await browser.signIn(server.root.accessKeyId, wrong, headers: Self.forwarded("203.0.113.\(index)"))
                #expect(reply.status == 401)
            }
            let held = try await browser.signIn(server.root.accessKeyId, wrong, headers: Self.forwarded("203.0.113.99"))
            #expect(held.status == 429)
        }
    }

    @Test("the sign-in throttle gives each pair ten turns per window (a right secret gives them back), sign-ins sent at once included, and tracks a bounded number of pairs")
    func signInThrottleCounts() async {
        let clock = NIOLockedValueBox(0.0)
        let throttle = SignInThrottle(now: { clock.withLockedValue { $0 } })
        let pair = SignInThrottle.attempt(address: "192.0.2.1", accessKeyId: "FKIA1")
        for _ in 0..<SignInThrottle.limit { #expect(throttle.begin(pair) == nil) }
        #expect(throttle.begin(pair) == Int(SignInThrottle.window))
        #expect(throttle.begin(SignInThrottle.attempt(address: "192.0.2.2", accessKeyId: "FKIA1")) == nil)
        clock.withLockedValue { $0 = 59.5 }
        #expect(throttle.begin(pair) == 1)
        clock.withLockedValue { $0 = 60 }
        #expect(throttle.begin(pair) == nil, "the window ended")
        for _ in 1..<SignInThrottle.limit { #expect(throttle.begin(pair) == nil) }
        #expect(throttle.begin(pair) != nil)
        throttle.succeeded(pair)
        #expect(throttle.begin(pair) == nil)

        // Two hundred sign-ins at once: ten get their secret checked.
        let burst = SignInThrottle.attempt(address: "192.0.2.3", accessKeyId: "FKIA2")
        let turns = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 { group.addTask { throttle.begin(burst) == nil } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(turns == SignInThrottle.limit)

        for index in 0..<(SignInThrottle.capacity + 5) {
            _ = throttle.begin(SignInThrottle.attempt(address: "198.51.100.1", accessKeyId: "K\(index)"))
        }
        #expect(throttle.trackedPairs <= SignInThrottle.capacity)
    }

    @Test("a scoped key's session sees and changes only its own videos; disabling the key ends its session")
    func scopedKey() async throws {
        try await TestServer.with { server in
            var root = ConsoleBrowser(server)
            _ = try await root.signIn(server.root.accessKeyId, server.root.secretAccessKey)
            let created = try await root.api(
                "CreateAccessKey", ["Description": "uploader", "Policy": ["statements": [["actions": ["media:*", "s3:*"]]]]])
            let key = try #require(ConsoleBrowser.json(created)["AccessKey"] as? [String: Any])
            let id = try #require(key["AccessKeyId"] as? String)
            let secret = try #require(key["AccessKeySecret"] as? String)
            let rootVideo = try await root.api("CreateUploadVideo", ["Title": "root's", "FileName": "a.mp4"])
            let rootVideoId = try #require(ConsoleBrowser.json(rootVideo)["VideoId"] as? String)

            var scoped = ConsoleBrowser(server)
            let signedIn = try await scoped.signIn(id, secret)
            #expect(ConsoleBrowser.json(signedIn)["Root"] as? Bool == false)
            let own = try await scoped.api("CreateUploadVideo", ["Title": "mine", "FileName": "b.mp4"])
            let ownId = try #require(ConsoleBrowser.json(own)["VideoId"] as? String)
            let listed = ConsoleBrowser.json(try await scoped.api("ListVideos"))
            #expect((listed["VideoList"] as? [[String: Any]])?.compactMap { $0["VideoId"] as? String } == [ownId])
            #expect(try await scoped.api("GetVideoInfo", ["VideoId": rootVideoId]).status == 403)
            #expect(try await scoped.api("UpdateVideoInfo", ["VideoId": rootVideoId, "Title": "x"]).status == 403)
            #expect(try await scoped.api("DeleteVideo", ["VideoIds": rootVideoId]).status == 403)
            #expect(try await scoped.api("ListAccessKeys").status == 403)
            let everything = ConsoleBrowser.json(try await root.api("ListVideos"))
            #expect((everything["Total"] as? Int) == 2)

            #expect(try await root.api("DisableAccessKey", ["AccessKeyId": id]).status == 200)
            let ended = try await scoped.api("ListVideos")
            #expect(ended.status == 401 && ConsoleBrowser.code(ended) == "SessionExpired")
            var again = ConsoleBrowser(server)
            let refused = try await again.signIn(id, secret)
            #expect(refused.status == 401 && ConsoleBrowser.code(refused) == "AccessKeyDisabled")
            #expect(refused.text.contains(id) && !refused.text.contains(secret))

            // A key whose policy would not fit in a cookie a browser keeps is told so at sign-in, not signed in and
            // then forgotten (the browser drops the cookie, and the next page says the session ended).
            let statements = (0..<200).map { ["actions": ["media:*"], "bucket": "bucket-\($0)"] as [String: Any] }
            let large = try await root.api("CreateAccessKey", ["Description": "large", "Policy": ["statements": statements]])
            let largeKey = try #require(ConsoleBrowser.json(large)["AccessKey"] as? [String: Any])
            let largeId = try #require(largeKey["AccessKeyId"] as? String)
            let largeSecret = try #require(largeKey["AccessKeySecret"] as? String)
            var crowded = ConsoleBrowser(server)
            let tooLarge = try await crowded.signIn(largeId, largeSecret)
            #expect(tooLarge.status == 403 && ConsoleBrowser.code(tooLarge) == "PolicyTooLarge", "\(tooLarge.text)")
            #expect(tooLarge.header("set-cookie") == nil && !tooLarge.text.contains(largeSecret))
        }
    }

    @Test("UpdateVideoInfo changes title, description, tags, category and cover; titles are stored as the text given; ListVideos searches titles")
    func updateVideoInfo() async throws {
        try await TestServer.with { server in
            var browser = ConsoleBrowser(server)
            _ = try await browser.signIn(server.root.accessKeyId, server.root.secretAccessKey)
            let video = ConsoleBrowser.json(try await browser.api("CreateUploadVideo", ["Title": "first", "FileName": "a.mp4"]))
            let id = try #require(video["VideoId"] as? String)
            _ = try await browser.api("CreateUploadVideo", ["Title": "second", "FileName": "b.mp4"])
            let hostile = "<img src=x onerror=alert(1)>"
            let update = try await browser.api(
                "UpdateVideoInfo",
                ["VideoId": id, "Title": hostile, "Description": "d", "Tags": "a,b", "CateId": 7, "CoverURL": "https://img.example/c.jpg"])
            #expect(update.status == 200, "\(update.text)")
            let info = try #require(ConsoleBrowser.json(try await browser.api("GetVideoInfo", ["VideoId": id]))["Video"] as? [String: Any])
            #expect(info["Title"] as? String == hostile && info["Description"] as? String == "d" && info["Tags"] as? String == "a,b")
            #expect(info["CateId"] as? Int == 7 && info["CoverURL"] as? String == "https://img.example/c.jpg")
            let found = ConsoleBrowser.json(try await browser.api("ListVideos", ["Title": "<IMG"]))
            #expect((found["VideoList"] as? [[String: Any]])?.compactMap { $0["VideoId"] as? String } == [id])
            // Clearing: empty description and cover go back to none.
            _ = try await browser.api("UpdateVideoInfo", ["VideoId": id, "Description": "", "CoverURL": ""])
            let cleared = try #require(ConsoleBrowser.json(try await browser.api("GetVideoInfo", ["VideoId": id]))["Video"] as? [String: Any])
            #expect(cleared["Description"] == nil && cleared["CoverURL"] == nil && cleared["Title"] as? String == hostile)
            for (input, code) in [
                (["VideoId": id, "Title": "  "], "InvalidParameter"), (["VideoId": id, "CoverURL": "javascript:alert(1)"], "InvalidParameter"),
                (["VideoId": id, "Title": String(repeating: "x", count: 129)], "InvalidParameter"), (["VideoId": id], "MissingParameter"),
                (["VideoId": "nope", "Title": "x"], "InvalidVideo.NotFound"),
            ] as [([String: Any], String)] {
                let reply = try await browser.api("UpdateVideoInfo", input)
                #expect(ConsoleBrowser.code(reply) == code, "\(input): \(reply.text)")
            }
        }
    }

    @Test("Uppy's part-signing endpoints: create a video, sign parts, PUT them, list, complete; others cannot sign; abort")
    func partSigning() async throws {
        try await TestServer.with(minPartSize: 1024) { server in
            var browser = ConsoleBrowser(server)
            _ = try await browser.signIn(server.root.accessKeyId, server.root.secretAccessKey)
            let uppy = [("Uppy-Versions", "@uppy/companion-client=4.0.0")]
            let create: [String: Any] = ["filename": "clip.mp4", "type": "video/mp4", "metadata": ["name": "clip.mp4", "title": "From Uppy"]]
            // Without the CSRF token or Uppy's header, a state change is refused.
            let bare = try await browser.send("POST", "/s3/multipart", json: create, csrf: false)
            #expect(bare.status == 403)
            #expect(try await ConsoleBrowser(server).send("POST", "/s3/multipart", json: create, headers: uppy).status == 401)
            // A title or category given is checked as the media API checks it, not cut or dropped; a title from a long
            // file name is cut to 128 bytes.
            for (metadata, field) in [
                (["title": String(repeating: "t", count: 129)], "Title"), (["title": "ok", "cateId": "abc"], "metadata.cateId"),
            ] {
                let refused = try await browser.send(
                    "POST", "/s3/multipart", json: ["filename": "clip.mp4", "type": "video/mp4", "metadata": metadata],
                    headers: uppy, csrf: false)
                #expect(refused.status == 400 && refused.text.contains(field), "\(refused.text)")
            }
            let longName = String(repeating: "n", count: 200) + ".mp4"
            let named = try await browser.send(
                "POST", "/s3/multipart", json: ["filename": longName, "type": "video/mp4", "metadata": ["name": longName]],
                headers: uppy, csrf: false)
            #expect(named.status == 200, "\(named.text)")
            let namedId = try #require(ConsoleBrowser.json(named)["videoId"] as? String)
            let namedInfo = ConsoleBrowser.json(try await browser.api("GetVideoInfo", ["VideoId": namedId]))
            #expect(((namedInfo["Video"] as? [String: Any])?["Title"] as? String)?.utf8.count == 128, "\(namedInfo)")
            let created = try await browser.send("POST", "/s3/multipart", json: create, headers: uppy, csrf: false)
            #expect(created.status == 200, "\(created.text)")
            let answer = ConsoleBrowser.json(created)
            let key = try #require(answer["key"] as? String)
            let uploadId = try #require(answer["uploadId"] as? String)
            let videoId = try #require(answer["videoId"] as? String)
            let encodedKey = key.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? key

            let parts: [[UInt8]] = [[UInt8](repeating: 1, count: 2048), [UInt8](repeating: 2, count: 100)]
            var etags: [String] = []
            for (index, bytes) in parts.enumerated() {
                let signed = ConsoleBrowser.json(try await browser.send("GET", "/s3/multipart/\(uploadId)/\(index + 1)?key=\(encodedKey)"))
                let url = try #require(signed["url"] as? String)
                #expect(signed["method"] as? String == "PUT" && url.contains("partNumber=\(index + 1)"))
                #expect(!url.contains(server.root.secretAccessKey))
                let put = try await S3TestClient.fetchRaw("PUT", url, body: bytes)
                #expect(put.status == 200, "\(put.text)")
                etags.append(try #require(put.header("ETag")))
            }
            let listed = try await browser.send("GET", "/s3/multipart/\(uploadId)?key=\(encodedKey)")
            let listedParts = try #require(try JSONSerialization.jsonObject(with: Data(listed.body)) as? [[String: Any]])
            #expect(listedParts.map { $0["PartNumber"] as? Int } == [1, 2])
            #expect(listedParts.map { $0["Size"] as? Int } == [2048, 100])
            #expect(listedParts.map { $0["ETag"] as? String } == etags)
            #expect(try await browser.send("GET", "/s3/multipart/\(uploadId)/0?key=\(encodedKey)").status == 400)
            #expect(try await browser.send("GET", "/s3/multipart/\(uploadId)/10001?key=\(encodedKey)").status == 400)
            #expect(try await browser.send("GET", "/s3/multipart/\(uploadId)/1").status == 400)

            // Another key cannot sign, list or complete this upload.
            let root = browser
            let other = ConsoleBrowser.json(try await root.api(
                "CreateAccessKey", ["Policy": ["statements": [["actions": ["media:*", "s3:*"]]]]]))["AccessKey"] as? [String: Any]
            var stranger = ConsoleBrowser(server)
            _ = try await stranger.signIn(other?["AccessKeyId"] as? String ?? "", other?["AccessKeySecret"] as? String ?? "")
            #expect(try await stranger.send("GET", "/s3/multipart/\(uploadId)/1?key=\(encodedKey)").status == 403)
            #expect(try await stranger.send("GET", "/s3/multipart/\(uploadId)?key=\(encodedKey)").status == 403)

            let completion: [String: Any] = ["parts": etags.enumerated().map { ["PartNumber": $0.offset + 1, "ETag": $0.element] }]
            let completed = try await browser.send("POST", "/s3/multipart/\(uploadId)/complete?key=\(encodedKey)", json: completion, headers: uppy, csrf: false)
            #expect(completed.status == 200, "\(completed.text)")
            #expect((ConsoleBrowser.json(completed)["location"] as? String)?.hasSuffix(key) == true)
            #expect(ConsoleBrowser.json(completed)["size"] as? Int == 2148, "\(completed.text)")
            // A repeated Complete (its answer lost) gets the same answer.
            let repeated = try await browser.send("POST", "/s3/multipart/\(uploadId)/complete?key=\(encodedKey)", json: completion, headers: uppy, csrf: false)
            #expect(repeated.status == 200 && repeated.text == completed.text, "\(repeated.text) after \(completed.text)")
            // One that names another upload id, or other parts, is not that Complete: the upload is not found.
            for (id, body) in [("never-made", completion), (uploadId, ["parts": [["PartNumber": 1, "ETag": etags[0]]]])] {
                let other = try await browser.send(
                    "POST", "/s3/multipart/\(id)/complete?key=\(encodedKey)", json: body, headers: uppy, csrf: false)
                #expect(other.status == 404 && ConsoleBrowser.code(other) == "NoSuchUpload", "\(id): \(other.text)")
            }
            let object = try await server.client().get(server.server.configuration.mediaBucket, key)
            #expect(object.body == parts[0] + parts[1])
            let info = try #require(ConsoleBrowser.json(try await browser.api("GetVideoInfo", ["VideoId": videoId]))["Video"] as? [String: Any])
            #expect(info["Status"] as? String == "UploadSucc" && info["Title"] as? String == "From Uppy" && info["Size"] as? Int == 2148)
            // The stored video takes no more uploads here, as RefreshUploadVideo refuses them: another upload still
            // open on its key is neither signed nor completed with other bytes.
            let s3 = server.client()
            let media = server.server.configuration.mediaBucket
            let late = try await s3.createMultipartUpload(media, key)
            let lateETag = try #require(try await s3.uploadPart(media, key, uploadId: late, number: 1, Array("other bytes".utf8)).header("ETag"))
            let unsigned = try await browser.send("GET", "/s3/multipart/\(late)/1?key=\(encodedKey)")
            #expect(unsigned.status == 409 && ConsoleBrowser.code(unsigned) == "InvalidVideo.Uploaded", "\(unsigned.text)")
            let replacing = try await browser.send(
                "POST", "/s3/multipart/\(late)/complete?key=\(encodedKey)", json: ["parts": [["PartNumber": 1, "ETag": lateETag]]],
                headers: uppy, csrf: false)
            #expect(replacing.status == 403, "\(replacing.text)")
            #expect(try await s3.get(media, key).body == parts[0] + parts[1])

            // A completion stored while the server stopped before advancing its video: the repeated Complete (its
            // answer lost with the server) advances it.
            let stranded = ConsoleBrowser.json(try await browser.send("POST", "/s3/multipart", json: create, headers: uppy, csrf: false))
            let strandedKey = try #require(stranded["key"] as? String)
            let strandedUpload = try #require(stranded["uploadId"] as? String)
            let strandedVideo = try #require(stranded["videoId"] as? String)
            let strandedETag = try #require(
                try await s3.uploadPart(media, strandedKey, uploadId: strandedUpload, number: 1, parts[1]).header("ETag"))
            _ = try await server.server.store.completeMultipartUpload(
                try await server.server.store.multipartUpload(strandedUpload, bucket: media, key: strandedKey),
                parts: [.init(partNumber: 1, eTag: strandedETag)], fullObjectChecksums: [:], condition: .none)
            let strandedEncoded = strandedKey.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? strandedKey
            let finished = try await browser.send(
                "POST", "/s3/multipart/\(strandedUpload)/complete?key=\(strandedEncoded)",
                json: ["parts": [["PartNumber": 1, "ETag": strandedETag]]], headers: uppy, csrf: false)
            #expect(finished.status == 200, "\(finished.text)")
            let strandedInfo = ConsoleBrowser.json(try await browser.api("GetVideoInfo", ["VideoId": strandedVideo]))["Video"] as? [String: Any]
            #expect(strandedInfo?["Status"] as? String == "UploadSucc")

            // An image by its type; an aborted upload is gone.
            let image = ConsoleBrowser.json(try await browser.send(
                "POST", "/s3/multipart", json: ["filename": "p.png", "type": "image/png", "metadata": [String: String]()]))
            #expect(image["imageId"] is String)
            let imageKey = (image["key"] as? String ?? "").addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let imageUpload = image["uploadId"] as? String ?? ""
            #expect(try await browser.send("DELETE", "/s3/multipart/\(imageUpload)?key=\(imageKey)").status == 200)
            #expect(try await browser.send("GET", "/s3/multipart/\(imageUpload)?key=\(imageKey)").status == 404)
            // An image's repeated Complete answers the same too.
            let picture = ConsoleBrowser.json(try await browser.send(
                "POST", "/s3/multipart", json: ["filename": "q.png", "type": "image/png", "metadata": [String: String]()]))
            let (pictureKey, pictureUpload) = (try #require(picture["key"] as? String), try #require(picture["uploadId"] as? String))
            let pictureETag = try #require(
                try await s3.uploadPart(media, pictureKey, uploadId: pictureUpload, number: 1, parts[1]).header("ETag"))
            let pictureCompletion = "/s3/multipart/\(pictureUpload)/complete?key=" + (pictureKey.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            let pictureParts: [String: Any] = ["parts": [["PartNumber": 1, "ETag": pictureETag]]]
            let pictureDone = try await browser.send("POST", pictureCompletion, json: pictureParts, headers: uppy, csrf: false)
            #expect(pictureDone.status == 200 && ConsoleBrowser.json(pictureDone)["size"] as? Int == 100, "\(pictureDone.text)")
            let pictureAgain = try await browser.send("POST", pictureCompletion, json: pictureParts, headers: uppy, csrf: false)
            #expect(pictureAgain.status == 200 && pictureAgain.text == pictureDone.text, "\(pictureAgain.text) after \(pictureDone.text)")
            let pictureInfo = ConsoleBrowser.json(try await browser.api("GetImageInfo", ["ImageId": picture["imageId"] as? String ?? ""]))
            #expect((pictureInfo["ImageInfo"] as? [String: Any])?["Status"] as? String == "Uploaded", "\(pictureInfo)")
            #expect(ConsoleBrowser.code(try await browser.send("POST", "/s3/multipart", json: ["type": "video/mp4"])) == "MissingParameter")
            let malformed = try await browser.send("POST", "/s3/multipart", raw: Array("[".utf8))
            #expect(malformed.status == 400 && ConsoleBrowser.code(malformed) == "MalformedJSON")
        }
    }

    @Test("--cors-origin: preflights from an allowed origin are answered and responses expose ETag and checksums, and a tus client's headers; other origins are not")
    func crossOrigin() async throws {
        try await TestServer.with(configure: { $0.corsOrigins = ["https://app.example"] }) { server in
            let client = server.client()
            #expect(try await client.createBucket("web").status == 200)
            let preflight = try await client.sendRaw(
                "OPTIONS", "/web/movie.mp4",
                headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT"),
                          ("Access-Control-Request-Headers", "content-type,x-amz-checksum-crc32")])
            #expect(preflight.status == 204)
            #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example")
            #expect(preflight.header("Access-Control-Allow-Headers") == "content-type,x-amz-checksum-crc32")
            #expect(preflight.header("Access-Control-Allow-Methods")?.contains("PUT") == true)
            #expect(preflight.header("Access-Control-Allow-Credentials") == nil)
            let media = try await client.sendRaw(
                "OPTIONS", "/_ferry/v1/ListVideos", headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")])
            #expect(media.status == 204)
            let put = try await client.put("web", "movie.mp4", [1, 2, 3], headers: [("Origin", "https://app.example")])
            #expect(put.header("Access-Control-Allow-Origin") == "https://app.example")
            let exposed = put.header("Access-Control-Expose-Headers") ?? ""
            #expect(exposed.contains("ETag") && exposed.contains("x-amz-checksum-crc32"))
            // A browser's tus client: its PATCH preflight is answered, and it can read the upload's offset.
            let app: [(name: String, value: String)] = [("Origin", "https://app.example"), ("Tus-Resumable", "1.0.0")]
            let created = try await client.send(
                "POST", "/_ferry/uploads/s3/web/tus.bin", headers: app + [("Upload-Length", "3")], payload: .unsigned)
            #expect(created.status == 201)
            let tusExposed = created.header("Access-Control-Expose-Headers") ?? ""
            for name in ["Location", "Upload-Offset", "Upload-Expires", "Tus-Resumable"] { #expect(tusExposed.contains(name)) }
            let location = try #require(created.header("Location"))
            let patchPreflight = try await S3TestClient.fetchRaw(
                "OPTIONS", location,
                headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PATCH"),
                          ("Access-Control-Request-Headers", "tus-resumable,upload-offset,content-type")])
            #expect(patchPreflight.status == 204)
            #expect(patchPreflight.header("Access-Control-Allow-Methods")?.contains("PATCH") == true)
            #expect(patchPreflight.header("Access-Control-Allow-Origin") == "https://app.example")
            let patched = try await S3TestClient.fetchRaw(
                "PATCH", location,
                headers: app + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")], body: [1, 2, 3])
            #expect(patched.status == 204)
            #expect(patched.header("Access-Control-Allow-Origin") == "https://app.example")
            #expect(patched.header("Access-Control-Expose-Headers")?.contains("Upload-Offset") == true)
            let stranger = try await client.sendRaw(
                "OPTIONS", "/web/movie.mp4", headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "PUT")])
            #expect(stranger.header("Access-Control-Allow-Origin") == nil)
            #expect(try await client.put("web", "x", [1], headers: [("Origin", "https://evil.example")]).header("Access-Control-Allow-Origin") == nil)
            // The console's own endpoints never answer another origin.
            let session = try await client.sendRaw(
                "OPTIONS", ConsoleAPI.sessionPath, headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")])
            #expect(session.header("Access-Control-Allow-Origin") == nil)
        }
        #expect(throws: CrossOriginPolicy.InvalidOrigin.self) { try CrossOriginPolicy.validate("https://app.example/path") }
        #expect(throws: CrossOriginPolicy.InvalidOrigin.self) { try CrossOriginPolicy.validate("app.example") }
        try CrossOriginPolicy.validate("*")
        try CrossOriginPolicy.validate("http://localhost:3000")
    }
}
