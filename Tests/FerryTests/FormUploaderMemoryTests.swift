import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// This process's resident set size, from /proc (Linux).
func residentBytes() -> Int64? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kib = Int64(line.split(separator: " ").dropFirst().first ?? "")
    else { return nil }
    return kib * 1024
}

/// Free bytes on the filesystem of the temporary directory.
func freeTemporarySpace() -> Int64 {
    let attributes = try? FileManager.default.attributesOfFileSystem(forPath: NSTemporaryDirectory())
    return (attributes?[.systemFreeSize] as? NSNumber)?.int64Value ?? 0
}

@Suite(
    "Form uploader: a 2 GiB file", .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/status")),
    .timeLimit(.minutes(10)))
struct FormUploaderMemoryTests {
    @Test(
        "a 2 GiB file goes through the form endpoint with its CRC32 while this process (client, server, and the tests running beside them) grows by less than a quarter of it",
        .enabled(if: freeTemporarySpace() > 8 << 30, "needs 8 GiB free for the file and its stored copy"))
    func twoGiBStreamed() async throws {
        let directory = TemporaryDirectory.make("ferry-form-big")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size: Int64 = 2 << 30
        // A sparse file with a few written regions: reading it costs no disk, and its CRC32 is not that of zeros.
        let file = URL(fileURLWithPath: directory + "/big.mp4")
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else { throw POSIXError(.EACCES) }
        let handle = try FileHandle(forWritingTo: file)
        for offset in [Int64(0), 1 << 30, size - 4096] {
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(offset >> 20)) }))
        }
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()

        try await TestServer.with { server in
            try await server.server.store.createBucket("big")
            var extra = FormUploader.ExtraParameters()
            extra.crc32 = try await FormUploader.crc32(of: file)
            let token = server.uploadToken(PutPolicy(scope: "big", deadline: Date().addingTimeInterval(3600)))
            let baseline = try #require(residentBytes())
            let sampler = Task { () -> Int64 in
                var peak = baseline
                while !Task.isCancelled {
                    peak = max(peak, residentBytes() ?? 0)
                    try? await Task.sleep(for: .milliseconds(50))
                }
                return peak
            }
            // One request carries the 2 GiB; its deadline allows a machine busy with other tests.
            let upload = server.formUploader(token: token, chunkSize: 256 * 1024, timeout: .seconds(900)).upload(file: file, key: "big.mp4", extraParams: extra)
            let result = try await upload.result
            sampler.cancel()
            let peak = await sampler.value
            #expect(result.key == "big.mp4")
            let stored = try await server.server.store.object(bucket: "big", key: "big.mp4")
            #expect(stored.size == size)
            // The process runs other suites at the same time (64 MiB multipart uploads among them), whose buffers count
            // too: a run of the whole package saw 400 MB at the peak. A file held whole would add its 2 GiB.
            #expect(peak - baseline < size / 4, "grew by \(peak - baseline) bytes")
        }
    }
}
