import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

extension TestServer {
    /// A media client signing with `credentials` (default: the root key).
    func media(_ credentials: Credentials? = nil) -> MediaServiceClient {
        MediaServiceClient(
            endpoint: URL(string: endpoint)!,
            credentials: credentials ?? Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
    }
}

@Suite("Media service", .timeLimit(.minutes(10)))
struct MediaServiceTests {
    static let mib = 1024 * 1024

    @Test("CreateUploadVideo → engine upload with the UploadAuth → Uploaded with its size → the play URL serves the bytes, ranges too")
    func uploadAndPlay() async throws {
        let directory = TemporaryDirectory.make("ferry-media")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib, in: directory)
        try await TestServer.with { server in
            let media = server.media()
            var description = MediaServiceClient.VideoDescription(title: "Holiday", fileName: "holiday.mp4")
            description.tags = "beach,summer"
            let ticket = try await media.createUploadVideo(description)
            #expect(ticket.address.bucket == "ferry-media")
            #expect(ticket.address.fileName.hasSuffix(".mp4"))
            #expect(ticket.auth.securityToken.isEmpty == false)
            #expect(try await media.getVideoInfo(videoId: ticket.id).status == "Uploading")

            let upload = try await ticket.objectStorageClient().upload(
                file: file, bucket: ticket.address.bucket, key: ticket.address.fileName)
            _ = try await upload.result
            let info = try await media.getVideoInfo(videoId: ticket.id)
            #expect(info.status == "UploadSucc")
            #expect(info.size == Int64(12 * Self.mib))
            #expect(info.title == "Holiday")

            let source = try await media.getMezzanineInfo(videoId: ticket.id)
            #expect(source.size == Int64(12 * Self.mib))
            let play = (url: source.fileURL, size: source.size)
            let whole = try await S3TestClient.fetch(play.url)
            #expect(whole.status == 200)
            #expect(Data(whole.body) == (try Data(contentsOf: file)))
            let range = try await S3TestClient.fetch(play.url, headers: [("Range", "bytes=1000-1999")])
            #expect(range.status == 206)
            #expect(Data(range.body) == (try Data(contentsOf: file))[1000..<2000])

            let listed = try await media.listVideos(status: "UploadSucc")
            #expect(listed.total == 1)
            #expect(listed.videos.map(\.videoId) == [ticket.id])
            try await media.deleteVideos([ticket.id])
            await #expect(throws: FerryError.self) { try await media.getVideoInfo(videoId: ticket.id) }
            #expect(try await S3TestClient.fetch(play.url).status == 404)
        }
    }

    @Test("an upload credential writes only its own key, reads nothing else, calls no media operation, and expires; RefreshUploadVideo continues the same multipart upload")
    func uploadCredentialScope() async throws {
        // The server's clock is moved past the credential's expiry instead of waiting for it; requests are signed
        // with the real time, which stays within the allowed skew of the moved clock.
        let time = ManualTime()
        let configure: @Sendable (inout FerryServerConfiguration) -> Void = {
            $0.uploadAuthLifetime = 60
            $0.now = time.now
        }
        try await TestServer.with(minPartSize: 1024, configure: configure) { server in
            let media = server.media()
            let other = try await media.createUploadVideo(.init(title: "Other", fileName: "other.mov"))
            let ticket = try await media.createUploadVideo(.init(title: "Mine", fileName: "mine.mp4"))
            let bucket = ticket.address.bucket
            let key = ticket.address.fileName
            try await server.client().put(bucket, "private/notes.txt", Array("secret".utf8))
            let s3 = server.client(ticket.auth.credentials)

            #expect(try await s3.put(bucket, other.address.fileName, [1]).errorCode == "AccessDenied")
            #expect(try await s3.put(bucket, key + ".extra", [1]).errorCode == "AccessDenied")
            #expect(try await s3.get(bucket, "private/notes.txt").errorCode == "AccessDenied")
            #expect(try await s3.send("GET", "/" + bucket, query: [("list-type", "2")]).errorCode == "AccessDenied")
            do {
                _ = try await server.media(ticket.auth.ferryCredentials).createUploadVideo(.init(title: "x", fileName: "x.mp4"))
                Issue.record("an upload credential created a video")
            } catch let error as FerryError {
                #expect(error.httpStatus == 403)
            }

            let id = try await s3.createMultipartUpload(bucket, key)
            let part1 = [UInt8](repeating: 1, count: 2048)
            let etag1 = try #require(try await s3.uploadPart(bucket, key, uploadId: id, number: 1, part1).header("ETag"))
            // The credential expires by the server's clock: still valid a second before, refused a second after.
            let expiry = try #require(ticket.auth.expirationDate)
            time.advance(by: expiry.timeIntervalSince(time.now()) - 1)
            let last = try #require(try await s3.uploadPart(bucket, key, uploadId: id, number: 1, part1).header("ETag"))
            #expect(last == etag1)
            time.advance(by: 2)
            let late = try await s3.uploadPart(bucket, key, uploadId: id, number: 2, [2, 2, 2])
            #expect(late.errorCode == "ExpiredToken")

            let refreshed = try await media.refreshUploadVideo(videoId: ticket.id)
            #expect(refreshed.address == ticket.address)
            let fresh = server.client(refreshed.auth.credentials)
            let etag2 = try #require(try await fresh.uploadPart(bucket, key, uploadId: id, number: 2, [2, 2, 2]).header("ETag"))
            let done = try await fresh.complete(bucket, key, uploadId: id, xml: S3TestClient.completeXML([(1, etag1), (2, etag2)]))
            #expect(done.status == 200)
            let info = try await media.getVideoInfo(videoId: ticket.id)
            #expect(info.status == "UploadSucc")
            #expect(info.size == 2051)
        }
    }

    @Test("bad input gets a 4xx with a code and message, and creates nothing")
    func badInput() async throws {
        try await TestServer.with { server in
            let media = server.media()
            func expectError(_ code: String, status: Int, _ action: String, _ parameters: [String: Any]) async {
                guard let body = try? JSONSerialization.data(withJSONObject: parameters) else {
                    Issue.record("\(action): the parameters are not JSON")
                    return
                }
                do {
                    _ = try await media.callJSON(action, body: body)
                    Issue.record("\(action) succeeded")
                } catch {
                    #expect(error.serverCode == code, "\(action): \(error)")
                    #expect(error.httpStatus == status)
                    #expect(!error.message.isEmpty)
                }
            }
            await expectError("InvalidVideo.NotFound", status: 404, "GetVideoInfo", ["VideoId": "0000"])
            await expectError("InvalidFileName.Extension", status: 400, "CreateUploadVideo", ["Title": "t", "FileName": "noextension"])
            // The extension ends the object key: ASCII letters and digits only (as ApplyUploadUGC's videoType).
            for name in ["a.мп4", "a.Ⅻ", "a.m-4", "a.123456789"] {
                await expectError("InvalidFileName.Extension", status: 400, "CreateUploadVideo", ["Title": "t", "FileName": name])
            }
            await expectError("InvalidParameter", status: 400, "CreateUploadVideo", ["Title": String(repeating: "t", count: 1000), "FileName": "a.mp4"])
            await expectError("RequestTooLarge", status: 413, "CreateUploadVideo", ["Title": String(repeating: "t", count: 1 << 20), "FileName": "a.mp4"])
            await expectError("MissingParameter", status: 400, "CreateUploadVideo", ["FileName": "a.mp4"])
            await expectError("MissingParameter", status: 400, "CreateUploadVideo", ["Title": "t"])
            // ImageType is required (ImageExt defaults to png); another type or extension is refused.
            await expectError("MissingParameter", status: 400, "CreateUploadImage", [:])
            await expectError("MissingParameter", status: 400, "CreateUploadImage", ["ImageExt": "png"])
            await expectError("InvalidParameter", status: 400, "CreateUploadImage", ["ImageType": "banner"])
            await expectError("InvalidParameter", status: 400, "CreateUploadImage", ["ImageType": "cover", "ImageExt": "svg"])
            await expectError("InvalidParameter", status: 400, "CreateUploadVideo", ["Title": 5, "FileName": "a.mp4"])
            await expectError("InvalidParameter", status: 400, "AssumeRole", ["DurationSeconds": 60])
            await expectError("InvalidAction", status: 404, "NoSuchThing", [:])
            // A policy naming an action no operation has (misspelt, or a pattern matching none) would allow nothing.
            for actions in [["s3:PutObjcet"], ["s3:GetObject", "media:CreateUploadVidoe"], ["s3:Nope*"], ["PutObject"], [], [""]] {
                let policy: [String: Any] = ["statements": [["actions": actions]]]
                await expectError("InvalidParameter", status: 400, "CreateAccessKey", ["Policy": policy])
                await expectError("InvalidParameter", status: 400, "AssumeRole", ["Policy": policy])
            }
            let noStatement: [String: Any] = ["statements": [[String: Any]]()]
            await expectError("InvalidParameter", status: 400, "CreateAccessKey", ["Policy": noStatement])
            await expectError("InvalidParameter", status: 400, "AssumeRole", ["Policy": noStatement])
            #expect(try await media.listAccessKeys().isEmpty)
            for actions in [["*"], ["s3:*"], ["s3:Get*"], ["media:ApplyUploadUGC", "media:GetServiceStatus", "s3:GetBucketCORS"]] {
                _ = try await media.createAccessKey(policy: AccessPolicy(statements: [.init(actions: actions)]))
                _ = try await media.assumeRole(policy: AccessPolicy(statements: [.init(actions: actions)]))
            }
            #expect(try await media.listAccessKeys().count == 4)

            // Invalid JSON, signed correctly.
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1", service: "ferry")
            let body = Array("{not json".utf8)
            let headers = signer.sign(
                method: "POST", path: "/_ferry/v1/CreateUploadVideo", query: [],
                headers: [("host", "127.0.0.1:\(server.port)")], payloadHash: SigV4.hexSHA256(body), date: Date()).headers
            let raw = try await server.client().sendRaw("POST", "/_ferry/v1/CreateUploadVideo", headers: headers, body: body)
            #expect(raw.status == 400)
            #expect(raw.text.contains("\"code\":\"MalformedJSON\""))
            #expect(raw.text.contains("\"requestId\""))

            // A disabled key.
            let key = try await media.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
            #expect(try await server.media(key).listVideos().total == 0)
            try await media.disableAccessKey(key.accessKeyId)
            do {
                _ = try await server.media(key).createUploadVideo(.init(title: "t", fileName: "a.mp4"))
                Issue.record("a disabled key created a video")
            } catch let error as FerryError {
                #expect(error.serverCode == "InvalidAccessKeyId")
                #expect(error.httpStatus == 403)
            }
            // The root key is not in the catalog: disabling it says where it is replaced, not that no key has its id.
            await expectError("InvalidParameter", status: 400, "DisableAccessKey", ["AccessKeyId": server.root.accessKeyId])
            do {
                _ = try await media.disableAccessKey(server.root.accessKeyId)
                Issue.record("the root key was disabled")
            } catch let error as FerryError {
                #expect(error.message.contains("root key cannot be disabled"), "\(error)")
            }
            // A key without the permission.
            let narrow = try await media.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:GetVideoInfo"])]))
            do {
                _ = try await server.media(narrow).createUploadVideo(.init(title: "t", fileName: "a.mp4"))
                Issue.record("a key without media:CreateUploadVideo created a video")
            } catch let error as FerryError {
                #expect(error.serverCode == "Forbidden")
            }
            #expect(try await media.listVideos().total == 0)
        }
    }

    @Test("AssumeRole credentials are never wider than the caller's and expire")
    func assumeRole() async throws {
        try await TestServer.with { server in
            let media = server.media()
            try await server.client().createBucket("sts")
            let parent = try await media.createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:*", "media:AssumeRole"], bucket: "sts")]))
            // The inline policy asks for more than the parent has; the result is the intersection.
            let temporary = try await server.media(parent).assumeRole(
                durationSeconds: 900,
                policy: AccessPolicy(statements: [.init(actions: ["s3:PutObject", "s3:GetObject"], bucket: "*", keyPrefix: "in/")]))
            #expect(temporary.expiration.map { $0.timeIntervalSinceNow > 800 && $0.timeIntervalSinceNow <= 900 } == true)
            let s3 = server.client(temporary.sigV4)
            #expect(try await s3.put("sts", "in/a.bin", [1]).status == 200)
            #expect(try await s3.put("sts", "out/a.bin", [1]).errorCode == "AccessDenied")
            try await server.client().createBucket("elsewhere")
            #expect(try await s3.put("elsewhere", "in/a.bin", [1]).errorCode == "AccessDenied")
            // Temporary credentials cannot mint more.
            await #expect(throws: FerryError.self) { try await server.media(temporary).assumeRole() }
            // Nor do the upload credentials they ask for outlive them (UploadAuth lives 3000 s otherwise).
            let brief = try await media.assumeRole(durationSeconds: 900)
            let ticket = try await server.media(brief).createUploadVideo(.init(title: "brief", fileName: "a.mp4"))
            let ends = try #require(brief.expiration)
            #expect(try #require(ticket.auth.expirationDate) <= ends.addingTimeInterval(1))
            let own = try await media.createUploadVideo(.init(title: "own", fileName: "a.mp4"))
            #expect(try #require(own.auth.expirationDate).timeIntervalSinceNow > 2900)
        }
    }
}
