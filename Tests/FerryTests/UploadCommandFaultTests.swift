import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ferry upload` when the bytes, the checkpoint or the network go wrong.
@Suite("ferry upload faults", .serialized, .timeLimit(.minutes(10)))
struct UploadCommandFaultTests {
    /// The VideoId a `ferry upload` error names (`Video ID…`).
    static func videoId(in text: String) -> String? {
        guard let range = text.range(of: "Video ") else { return nil }
        let id = text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return id.isEmpty ? nil : String(id)
    }

    @Test("a video uploaded as an IETF stream whose bytes were damaged on their way is deleted by the command (exit 1); a delete the service refuses names the video to delete by hand")
    func damagedStreamVideoIsDeleted() async throws {
        try await CommandLineTests.withService("ferry-cli-damaged") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let media = MediaServiceClient(
                    endpoint: URL(string: server.endpoint)!,
                    credentials: .init(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
                for refuseDelete in [false, true] {
                    let clip = data + "/clip-\(refuseDelete).mp4"
                    try FileManager.default.moveItem(atPath: try makeRandomFile(size: 3 * 1024 * 1024, in: data).path, toPath: clip)
                    proxy.clearFaults()
                    proxy.inject(.corruptRequestByte(at: 1_000_000), when: .method("PATCH"))
                    if refuseDelete {
                        proxy.inject(.status(403, code: "AccessDenied"), when: .path(contains: "DeleteVideo"), times: 1000)
                    }
                    let run = try await FerryRun.run(
                        [
                            "upload", clip, "--endpoint", proxy.endpoint, "--protocol", "ietf", "--max-retries", "1",
                            "--record-dir", data + "/records",
                        ], environment: environment)
                    #expect(run.status == 1, "\(run.error)")
                    let videoId = try #require(Self.videoId(in: run.error), "\(run.error)")
                    if refuseDelete {
                        #expect(run.error.contains("delete it by hand: ferry videos delete \(videoId)"), "\(run.error)")
                        #expect(!run.error.contains("was deleted"), "\(run.error)")
                        #expect(try await media.getVideoInfo(videoId: videoId).videoId == videoId)
                    } else {
                        #expect(run.error.contains("Video \(videoId), which held the damaged bytes, was deleted"), "\(run.error)")
                        do {
                            let info = try await media.getVideoInfo(videoId: videoId)
                            #expect(info.status == "Deleted", "\(info.status)")
                        } catch {
                            #expect((error as? FerryError)?.httpStatus == 404, "\(error)")
                        }
                    }
                }
            }
        }
    }
}
