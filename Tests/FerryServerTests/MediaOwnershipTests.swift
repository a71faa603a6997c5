import Ferry
import FerryCore
@testable import FerryMedia
@testable import FerryServer
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import Testing

/// Sends a signed media API request with `credentials` and returns the raw answer.
func mediaRequest(
    _ server: TestServer, _ action: String, _ body: [UInt8], credentials: SigV4Credentials? = nil
) async throws -> S3TestClient.Reply {
    let signer = SigV4Signer(credentials: credentials ?? server.root, region: "us-east-1", service: "ferry")
    let path = "/_ferry/v1/" + action
    let headers = signer.sign(
        method: "POST", path: path, query: [], headers: [("host", "127.0.0.1:\(server.port)"), ("content-type", "application/json")],
        payloadHash: SigV4.hexSHA256(body), date: Date()).headers
    return try await server.client().sendRaw("POST", path, headers: headers, body: body)
}

/// The HTTP status and server code of the error `body` throws; nils when it throws none.
func mediaErrorCode(_ body: () async throws -> Void) async -> (Int?, String?) {
    do { try await body(); return (nil, nil) } catch let error as FerryError { return (error.httpStatus, error.serverCode) } catch {
        return (nil, "\(error)")
    }
}

/// The `code` of a media API error answer.
func mediaCode(_ reply: S3TestClient.Reply) -> String? {
    (try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])?["code"] as? String
}

@Suite("Media API: integers, ownership, idempotent creation, unfinished uploads", .timeLimit(.minutes(10)))
struct MediaOwnershipTests {
    @Test("the media bucket's files are reached through the object API by the root key and by statements that name the bucket, not by a key scoped to every bucket: it can neither read, replace, delete nor list another owner's video files")
    func mediaBucketTakesNamedStatementsOnly() async throws {
        try await TestServer.with { server in
            let root = QuotaTests.rootMedia(server)
            let media = server.server.configuration.mediaBucket
            #expect(try await server.client().createBucket(media).status == 200)
            let file = "video/" + String(repeating: "a", count: 32) + "/source.mp4"
            #expect(try await server.client().put(media, file, Array("the owner's bytes".utf8)).status == 200)
            // A key with every object action on every bucket ("*").
            let everywhereKey = try await root.createAccessKey(policy: QuotaTests.everything)
            let everywhere = server.client(QuotaTests.sigV4(everywhereKey))
            #expect(try await everywhere.get(media, file).status == 403)
            // A name cut at a NUL is refused, not read as the media bucket past the checks made on the whole name
            // (SQLite reads text up to a NUL): in the path, as a copy source, in an upload token's scope.
            let cut = media + "\u{0}"
            let cutPut = try await everywhere.send("PUT", S3TestClient.path(cut, file), body: Array("other".utf8))
            #expect(cutPut.status == 400 && cutPut.text.contains("<Code>InvalidBucketName</Code>"), "\(cutPut.text)")
            #expect(try await everywhere.send("GET", S3TestClient.path(cut, file)).status == 400)
            #expect(try await everywhere.createBucket("own").status == 200)
            let cutCopy = try await everywhere.send(
                "PUT", S3TestClient.path("own", "copy"), headers: [("x-amz-copy-source", S3TestClient.path(cut, file))])
            #expect(cutCopy.status == 400 && cutCopy.text.contains("<Code>InvalidBucketName</Code>"), "\(cutCopy.text)")
            let cutForm = try await QuotaTests.formUpload(server, everywhereKey, bucket: cut, key: file)
            #expect(cutForm.status == 401 && cutForm.text.contains("no valid bucket"), "\(cutForm.status) \(cutForm.text)")
            #expect(try await server.client().get(media, file).body == Array("the owner's bytes".utf8))
            #expect(try await everywhere.put(media, file, Array("other bytes".utf8)).status == 403)
            #expect(try await everywhere.put(media, "video/x/master.m3u8", Array("#EXTM3U".utf8)).status == 403)
            #expect(try await everywhere.send("DELETE", S3TestClient.path(media, file)).status == 403)
            #expect(try await everywhere.send("GET", S3TestClient.path(media), query: [("list-type", "2")]).status == 403)
            // ListBuckets names its own buckets, not the media bucket (the root key sees it).
            #expect(try await everywhere.createBucket("listed").status == 200)
            let listing = try await everywhere.send("GET", "/").text
            #expect(listing.contains("<Name>listed</Name>") && !listing.contains("<Name>\(media)</Name>"), "\(listing)")
            #expect(try await server.client().send("GET", "/").text.contains("<Name>\(media)</Name>"))
            // Its own buckets are its to use.
            #expect(try await everywhere.put("own", "k", Array("mine".utf8)).status == 200)
            // A statement naming the media bucket reaches it, as an operator grants it.
            let named = AccessPolicy(statements: [.init(actions: ["s3:GetObject"], bucket: media)])
            let reader = server.client(QuotaTests.sigV4(try await root.createAccessKey(policy: named)))
            #expect(try await reader.get(media, file).body == Array("the owner's bytes".utf8))
            #expect(try await server.client().get(media, file).body == Array("the owner's bytes".utf8))
            // A lifecycle rule stored on the media bucket before it refused them is not applied; one on another
            // bucket is.
            let all = try LifecycleTests.document([.init(id: "all", prefix: "", expiration: .init(days: 1))])
            for bucket in [media, "own"] { try await server.server.store.setBucketConfiguration(bucket, .lifecycle, all) }
            let collector = UploadCollector(
                store: server.server.store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"),
                media: server.server.mediaLibrary)
            #expect(await collector.applyLifecycle(now: Date().addingTimeInterval(3 * 86_400)).expiredObjects == 1)
            #expect(try await server.client().get(media, file).status == 200)
            #expect(try await server.client().get("own", "k").status == 404)
        }
    }

    @Test("a NUL in a JSON body's string is InvalidParameter: an id cut at it never names another record")
    func nulInJSON() async throws {
        try await TestServer.with { server in
            let created = try await mediaRequest(
                server, "CreateUploadVideo", Array(#"{"Title":"t","FileName":"a.mp4"}"#.utf8))
            let answer = try JSONSerialization.jsonObject(with: Data(created.text.utf8)) as? [String: Any]
            let video = try #require(answer?["VideoId"] as? String, "\(created.text)")
            #expect(try await mediaRequest(server, "GetVideoInfo", Array(#"{"VideoId":"\#(video)"}"#.utf8)).status == 200)
            let cut = try await mediaRequest(server, "GetVideoInfo", Array(#"{"VideoId":"\#(video)\u0000x"}"#.utf8))
            #expect(cut.status == 400 && mediaCode(cut) == "InvalidParameter", "\(cut.status) \(cut.text)")
            #expect(cut.text.contains("NUL"), "\(cut.text)")
            // In UTF-16, which the decoder would take, as in UTF-8.
            let wide = Array(#"{"VideoId":"\#(video)\u0000x"}"#.data(using: .utf16LittleEndian) ?? Data())
            let cutWide = try await mediaRequest(server, "GetVideoInfo", wide)
            #expect(cutWide.status == 400 && mediaCode(cutWide) == "InvalidParameter", "\(cutWide.status) \(cutWide.text)")
            // An escaped backslash followed by the text u0000 is no NUL.
            let text = try await mediaRequest(server, "GetVideoInfo", Array(#"{"VideoId":"\#(video)\\u0000x"}"#.utf8))
            #expect(text.status != 200 && !text.text.contains("NUL"), "\(text.status) \(text.text)")
        }
    }

    @Test("actions that take no parameters read their body as the others do: one that is not JSON is MalformedJSON")
    func parameterlessActions() async throws {
        try await TestServer.with { server in
            for action in ["ListAccessKeys", "ListSigningKeys"] {
                let malformed = try await mediaRequest(server, action, Array("{not json".utf8))
                #expect(malformed.status == 400 && mediaCode(malformed) == "MalformedJSON", "\(action): \(malformed.text)")
                #expect(try await mediaRequest(server, action, Array("{}".utf8)).status == 200)
                #expect(try await mediaRequest(server, action, []).status == 200)
            }
        }
    }

    @Test("integers out of range and a status no video can be listed in answer 400 InvalidParameter and the server keeps serving")
    func integersOutOfRange() async throws {
        try await TestServer.with { server in
            let bodies: [(String, String)] = [
                ("ListVideos", #"{"PageNo":4611686018427387904}"#),
                ("ListVideos", #"{"PageNo":9223372036854775807,"PageSize":100}"#),
                ("ListVideos", #"{"PageNo":-9223372036854775808}"#),
                ("ListVideos", #"{"PageSize":4611686018427387904}"#),
                ("ListVideos", #"{"PageNo":0}"#),
                ("ListVideos", #"{"Status":"Bogus"}"#),
                ("ListVideos", #"{"Status":"Deleted"}"#),
                ("GetImageInfo", #"{"ImageId":"x","AuthTimeout":9223372036854775807}"#),
                ("GetPlayInfo", #"{"VideoId":"x","AuthTimeout":-1}"#),
                ("AssumeRole", #"{"DurationSeconds":9223372036854775807}"#),
                ("CreateUploadVideo", #"{"Title":"t","FileName":"a.mp4","FileSize":9223372036854775807}"#),
            ]
            for (action, body) in bodies {
                let reply = try await mediaRequest(server, action, Array(body.utf8))
                #expect(reply.status == 400 || reply.status == 404, "\(action) \(body): \(reply.status) \(reply.text)")
                #expect(reply.status != 400 || mediaCode(reply) == "InvalidParameter", "\(action) \(body): \(reply.text)")
            }
            // Larger than any 64-bit integer: the JSON number cannot be read as one.
            let huge = try await mediaRequest(server, "ListVideos", Array(#"{"PageNo":92233720368547758070}"#.utf8))
            #expect(huge.status == 400)
            // A page within range but beyond the last is empty, not an error.
            let far = try await mediaRequest(server, "ListVideos", Array(#"{"PageNo":1000000,"PageSize":100}"#.utf8))
            #expect(far.status == 200, "\(far.text)")
            #expect(try await mediaRequest(server, "ListVideos", Array("{}".utf8)).status == 200)
            // A policy too large for the session token to fit in a request's headers: refused, not issued.
            let statements = (0..<400).map { #"{"actions":["s3:GetObject"],"bucket":"b\#($0)","keyPrefix":"p/"}"# }
            let large = try await mediaRequest(
                server, "AssumeRole", Array(#"{"Policy":{"statements":[\#(statements.joined(separator: ","))]}}"#.utf8))
            #expect(large.status == 400 && mediaCode(large) == "PackedPolicyTooLarge", "\(large.text.prefix(300))")
            let small = try await mediaRequest(
                server, "AssumeRole",
                Array(#"{"Policy":{"statements":[\#(statements[0])]}}"#.utf8))
            #expect(small.status == 200, "\(small.text.prefix(300))")
        }
    }

    @Test("a key acts only on its own videos and images; the root key on all; stored videos take no more uploads")
    func ownership() async throws {
        try await TestServer.with { server in
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let admin = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            let policy = AccessPolicy(statements: [.init(actions: ["media:*"])])
            let alice = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: try await admin.createAccessKey(policy: policy))
            let bob = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: try await admin.createAccessKey(policy: policy))

            // A video deleted before its upload: its credential and its resumable upload URL store nothing more.
            let dropped = try await alice.createUploadVideo(.init(title: "Dropped", fileName: "d.mp4"))
            try await alice.deleteVideos([dropped.id])
            let late = try await server.client(dropped.auth.credentials).put(dropped.address.bucket, dropped.address.fileName, [1])
            #expect(late.status == 403 && late.errorCode == "AccessDenied")
            let tus = try await S3TestClient.fetchRaw(
                "POST", try #require(dropped.resumableUploadURL).absoluteString,
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "1")])
            #expect(tus.status == 403, "\(tus.text)")
            #expect(try await server.client().get(dropped.address.bucket, dropped.address.fileName).status == 404)

            let ticket = try await alice.createUploadVideo(.init(title: "Alice's", fileName: "a.mp4"))
            let bytes = [UInt8](repeating: 1, count: 1000)
            #expect(try await server.client(ticket.auth.credentials).put(ticket.address.bucket, ticket.address.fileName, bytes).status == 200)
            let image = try await alice.createUploadImage(type: "cover", ext: "jpg")

            // Bob can neither see, refresh, nor delete Alice's video, nor touch her image.
            #expect(await mediaErrorCode { _ = try await bob.getVideoInfo(videoId: ticket.id) } == (403, "Forbidden"))
            #expect(await mediaErrorCode { _ = try await bob.refreshUploadVideo(videoId: ticket.id) } == (403, "Forbidden"))
            #expect(await mediaErrorCode { try await bob.deleteVideos([ticket.id]) } == (403, "Forbidden"))
            #expect(await mediaErrorCode { _ = try await bob.getPlayInfo(videoId: ticket.id) } == (403, "Forbidden"))
            #expect(await mediaErrorCode { _ = try await bob.refreshUploadImage(imageId: image.id) } == (403, "Forbidden"))
            #expect(try await bob.listVideos().total == 0)
            // Alice sees her video; new credentials for the stored video are refused.
            #expect(try await alice.listVideos().total == 1)
            #expect(await mediaErrorCode { _ = try await alice.refreshUploadVideo(videoId: ticket.id) } == (409, "InvalidVideo.Uploaded"))
            #expect(try await alice.getVideoInfo(videoId: ticket.id).size == 1000)
            // Lifetimes out of range on things that exist: 400, not a crash or a 500.
            for (action, body) in [
                ("GetImageInfo", #"{"ImageId":"\#(image.id)","AuthTimeout":9223372036854775807}"#),
                ("GetImageInfo", #"{"ImageId":"\#(image.id)","AuthTimeout":0}"#),
                ("GetPlayInfo", #"{"VideoId":"\#(ticket.id)","AuthTimeout":-1}"#),
                ("GetPlayInfo", #"{"VideoId":"\#(ticket.id)","AuthTimeout":604801}"#),
                // Texts with a NUL (which the catalogs' text matching cannot take), lists with empty items.
                ("CreateUploadVideo", #"{"Title":"a\u0000b","FileName":"a.mp4"}"#),
                // A cover URL is http(s), as UpdateVideoInfo requires (consoles and players put it in <img>).
                ("CreateUploadVideo", #"{"Title":"t","FileName":"a.mp4","CoverURL":"javascript:alert(1)"}"#),
                ("CreateUploadVideo", #"{"Title":"t","FileName":"a.mp4","CoverURL":"data:text/html,x"}"#),
                ("ListVideos", #"{"Title":"\u0000x"}"#), ("ListVideos", #"{"Tag":"a\u0000"}"#),
                // A tag filter is one tag.
                ("ListVideos", #"{"Tag":"a,b"}"#), ("ListVideos", #"{"Tag":","}"#), ("ListVideos", #"{"Tag":"a,\u0301b"}"#),
                ("DeleteVideo", #"{"VideoIds":",,,"}"#), ("DeleteVideo", #"{"VideoIds":"\#(ticket.id), ,"}"#),
            ] {
                let reply = try await mediaRequest(server, action, Array(body.utf8))
                #expect(reply.status == 400 && mediaCode(reply) == "InvalidParameter", "\(action) \(body): \(reply.text)")
            }
            // An empty tag filters nothing, as an empty title does.
            for body in [#"{"Tag":""}"#, #"{"Title":""}"#, "{}"] {
                let reply = try await mediaRequest(server, "ListVideos", Array(body.utf8))
                let total = (try? JSONSerialization.jsonObject(with: Data(reply.text.utf8)) as? [String: Any])?["Total"] as? Int
                #expect(reply.status == 200 && total == 1, "\(body): \(reply.text)")
            }

            // The stored source is not replaced, whoever writes it, in any way (the probe and renditions describe it):
            // only the same bytes again, as a PUT retried after its answer was lost sends them, are accepted.
            let uploader = server.client(ticket.auth.credentials)
            let (bucket, key) = (ticket.address.bucket, ticket.address.fileName)
            #expect(try await uploader.put(bucket, key, bytes).status == 200)
            for writer in [uploader, server.client()] {
                let replaced = try await writer.put(bucket, key, [1, 2, 3])
                #expect(replaced.status == 403 && replaced.errorCode == "AccessDenied", "\(replaced.text)")
                #expect(replaced.text.contains("is stored already"))
                // A multipart upload may start (a client that lost its checkpoint sends its parts again), but completes
                // only as the same parts: these are other bytes.
                let uploadId = try await writer.createMultipartUpload(bucket, key)
                let part = try await writer.uploadPart(bucket, key, uploadId: uploadId, number: 1, [1, 2, 3])
                let completed = try await writer.complete(
                    bucket, key, uploadId: uploadId, xml: S3TestClient.completeXML([(1, part.header("ETag") ?? "")]))
                #expect(completed.status == 403 && completed.errorCode == "AccessDenied", "\(completed.text)")
            }
            let copied = try await server.client().send(
                "PUT", "/\(bucket)/\(key)", headers: [("x-amz-copy-source", "/\(bucket)/\(image.address.fileName)")])
            #expect(copied.status == 403 && copied.errorCode == "AccessDenied")
            // A tus upload completing there with other bytes is refused and ended.
            let tusVersion = [("Tus-Resumable", "1.0.0")]
            let tusAgain = try await S3TestClient.fetchRaw(
                "POST", try #require(ticket.resumableUploadURL).absoluteString, headers: tusVersion + [("Upload-Length", "3")])
            let tusLocation = try #require(tusAgain.header("Location"), "\(tusAgain.status) \(tusAgain.text)")
            let tusURL = tusLocation.hasPrefix("http") ? tusLocation : server.endpoint + tusLocation
            let tusAppend = try await S3TestClient.fetchRaw(
                "PATCH", tusURL,
                headers: tusVersion + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")], body: [1, 2, 3])
            #expect(tusAppend.status == 403, "\(tusAppend.text)")
            #expect(try await S3TestClient.fetchRaw("HEAD", tusURL, headers: tusVersion).status == 404)
            // The form upload too, with a token of the root key for that very key.
            let token = UploadToken.make(
                accessKey: server.root.accessKeyId, secretKey: server.root.secretAccessKey,
                policy: PutPolicy(scope: "\(bucket):\(key)", deadline: Date().addingTimeInterval(600)))
            let boundary = "ferry-\(UUID().uuidString)"
            var form = ""
            for (name, value) in [("token", token), ("key", key)] {
                form += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n"
            }
            form += "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.mp4\"\r\n\r\nabc\r\n--\(boundary)--\r\n"
            let formReply = try await S3TestClient.fetchRaw(
                "POST", server.endpoint + "/_ferry/form", headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")],
                body: Array(form.utf8))
            #expect(formReply.status == 403, "\(formReply.status) \(formReply.text)")
            #expect(try await server.client().get(bucket, key).body == bytes)
            #expect(try await alice.getVideoInfo(videoId: ticket.id).size == 1000)

            // The root key sees and deletes every video.
            let bobs = try await bob.createUploadVideo(.init(title: "Bob's", fileName: "b.mov"))
            #expect(try await admin.listVideos().total == 2)
            try await admin.deleteVideos([bobs.id])
            try await alice.deleteVideos([ticket.id])
            #expect(try await server.client().get(ticket.address.bucket, ticket.address.fileName).status == 404)
        }
    }

    /// Two different 128-byte blocks of the same MD5 (Wang and Yu's published collision).
    static let collision: (a: [UInt8], b: [UInt8]) = {
        let a = Hex.decode(
            "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f8955ad340609f4b30283e488832571415a"
                + "085125e8f7cdc99fd91dbdf280373c5bd8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0"
                + "e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70")!
        var b = a
        for (index, value) in [(19, 0x07), (45, 0xf1), (59, 0x72), (83, 0x34), (109, 0x28), (123, 0xab)] as [(Int, UInt8)] {
            b[index] = value
        }
        return (a, b)
    }()

    @Test("a stored file is not replaced by other bytes of the same MD5 (a collision), by PUT or multipart upload: the write stores nothing and answers as stored; the same bytes again keep its type and metadata too")
    func storedFileKeepsItsBytes() async throws {
        try await Self.withHeldEvents { server, root, admin in
            let (a, b) = Self.collision
            #expect(a != b && Checksum.digest(.md5, of: a) == Checksum.digest(.md5, of: b))
            let single = try await admin.createUploadVideo(.init(title: "Single", fileName: "s.mp4"))
            let uploader = server.client(single.auth.credentials)
            let (bucket, key) = (single.address.bucket, single.address.fileName)
            #expect(try await uploader.put(bucket, key, a, headers: [("Content-Type", "video/mp4")]).status == 200)
            let swapped = try await uploader.put(
                bucket, key, b, headers: [("Content-Type", "text/html"), ("x-amz-meta-evil", "1")])
            #expect(swapped.status == 200 && swapped.header("ETag") == "\"\(Hex.encode(Checksum.digest(.md5, of: a)))\"")
            let read = try await server.client().get(bucket, key)
            #expect(read.body == a)
            #expect(read.header("Content-Type") == "video/mp4" && read.header("x-amz-meta-evil") == nil)
            // A form upload of the same bytes is answered with the stored file's type, not the form's.
            var policy = PutPolicy(scope: "\(bucket):\(key)", deadline: Date().addingTimeInterval(600))
            policy.returnBody = #"{"mime":"$(mimeType)","hash":"$(etag)"}"#
            let token = UploadToken.make(accessKey: root.accessKeyId, secretKey: root.secretAccessKey, policy: policy)
            let boundary = "ferry-\(UUID().uuidString)"
            var form = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n\(token)\r\n".utf8)
            form += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n\(key)\r\n".utf8)
            form += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.html\"\r\n".utf8)
            form += Array("Content-Type: text/html\r\n\r\n".utf8) + a + Array("\r\n--\(boundary)--\r\n".utf8)
            let formed = try await S3TestClient.fetchRaw(
                "POST", server.endpoint + "/_ferry/form",
                headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")], body: form)
            let expected = #"{"mime":"video/mp4","hash":""# + Hex.encode(Checksum.digest(.md5, of: a)) + #""}"#
            #expect(formed.status == 200 && formed.text == expected, "\(formed.status) \(formed.text)")
            #expect(try await server.client().get(bucket, key).header("Content-Type") == "video/mp4")

            // Stored by a multipart upload: another one of the colliding part completes as the stored file.
            let parts = try await admin.createUploadVideo(.init(title: "Parts", fileName: "p.mp4"))
            let partsClient = server.client(parts.auth.credentials)
            func multipart(_ bytes: [UInt8]) async throws -> S3TestClient.Reply {
                let (bucket, key) = (parts.address.bucket, parts.address.fileName)
                let uploadId = try await partsClient.createMultipartUpload(bucket, key)
                let part = try await partsClient.uploadPart(bucket, key, uploadId: uploadId, number: 1, bytes)
                return try await partsClient.complete(
                    bucket, key, uploadId: uploadId, xml: S3TestClient.completeXML([(1, part.header("ETag") ?? "")]))
            }
            #expect(try await multipart(a).status == 200)
            let again = try await multipart(b)
            #expect(again.status == 200, "\(again.text)")
            #expect(try await server.client().get(parts.address.bucket, parts.address.fileName).body == a)
            #expect(try await admin.getVideoInfo(videoId: parts.id).size == 128)
        }
    }

    /// Runs `body` with a server whose events wait in the outbox (the receiver named does not exist, and the first
    /// retry is 10 minutes away), with the root key's credentials and a media client of it.
    static func withHeldEvents(
        _ body: @Sendable (TestServer, Credentials, MediaServiceClient) async throws -> Void
    ) async throws {
        var webhook = WebhookConfiguration(url: URL(string: "http://127.0.0.1:9/none")!, secret: "s")
        webhook.initialBackoff = .seconds(600)
        try await TestServer.with(configure: { $0.webhook = webhook }) { server in
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            try await body(server, root, MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root))
        }
    }

    /// A client of another access key allowed every media action.
    static func otherKey(_ server: TestServer, _ admin: MediaServiceClient) async throws -> MediaServiceClient {
        MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: try await admin.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])])))
    }

    @Test("a file URL GetImageInfo signs (as GetPlayInfo's original and GetMezzanineInfo's) is signed under the caller's key, not the root key: it reads the file until that key is disabled")
    func signedFileURLsEndWithTheirKey() async throws {
        try await Self.withHeldEvents { server, root, admin in
            let key = try await admin.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
            let other = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: key)
            let ticket = try await other.createUploadImage(ext: "png")
            #expect(try await server.client(ticket.auth.credentials).put(ticket.address.bucket, ticket.address.fileName, [1, 2, 3]).status == 200)
            let url = try await other.getImageInfo(imageId: ticket.id).url
            #expect(!url.contains(root.accessKeyId), "\(url)")
            #expect(try await S3TestClient.fetch(url).body == [1, 2, 3])
            try await admin.disableAccessKey(key.accessKeyId)
            #expect(try await S3TestClient.fetch(url).status == 403)
            // The root key's own URLs go on.
            #expect(try await S3TestClient.fetch(try await admin.getImageInfo(imageId: ticket.id).url).body == [1, 2, 3])
        }
    }

    @Test("a video's CoverURL that names an image stored here of the video's owner (a short-video upload's cover) is answered as a presigned URL of the image, which reads it, to a caller that may read images; one naming another owner's image or a deleted one, any other URL, and to a caller without media:GetImageInfo, as it was given")
    func coverImageURLIsSigned() async throws {
        try await Self.withHeldEvents { server, _, admin in
            func client() async throws -> MediaServiceClient {
                let key = try await admin.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
                return MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: key)
            }
            let (owner, other) = (try await client(), try await client())
            let image = try await owner.createUploadImage(type: "cover", ext: "png")
            #expect(try await server.client(image.auth.credentials).put(image.address.bucket, image.address.fileName, [7, 8, 9]).status == 200)
            let imageURL = try #require(image.imageURL)
            #expect(try await S3TestClient.fetch(imageURL).status == 403)
            func video(_ client: MediaServiceClient, cover: String) async throws -> String? {
                var description = MediaServiceClient.VideoDescription(title: "Clip", fileName: "clip.mp4")
                description.coverURL = cover
                let ticket = try await client.createUploadVideo(description)
                return try await client.getVideoInfo(videoId: ticket.id).coverURL
            }
            let signed = try #require(try await video(owner, cover: imageURL))
            #expect(signed != imageURL)
            #expect(try await S3TestClient.fetch(signed).body == [7, 8, 9])
            #expect(try await video(other, cover: imageURL) == imageURL)
            #expect(try await video(owner, cover: "https://cdn.example/covers/a.png") == "https://cdn.example/covers/a.png")
            // A session of the owner that may not read images gets the URL as given.
            let narrow = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: try await owner.assumeRole(
                    policy: AccessPolicy(statements: [.init(actions: ["media:CreateUploadVideo", "media:GetVideoInfo"])])))
            #expect(try await video(narrow, cover: imageURL) == imageURL)
            // A deleted image is not signed.
            try await owner.deleteImages([image.id])
            #expect(try await video(owner, cover: imageURL) == imageURL)
        }
    }

    @Test("CreateUploadImage with a ClientToken is idempotent per key and image type while the image uploads; once stored, the token makes a new image")
    func imageClientToken() async throws {
        try await Self.withHeldEvents { server, root, admin in
            let other = try await Self.otherKey(server, admin)
            // CreateUploadImage with a ClientToken: the same image (and file) while it uploads, per key and type.
            let firstImage = try await admin.createUploadImage(ext: "png", clientToken: "file-7f3a")
            let sameImage = try await admin.createUploadImage(ext: "png", clientToken: "file-7f3a")
            #expect(sameImage.id == firstImage.id)
            #expect(sameImage.imageURL == firstImage.imageURL)
            #expect(sameImage.address.fileName == firstImage.address.fileName)
            #expect(try await other.createUploadImage(ext: "png", clientToken: "file-7f3a").id != firstImage.id)
            #expect(try await admin.createUploadImage(type: "cover", ext: "png", clientToken: "file-7f3a").id != firstImage.id)
            #expect(try await server.client(firstImage.auth.credentials).put(firstImage.address.bucket, firstImage.address.fileName, [1]).status == 200)
            #expect(try await admin.createUploadImage(ext: "png", clientToken: "file-7f3a").id != firstImage.id)
        }
    }

    @Test("CreateUploadVideo with a ClientToken is idempotent per key; a video or image never uploaded expires to UploadFail and takes no more uploads")
    func clientTokenAndExpiry() async throws {
        try await Self.withHeldEvents { server, root, admin in
            let other = try await Self.otherKey(server, admin)
            var description = MediaServiceClient.VideoDescription(title: "Clip", fileName: "clip.mp4")
            description.clientToken = "file-7f3a"
            let first = try await admin.createUploadVideo(description)
            let again = try await admin.createUploadVideo(description)
            #expect(again.id == first.id)
            #expect(again.address.fileName == first.address.fileName)
            // Retried with another title and cover (a cancelled upload tried again): the same video, described anew.
            var retried = description
            (retried.title, retried.coverURL, retried.tags) = ("Clip, again", "https://example.com/cover-2.png", "b")
            #expect(try await admin.createUploadVideo(retried).id == first.id)
            let info = try await admin.getVideoInfo(videoId: first.id)
            #expect(info.title == "Clip, again" && info.coverURL == "https://example.com/cover-2.png" && info.tags == "b")
            // The same token from another key is another video.
            #expect(try await other.createUploadVideo(description).id != first.id)
            #expect(try await admin.listVideos().total == 2)
            for token in ["has space", "\\u0000", "\\u0001abc", "\\u007f", String(repeating: "a", count: 65)] {
                let bad = try await mediaRequest(
                    server, "CreateUploadVideo", Array(#"{"Title":"t","FileName":"a.mp4","ClientToken":"\#(token)"}"#.utf8))
                #expect(mediaCode(bad) == "InvalidParameter", "\(token)")
                let badImage = try await mediaRequest(
                    server, "CreateUploadImage", Array(#"{"ImageType":"default","ClientToken":"\#(token)"}"#.utf8))
                #expect(mediaCode(badImage) == "InvalidParameter", "\(token)")
            }

            // Part of the file arrives as a multipart upload that never completes.
            let s3 = server.client(first.auth.credentials)
            let uploadId = try await s3.createMultipartUpload(first.address.bucket, first.address.fileName)
            #expect(try await s3.uploadPart(first.address.bucket, first.address.fileName, uploadId: uploadId, number: 1, [1, 2]).status == 200)
            // An image that gets part of its file the same way, another that gets none, and one that is stored.
            let image = try await admin.createUploadImage(ext: "png")
            let imageS3 = server.client(image.auth.credentials)
            let imageUpload = try await imageS3.createMultipartUpload(image.address.bucket, image.address.fileName)
            #expect(try await imageS3.uploadPart(image.address.bucket, image.address.fileName, uploadId: imageUpload, number: 1, [3]).status == 200)
            let unsent = try await admin.createUploadImage(ext: "jpg")
            let stored = try await admin.createUploadImage(ext: "gif")
            #expect(try await server.client(stored.auth.credentials).put(stored.address.bucket, stored.address.fileName, [4, 5]).status == 200)
            // Not yet too old: nothing happens.
            #expect(try await server.server.mediaLibrary.expireUnfinishedUploads() == 0)
            let later = Date().addingTimeInterval(server.server.configuration.uploadingVideoMaxAge + 60)
            let before = try await ImageDeletionTests.uploadsEnded(server)
            // Pages of one: the walk goes through every video and image still uploading.
            #expect(try await server.server.mediaLibrary.expireUnfinishedUploads(now: later, pageSize: 1) == 4)
            // The uploads of their files are counted as expired (for their age), not as aborted by their client.
            let after = try await ImageDeletionTests.uploadsEnded(server)
            #expect(after.expired - before.expired == 2 && after.aborted == before.aborted, "\(before) \(after)")
            #expect(try await admin.getVideoInfo(videoId: first.id).status == "UploadFail")
            for (id, status) in [(image.id, "UploadFail"), (unsent.id, "UploadFail"), (stored.id, "Uploaded")] {
                #expect(try await server.server.mediaCatalog.image(id)?.status == status)
            }
            // Neither takes more uploads: no new credentials, and the credentials issued before write nothing.
            #expect(await mediaErrorCode { _ = try await admin.refreshUploadVideo(videoId: first.id) } == (409, "InvalidVideo.UploadExpired"))
            #expect(await mediaErrorCode { _ = try await admin.refreshUploadImage(imageId: image.id) } == (409, "InvalidImage.UploadExpired"))
            #expect(await mediaErrorCode { _ = try await admin.refreshUploadImage(imageId: stored.id) } == (409, "InvalidImage.Uploaded"))
            #expect(try await imageS3.put(image.address.bucket, image.address.fileName, [6]).status == 403)
            #expect(try await s3.put(first.address.bucket, first.address.fileName, [6]).status == 403)
            #expect(try await server.client().get(image.address.bucket, image.address.fileName).status == 404)
            #expect(try await server.server.mediaLibrary.expireUnfinishedUploads(now: later) == 0)
            let uploads = try await server.server.store.listMultipartUploads(
                bucket: first.address.bucket, prefix: "", delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 1000)
            #expect(uploads.uploads.isEmpty)
            // The token now names no uploading video: asking again creates a new one.
            #expect(try await admin.createUploadVideo(description).id != first.id)
            let events = try await server.server.webhooks.pending().map(\.type)
            #expect(events.filter { $0 == .videoUploadExpired }.count == 2)
            #expect(events.filter { $0 == .imageUploadExpired }.count == 2)
            #expect(events.filter { $0 == .imageUploadComplete }.count == 1)
        }
    }

    @Test("a video whose source is stored but was never advanced (the server stopped in between) advances when the collector walks the uploading videos")
    func storedSourceNeverAdvanced() async throws {
        try await Self.withHeldEvents { server, root, admin in
            // The source is stored without the library hearing of it, as when the process dies between the two.
            func storeUnheard(_ ticket: MediaServiceClient.UploadTicket) async throws {
                _ = try await server.server.store.putObject(
                    bucket: ticket.address.bucket, key: ticket.address.fileName, attributes: ObjectAttributes(),
                    tags: [],
                    body: AsyncStream<ByteBuffer> { continuation in
                        continuation.yield(ByteBuffer(string: "source bytes"))
                        continuation.finish()
                    },
                    checksums: [], condition: .none, verify: { _ in })
            }
            let stranded = try await admin.createUploadVideo(.init(title: "Stranded", fileName: "s.mp4"))
            let waiting = try await admin.createUploadVideo(.init(title: "Not yet sent", fileName: "w.mp4"))
            let strandedToo = try await admin.createUploadVideo(.init(title: "Stranded too", fileName: "s2.mp4"))
            let image = try await admin.createUploadImage(ext: "png")
            try await storeUnheard(stranded)
            try await storeUnheard(strandedToo)
            try await storeUnheard(image)
            let library = server.server.mediaLibrary
            // Within the grace an upload may still be being recorded: nothing is looked at.
            #expect(try await library.advanceStoredUploads() == 0)
            #expect(try await admin.getVideoInfo(videoId: stranded.id).status == "Uploading")

            let later = Date().addingTimeInterval(MediaLibrary.storedUploadGrace + 60)
            // Pages of one: the walk goes through the three videos and the image; the stored ones advance.
            #expect(try await library.advanceStoredUploads(now: later, pageSize: 1) == 3)
            let imageRecord = try await server.server.mediaCatalog.image(image.id)
            #expect(imageRecord?.status == ImageStatus.uploaded && imageRecord?.size == 12)
            #expect(try await admin.getVideoInfo(videoId: strandedToo.id).status == "UploadSucc")
            let video = try await admin.getVideoInfo(videoId: stranded.id)
            #expect(video.status == "UploadSucc" && video.size == 12)
            #expect(try await admin.getVideoInfo(videoId: waiting.id).status == "Uploading")
            // Once: a second walk finds nothing more to do, and one FileUploadComplete was sent.
            #expect(try await library.advanceStoredUploads(now: later) == 0)
            let events = try await server.server.webhooks.pending().map(\.type)
            #expect(events.filter { $0 == .fileUploadComplete }.count == 2)
            #expect(events.filter { $0 == .imageUploadComplete }.count == 1)
            let jobs = try await server.server.mediaCatalog.jobs(videoId: stranded.id)
            #expect(jobs.map(\.kind) == [.probe])

            // The collector's pass walks them too.
            let another = try await admin.createUploadVideo(.init(title: "Stranded later", fileName: "t.mp4"))
            try await storeUnheard(another)
            let collector = UploadCollector(
                store: server.server.store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"),
                media: library)
            _ = await collector.collectOnce(now: later)
            #expect(try await admin.getVideoInfo(videoId: another.id).status == "UploadSucc")
        }
    }

    @Test("a video or image whose file was stored but never advanced (the server stopped in between) advances when its client retries: RefreshUploadVideo/Image answer 409 Uploaded, a repeated Complete and a HEAD of the completed tus upload advance it")
    func storedFileAdvancesOnRetry() async throws {
        try await Self.withHeldEvents { server, root, admin in
            let store = server.server.store
            func bytes(_ text: String) -> AsyncStream<ByteBuffer> {
                AsyncStream { continuation in
                    continuation.yield(ByteBuffer(string: text))
                    continuation.finish()
                }
            }

            // A single PUT stored unheard: the client's RefreshUploadVideo (and RefreshUploadImage) is told it is
            // stored, and the record advances once.
            let video = try await admin.createUploadVideo(.init(title: "Put", fileName: "p.mp4"))
            let image = try await admin.createUploadImage(ext: "png")
            for ticket in [video, image] {
                _ = try await store.putObject(
                    bucket: ticket.address.bucket, key: ticket.address.fileName, attributes: ObjectAttributes(), tags: [],
                    body: bytes("source bytes"), checksums: [], condition: .none, verify: { _ in })
            }
            #expect(await mediaErrorCode { _ = try await admin.refreshUploadVideo(videoId: video.id) } == (409, "InvalidVideo.Uploaded"))
            #expect(await mediaErrorCode { _ = try await admin.refreshUploadImage(imageId: image.id) } == (409, "InvalidImage.Uploaded"))
            let put = try await admin.getVideoInfo(videoId: video.id)
            #expect(put.status == "UploadSucc" && put.size == 12)
            #expect(try await server.server.mediaCatalog.image(image.id)?.status == ImageStatus.uploaded)
            // A video still waiting for its source gets fresh credentials as before.
            let waiting = try await admin.createUploadVideo(.init(title: "Waiting", fileName: "w.mp4"))
            #expect(try await admin.refreshUploadVideo(videoId: waiting.id).id == waiting.id)

            // A multipart completion stored unheard: the client's repeated Complete is answered and advances it.
            let s3 = server.client()
            let multipart = try await admin.createUploadVideo(.init(title: "Multipart", fileName: "m.mp4"))
            let (bucket, key) = (multipart.address.bucket, multipart.address.fileName)
            let uploadId = try await s3.createMultipartUpload(bucket, key)
            let part = try await s3.uploadPart(bucket, key, uploadId: uploadId, number: 1, Array("part one".utf8))
            let etag = try #require(part.header("ETag"))
            _ = try await store.completeMultipartUpload(
                try await store.multipartUpload(uploadId, bucket: bucket, key: key),
                parts: [.init(partNumber: 1, eTag: etag)], fullObjectChecksums: [:], condition: .none)
            #expect(try await admin.getVideoInfo(videoId: multipart.id).status == "Uploading")
            let repeated = try await s3.complete(bucket, key, uploadId: uploadId, xml: S3TestClient.completeXML([(1, etag)]))
            #expect(repeated.status == 200, "\(repeated.text)")
            #expect(try await admin.getVideoInfo(videoId: multipart.id).status == "UploadSucc")

            // A tus upload completed unheard: its client's HEAD finds it complete and the video advances.
            let resumable = try await admin.createUploadVideo(.init(title: "Tus", fileName: "t.mp4"))
            let tus = [("Tus-Resumable", "1.0.0")]
            let created = try await S3TestClient.fetchRaw(
                "POST", try #require(resumable.resumableUploadURL).absoluteString, headers: tus + [("Upload-Length", "3")])
            let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
            let id = try #require(location.split(separator: "/").last.map(String.init))
            let upload = try #require(try await store.resumableUpload(id))
            guard case .appended(let appended) = try await store.appendResumable(
                upload, at: 0, body: bytes("abc"), checksums: [], byteLimit: nil, verify: { _ in })
            else { throw ResumableConcatenationTests.NotAppended() }
            #expect(try await store.completeResumable(appended) != nil)
            #expect(try await admin.getVideoInfo(videoId: resumable.id).status == "Uploading")
            let head = try await S3TestClient.fetchRaw(
                "HEAD", location.hasPrefix("http") ? location : server.endpoint + location, headers: tus)
            #expect(head.status == 200 && head.header("Upload-Offset") == "3", "\(head.status)")
            let advanced = try await admin.getVideoInfo(videoId: resumable.id)
            #expect(advanced.status == "UploadSucc" && advanced.size == 3)
            // Asked again once it has advanced, the upload's HEAD changes nothing in the record.
            let recorded = try #require(try await server.server.mediaCatalog.video(resumable.id))
            _ = try await S3TestClient.fetchRaw(
                "HEAD", location.hasPrefix("http") ? location : server.endpoint + location, headers: tus)
            #expect(try await server.server.mediaCatalog.video(resumable.id) == recorded)

            // Each advanced once, with one FileUploadComplete and one probe job.
            let events = try await server.server.webhooks.pending().map(\.type)
            #expect(events.filter { $0 == .fileUploadComplete }.count == 3)
            #expect(events.filter { $0 == .imageUploadComplete }.count == 1)
            for id in [video.id, multipart.id, resumable.id] {
                #expect(try await server.server.mediaCatalog.jobs(videoId: id).map(\.kind) == [.probe])
            }
        }
    }

    @Test("deletions of one video racing each other all answer it as deleted, and delete the other videos they name")
    func racingDeletions() async throws {
        try await TestServer.with { server in
            let admin = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            for _ in 0..<30 {
                let shared = try await admin.createUploadVideo(.init(title: "Shared", fileName: "s.mp4")).id
                let other = try await admin.createUploadVideo(.init(title: "Other", fileName: "o.mp4")).id
                async let first = mediaRequest(server, "DeleteVideo", Array(#"{"VideoIds":"\#(shared)"}"#.utf8))
                async let second = mediaRequest(server, "DeleteVideo", Array(#"{"VideoIds":"\#(other),\#(shared)"}"#.utf8))
                let (a, b) = try await (first, second)
                #expect(a.status == 200 && b.status == 200, "\(a.text) \(b.text)")
                for id in [shared, other] {
                    #expect(try await server.server.mediaCatalog.video(id)?.status == VideoStatus.deleted)
                }
            }
        }
    }

    @Test("a video's file is made by the first write to finish: a write of other bytes finishing after it, by any path, is refused (403) while the video is still uploading; the same bytes are taken")
    func firstWriteMakesTheFile() async throws {
        try await TestServer.with { server in
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let admin = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            let ticket = try await admin.createUploadVideo(.init(title: "Raced", fileName: "r.mp4"))
            let (bucket, key) = (ticket.address.bucket, ticket.address.fileName)
            let s3 = server.client(ticket.auth.credentials)
            // One writer's file is in storage and the video not yet advanced: each other writer checked the video
            // before that file was made, and finishes now.
            let first = Array("first writer".utf8)
            _ = try await server.server.store.putObject(
                bucket: bucket, key: key, attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(bytes: first))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })

            let put = try await s3.put(bucket, key, [1, 2, 3])
            #expect(put.status == 403 && put.errorCode == "AccessDenied", "\(put.text)")
            #expect(put.text.contains("Video \(ticket.id) is stored already"))
            let uploadId = try await s3.createMultipartUpload(bucket, key)
            let part = try await s3.uploadPart(bucket, key, uploadId: uploadId, number: 1, [1, 2, 3])
            let completed = try await s3.complete(
                bucket, key, uploadId: uploadId, xml: S3TestClient.completeXML([(1, part.header("ETag") ?? "")]))
            #expect(completed.status == 403 && completed.errorCode == "AccessDenied", "\(completed.text)")
            #expect(try await server.client().put(bucket, "other", [4, 5, 6]).status == 200)
            let copied = try await server.client().send(
                "PUT", "/\(bucket)/\(key)", headers: [("x-amz-copy-source", "/\(bucket)/other")])
            #expect(copied.status == 403 && copied.errorCode == "AccessDenied", "\(copied.text)")
            let form = try await QuotaTests.formUpload(server, root, bucket: bucket, key: key)
            #expect(form.status == 403, "\(form.status) \(form.text)")
            let tus = [("Tus-Resumable", "1.0.0")]
            let created = try await S3TestClient.fetchRaw(
                "POST", try #require(ticket.resumableUploadURL).absoluteString, headers: tus + [("Upload-Length", "3")])
            let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
            let appended = try await S3TestClient.fetchRaw(
                "PATCH", location.hasPrefix("http") ? location : server.endpoint + location,
                headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")], body: [1, 2, 3])
            #expect(appended.status == 403, "\(appended.text)")
            #expect(try await server.client().get(bucket, key).body == first)
            #expect(try await admin.getVideoInfo(videoId: ticket.id).status == "Uploading")

            // The same bytes are the file: taken, and the video advances.
            #expect(try await s3.put(bucket, key, first).status == 200)
            #expect(try await admin.getVideoInfo(videoId: ticket.id).status == "UploadSucc")
        }
    }
}
