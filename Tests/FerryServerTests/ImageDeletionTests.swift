import Ferry
import FerryCore
@testable import FerryMedia
@testable import FerryServer
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@Suite("DeleteImage (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
struct ImageDeletionTests {
    /// Runs `body` with one server on `backend` whose webhook events wait in the outbox (the receiver does not exist).
    static func withServer(_ backend: QuotaBackend, _ body: @Sendable @escaping (TestServer) async throws -> Void)
        async throws
    {
        let webhook = {
            var webhook = WebhookConfiguration(url: URL(string: "http://127.0.0.1:9/none")!, secret: "s")
            webhook.initialBackoff = .seconds(600)
            return webhook
        }()
        try await backend.withCatalog { configure in
            try await TestServer.with(configure: {
                configure(&$0)
                $0.webhook = webhook
            }) { server in try await body(server) }
        }
    }

    /// The HTTP status of GetImageInfo for `imageId`, asked with the root key.
    static func infoStatus(_ server: TestServer, _ imageId: String) async throws -> Int {
        try await mediaRequest(server, "GetImageInfo", Array(#"{"ImageId":"\#(imageId)"}"#.utf8)).status
    }

    /// How many `ImageDeleted` events are in the outbox for `imageId`.
    static func deletedEvents(_ server: TestServer, _ imageId: String) async throws -> Int {
        try await events(server, .imageDeleted, imageId)
    }

    /// How many events of `type` are in the outbox for `imageId`.
    static func events(_ server: TestServer, _ type: WebhookEventType, _ imageId: String) async throws -> Int {
        try await server.server.webhooks.pending().filter { $0.type == type && $0.payload.imageId == imageId }.count
    }

    /// How many unfinished multipart uploads of `bucket`/`key` the server's store holds.
    static func unfinishedUploads(_ server: TestServer, _ bucket: String, _ key: String) async throws -> Int {
        try await server.server.store.listMultipartUploads(
            bucket: bucket, prefix: key, delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 1000
        ).uploads.filter { $0.key == key }.count
    }

    /// The server's media library over a store that fails every call on the media bucket (it has none): a deletion
    /// or an expiry stops right after its catalog change, as on a node that stopped there.
    static func failingLibrary(_ server: TestServer) throws -> MediaLibrary {
        let directory = server.dataDirectory + "/failing-store"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = try CatalogObjectStore(
            directory: directory + "/objects", catalog: try SQLiteCatalog(path: directory + "/catalog.sqlite"),
            logger: Logger(label: "ferry.test"))
        let library = server.server.mediaLibrary
        return MediaLibrary(
            catalog: library.catalog, store: store, webhooks: library.webhooks, configuration: library.configuration,
            running: RunningJobs())
    }

    /// The multipart uploads the server has counted as aborted and as expired.
    static func uploadsEnded(_ server: TestServer) async throws -> (aborted: Double, expired: Double) {
        let text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
        let count = { PrometheusText.sample(text, "ferry_multipart_uploads_total", ["event": $0]) ?? 0 }
        return (count("aborted"), count("expired"))
    }

    /// Runs the due removal jobs as a media worker on a node without ffmpeg does, once their five minutes have
    /// passed: claimed among the kinds it takes, run on the server's store, completed. Each must be `imageId`'s;
    /// returns how many ran.
    static func runRemovalJobs(_ server: TestServer, of imageId: String) async throws -> Int {
        let catalog = server.server.mediaCatalog
        let pipeline = MediaPipeline(
            catalog: catalog, store: server.server.store, webhooks: server.server.webhooks, tools: nil,
            configuration: server.server.configuration.mediaProcessing,
            workDirectory: server.dataDirectory + "/removal-work", logger: Logger(label: "ferry.test"))
        let due = Date().addingTimeInterval(MediaLibrary.removalDelay + 1)
        var ran = 0
        while let job = try await catalog.claim(
            worker: "test", lease: .seconds(60), now: due, kinds: pipeline.claimedKinds)
        {
            #expect(job.videoId == imageId)
            try await pipeline.run(job) { _ in }
            #expect(try await catalog.complete(job.id, worker: "test", now: due))
            ran += 1
        }
        return ran
    }

    @Test(
        "an image's owner (or the root key) deletes it: its file and unfinished uploads go, its credentials write nothing more, ImageDeleted is sent; a refused request deletes nothing",
        arguments: QuotaBackend.allCases)
    func deleteImages(_ backend: QuotaBackend) async throws {
        try await Self.withServer(backend) { server in
            let admin = QuotaTests.rootMedia(server)
            let otherKey = try await admin.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
            let other = QuotaTests.media(server, otherKey)
            // A stored image, one with part of its file in an unfinished multipart upload, and another key's image.
            let stored = try await admin.createUploadImage(ext: "png")
            let storedS3 = server.client(stored.auth.credentials)
            #expect(try await storedS3.put(stored.address.bucket, stored.address.fileName, [1, 2, 3]).status == 200)
            let partial = try await admin.createUploadImage(ext: "jpg")
            let partialS3 = server.client(partial.auth.credentials)
            let uploadId = try await partialS3.createMultipartUpload(partial.address.bucket, partial.address.fileName)
            #expect(
                try await partialS3.uploadPart(
                    partial.address.bucket, partial.address.fileName, uploadId: uploadId, number: 1, [4]
                ).status == 200)
            let theirs = try await other.createUploadImage(ext: "gif")
            #expect(
                try await server.client(theirs.auth.credentials).put(theirs.address.bucket, theirs.address.fileName, [5])
                    .status == 200)

            // A request that names a missing image, or another key's, deletes nothing; neither do bad ids.
            let missing = "0123456789abcdef0123456789abcdef"
            #expect(
                await mediaErrorCode { try await admin.deleteImages([stored.id, missing]) } == (404, "InvalidImage.NotFound"))
            #expect(await mediaErrorCode { try await other.deleteImages([stored.id]) } == (403, "Forbidden"))
            for body in [#"{}"#, #"{"ImageIds":""}"#, #"{"ImageIds":"a,,b"}"#, #"{"ImageIds":" , "}"#] {
                let reply = try await mediaRequest(server, "DeleteImage", Array(body.utf8))
                #expect(reply.status == 400, "\(body)")
            }
            let many = (0..<21).map { String(format: "%032x", $0) }.joined(separator: ",")
            let tooMany = try await mediaRequest(server, "DeleteImage", Array(#"{"ImageIds":"\#(many)"}"#.utf8))
            #expect(tooMany.status == 400)
            #expect(String(decoding: tooMany.body, as: UTF8.self).contains("at most 20 images"))
            #expect(try await server.client().get(stored.address.bucket, stored.address.fileName).status == 200)
            #expect(try await Self.infoStatus(server, stored.id) == 200)

            // The owner deletes two (one named twice): the answer names each once, in the order asked.
            let reply = try await mediaRequest(
                server, "DeleteImage", Array(#"{"ImageIds":"\#(stored.id), \#(partial.id),\#(stored.id)"}"#.utf8))
            #expect(reply.status == 200)
            let answer = try MediaContract.decode(MediaContract.DeleteImageAnswer.self, from: Data(reply.body))
            #expect(answer.deletedImageIds == [stored.id, partial.id])
            for ticket in [stored, partial] {
                #expect(try await server.server.mediaCatalog.image(ticket.id)?.status == "Deleted")
                #expect(try await Self.infoStatus(server, ticket.id) == 404)
                #expect(await mediaErrorCode { _ = try await admin.refreshUploadImage(imageId: ticket.id) }.0 == 404)
                #expect(try await server.client().get(ticket.address.bucket, ticket.address.fileName).status == 404)
                #expect(try await Self.deletedEvents(server, ticket.id) == 1)
            }
            let uploads = try await server.server.store.listMultipartUploads(
                bucket: partial.address.bucket, prefix: "image/", delimiter: nil, keyMarker: "", uploadIdMarker: "",
                maxUploads: 1000)
            #expect(uploads.uploads.isEmpty)
            // The credentials issued before store nothing more.
            #expect(try await storedS3.put(stored.address.bucket, stored.address.fileName, [9]).status == 403)
            #expect(try await partialS3.put(partial.address.bucket, partial.address.fileName, [9]).status == 403)
            #expect(try await server.client().get(stored.address.bucket, stored.address.fileName).status == 404)

            // Deleting again succeeds (a retry whose answer was lost) without a second event; another key's deleted
            // image is not found.
            try await admin.deleteImages([stored.id])
            #expect(try await Self.deletedEvents(server, stored.id) == 1)
            #expect(await mediaErrorCode { try await other.deleteImages([stored.id]) }.0 == 404)
            // The root key deletes another key's image.
            try await admin.deleteImages([theirs.id])
            #expect(try await Self.infoStatus(server, theirs.id) == 404)
            #expect(try await server.client().get(theirs.address.bucket, theirs.address.fileName).status == 404)
        }
    }

    @Test(
        "an image a stopped node left Deleted with its file is not found, takes no writes, and deleting it again removes the file; a file stored for it later is removed",
        arguments: QuotaBackend.allCases)
    func interruptedDeletion(_ backend: QuotaBackend) async throws {
        try await Self.withServer(backend) { server in
            let admin = QuotaTests.rootMedia(server)
            let image = try await admin.createUploadImage(ext: "png")
            let s3 = server.client(image.auth.credentials)
            #expect(try await s3.put(image.address.bucket, image.address.fileName, [1, 2, 3]).status == 200)
            // What a node that stopped between the status and the removal leaves: the status with its event, and the
            // file.
            let event = try server.server.webhooks.events(.imageDeleted(imageId: image.id))
            try await server.server.mediaCatalog.updateImage(image.id) { image in
                image.status = ImageStatus.deleted
                return .save(notify: event)
            }
            #expect(try await Self.infoStatus(server, image.id) == 404)
            #expect(try await s3.put(image.address.bucket, image.address.fileName, [4]).status == 403)
            #expect(try await server.client().get(image.address.bucket, image.address.fileName).body == [1, 2, 3])
            try await admin.deleteImages([image.id])
            #expect(try await server.client().get(image.address.bucket, image.address.fileName).status == 404)
            #expect(try await Self.deletedEvents(server, image.id) == 1)

            // A file that reaches storage for it afterwards (an upload begun before, past the write check) is removed
            // when the library hears of it.
            _ = try await server.server.store.putObject(
                bucket: image.address.bucket, key: image.address.fileName, attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: "late"))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            let object = try await server.server.store.object(bucket: image.address.bucket, key: image.address.fileName)
            // Heard of as the library does when the deletion comes between its look and its update: the image stays
            // deleted.
            try await server.server.mediaLibrary.imageStored(image.id, object: object)
            #expect(try await server.server.mediaCatalog.image(image.id)?.status == ImageStatus.deleted)
            await server.server.mediaLibrary.objectStored(object)
            #expect(try await server.client().get(image.address.bucket, image.address.fileName).status == 404)
        }
    }

    @Test(
        "a deletion stopped after the image became Deleted is finished by its removal job, also on a worker without ffmpeg: the file and its unfinished upload go, ImageDeleted is sent once; the job leaves an image that is not gone as it is",
        arguments: QuotaBackend.allCases)
    func removalJobFinishesDeletion(_ backend: QuotaBackend) async throws {
        try await Self.withServer(backend) { server in
            let admin = QuotaTests.rootMedia(server)
            let catalog = server.server.mediaCatalog
            let image = try await admin.createUploadImage(ext: "png")
            let (bucket, key) = (image.address.bucket, image.address.fileName)
            let s3 = server.client(image.auth.credentials)
            // Part of a file in an unfinished multipart upload, and the file.
            let uploadId = try await s3.createMultipartUpload(bucket, key)
            #expect(try await s3.uploadPart(bucket, key, uploadId: uploadId, number: 1, [4]).status == 200)
            #expect(try await s3.put(bucket, key, [1, 2, 3]).status == 200)
            let record = try #require(try await catalog.image(image.id))

            // The deletion stops after its catalog change: the image is Deleted with its event; its file and upload
            // are left, and its removal job waits five minutes for the node that enqueued it.
            await #expect(throws: FerryDomainError.self) { try await Self.failingLibrary(server).delete(record) }
            #expect(try await catalog.image(image.id)?.status == ImageStatus.deleted)
            #expect(try await Self.infoStatus(server, image.id) == 404)
            #expect(try await server.client().get(bucket, key).body == [1, 2, 3])
            #expect(try await Self.unfinishedUploads(server, bucket, key) == 1)
            #expect(try await Self.deletedEvents(server, image.id) == 1)
            let jobs = try await catalog.jobs(videoId: image.id)
            #expect(jobs.map(\.state) == [.queued])
            let job = try #require(jobs.first)
            #expect(job.runAt > Date().addingTimeInterval(MediaLibrary.removalDelay - 60))

            // The job, run once due, removes both, the upload counted as aborted; nothing is sent again.
            let endedBefore = try await Self.uploadsEnded(server)
            #expect(try await Self.runRemovalJobs(server, of: image.id) == 1)
            let endedAfter = try await Self.uploadsEnded(server)
            #expect(
                endedAfter.aborted - endedBefore.aborted == 1 && endedAfter.expired == endedBefore.expired,
                "\(endedBefore) \(endedAfter)")
            #expect(try await server.client().get(bucket, key).status == 404)
            #expect(try await Self.unfinishedUploads(server, bucket, key) == 0)
            #expect(try await Self.deletedEvents(server, image.id) == 1)
            #expect(try await catalog.jobs(videoId: image.id).map(\.state) == [.succeeded])
            #expect(try await catalog.image(image.id)?.status == ImageStatus.deleted)

            // A job of that kind for an image that is neither deleted nor expired removes nothing.
            let live = try await admin.createUploadImage(ext: "jpg")
            let liveS3 = server.client(live.auth.credentials)
            #expect(try await liveS3.put(live.address.bucket, live.address.fileName, [7]).status == 200)
            try await catalog.enqueue([MediaJob(videoId: live.id, kind: job.kind)])
            #expect(try await Self.runRemovalJobs(server, of: live.id) == 1)
            #expect(try await server.client().get(live.address.bucket, live.address.fileName).body == [7])
            #expect(try await catalog.image(live.id)?.status == ImageStatus.uploaded)
        }
    }

    @Test(
        "an expiry stopped after the image became UploadFail is finished by its removal job: its unfinished upload and a file stored for it unheard of go, ImageUploadExpired is sent once",
        arguments: QuotaBackend.allCases)
    func removalJobFinishesExpiry(_ backend: QuotaBackend) async throws {
        try await Self.withServer(backend) { server in
            let admin = QuotaTests.rootMedia(server)
            let catalog = server.server.mediaCatalog
            let image = try await admin.createUploadImage(ext: "png")
            let (bucket, key) = (image.address.bucket, image.address.fileName)
            let s3 = server.client(image.auth.credentials)
            let uploadId = try await s3.createMultipartUpload(bucket, key)
            #expect(try await s3.uploadPart(bucket, key, uploadId: uploadId, number: 1, [4]).status == 200)

            // The expiry stops after its catalog change (the pass logs the failure and goes on): the image is
            // UploadFail with its event, its upload is left.
            let later = Date().addingTimeInterval(server.server.configuration.uploadingVideoMaxAge + 60)
            _ = try await Self.failingLibrary(server).expireUnfinishedUploads(now: later)
            #expect(try await catalog.image(image.id)?.status == ImageStatus.uploadFailed)
            #expect(try await Self.events(server, .imageUploadExpired, image.id) == 1)
            #expect(try await Self.unfinishedUploads(server, bucket, key) == 1)
            #expect(try await catalog.jobs(videoId: image.id).map(\.state) == [.queued])
            // A file stored for it that the library never heard of (an upload begun before, its node stopped before
            // telling the library) is left too.
            _ = try await server.server.store.putObject(
                bucket: bucket, key: key, attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: "late"))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            #expect(try await server.client().get(bucket, key).status == 200)

            // The job, run once due, removes both, the upload counted as expired; nothing is sent again.
            let expiredBefore = try await Self.uploadsEnded(server)
            #expect(try await Self.runRemovalJobs(server, of: image.id) == 1)
            let expiredAfter = try await Self.uploadsEnded(server)
            #expect(
                expiredAfter.expired - expiredBefore.expired == 1 && expiredAfter.aborted == expiredBefore.aborted,
                "\(expiredBefore) \(expiredAfter)")
            #expect(try await server.client().get(bucket, key).status == 404)
            #expect(try await Self.unfinishedUploads(server, bucket, key) == 0)
            #expect(try await Self.events(server, .imageUploadExpired, image.id) == 1)
            #expect(try await catalog.image(image.id)?.status == ImageStatus.uploadFailed)
        }
    }

    @Test(
        "a video's snapshot is not deleted apart from its live video (409); it is deleted with the video (no longer found), and deleting it again is accepted",
        arguments: QuotaBackend.allCases)
    func videoSnapshot(_ backend: QuotaBackend) async throws {
        try await Self.withServer(backend) { server in
            let admin = QuotaTests.rootMedia(server)
            let video = try await admin.createUploadVideo(.init(title: "With cover", fileName: "v.mp4"))
            // The image record a snapshot job saves for the cover it takes.
            let snapshot = ImageRecord(
                imageId: Hex.randomId(), imageType: "cover", status: ImageStatus.uploaded, size: 1,
                bucket: video.address.bucket, key: "video/\(video.id)/snapshots/job.jpg", createdAt: Date())
            try await server.server.mediaCatalog.saveImage(snapshot)
            try await server.server.mediaCatalog.updateVideo(video.id) { record in
                record.snapshotImageId = snapshot.imageId
                return .save()
            }
            #expect(
                await mediaErrorCode { try await admin.deleteImages([snapshot.imageId]) }
                    == (409, "InvalidImage.VideoSnapshot"))
            #expect(try await server.server.mediaCatalog.image(snapshot.imageId)?.status == ImageStatus.uploaded)
            try await admin.deleteVideos([video.id])
            #expect(try await server.server.mediaCatalog.image(snapshot.imageId)?.status == ImageStatus.deleted)
            #expect(await mediaErrorCode { _ = try await admin.getImageInfo(imageId: snapshot.imageId) }.0 == 404)
            try await admin.deleteImages([snapshot.imageId])
            #expect(try await server.server.mediaCatalog.image(snapshot.imageId)?.status == ImageStatus.deleted)
        }
    }
}
