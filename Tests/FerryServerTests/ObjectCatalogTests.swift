import FerryCore
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import Testing

@testable import FerryMedia
@testable import FerryServer
@testable import FerryStorage

extension JobQueueImplementation {
    /// An object store over a fresh catalog of this implementation, with its blobs as files in a temporary directory.
    func withObjectStore<T>(_ body: (CatalogObjectStore) async throws -> T) async throws -> T {
        try await withObjectStore { store, _ in try await body(store) }
    }

    /// The same, with the directory that holds the blob files.
    func withObjectStore<T>(_ body: (CatalogObjectStore, String) async throws -> T) async throws -> T {
        let directory = TemporaryDirectory.make("ferry-objects")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try await with { catalog in
            let store = CatalogObjectStore(
                blobs: try BlobFiles(root: directory + "/blobs"), catalog: catalog as! any ObjectCatalog,
                logger: Logger(label: "ferry.test"))
            return try await body(store, directory + "/blobs")
        }
    }
}

/// The object store's behaviour over each catalog implementation: SQLite (the embedded default) and PostgreSQL (nodes
/// sharing a blob store). The same tests, the same answers.
@Suite("Object catalog: objects, conditions, listings, multipart (every catalog implementation)", .timeLimit(.minutes(10)))
struct ObjectCatalogTests {
    static func body(_ text: String) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            continuation.yield(ByteBuffer(string: text))
            continuation.finish()
        }
    }

    static func read(_ store: CatalogObjectStore, _ bucket: String, _ key: String) async throws -> String {
        let object = try await store.object(bucket: bucket, key: key)
        var text = ""
        for try await buffer in try await store.readObject(object, range: nil) { text += String(buffer: buffer) }
        return text
    }

    @discardableResult
    static func put(
        _ store: CatalogObjectStore, _ bucket: String, _ key: String, _ text: String, condition: ObjectWriteCondition = .none
    ) async throws -> ObjectInfo {
        try await store.putObject(
            bucket: bucket, key: key, attributes: ObjectAttributes(), tags: [], body: body(text), checksums: [.crc32],
            condition: condition, verify: { _ in })
    }

    @Test("the multipart uploads of resumable uploads that no record owns (a crash between the two writes) are aborted once an hour old; owned ones and S3 uploads stay; the multipart age limit aborts S3 uploads only (a resumable upload lasts until its Upload-Expires)", arguments: JobQueueImplementation.allCases)
    func unclaimedResumableUploads(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            let charge = StorageCharge(owner: "k1", quota: .unlimited)
            func resumable(_ key: String) async throws -> ResumableUpload {
                try await store.createResumableUpload(
                    bucket: "r", key: key, charge: charge, length: 10, info: .init(), attributes: ObjectAttributes(),
                    expiresAt: Date().addingTimeInterval(86_400))
            }
            let live = try await resumable("live")
            #expect(live.uploadId.hasPrefix(ResumableUpload.multipartIdPrefix))
            // Killed after its record went and before its bytes did (termination, expiry).
            let ended = try await resumable("ended")
            #expect(try await store.catalog.deleteResumableUpload(ended.id) != nil)
            // Killed after its multipart upload was made and before its record was (creation, concatenation).
            let unrecorded = try await store.createMultipartUpload(
                idPrefix: ResumableUpload.multipartIdPrefix, bucket: "r", key: "created", attributes: ObjectAttributes(),
                tags: [], checksumAlgorithm: .crc64nvme, checksumType: "FULL_OBJECT", charge: charge)
            let s3 = try await store.createMultipartUpload(
                bucket: "r", key: "plain", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil,
                checksumType: nil, charge: charge)
            #expect(!s3.uploadId.hasPrefix(ResumableUpload.multipartIdPrefix))

            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(-3600)) == 0)
            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(1)) == 2)
            #expect(try await store.catalog.upload(ended.uploadId) == nil)
            #expect(try await store.catalog.upload(unrecorded.uploadId) == nil)
            #expect(try await store.catalog.upload(live.uploadId) != nil)
            #expect(try await store.catalog.upload(s3.uploadId) != nil)
            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(1)) == 0)

            // A --multipart-max-age shorter than the live upload's expiry: the S3 upload goes, the resumable one stays.
            #expect(try await store.abortMultipartUploads(initiatedBefore: Date().addingTimeInterval(1)) == 1)
            #expect(try await store.catalog.upload(s3.uploadId) == nil)
            #expect(try await store.catalog.upload(live.uploadId) != nil)
            #expect(try await store.catalog.resumableUpload(live.id) != nil)
        }
    }

    @Test("a resumable upload's expiry moves (a creation's body keeps it alive): moved past, the collector ends it; moved ahead, it stays", arguments: JobQueueImplementation.allCases)
    func resumableExpiryMoves(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            func resumable(_ key: String) async throws -> ResumableUpload {
                try await store.createResumableUpload(
                    bucket: "r", key: key, charge: StorageCharge(owner: "k1", quota: .unlimited), length: 10,
                    info: .init(), attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(5))
            }
            let ended = try await store.setResumableExpiry(try await resumable("ended"), to: Date().addingTimeInterval(-1))
            let kept = try await store.setResumableExpiry(try await resumable("kept"), to: Date().addingTimeInterval(3600))
            #expect(try await store.resumableUpload(kept.id)?.expiresAt.timeIntervalSince(kept.expiresAt).magnitude ?? 9 < 0.01)
            #expect(try await store.expireResumableUploads(now: Date().addingTimeInterval(60)) == 1)
            #expect(try await store.resumableUpload(ended.id) == nil)
            #expect(try await store.catalog.upload(ended.uploadId) == nil)
            #expect(try await store.resumableUpload(kept.id) != nil)
        }
    }

    @Test("a resumable upload whose multipart upload is aborted (AbortMultipartUpload, a lifecycle rule, DeleteBucket) is gone with it; a completed one stays", arguments: JobQueueImplementation.allCases)
    func abortedResumableUploads(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            let charge = StorageCharge(owner: "k1", quota: .unlimited)
            func resumable(_ key: String, length: Int64 = 10) async throws -> ResumableUpload {
                try await store.createResumableUpload(
                    bucket: "r", key: key, charge: charge, length: length, info: .init(), attributes: ObjectAttributes(),
                    expiresAt: Date().addingTimeInterval(86_400))
            }
            func bytes(_ text: String) -> AsyncStream<ByteBuffer> {
                AsyncStream { continuation in
                    continuation.yield(ByteBuffer(string: text))
                    continuation.finish()
                }
            }
            let aborted = try await resumable("aborted")
            guard case .appended = try await store.appendResumable(
                aborted, at: 0, body: bytes("hello"), checksums: [], byteLimit: nil, verify: { _ in })
            else { Issue.record("the append was not recorded"); return }
            let multipart = try #require(try await store.catalog.upload(aborted.uploadId))
            try await store.abortMultipartUpload(multipart)
            #expect(try await store.resumableUpload(aborted.id) == nil)
            // An append that raced the abort finds no upload, not a conflict at the old offset.
            await #expect(throws: FerryDomainError.self) {
                _ = try await store.appendResumable(
                    aborted, at: 5, body: bytes("world"), checksums: [], byteLimit: nil, verify: { _ in })
            }

            let completed = try await resumable("completed", length: 2)
            guard case .appended(let full) = try await store.appendResumable(
                completed, at: 0, body: bytes("ok"), checksums: [], byteLimit: nil, verify: { _ in })
            else { Issue.record("the append was not recorded"); return }
            #expect(try await store.completeResumable(full) != nil)
            try await store.deleteObject(bucket: "r", key: "completed", condition: .none)
            let open = try await resumable("open")
            try await store.deleteBucket("r")
            #expect(try await store.resumableUpload(open.id) == nil)
            #expect(try await store.resumableUpload(completed.id)?.etag != nil)
        }
    }

    @Test("ListMultipartUploads: a key marker alone starts after its key's uploads; a delimiter rolls keys up into common prefixes that page as uploads do", arguments: JobQueueImplementation.allCases)
    func multipartUploadListing(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("u")
            func start(_ key: String) async throws -> String {
                try await store.createMultipartUpload(
                    bucket: "u", key: key, attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil,
                    checksumType: nil, charge: nil
                ).uploadId
            }
            let a = [try await start("a"), try await start("a")].sorted()
            for key in ["b/1", "b/2", "b/3/x", "c"] { _ = try await start(key) }
            func list(_ delimiter: String?, _ keyMarker: String = "", _ uploadIdMarker: String = "", max: Int = 100)
                async throws -> MultipartUploadListing
            {
                try await store.listMultipartUploads(
                    bucket: "u", prefix: "", delimiter: delimiter, keyMarker: keyMarker, uploadIdMarker: uploadIdMarker,
                    maxUploads: max)
            }
            #expect(try await list(nil).uploads.map(\.key) == ["a", "a", "b/1", "b/2", "b/3/x", "c"])
            #expect(try await list(nil, "a").uploads.map(\.key) == ["b/1", "b/2", "b/3/x", "c"], "a key marker alone")
            #expect(try await list(nil, "a", a[0]).uploads.map(\.uploadId).first == a[1])
            // Upload ids begin with their initiation time, so one key's uploads are listed in the order they began.
            let begun = [0.0, 0.001, 0.002, 1, 86_400].map { CatalogObjectStore.uploadId(prefix: "", initiated: Date(timeIntervalSince1970: 1_800_000_000 + $0)) }
            #expect(begun.sorted() == begun && Set(begun.map(\.count)) == [64])
            #expect(CatalogObjectStore.uploadId(prefix: "resumable-", initiated: Date()).hasPrefix("resumable-"))

            let rolled = try await list("/")
            #expect(rolled.uploads.map(\.key) == ["a", "a", "c"] && rolled.commonPrefixes == ["b/"] && !rolled.isTruncated)
            // Pages of two: uploads and prefixes count alike, and each page starts where the last one said.
            let first = try await list("/", max: 2)
            #expect(first.uploads.map(\.uploadId) == a && first.isTruncated)
            #expect(first.nextKeyMarker == "a" && first.nextUploadIdMarker == a[1])
            let second = try await list("/", "a", a[1], max: 2)
            #expect(second.commonPrefixes == ["b/"] && second.uploads.map(\.key) == ["c"] && !second.isTruncated)
            let third = try await list("/", max: 3)
            #expect(third.commonPrefixes == ["b/"] && third.nextKeyMarker == "b/" && third.nextUploadIdMarker == nil)
            // A key marker that is a common prefix skips every key under it.
            #expect(try await list("/", "b/").uploads.map(\.key) == ["c"])
            let under = try await store.listMultipartUploads(
                bucket: "u", prefix: "b/", delimiter: "/", keyMarker: "", uploadIdMarker: "", maxUploads: 100)
            #expect(under.uploads.map(\.key) == ["b/1", "b/2"] && under.commonPrefixes == ["b/3/"])
            // Prefixes are matched by bytes: a decomposed é is not a precomposed one.
            _ = try await start("p/e\u{301}/1")
            _ = try await start("p/\u{E9}/2")
            let decomposed = try await store.listMultipartUploads(
                bucket: "u", prefix: "p/e\u{301}", delimiter: "/", keyMarker: "", uploadIdMarker: "", maxUploads: 100)
            #expect(decomposed.uploads.isEmpty && decomposed.commonPrefixes == ["p/e\u{301}/"])
            #expect(KeyRollup.pastEveryKey(under: "b/") > "b/" + String(repeating: "\u{10FFFF}", count: 256))
            #expect(Array(KeyRollup.pastEveryKey(under: "b/").utf8).lexicographicallyPrecedes(Array("b0".utf8)))
        }
    }

    @Test("buckets, objects, overwrites, tags, conditions and deletes", arguments: JobQueueImplementation.allCases)
    func objects(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("photos")
            await #expect(throws: FerryDomainError.self) { try await store.createBucket("photos") }
            #expect(try await store.listBuckets().map(\.name) == ["photos"])
            let first = try await Self.put(store, "photos", "a.txt", "first")
            #expect(first.etag == "8b04d5e3775d298e78455efc5ca404d5")
            #expect(try await Self.read(store, "photos", "a.txt") == "first")
            #expect(try await store.object(bucket: "photos", key: "a.txt").checksums["CRC32"] != nil)

            // If-None-Match: * refuses an existing key; If-Match with another ETag too; the right ETag writes.
            await #expect(throws: FerryDomainError.self) {
                try await Self.put(store, "photos", "a.txt", "no", condition: .absent)
            }
            await #expect(throws: FerryDomainError.self) {
                try await Self.put(store, "photos", "a.txt", "no", condition: ObjectWriteCondition(ifMatch: ["0000"]))
            }
            try await Self.put(store, "photos", "a.txt", "second", condition: ObjectWriteCondition(ifMatch: [first.etag]))
            #expect(try await Self.read(store, "photos", "a.txt") == "second")

            let current = try await store.object(bucket: "photos", key: "a.txt")
            try await store.setObjectTags([ObjectTag(key: "k", value: "v")], bucket: "photos", key: "a.txt", etag: current.etag)
            #expect(try await store.object(bucket: "photos", key: "a.txt").tags == [ObjectTag(key: "k", value: "v")])
            await #expect(throws: FerryDomainError.self) {
                try await store.setObjectTags([], bucket: "photos", key: "a.txt", etag: first.etag)
            }

            await #expect(throws: FerryDomainError.self) { try await store.deleteBucket("photos") }
            await #expect(throws: FerryDomainError.self) {
                try await store.deleteObject(bucket: "photos", key: "a.txt", condition: ObjectWriteCondition(ifMatch: ["0000"]))
            }
            try await store.deleteObject(bucket: "photos", key: "a.txt", condition: .none)
            try await store.deleteObject(bucket: "photos", key: "a.txt", condition: .none)
            await #expect(throws: FerryDomainError.self) { try await store.object(bucket: "photos", key: "a.txt") }
            try await store.setBucketConfiguration("photos", .cors, "<CORSConfiguration/>")
            #expect(try await store.bucketConfiguration("photos", .cors) == "<CORSConfiguration/>")
            try await store.deleteBucket("photos")
            await #expect(throws: FerryDomainError.self) { try await store.bucket("photos") }
            await #expect(throws: FerryDomainError.self) { try await Self.put(store, "photos", "x", "y") }
        }
    }

    @Test("listings are in byte order, with prefixes, delimiters and pages", arguments: JobQueueImplementation.allCases)
    func listings(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("docs")
            let keys = ["b", "a/1", "a/2", "A", "é", "z~", "a/3/x", "_"]
            for key in keys { try await Self.put(store, "docs", key, key) }
            let all = try await store.listObjects(bucket: "docs", prefix: "", delimiter: nil, startAfter: nil, maxKeys: 1000)
            #expect(all.objects.map(\.key) == keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
            let folders = try await store.listObjects(bucket: "docs", prefix: "a/", delimiter: "/", startAfter: nil, maxKeys: 1000)
            #expect(folders.objects.map(\.key) == ["a/1", "a/2"])
            #expect(folders.commonPrefixes == ["a/3/"])
            let page = try await store.listObjects(bucket: "docs", prefix: "", delimiter: nil, startAfter: "a/2", maxKeys: 2)
            #expect(page.objects.map(\.key) == ["a/3/x", "b"])
            #expect(page.isTruncated)

            // More keys under one common prefix than a catalog batch holds, then more entries: the listing goes past
            // the prefix's keys (not through them) and finds what follows, page by page too.
            try await store.createBucket("many")
            for index in 0..<1_100 { try await Self.put(store, "many", "k/0/\(1_000_000 + index)", "") }
            for key in ["k/0\u{10FFFF}x", "k/1/a", "k/2", "l/x"] { try await Self.put(store, "many", key, "") }
            let rolled = try await store.listObjects(bucket: "many", prefix: "k/", delimiter: "/", startAfter: nil, maxKeys: 1000)
            #expect(rolled.commonPrefixes == ["k/0/", "k/1/"] && rolled.objects.map(\.key) == ["k/0\u{10FFFF}x", "k/2"])
            #expect(!rolled.isTruncated)
            let top = try await store.listObjects(bucket: "many", prefix: "", delimiter: "/", startAfter: nil, maxKeys: 1000)
            #expect(top.commonPrefixes == ["k/", "l/"] && top.objects.isEmpty)
            var entries: [String] = []
            var marker: String?
            repeat {
                let one = try await store.listObjects(bucket: "many", prefix: "k/", delimiter: "/", startAfter: marker, maxKeys: 1)
                entries += one.commonPrefixes + one.objects.map(\.key)
                // A marker that is a common prefix skips every key under it.
                marker = one.isTruncated ? one.nextMarker : nil
            } while marker != nil
            #expect(entries == ["k/0/", "k/0\u{10FFFF}x", "k/1/", "k/2"])

            // Bytes, not Unicode equivalence: a combining mark right after the prefix or the delimiter is a key of the
            // prefix; two spellings of é are two prefixes; a key under a prefix past U+10FFFF is still under it.
            try await store.createBucket("bytes")
            let tricky = ["d/\u{301}", "d/a", "d/日本", "e\u{301}/1", "é/2", "p/1", "p/\u{10FFFF}x", "q"]
            for key in tricky { try await Self.put(store, "bytes", key, "") }
            let under = try await store.listObjects(bucket: "bytes", prefix: "d/", delimiter: nil, startAfter: nil, maxKeys: 1000)
            #expect(under.objects.map(\.key) == ["d/\u{301}", "d/a", "d/日本"].sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
            var pages: [String] = []
            marker = nil
            repeat {
                let one = try await store.listObjects(bucket: "bytes", prefix: "", delimiter: "/", startAfter: marker, maxKeys: 1)
                pages += one.commonPrefixes + one.objects.map(\.key)
                marker = one.isTruncated ? one.nextMarker : nil
            } while marker != nil && pages.count < 20
            #expect(pages == ["d/", "e\u{301}/", "p/", "q", "é/"])
        }
    }

    @Test(
        "multipart: parts replaced by number, listed in order, completed once (a retried Complete finds the completion), aborted with the bucket",
        arguments: JobQueueImplementation.allCases)
    func multipart(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("media")
            let upload = try await store.createMultipartUpload(
                bucket: "media", key: "v.mp4", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil, checksumType: nil)
            #expect(try await store.multipartUpload(upload.uploadId, bucket: "media", key: "v.mp4").uploadId == upload.uploadId)
            _ = try await store.uploadPart(upload, partNumber: 2, body: Self.body("old"), checksums: [], verify: { _ in })
            let p2 = try await store.uploadPart(upload, partNumber: 2, body: Self.body("-two"), checksums: [], verify: { _ in })
            let p1 = try await store.uploadPart(upload, partNumber: 1, body: Self.body("one"), checksums: [], verify: { _ in })
            let listed = try await store.listParts(upload, after: 0, maxParts: 1000)
            #expect(listed.parts.map(\.number) == [1, 2])
            #expect(listed.parts.map(\.etag) == [p1.etag, p2.etag])
            let uploads = try await store.listMultipartUploads(
                bucket: "media", prefix: "", delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 10)
            #expect(uploads.uploads.map(\.uploadId) == [upload.uploadId])
            #expect(try await store.uploadCount() == 1)

            // The store's minimum part size (5 MiB) applies to every part but the last.
            await #expect(throws: FerryDomainError.self) {
                try await store.completeMultipartUpload(
                    upload, parts: [.init(partNumber: 1, eTag: p1.etag), .init(partNumber: 2, eTag: p2.etag)],
                    fullObjectChecksums: [:], condition: .none)
            }
            let object = try await store.completeMultipartUpload(
                upload, parts: [.init(partNumber: 2, eTag: p2.etag)], fullObjectChecksums: [:], condition: .none)
            #expect(object.partCount == 1)
            #expect(try await store.uploadCount() == 0)
            #expect(try await Self.read(store, "media", "v.mp4") == "-two")
            #expect(try await store.completedUpload(upload.uploadId)?.etag == object.etag)
            await #expect(throws: FerryDomainError.self) {
                try await store.multipartUpload(upload.uploadId, bucket: "media", key: "v.mp4")
            }

            // An upload still open when its bucket goes is aborted with it.
            try await Self.put(store, "media", "keep", "k")
            try await store.deleteObject(bucket: "media", key: "keep", condition: .none)
            try await store.deleteObject(bucket: "media", key: "v.mp4", condition: .none)
            let open = try await store.createMultipartUpload(
                bucket: "media", key: "open", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil, checksumType: nil)
            _ = try await store.uploadPart(open, partNumber: 1, body: Self.body("x"), checksums: [], verify: { _ in })
            try await store.deleteBucket("media")
            await #expect(throws: FerryDomainError.self) { try await store.multipartUpload(open.uploadId, bucket: "media", key: "open") }
            #expect(try await store.catalog.referencedBlobs().isEmpty)
        }
    }

    @Test(
        "a blob nothing references is deleted by the first collection pass that finds it where only this process reads blobs, a referenced one never",
        arguments: JobQueueImplementation.allCases)
    func orphans(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("keep")
            try await Self.put(store, "keep", "kept", "k")
            let (pending, _) = try await store.files.write(Self.body("orphan"), checksums: [], maxSize: 100)
            _ = try await store.files.commit(tempPath: pending)
            #expect(try await store.files.blobs(olderThan: Date().addingTimeInterval(5)).count == 2)
            // Younger than the age given: kept.
            #expect(try await store.collectOrphanBlobs(olderThan: 3600) == 0)
            // A server restarted since (no earlier pass in memory) still removes it.
            #expect(try await store.collectOrphanBlobs(olderThan: -5) == 1)
            #expect(try await store.collectOrphanBlobs(olderThan: -5) == 0)
            #expect(try await store.files.blobs(olderThan: Date().addingTimeInterval(5)).count == 1)
            #expect(try await Self.read(store, "keep", "kept") == "k")
        }
    }

    @Test("ten writers racing with If-None-Match: * on one key: exactly one wins", arguments: JobQueueImplementation.allCases)
    func racingConditionalWrites(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("race")
            let winners = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        do {
                            try await Self.put(store, "race", "once", "writer \(index)", condition: .absent)
                            return true
                        } catch let error as FerryDomainError where error.code == .preconditionFailed {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(winners == 1)
            #expect(try await Self.read(store, "race", "once").hasPrefix("writer "))
            #expect(try await store.catalog.referencedBlobs().count == 1)
        }
    }

    @Test("writers racing to make the file of a video: of different bytes one makes it and the others are refused naming the video; the same bytes are taken; a completion of other parts is refused", arguments: JobQueueImplementation.allCases)
    func racingFileWrites(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("media")
            let file = ObjectWriteCondition(fileOwner: "Video 1")
            func race(_ texts: [String]) async throws -> [String?] {
                try await withThrowingTaskGroup(of: String?.self) { group in
                    for text in texts {
                        group.addTask {
                            do {
                                _ = try await Self.put(store, "media", "v.mp4", text, condition: file)
                                return text
                            } catch let error as FerryDomainError where error == .fileStored(owner: "Video 1") {
                                return nil
                            }
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            let made = try await race((0..<10).map { "writer \($0)" }).compactMap { $0 }
            #expect(made.count == 1)
            #expect(try await Self.read(store, "media", "v.mp4") == made.first)
            let winner = try #require(made.first)
            #expect(try await race([winner, winner, winner]).allSatisfy { $0 == winner })
            #expect(try await Self.read(store, "media", "v.mp4") == winner)

            let upload = try await store.createMultipartUpload(
                bucket: "media", key: "v.mp4", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil, checksumType: nil)
            let part = try await store.uploadPart(upload, partNumber: 1, body: Self.body("other"), checksums: [], verify: { _ in })
            await #expect(throws: FerryDomainError.fileStored(owner: "Video 1")) {
                try await store.completeMultipartUpload(
                    upload, parts: [.init(partNumber: 1, eTag: part.etag)], fullObjectChecksums: [:], condition: file)
            }
            #expect(try await Self.read(store, "media", "v.mp4") == winner)
            // Once the key is free, a completion makes the file.
            try await store.deleteObject(bucket: "media", key: "v.mp4", condition: .none)
            _ = try await store.completeMultipartUpload(
                upload, parts: [.init(partNumber: 1, eTag: part.etag)], fullObjectChecksums: [:], condition: file)
            #expect(try await Self.read(store, "media", "v.mp4") == "other")

            // A write of the file's ETag stores nothing: the file keeps its bytes and attributes (the same ETag is not
            // always the same bytes), and the blobs of the write go. A completion of the same parts again, and a PUT.
            var typed = ObjectAttributes()
            typed.contentType = "text/html"
            let stored = try await store.object(bucket: "media", key: "v.mp4")
            let blobs = try await store.catalog.referencedBlobs()
            let same = try await store.createMultipartUpload(
                bucket: "media", key: "v.mp4", attributes: typed, tags: [], checksumAlgorithm: nil, checksumType: nil)
            let samePart = try await store.uploadPart(same, partNumber: 1, body: Self.body("other"), checksums: [], verify: { _ in })
            let completedAgain = try await store.completeMultipartUpload(
                same, parts: [.init(partNumber: 1, eTag: samePart.etag)], fullObjectChecksums: [:], condition: file)
            #expect(completedAgain.etag == stored.etag && completedAgain.lastModified == stored.lastModified)
            #expect(try await store.completedUpload(same.uploadId)?.etag == stored.etag)
            #expect(try await store.object(bucket: "media", key: "v.mp4") == stored)
            #expect(try await store.catalog.referencedBlobs() == blobs)

            try await store.deleteObject(bucket: "media", key: "v.mp4", condition: .none)
            _ = try await Self.put(store, "media", "v.mp4", "other", condition: file)
            let plain = try await store.object(bucket: "media", key: "v.mp4")
            let plainBlobs = try await store.catalog.referencedBlobs()
            let again = try await store.putObject(
                bucket: "media", key: "v.mp4", attributes: typed, tags: [], body: Self.body("other"), checksums: [],
                condition: file, verify: { _ in })
            #expect(again.etag == plain.etag && again.lastModified == plain.lastModified)
            #expect(try await store.object(bucket: "media", key: "v.mp4") == plain)
            #expect(try await store.catalog.referencedBlobs() == plainBlobs)
        }
    }

    @Test("nodes sharing the objects collect one at a time: a node without the collector's lease aborts nothing")
    func sharedCollection() async throws {
        try await JobQueueImplementation.postgres.withObjectStore { store in
            let leases = try #require(store.catalog as? PostgresCatalog)
            try await store.createBucket("old")
            let upload = try await store.createMultipartUpload(
                bucket: "old", key: "abandoned", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil, checksumType: nil)
            #expect(store.isShared)
            let later = Date().addingTimeInterval(3600)
            #expect(try await leases.acquireLease(UploadCollector.leaseName, owner: "node-a", duration: .seconds(600), now: later))
            let other = UploadCollector(
                store: store, maxAge: 60, interval: 3600, logger: Logger(label: "ferry.test"), leases: leases, node: "node-b")
            #expect(await other.collectOnce(now: later) == 0)
            #expect(try await store.multipartUpload(upload.uploadId, bucket: "old", key: "abandoned").uploadId == upload.uploadId)
            try await leases.releaseLease(UploadCollector.leaseName, owner: "node-a")
            #expect(await other.collectOnce(now: later) == 1)
            await #expect(throws: FerryDomainError.self) { try await store.multipartUpload(upload.uploadId, bucket: "old", key: "abandoned") }
        }
    }
}
