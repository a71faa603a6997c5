import FerryCore
@testable import FerryServer
import FerryTestSupport
import Foundation
import Testing

@Suite("Media catalog, access keys and webhook outbox (every catalog implementation)", .timeLimit(.minutes(10)))
struct CatalogTests {
    static func video(_ id: String, owner: String = "k1", status: String = "Uploading", at seconds: Double = 0) -> VideoRecord {
        let date = Date(timeIntervalSince1970: 1_800_000_000 + seconds)
        return VideoRecord(
            videoId: id, title: "Title \(id)", fileName: "\(id).mp4", status: status, bucket: "ferry-media",
            key: "video/\(id)/source.mp4", owner: owner, createdAt: date, updatedAt: date)
    }

    @Test("videos: stored records round-trip; found by id and by object; listed newest first with filters, paging and owner", arguments: JobQueueImplementation.allCases)
    func videos(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            var first = Self.video("v1", at: 1)
            first.tags = "beach,sun"
            first.cateId = 7
            first.mezzanine = MezzanineInfo(size: 42)
            first.renditions = [Rendition(definition: "LD", format: "mp4", path: "LD.mp4", size: 9)]
            try await catalog.saveVideo(first)
            try await catalog.saveVideo(Self.video("v2", owner: "k2", status: "Normal", at: 2))
            var third = Self.video("v3", status: "Normal", at: 3)
            third.tags = "sun"
            try await catalog.saveVideo(third)
            try await catalog.saveVideo(Self.video("v4", status: "Deleted", at: 4))

            #expect(try await catalog.video("v1") == first)
            #expect(try await catalog.video(bucket: "ferry-media", key: "video/v3/source.mp4")?.videoId == "v3")
            #expect(try await catalog.video("nope") == nil)
            let all = try await catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10)
            #expect(all.videos.map(\.videoId) == ["v3", "v2", "v1"] && all.total == 3)
            #expect(try await catalog.videos(status: "Normal", cateId: nil, tag: nil, owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v3", "v2"])
            #expect(try await catalog.videos(status: nil, cateId: 7, tag: nil, owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v1"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: "sun", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v3", "v1"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: "su", owner: nil, offset: 0, limit: 10).total == 0)
            // A tag matches whole, as written: case kept, wildcard characters literal.
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: "SUN", owner: nil, offset: 0, limit: 10).total == 0)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: "s_n", owner: nil, offset: 0, limit: 10).total == 0)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: "%", owner: nil, offset: 0, limit: 10).total == 0)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, owner: "k1", offset: 0, limit: 10).videos.map(\.videoId) == ["v3", "v1"])
            // Title search: a substring, ASCII case ignored, wildcard characters taken literally.
            var odd = Self.video("v5", at: 5)
            odd.title = "50% off_sale"
            try await catalog.saveVideo(odd)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "title V", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v3", "v2", "v1"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "v2", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v2"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "0% o", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v5"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "%", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v5"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "f_s", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v5"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "e_v", owner: nil, offset: 0, limit: 10).total == 0)
            // ASCII letters only, whatever the database's locale: É is not é.
            var accented = Self.video("v6", at: 6)
            accented.title = "Émile Straße"
            try await catalog.saveVideo(accented)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "MILE STRAßE", owner: nil, offset: 0, limit: 10).videos.map(\.videoId) == ["v6"])
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "émile", owner: nil, offset: 0, limit: 10).total == 0)
            // A wildcard character followed by a combining mark is still literal.
            accented.title = "Cafe\u{301}"
            try await catalog.saveVideo(accented)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "e\u{301}", owner: nil, offset: 0, limit: 10).total == 1)
            #expect(try await catalog.videos(status: nil, cateId: nil, tag: nil, title: "_\u{301}", owner: nil, offset: 0, limit: 10).total == 0)
            try await catalog.saveVideo(Self.video("v6", status: "Deleted", at: 6))
            try await catalog.saveVideo(Self.video("v5", status: "Deleted", at: 5))
            let page = try await catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 1, limit: 1)
            #expect(page.videos.map(\.videoId) == ["v2"] && page.total == 3)
            #expect(try await catalog.uploadingVideos(createdBefore: Date(timeIntervalSince1970: 1_800_000_002), after: "", limit: 10).map(\.videoId) == ["v1"])
            // A walk through uploading videos, a page at a time in id order: each once, the later ones not at all.
            for (id, at) in [("u3", 6.0), ("u1", 7.0), ("u2", 8.0), ("u4", 20.0)] { try await catalog.saveVideo(Self.video(id, at: at)) }
            let before = Date(timeIntervalSince1970: 1_800_000_010)
            #expect(try await catalog.uploadingVideos(createdBefore: before, after: "", limit: 2).map(\.videoId) == ["u1", "u2"])
            #expect(try await catalog.uploadingVideos(createdBefore: before, after: "u2", limit: 2).map(\.videoId) == ["u3", "v1"])
            #expect(try await catalog.uploadingVideos(createdBefore: before, after: "v1", limit: 2).isEmpty)
        }
    }

    @Test("a client token makes creation idempotent per owner while the video uploads, also for requests racing each other", arguments: JobQueueImplementation.allCases)
    func clientTokens(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let created = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        var video = Self.video("race\(index)")
                        video.clientToken = "file-token"
                        return try await catalog.createVideo(video).videoId
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(created.count == 1)
            let id = try #require(created.first)
            #expect(try await catalog.uploadingVideo(owner: "k1", clientToken: "file-token")?.videoId == id)
            #expect(try await catalog.uploadingVideo(owner: "k2", clientToken: "file-token") == nil)
            var other = Self.video("other", owner: "k2")
            other.clientToken = "file-token"
            #expect(try await catalog.createVideo(other).videoId == "other")
            // Once stored, the token makes a new video.
            try await catalog.updateVideo(id) { video in
                video.status = "UploadSucc"
                return .save()
            }
            var again = Self.video("again")
            again.clientToken = "file-token"
            #expect(try await catalog.createVideo(again).videoId == "again")
            // A token used once answers its video whatever the video's status since.
            var once = Self.video("once")
            once.clientToken = "once-token"
            #expect(try await catalog.createVideo(once, videoLimit: nil, tokenUsedOnce: true).videoId == "once")
            try await catalog.updateVideo("once") { video in
                video.status = "Deleted"
                return .save()
            }
            var onceMore = Self.video("onceMore")
            onceMore.clientToken = "once-token"
            #expect(try await catalog.createVideo(onceMore, videoLimit: nil, tokenUsedOnce: true).videoId == "once")
            #expect(try await catalog.createVideo(onceMore, videoLimit: nil, tokenUsedOnce: false).videoId == "onceMore")
        }
    }

    @Test("a client token makes image creation idempotent per owner and image type while the image uploads, also for requests racing each other", arguments: JobQueueImplementation.allCases)
    func imageClientTokens(_ implementation: JobQueueImplementation) async throws {
        @Sendable func image(_ id: String, owner: String? = "k1", type: String = "default") -> ImageRecord {
            ImageRecord(
                imageId: id, imageType: type, status: "Uploading", bucket: "ferry-media", key: "image/\(type)/\(id).png",
                createdAt: Date(timeIntervalSince1970: 1_800_000_000), owner: owner, clientToken: "file-token")
        }
        try await implementation.with { catalog in
            let created = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<8 {
                    group.addTask { try await catalog.createImage(image("race\(index)")).imageId }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(created.count == 1)
            let id = try #require(created.first)
            #expect(try await catalog.image(id)?.clientToken == "file-token")
            // Another owner (or none, the root key's images of old), another type: other images.
            #expect(try await catalog.createImage(image("other", owner: "k2")).imageId == "other")
            #expect(try await catalog.createImage(image("ownerless", owner: nil)).imageId == "ownerless")
            #expect(try await catalog.createImage(image("ownerless2", owner: nil)).imageId == "ownerless")
            #expect(try await catalog.createImage(image("cover", type: "cover")).imageId == "cover")
            #expect(try await catalog.createImage(image("again")).imageId == id)
            // Once stored, the token makes a new image.
            try await catalog.updateImage(id) { image in
                image.status = "Uploaded"
                return .save()
            }
            #expect(try await catalog.createImage(image("after")).imageId == "after")
            // Without a token, always a new one.
            var plain = image("plain")
            plain.clientToken = nil
            #expect(try await catalog.createImage(plain).imageId == "plain")
            #expect(try await catalog.image("plain") != nil)
        }
    }

    @Test("images and access keys round-trip; a change stores its webhook events with it; a key's status changes", arguments: JobQueueImplementation.allCases)
    func imagesAndKeys(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let image = ImageRecord(
                imageId: "i1", imageType: "cover", title: "t", tags: nil, cateId: nil, description: nil, status: "Uploading",
                size: nil, bucket: "ferry-media", key: "image/cover/i1.jpg", createdAt: Date(timeIntervalSince1970: 1_800_000_000),
                owner: "k1")
            try await catalog.saveImage(image)
            var stored = image
            stored.status = "Uploaded"
            stored.size = 10
            // A change's webhook events are stored with it, in order; a change not saved stores none.
            @Sendable func event(_ id: String) -> StoredWebhookEvent {
                StoredWebhookEvent(
                    event: WebhookEvent(
                        id: id, type: WebhookEventType(rawValue: "ImageUploadComplete"), payload: WebhookPayload(imageId: "i1"),
                        createdAt: Date(), attempts: 0, deliveredAt: nil, failedAt: nil),
                    body: Array(id.utf8), traceParent: nil)
            }
            let saved = try await catalog.updateImage("i1") { image in
                image.status = "Uploaded"
                image.size = 10
                return .save(notify: [event("evt_a"), event("evt_b")])
            }
            #expect(saved == stored)
            #expect(try await catalog.image("i1") == stored)
            #expect(try await catalog.updateImage("i1") { image in image.size = 11; return .keep } == nil)
            #expect(try await catalog.updateImage("nope") { _ in .save(notify: [event("evt_c")]) } == nil)
            let outbox = try #require(catalog as? any WebhookStore)
            #expect(try await outbox.undeliveredWebhookEvents().map(\.id) == ["evt_a", "evt_b"])
            #expect(try await outbox.nextPendingWebhookEvent()?.body == Array("evt_a".utf8))
            // Changes racing each other are each made to what the one before saved: none is lost.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await catalog.updateImage("i1") { image in
                            image.title = (image.title ?? "") + "+"
                            return .save()
                        }
                    }
                }
                try await group.waitForAll()
            }
            stored.title = "t++++++++"
            #expect(try await catalog.image("i1") == stored)
            #expect(try await catalog.image(bucket: "ferry-media", key: "image/cover/i1.jpg")?.imageId == "i1")
            // Uploading images, a page at a time in id order; an uploaded one, or one created later, is not among them.
            let later = Date(timeIntervalSince1970: 1_800_000_100)
            #expect(try await catalog.uploadingImages(createdBefore: later, after: "", limit: 10).isEmpty)
            for id in ["i3", "i2"] {
                var other = image
                other.imageId = id
                other.key = "image/cover/\(id).jpg"
                try await catalog.saveImage(other)
            }
            #expect(try await catalog.uploadingImages(createdBefore: later, after: "", limit: 1).map(\.imageId) == ["i2"])
            #expect(try await catalog.uploadingImages(createdBefore: later, after: "i2", limit: 1).map(\.imageId) == ["i3"])
            #expect(try await catalog.uploadingImages(createdBefore: later, after: "i3", limit: 1).isEmpty)
            #expect(try await catalog.uploadingImages(createdBefore: image.createdAt, after: "", limit: 10).isEmpty)

            let policy = AccessPolicy(statements: [.init(actions: ["media:*"])])
            let key = StoredAccessKey(
                accessKeyId: "FKIA1", secretAccessKey: "secret-1", policy: policy, status: .active, description: "d",
                createdAt: Date(timeIntervalSince1970: 1_800_000_000))
            try await catalog.insertAccessKey(key)
            #expect(try await catalog.accessKey("FKIA1") == key)
            #expect(try await catalog.accessKeys().map(\.accessKeyId) == ["FKIA1"])
            #expect(try await catalog.setAccessKeyStatus("FKIA1", .disabled))
            #expect(try await catalog.accessKey("FKIA1")?.status == .disabled)
            #expect(try await catalog.setAccessKeyStatus("nope", .disabled) == false)
        }
    }

    @Test("a video change stores the images it makes in its transaction: both are visible once it saves, neither when it is kept or there is no video", arguments: JobQueueImplementation.allCases)
    func videoChangeWithImages(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            @Sendable func cover(_ id: String) -> ImageRecord {
                ImageRecord(
                    imageId: id, imageType: "cover", title: "Title v1", tags: nil, cateId: nil, description: nil,
                    status: "Uploaded", size: 5, bucket: "ferry-media", key: "video/v1/snapshots/\(id).jpg",
                    createdAt: Date(timeIntervalSince1970: 1_800_000_000), owner: "k1")
            }
            /// The snapshot's change: the cover's record with the video that names it, unless the video has a cover.
            @Sendable func snapshot(_ video: inout VideoRecord, _ image: ImageRecord) -> RecordChange {
                guard video.coverURL == nil, video.snapshotKey == nil else { return .keep }
                video.snapshotKey = image.key
                video.snapshotImageId = image.imageId
                return .save(images: [image])
            }
            var video = Self.video("v1", status: "Normal")
            video.coverURL = "https://example.com/cover.jpg"
            try await catalog.saveVideo(video)

            // Declined (the video got a cover meanwhile): no image record is left behind.
            #expect(try await catalog.updateVideo("v1") { snapshot(&$0, cover("c1")) } == nil)
            #expect(try await catalog.image("c1") == nil)
            #expect(try await catalog.image(bucket: "ferry-media", key: "video/v1/snapshots/c1.jpg") == nil)
            // No such video: nothing either.
            #expect(try await catalog.updateVideo("nope") { snapshot(&$0, cover("c2")) } == nil)
            #expect(try await catalog.image("c2") == nil)

            // Saved: the video names the cover, and the cover's record is there.
            video.coverURL = nil
            try await catalog.saveVideo(video)
            let saved = try await catalog.updateVideo("v1") { snapshot(&$0, cover("c3")) }
            #expect(saved?.snapshotImageId == "c3")
            #expect(try await catalog.video("v1")?.snapshotImageId == "c3")
            #expect(try await catalog.video("v1")?.snapshotKey == "video/v1/snapshots/c3.jpg")
            #expect(try await catalog.image("c3") == cover("c3"))
            #expect(try await catalog.image(bucket: "ferry-media", key: "video/v1/snapshots/c3.jpg")?.imageId == "c3")
            // Once it has its cover, another snapshot's change is declined and leaves no record.
            #expect(try await catalog.updateVideo("v1") { snapshot(&$0, cover("c4")) } == nil)
            #expect(try await catalog.image("c4") == nil)
        }
    }

    @Test("ended console sessions are recorded by digest until they expire", arguments: JobQueueImplementation.allCases)
    func revokedSessions(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            #expect(try await catalog.isSessionRevoked("d1") == false)
            try await catalog.revokeSession("d1", expiration: start.addingTimeInterval(3600), now: start)
            try await catalog.revokeSession("d1", expiration: start.addingTimeInterval(3600), now: start)
            try await catalog.revokeSession("d2", expiration: start.addingTimeInterval(60), now: start)
            #expect(try await catalog.isSessionRevoked("d1"))
            #expect(try await catalog.isSessionRevoked("d2"))
            #expect(try await catalog.isSessionRevoked("d3") == false)
            // Recording another forgets those expired by then: their tokens are refused as expired anyway.
            try await catalog.revokeSession("d3", expiration: start.addingTimeInterval(7200), now: start.addingTimeInterval(61))
            #expect(try await catalog.isSessionRevoked("d2") == false)
            #expect(try await catalog.isSessionRevoked("d1"))
            #expect(try await catalog.isSessionRevoked("d3"))
        }
    }

    @Test("the webhook outbox keeps each video's events in order until delivered or given up; another video's do not wait for them", arguments: JobQueueImplementation.allCases)
    func webhookStore(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let store = try #require(catalog as? any WebhookStore)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            // Two events of video v0, then one of v2 and one of image i3.
            let subjects: [(videoId: String?, imageId: String?)] = [("v0", nil), ("v0", nil), ("v2", nil), (nil, "i3")]
            for (index, subject) in subjects.enumerated() {
                let event = WebhookEvent(
                    id: "evt\(index)", type: WebhookEventType(rawValue: ["A", "B", "C", "D"][index]),
                    payload: WebhookPayload(
                        videoId: subject.videoId, imageId: subject.imageId, size: 42,
                        streamInfos: [WebhookStreamInfo(definition: "LD", format: "mp4", size: 7, fps: 29.97)]),
                    createdAt: now.addingTimeInterval(Double(index)), attempts: 0, deliveredAt: nil, failedAt: nil)
                try await store.insertWebhookEvent(event, body: Array("body-\(index)".utf8))
            }
            let first = try #require(try await store.nextPendingWebhookEvent())
            #expect(first.event.id == "evt0" && first.body == Array("body-0".utf8) && first.nextAttemptAt == now)
            #expect(first.event.payload.streamInfos == [WebhookStreamInfo(definition: "LD", format: "mp4", size: 7, fps: 29.97)])
            #expect(first.event.payload.videoId == "v0" && first.event.payload.size == 42 && first.event.type.rawValue == "A")
            // evt0 waits for its next attempt: v0's next event waits behind it, v2's and i3's go in the meantime.
            try await store.recordWebhookAttemptFailure("evt0", error: "503", nextAttemptAt: now.addingTimeInterval(5), now: now)
            #expect(try await store.nextPendingWebhookEvent()?.event.id == "evt2")
            try await store.markWebhookEventDelivered("evt2", at: now)
            #expect(try await store.nextPendingWebhookEvent()?.event.id == "evt3")
            try await store.markWebhookEventDelivered("evt3", at: now)
            let retried = try #require(try await store.nextPendingWebhookEvent())
            #expect(retried.event.id == "evt0" && retried.event.attempts == 1 && retried.nextAttemptAt == now.addingTimeInterval(5))
            try await store.markWebhookEventDelivered("evt0", at: now)
            #expect(try await store.nextPendingWebhookEvent()?.event.id == "evt1")
            try await store.recordWebhookAttemptFailure("evt1", error: "gone", nextAttemptAt: nil, now: now)
            #expect(try await store.nextPendingWebhookEvent() == nil)
            let undelivered = try await store.undeliveredWebhookEvents()
            #expect(undelivered.map(\.id) == ["evt1"])
            #expect(undelivered.first?.failedAt == now)

            // The console's view: newest first, with the last error; a failed event can be tried again.
            let recent = try await store.recentWebhookEvents(limit: 3)
            #expect(recent.map(\.event.id) == ["evt3", "evt2", "evt1"])
            #expect(recent.last?.lastError == "gone" && recent.first?.lastError == nil)
            let pending = WebhookEvent(
                id: "evt4", type: WebhookEventType(rawValue: "E"), payload: WebhookPayload(videoId: "v4"),
                createdAt: now.addingTimeInterval(4), attempts: 0, deliveredAt: nil, failedAt: nil)
            try await store.insertWebhookEvent(pending, body: Array("body-4".utf8))
            #expect(try await store.retryWebhookEvent("evt4", now: now) == false)  // pending, not failed
            #expect(try await store.retryWebhookEvent("evt0", now: now) == false)  // delivered
            #expect(try await store.retryWebhookEvent("evt1", now: now.addingTimeInterval(60)))
            #expect(try await store.nextPendingWebhookEvent()?.event.id == "evt4")
            try await store.markWebhookEventDelivered("evt4", at: now)
            let again = try #require(try await store.nextPendingWebhookEvent())
            #expect(again.event.id == "evt1" && again.event.attempts == 0 && again.event.failedAt == nil)
            #expect(again.nextAttemptAt == now.addingTimeInterval(60))
        }
    }

    @Test("a service lease is held by one node at a time, renewed by it, and taken over once it expires", arguments: JobQueueImplementation.allCases)
    func serviceLeases(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { catalog in
            let leases = try #require(catalog as? any ServiceLeaseStore)
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            #expect(try await leases.acquireLease("delivery", owner: "a", duration: .seconds(30), now: t0))
            #expect(try await leases.acquireLease("delivery", owner: "b", duration: .seconds(30), now: t0.addingTimeInterval(10)) == false)
            #expect(try await leases.acquireLease("collector", owner: "b", duration: .seconds(30), now: t0))
            #expect(try await leases.acquireLease("delivery", owner: "a", duration: .seconds(30), now: t0.addingTimeInterval(20)))
            #expect(try await leases.acquireLease("delivery", owner: "b", duration: .seconds(30), now: t0.addingTimeInterval(45)) == false)
            #expect(try await leases.acquireLease("delivery", owner: "b", duration: .seconds(30), now: t0.addingTimeInterval(51)))
            try await leases.releaseLease("delivery", owner: "a")
            #expect(try await leases.acquireLease("delivery", owner: "a", duration: .seconds(30), now: t0.addingTimeInterval(52)) == false)
            try await leases.releaseLease("delivery", owner: "b")
            #expect(try await leases.acquireLease("delivery", owner: "a", duration: .seconds(30), now: t0.addingTimeInterval(53)))
        }
    }
}
