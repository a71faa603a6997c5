import FerryCore
import FerryTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import FerryMedia
@testable import FerryServer
@testable import FerryStorage

/// Bucket lifecycle rules: what the store expires and aborts when the clock moves past a rule's age (every catalog
/// implementation), and what the S3 API takes, refuses and answers.
@Suite("Bucket lifecycle: expiration and aborted uploads (every catalog implementation), the S3 API", .timeLimit(.minutes(10)))
struct LifecycleTests {
    typealias Rule = S3LifecycleConfiguration.Rule

    static func document(_ rules: [Rule]) throws -> String {
        String(decoding: try S3XML.encode(S3LifecycleConfiguration(rules: rules), root: "LifecycleConfiguration"), as: UTF8.self)
    }

    /// The blob files under `directory`, by name.
    static func blobFiles(_ directory: String) -> Set<String> {
        var names = Set<String>()
        let enumerator = FileManager.default.enumerator(atPath: directory)
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                names.insert(URL(fileURLWithPath: path).lastPathComponent)
            }
        }
        return names
    }

    static func keys(_ store: CatalogObjectStore, _ bucket: String) async throws -> [String] {
        try await store.listObjects(bucket: bucket, prefix: "", delimiter: nil, startAfter: nil, maxKeys: 1000).objects.map(\.key)
    }

    @Test("expiration by prefix, tag and size removes only matching objects once their age is past; nothing before", arguments: JobQueueImplementation.allCases)
    func expiration(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("b")
            let tag = S3LifecycleConfiguration.Tag(key: "class", value: "temp")
            try await store.setBucketConfiguration(
                "b", .lifecycle,
                try Self.document([
                    Rule(id: "logs", prefix: "logs/", expiration: .init(days: 1)),
                    Rule(id: "temp", filter: .init(tag: tag), expiration: .init(days: 3)),
                    Rule(
                        id: "big-cache", filter: .init(and: .init(prefix: "cache/", objectSizeGreaterThan: 4)),
                        expiration: .init(days: 1)),
                    Rule(id: "off", prefix: "keep/", status: "Disabled", expiration: .init(days: 1)),
                ]))
            for key in ["logs/a", "logs/b", "keep/a", "cache/small", "cache/large", "other"] {
                try await ObjectCatalogTests.put(store, "b", key, key == "cache/large" ? "large body" : "x")
            }
            let tagged = try await ObjectCatalogTests.put(store, "b", "tagged", "t")
            try await store.setObjectTags([ObjectTag(key: "class", value: "temp")], bucket: "b", key: "tagged", etag: tagged.etag)
            let untagged = try await ObjectCatalogTests.put(store, "b", "tagged-other", "t")
            try await store.setObjectTags([ObjectTag(key: "class", value: "kept")], bucket: "b", key: "tagged-other", etag: untagged.etag)

            let now = Date()
            #expect(try await store.applyLifecycle(now: now) == LifecycleOutcome())
            #expect(try await Self.keys(store, "b").count == 8)

            // Two days on: the one-day rules have expired their objects, the three-day rule not yet.
            let twoDays = try await store.applyLifecycle(now: now.addingTimeInterval(2 * 86_400 + 1))
            #expect(twoDays.expiredObjects == 3)
            #expect(try await Self.keys(store, "b") == ["cache/small", "keep/a", "other", "tagged", "tagged-other"])
            let fourDays = try await store.applyLifecycle(now: now.addingTimeInterval(4 * 86_400 + 1))
            #expect(fourDays.expiredObjects == 1)
            #expect(try await Self.keys(store, "b") == ["cache/small", "keep/a", "other", "tagged-other"])
            await #expect(throws: FerryDomainError.self) { try await store.object(bucket: "b", key: "logs/a") }
        }
    }

    @Test("the collector's periodic passes put a new or replaced configuration in force from the second pass that reads it")
    func settledConfiguration() async throws {
        try await JobQueueImplementation.sqlite.withObjectStore { store in
            try await store.createBucket("b")
            try await ObjectCatalogTests.put(store, "b", "logs/a", "1")
            try await ObjectCatalogTests.put(store, "b", "tmp/a", "1")
            let collector = UploadCollector(store: store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"))
            let later = Date().addingTimeInterval(3 * 86_400)
            func rule(_ prefix: String) throws -> String {
                try Self.document([Rule(id: prefix, prefix: prefix, expiration: .init(days: 1))])
            }
            try await store.setBucketConfiguration("b", .lifecycle, try rule("logs/"))
            #expect(await collector.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            #expect(try await Self.keys(store, "b") == ["logs/a", "tmp/a"])
            // Replaced before it took effect: the first never applies, the replacement waits a pass of its own.
            try await store.setBucketConfiguration("b", .lifecycle, try rule("tmp/"))
            #expect(await collector.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            #expect(await collector.applyLifecycle(now: later, settledOnly: true).expiredObjects == 1)
            #expect(try await Self.keys(store, "b") == ["logs/a"])
            // Put again, the same configuration is read by a pass before the next applies it.
            try await ObjectCatalogTests.put(store, "b", "tmp/b", "1")
            try await store.setBucketConfiguration("b", .lifecycle, try rule("tmp/"))
            #expect(await collector.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            #expect(await collector.applyLifecycle(now: later, settledOnly: true).expiredObjects == 1)
        }
    }

    @Test("with settling, a configuration replaced while a pass applies the one before stops that pass for the bucket: the replacement removes nothing before it has settled too")
    func replacedDuringSettledPass() async throws {
        try await JobQueueImplementation.sqlite.withObjectStore { store in
            try await store.createBucket("b")
            let keys = (0..<300).map { String(format: "a/%03d", $0) }
            for key in keys + ["b/0", "b/1"] { try await ObjectCatalogTests.put(store, "b", key, "x") }
            let collector = UploadCollector(store: store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"))
            let later = Date().addingTimeInterval(3 * 86_400)
            func rule(_ prefix: String) throws -> String {
                try Self.document([Rule(id: "r", prefix: prefix, expiration: .init(days: 1))])
            }
            try await store.setBucketConfiguration("b", .lifecycle, try rule("a/"))
            #expect(await collector.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            let pass = Task { await collector.applyLifecycle(now: later, settledOnly: true) }
            // Once the settled rule's pass has begun deleting, a rule taking everything replaces it.
            while (try? await store.object(bucket: "b", key: keys[0])) != nil { try await Task.sleep(for: .milliseconds(1)) }
            try await store.setBucketConfiguration("b", .lifecycle, try rule(""))
            let outcome = await pass.value
            #expect(outcome.expiredObjects < keys.count, "the pass ended before the replacement: nothing shown")
            #expect(try await Self.keys(store, "b").suffix(2) == ["b/0", "b/1"])
            // The replacement is read by one pass and applied by the next.
            #expect(await collector.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            #expect(await collector.applyLifecycle(now: later, settledOnly: true).expiredObjects > 2)
            #expect(try await Self.keys(store, "b").isEmpty)
        }
    }

    @Test("nodes sharing a catalog: a node that lost the lifecycle lease forgets what it read, and reads the rules again before it applies them")
    func settlingAcrossNodes() async throws {
        try await JobQueueImplementation.postgres.withObjectStore { store in
            let leases = try #require(store.catalog as? any ServiceLeaseStore)
            func node(_ name: String) -> UploadCollector {
                // A store of its own over the shared catalog and blobs, as each node has.
                let own = CatalogObjectStore(blobs: store.files, catalog: store.catalog, logger: Logger(label: "ferry.test"))
                return UploadCollector(
                    store: own, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"), leases: leases, node: name)
            }
            let (a, b) = (node("a"), node("b"))
            try await store.createBucket("b")
            try await store.setBucketConfiguration(
                "b", .lifecycle, try Self.document([Rule(id: "all", prefix: "", expiration: .init(days: 1))]))
            let later = Date().addingTimeInterval(3 * 86_400)
            // Node b reads the rules; its lease lapses and node a takes over, reads, applies.
            #expect(await b.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            try await ObjectCatalogTests.put(store, "b", "first", "1")
            // The lease lasts two lifecycle intervals (20 minutes): taken over only after that.
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(1199), settledOnly: true) == LifecycleOutcome())
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(1201), settledOnly: true) == LifecycleOutcome())
            #expect(await b.applyLifecycle(now: later.addingTimeInterval(1260), settledOnly: true) == LifecycleOutcome())
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(1300), settledOnly: true).expiredObjects == 1)
            // Node a stops; node b, which lost the lease in between, reads the rules again before it applies them.
            try await ObjectCatalogTests.put(store, "b", "second", "2")
            #expect(await b.applyLifecycle(now: later.addingTimeInterval(2501), settledOnly: true) == LifecycleOutcome())
            #expect(try await Self.keys(store, "b") == ["second"])
            #expect(await b.applyLifecycle(now: later.addingTimeInterval(2560), settledOnly: true).expiredObjects == 1)
        }
    }

    @Test("a bucket deleted and made again with the same rules through another node has rules new to the node that applies them", arguments: JobQueueImplementation.allCases)
    func recreatedBucketSettlesAgain(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            // Node a applies the rules; `store` is the node that takes the requests.
            let own = CatalogObjectStore(blobs: store.files, catalog: store.catalog, logger: Logger(label: "ferry.test"))
            let a = UploadCollector(store: own, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"))
            let rules = try Self.document([Rule(id: "all", prefix: "", expiration: .init(days: 1))])
            try await store.createBucket("r")
            try await store.setBucketConfiguration("r", .lifecycle, rules)
            let later = Date().addingTimeInterval(3 * 86_400)
            #expect(await a.applyLifecycle(now: later, settledOnly: true) == LifecycleOutcome())
            // Through the other node: the bucket goes, comes back with the same rules, and gets an object.
            try await store.deleteBucket("r")
            try await store.createBucket("r")
            try await store.setBucketConfiguration("r", .lifecycle, rules)
            try await ObjectCatalogTests.put(store, "r", "fresh", "1")
            // Node a has not read these rules of this bucket before: they apply from its next pass.
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(60), settledOnly: true) == LifecycleOutcome())
            #expect(try await Self.keys(store, "r") == ["fresh"])
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(120), settledOnly: true).expiredObjects == 1)
        }
    }

    @Test("a pass under way stops by the rules in force: once DeleteBucketLifecycle is done, at most 100 more objects go", arguments: JobQueueImplementation.allCases)
    func passStopsWhenRulesGo(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("b")
            try await store.setBucketConfiguration(
                "b", .lifecycle, try Self.document([Rule(id: "all", filter: .init(), expiration: .init(days: 1))]))
            let count = 2_000
            let keys = (0..<count).map { String(format: "k%05d", $0) }
            for key in keys { _ = try await ObjectCatalogTests.put(store, "b", key, "x") }
            // Uploads the old rules would abort: the pass that saw the rules go aborts none of them.
            try await store.setBucketConfiguration(
                "b", .lifecycle,
                try Self.document([
                    Rule(id: "all", filter: .init(), expiration: .init(days: 1)),
                    Rule(id: "open", prefix: "", abortIncompleteMultipartUpload: .init(daysAfterInitiation: 1)),
                ]))
            for index in 0..<5 {
                _ = try await store.createMultipartUpload(
                    bucket: "b", key: "open-\(index)", attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil,
                    checksumType: nil)
            }
            let pass = Task { try await store.applyLifecycle(now: Date().addingTimeInterval(2 * 86_400)) }
            // Once the pass has begun deleting, the rules are deleted.
            while (try? await store.object(bucket: "b", key: keys[0])) != nil { try await Task.sleep(for: .milliseconds(1)) }
            try await store.setBucketConfiguration("b", .lifecycle, nil)
            var left = 0
            for key in keys where (try? await store.object(bucket: "b", key: key)) != nil { left += 1 }
            let outcome = try await pass.value
            var leftAfter = 0
            for key in keys where (try? await store.object(bucket: "b", key: key)) != nil { leftAfter += 1 }
            #expect(left > 100, "the pass ended before its rules were deleted: nothing shown")
            #expect(left - leftAfter <= CatalogObjectStore.lifecycleRecheck, "\(left) objects were left when the rules went, \(leftAfter) after the pass")
            #expect(outcome.expiredObjects == count - leftAfter)
            #expect(outcome.abortedUploads == 0)
        }
    }

    @Test("a pass deletes no object retagged since it read it: a tagging answered while the pass runs takes the object out of a tag rule", arguments: JobQueueImplementation.allCases)
    func retaggedDuringPass(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("b")
            let expire = S3LifecycleConfiguration.Tag(key: "expire", value: "yes")
            try await store.setBucketConfiguration(
                "b", .lifecycle, try Self.document([Rule(id: "tagged", filter: .init(tag: expire), expiration: .init(days: 1))]))
            let keys = (0..<1000).map { String(format: "k%05d", $0) }
            var etags: [String: String] = [:]
            for key in keys {
                let object = try await ObjectCatalogTests.put(store, "b", key, "x")
                try await store.setObjectTags([ObjectTag(key: "expire", value: "yes")], bucket: "b", key: key, etag: object.etag)
                etags[key] = object.etag
            }
            let pass = Task { try await store.applyLifecycle(now: Date().addingTimeInterval(2 * 86_400)) }
            // Once the pass has read its page and begun deleting, the objects it has not reached yet are retagged,
            // from the last one back, until one is gone.
            while (try? await store.object(bucket: "b", key: keys[0])) != nil { try await Task.sleep(for: .milliseconds(1)) }
            var retagged: [String] = []
            for key in keys.reversed() {
                do {
                    try await store.setObjectTags(
                        [ObjectTag(key: "expire", value: "no")], bucket: "b", key: key, etag: etags[key] ?? "")
                    retagged.append(key)
                } catch {
                    break
                }
            }
            let outcome = try await pass.value
            #expect(!retagged.isEmpty && retagged.count < keys.count, "no tagging came while the pass ran: nothing shown")
            var lost: [String] = []
            for key in retagged where (try? await store.object(bucket: "b", key: key)) == nil { lost.append(key) }
            #expect(lost.isEmpty, "\(lost.count) of \(retagged.count) objects retagged during the pass were deleted")
            #expect(outcome.expiredObjects == keys.count - retagged.count)
        }
    }

    @Test("an abandoned multipart upload is aborted after the rule's age and its parts' bytes are gone", arguments: JobQueueImplementation.allCases)
    func abortIncompleteUploads(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store, blobs in
            try await store.createBucket("b")
            try await store.setBucketConfiguration(
                "b", .lifecycle,
                try Self.document([
                    Rule(id: "abandoned", prefix: "uploads/", abortIncompleteMultipartUpload: .init(daysAfterInitiation: 2))
                ]))
            func start(_ key: String) async throws -> MultipartUploadInfo {
                let upload = try await store.createMultipartUpload(
                    bucket: "b", key: key, attributes: ObjectAttributes(), tags: [], checksumAlgorithm: nil, checksumType: nil)
                _ = try await store.uploadPart(
                    upload, partNumber: 1, body: ObjectCatalogTests.body("part of " + key), checksums: [], verify: { _ in })
                return upload
            }
            let abandoned = try await start("uploads/video.mp4")
            let elsewhere = try await start("other/video.mp4")
            let partFiles = Self.blobFiles(blobs)
            #expect(partFiles.count == 2)

            let now = Date()
            #expect(try await store.applyLifecycle(now: now.addingTimeInterval(86_400)).abortedUploads == 0)
            let outcome = try await store.applyLifecycle(now: now.addingTimeInterval(3 * 86_400 + 1))
            #expect(outcome.abortedUploads == 1)
            await #expect(throws: FerryDomainError.self) {
                try await store.multipartUpload(abandoned.uploadId, bucket: "b", key: abandoned.key)
            }
            #expect(try await store.multipartUpload(elsewhere.uploadId, bucket: "b", key: elsewhere.key).uploadId == elsewhere.uploadId)
            // A shared catalog keeps retired bytes for readers on other nodes until their deletion is due.
            _ = try await store.deleteQueuedBlobs(now: now.addingTimeInterval(4 * 86_400), limit: 100)
            #expect(Self.blobFiles(blobs).count == 1)
            #expect(Self.blobFiles(blobs).isSubset(of: partFiles))
        }
    }

    @Test("nodes sharing a catalog apply the rules one at a time: the lifecycle lease's holder, another once it lapses")
    func oneNodeAtATime() async throws {
        try await JobQueueImplementation.postgres.withObjectStore { store in
            let leases = try #require(store.catalog as? any ServiceLeaseStore)
            func node(_ name: String) -> UploadCollector {
                UploadCollector(
                    store: store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"), leases: leases, node: name)
            }
            let (a, b) = (node("a"), node("b"))
            try await store.createBucket("b")
            try await store.setBucketConfiguration(
                "b", .lifecycle, try Self.document([Rule(id: "all", prefix: "", expiration: .init(days: 1))]))
            try await ObjectCatalogTests.put(store, "b", "first", "1")
            let later = Date().addingTimeInterval(3 * 86_400)
            #expect(await a.applyLifecycle(now: later).expiredObjects == 1)
            try await ObjectCatalogTests.put(store, "b", "second", "2")
            // Node a holds the lease (two intervals, 20 minutes): node b leaves the due object alone, node a takes it.
            #expect(await b.applyLifecycle(now: later.addingTimeInterval(60)) == LifecycleOutcome())
            #expect(try await Self.keys(store, "b") == ["second"])
            #expect(await a.applyLifecycle(now: later.addingTimeInterval(120)).expiredObjects == 1)
            // When node a stops renewing, node b takes over after the lease runs out.
            try await ObjectCatalogTests.put(store, "b", "third", "3")
            #expect(await b.applyLifecycle(now: later.addingTimeInterval(120 + 1201)).expiredObjects == 1)
            #expect(try await Self.keys(store, "b").isEmpty)
        }
    }

    @Test("a node shut down gracefully gives the lifecycle lease back: another node takes it at once, not 20 minutes later", arguments: JobQueueImplementation.allCases)
    func leaseGivenBackAtShutdown(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            let catalog = try #require(store.catalog as? any ServiceLeaseStore)
            let metrics = FerryMetrics()
            let leases = ObservedServiceLeases(base: catalog, metrics: metrics)
            let collector = UploadCollector(
                store: store, maxAge: 86_400, interval: 3600, logger: Logger(label: "ferry.test"), leases: leases, node: "a")
            let group = ServiceGroup(
                configuration: .init(services: [collector], gracefulShutdownSignals: [], logger: Logger(label: "ferry.test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                // The first lifecycle pass runs when the collector starts and takes the lease for 20 minutes.
                func held() -> Double? {
                    PrometheusText.sample(metrics.render(), "ferry_service_leases_held", ["lease": "lifecycle"])
                }
                let deadline = ContinuousClock.now + .seconds(30)
                while held() != 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                try #require(held() == 1, "the collector did not take the lifecycle lease")
                #expect(try await !catalog.acquireLease("lifecycle", owner: "b", duration: .seconds(60), now: Date()))
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            #expect(try await catalog.acquireLease("lifecycle", owner: "b", duration: .seconds(60), now: Date()))
        }
    }

    @Test("days count as S3 counts them: added to the creation time and rounded up to the next midnight UTC")
    func dayArithmetic() throws {
        let lifecycle = BucketLifecycle(
            S3LifecycleConfiguration(rules: [Rule(id: "r", prefix: "", expiration: .init(days: 3))]))
        // 2014-01-15 10:30 UTC + 3 days → 2014-01-19 00:00 UTC.
        let created = Date(timeIntervalSince1970: 1_389_781_800)
        let object = ObjectInfo(
            bucket: "b", key: "k", size: 1, etag: "e", lastModified: created, attributes: ObjectAttributes(),
            checksums: [:], checksumType: nil, manifest: [], partCount: nil, parts: nil)
        #expect(lifecycle.expiration(of: object)?.date == Date(timeIntervalSince1970: 1_390_089_600))
        #expect(lifecycle.expiration(of: object)?.ruleId == "r")
        let short = BucketLifecycle(
            S3LifecycleConfiguration(rules: [Rule(id: "r", prefix: "", expiration: .init(days: 3))]), dayLength: 5)
        #expect(short.expiration(of: object)?.date == created.addingTimeInterval(15))
        let dated = BucketLifecycle(
            S3LifecycleConfiguration(rules: [Rule(id: "d", prefix: "", expiration: .init(date: "2015-01-01T00:00:00Z"))]))
        #expect(dated.expiration(of: object)?.date == Date(timeIntervalSince1970: 1_420_070_400))
        // A leap day is a day; 30 February and month 13 are none.
        #expect(BucketLifecycle.parseDate("2024-02-29T00:00:00Z") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(BucketLifecycle.parseDate("2024-02-29") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(BucketLifecycle.parseDate("2024-02-29T05:00:00+05:00") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(BucketLifecycle.parseDate("2024-02-29T00:00:00.000Z") == Date(timeIntervalSince1970: 1_709_164_800))
        for text in [
            "2020-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2021-13-01", "2021-04-31T00:00:00.000Z",
            "2021-01-01T24:00:00Z", "2021-01-01T00:00:60Z", "2021-01-01T00:60:00Z",
        ] {
            #expect(BucketLifecycle.parseDate(text) == nil, "\(text)")
        }
    }

    static let rules = """
        <LifecycleConfiguration><Rule><ID>logs</ID><Filter><And><Prefix>logs/</Prefix><Tag><Key>t</Key><Value>1</Value></Tag></And></Filter>\
        <Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>\
        <Rule><Prefix>tmp/</Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>\
        </LifecycleConfiguration>
        """

    @Test("a multipart upload older than a short --multipart-max-age is aborted within a fifth of that age, not at the next hourly pass")
    func shortMultipartMaxAge() async throws {
        try await TestServer.with(configure: { $0.multipartUploadMaxAge = 3 }) { server in
            #expect(server.server.configuration.expiryInterval == 1)
            let s3 = server.client()
            try await s3.createBucket("short")
            let uploadId = try await s3.createMultipartUpload("short", "k")
            func listed() async throws -> Bool {
                try await s3.send("GET", "/short", query: [("uploads", "")]).text.contains(uploadId)
            }
            #expect(try await listed())
            let deadline = ContinuousClock.now + .seconds(20)
            while try await listed(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(250)) }
            #expect(try await !listed(), "the upload outlived its age by more than 17 s")
        }
    }

    @Test("Put/Get/DeleteBucketLifecycleConfiguration: stored as given, an ID for rules without one, 404 when none; the media bucket takes none")
    func configurationRoundTrip() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("lcb")
            let missing = try await s3.send("GET", "/lcb", query: [("lifecycle", "")])
            #expect(missing.status == 404 && missing.errorCode == "NoSuchLifecycleConfiguration")
            #expect(try await s3.send("PUT", "/lcb", query: [("lifecycle", "")], body: Array(Self.rules.utf8)).status == 200)
            let stored = try await s3.send("GET", "/lcb", query: [("lifecycle", "")])
            #expect(stored.status == 200)
            let configuration = try S3XML.decode(S3LifecycleConfiguration.self, from: Data(stored.body))
            try #require(configuration.rules.count == 2)
            #expect(configuration.rules[0].id == "logs" && configuration.rules[0].filter?.and?.tags.first?.key == "t")
            #expect(configuration.rules[1].prefix == "tmp/" && configuration.rules[1].filter == nil)
            let generated = try #require(configuration.rules[1].id)
            #expect(!generated.isEmpty)
            // Read again, the generated ID is the same.
            let again = try S3XML.decode(
                S3LifecycleConfiguration.self, from: Data(try await s3.send("GET", "/lcb", query: [("lifecycle", "")]).body))
            #expect(again.rules[1].id == generated)
            #expect(try await s3.send("DELETE", "/lcb", query: [("lifecycle", "")]).status == 204)
            #expect(try await s3.send("GET", "/lcb", query: [("lifecycle", "")]).status == 404)
            #expect(try await s3.send("DELETE", "/lcb", query: [("lifecycle", "")]).status == 204)
            let noBucket = try await s3.send("PUT", "/absent", query: [("lifecycle", "")], body: Array(Self.rules.utf8))
            #expect(noBucket.errorCode == "NoSuchBucket")
            // The media bucket's files are the media catalog's: no rule may expire them, even the root key's.
            let mediaBucket = server.server.configuration.mediaBucket
            try await s3.createBucket(mediaBucket)
            let media = try await s3.send("PUT", "/" + mediaBucket, query: [("lifecycle", "")], body: Array(Self.rules.utf8))
            #expect(media.status == 400 && media.errorCode == "InvalidRequest", "\(media.status) \(media.text)")
            #expect(try await s3.send("GET", "/" + mediaBucket, query: [("lifecycle", "")]).status == 404)
        }
    }

    @Test("bad configurations are refused with S3's codes and leave the stored one as it was")
    func refusals() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("lcb")
            #expect(try await s3.send("PUT", "/lcb", query: [("lifecycle", "")], body: Array(Self.rules.utf8)).status == 200)
            let before = try await s3.send("GET", "/lcb", query: [("lifecycle", "")]).body
            func rule(_ inner: String, id: String = "<ID>r</ID>") -> String {
                "<LifecycleConfiguration><Rule>\(id)\(inner)</Rule></LifecycleConfiguration>"
            }
            let expiration = "<Expiration><Days>1</Days></Expiration>"
            let cases: [(String, String)] = [
                ("<LifecycleConfiguration><Rule>", "MalformedXML"),
                ("<LifecycleConfiguration></LifecycleConfiguration>", "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>enabled</Status>" + expiration), "MalformedXML"),
                (rule("<Status>Enabled</Status>" + expiration), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter><Status>Enabled</Status>" + expiration), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>"), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status>" + expiration, id: "<ID>\(String(repeating: "a", count: 256))</ID>"), "InvalidArgument"),
                (
                    "<LifecycleConfiguration><Rule><ID>r</ID><Prefix>a</Prefix><Status>Enabled</Status>\(expiration)</Rule>"
                        + "<Rule><ID>r</ID><Prefix>b</Prefix><Status>Enabled</Status>\(expiration)</Rule></LifecycleConfiguration>",
                    "InvalidArgument"
                ),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Days>0</Days></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Days>2147483648</Days></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>9223372036854775807</DaysAfterInitiation></AbortIncompleteMultipartUpload>"), "InvalidArgument"),
                // A day the calendar does not have (read leniently, it would be 1 March).
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>2020-02-30T00:00:00Z</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>2021-13-01T00:00:00Z</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>someday</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>-001-01-01T00:00:00Z</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>-0001-01-01T00:00:00Z</Date></Expiration>"), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status>"), "InvalidRequest"),
                (rule("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>"), "InvalidArgument"),
                (rule("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"), "InvalidArgument"),
                (rule("<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan><ObjectSizeLessThan>5</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>" + expiration), "InvalidArgument"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>"), "NotImplemented"),
                (String(repeating: "<Rule>", count: 500), "MalformedXML"),
                // Held to the schema: a misspelt, unknown, repeated or misplaced element is refused, never dropped
                // (a filter whose Prefx was dropped would expire the whole bucket).
                (rule("<Filter><Prefx>tmp/</Prefx></Filter><Status>Enabled</Status>" + expiration), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Bogus/>" + expiration), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Days>1</Days><Bogus/></Expiration>"), "MalformedXML"),
                ("<NotALifecycle><Rule><ID>r</ID><Prefix>a</Prefix><Status>Enabled</Status>\(expiration)</Rule></NotALifecycle>", "MalformedXML"),
                (rule("<Filter><Prefix>a</Prefix></Filter><Filter><Prefix>b</Prefix></Filter><Status>Enabled</Status>" + expiration), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status>" + expiration, id: "<ID>r</ID><ID>s</ID>"), "MalformedXML"),
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Days>1</Days><Days>2</Days></Expiration>"), "MalformedXML"),
                (
                    "<LifecycleConfiguration><Rule><ID>r</ID><Prefix>a</Prefix><Status>Enabled</Status>\(expiration)</Rule>"
                        + "<Extra/></LifecycleConfiguration>", "MalformedXML"
                ),
            ]
            for (body, code) in cases {
                let reply = try await s3.send("PUT", "/lcb", query: [("lifecycle", "")], body: Array(body.utf8))
                #expect(reply.errorCode == code, "\(body.prefix(120)): \(reply.text)")
                #expect(try await s3.send("GET", "/lcb", query: [("lifecycle", "")]).body == before)
            }
            // Said as it is: a date that does not exist is not "not at midnight", and an And of two conditions on one
            // tag key, which no object could meet, is refused as S3 refuses it.
            let said: [(String, String)] = [
                (rule("<Prefix>a</Prefix><Status>Enabled</Status><Expiration><Date>2020-13-45T00:00:00Z</Date></Expiration>"), "that exists"),
                (rule("<Filter><And><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>k</Key><Value>w</Value></Tag></And></Filter><Status>Enabled</Status>" + expiration), "Duplicate Tag Keys"),
            ]
            for (body, message) in said {
                let reply = try await s3.send("PUT", "/lcb", query: [("lifecycle", "")], body: Array(body.utf8))
                #expect(reply.errorCode == "InvalidArgument" && reply.text.contains(message), "\(body.prefix(120)): \(reply.text)")
                #expect(try await s3.send("GET", "/lcb", query: [("lifecycle", "")]).body == before)
            }
        }
    }

    @Test("PUT, GET, HEAD and CompleteMultipartUpload name the rule that will expire the object in x-amz-expiration")
    func expirationHeader() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("lcb")
            #expect(try await s3.send("PUT", "/lcb", query: [("lifecycle", "")], body: Array(Self.rules.utf8)).status == 200)
            let before = Date()
            // The rule needs the tag too: a plain PUT under logs/ is not expired by it.
            #expect(try await s3.put("lcb", "logs/plain", [1]).header("x-amz-expiration") == nil)
            let put = try await s3.put("lcb", "logs/tagged", [1], headers: [("x-amz-tagging", "t=1")])
            let header = try #require(put.header("x-amz-expiration"))
            #expect(header.hasPrefix("expiry-date=\"") && header.hasSuffix("\", rule-id=\"logs\""))
            let dateText = String(header.dropFirst("expiry-date=\"".count).prefix { $0 != "\"" })
            let date = try #require(S3Date.parseHTTP(dateText))
            // One day, rounded up to midnight UTC: between one and two days from now, at midnight.
            #expect(date.timeIntervalSince(before) > 86_400 && date.timeIntervalSince(before) <= 2 * 86_400)
            #expect(date.timeIntervalSince1970.truncatingRemainder(dividingBy: 86_400) == 0)
            #expect(try await s3.send("HEAD", "/lcb/logs/tagged").header("x-amz-expiration") == header)
            #expect(try await s3.get("lcb", "logs/tagged").header("x-amz-expiration") == header)
            #expect(try await s3.send("HEAD", "/lcb/logs/plain").header("x-amz-expiration") == nil)

            let id = try await s3.createMultipartUpload("lcb", "logs/multi", headers: [("x-amz-tagging", "t=1")])
            let etag = try #require(try await s3.uploadPart("lcb", "logs/multi", uploadId: id, number: 1, [2]).header("ETag"))
            let completed = try await s3.complete("lcb", "logs/multi", uploadId: id, xml: S3TestClient.completeXML([(1, etag)]))
            #expect(completed.status == 200)
            // The same rule's midnight, or the next one when a midnight UTC passed since the PUT.
            let later = try #require(completed.header("x-amz-expiration"))
            #expect(later.hasSuffix("\", rule-id=\"logs\""))
            let laterDate = S3Date.parseHTTP(String(later.dropFirst("expiry-date=\"".count).prefix { $0 != "\"" }))
            #expect(laterDate == date || laterDate == date.addingTimeInterval(86_400), "\(later) after \(header)")
        }
    }
}
