import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The checksum choices of a resumable upload.
let checksumChoices: [ChecksumAlgorithm?] = [.crc32c, .crc32, .crc64nvme, .sha256, .sha1, .md5, nil]

@Suite("Engine against Ferry's server", .timeLimit(.minutes(10)))
struct EngineAgainstFerryTests {
    @Test("64 MiB multipart upload, byte-identical, with each checksum and each transport",
        arguments: checksumChoices.map { $0?.s3Name ?? "none" }, TransportKind.allCases)
    func upload64MiB(algorithmName: String, transport: TransportKind) async throws {
        let algorithm = ChecksumAlgorithm(name: algorithmName)
        let file = try makeRandomFile(size: 64 * 1024 * 1024 + 4321)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        try await TestServer.with { server in
            let client = server.engine(transport: transport.make())
            try await client.createBucket("engine")
            var request = ResumableUploadRequest(bucket: "engine", key: "video/\(algorithmName).bin", fileURL: file)
            request.checksumAlgorithm = algorithm
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            let result = try await upload.result
            await collector.value
            #expect(result.size == 64 * 1024 * 1024 + 4321)
            // Default part sizes: 5 MiB to start with, then grown on loopback (13 parts if none grew, 5 if all but
            // the first four did); checksums and the ETag cover parts of mixed sizes.
            #expect((5...13).contains(result.partsSent))
            #expect(result.etag.hasSuffix("-\(result.partsSent)"))
            #expect(result.verification == (algorithm == nil ? .none : algorithm == .md5 ? .etag : .checksum))
            if let algorithm, algorithm != .md5 {
                #expect(result.checksum != nil)
                let head = try await client.headObject(bucket: "engine", key: request.key)
                #expect(head.checksums[algorithm.s3Name] == result.checksum)
            }
            let downloaded = URL(fileURLWithPath: file.path + ".back")
            try await client.download(bucket: "engine", key: request.key, to: downloaded)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: downloaded.path))
            let progress = log.progress
            // Each report says something new: more sent, or more stored.
            #expect(zip(progress, progress.dropFirst()).allSatisfy {
                $0.totalBytesSent <= $1.totalBytesSent && $0.totalBytesStored <= $1.totalBytesStored
                    && ($0.totalBytesSent < $1.totalBytesSent || $0.totalBytesStored < $1.totalBytesStored)
            })
            #expect(progress.allSatisfy { $0.totalBytesStored <= $0.totalBytesSent })
            #expect(progress.last?.totalBytesStored == result.size)
            #expect(progress.last?.totalBytesSent == result.size)
            #expect(progress.allSatisfy { $0.totalBytesSent <= result.size })
            if case .completed = log.events.last {} else { Issue.record("the last event is not completed: \(String(describing: log.events.last))") }
        }
    }
}

extension EngineAgainstFerryTests {
    @Test("below the multipart threshold one PUT carries the file, an empty one too, with the checksum verified",
        arguments: TransportKind.allCases)
    func singlePut(transport: TransportKind) async throws {
        try await TestServer.with { server in
            let client = server.engine(transport: transport.make())
            try await client.createBucket("engine")
            for size in [0, 1, 70_001] {
                let file = try makeRandomFile(size: size)
                defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
                let request = ResumableUploadRequest(bucket: "engine", key: "small/\(size)", fileURL: file)
                let upload = try await client.upload(request)
                let (log, collector) = EventLog.collect(upload)
                let result = try await upload.result
                await collector.value
                #expect(result.uploadId == nil && result.partsSent == 1 && result.size == Int64(size))
                #expect(result.verification == .checksum)
                #expect(log.progress.last?.totalBytesSent == Int64(size))
                let stored = try await client.getObject(bucket: "engine", key: request.key)
                #expect(stored == [UInt8](try Data(contentsOf: file)), "size \(size)")
            }
        }
    }
}

@Suite("Engine against moto", .serialized, .timeLimit(.minutes(10)))
struct EngineAgainstMotoTests {
    @Test("64 MiB multipart upload to moto, byte-identical, with each checksum and each transport",
        arguments: checksumChoices.map { $0?.s3Name ?? "none" })
    func upload64MiB(algorithmName: String) async throws {
        let algorithm = ChecksumAlgorithm(name: algorithmName)
        let moto = try await MotoServer.start()
        let file = try makeRandomFile(size: 64 * 1024 * 1024 + 999)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        for transport in TransportKind.allCases {
            var configuration = ObjectStorageClient.Configuration()
            configuration.transport = transport.make()
            let client = ObjectStorageClient(
                endpoint: URL(string: moto.endpoint)!,
                credentials: Credentials(accessKeyId: "testing", secretAccessKey: "testing"), configuration: configuration)
            try await client.createBucket("moto-engine")
            var request = ResumableUploadRequest(bucket: "moto-engine", key: "\(algorithmName)-\(transport.rawValue)", fileURL: file)
            request.checksumAlgorithm = algorithm
            let upload = try await client.upload(request)
            if algorithm == .crc32c {
                // moto 5.2 computes a multipart object's CRC32C with the CRC32 polynomial. Ferry must refuse to call
                // that verified: the upload fails with checksumMismatch, and moto's value is the file's CRC32.
                do {
                    _ = try await upload.result
                    Issue.record("a wrong CRC32C from moto was accepted")
                } catch let error as FerryError {
                    #expect(error.code == .checksumMismatch)
                }
                let reported = try await client.headObject(bucket: "moto-engine", key: request.key).checksums["CRC32C"]
                let bytes = try Data(contentsOf: file)
                var crc32 = Checksummer(.crc32)
                var crc32c = Checksummer(.crc32c)
                crc32.update(bytes)
                crc32c.update(bytes)
                #expect(reported == crc32.finalizeBase64())
                #expect(reported != crc32c.finalizeBase64())
            } else {
                let result = try await upload.result
                #expect(result.size == 64 * 1024 * 1024 + 999)
                #expect(result.verification == (algorithm == nil ? .none : algorithm == .md5 ? .etag : .checksum))
            }
            let downloaded = URL(fileURLWithPath: file.path + ".\(transport.rawValue)")
            try await client.download(bucket: "moto-engine", key: request.key, to: downloaded)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: downloaded.path), "\(transport)")
        }
        await moto.stop()
    }
}
