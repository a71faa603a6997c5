import Crypto
import FerryCore
import FerryTestSupport
import Foundation
import JWTKit

/// Everything the fuzz needs that exists on the server: buckets, objects, uploads, videos and an image, and one
/// credential of every kind, each obtained through the server's own APIs.
struct FuzzFixtures: Sendable {
    var root: SigV4Credentials
    /// A key made with CreateAccessKey whose policy allows `s3:*` on the fuzz bucket and `media:*`.
    var scoped: SigV4Credentials
    /// A key allowed only the publish actions, as an app server that signs publish signatures holds.
    var publisher: SigV4Credentials
    /// AssumeRole's temporary credential (root's, under an inline policy).
    var sts: SigV4Credentials
    /// CreateUploadVideo's UploadAuth for a video still being uploaded: it may write only `uploadKey`.
    var upload: SigV4Credentials
    var bucket = "fuzz"
    var object = "obj"
    var multipartKey = "mpu"
    var multipartId: String
    var mediaBucket: String
    var uploadKey: String
    /// A multipart upload of `uploadKey` started with the upload credential.
    var uploadMultipartId: String
    /// A video whose source is stored (UploadSucc): GetMezzanineInfo signs a URL for it.
    var storedVideoId: String
    var pendingVideoId: String
    /// An image whose file is stored: GetImageInfo signs a URL for it.
    var imageId: String
    /// A publish signature by the publisher key, and the VodSessionKey of a video applied for and uploaded with it
    /// (CommitUploadUGC signs URLs for it).
    var publishSignature: String
    var vodSessionKey: String
    /// A form upload token by the root key for the fuzz bucket.
    var formToken: String
    /// The console session of the root key: its cookie (`ferry_console=…`) and CSRF token.
    var consoleCookie: String
    var csrf: String
    /// A multipart upload started through the Uppy endpoints with the console session.
    var uppyKey: String
    var uppyUploadId: String
    /// A playback token for the stored video, made as the server makes them from its token key.
    var playbackToken: String
    /// A playback token for the video still being uploaded (its duration unknown: what pictures of it ask is bounded
    /// by nothing the video says).
    var pendingPlaybackToken: String

    /// The key material of a credential kind, when it has any.
    func keys(_ credential: FuzzCredential) -> SigV4Credentials? {
        switch credential {
        case .root: root
        case .scopedKey: scoped
        case .sts: sts
        case .deviceUpload: upload
        default: nil
        }
    }

    /// Sends one well-formed request and returns its answer, failing on anything but `status`.
    static func call(
        _ server: FuzzedServer, _ request: FuzzRequest, expect status: Int = 200, _ what: String
    ) async throws -> RawHTTPExchange.Response {
        var request = request
        let outcome = await RawHTTPExchange.send(port: server.port, request.wire(), timeout: .seconds(30))
        guard case .answered(let response) = outcome, response.status == status else {
            throw TortureError("fixture \(what): \(outcome)")
        }
        return response
    }

    static func json(_ response: RawHTTPExchange.Response, _ what: String) throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw TortureError("fixture \(what): not a JSON object: \(response.text.prefix(300))")
        }
        return object
    }

    static func string(_ object: [String: Any], _ path: String...) throws -> String {
        var current: Any = object
        for name in path {
            guard let next = (current as? [String: Any])?[name] else {
                throw TortureError("fixture: no \(path) in \(object)")
            }
            current = next
        }
        guard let value = current as? String else {
            throw TortureError("fixture: \(path) is not a string in \(object)")
        }
        return value
    }

    /// A media API call signed by `credentials`.
    static func media(
        _ server: FuzzedServer, _ credentials: SigV4Credentials, _ action: String, _ body: String
    ) async throws -> [String: Any] {
        var request = FuzzRequest(method: "POST", path: "/_ferry/v1/" + action)
        request.host = Array("127.0.0.1:\(server.port)".utf8)
        request.headers = [("content-type", "application/json")]
        request.body = Array(body.utf8)
        request.sign(credentials, service: "ferry")
        return try json(try await call(server, request, action), action)
    }

    /// An object API request signed by `credentials`.
    static func s3(
        _ server: FuzzedServer, _ credentials: SigV4Credentials, _ method: String, _ path: String,
        query: [(name: String, value: String)] = [], body: [UInt8] = [], _ what: String
    ) async throws -> RawHTTPExchange.Response {
        var request = FuzzRequest(method: method, path: path)
        request.host = Array("127.0.0.1:\(server.port)".utf8)
        request.query = query
        request.body = body
        request.sign(credentials, service: "s3")
        return try await call(server, request, what)
    }

    static func uploadAuth(_ object: [String: Any]) throws -> SigV4Credentials {
        guard let auth = UploadAuth(encoded: try string(object, "UploadAuth")) else {
            throw TortureError("fixture: UploadAuth is not base64 JSON")
        }
        return auth.credentials
    }

    static func uploadAddress(_ object: [String: Any]) throws -> (bucket: String, key: String) {
        guard let data = Data(base64Encoded: try string(object, "UploadAddress")),
            let address = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let bucket = address["Bucket"] as? String, let key = address["FileName"] as? String
        else { throw TortureError("fixture: UploadAddress is not base64 JSON") }
        return (bucket, key)
    }

    static func make(_ server: FuzzedServer) async throws -> FuzzFixtures {
        let root = Torture.root
        let bucket = "fuzz"
        _ = try await s3(server, root, "PUT", "/" + bucket, "CreateBucket")
        _ = try await s3(server, root, "PUT", "/\(bucket)/obj", body: Array("fuzz object".utf8), "PutObject")
        let initiated = try await s3(
            server, root, "POST", "/\(bucket)/mpu", query: [("uploads", "")], "CreateMultipartUpload")
        let multipartId = try S3XML.decode(InitiateMultipartUploadResult.self, from: Data(initiated.body)).uploadId
        _ = try await s3(
            server, root, "PUT", "/\(bucket)/mpu", query: [("partNumber", "1"), ("uploadId", multipartId)],
            body: [UInt8](repeating: 7, count: 1000), "UploadPart")

        let scopedAnswer = try await media(
            server, root, "CreateAccessKey",
            #"{"Policy":{"statements":[{"actions":["s3:*"],"bucket":"fuzz"},{"actions":["media:*"]}]},"#
                + #""Description":"fuzz scoped"}"#
        )
        let scoped = SigV4Credentials(
            accessKeyId: try string(scopedAnswer, "AccessKey", "AccessKeyId"),
            secretAccessKey: try string(scopedAnswer, "AccessKey", "AccessKeySecret"))
        let publisherAnswer = try await media(
            server, root, "CreateAccessKey",
            #"{"Policy":{"statements":[{"actions":["media:ApplyUploadUGC","media:CommitUploadUGC"]}]},"#
                + #""Description":"fuzz app server"}"#
        )
        let publisher = SigV4Credentials(
            accessKeyId: try string(publisherAnswer, "AccessKey", "AccessKeyId"),
            secretAccessKey: try string(publisherAnswer, "AccessKey", "AccessKeySecret"))
        let role = try await media(
            server, root, "AssumeRole",
            #"{"DurationSeconds":43200,"Policy":{"statements":[{"actions":["s3:*","media:*"]}]}}"#)
        let sts = SigV4Credentials(
            accessKeyId: try string(role, "Credentials", "AccessKeyId"),
            secretAccessKey: try string(role, "Credentials", "AccessKeySecret"),
            sessionToken: try string(role, "Credentials", "SecurityToken"))

        // A video whose source is stored, written with its own upload credential.
        let stored = try await media(server, root, "CreateUploadVideo", #"{"Title":"stored","FileName":"stored.mp4"}"#)
        let storedAddress = try uploadAddress(stored)
        _ = try await s3(
            server, try uploadAuth(stored), "PUT", "/\(storedAddress.bucket)/\(storedAddress.key)",
            body: Array("not really a video".utf8), "PutObject of the stored video")
        // A video still being uploaded: its credential is the device upload credential of the fuzz.
        let pending = try await media(
            server, root, "CreateUploadVideo", #"{"Title":"pending","FileName":"pending.mp4"}"#)
        let pendingAddress = try uploadAddress(pending)
        let upload = try uploadAuth(pending)
        let uploadInitiated = try await s3(
            server, upload, "POST", "/\(pendingAddress.bucket)/\(pendingAddress.key)", query: [("uploads", "")],
            "CreateMultipartUpload with the upload credential")
        let uploadMultipartId = try S3XML.decode(InitiateMultipartUploadResult.self, from: Data(uploadInitiated.body))
            .uploadId
        // An image whose file is stored.
        let image = try await media(server, root, "CreateUploadImage", #"{"ImageType":"default","ImageExt":"png"}"#)
        let imageAddress = try uploadAddress(image)
        _ = try await s3(
            server, try uploadAuth(image), "PUT", "/\(imageAddress.bucket)/\(imageAddress.key)",
            body: [0x89, 0x50, 0x4E, 0x47], "PutObject of the image")

        // A publish signature from the app server's key; a video applied for and uploaded with it, not committed.
        let now = Int(Date().timeIntervalSince1970)
        let publishSignature = PublishSignature(
            secretId: publisher.accessKeyId, currentTimeStamp: now, expireTime: now + 86400
        )
        .sign(secretKey: publisher.secretAccessKey)
        var apply = FuzzRequest(method: "POST", path: "/_ferry/ugc/ApplyUploadUGC")
        apply.host = Array("127.0.0.1:\(server.port)".utf8)
        apply.headers = [("content-type", "application/json")]
        apply.body = Array(#"{"signature":"\#(publishSignature)","videoType":"mp4","videoName":"published"}"#.utf8)
        let applied = try json(try await call(server, apply, "ApplyUploadUGC"), "ApplyUploadUGC")
        let publishAuth = try uploadAuth(applied)
        _ = try await s3(
            server, publishAuth, "PUT", "/\(try string(applied, "StorageBucket"))/\(try string(applied, "VideoKey"))",
            body: Array("published bytes".utf8), "PutObject of the published video")

        let formToken = UploadToken.make(
            accessKey: root.accessKeyId, secretKey: root.secretAccessKey,
            policy: PutPolicy(scope: bucket, deadline: Date().addingTimeInterval(86400)))

        // The console session of the root key.
        var signIn = FuzzRequest(method: "POST", path: "/_ferry/console/session")
        signIn.host = Array("127.0.0.1:\(server.port)".utf8)
        signIn.headers = [("content-type", "application/json")]
        signIn.body = Array(
            #"{"AccessKeyId":"\#(root.accessKeyId)","SecretAccessKey":"\#(root.secretAccessKey)"}"#.utf8)
        let session = try await call(server, signIn, "console sign-in")
        guard let cookie = session.header("set-cookie")?.split(separator: ";").first.map(String.init),
            cookie.hasPrefix("ferry_console=")
        else { throw TortureError("fixture: the console sign-in set no cookie") }
        let csrf = try string(try json(session, "console sign-in"), "CSRFToken")

        // A multipart upload started through the Uppy endpoints.
        var uppy = FuzzRequest(method: "POST", path: "/s3/multipart")
        uppy.host = Array("127.0.0.1:\(server.port)".utf8)
        uppy.headers = [("content-type", "application/json"), ("cookie", cookie), ("x-ferry-csrf", csrf)]
        uppy.body = Array(#"{"filename":"uppy.mp4","type":"video/mp4","metadata":{"name":"uppy"}}"#.utf8)
        let uppyAnswer = try json(try await call(server, uppy, "Uppy create"), "Uppy create")

        guard let tokenKey = FileManager.default.contents(atPath: server.directory + "/data/token-key"),
            tokenKey.count == 32
        else { throw TortureError("fixture: no token key in the data directory") }
        let videoId = try string(stored, "VideoId")
        let fixtures = FuzzFixtures(
            root: root, scoped: scoped, publisher: publisher, sts: sts, upload: upload, multipartId: multipartId,
            mediaBucket: pendingAddress.bucket, uploadKey: pendingAddress.key, uploadMultipartId: uploadMultipartId,
            storedVideoId: videoId, pendingVideoId: try string(pending, "VideoId"),
            imageId: try string(image, "ImageId"),
            publishSignature: publishSignature, vodSessionKey: try string(applied, "VodSessionKey"),
            formToken: formToken,
            consoleCookie: cookie, csrf: csrf, uppyKey: try string(uppyAnswer, "key"),
            uppyUploadId: try string(uppyAnswer, "uploadId"),
            playbackToken: try await playbackToken(videoId: videoId, key: SymmetricKey(data: tokenKey)),
            pendingPlaybackToken: try await playbackToken(
                videoId: try string(pending, "VideoId"), key: SymmetricKey(data: tokenKey)))

        // The paths the known crashes take are reachable with a well-formed Host: each of these answers 200.
        _ = try await media(server, root, "GetMezzanineInfo", #"{"VideoId":"\#(fixtures.storedVideoId)"}"#)
        _ = try await media(server, root, "GetImageInfo", #"{"ImageId":"\#(fixtures.imageId)"}"#)
        var sign = FuzzRequest(method: "GET", path: "/s3/multipart/\(fixtures.uppyUploadId)/1")
        sign.host = Array("127.0.0.1:\(server.port)".utf8)
        sign.query = [("key", fixtures.uppyKey)]
        sign.headers = [("cookie", cookie)]
        _ = try await call(server, sign, "Uppy part signing")
        var play = FuzzRequest(method: "GET", path: "/_ferry/play/\(videoId)/master.m3u8")
        play.query = [("token", fixtures.playbackToken)]
        play.host = Array("127.0.0.1:\(server.port)".utf8)
        // A valid token for a video with nothing published: 404 NoSuchKey, not 403.
        _ = try await call(server, play, expect: 404, "playback with a valid token")
        return fixtures
    }

    /// A playback JWT (HS256, `kid` `ferry`) as the server mints for GetPlayInfo: signed with the key derived from
    /// the server's token key for "play" over "playback-jwt", `sub` the video, every audience (`v`, `t`, `s`, `d`:
    /// playback, pictures, the storyboard, downloads), a day long.
    static func playbackToken(videoId: String, key: SymmetricKey) async throws -> String {
        let derived = SymmetricKey(
            data: Data(HMAC<SHA256>.authenticationCode(for: Data("purpose:play".utf8), using: key)))
        let serverKey = SymmetricKey(
            data: Data(HMAC<SHA256>.authenticationCode(for: Data("playback-jwt".utf8), using: derived)))
        let keys = await JWTKeyCollection().add(hmac: HMACKey(key: serverKey), digestAlgorithm: .sha256, kid: "ferry")
        return try await keys.sign(
            FuzzPlaybackClaims(
                sub: .init(value: videoId), aud: .init(value: ["v", "t", "s", "d"]),
                exp: .init(value: Date().addingTimeInterval(86400))),
            kid: "ferry")
    }

    static func base64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The claims of a playback token.
struct FuzzPlaybackClaims: JWTPayload {
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
