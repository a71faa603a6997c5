import Crypto
import FerryCore
import Foundation
import Testing

@testable import Ferry

/// A transport that starts multipart uploads, stores the first part, and refuses every later one with 403
/// AccessDenied (not retryable).
private final class RefusingTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var parts = 0

    func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        if request.method == "POST", request.url.contains("uploads") {
            let xml = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>"
            return TransportResponse(status: 200, headers: [("content-type", "application/xml")], body: Array(xml.utf8))
        }
        let first = lock.withLock { () -> Bool in
            parts += 1
            return parts == 1
        }
        if first {
            let etag = Insecure.MD5.hash(data: request.body).map { String(format: "%02x", $0) }.joined()
            return TransportResponse(status: 200, headers: [("ETag", "\"\(etag)\"")], body: [])
        }
        let xml = "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
        return TransportResponse(status: 403, headers: [("content-type", "application/xml")], body: Array(xml.utf8))
    }
}

/// Lets a test hold the checkpoint writer inside a write, and know when it got there.
private final class WriteGate: @unchecked Sendable {
    /// Yields once the held write has begun; awaited, so no thread waits for it.
    let entered: AsyncStream<Void>
    private let enteredSignal: AsyncStream<Void>.Continuation
    /// Blocks the checkpoint writer's own dispatch thread (never one of the cooperative pool's) until signalled.
    let release = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var writes = 0

    init() {
        (entered, enteredSignal) = AsyncStream<Void>.makeStream()
    }

    /// Holds the second write (the one after the first part) until released; the others pass.
    func hold() {
        let second = lock.withLock { () -> Bool in
            writes += 1
            return writes == 2
        }
        guard second else { return }
        enteredSignal.yield()
        release.wait()
    }
}

/// Whether `signal` yields within `limit`: a bound only a broken upload reaches, not a guess at how long it takes.
private func arrives(_ signal: AsyncStream<Void>, within limit: Duration) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await _ in signal { return true }
            return false
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return false
        }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}

@Suite("Pausing an upload that has just failed", .timeLimit(.minutes(10)))
struct PauseAfterFailureTests {
    @Test("a pause that arrives while a failure's checkpoint is being written does not turn the failure into a pause")
    func pauseDuringFailureFlush() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("ferry-pause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("movie.bin")
        try Data(repeating: 7, count: 64 * 1024).write(to: file)  // larger than the part size: a multipart upload

        let gate = WriteGate()
        let (stopDecided, decided) = AsyncStream<Void>.makeStream()
        let (pauseTaken, taken) = AsyncStream<Void>.makeStream()
        var configuration = ObjectStorageClient.Configuration()
        configuration.transport = RefusingTransport()
        configuration.retryPolicy = .none
        configuration.beforeCheckpointWrite = { gate.hold() }
        configuration.stopDecided = { decided.yield() }
        configuration.controlTaken = { if case .pause = $0 { taken.yield() } }
        configuration.smallestPartSize = 16 * 1024
        let client = ObjectStorageClient(
            endpoint: URL(string: "http://127.0.0.1:1")!, credentials: Credentials(accessKeyId: "AKID", secretAccessKey: "secret"),
            configuration: configuration)
        var request = ResumableUploadRequest(bucket: "b", key: "k", fileURL: file)
        request.recordDirectory = directory.appendingPathComponent("records")
        request.partSize = 16 * 1024
        request.multipartThreshold = 16 * 1024
        request.concurrency = 1
        request.checksumAlgorithm = nil
        let upload = try await client.upload(request)

        // The checkpoint written after the first part is held; the second part is refused meanwhile, and the failure
        // waits for that write before it is reported. A pause arrives in that window.
        #expect(await arrives(gate.entered, within: .seconds(60)), "no checkpoint write began")
        // The second part is refused and the run has decided why it stopped; its flush waits for the held write.
        #expect(await arrives(stopDecided, within: .seconds(60)), "the upload did not stop")
        let pausing = Task { await upload.pause() }
        #expect(await arrives(pauseTaken, within: .seconds(60)), "the upload did not take the pause in")
        gate.release.signal()
        await pausing.value

        let outcome = await withTaskGroup(of: String.self) { group in
            group.addTask {
                do {
                    _ = try await upload.result
                    return "completed"
                } catch let error as FerryError {
                    return "failed \(error.serverCode ?? "\(error.code)")"
                } catch {
                    return "threw \(error)"
                }
            }
            group.addTask {
                // Only reached when the pause hid the failure (the result then never comes); generous, as the failure
                // is reported only after the held checkpoint write (an fsync) ends, which a busy disk may slow.
                try? await Task.sleep(for: .seconds(60))
                return "still waiting (reported as paused)"
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        #expect(outcome == "failed AccessDenied")
        // A paused upload's events go on; cancelling ends them either way.
        await upload.cancel()
        var sawFailed = false
        var sawPaused = false
        for await event in upload.events {
            if case .failed = event { sawFailed = true }
            if case .paused = event { sawPaused = true }
        }
        #expect(sawFailed && !sawPaused)
    }
}
