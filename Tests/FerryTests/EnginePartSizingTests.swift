import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite("Engine: part sizes that adapt to the connection", .timeLimit(.minutes(10)))
struct EnginePartSizingTests {
    static let mib: Int64 = 1024 * 1024

    static func checkpoint(in records: URL) throws -> UploadCheckpoint {
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: records.path).first { $0.hasSuffix(".json") })
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode(UploadCheckpoint.self, from: Data(contentsOf: records.appendingPathComponent(name)))
    }

    @Test("a part size below the smallest S3 takes (the seeds' 1 MiB) is raised to 5 MiB before anything is sent: the upload completes against a service that refuses smaller parts, fixed or adaptive")
    func smallPartSizeRaised() async throws {
        let directory = TemporaryDirectory.make("ferry-small-parts")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 11 * Int(Self.mib) + 5, in: directory)
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("small")
            for (key, sizing) in [
                ("fixed.bin", ResumableUploadRequest.PartSizing.fixed(Self.mib)),
                ("adaptive.bin", .adaptive(minimum: Self.mib, maximum: 2 * Self.mib, target: .seconds(2))),
            ] {
                var request = ResumableUploadRequest(bucket: "small", key: key, fileURL: file)
                request.partSizing = sizing
                let result = try await client.upload(request).result
                #expect(result.size == Int64(11 * Int(Self.mib) + 5))
                let stored = try await client.getObject(bucket: "small", key: key)
                #expect(stored == [UInt8](try Data(contentsOf: file)))
            }
        }
    }

    @Test("by default parts start at 5 MiB and grow on a fast link; the cut is checkpointed and a new client resumes it")
    func growAndResume() async throws {
        let directory = TemporaryDirectory.make("ferry-part-sizing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 120 * Int(Self.mib) + 13
        let file = try makeRandomFile(size: size, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("sizing")
            var request = ResumableUploadRequest(bucket: "sizing", key: "grown.bin", fileURL: file)
            request.concurrency = 2
            request.recordDirectory = records
            #expect(request.partSizing == .adaptive && request.partSize == 5 * Self.mib)
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            #expect(await log.waitForProgress(60 * Self.mib))
            await upload.pause()
            try await log.waitForPause()

            // The checkpoint records the cut: 5 MiB parts first, then larger ones, whole MiB, at most 16 MiB.
            let checkpoint = try Self.checkpoint(in: records)
            let segments = try #require(checkpoint.partSegments)
            #expect(segments.first?.partSize == 5 * Self.mib)
            let grown = try #require(segments.last?.partSize)
            #expect(grown > 5 * Self.mib && grown <= 16 * Self.mib && grown % Self.mib == 0)
            let plan = try UploadPlan(fileSize: Int64(size), segments: segments)
            #expect(plan.partCount < 25)  // 120 MiB in 5 MiB parts would be 25
            // What the server holds matches the cut, and every part but the last is at least 5 MiB.
            let onServer = try await client.listParts(bucket: "sizing", key: "grown.bin", uploadId: checkpoint.uploadId)
            #expect(!onServer.isEmpty)
            #expect(onServer.allSatisfy { $0.size == plan.size(ofPart: $0.number) && $0.size >= 5 * Self.mib })

            // A new client (as after the app was killed) resumes from the checkpoint with the same cut.
            let fresh = server.engine()
            let resumed = try await fresh.upload(request)
            let result = try await resumed.result
            collector.cancel()  // the paused task's events never finish: it was left paused, as a killed app leaves it
            // A part whose body had reached the server when the pause cancelled its request can be stored just after
            // ListParts looked: at most the two parts that were in flight.
            #expect(result.partsResumed >= onServer.count && result.partsResumed <= onServer.count + 2)
            // The parts found keep the checkpoint's cut (else they would not be reused); the parts never taken may be
            // cut again at the rate the new run measures, which a busy machine changes. So the count is the ETag's.
            let total = result.partsResumed + result.partsSent
            #expect(result.etag.hasSuffix("-\(total)"))
            #expect(total >= (onServer.map(\.number).max() ?? 0))
            #expect(result.verification == .checksum)
            let back = URL(fileURLWithPath: directory + "/back")
            try await client.download(bucket: "sizing", key: "grown.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: records.path).filter { $0.hasSuffix(".json") }.isEmpty)
        }
    }

    @Test("a target no part can meet keeps the minimum size; partSize fixes every part's size")
    func slowAndFixed() async throws {
        let directory = TemporaryDirectory.make("ferry-part-sizing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 32 * Int(Self.mib) + 5, in: directory)
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("sizing")
            var slow = ResumableUploadRequest(bucket: "sizing", key: "slow.bin", fileURL: file)
            slow.partSizing = .adaptive(minimum: 5 * Self.mib, maximum: 16 * Self.mib, target: .milliseconds(1))
            let slowResult = try await client.upload(slow).result
            #expect(slowResult.partsSent == 7)
            var fixed = ResumableUploadRequest(bucket: "sizing", key: "fixed.bin", fileURL: file)
            fixed.partSize = 8 * Self.mib
            #expect(fixed.partSizing == .fixed(8 * Self.mib))
            let fixedResult = try await client.upload(fixed).result
            #expect(fixedResult.partsSent == 5)
            #expect(fixedResult.etag.hasSuffix("-5"))
        }
    }

    @Test("adaptive bounds that cannot work are refused with invalidArgument")
    func invalidBounds() async throws {
        let directory = TemporaryDirectory.make("ferry-part-sizing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 1024, in: directory)
        let client = ObjectStorageClient(
            endpoint: URL(string: "http://127.0.0.1:9")!,
            credentials: Credentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret"))
        for sizing: ResumableUploadRequest.PartSizing in [
            .adaptive(minimum: 0, maximum: 16 * Self.mib, target: .seconds(2)),
            .adaptive(minimum: 8 * Self.mib, maximum: 5 * Self.mib, target: .seconds(2)),
            .adaptive(minimum: 5 * Self.mib, maximum: 16 * Self.mib, target: .zero),
        ] {
            var request = ResumableUploadRequest(bucket: "b", key: "k", fileURL: file)
            request.partSizing = sizing
            let error = await #expect(throws: FerryError.self) { try await client.upload(request) }
            #expect(error?.code == .invalidArgument)
        }
    }
}
