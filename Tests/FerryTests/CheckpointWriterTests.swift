@testable import Ferry
import Foundation
import Testing

@Suite("Checkpoint writer", .timeLimit(.minutes(10)))
struct CheckpointWriterTests {
    static func checkpoint(parts count: Int) -> UploadCheckpoint {
        UploadCheckpoint(
            endpoint: "http://127.0.0.1:9", bucket: "b", key: "k", filePath: "/tmp/f", uploadId: "u",
            partSize: 5 << 20, fingerprint: FileFingerprint(size: 1, modificationTime: 0, sampleHash: "00"),
            checksumAlgorithm: "CRC32C",
            parts: (1...max(1, count)).map { UploadedPart(number: $0, size: 5 << 20, etag: "e\($0)", checksum: "c") },
            createdAt: Date(timeIntervalSince1970: 1_700_000_000))
    }

    static func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ferry-checkpoint-writer-\(UUID().uuidString)")
    }

    @Test("states submitted faster than they are written: after flush the file holds the latest, and no temp file is left")
    func latestWins() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = CheckpointStore(directory: directory)
        let writer = CheckpointWriter(store: store, identifier: "id")
        for count in 1...300 { try writer.submit(Self.checkpoint(parts: count)) }
        try await writer.flush()
        #expect(store.load("id")?.parts.count == 300)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files == ["id.ferry-checkpoint.json"])
    }

    @Test("delete right after submits: no checkpoint is left, and none appears later from a write under way")
    func deleteWins() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = CheckpointStore(directory: directory)
        for round in 0..<20 {
            let writer = CheckpointWriter(store: store, identifier: "id\(round)")
            for count in 1...50 { try writer.submit(Self.checkpoint(parts: count)) }
            await writer.delete()
            #expect(store.load("id\(round)") == nil)
        }
        try await Task.sleep(for: .milliseconds(200))
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files.filter { $0.hasSuffix(".json") }.isEmpty)
    }

    @Test("a record directory that cannot be created: flush throws, and so does the next submit")
    func failureReported() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-not-a-dir-\(UUID().uuidString)")
        try Data("x".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let writer = CheckpointWriter(
            store: CheckpointStore(directory: file.appendingPathComponent("records")), identifier: "id")
        try writer.submit(Self.checkpoint(parts: 1))
        await #expect(throws: (any Error).self) { try await writer.flush() }
        #expect(throws: (any Error).self) { try writer.submit(Self.checkpoint(parts: 2)) }
    }
}
