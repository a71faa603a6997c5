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
        #expect(FerryDomainError(machineFailure: DatabaseError(resultCode: .SQLITE_BUSY)) == nil)
        #expect(FerryDomainError(machineFailure: CancellationError()) == nil)
        #expect(S3Dialect.code(.storageFull) == .insufficientStorage && S3ErrorCode.insufficientStorage.httpStatus == 507)
        #expect(FormDialect.formError(FerryDomainError(.storageFull, "full"))?.status == 507)
    }

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
        "a PUT or part larger than the space left answers 507 and leaves nothing; smaller writes and reads go on",
        .enabled(if: getuid() == 0, "mounting a small tmpfs needs root"))
    func fullDisk() async throws {
        try await Self.withSmallDisk(megabytes: 24) { disk in
            try await TestServer.with(configure: { $0.dataDirectory = disk + "/data" }) { server in
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
