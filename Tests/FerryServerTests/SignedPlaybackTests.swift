import Crypto
import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import JWTKit
import Testing

@testable import FerryServer

/// The catalog a signed playback test's server keeps its videos and signing keys in.
enum PlaybackCatalog: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Runs `body` with a processing server on this catalog.
    func withHarness<T: Sendable>(_ body: @Sendable @escaping (MediaHarness) async throws -> T) async throws -> T {
        switch self {
        case .sqlite:
            return try await MediaHarness.with(body)
        case .postgres:
            return try await PostgresServer.withDatabase { url in
                try await MediaHarness.with(configure: { $0.catalogURL = url }, body)
            }
        }
    }
}

/// The claims an app server puts in a playback token.
struct AppPlaybackClaims: JWTPayload {
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim?
    var referrers: [String]?
    var definitions: [String]?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

@Suite("Signed playback: policies, signing keys, JWT playback tokens (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
struct SignedPlaybackTests {
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path
        + "/FerryTests/Scripts"

    /// A token signed with `keys` (holding one key under `kid`).
    static func token(
        _ keys: JWTKeyCollection, kid: String?, video: String, aud: [String] = ["v"], expires: TimeInterval = 300,
        referrers: [String]? = nil, definitions: [String]? = nil, notBefore: TimeInterval? = nil,
        header: JWTHeader = JWTHeader()
    ) async throws -> String {
        let claims = AppPlaybackClaims(
            sub: .init(value: video), aud: .init(value: aud), exp: .init(value: Date().addingTimeInterval(expires)),
            nbf: notBefore.map { .init(value: Date().addingTimeInterval($0)) }, referrers: referrers,
            definitions: definitions)
        return try await keys.sign(claims, kid: kid.map { JWKIdentifier(string: $0) }, header: header)
    }

    /// A token for `video` whose header is `header` as given (an `alg` that is not the key's, or none), signed with
    /// the ES256 private key `pem` over it as ES256 signs: what a library that writes any header would make.
    static func rawToken(header: [String: String], video: String, pem: String) throws -> String {
        func base64url(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let claims: [String: Any] = ["sub": video, "aud": ["v"], "exp": Int(Date().timeIntervalSince1970) + 300]
        let input =
            base64url(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) + "."
            + base64url(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let signature = try P256.Signing.PrivateKey(pemRepresentation: pem).signature(for: Data(input.utf8))
        return input + "." + base64url(signature.rawRepresentation)
    }

    /// The status of a GET of `url` with `token`, and the `Reason` of a refusal.
    static func get(_ url: String, token: String?, referer: String? = nil) async throws -> (status: Int, reason: String?) {
        let target = token.map { url + "?token=" + $0 } ?? url
        let answer = try await S3TestClient.fetch(target, headers: referer.map { [("Referer", $0)] } ?? [])
        let body = String(decoding: answer.body, as: UTF8.self)
        let reason = body.range(of: "<Reason>").flatMap { start in
            body.range(of: "</Reason>").map { end in String(body[start.upperBound..<end.lowerBound]) }
        }
        return (answer.status, reason)
    }

    /// What playback_check.py found following the playlists with the m3u8 package.
    static func check(_ arguments: [String]) async throws -> [String: Any] {
        let run = try await MediaFixtures.tool("python3", [scripts + "/playback_check.py"] + arguments)
        let last = run.output.split(separator: "\n").last.map(String.init) ?? ""
        let object = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any] ?? [:]
        #expect(run.status == 0, "playback_check.py: \(last) \(run.errorOutput.suffix(2000))")
        return object
    }

    @Test(
        "a signed video plays with a valid token through ffmpeg and m3u8 (jwt-kit and PyJWT tokens), every bad token is a 403 with its reason, a public one needs none",
        arguments: PlaybackCatalog.allCases)
    func signedPlayback(catalog: PlaybackCatalog) async throws {
        try await catalog.withHarness { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480))
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"])
            try #require(info.status == "Normal", "\(info.errorMessage ?? "")")
            #expect(info.playbackPolicy == .signed)
            let base = harness.server.endpoint + "/_ferry/play/" + videoId + "/"
            let master = base + "master.m3u8"

            // No token: refused, for every kind of file.
            for file in ["master.m3u8", "LD/index.m3u8", "LD.mp4", "cover.jpg"] {
                let answer = try await Self.get(base + file, token: nil)
                #expect(answer.status == 403 && answer.reason == "missing", "\(file)")
            }

            // GetPlayInfo's URLs carry a token the server signs; ffmpeg and m3u8 follow them.
            let play = try await harness.media.getPlayInfo(videoId: videoId)
            let auto = try #require(play.stream(format: "m3u8", definition: "AUTO"))
            #expect(auto.url.hasPrefix(master + "?token="))
            let serverToken = String(try #require(auto.url.components(separatedBy: "?token=").last))
            // Minted for the caller's access key (`iss`), whose being disabled ends it.
            let servedClaims = try DefaultJWTParser().parse([UInt8](serverToken.utf8), as: PlaybackToken.Claims.self).payload
            #expect(servedClaims.iss?.value == harness.server.root.accessKeyId)
            let served = try await Self.check([master, "--token", serverToken])
            #expect(served["isVariant"] as? Bool == true)
            #expect((served["variants"] as? [String])?.sorted() == ["LD/index.m3u8", "SD/index.m3u8"])
            // The master, its two variants and the audio rendition (SQ, the AUDIO group); each media playlist's init
            // section and first segment.
            #expect(served["playlists"] as? Int == 4)
            #expect((served["segments"] as? Int ?? 0) >= 2)
            #expect(served["fetched"] as? Int == 6)
            #expect((served["missingToken"] as? [String])?.isEmpty == true)
            #expect(info.coverURL?.contains("/_ferry/play/\(videoId)/cover.jpg?token=") == true)
            #expect(try await S3TestClient.fetch(try #require(info.coverURL)).status == 200)
            // The description's long-lived cover URL opens the cover alone, not a still of any other moment.
            let coverToken = String(try #require(info.coverURL?.components(separatedBy: "?token=").last))
            #expect(try await Self.get(base + "thumbnail.jpg", token: coverToken).reason == "audience")

            // An app server's key: the private key is answered once; the list shows the public key only.
            let key = try await harness.media.createSigningKey()
            #expect(key.algorithm == "ES256" && key.privateKey.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            let listed = try await harness.media.signingKeys()
            #expect(listed.map(\.keyId) == [key.keyId])
            #expect(listed.first?.publicKey.hasPrefix("-----BEGIN PUBLIC KEY-----") == true)
            #expect(!String(describing: key).contains("PRIVATE"))
            let app = await JWTKeyCollection().add(
                ecdsa: try ES256PrivateKey(pem: key.privateKey), kid: JWKIdentifier(string: key.keyId))
            let valid = try await Self.token(app, kid: key.keyId, video: videoId)

            // The real ffmpeg reads the whole stream through the signed master playlist.
            let output = harness.fixtures + "/played.mp4"
            try await MediaFixtures.ffmpeg(["-i", master + "?token=" + valid, "-c", "copy", output])
            let probed = try await MediaFixtures.probe(output)
            #expect(abs((probed.duration ?? 0) - 3) <= 0.2)
            #expect(probed.codec("video") == "h264")
            for file in ["master.m3u8", "LD/index.m3u8", "SD/index.m3u8", "LD.mp4"] {
                #expect(try await Self.get(base + file, token: valid).status == 200, "\(file)")
            }
            // Without a kid: the video owner's keys are tried.
            #expect(try await Self.get(master, token: try await Self.token(app, kid: nil, video: videoId)).status == 200)

            // A token minted by PyJWT with the same private key plays too.
            let pem = harness.fixtures + "/signing-key.pem"
            try Data(key.privateKey.utf8).write(to: URL(fileURLWithPath: pem))
            let minted = try await Self.check([master, "--key", pem, "--kid", key.keyId, "--video", videoId])
            #expect(minted["playlists"] as? Int == 4 && minted["fetched"] as? Int == 6)
            #expect((minted["missingToken"] as? [String])?.isEmpty == true)

            // Every bad token kind: 403 with its reason.
            let other = try await harness.media.createUploadVideo(.init(title: "other", fileName: "other.mp4")).id
            let stranger = await JWTKeyCollection().add(ecdsa: ES256PrivateKey(), kid: JWKIdentifier(string: key.keyId))
            var altered = Array(valid)
            let middle = altered.count - 20
            altered[middle] = altered[middle] == "A" ? "B" : "A"
            // The same signature bytes spelled otherwise: a 64-byte signature leaves its last character's low bits
            // unused, and padding adds nothing. Another text is another token: refused.
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            var respelled = Array(valid)
            let last = try #require(alphabet.firstIndex(of: respelled[respelled.count - 1]))
            respelled[respelled.count - 1] = alphabet[last ^ 1]
            // A header written by hand, signed as ES256 signs: with the key's algorithm it plays; naming another
            // algorithm, or none, it is refused however well its signature verifies under the key.
            func hand(_ alg: String?, kid: String? = key.keyId) throws -> String {
                var header: [String: String] = [:]
                header["alg"] = alg
                header["kid"] = kid
                return try Self.rawToken(header: header, video: videoId, pem: key.privateKey)
            }
            #expect(try await Self.get(master, token: try hand("ES256")).status == 200)
            #expect(try await Self.get(master, token: try hand("ES256", kid: nil)).status == 200)
            // A web player on another site may send a range and every conditional the files answer (If-Range when it
            // resumes a download).
            let preflight = try await S3TestClient.fetchRaw(
                "OPTIONS", base + "LD.mp4",
                headers: [("Origin", "https://player.example"), ("Access-Control-Request-Method", "GET"),
                    ("Access-Control-Request-Headers", "range,if-range")])
            let allowed = Set((preflight.header("Access-Control-Allow-Headers") ?? "").lowercased()
                .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(preflight.status == 204, "\(preflight.status)")
            #expect(allowed.isSuperset(of: ["range", "if-range", "if-none-match", "if-modified-since", "if-match", "if-unmodified-since"]), "\(allowed)")
            let bad: [(String, String, String?)] = [
                ("signature", try hand("none"), nil), ("signature", try hand("HS256"), nil),
                ("signature", try hand("RS256"), nil), ("signature", try hand("ES384"), nil),
                ("signature", try hand("es256"), nil), ("signature", try hand("none", kid: nil), nil),
                ("malformed", try hand(nil), nil),
                ("expired", try await Self.token(app, kid: key.keyId, video: videoId, expires: -10), nil),
                ("early", try await Self.token(app, kid: key.keyId, video: videoId, notBefore: 120), nil),
                (
                    "critical",
                    try await Self.token(
                        app, kid: key.keyId, video: videoId, header: ["crit": .array([.string("x-ext")]), "x-ext": .bool(true)]),
                    nil
                ),
                ("audience", try await Self.token(app, kid: key.keyId, video: videoId, aud: ["t"]), nil),
                ("video", try await Self.token(app, kid: key.keyId, video: other), nil),
                ("key", try await Self.token(app, kid: "fsk_unknown", video: videoId), nil),
                ("signature", try await Self.token(stranger, kid: key.keyId, video: videoId), nil),
                ("signature", String(altered), nil),
                ("malformed", "not-a-jwt", nil),
                ("malformed", String(respelled), nil),
                ("malformed", valid + "=", nil),
                (
                    "referrer",
                    try await Self.token(app, kid: key.keyId, video: videoId, referrers: ["player.example"]),
                    "https://elsewhere.example/watch"
                ),
                (
                    "referrer",
                    try await Self.token(app, kid: key.keyId, video: videoId, referrers: ["player.example"]), nil
                ),
            ]
            for (reason, token, referer) in bad {
                for file in ["master.m3u8", "LD/index.m3u8"] {
                    let answer = try await Self.get(base + file, token: token, referer: referer)
                    #expect(answer.status == 403 && answer.reason == reason, "\(reason) \(file): \(answer)")
                }
            }
            await #expect(throws: MediaFixtures.ToolFailure.self) {
                try await MediaFixtures.ffmpeg(["-i", master + "?token=" + String(altered), "-c", "copy", output])
            }
            // A token valid from a minute ago plays, and one from 30 s ahead (an app server's clock running fast).
            for notBefore: TimeInterval in [-60, 30] {
                let token = try await Self.token(app, kid: key.keyId, video: videoId, notBefore: notBefore)
                #expect(try await Self.get(master, token: token).status == 200, "nbf \(notBefore)")
            }
            // Definitions: GetPlayInfo asked for LD answers URLs that open LD alone, with the sound published apart
            // (SQ), which LD's playlist plays with; an app's token likewise, and one naming AUTO opens every
            // rendition. Subtitles and pictures are not renditions.
            let narrowed = try await harness.media.getPlayInfo(videoId: videoId, definitions: ["LD"])
            let ldURL = try #require(narrowed.stream(format: "m3u8", definition: "LD")).url
            #expect(ldURL.hasPrefix(base + "LD.m3u8?token="), "\(ldURL)")
            let ldToken = String(try #require(ldURL.components(separatedBy: "?token=").last))
            let ldOnly = try await Self.token(app, kid: key.keyId, video: videoId, definitions: ["LD"])
            for token in [ldToken, ldOnly] {
                #expect(try await Self.get(ldURL.components(separatedBy: "?").first ?? "", token: token).status == 200)
                for file in ["LD.mp4", "LD/init.mp4", "LD/index.m3u8", "SQ/index.m3u8", "SQ/init.mp4"] {
                    #expect(try await Self.get(base + file, token: token).status == 200, "\(file)")
                }
                // The LD stream plays picture and sound, through ffmpeg and the m3u8 package.
                let ldPlayed = harness.fixtures + "/played-ld-\(token == ldToken ? "served" : "app").mp4"
                try await MediaFixtures.ffmpeg(["-i", base + "LD.m3u8?token=" + token, "-c", "copy", ldPlayed])
                let ldProbed = try await MediaFixtures.probe(ldPlayed)
                #expect(ldProbed.codec("video") == "h264" && ldProbed.codec("audio") == "aac", "\(ldProbed)")
                #expect(abs((ldProbed.duration ?? 0) - 3) <= 0.2)
                let ldChecked = try await Self.check([base + "LD.m3u8", "--token", token])
                #expect((ldChecked["variants"] as? [String]) == ["LD/index.m3u8"], "\(ldChecked)")
                #expect(ldChecked["playlists"] as? Int == 3 && ldChecked["fetched"] as? Int == 4, "\(ldChecked)")
                #expect((ldChecked["missingToken"] as? [String])?.isEmpty == true)
                for file in ["SD/index.m3u8", "SD/init.mp4", "SD.mp4", "SD.m3u8", "master.m3u8", "manifest.mpd", "SQ.m4a"] {
                    let answer = try await Self.get(base + file, token: token)
                    #expect(answer.status == 403 && answer.reason == "definition", "\(file): \(answer)")
                }
            }
            // A file of no published rendition (the first stream's, kept a day after the ladder replaced it) does not
            // open past the definitions; subtitles, of none by nature, are looked for.
            for token in [ldToken, ldOnly] {
                let first = try await Self.get(base + "start/index.m3u8", token: token)
                #expect(first.status == 403 && first.reason == "definition", "\(first)")
                #expect(try await Self.get(base + "subtitles/none.m3u8", token: token).status == 404)
            }
            let everyDefinition = try await Self.token(app, kid: key.keyId, video: videoId, definitions: ["AUTO"])
            for file in ["master.m3u8", "SD/index.m3u8", "LD.mp4"] {
                #expect(try await Self.get(base + file, token: everyDefinition).status == 200, "\(file)")
            }

            // The referrer restriction lets the allowed page play; audiences open only what they grant.
            let restricted = try await Self.token(app, kid: key.keyId, video: videoId, referrers: ["*.example.com"])
            #expect(try await Self.get(master, token: restricted, referer: "https://www.example.com/a").status == 200)
            let download = try await Self.token(app, kid: key.keyId, video: videoId, aud: ["d"])
            #expect(try await Self.get(base + "LD.mp4", token: download).status == 200)
            #expect(try await Self.get(master, token: download).reason == "audience")
            let thumbnail = try await Self.token(app, kid: key.keyId, video: videoId, aud: ["t"])
            #expect(try await Self.get(base + "cover.jpg", token: thumbnail).status == 200)

            // RS256 keys work alike.
            let rsa = try await harness.media.createSigningKey(algorithm: "RS256")
            let rsaKeys = await JWTKeyCollection().add(
                rsa: try Insecure.RSA.PrivateKey(pem: rsa.privateKey), digestAlgorithm: .sha256,
                kid: JWKIdentifier(string: rsa.keyId))
            #expect(try await Self.get(master, token: try await Self.token(rsaKeys, kid: rsa.keyId, video: videoId)).status == 200)

            // A temporary credential the root key issued acts on the root key's own videos alone: it makes no
            // signing key, which as the root key's would sign for every owner's video and outlive it (hunt82).
            let rootTemporary = MediaServiceClient(
                endpoint: URL(string: harness.server.endpoint)!,
                credentials: try await harness.media.assumeRole(
                    durationSeconds: 900, policy: AccessPolicy(statements: [.init(actions: ["media:*"])])))
            do throws(FerryError) {
                _ = try await rootTemporary.createSigningKey()
                Issue.record("a temporary credential of the root key made a signing key")
            } catch {
                #expect(error.httpStatus == 403 && error.serverCode == "Forbidden", "\(error)")
            }
            #expect(try await harness.media.signingKeys().count == 2)
            // Another access key's signing key does not open the root key's videos.
            let scoped = try await harness.media.createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
            let scopedMedia = MediaServiceClient(endpoint: URL(string: harness.server.endpoint)!, credentials: scoped)
            let foreign = try await scopedMedia.createSigningKey()
            #expect(try await scopedMedia.signingKeys().map(\.keyId) == [foreign.keyId])
            let foreignKeys = await JWTKeyCollection().add(
                ecdsa: try ES256PrivateKey(pem: foreign.privateKey), kid: JWKIdentifier(string: foreign.keyId))
            #expect(try await Self.get(master, token: try await Self.token(foreignKeys, kid: foreign.keyId, video: videoId)).reason == "key")
            await #expect(throws: FerryError.self) { try await scopedMedia.deleteSigningKey(key.keyId) }
            // It opens the access key's own video (nothing is published yet: 404 once the token is accepted) until
            // that access key is disabled; then neither its kid nor the owner's keys tried without one sign.
            let own = try await scopedMedia.createUploadVideo(.init(title: "own", fileName: "own.mp4")).id
            let ownMaster = harness.server.endpoint + "/_ferry/play/\(own)/master.m3u8"
            let ownToken = try await Self.token(foreignKeys, kid: foreign.keyId, video: own)
            let ownWithoutKid = try await Self.token(foreignKeys, kid: nil, video: own)
            #expect(try await Self.get(ownMaster, token: ownToken).status == 404)
            #expect(try await Self.get(ownMaster, token: ownWithoutKid).status == 404)
            // So does a token the server minted for that access key (as GetPlayInfo answers it), and then no more.
            let serverMinted = try await PlaybackToken.mint(
                videoId: own, audiences: [.video], expiration: Date().addingTimeInterval(600), issuer: scoped.accessKeyId,
                codec: harness.server.server.credentials.tokens)
            #expect(try await Self.get(ownMaster, token: serverMinted).status == 404)
            try await harness.media.disableAccessKey(scoped.accessKeyId)
            #expect(try await Self.get(ownMaster, token: ownToken).reason == "key")
            #expect(try await Self.get(ownMaster, token: ownWithoutKid).reason == "key")
            #expect(try await Self.get(ownMaster, token: serverMinted).reason == "key")

            // A deleted key's tokens are refused.
            try await harness.media.deleteSigningKey(key.keyId)
            #expect(try await Self.get(master, token: valid).reason == "key")
            #expect(try await harness.media.signingKeys().map(\.keyId).sorted() == [foreign.keyId, rsa.keyId].sorted())

            // A signed video's files (their URLs carry a token) are kept by the player alone.
            let signedPlay = try await harness.media.getPlayInfo(videoId: videoId)
            let signedAnswer = try await S3TestClient.fetch(try #require(signedPlay.stream(format: "m3u8", definition: "LD")).url)
            #expect(signedAnswer.status == 200 && signedAnswer.header("cache-control") == "private, max-age=60")

            // Public: no token needed, none in GetPlayInfo's URLs or the playlists.
            try await harness.media.setPlaybackPolicy(.public, videoId: videoId)
            #expect(try await harness.media.getVideoInfo(videoId: videoId).playbackPolicy == .public)
            let open = try await S3TestClient.fetch(master)
            #expect(open.status == 200 && !String(decoding: open.body, as: UTF8.self).contains("token="))
            // The master playlist names the subtitle tracks, which may be added at any time: cached a minute; a
            // rendition's files never change. Any cache (a CDN) may keep a public video's files.
            #expect(open.header("cache-control") == "public, max-age=60")
            #expect(try await S3TestClient.fetch(base + "manifest.mpd").header("cache-control") == "public, max-age=60")
            #expect(try await S3TestClient.fetch(base + "LD/index.m3u8").header("cache-control") == "public, max-age=3600")
            let publicPlay = try await harness.media.getPlayInfo(videoId: videoId)
            #expect(publicPlay.streams.allSatisfy { !$0.url.contains("token=") })
            let publicOutput = harness.fixtures + "/public.mp4"
            try await MediaFixtures.ffmpeg(["-i", master, "-c", "copy", publicOutput])
            #expect(abs((try await MediaFixtures.probe(publicOutput).duration ?? 0) - 3) <= 0.2)
            let unparsed = try await Self.check([master, "--token", "ignored"])
            #expect(unparsed["playlists"] as? Int == 4)

            // A policy is set at creation; an unknown one is refused.
            var description = MediaServiceClient.VideoDescription(title: "open", fileName: "open.mp4")
            description.playbackPolicy = .public
            let created = try await harness.media.createUploadVideo(description)
            #expect(try await harness.media.getVideoInfo(videoId: created.id).playbackPolicy == .public)
            description.playbackPolicy = PlaybackPolicy(rawValue: "private")
            await #expect(throws: FerryError.self) { try await harness.media.createUploadVideo(description) }
        }
    }

    @Test("a token without kid opens the video with any of its owner's keys, the newest too: a rotation past 16 keys does not strand the new key")
    func kidlessTokensTryEveryKey() async throws {
        try await TestServer.with { server in
            let authorizer = PlaybackAuthorizer(catalog: server.server.mediaCatalog, credentials: server.server.credentials)
            let media = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            let video = CatalogTests.video("0123456789abcdef0123456789abcdef", owner: server.root.accessKeyId)
            var created: [MediaContract.CreateSigningKeyAnswer] = []
            for _ in 0..<20 { created.append(try await media.createSigningKey()) }
            for key in [created[0], created[16], created[19]] {
                let keys = await JWTKeyCollection().add(ecdsa: try ES256PrivateKey(pem: key.privateKey))
                let token = try await Self.token(keys, kid: nil, video: video.videoId)
                try await authorizer.authorize(video: video, file: "master.m3u8", token: token, referer: nil)
            }
            // A key of no one's still refuses, after every key was tried.
            let stranger = await JWTKeyCollection().add(ecdsa: ES256PrivateKey())
            let forged = try await Self.token(stranger, kid: nil, video: video.videoId)
            await #expect(throws: PlaybackAuthorizer.Refusal.signature) {
                try await authorizer.authorize(video: video, file: "master.m3u8", token: forged, referer: nil)
            }
        }
    }

    @Test("a signing key the catalog cannot read answers 503 (try again), not a refusal; a kid no key could have is refused unread")
    func unreadableSigningKeys() async throws {
        try await TestServer.with { server in
            let authorizer = PlaybackAuthorizer(catalog: server.server.mediaCatalog, credentials: server.server.credentials)
            let video = CatalogTests.video("0123456789abcdef0123456789abcdef")
            #expect(video.isPlaybackSigned)
            let kid = "fsk_AAAAAAAAAAAAAAAAAAAA"
            let keys = await JWTKeyCollection().add(ecdsa: ES256PrivateKey(), kid: JWKIdentifier(string: kid))
            let token = try await Self.token(keys, kid: kid, video: video.videoId)
            await #expect(throws: PlaybackAuthorizer.Refusal.key) {
                try await authorizer.authorize(video: video, file: "master.m3u8", token: token, referer: nil)
            }

            // The catalog fails under the server: the signing keys' table is gone.
            let broken = Process()
            broken.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            broken.arguments = [
                "python3", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('DROP TABLE signingKey'); c.commit()",
                server.dataDirectory + "/catalog.sqlite",
            ]
            try broken.run()
            broken.waitUntilExit()
            try #require(broken.terminationStatus == 0)
            let failed = await #expect(throws: PlaybackAuthorizer.Refusal.self) {
                try await authorizer.authorize(video: video, file: "master.m3u8", token: token, referer: nil)
            }
            #expect(failed == .unavailable && failed?.error.code == .serviceUnavailable)
            let ownerKeys = try await Self.token(keys, kid: nil, video: video.videoId)
            await #expect(throws: PlaybackAuthorizer.Refusal.unavailable) {
                try await authorizer.authorize(video: video, file: "master.m3u8", token: ownerKeys, referer: nil)
            }
            // A kid with control characters, or longer than any key id, is not looked up.
            for odd in ["fsk_\u{1}", String(repeating: "k", count: 65)] {
                let oddKeys = await JWTKeyCollection().add(ecdsa: ES256PrivateKey(), kid: JWKIdentifier(string: odd))
                let oddToken = try await Self.token(oddKeys, kid: odd, video: video.videoId)
                await #expect(throws: PlaybackAuthorizer.Refusal.key) {
                    try await authorizer.authorize(video: video, file: "master.m3u8", token: oddToken, referer: nil)
                }
            }
        }
    }
}
