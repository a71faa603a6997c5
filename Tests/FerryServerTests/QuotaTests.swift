import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import FerryServer
@testable import FerryStorage

/// Where a quota test's servers keep their catalog and their bytes: one server on SQLite and files (the embedded
/// default), or nodes sharing a PostgreSQL catalog and a SeaweedFS store.
enum QuotaBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// Runs `body` with `count` servers (one on SQLite, whatever `count`), all on the same catalog and store.
    func withNodes<T: Sendable>(_ count: Int = 1, _ body: @Sendable @escaping ([TestServer]) async throws -> T)
        async throws -> T
    {
        try await withCatalog { configure in
            try await Self.nested(self == .sqlite ? 1 : count, configure: configure, [], body)
        }
    }

    /// Runs `body` with what configures a test server for this backend: nothing for SQLite (the data directory's
    /// catalog and files); for PostgreSQL, a new database and a SeaweedFS store, removed afterwards.
    func withCatalog<T: Sendable>(
        _ body: @Sendable @escaping (@escaping @Sendable (inout FerryServerConfiguration) -> Void) async throws -> T
    ) async throws -> T {
        switch self {
        case .sqlite:
            return try await body { _ in }
        case .postgres:
            let seaweed = try await SeaweedFSServer.start()
            do {
                let location = seaweed.location()
                let result = try await PostgresServer.withDatabase { url in
                    try await body {
                        $0.catalogURL = url
                        $0.objectStore = location
                    }
                }
                await seaweed.destroy()
                return result
            } catch {
                await seaweed.destroy()
                throw error
            }
        }
    }

    private static func nested<T: Sendable>(
        _ count: Int, configure: @escaping @Sendable (inout FerryServerConfiguration) -> Void, _ started: [TestServer],
        _ body: @Sendable @escaping ([TestServer]) async throws -> T
    ) async throws -> T {
        guard started.count < count else { return try await body(started) }
        return try await TestServer.with(configure: configure) { server in
            try await nested(count, configure: configure, started + [server], body)
        }
    }
}

@Suite("Quotas and request rates of access keys (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
struct QuotaTests {
    static let everything = AccessPolicy(statements: [.init(actions: ["s3:*", "media:*"])])

    static func rootMedia(_ server: TestServer, configuration: ObjectStorageClient.Configuration = .init())
        -> MediaServiceClient
    {
        MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey),
            configuration: configuration)
    }

    static func media(_ server: TestServer, _ key: Credentials, configuration: ObjectStorageClient.Configuration = .init())
        -> MediaServiceClient
    {
        MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: key, configuration: configuration)
    }

    static func sigV4(_ key: Credentials) -> SigV4Credentials {
        SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey)
    }

    /// A key with `quota` and every permission, made with the root key, and a bucket `bucket` (made by the root key).
    static func key(_ server: TestServer, _ quota: AccessKeyQuota, bucket: String) async throws
        -> (root: MediaServiceClient, key: Credentials, s3: S3TestClient)
    {
        let root = rootMedia(server)
        let key = try await root.createAccessKey(policy: everything, quota: quota)
        #expect(try await server.client().createBucket(bucket).status == 200)
        return (root, key, server.client(sigV4(key)))
    }

    /// Every blob the server's store holds.
    static func blobs(_ server: TestServer) async throws -> Set<String> {
        Set(try await server.server.store.files.blobs(olderThan: Date().addingTimeInterval(3600)))
    }

    @Test("a quota field or a policy statement field that names nothing (a misspelling) is refused, 400 InvalidParameter naming it, and changes nothing: it is not taken as no limit, nor as every bucket")
    func misspeltFieldsAreRefused() async throws {
        try await TestServer.with { server in
            let root = Self.rootMedia(server)
            let key = try await root.createAccessKey(policy: Self.everything, quota: AccessKeyQuota(storageBytes: 1000, videos: 1))
            func call(_ action: String, _ json: String) async throws -> (Int, String?, String) {
                let reply = try await mediaRequest(server, action, Array(json.utf8))
                let body = (try? JSONSerialization.jsonObject(with: Data(reply.body))) as? [String: Any]
                return (reply.status, body?["code"] as? String, body?["message"] as? String ?? reply.text)
            }
            let update = try await call(
                "UpdateAccessKey", #"{"AccessKeyId":"\#(key.accessKeyId)","Quota":{"StorageByte":500}}"#)
            #expect(update.0 == 400 && update.1 == "InvalidParameter" && update.2.contains("Quota.StorageByte"), "\(update)")
            let usage = try await root.usage(accessKeyId: key.accessKeyId)
            #expect(usage.quota == AccessKeyQuota(storageBytes: 1000, videos: 1), "\(String(describing: usage.quota))")
            let create = try await call("CreateAccessKey", #"{"Policy":{"statements":[{"actions":["s3:*"]}]},"Quota":{"Video":1}}"#)
            #expect(create.0 == 400 && create.2.contains("Quota.Video"), "\(create)")
            let widened = try await call(
                "CreateAccessKey", #"{"Policy":{"statements":[{"actions":["s3:*"],"buckt":"mine"}]}}"#)
            #expect(widened.0 == 400 && widened.1 == "InvalidParameter" && widened.2.contains("Policy.statements[0].buckt"), "\(widened)")
            #expect(try await root.listAccessKeys().count == 1, "a refused key was created")
        }
    }

    @Test(
        "a key at its byte quota gets 403 QuotaExceeded on PUT, on a part, on a form upload and on CreateUploadVideo, and nothing is stored",
        arguments: QuotaBackend.allCases)
    func atByteQuota(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let server = nodes[0]
            let (root, key, s3) = try await Self.key(server, AccessKeyQuota(storageBytes: 8), bucket: "quota")
            #expect(try await s3.put("quota", "full", Array("12345678".utf8)).status == 200)
            let uploadId = try await s3.createMultipartUpload("quota", "parts")
            let before = try await Self.blobs(server)

            let put = try await s3.put("quota", "more", [1])
            #expect(put.status == 403 && put.errorCode == "QuotaExceeded", "\(put.status) \(put.text)")
            let part = try await s3.uploadPart("quota", "parts", uploadId: uploadId, number: 1, [1, 2, 3])
            #expect(part.status == 403 && part.errorCode == "QuotaExceeded", "\(part.status) \(part.text)")
            // Parts count against the upload's owner whoever sends them: another key, the root key, a part copy.
            let other = server.client(Self.sigV4(try await root.createAccessKey(policy: Self.everything)))
            for (sender, name) in [(other, "another key"), (server.client(), "the root key")] {
                let foreign = try await sender.uploadPart("quota", "parts", uploadId: uploadId, number: 2, [1, 2, 3])
                #expect(foreign.status == 403 && foreign.errorCode == "QuotaExceeded", "\(name): \(foreign.status) \(foreign.text)")
            }
            let copied = try await other.send(
                "PUT", "/quota/parts", query: [("partNumber", "2"), ("uploadId", uploadId)],
                headers: [("x-amz-copy-source", "/quota/full")])
            #expect(copied.status == 403 && copied.errorCode == "QuotaExceeded", "\(copied.status) \(copied.text)")
            let form = try await Self.formUpload(server, key, bucket: "quota", key: "form")
            #expect(form.status == 403 && form.text.contains(#""code":"QuotaExceeded""#), "\(form.status) \(form.text)")
            let scoped = Self.media(server, key)
            do {
                _ = try await scoped.createUploadVideo(.init(title: "Over", fileName: "over.mp4"))
                Issue.record("CreateUploadVideo was not refused")
            } catch let error as FerryError {
                #expect(error.serverCode == "QuotaExceeded" && error.httpStatus == 403, "\(error)")
            }

            // Nothing was stored: no blob, no object, no part, no video.
            #expect(try await Self.blobs(server) == before)
            #expect(try await server.client().get("quota", "more").status == 404)
            #expect(try await server.server.store.catalog.parts(uploadId: uploadId, after: 0, limit: nil).isEmpty)
            let usage = try await scoped.usage()
            #expect(usage.accessKeyId == key.accessKeyId)
            #expect(usage.usage == .init(storageBytes: 8, videos: 0, uploadsInProgress: 1))
            #expect(usage.quota == AccessKeyQuota(storageBytes: 8))
            // The root key sees the same; the key's own overwrite of what it holds still fits.
            #expect(try await root.usage(accessKeyId: key.accessKeyId).usage.storageBytes == 8)
            #expect(try await s3.put("quota", "full", Array("87654321".utf8)).status == 200)
            // Raised by UpdateAccessKey, the quota lets the part in at once.
            try await root.updateAccessKey(key.accessKeyId, quota: AccessKeyQuota(storageBytes: 11))
            #expect(try await s3.uploadPart("quota", "parts", uploadId: uploadId, number: 1, [1, 2, 3]).status == 200)
            #expect(try await scoped.usage().usage.storageBytes == 11)
            // Another key's part fills the owner's quota, not its own.
            try await root.updateAccessKey(key.accessKeyId, quota: AccessKeyQuota(storageBytes: 12))
            #expect(try await other.uploadPart("quota", "parts", uploadId: uploadId, number: 2, [4]).status == 200)
            #expect(try await scoped.usage().usage.storageBytes == 12)
            #expect(try await other.uploadPart("quota", "parts", uploadId: uploadId, number: 3, [5]).errorCode == "QuotaExceeded")
            // Each refusal is counted by its route group and quota: the six object API requests, the form, the video.
            let metrics = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            let refusals = { (group: String) in
                PrometheusText.sample(metrics, "ferry_quota_refusals_total", ["group": group, "quota": "StorageBytes"])
            }
            #expect(refusals("s3") == 6 && refusals("form") == 1 && refusals("media") == 1, "\(metrics)")
        }
    }

    @Test("a temporary credential shares its key's quota and usage; another key may not read that usage")
    func temporaryCredentialsInherit() async throws {
        try await QuotaBackend.sqlite.withNodes { nodes in
            let server = nodes[0]
            let (root, key, _) = try await Self.key(server, AccessKeyQuota(storageBytes: 4, videos: 1), bucket: "sts")
            let other = try await root.createAccessKey(policy: Self.everything)
            let temporary = try await Self.media(server, key).assumeRole(durationSeconds: 900)
            let viaToken = server.client(
                SigV4Credentials(
                    accessKeyId: temporary.accessKeyId, secretAccessKey: temporary.secretAccessKey,
                    sessionToken: temporary.sessionToken))
            #expect(try await viaToken.put("sts", "a", [1, 2, 3, 4]).status == 200)
            #expect(try await viaToken.put("sts", "b", [1]).errorCode == "QuotaExceeded")
            #expect(try await Self.media(server, temporary).usage().accessKeyId == key.accessKeyId)
            #expect(try await Self.media(server, key).usage().usage.storageBytes == 4)
            do {
                _ = try await Self.media(server, other).usage(accessKeyId: key.accessKeyId)
                Issue.record("another key read the usage")
            } catch let error as FerryError {
                #expect(error.httpStatus == 403, "\(error)")
            }
            // Raising the byte quota leaves the videos quota: one video, then QuotaExceeded.
            try await root.updateAccessKey(key.accessKeyId, quota: AccessKeyQuota(storageBytes: 1000, videos: 1))
            _ = try await Self.media(server, temporary).createUploadVideo(.init(title: "One", fileName: "one.mp4"))
            do {
                _ = try await Self.media(server, key).createUploadVideo(.init(title: "Two", fileName: "two.mp4"))
                Issue.record("a second video was created")
            } catch let error as FerryError {
                #expect(error.serverCode == "QuotaExceeded" && error.httpStatus == 403, "\(error)")
            }
            #expect(try await root.accessKeys().first { $0.accessKeyId == key.accessKeyId }?.quota?.videos == 1)
        }
    }

    @Test("Videos: a new video past the limit is refused, a retry with its ClientToken still answers its video; nodes racing for the last videos create no more than the limit")
    func videosQuota() async throws {
        try await QuotaBackend.postgres.withNodes(2) { nodes in
            let (_, key, _) = try await Self.key(nodes[0], AccessKeyQuota(videos: 4), bucket: "videos")
            let media = Self.media(nodes[0], key)
            var first = MediaServiceClient.VideoDescription(title: "First", fileName: "first.mp4")
            first.clientToken = "first-token"
            let created = try await media.createUploadVideo(first)
            // Three more, two nodes at once, for the three videos left: all, and then no more.
            let outcomes = try await withThrowingTaskGroup(of: String?.self) { group in
                for index in 0..<6 {
                    let client = Self.media(nodes[index % 2], key)
                    group.addTask {
                        do {
                            return try await client.createUploadVideo(.init(title: "V\(index)", fileName: "v.mp4")).id
                        } catch let error as FerryError {
                            #expect(error.serverCode == "QuotaExceeded" && error.httpStatus == 403, "\(error)")
                            return nil
                        }
                    }
                }
                var ids: [String?] = []
                for try await id in group { ids.append(id) }
                return ids
            }
            #expect(outcomes.compactMap { $0 }.count == 3, "\(outcomes)")
            #expect(try await Self.media(nodes[1], key).usage().usage.videos == 4)
            // At the limit, the first request retried with its token gets its video again.
            #expect(try await Self.media(nodes[1], key).createUploadVideo(first).id == created.id)
        }
    }

    @Test("ConcurrentUploads refuses a multipart upload beyond the limit until one is aborted", arguments: QuotaBackend.allCases)
    func concurrentUploads(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let server = nodes[0]
            let (_, key, s3) = try await Self.key(server, AccessKeyQuota(concurrentUploads: 2), bucket: "uploads")
            let first = try await s3.createMultipartUpload("uploads", "a")
            _ = try await s3.createMultipartUpload("uploads", "b")
            let third = try await s3.send("POST", S3TestClient.path("uploads", "c"), query: [("uploads", "")])
            #expect(third.status == 403 && third.errorCode == "QuotaExceeded", "\(third.status) \(third.text)")
            // Refused in the console's part signing too, where the video or image made for the upload goes with it.
            var browser = ConsoleBrowser(server)
            _ = try await browser.signIn(key.accessKeyId, key.secretAccessKey)
            let uppy = [("Uppy-Versions", "@uppy/companion-client=4.0.0")]
            for (name, type) in [("clip.mp4", "video/mp4"), ("still.png", "image/png")] {
                let create: [String: Any] = ["filename": name, "type": type]
                let refused = try await browser.send("POST", "/s3/multipart", json: create, headers: uppy, csrf: false)
                #expect(refused.status == 403 && refused.text.contains("QuotaExceeded"), "\(refused.text)")
            }
            #expect(try await Self.media(server, key).usage().usage.videos == 0)
            let uploading = try await server.server.mediaCatalog.uploadingImages(
                createdBefore: Date().addingTimeInterval(60), after: "", limit: 100)
            #expect(!uploading.contains { $0.owner == key.accessKeyId })
            // The root key is not limited.
            _ = try await server.client().createMultipartUpload("uploads", "d")
            #expect(try await s3.send("DELETE", S3TestClient.path("uploads", "a"), query: [("uploadId", first)]).status == 204)
            _ = try await s3.createMultipartUpload("uploads", "c")
            #expect(try await Self.media(server, key).usage().usage.uploadsInProgress == 2)
            let metrics = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            let refusals = { (group: String) in
                PrometheusText.sample(metrics, "ferry_quota_refusals_total", ["group": group, "quota": "ConcurrentUploads"])
            }
            #expect(refusals("s3") == 1 && refusals("signing") == 2, "\(metrics)")
        }
    }

    @Test("an expired resumable upload gives its ConcurrentUploads slot back before the collector runs: a creation that finds the slots taken ends the expired ones and goes on, and a request to an expired upload ends it", arguments: QuotaBackend.allCases)
    func expiredUploadsFreeTheirSlots(_ backend: QuotaBackend) async throws {
        // Uploads live 10 s: a loaded machine can take two seconds between two requests. (The time is the real one:
        // the store judges the expiry of a key's uploads by it.)
        try await backend.withCatalog { configure in
            try await TestServer.with(configure: { configure(&$0); $0.resumableUploadLifetime = 10 }) { server in
                let (root, key, s3) = try await Self.key(server, AccessKeyQuota(concurrentUploads: 1), bucket: "slots")
                func create(_ name: String) async throws -> S3TestClient.Reply {
                    try await s3.send(
                        "POST", "/_ferry/uploads/s3/slots/" + name,
                        headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "10")], payload: .unsigned)
                }
                let first = try await create("a.bin")
                #expect(first.status == 201)
                // Another key's uploads (the root key's): one unfinished, one completed (length 0).
                func rootCreate(_ name: String, length: Int) async throws -> String {
                    let created = try await server.client().send(
                        "POST", "/_ferry/uploads/s3/slots/" + name,
                        headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", String(length))], payload: .unsigned)
                    return try #require(created.header("Location"), "\(created.status) \(created.text)")
                }
                let othersUnfinished = try await rootCreate("root-open.bin", length: 10)
                let othersCompleted = try await rootCreate("root-done.bin", length: 0)
                let refused = try await create("b.bin")
                #expect(refused.status == 403 && refused.text.contains("uploads in progress"), "\(refused.status) \(refused.text)")
                try await Task.sleep(for: .seconds(11))
                // The first has expired: the creation ends it and takes its slot.
                let second = try await create("b.bin")
                #expect(second.status == 201, "\(second.status) \(second.text)")
                let gone = try await S3TestClient.fetchRaw(
                    "HEAD", try #require(first.header("Location")), headers: [("Tus-Resumable", "1.0.0")])
                #expect(gone.status == 404)
                #expect(try await root.usage(accessKeyId: key.accessKeyId).usage.uploadsInProgress == 1)
                // The other key's uploads were left as they were: the expired one is still there to answer 410, the
                // completed one still tells its ETag.
                let open = try await S3TestClient.fetchRaw("HEAD", othersUnfinished, headers: [("Tus-Resumable", "1.0.0")])
                #expect(open.status == 410)
                let done = try await S3TestClient.fetchRaw("HEAD", othersCompleted, headers: [("Tus-Resumable", "1.0.0")])
                #expect(done.status == 200 && done.header("ETag") != nil, "\(done.status)")
                // A HEAD of an expired upload (410) ends it at once, its slot with it.
                try await Task.sleep(for: .seconds(11))
                let expired = try await S3TestClient.fetchRaw(
                    "HEAD", try #require(second.header("Location")), headers: [("Tus-Resumable", "1.0.0")])
                #expect(expired.status == 410)
                #expect(try await root.usage(accessKeyId: key.accessKeyId).usage.uploadsInProgress == 0)
            }
        }
    }

    @Test("a write past the quota without a declared size is refused (a part by the catalog), and the store keeps none of its bytes",
        arguments: QuotaBackend.allCases)
    func catalogCheck(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let store = nodes[0].server.store
            try await store.createBucket("direct")
            let charge = StorageCharge(owner: "FKIAOWNER", quota: AccessKeyQuota(storageBytes: 10))
            _ = try await store.putObject(
                bucket: "direct", key: "a", attributes: .init(), tags: [], body: ObjectCatalogTests.body("123456"),
                checksums: [], condition: .none, verify: { _ in }, charge: charge)
            let before = try await Self.blobs(nodes[0])
            await #expect(throws: FerryDomainError.self) {
                _ = try await store.putObject(
                    bucket: "direct", key: "b", attributes: .init(), tags: [], body: ObjectCatalogTests.body("12345"),
                    checksums: [], condition: .none, verify: { _ in }, charge: charge)
            }
            #expect(try await Self.blobs(nodes[0]) == before)
            let upload = try await store.createMultipartUpload(
                bucket: "direct", key: "c", attributes: .init(), tags: [], checksumAlgorithm: nil, checksumType: nil,
                charge: charge)
            _ = try await store.uploadPart(
                upload, partNumber: 1, body: ObjectCatalogTests.body("1234"), checksums: [], verify: { _ in },
                charge: charge)
            let withPart = try await Self.blobs(nodes[0])
            #expect(withPart.count == before.count + 1)
            do {
                _ = try await store.uploadPart(
                    upload, partNumber: 2, body: ObjectCatalogTests.body("1"), checksums: [], verify: { _ in },
                    charge: charge)
                Issue.record("the part past the quota was stored")
            } catch let error as FerryDomainError {
                #expect(error.code == .quotaExceeded)
            }
            #expect(try await Self.blobs(nodes[0]) == withPart)
            // A part replacing one of the same number frees its bytes.
            _ = try await store.uploadPart(
                upload, partNumber: 1, body: ObjectCatalogTests.body("abcd"), checksums: [], verify: { _ in },
                charge: charge)
            #expect(try await store.usage(owner: "FKIAOWNER") == StorageUsage(storedBytes: 10, uploadsInProgress: 1))
            #expect(try await store.object(bucket: "direct", key: "a").owner == "FKIAOWNER")
        }
    }

    @Test("a body that declares no size (a form upload's file, a tus or IETF append) is stopped where the byte quota would refuse it, not read to its end: at most one buffer more than the quota leaves is read, and nothing is kept",
        arguments: QuotaBackend.allCases)
    func undeclaredBodyStopsAtTheQuota(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let store = nodes[0].server.store
            try await store.createBucket("bounded")
            let charge = StorageCharge(owner: "FKIAOWNER", quota: AccessKeyQuota(storageBytes: 1 << 20))
            // 64 MiB offered in 64 KiB buffers made as they are read; `pulled` counts what the store read.
            func offered(_ pulled: NIOLockedValueBox<Int>) -> AsyncStream<ByteBuffer> {
                let chunk = ByteBuffer(repeating: 7, count: 64 << 10)
                return AsyncStream(unfolding: {
                    pulled.withLockedValue { total in
                        guard total < 64 << 20 else { return nil }
                        total += chunk.readableBytes
                        return chunk
                    }
                })
            }
            func expectStopped(_ pulled: NIOLockedValueBox<Int>, _ write: () async throws -> Void) async throws {
                do {
                    try await write()
                    Issue.record("a body past the quota was stored")
                } catch let error as FerryDomainError {
                    #expect(error.code == .quotaExceeded && error.details["QuotaName"] == "StorageBytes")
                }
                #expect(pulled.withLockedValue { $0 } <= (1 << 20) + (64 << 10), "read \(pulled.withLockedValue { $0 }) bytes")
            }
            let before = try await Self.blobs(nodes[0])
            let put = NIOLockedValueBox(0)
            try await expectStopped(put) {
                _ = try await store.putObject(
                    bucket: "bounded", key: "form", attributes: .init(), tags: [], body: offered(put), checksums: [],
                    condition: .none, verify: { _ in }, charge: charge)
            }
            let upload = try await store.createResumableUpload(
                bucket: "bounded", key: "tus", charge: charge, length: nil, info: .init(),
                attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(3600))
            let appended = NIOLockedValueBox(0)
            try await expectStopped(appended) {
                _ = try await store.appendResumable(
                    upload, at: 0, body: offered(appended), checksums: [], byteLimit: 1 << 20, verify: { _ in })
            }
            #expect(try await store.resumableUpload(upload.id)?.offset == 0)
            #expect(try await Self.blobs(nodes[0]) == before)
            #expect(try await store.usage(owner: "FKIAOWNER").storedBytes == 0)

            // What the quota leaves counts the bytes an overwrite of the owner's own object frees, and an append's
            // upload's earlier appends once.
            func bytes(_ count: Int) -> AsyncStream<ByteBuffer> {
                AsyncStream {
                    $0.yield(ByteBuffer(repeating: 1, count: count))
                    $0.finish()
                }
            }
            _ = try await store.putObject(
                bucket: "bounded", key: "own", attributes: .init(), tags: [], body: bytes(768 << 10), checksums: [],
                condition: .none, verify: { _ in }, charge: charge)
            let replaced = try await store.putObject(
                bucket: "bounded", key: "own", attributes: .init(), tags: [], body: bytes(900 << 10), checksums: [],
                condition: .none, verify: { _ in }, charge: charge)
            #expect(replaced.size == 900 << 10)
            try await store.deleteObject(bucket: "bounded", key: "own", condition: .none)
            guard case .appended(let first) = try await store.appendResumable(
                upload, at: 0, body: bytes(512 << 10), checksums: [], byteLimit: 1 << 20, verify: { _ in })
            else { throw ResumableConcatenationTests.NotAppended() }
            guard case .appended(let second) = try await store.appendResumable(
                first, at: first.offset, body: bytes(400 << 10), checksums: [], byteLimit: 1 << 20, verify: { _ in })
            else { throw ResumableConcatenationTests.NotAppended() }
            #expect(second.offset == 912 << 10)
            let third = NIOLockedValueBox(0)
            try await expectStopped(third) {
                _ = try await store.appendResumable(
                    second, at: second.offset, body: offered(third), checksums: [], byteLimit: 1 << 20, verify: { _ in })
            }
            #expect(try await store.resumableUpload(upload.id)?.offset == 912 << 10)
        }
    }

    @Test("two nodes racing parts against one byte quota store no more than the quota")
    func twoNodesRace() async throws {
        try await QuotaBackend.postgres.withNodes(2) { nodes in
            let root = Self.rootMedia(nodes[0])
            let partSize = 1000
            let key = try await root.createAccessKey(
                policy: Self.everything, quota: AccessKeyQuota(storageBytes: Int64(3 * partSize + partSize / 2)))
            #expect(try await nodes[0].client().createBucket("race").status == 200)
            // Four uploads of the key, so that only the key's own lock (not an upload's) serializes their parts.
            var uploads: [String] = []
            for index in 0..<4 {
                uploads.append(try await nodes[index % 2].client(Self.sigV4(key)).createMultipartUpload("race", "object\(index)"))
            }
            let before = try await Self.blobs(nodes[0])
            let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { [uploads] group in
                for index in 0..<12 {
                    let node = nodes[index % 2]
                    group.addTask {
                        let reply = try await node.client(Self.sigV4(key)).uploadPart(
                            "race", "object\(index % 4)", uploadId: uploads[index % 4], number: index / 4 + 1,
                            [UInt8](repeating: UInt8(index), count: partSize))
                        return (reply.status, reply.errorCode)
                    }
                }
                var all: [(Int, String?)] = []
                for try await status in group { all.append(status) }
                return all
            }
            let stored = statuses.filter { $0.0 == 200 }.count
            #expect(stored == 3, "\(statuses)")
            #expect(statuses.filter { $0.0 != 200 }.allSatisfy { $0.0 == 403 && $0.1 == "QuotaExceeded" }, "\(statuses)")
            let usage = try await Self.media(nodes[1], key).usage().usage
            #expect(usage.storageBytes == Int64(3 * partSize))
            // Only the stored parts' bytes are left in the shared store.
            #expect(try await Self.blobs(nodes[1]).subtracting(before).count == 3)
        }
    }

    @Test("past RequestsPerSecond: S3 answers 503 SlowDown and the media API 503 Throttling, each with Retry-After")
    func requestRate() async throws {
        try await QuotaBackend.sqlite.withNodes { nodes in
            let server = nodes[0]
            let (_, key, s3) = try await Self.key(server, AccessKeyQuota(requestsPerSecond: 0.05), bucket: "rate")
            #expect(try await s3.put("rate", "a", [1]).status == 200)
            let slowed = try await s3.put("rate", "b", [1])
            #expect(slowed.status == 503 && slowed.errorCode == "SlowDown", "\(slowed.status) \(slowed.text)")
            // One request per twenty seconds: the token comes back within twenty (less the time since it was taken).
            #expect(slowed.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true)
            // The root key has no rate quota.
            #expect(try await server.client().put("rate", "c", [1]).status == 200)
            do {
                _ = try await Self.media(server, key, configuration: Self.noRetries).usage()
                Issue.record("the media call was not throttled")
            } catch let error as FerryError {
                #expect(error.serverCode == "Throttling" && error.httpStatus == 503, "\(error)")
                #expect(error.retryAfter.map { Self.waitsForAToken(Int($0.components.seconds)) } == true, "\(error)")
            }
            #expect(try await s3.get("rate", "b").status == 503)
            // A browser POST upload signed by the key (its signature is in the form) takes the same turns.
            let fields = try S3BrowserTests.signedFields(
                [["key": "posted"]], credentials: Self.sigV4(key), extra: [("key", "posted")], bucket: "rate")
            let posted = try await S3BrowserTests.post(server.endpoint, bucket: "rate", .init(fields: fields, file: [1]))
            #expect(posted.status == 503 && posted.errorCode == "SlowDown", "\(posted.status) \(posted.text)")
            #expect(try await server.client().get("rate", "posted").status == 404)
            // So does a console session of the key: its media API calls and its part signing.
            var browser = ConsoleBrowser(server)
            _ = try await browser.signIn(key.accessKeyId, key.secretAccessKey)
            let listed = try await browser.api("ListVideos", [:])
            #expect(listed.status == 503 && listed.text.contains("Throttling") && listed.header("Retry-After") != nil, "\(listed.text)")
            let create: [String: Any] = ["filename": "clip.mp4", "type": "video/mp4"]
            let signing = try await browser.send(
                "POST", "/s3/multipart", json: create, headers: [("Uppy-Versions", "@uppy/companion-client=4.0.0")], csrf: false)
            #expect(signing.status == 503 && signing.header("Retry-After") != nil, "\(signing.status) \(signing.text)")
            #expect(try await Self.rootMedia(server).usage(accessKeyId: key.accessKeyId).usage.videos == 0)
            // Counted apart from the service's own 5xx answers, so that an alert on those does not page for a key's
            // rate: the PUT, GET and POST of the object API, the media call, the console's call and its part signing.
            let metrics = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            let throttled = { (group: String) in PrometheusText.sample(metrics, "ferry_http_requests_throttled_total", ["group": group]) }
            #expect(throttled("s3") == 3, "\(metrics)")
            #expect(throttled("media") == 1 && throttled("console") == 1 && throttled("signing") == 1, "\(metrics)")
        }
    }

    @Test(
        "past RequestsPerSecond: a form upload answers 573 TooManyRequests and the publish API 503 Throttling, each with Retry-After, and neither stores anything",
        arguments: QuotaBackend.allCases)
    func requestRateOfCredentialsInBodies(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let server = nodes[0]
            let (root, key, _) = try await Self.key(server, AccessKeyQuota(requestsPerSecond: 0.05), bucket: "rate")
            // A form upload's token is verified inside the route; the upload then takes a turn of the token's key.
            #expect(try await Self.formUpload(server, key, bucket: "rate", key: "a").status == 200)
            let slowed = try await Self.formUpload(server, key, bucket: "rate", key: "b")
            let answer = (try? JSONSerialization.jsonObject(with: Data(slowed.body))) as? [String: Any] ?? [:]
            #expect(slowed.status == 573 && answer["code"] as? String == "TooManyRequests", "\(slowed.status) \(slowed.text)")
            #expect(slowed.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true)
            #expect(try await server.client().get("rate", "b").status == 404)
            // The root key's tokens have no rate quota.
            let rootKey = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            #expect(try await Self.formUpload(server, rootKey, bucket: "rate", key: "c").status == 200)

            // The publish API: its signature is verified before the route, which then takes a turn of the signer.
            let publisher = try await root.createAccessKey(policy: Self.everything, quota: AccessKeyQuota(requestsPerSecond: 0.05))
            let apply = { () async throws -> S3TestClient.Reply in
                let now = Int(Date().timeIntervalSince1970)
                let signature = PublishSignature(secretId: publisher.accessKeyId, currentTimeStamp: now, expireTime: now + 600)
                    .sign(secretKey: publisher.secretAccessKey)
                let body = try JSONSerialization.data(withJSONObject: ["signature": signature, "videoType": "mp4"])
                return try await server.client().sendRaw(
                    "POST", "/_ferry/ugc/ApplyUploadUGC", headers: [("content-type", "application/json")], body: [UInt8](body))
            }
            let applied = try await apply()
            #expect(applied.status == 200, "\(applied.status) \(applied.text)")
            let throttled = try await apply()
            let refusal = (try? JSONSerialization.jsonObject(with: Data(throttled.body))) as? [String: Any] ?? [:]
            #expect(throttled.status == 503 && refusal["code"] as? String == "Throttling", "\(throttled.status) \(throttled.text)")
            #expect(throttled.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true)
            // Only the first application made a video.
            #expect(try await root.usage(accessKeyId: publisher.accessKeyId).usage.videos == 1)
        }
    }

    @Test(
        "past RequestsPerSecond: a resumable upload's creation and each request naming it take turns of its owner's key, refused with 503 and Retry-After in the protocol's own answer, storing nothing",
        arguments: QuotaBackend.allCases)
    func requestRateOfResumableUploads(_ backend: QuotaBackend) async throws {
        try await backend.withNodes { nodes in
            let server = nodes[0]
            let (_, _, s3) = try await Self.key(server, AccessKeyQuota(requestsPerSecond: 0.05), bucket: "rate")
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/rate/t", headers: tus + [("Upload-Length", "1")], payload: .unsigned)
            #expect(created.status == 201, "\(created.status) \(created.text)")
            let url = server.endpoint + (try #require(created.header("Location").flatMap { URL(string: $0)?.path }))
            // What follows needs only the upload's URL, and counts against the key that created it.
            let head = try await S3TestClient.fetchRaw("HEAD", url, headers: tus)
            #expect(head.status == 503 && head.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true, "\(head.status)")
            #expect(head.header("Tus-Resumable") == "1.0.0")
            let patch = try await S3TestClient.fetchRaw(
                "PATCH", url,
                headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")], body: [1])
            #expect(patch.status == 503 && patch.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true, "\(patch.status) \(patch.text)")
            #expect(try await server.client().get("rate", "t").status == 404)
            let again = try await s3.send(
                "POST", "/_ferry/uploads/s3/rate/u", headers: tus + [("Upload-Length", "1")], payload: .unsigned)
            #expect(again.status == 503 && again.header("Retry-After").flatMap(Int.init).map(Self.waitsForAToken) == true, "\(again.status) \(again.text)")
            // An IETF client is answered in its protocol too.
            let ietf = try await S3TestClient.fetchRaw("HEAD", url, headers: [("Upload-Draft-Interop-Version", "6")])
            #expect(ietf.status == 503 && ietf.header("Upload-Draft-Interop-Version") == "6", "\(ietf.status)")
        }
    }

    /// Whether `seconds` is a `Retry-After` a key at 0.05 requests a second may be given right after its turn: its
    /// token comes back within twenty seconds (the time the test took since is not known, so not exactly twenty).
    static func waitsForAToken(_ seconds: Int) -> Bool { (1...20).contains(seconds) }

    /// A form upload to `/_ferry/form` of one byte at `bucket`/`key`, with an upload token signed by `credentials`.
    static func formUpload(_ server: TestServer, _ credentials: Credentials, bucket: String, key: String) async throws
        -> S3TestClient.Reply
    {
        let token = UploadToken.make(
            accessKey: credentials.accessKeyId, secretKey: credentials.secretAccessKey,
            policy: PutPolicy(scope: "\(bucket):\(key)", deadline: Date().addingTimeInterval(600)))
        let boundary = "ferry-\(UUID().uuidString)"
        var form = ""
        for (name, value) in [("token", token), ("key", key)] {
            form += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n"
        }
        form += "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nx\r\n--\(boundary)--\r\n"
        return try await S3TestClient.fetchRaw(
            "POST", server.endpoint + "/_ferry/form", headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")],
            body: Array(form.utf8))
    }

    @Test("the SDK's retry pipeline waits for Retry-After and then succeeds")
    func sdkHonoursRetryAfter() async throws {
        try await QuotaBackend.sqlite.withNodes { nodes in
            let server = nodes[0]
            let (_, key, s3) = try await Self.key(server, AccessKeyQuota(requestsPerSecond: 1), bucket: "retry")
            var configuration = ObjectStorageClient.Configuration()
            // One retry, after a backoff of at most a millisecond: only by waiting for the server's Retry-After (a
            // second) does the retry find the token back, so a call succeeds only if the SDK honours it.
            configuration.retryPolicy = RetryPolicy(maxRetryCount: 1, baseDelay: .milliseconds(1), maxDelay: .milliseconds(1))
            let client = ObjectStorageClient(endpoint: URL(string: server.endpoint)!, credentials: key, configuration: configuration)
            try await client.putObject([1], bucket: "retry", key: "a", checksumAlgorithm: nil)
            let start = ContinuousClock.now
            try await client.putObject([2], bucket: "retry", key: "b", checksumAlgorithm: nil)
            #expect(ContinuousClock.now - start >= .milliseconds(900))
            #expect(try await server.client().get("retry", "b").body == [2])
            // Without the retry, the same request is refused with the 503 the retry waited out.
            #expect(try await s3.put("retry", "c", [3]).status == 503)
            // The media client goes through the same pipeline.
            let media = Self.media(server, key, configuration: configuration)
            let again = ContinuousClock.now
            #expect(try await media.usage().usage.storageBytes == 2)
            #expect(ContinuousClock.now - again >= .milliseconds(900))
        }
    }

    static var noRetries: ObjectStorageClient.Configuration {
        var configuration = ObjectStorageClient.Configuration()
        configuration.retryPolicy = .none
        return configuration
    }

    @Test("a token bucket holds one second's worth, refills at its rate and says how long to wait")
    func tokenBucket() {
        var bucket = TokenBucket(rate: 2, now: 0)
        #expect(bucket.take(now: 0) == nil)
        #expect(bucket.take(now: 0) == nil)
        #expect(bucket.take(now: 0) == 0.5)
        #expect(bucket.take(now: 0.5) == nil)
        #expect(bucket.take(now: 10) == nil)
        #expect(bucket.take(now: 10) == nil)
        #expect(bucket.take(now: 10) != nil)
        var slow = TokenBucket(rate: 0.25, now: 0)
        #expect(slow.take(now: 0) == nil)
        #expect(slow.take(now: 1) == 3)
        slow.adopt(rate: 1)
        #expect(slow.take(now: 2) == nil)
        // A rate too small to refill in any time asks for the longest wait, whole: it never overflows an Int.
        let limiter = RequestRateLimiter(now: { 0 })
        #expect(limiter.take(key: "k", rate: 1e-20) == nil)
        #expect(limiter.take(key: "k", rate: 1e-20) == Int(RequestRateLimiter.longestWait))
        #expect(AccessKeyQuota(requestsPerSecond: 1e-20).problem != nil)
        #expect(AccessKeyQuota(requestsPerSecond: 0.001).problem == nil)
    }

    @Test("the byte check counts freed bytes and takes a sum past 64 bits as over the limit")
    func byteCheckArithmetic() throws {
        #expect(!StorageQuotaCheck.exceeds(stored: 6, adding: 4, limit: 10))
        #expect(StorageQuotaCheck.exceeds(stored: 6, adding: 5, limit: 10))
        #expect(StorageQuotaCheck.exceeds(stored: .max - 1, adding: 10, limit: .max))
        try StorageQuotaCheck.check(stored: 10, adding: 4, freeing: 4, limit: 10)
        #expect(throws: FerryDomainError.self) { try StorageQuotaCheck.check(stored: 10, adding: 5, freeing: 4, limit: 10) }
    }

    @Test("a quota with a negative limit or an unusable rate is refused")
    func invalidQuota() async throws {
        try await QuotaBackend.sqlite.withNodes { nodes in
            let root = Self.rootMedia(nodes[0])
            for quota in [AccessKeyQuota(storageBytes: -1), AccessKeyQuota(requestsPerSecond: 0)] {
                do {
                    _ = try await root.createAccessKey(policy: Self.everything, quota: quota)
                    Issue.record("\(quota) was taken")
                } catch let error as FerryError {
                    #expect(error.serverCode == "InvalidParameter", "\(error)")
                }
            }
            do {
                try await root.updateAccessKey("FKIAMISSING", quota: .unlimited)
                Issue.record("a missing key was updated")
            } catch let error as FerryError {
                #expect(error.httpStatus == 404, "\(error)")
            }
        }
    }
}
