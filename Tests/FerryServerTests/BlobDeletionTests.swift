import FerryCore
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@testable import FerryMedia
@testable import FerryServer
@testable import FerryStorage

/// An object store over a fresh SQLite catalog with its blobs in moto (an S3 server no one here wrote), and a client
/// that looks at the blobs there directly.
struct S3BackedHarness: Sendable {
    let store: CatalogObjectStore
    let catalog: SQLiteCatalog
    let catalogPath: String
    let location: S3StoreLocation
    let peer: S3TestClient
    let grace: Duration

    /// Another node: an object store of its own over the same catalog and blobs.
    func otherNode() async throws -> CatalogObjectStore {
        var storage = S3BlobStorage(location: location)
        storage.retireAfter = grace
        return CatalogObjectStore(blobs: storage, catalog: catalog, logger: Logger(label: "ferry.test"))
    }

    static func with<T: Sendable>(grace: Duration, _ body: @Sendable (S3BackedHarness) async throws -> T) async throws -> T {
        let moto = try await MotoServer.start()
        let directory = TemporaryDirectory.make("ferry-blob-deletions")
        do {
            let credentials = SigV4Credentials(accessKeyId: "FERRYMOTOKEY", secretAccessKey: "ferry-moto-secret")
            let location = S3StoreLocation(endpoint: moto.endpoint, bucket: "ferry-blobs", prefix: "node", credentials: credentials)
            var storage = S3BlobStorage(location: location)
            storage.retireAfter = grace
            try await storage.prepare()
            let path = directory + "/catalog.sqlite"
            let catalog = try SQLiteCatalog(path: path)
            let store = CatalogObjectStore(blobs: storage, catalog: catalog, logger: Logger(label: "ferry.test"))
            try await store.createBucket("bkt")
            let harness = S3BackedHarness(
                store: store, catalog: catalog, catalogPath: path, location: location,
                peer: S3TestClient(endpoint: moto.endpoint, credentials: credentials), grace: grace)
            let result = try await body(harness)
            await moto.stop()
            try? FileManager.default.removeItem(atPath: directory)
            return result
        } catch {
            await moto.stop()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// The blobs in moto, by name.
    func blobs() async throws -> Set<String> {
        let reply = try await peer.send(
            "GET", S3TestClient.path(location.bucket), query: [("list-type", "2"), ("prefix", location.prefix + "blobs/")])
        #expect(reply.status == 200, "\(reply.text)")
        return Set(
            reply.text.components(separatedBy: "<Key>").dropFirst().map {
                String($0.prefix { $0 != "<" }.split(separator: "/").last ?? "")
            })
    }

    /// Writes an object; returns its blob.
    @discardableResult
    func put(_ key: String, _ text: String) async throws -> String {
        let object = try await store.putObject(
            bucket: "bkt", key: key, attributes: ObjectAttributes(), tags: [],
            body: AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: text))
                continuation.finish()
            },
            checksums: [], condition: .none, verify: { _ in })
        return try #require(object.manifest.first?.blob)
    }
}

@Suite("Blob deletions: awaited, or queued in the catalog, never left to a task no one waits for", .serialized, .timeLimit(.minutes(10)))
struct BlobDeletionTests {
    @Test("a catalog write that failed deletes its new blobs; one whose outcome is unknown (the catalog became unavailable during it, its commit may have landed) leaves them for the orphan collection")
    func unknownOutcomeKeepsBlobs() async throws {
        let directory = TemporaryDirectory.make("ferry-unknown-outcome")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let catalog = try SQLiteCatalog(path: directory + "/catalog.sqlite")
        let store = try CatalogObjectStore(directory: directory + "/objects", catalog: catalog, logger: Logger(label: "ferry.test"))
        func blob(_ text: String) async throws -> String {
            let body = AsyncStream<ByteBuffer> { continuation in
                continuation.yield(ByteBuffer(string: text))
                continuation.finish()
            }
            let (temp, _) = try await store.files.write(body, checksums: [], maxSize: 1 << 20)
            return try await store.files.commit(tempPath: temp)
        }
        func stored() async throws -> Set<String> {
            Set(try await store.files.blobs(olderThan: Date().addingTimeInterval(60)))
        }
        let refused = try await blob("refused")
        let unknown = try await blob("unknown")
        await store.discardUnlessRecorded([refused], after: FerryDomainError(.quotaExceeded, "Past the quota."))
        await store.discardUnlessRecorded(
            [unknown], after: FerryDomainError(.storeUnavailable, "The catalog is unavailable; please retry the request."))
        #expect(try await stored() == [unknown])
        // Referenced by nothing, it goes with the orphan collection.
        #expect(try await store.collectOrphanBlobs(olderThan: -5) == 1)
        #expect(try await stored().isEmpty)
    }

    @Test("with only this node reading, an overwritten or deleted object's blob is gone from the store when the call returns")
    func deletedBeforeReturning() async throws {
        try await S3BackedHarness.with(grace: .zero) { harness in
            let first = try await harness.put("k", "first")
            #expect(try await harness.blobs() == [first])
            let second = try await harness.put("k", "second")
            #expect(try await harness.blobs() == [second])
            try await harness.store.deleteObject(bucket: "bkt", key: "k", condition: .none)
            #expect(try await harness.blobs().isEmpty)
            #expect(try await harness.catalog.dueBlobDeletions(now: .distantFuture, limit: 10).isEmpty)
        }
    }

    @Test("a blob a reader still streams is queued in the catalog, read to its end, and deleted once due and let go")
    func readBlobIsQueued() async throws {
        try await S3BackedHarness.with(grace: .zero) { harness in
            let first = try await harness.put("k", "first version")
            let object = try await harness.store.object(bucket: "bkt", key: "k")
            var reader = try await harness.store.readObject(object, range: nil).makeAsyncIterator()
            let second = try await harness.put("k", "second")
            // Still there for the reader, and queued (not in a task that may never run).
            #expect(try await harness.blobs() == [first, second])
            #expect(try await harness.catalog.dueBlobDeletions(now: Date(), limit: 10) == [first])
            // A pass while it is read leaves it, and looks again a minute later.
            #expect(try await harness.store.deleteQueuedBlobs(now: Date(), limit: 10) == 0)
            #expect(try await harness.catalog.dueBlobDeletions(now: Date(), limit: 10).isEmpty)
            var text = ""
            while let buffer = try await reader.next() { text += String(buffer: buffer) }
            #expect(text == "first version")
            // Let go: the next pass after that deletes it.
            #expect(try await harness.store.deleteQueuedBlobs(now: Date().addingTimeInterval(61), limit: 10) == 1)
            #expect(try await harness.blobs() == [second])
            #expect(try await harness.catalog.dueBlobDeletions(now: .distantFuture, limit: 10).isEmpty)
        }
    }

    @Test("with other nodes reading, replaced blobs wait out the grace period in the catalog's queue, across a restart")
    func graceIsDurable() async throws {
        try await S3BackedHarness.with(grace: .seconds(600)) { harness in
            let first = try await harness.put("k", "first")
            let second = try await harness.put("k", "second")
            let start = Date()
            // The overwrite returned with the old blob queued, due after the grace period.
            #expect(try await harness.blobs() == [first, second])
            #expect(try await harness.catalog.dueBlobDeletions(now: start, limit: 10).isEmpty)
            // The queue is in the catalog's file: a restart finds it.
            let reopened = try SQLiteCatalog(path: harness.catalogPath)
            #expect(try await reopened.dueBlobDeletions(now: start.addingTimeInterval(601), limit: 10) == [first])
            #expect(try await harness.store.deleteQueuedBlobs(now: start, limit: 10) == 0)
            #expect(try await harness.store.deleteQueuedBlobs(now: start.addingTimeInterval(601), limit: 10) == 1)
            #expect(try await harness.blobs() == [second])
            // A delete queues the same way.
            try await harness.store.deleteObject(bucket: "bkt", key: "k", condition: .none)
            #expect(try await harness.blobs() == [second])
            #expect(try await harness.store.deleteQueuedBlobs(now: start.addingTimeInterval(1200), limit: 10) == 1)
            #expect(try await harness.blobs().isEmpty)
        }
    }

    @Test("a download served by one node keeps a blob another node's overwrite retired until it ends, past the grace period and the orphan collection")
    func otherNodesReader() async throws {
        try await S3BackedHarness.with(grace: .seconds(600)) { harness in
            let first = try await harness.put("k", "first version")
            let reading = try await harness.otherNode()
            let object = try await reading.object(bucket: "bkt", key: "k")
            var reader = try await reading.readObject(object, range: nil).makeAsyncIterator()
            // This node overwrites while the other streams; its collector may delete the old blob once due.
            let second = try await harness.put("k", "second")
            let start = Date()
            func collector(_ store: CatalogObjectStore) -> UploadCollector {
                UploadCollector(store: store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"))
            }
            // The reading node's look at the queue holds the blob for another grace period from then.
            await collector(reading).holdReadBlobs(now: start.addingTimeInterval(300))
            #expect(await collector(harness.store).deleteQueuedBlobs(now: start.addingTimeInterval(601)) == 0)
            // Queued, it is the queue's: the orphan collection leaves it, however many passes.
            #expect(try await harness.store.collectOrphanBlobs(olderThan: -5) == 0)
            #expect(try await harness.store.collectOrphanBlobs(olderThan: -5) == 0)
            #expect(try await harness.blobs() == [first, second])
            var text = ""
            while let buffer = try await reader.next() { text += String(buffer: buffer) }
            #expect(text == "first version")
            // Read to its end, it is held no more, and goes once due.
            await collector(reading).holdReadBlobs(now: start.addingTimeInterval(600))
            #expect(await collector(harness.store).deleteQueuedBlobs(now: start.addingTimeInterval(901)) == 1)
            #expect(try await harness.blobs() == [second])
        }
    }

    @Test("the deletion queue keeps each blob once, due at the later time, until it is taken off", arguments: JobQueueImplementation.allCases)
    func queue(_ implementation: JobQueueImplementation) async throws {
        try await implementation.with { media in
            let catalog = try #require(media as? any ObjectCatalog)
            let t0 = Date(timeIntervalSince1970: 1_800_000_000)
            try await catalog.queueBlobDeletions(["a", "b"], dueAt: t0)
            try await catalog.queueBlobDeletions(["b", "c"], dueAt: t0.addingTimeInterval(60))
            try await catalog.queueBlobDeletions(["a"], dueAt: t0.addingTimeInterval(-60))
            #expect(try await catalog.dueBlobDeletions(now: t0, limit: 10) == ["a"])
            #expect(Set(try await catalog.dueBlobDeletions(now: t0.addingTimeInterval(60), limit: 10)) == ["a", "b", "c"])
            #expect(try await catalog.dueBlobDeletions(now: t0.addingTimeInterval(60), limit: 1).count == 1)
            try await catalog.removeBlobDeletions(["a", "c"])
            #expect(try await catalog.dueBlobDeletions(now: .distantFuture, limit: 10) == ["b"])
            // Postponing moves a queued blob later, never earlier, and queues no other.
            try await catalog.postponeBlobDeletions(["b", "read"], until: t0.addingTimeInterval(120))
            try await catalog.postponeBlobDeletions(["b"], until: t0)
            #expect(try await catalog.dueBlobDeletions(now: t0.addingTimeInterval(119), limit: 10).isEmpty)
            #expect(try await catalog.dueBlobDeletions(now: .distantFuture, limit: 10) == ["b"])
            #expect(catalog.isShared == (implementation == .postgres))
        }
    }
}
