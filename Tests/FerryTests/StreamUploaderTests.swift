import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@Suite("Stream uploads (tus and the IETF draft) over a link that loses answers", .timeLimit(.minutes(10)))
struct StreamUploaderTests {
    @Test(
        "an upload whose completing append was stored but whose answer was lost is found complete, and resuming it sends nothing",
        arguments: StreamUploader.WireProtocol.allCases)
    func lostCompletionAnswer(_ wire: StreamUploader.WireProtocol) async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                #expect(try await server.client().createBucket("streams").status == 200)
                let directory = TemporaryDirectory.make("ferry-stream-lost")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let file = URL(fileURLWithPath: directory + "/clip.bin")
                let bytes = (0..<(3 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
                try Data(bytes).write(to: file)
                let key = "lost-\(wire.rawValue).bin"
                let creation = try #require(URL(string: proxy.endpoint + "/_ferry/uploads/s3/streams/" + key))
                var uploader = StreamUploader(protocol: wire, chunkSize: 4 * 1024 * 1024)
                uploader.retryPolicy = RetryPolicy(maxRetryCount: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
                // The one append reaches the server, which stores it and makes the object; its answer never comes back.
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("PATCH"))
                let created = NIOLockedValueBox<URL?>(nil)
                let result = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    onCreated: { url in created.withLockedValue { $0 = url } })
                #expect(proxy.pendingFaults.isEmpty, "the answer was never lost")
                #expect(result.size == Int64(bytes.count))
                let stored = try await server.client().get("streams", key)
                #expect(stored.status == 200 && stored.body == bytes)
                #expect(result.etag == stored.header("ETag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))

                // A process that died before hearing the answer resumes the same upload: it is complete, nothing is sent.
                proxy.clearLog()
                let uploadURL = try #require(created.withLockedValue { $0 })
                let resumed = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    resuming: uploadURL)
                #expect(resumed.uploadURL == uploadURL && resumed.size == Int64(bytes.count))
                if wire == .ietf {
                    #expect(!proxy.log.contains { $0.method != "HEAD" }, "\(proxy.log)")
                }
            }
        }
    }
}
