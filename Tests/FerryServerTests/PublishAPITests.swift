import Crypto
import Ferry
import FerryCore
@testable import FerryMedia
@testable import FerryServer
import FerryTestSupport
import Foundation
import Testing

@Suite("Publish API (ApplyUploadUGC / CommitUploadUGC)", .timeLimit(.minutes(10)))
struct PublishAPITests {
    static func signature(_ server: TestServer, lifetime: Int = 3600, id: String? = nil, secret: String? = nil)
        -> String
    {
        let now = Int(Date().timeIntervalSince1970)
        // An expired one was made an hour before it expired.
        return PublishSignature(
            secretId: id ?? server.root.accessKeyId, currentTimeStamp: min(now, now + lifetime - 3600), expireTime: now + lifetime
        )
        .sign(secretKey: secret ?? server.root.secretAccessKey)
    }

    static func call(_ server: TestServer, _ action: String, _ body: [String: Any]) async throws -> (Int, [String: Any])
    {
        let data = [UInt8](try JSONSerialization.data(withJSONObject: body))
        let reply = try await server.client().sendRaw(
            "POST", "/_ferry/ugc/" + action, headers: [("content-type", "application/json")], body: data)
        let object = (try? JSONSerialization.jsonObject(with: Data(reply.body))) as? [String: Any] ?? [:]
        return (reply.status, object)
    }

    @Test(
        "apply → upload with the issued credential → commit; applying again with the session key gives the same video and keys; the credential writes only those keys"
    )
    func applyResumeCommit() async throws {
        try await TestServer.with(minPartSize: 1024) { server in
            let signature = Self.signature(server)
            let (status, applied) = try await Self.call(
                server, "ApplyUploadUGC",
                ["signature": signature, "videoName": "clip", "videoType": "mp4", "coverType": "png"])
            #expect(status == 200)
            let videoId = try #require(applied["VideoId"] as? String)
            let sessionKey = try #require(applied["VodSessionKey"] as? String)
            #expect(applied["VideoKey"] as? String == "video/\(videoId)/source.mp4")
            #expect(applied["CoverKey"] as? String == "video/\(videoId)/cover.png")
            let auth = try #require(UploadAuth(encoded: applied["UploadAuth"] as? String ?? ""))
            #expect(!String(describing: applied).contains(server.root.secretAccessKey))

            // Commit before the files are there: refused, the video stays Uploading.
            let (early, earlyAnswer) = try await Self.call(
                server, "CommitUploadUGC", ["signature": signature, "vodSessionKey": sessionKey])
            #expect(early == 409)
            #expect(earlyAnswer["code"] as? String == "InvalidVideo.NotUploaded")
            #expect(earlyAnswer["requestId"] is String)

            let (again, reapplied) = try await Self.call(
                server, "ApplyUploadUGC", ["signature": signature, "vodSessionKey": sessionKey])
            #expect(again == 200)
            #expect(reapplied["VideoId"] as? String == videoId)
            #expect(reapplied["VideoKey"] as? String == applied["VideoKey"] as? String)
            #expect(reapplied["CoverKey"] as? String == applied["CoverKey"] as? String)
            #expect(reapplied["UploadAuth"] as? String != applied["UploadAuth"] as? String)

            let s3 = server.client(auth.credentials)
            #expect(
                try await s3.put("ferry-media", "video/\(videoId)/source.mp4", [UInt8](repeating: 9, count: 5000))
                    .status == 200)
            #expect(try await s3.put("ferry-media", "video/\(videoId)/other.mp4", [1]).errorCode == "AccessDenied")
            let (noCover, noCoverAnswer) = try await Self.call(
                server, "CommitUploadUGC", ["signature": signature, "vodSessionKey": sessionKey])
            #expect(noCover == 409)
            #expect(noCoverAnswer["code"] as? String == "InvalidCover.NotUploaded")
            #expect(try await s3.put("ferry-media", "video/\(videoId)/cover.png", [1, 2, 3]).status == 200)

            let (committed, answer) = try await Self.call(
                server, "CommitUploadUGC", ["signature": signature, "vodSessionKey": sessionKey])
            #expect(committed == 200)
            #expect(answer["FileId"] as? String == videoId)
            let media = try await S3TestClient.fetch(try #require(answer["MediaUrl"] as? String))
            #expect(media.body == [UInt8](repeating: 9, count: 5000))
            #expect(try await S3TestClient.fetch(try #require(answer["CoverUrl"] as? String)).body == [1, 2, 3])
            let video = try #require(try await server.server.catalog.video(videoId))
            #expect(video.status == "UploadSucc")
            #expect(video.size == 5000)
            #expect(video.title == "clip")
            // Stored, the video takes no more uploads: applying with its session key gives a credential for the cover
            // alone (a publish may still have to send it).
            let (late, lateAnswer) = try await Self.call(
                server, "ApplyUploadUGC", ["signature": signature, "vodSessionKey": sessionKey])
            #expect(late == 200 && lateAnswer["VideoStored"] as? Bool == true, "\(lateAnswer)")
            let coverOnly = server.client(try #require(UploadAuth(encoded: lateAnswer["UploadAuth"] as? String ?? "")).credentials)
            #expect(try await coverOnly.put("ferry-media", "video/\(videoId)/source.mp4", [0]).errorCode == "AccessDenied")
            #expect(try await coverOnly.put("ferry-media", "video/\(videoId)/cover.png", [4, 5, 6]).status == 200)
            #expect(try await server.client().get("ferry-media", "video/\(videoId)/source.mp4").body == [UInt8](repeating: 9, count: 5000))
            // Without a cover there is nothing left to send but the commit: the answer says the video is stored, and
            // its credential writes nothing.
            let (_, plain) = try await Self.call(server, "ApplyUploadUGC", ["signature": signature, "videoType": "mp4"])
            let plainKey = try #require(plain["VodSessionKey"] as? String)
            let plainId = try #require(plain["VideoId"] as? String)
            #expect(plain["VideoStored"] == nil)
            #expect(try await server.client().put("ferry-media", "video/\(plainId)/source.mp4", [1]).status == 200)
            let (stored, storedAnswer) = try await Self.call(
                server, "ApplyUploadUGC", ["signature": signature, "vodSessionKey": plainKey])
            #expect(stored == 200 && storedAnswer["VideoStored"] as? Bool == true, "\(storedAnswer)")
            let nothing = server.client(try #require(UploadAuth(encoded: storedAnswer["UploadAuth"] as? String ?? "")).credentials)
            #expect(try await nothing.put("ferry-media", "video/\(plainId)/source.mp4", [0]).errorCode == "AccessDenied")
            let (plainCommitted, _) = try await Self.call(
                server, "CommitUploadUGC", ["signature": signature, "vodSessionKey": plainKey])
            #expect(plainCommitted == 200)
            #expect(try await server.client().get("ferry-media", "video/\(plainId)/source.mp4").body == [1])
        }
    }

    @Test("a publish whose upload expired: CommitUploadUGC and ApplyUploadUGC with its session key both answer 409 InvalidVideo.UploadExpired (start a new publish), not NotUploaded")
    func expiredPublish() async throws {
        try await TestServer.with { server in
            let signature = Self.signature(server)
            let (status, applied) = try await Self.call(
                server, "ApplyUploadUGC", ["signature": signature, "videoName": "clip", "videoType": "mp4"])
            #expect(status == 200)
            let sessionKey = try #require(applied["VodSessionKey"] as? String)
            let later = Date().addingTimeInterval(server.server.configuration.uploadingVideoMaxAge + 60)
            #expect(try await server.server.mediaLibrary.expireUnfinishedUploads(now: later) == 1)
            for action in ["CommitUploadUGC", "ApplyUploadUGC"] {
                let (code, answer) = try await Self.call(server, action, ["signature": signature, "vodSessionKey": sessionKey])
                #expect(code == 409 && answer["code"] as? String == "InvalidVideo.UploadExpired", "\(action): \(answer)")
            }
        }
    }

    @Test("a oneTimeValid signature applies for one video: again while it uploads, that video; once stored or deleted, 403 SignatureUsed (racing applies make one video); it still resumes and commits its own, and no other")
    func oneTimeSignature() async throws {
        try await TestServer.with { server in
            let now = Int(Date().timeIntervalSince1970)
            func signed(_ once: Int?) -> String {
                PublishSignature(
                    secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 600, oneTimeValid: once
                ).sign(secretKey: server.root.secretAccessKey)
            }
            let once = signed(1)
            let body: [String: Any] = ["signature": once, "videoType": "mp4", "coverType": "png"]
            // Racing applies asking for different covers make one video with one cover, the first one's.
            let answers = try await withThrowingTaskGroup(of: [String?].self) { group in
                for index in 0..<6 {
                    group.addTask {
                        let answer = try await Self.call(
                            server, "ApplyUploadUGC", ["signature": once, "videoType": "mp4", "coverType": index % 2 == 0 ? "png" : "jpg"]).1
                        return [answer["VideoId"] as? String, answer["CoverKey"] as? String]
                    }
                }
                return try await group.reduce(into: [[String?]]()) { $0.append($1) }
            }
            let ids = answers.map { $0[0] }
            #expect(Set(ids).count == 1 && ids.allSatisfy { $0 != nil }, "\(ids)")
            #expect(Set(answers.map { $0[1] }).count == 1, "\(answers)")
            let coverKey = try #require(answers.first?[1] ?? nil)
            // Retried without a cover, or with another, it is still that video and that cover.
            for retry in [["signature": once, "videoType": "mp4"], body] {
                let (status, retried) = try await Self.call(server, "ApplyUploadUGC", retry)
                #expect(status == 200 && retried["VideoId"] as? String == ids.first ?? nil, "\(retried)")
                #expect(retried["CoverKey"] as? String == coverKey, "\(retried)")
            }
            let (status, applied) = try await Self.call(server, "ApplyUploadUGC", body)
            #expect(status == 200)
            let videoId = try #require(applied["VideoId"] as? String)
            #expect(coverKey.hasPrefix("video/\(videoId)/cover."))
            let sessionKey = try #require(applied["VodSessionKey"] as? String)
            let auth = try #require(UploadAuth(encoded: applied["UploadAuth"] as? String ?? ""))
            let device = server.client(auth.credentials)
            #expect(try await device.put("ferry-media", "video/\(videoId)/source.mp4", [1, 2, 3]).status == 200)
            #expect(try await device.put("ferry-media", coverKey, [4]).status == 200)

            let (used, usedAnswer) = try await Self.call(server, "ApplyUploadUGC", body)
            #expect(used == 403 && usedAnswer["code"] as? String == "SignatureUsed", "\(usedAnswer)")
            // Its own video still resumes (a cover-only credential) and commits with it; another video does not.
            let (resumed, _) = try await Self.call(server, "ApplyUploadUGC", ["signature": once, "vodSessionKey": sessionKey])
            #expect(resumed == 200)
            let (_, plain) = try await Self.call(server, "ApplyUploadUGC", ["signature": Self.signature(server), "videoType": "mp4"])
            let plainKey = try #require(plain["VodSessionKey"] as? String)
            for action in ["ApplyUploadUGC", "CommitUploadUGC"] {
                let (other, otherAnswer) = try await Self.call(server, action, ["signature": once, "vodSessionKey": plainKey])
                #expect(other == 403 && otherAnswer["code"] as? String == "Forbidden", "\(action) \(otherAnswer)")
            }
            let (committed, answer) = try await Self.call(server, "CommitUploadUGC", ["signature": once, "vodSessionKey": sessionKey])
            #expect(committed == 200 && answer["FileId"] as? String == videoId, "\(answer)")
            let videos = try await server.server.mediaCatalog.videos(
                status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
            #expect(videos.total == 2)

            // Deleted, the video does not free the signature.
            let other = signed(1)
            let (_, first) = try await Self.call(server, "ApplyUploadUGC", ["signature": other, "videoType": "mp4"])
            let root = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            try await root.deleteVideos([try #require(first["VideoId"] as? String)])
            let (deleted, deletedAnswer) = try await Self.call(server, "ApplyUploadUGC", ["signature": other, "videoType": "mp4"])
            #expect(deleted == 403 && deletedAnswer["code"] as? String == "SignatureUsed", "\(deletedAnswer)")

            // Without oneTimeValid (or with 0), each apply is a new video until the signature expires.
            for many in [signed(nil), signed(0)] {
                let (_, a) = try await Self.call(server, "ApplyUploadUGC", ["signature": many, "videoType": "mp4"])
                let (_, b) = try await Self.call(server, "ApplyUploadUGC", ["signature": many, "videoType": "mp4"])
                #expect(a["VideoId"] as? String != nil && a["VideoId"] as? String != b["VideoId"] as? String)
            }
        }
    }

    @Test("a oneTimeValid publish applied for without a cover gets none on a retry asking for one; one applied for before the cover was kept gets the cover the retry asks for")
    func retriedCover() async throws {
        try await TestServer.with { server in
            let now = Int(Date().timeIntervalSince1970)
            let once = PublishSignature(
                secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 600, oneTimeValid: 1
            ).sign(secretKey: server.root.secretAccessKey)
            let (_, first) = try await Self.call(server, "ApplyUploadUGC", ["signature": once, "videoType": "mp4"])
            let videoId = try #require(first["VideoId"] as? String)
            #expect(first["CoverKey"] as? String == nil)
            let withCover: [String: Any] = ["signature": once, "videoType": "mp4", "coverType": "png"]
            let (_, retried) = try await Self.call(server, "ApplyUploadUGC", withCover)
            #expect(retried["VideoId"] as? String == videoId && retried["CoverKey"] as? String == nil, "\(retried)")
            // A record written before the cover key was kept has none: the retry's cover is taken, as it was.
            try await server.server.mediaCatalog.updateVideo(videoId) { video in
                video.publishCoverKey = nil
                return .save()
            }
            let (_, legacy) = try await Self.call(server, "ApplyUploadUGC", withCover)
            #expect(legacy["CoverKey"] as? String == "video/\(videoId)/cover.png", "\(legacy)")
        }
    }

    @Test("a signature valid for more than 90 days (issued in the future included), made after it expires or more than 10 minutes ahead, with timestamps whose difference overflows, with a field given twice, or with a oneTimeValid other than 0 or 1 is refused 403 InvalidSignature before anything is made")
    func signatureFields() async throws {
        try await TestServer.with { server in
            let now = Int(Date().timeIntervalSince1970)
            let fields = [
                PublishSignature(secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 7_776_001),
                PublishSignature(secretId: server.root.accessKeyId, currentTimeStamp: Int.min, expireTime: Int.max),
                PublishSignature(
                    secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 60, oneTimeValid: 2),
                // Issued in the future, or never expiring: valid for years all the same.
                PublishSignature(
                    secretId: server.root.accessKeyId, currentTimeStamp: now + 5 * 31_536_000,
                    expireTime: now + 5 * 31_536_000 + 86_400),
                PublishSignature(secretId: server.root.accessKeyId, currentTimeStamp: Int.max, expireTime: Int.max),
                // Expiring before it was made; made 80 days from now, for ten minutes.
                PublishSignature(secretId: server.root.accessKeyId, currentTimeStamp: now + 5_000, expireTime: now + 1_000),
                PublishSignature(
                    secretId: server.root.accessKeyId, currentTimeStamp: now + 80 * 86_400, expireTime: now + 80 * 86_400 + 600),
            ]
            var signatures = fields.map { $0.sign(secretKey: server.root.secretAccessKey) }
            // A field given twice (the first would count, a reader may take the last).
            let twice = Array(
                "secretId=\(server.root.accessKeyId)&currentTimeStamp=\(now)&expireTime=\(now + 60)&random=1&oneTimeValid=0&oneTimeValid=1".utf8)
            signatures.append(Data(HMAC<Insecure.SHA1>.authenticationCode(
                for: twice, using: SymmetricKey(data: Array(server.root.secretAccessKey.utf8))) + twice).base64EncodedString())
            for signature in signatures {
                let (status, answer) = try await Self.call(
                    server, "ApplyUploadUGC", ["signature": signature, "videoType": "mp4"])
                #expect(status == 403 && answer["code"] as? String == "InvalidSignature", "\(answer)")
                #expect((answer["message"] as? String)?.contains(String(Int.max)) == false)
            }
            #expect(try await server.server.mediaCatalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 1).total == 0)
            // Exactly 90 days is accepted.
            let longest = PublishSignature(
                secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 7_776_000)
            let (ok, _) = try await Self.call(
                server, "ApplyUploadUGC",
                ["signature": longest.sign(secretKey: server.root.secretAccessKey), "videoType": "mp4"])
            #expect(ok == 200)
        }
    }

    @Test("ApplyUploadUGC counts against the key's Videos and StorageBytes quotas as CreateUploadVideo does")
    func quotas() async throws {
        try await TestServer.with { server in
            let root = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            let everything = AccessPolicy(statements: [.init(actions: ["s3:*", "media:*"])])
            let one = try await root.createAccessKey(policy: everything, quota: AccessKeyQuota(videos: 1))
            let signature = Self.signature(server, id: one.accessKeyId, secret: one.secretAccessKey)
            #expect(try await Self.call(server, "ApplyUploadUGC", ["signature": signature, "videoType": "mp4"]).0 == 200)
            let (second, answer) = try await Self.call(server, "ApplyUploadUGC", ["signature": signature, "videoType": "mp4"])
            #expect(second == 403 && answer["code"] as? String == "QuotaExceeded", "\(answer)")
            let small = try await root.createAccessKey(policy: everything, quota: AccessKeyQuota(storageBytes: 4))
            let (large, largeAnswer) = try await Self.call(
                server, "ApplyUploadUGC",
                [
                    "signature": Self.signature(server, id: small.accessKeyId, secret: small.secretAccessKey),
                    "videoType": "mp4", "videoSize": 100,
                ])
            #expect(large == 403 && largeAnswer["code"] as? String == "QuotaExceeded", "\(largeAnswer)")
            let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: one)
            #expect(try await media.usage().usage.videos == 1)
        }
    }

    @Test("a deleted video's upload credentials store nothing more: a new write is refused, and one begun before the deletion is removed when it completes")
    func deletedVideoTakesNoWrites() async throws {
        try await TestServer.with(minPartSize: 1024) { server in
            let signature = Self.signature(server)
            let (_, applied) = try await Self.call(
                server, "ApplyUploadUGC", ["signature": signature, "videoType": "mp4", "coverType": "png"])
            let videoId = try #require(applied["VideoId"] as? String)
            let auth = try #require(UploadAuth(encoded: applied["UploadAuth"] as? String ?? ""))
            let device = server.client(auth.credentials)
            let cover = "video/\(videoId)/cover.png"
            let uploadId = try await device.createMultipartUpload("ferry-media", cover)
            let part = try await device.uploadPart("ferry-media", cover, uploadId: uploadId, number: 1, [7, 7, 7])
            let etag = try #require(part.header("ETag"))

            let root = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
            try await root.deleteVideos([videoId])
            let refused = try await device.put("ferry-media", "video/\(videoId)/source.mp4", [1, 2, 3])
            #expect(refused.status == 403 && refused.errorCode == "AccessDenied", "\(refused.text)")
            // A multipart upload begun before the deletion completes, and what it made is removed.
            let completed = try await device.complete(
                "ferry-media", cover, uploadId: uploadId, xml: S3TestClient.completeXML([(1, etag)]))
            #expect(completed.status == 200)
            #expect(try await server.client().get("ferry-media", cover).status == 404)
            #expect(try await server.client().get("ferry-media", "video/\(videoId)/source.mp4").status == 404)
        }
    }

    @Test(
        "bad signatures and session keys get distinct codes: InvalidSignature, SignatureExpired, MissingParameter, InvalidVodSessionKey, Forbidden"
    )
    func refusals() async throws {
        try await TestServer.with { server in
            func check(_ action: String, _ body: [String: Any], _ code: String, _ status: Int) async throws {
                let (answerStatus, answer) = try await Self.call(server, action, body)
                #expect(answerStatus == status, "\(action) \(answer)")
                #expect(answer["code"] as? String == code, "\(action) \(answer)")
                #expect((answer["message"] as? String)?.isEmpty == false)
            }
            let apply = "ApplyUploadUGC"
            try await check(apply, ["videoType": "mp4"], "MissingParameter", 400)
            try await check(apply, ["signature": "", "videoType": "mp4"], "MissingParameter", 400)
            try await check(apply, ["signature": "%%%", "videoType": "mp4"], "InvalidSignature", 403)
            try await check(
                apply, ["signature": Self.signature(server, secret: "wrong"), "videoType": "mp4"], "InvalidSignature",
                403)
            try await check(
                apply, ["signature": Self.signature(server, id: "FKIAUNKNOWN00000", secret: "x"), "videoType": "mp4"],
                "InvalidSignature", 403)
            try await check(
                apply, ["signature": Self.signature(server, lifetime: -1), "videoType": "mp4"], "SignatureExpired", 403)
            // Expiry is only disclosed for a signature that verifies.
            try await check(
                apply, ["signature": Self.signature(server, lifetime: -1, secret: "wrong"), "videoType": "mp4"],
                "InvalidSignature", 403)
            try await check(apply, ["signature": Self.signature(server), "videoType": "m p4"], "InvalidParameter", 400)
            try await check(apply, ["signature": Self.signature(server)], "MissingParameter", 400)
            // The signature's sourceContext becomes UserData: CreateUploadVideo's rules (no NUL, at most 1024 bytes).
            for context in ["a\u{0}b", String(repeating: "x", count: 1025)] {
                let now = Int(Date().timeIntervalSince1970)
                var signed = PublishSignature(secretId: server.root.accessKeyId, currentTimeStamp: now, expireTime: now + 60)
                signed.sourceContext = context
                try await check(
                    apply, ["signature": signed.sign(secretKey: server.root.secretAccessKey), "videoType": "mp4"],
                    "InvalidParameter", 400)
            }
            try await check(
                apply, ["signature": Self.signature(server), "videoType": "mp4", "coverType": "exe"],
                "InvalidParameter", 400)
            try await check(
                apply, ["signature": Self.signature(server), "vodSessionKey": "FV1.abc.def"], "InvalidVodSessionKey",
                400)
            try await check("CommitUploadUGC", ["signature": Self.signature(server)], "MissingParameter", 400)
            try await check("NoSuchThing", [:], "InvalidAction", 404)

            // A stored key signs too, when its policy allows the publish actions; a disabled one does not.
            let media = S3MediaKeys(server: server)
            let allowed = try await media.create(["media:ApplyUploadUGC", "media:CommitUploadUGC"])
            let (ok, applied) = try await Self.call(
                server, apply,
                ["signature": Self.signature(server, id: allowed.0, secret: allowed.1), "videoType": "mov"])
            #expect(ok == 200)
            // A session key is bound to the key that applied: another key cannot use it.
            try await check(
                apply,
                ["signature": Self.signature(server), "vodSessionKey": applied["VodSessionKey"] as? String ?? ""],
                "InvalidVodSessionKey", 400)
            let narrow = try await media.create(["media:GetVideoInfo"])
            try await check(
                apply, ["signature": Self.signature(server, id: narrow.0, secret: narrow.1), "videoType": "mp4"],
                "Forbidden", 403)
            // A key that may apply but not commit signs no publish: it would leave a video uploaded and unfinished.
            let applyOnly = try await media.create(["media:ApplyUploadUGC"])
            let videos = try await server.server.mediaCatalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 1).total
            try await check(
                apply, ["signature": Self.signature(server, id: applyOnly.0, secret: applyOnly.1), "videoType": "mp4"],
                "Forbidden", 403)
            #expect(try await server.server.mediaCatalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 1).total == videos)
            _ = try await server.server.catalog.setAccessKeyStatus(allowed.0, .disabled)
            try await check(
                apply, ["signature": Self.signature(server, id: allowed.0, secret: allowed.1), "videoType": "mp4"],
                "InvalidSignature", 403)
        }
    }
}

/// Creates stored access keys through the media API.
struct S3MediaKeys {
    let server: TestServer

    func create(_ actions: [String]) async throws -> (String, String) {
        let media = MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
        )
        let key = try await media.createAccessKey(policy: AccessPolicy(statements: [.init(actions: actions)]))
        return (key.accessKeyId, key.secretAccessKey)
    }
}
