import FerryCore
@testable import FerryServer
@testable import FerryStorage
import FerryTestSupport
import Foundation
import GRDB
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("A full disk or database: 507 InsufficientStorage, nothing half-written, the server serves on", .serialized, .timeLimit(.minutes(5)))
struct StorageFullTests {
    @Test("failures of a full disk, a full SQLite catalog or a PostgreSQL server out of disk are storageFull; others are not")
    func classification() {
        #expect(FerryDomainError(machineFailure: POSIXFileError("write", ENOSPC))?.code == .storageFull)
        #expect(FerryDomainError(machineFailure: POSIXFileError("fsync", EDQUOT))?.code == .storageFull)
        #expect(FerryDomainError(machineFailure: IOError(errnoCode: ENOSPC, reason: "write"))?.code == .storageFull)
        #expect(FerryDomainError(machineFailure: DatabaseError(resultCode: .SQLITE_FULL))?.code == .storageFull)
        #expect(FerryDomainError(machineFailure: POSIXFileError("write", EIO)) == nil)
        // A catalog another process keeps locked is an outage clients retry.
        let busy = FerryDomainError(machineFailure: DatabaseError(resultCode: .SQLITE_BUSY))
        #expect(busy?.code == .storeUnavailable && busy?.retryAfterSeconds == 1)
        // A lock within one connection is a fault of the code, not an outage.
        #expect(FerryDomainError(machineFailure: DatabaseError(resultCode: .SQLITE_LOCKED)) == nil)
        #expect(FerryDomainError(machineFailure: CancellationError()) == nil)
        // The reserve's own refusal is one too (logged as `storage full`).
        #expect(FerryDomainError(machineFailure: FerryDomainError.outOfSpace)?.code == .storageFull)
        #expect(S3Dialect.code(.storageFull) == .insufficientStorage && S3ErrorCode.insufficientStorage.httpStatus == 507)
        #expect(FormDialect.formError(FerryDomainError(.storageFull, "full"))?.status == 507)
    }

    @Test("a body that would leave less than the reserve free is refused as storageFull, its file removed; one within it is stored, and deleting frees room again")
    func reserveKeptFree() async throws {
        let root = TemporaryDirectory.make("ferry-blobs-reserve")
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try BlobFiles(root: root, reserve: 2 << 20)
        // A disk of 9 MiB, of which the blob directory's files use what they hold.
        files.freeBytes = { path in
            let walker = FileManager.default.enumerator(atPath: path)
            var used: Int64 = 0
            while let name = walker?.nextObject() as? String {
                let attributes = try? FileManager.default.attributesOfItem(atPath: path + "/" + name)
                guard attributes?[.type] as? FileAttributeType == .typeRegular else { continue }
                used += attributes?[.size] as? Int64 ?? 0
            }
            return (9 << 20) - used
        }
        func store(_ megabytes: Int) async throws -> String {
            let (path, _) = try await files.write(
                BlobFilesTests.body([UInt8](repeating: 5, count: megabytes << 20), pieces: [65_536]), checksums: [],
                maxSize: 1 << 30)
            return try await files.commit(tempPath: path)
        }
        let first = try await store(4)
        let refused = await #expect(throws: FerryDomainError.self) { _ = try await store(5) }
        #expect(refused?.code == .storageFull)
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.tmpDirectory).isEmpty)
        await files.remove([first])
        _ = try await store(5)
    }

    @Test("with a reserve larger than the disk's free space, uploads answer 507 and leave nothing, while buckets, deletes and reads go on")
    func reserveRefusesUploads() async throws {
        try await TestServer.with(configure: { $0.minFreeBytes = Int64.max / 2 }) { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("reserve").status == 200)
            let refused = try await s3.put("reserve", "a", [1, 2, 3])
            #expect(refused.status == 507 && refused.text.contains("<Code>InsufficientStorage</Code>"), "\(refused.text)")
            #expect(try await s3.get("reserve", "a").status == 404)
            #expect(try await s3.send("DELETE", "/reserve/a").status == 204)
            #expect(try await s3.send("DELETE", "/reserve").status == 204)
        }
    }

    @Test("a catalog another process keeps locked past the busy timeout answers 503 SlowDown with Retry-After, not 500, and makes the node unhealthy while writes wait; nothing is stored, and writes go on once it is free")
    func lockedCatalog() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("locked").status == 200)
            // An operator's sqlite3 shell holding a write transaction on the catalog.
            var held = Configuration()
            held.allowsUnsafeTransactions = true
            let holder = try DatabaseQueue(path: server.dataDirectory + "/catalog.sqlite", configuration: held)
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            async let put = s3.put("locked", "a", [1, 2, 3])
            // While the PUT waits for the lock, the node is unhealthy (its reads still answer) and its status says why.
            var health = ""
            let deadline = ContinuousClock.now + .seconds(8)
            while !health.contains("catalog locked"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                let answer = try await S3TestClient.fetchRaw("GET", server.endpoint + "/_ferry/health")
                health = "\(answer.status) " + String(decoding: answer.body, as: UTF8.self)
            }
            #expect(health == "503 catalog locked by another process\n", "\(health)")
            let status = await server.server.statusProbe.report()
            #expect(status.catalog.healthy == false, "\(status.catalog)")
            #expect(status.catalog.error?.contains("for a lock another process holds") == true, "\(status.catalog)")
            let refused = try await put
            #expect(refused.status == 503 && refused.text.contains("<Code>SlowDown</Code>"), "\(refused.status) \(refused.text)")
            #expect(refused.header("Retry-After") == "1")
            #expect(refused.text.contains("locked by another process"), "\(refused.text)")
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
            try holder.close()
            #expect(try await s3.get("locked", "a").status == 404)
            #expect(try await s3.put("locked", "a", [1, 2, 3]).status == 200)
            try await Task.sleep(for: .seconds(1.1))
            #expect(try await S3TestClient.fetchRaw("GET", server.endpoint + "/_ferry/health").status == 200)
            #expect(await server.server.statusProbe.report().catalog.healthy)
        }
    }

    #if os(Linux)
    @Test("a data directory or file whose mode cannot be set is named in the error, not a bare chmod failure")
    func unwritableDirectoryIsNamed() throws {
        // procfs refuses chmod, to root too.
        let directory = #expect(throws: PrivateFiles.Unusable.self) { try PrivateFiles.directory("/proc/self") }
        #expect(directory?.description.contains("/proc/self") == true && directory?.description.contains("0700") == true)
        let file = #expect(throws: PrivateFiles.Unusable.self) { try PrivateFiles.file("/proc/self/comm") }
        #expect(file?.description.contains("/proc/self/comm") == true, "\(String(describing: file))")
    }
    #endif

    /// Runs `body` with a tmpfs of `megabytes` mounted at a new directory, unmounted afterwards.
    static func withSmallDisk<T>(megabytes: Int, _ body: (String) async throws -> T) async throws -> T {
        let mountPoint = TemporaryDirectory.make("ferry-full")
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        func run(_ arguments: [String]) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = arguments
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }
        try #require(try run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", mountPoint]) == 0)
        defer { _ = try? run(["umount", "-l", mountPoint]) }
        return try await body(mountPoint)
    }

    @Test(
        "a media job whose outputs find the disk down to its reserve costs no attempt: it is given back, and the video is processed once space is freed",
        .enabled(if: getuid() == 0, "mounting a small tmpfs needs root"))
    func fullDiskCostsMediaJobsNoAttempt() async throws {
        try await Self.withSmallDisk(megabytes: 40) { disk in
            // ffmpeg works elsewhere: only what the store keeps meets the full disk.
            let work = TemporaryDirectory.make("ferry-media-work")
            defer { try? FileManager.default.removeItem(atPath: work) }
            try FileManager.default.createDirectory(atPath: disk + "/data", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: disk + "/data/media-work", withDestinationPath: work)
            let uploaded = try await MediaHarness.with(configure: {
                $0.dataDirectory = disk + "/data"
                $0.minFreeBytes = 0
                $0.mediaProcessing.workers = 0
            }) { harness in try await harness.upload(try await harness.fixture(.landscape480, seconds: 2)) }
            // The disk fills up (another program's file) but for 4 MiB: below the 8 MiB the store keeps free.
            let filler = disk + "/filler"
            #expect(FileManager.default.createFile(atPath: filler, contents: nil))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: filler))
            let chunk = Data(repeating: 0, count: 64 << 10)
            while (try? handle.write(contentsOf: chunk)) != nil {}
            try handle.truncate(atOffset: max(0, try handle.offset() - (4 << 20)))
            try handle.close()
            let log = LogRecorder()
            try await MediaHarness.with(configure: {
                $0.dataDirectory = disk + "/data"
                $0.minFreeBytes = 8 << 20
                $0.logger = log.logger(level: .warning)
            }) { harness in
                let catalog = harness.server.server.mediaCatalog
                // Refused for space: given back every retry delay (200 ms here), each attempt uncounted; counted,
                // three would have failed the job within seconds.
                try await Task.sleep(for: .seconds(10))
                let jobs = try await catalog.jobs(videoId: uploaded)
                #expect(jobs.allSatisfy { $0.state != .failed }, "\(jobs.map { "\($0.kind) \($0.state) \($0.attempts) \($0.lastError ?? "")" })")
                let info = try await harness.media.getVideoInfo(videoId: uploaded)
                #expect(info.status != "TranscodeFail", "\(info.status) \(info.errorMessage ?? "")")
                // The wait shows in the video's status (the job queued, or running its next try), and the log tells
                // it once a job, not at every retry.
                #expect(info.statusMessage?.hasSuffix(" tried again: waiting for disk space on the server") == true, "\(info.statusMessage ?? "no StatusMessage")")
                let told = log.records.filter { $0.message == "media job stopped by an outage or a full disk; it will be retried" }
                let waiting = Set(told.compactMap { $0.metadata["ferry.job-id"] })
                #expect(!told.isEmpty && told.count == waiting.count, "\(told.count) warnings for \(waiting.count) jobs")
                try FileManager.default.removeItem(atPath: filler)
                let done = try await harness.waitFor(uploaded, ["Normal", "TranscodeFail"])
                #expect(done.status == "Normal", "\(done.errorMessage ?? "")")
            }
        }
    }

    @Test(
        "a PUT or part larger than the space left answers 507 and leaves nothing; smaller writes and reads go on",
        .enabled(if: getuid() == 0, "mounting a small tmpfs needs root"))
    func fullDisk() async throws {
        try await Self.withSmallDisk(megabytes: 24) { disk in
            // The disk really fills here: no space is kept back (`reserveKeptFree` covers the reserve).
            try await TestServer.with(configure: { $0.dataDirectory = disk + "/data"; $0.minFreeBytes = 0 }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("full").status == 200)
                let big = [UInt8](repeating: 7, count: 30 << 20)
                let refused = try await s3.put("full", "big", big)
                #expect(refused.status == 507 && refused.text.contains("<Code>InsufficientStorage</Code>"), "\(refused.text)")
                #expect(try await s3.get("full", "big").status == 404)
                #expect(try FileManager.default.contentsOfDirectory(atPath: disk + "/data/objects/tmp").isEmpty)

                // A multipart upload takes parts until the disk is full; the part that does not fit is refused, and
                // leaves nothing; the upload can still be aborted.
                let uploadId = try await s3.createMultipartUpload("full", "parts")
                let part = [UInt8](repeating: 1, count: 6 << 20)
                var stored = 0
                var refusedPart: S3TestClient.Reply?
                for number in 1...5 {
                    let reply = try await s3.uploadPart("full", "parts", uploadId: uploadId, number: number, part)
                    if reply.status == 200 { stored += 1 } else { refusedPart = reply; break }
                }
                #expect(stored >= 1 && refusedPart?.status == 507, "\(stored) parts, then \(refusedPart?.status ?? 0)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: disk + "/data/objects/tmp").isEmpty)
                let small = try await s3.put("full", "small", Array("still serving".utf8))
                #expect(small.status == 200)
                #expect(try await s3.get("full", "small").text == "still serving")
                let aborted = try await s3.send("DELETE", "/full/parts", query: [("uploadId", uploadId)])
                #expect(aborted.status == 204)
            }
        }
    }
}

/// Which storage calls count as failed ones (`ferry_storage_call_errors_total`).
@Suite("Failed storage calls: the stores' failures, not their refusals")
struct StoreFailureTests {
    /// Records whether each reported call failed.
    final class Recorder: ServiceEvents, @unchecked Sendable {
        // `failed` is only touched while holding `lock`.
        private let lock = NSLock()
        private var failed: [String] = []
        var calls: [String] { lock.withLock { failed } }
        func storageCall(layer: String, operation: String, duration: Duration, failed: Bool) {
            lock.withLock { self.failed.append("\(operation) \(failed)") }
        }
        func storageCallFailed(layer: String, operation: String) {
            lock.withLock { self.failed.append("\(operation) failed") }
        }
    }

    @Test("a quota, a missing object or a cancelled request is no failed call; a file system or database error, a full disk and an unavailable store are")
    func classified() async throws {
        let recorder = Recorder()
        let events: (any ServiceEvents)? = recorder
        let thrown: [(String, any Error)] = [
            ("quota", FerryDomainError(.quotaExceeded, "over")), ("missing", FerryDomainError(.objectNotFound, "gone")),
            ("cancelled", CancellationError()), ("open", POSIXFileError("open", ENOTDIR)),
            ("sqlite", DatabaseError(resultCode: .SQLITE_IOERR)), ("full", FerryDomainError.outOfSpace),
            ("store", FerryDomainError(.storeUnavailable, "down")),
        ]
        for (operation, error) in thrown {
            await #expect(throws: (any Error).self) { try await events.timed("catalog", operation) { throw error } }
            events.failed("blobs", operation, error)
        }
        #expect(recorder.calls == [
            "quota false", "missing false", "cancelled false", "open true", "open failed", "sqlite true", "sqlite failed",
            "full true", "full failed", "store true", "store failed",
        ])
    }
}
