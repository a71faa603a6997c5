@testable import Ferry
import FerryCore
import FerryTestSupport
import FerryTransport
import Foundation
import Testing

@Suite("BackgroundURLSessionTransport", .timeLimit(.minutes(10)))
struct BackgroundURLSessionTransportTests {
    @Test("a multipart upload through the background session stores the file, counts every byte, leaves no spool file")
    func multipartUpload() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let size = 12 * 1024 * 1024 + 4321
        let file = try makeRandomFile(size: size)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        try await TestServer.with { server in
            let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
            let client = server.engine(transport: transport)
            try await client.createBucket("background")
            var request = ResumableUploadRequest(bucket: "background", key: "movie.bin", fileURL: file)
            request.partSize = 5 * 1024 * 1024
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            let result = try await upload.result
            await collector.value
            #expect(result.uploadId != nil)
            #expect(result.partsSent == 3)
            #expect(result.size == Int64(size))
            // Every part (and CompleteMultipartUpload's body) went through the background session.
            #expect(transport.backgroundTasksStarted >= result.partsSent + 1)
            #expect(log.progress.last?.totalBytesSent == Int64(size))
            #expect(log.progress.allSatisfy { $0.totalBytesSent <= Int64(size) })
            let downloaded = URL(fileURLWithPath: file.path + ".back")
            try await client.download(bucket: "background", key: request.key, to: downloaded)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: downloaded.path))
            #expect(try Self.spoolFiles(in: spool) == [])
            #expect(BackgroundTaskLedger(directory: spool).snapshot.isEmpty)
        }
    }

    @Test("an answer the ledger kept for a part is returned without sending the part, and then forgotten")
    func keptAnswer() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        // Nothing listens on this port: a request that reached the network would fail.
        let port = try await HTTPReceiver.closedPort()
        let url = "http://127.0.0.1:\(port)/background/movie.bin?partNumber=3&uploadId=U1"
        let answer = BackgroundTaskLedger.Answer(
            status: 200,
            headers: [.init(name: "ETag", value: "\"5d41402abc4b2a76b9719d911017c592\""),
                .init(name: "x-amz-checksum-crc32c", value: "yZRlqg==")],
            body: Data())
        // What a relaunched process records when the part's task completes with nobody awaiting it.
        _ = BackgroundTaskLedger(directory: spool).finish(key: "PUT " + url, spoolFile: nil, answer: answer)

        let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
        let request = TransportRequest(
            method: "PUT", url: url, headers: [("Authorization", "AWS4-HMAC-SHA256 Signature=abc")],
            body: [UInt8](repeating: 7, count: 1000), timeout: .seconds(30))
        let sent = ByteCount()
        let response = try await transport.send(request, bodyProgress: { sent.add($0) }, responseSink: nil)
        #expect(response.status == 200)
        #expect(response.header("etag") == "\"5d41402abc4b2a76b9719d911017c592\"")
        #expect(response.header("x-amz-checksum-crc32c") == "yZRlqg==")
        #expect(sent.value == 1000)
        #expect(transport.backgroundTasksStarted == 0)
        #expect(BackgroundTaskLedger(directory: spool).snapshot.isEmpty)

        // The answer was handed out once: the same request now goes to the (closed) port and fails.
        await #expect(throws: TransportError.self) {
            _ = try await transport.send(request, bodyProgress: { _ in }, responseSink: nil)
        }
        #expect(transport.backgroundTasksStarted == 1)
        #expect(try Self.spoolFiles(in: spool) == [])
    }

    @Test("a PUT of a whole object is always sent, even when the ledger kept an answer for its URL")
    func wholeObjectPutIsAlwaysSent() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let port = try await HTTPReceiver.closedPort()
        let url = "http://127.0.0.1:\(port)/background/avatar.jpg"
        let answer = BackgroundTaskLedger.Answer(
            status: 200, headers: [.init(name: "ETag", value: "\"old\"")], body: Data())
        _ = BackgroundTaskLedger(directory: spool).finish(key: "PUT " + url, spoolFile: nil, answer: answer)
        let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
        let request = TransportRequest(method: "PUT", url: url, headers: [], body: [1, 2, 3], timeout: .seconds(30))
        // Other bytes than the ones the kept answer was for: they go to the (closed) port, and fail there.
        await #expect(throws: TransportError.self) {
            _ = try await transport.send(request, bodyProgress: { _ in }, responseSink: nil)
        }
        #expect(transport.backgroundTasksStarted == 1)
        #expect(BackgroundURLSessionTransport.isPartOfMultipartUpload(
            TransportRequest(method: "PUT", url: url + "?partNumber=1&uploadId=U", headers: [], timeout: .seconds(1))))
        #expect(!BackgroundURLSessionTransport.isPartOfMultipartUpload(
            TransportRequest(method: "PUT", url: url + "?uploadId=", headers: [], timeout: .seconds(1))))
    }

    @Test("orphan spool files are deleted at creation; one a ledger entry names stays until its task is known gone")
    func orphanSpoolFiles() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        for name in ["orphan.body", "running.body", "notes.txt"] {
            let path = spool.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3])))
        }
        let staged = BackgroundTaskLedger(directory: spool)
        try staged.begin(
            key: "PUT http://127.0.0.1:1/background/a.bin?partNumber=1&uploadId=U1", spoolFile: "running.body")
        let answeredKey = "PUT http://127.0.0.1:1/background/b.bin?partNumber=2&uploadId=U2"
        _ = staged.finish(
            key: answeredKey, spoolFile: nil,
            answer: .init(status: 200, headers: [.init(name: "ETag", value: "\"b\"")], body: Data()))

        let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
        #expect(!Self.exists("orphan.body", in: spool))
        #expect(Self.exists("running.body", in: spool))
        #expect(Self.exists("notes.txt", in: spool), "only spool files are the transport's to delete")

        // The first request waits for the session to list its tasks: none runs for the entry, whose file then goes.
        let response = try await transport.send(
            TransportRequest(
                method: "PUT", url: String(answeredKey.dropFirst(4)), headers: [], body: [1], timeout: .seconds(30)),
            bodyProgress: { _ in }, responseSink: nil)
        #expect(response.header("ETag") == "\"b\"")
        #expect(!Self.exists("running.body", in: spool))
        #expect(Self.exists("notes.txt", in: spool))
        #expect(BackgroundTaskLedger(directory: spool).snapshot.isEmpty)
    }

    @Test("a streamed body is spooled, chunk by chunk, to a private file holding exactly its bytes, and sent from it")
    func streamedBody() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let source = try makeRandomFile(size: 300_001)
        defer { try? FileManager.default.removeItem(at: source.deletingLastPathComponent()) }
        let sourceBytes = [UInt8](try Data(contentsOf: source))
        let head = Array("--boundary\r\nContent-Type: video/mp4\r\n\r\n".utf8)
        let tail = Array("\r\n--boundary--\r\n".utf8)
        let body = StreamedBody(
            [.bytes(head), .file(path: source.path, offset: 17, length: 250_000), .bytes(tail)], chunkSize: 4096)
        let expected = head + sourceBytes[17..<250_017] + tail

        let file = spool.appendingPathComponent("streamed.body")
        let request = TransportRequest(
            method: "POST", url: "http://127.0.0.1:1/upload", headers: [], streamedBody: body, timeout: .seconds(30))
        try await BackgroundURLSessionTransport.spool(request, to: file)
        #expect([UInt8](try Data(contentsOf: file)) == expected)
        let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        try FileManager.default.removeItem(at: file)

        try await HTTPReceiver.with(answer: "{}") { receiver in
            let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
            var sent = TransportRequest(
                method: "POST", url: receiver.url("/upload"),
                headers: [("Content-Type", "multipart/form-data; boundary=boundary")],
                streamedBody: body, timeout: .seconds(30))
            sent.headers.append(("X-Test", "streamed"))
            let progress = ByteCount()
            let response = try await transport.send(sent, bodyProgress: { progress.add($0) }, responseSink: nil)
            #expect(response.status == 200)
            #expect(response.body == Array("{}".utf8))
            #expect(progress.value == expected.count)
            #expect(transport.backgroundTasksStarted == 1)
            let received = await receiver.recorder.requests
            #expect(received.count == 1)
            #expect(received.first?.body == expected)
            #expect(try Self.spoolFiles(in: spool) == [])
        }
    }

    @Test("cancelling the awaiting task ends send with CancellationError and no spool file; no header in the ledger")
    func cancellation() async throws {
        let spool = Self.spoolDirectory()
        defer { try? FileManager.default.removeItem(at: spool) }
        let closed = try await HTTPReceiver.closedPort()
        try await FaultProxy.with(upstream: "http://127.0.0.1:\(closed)") { proxy in
            // The proxy takes the request and never answers.
            proxy.inject(.stall(seconds: 600), times: .max)
            let transport = try BackgroundURLSessionTransport(identifier: "test.\(UUID())", spoolDirectory: spool)
            let secret =
                "AWS4-HMAC-SHA256 Credential=FKIATESTROOT0000/20250101/us-east-1/s3/aws4_request, Signature=0123abcd"
            let url = proxy.endpoint + "/background/movie.bin?partNumber=1&uploadId=U1"
            // Small enough for the loopback socket to take whole while nobody reads it: the task then awaits the answer
            // with its body handed over. (Cancelling while FoundationNetworking still reads the body file can stop the
            // process on Linux; see "On Linux" in the UploadsInTheBackground article.)
            let length = 64 * 1024
            let request = TransportRequest(
                method: "PUT", url: url,
                headers: [("Authorization", secret), ("x-amz-security-token", "session-token-secret")],
                body: [UInt8](repeating: 0x5a, count: length), timeout: .seconds(600))
            let (progressed, progressContinuation) = AsyncStream<Int>.makeStream()
            let upload = Task {
                try await transport.send(request, bodyProgress: { progressContinuation.yield($0) }, responseSink: nil)
            }
            var sent = 0
            for await bytes in progressed {
                sent += bytes
                if sent >= length { break }
            }
            #expect(sent == length)
            #expect(try Self.spoolFiles(in: spool).count == 1)
            let running = BackgroundTaskLedger(directory: spool).snapshot
            #expect(running.map(\.key) == ["PUT " + url])
            let ledgerText = try String(
                contentsOf: spool.appendingPathComponent(BackgroundTaskLedger.fileName), encoding: .utf8)
            #expect(!ledgerText.contains("Signature"))
            #expect(!ledgerText.contains("session-token-secret"))

            upload.cancel()
            let outcome = await upload.result
            #expect(throws: CancellationError.self) { try outcome.get() }
            #expect(try Self.spoolFiles(in: spool) == [])
            #expect(BackgroundTaskLedger(directory: spool).snapshot.isEmpty)
        }
    }

    // MARK: - Helpers

    /// A new, empty spool directory.
    static func spoolDirectory() -> URL {
        URL(fileURLWithPath: TemporaryDirectory.make("ferry-spool"))
    }

    /// The names of the spool files in `directory`.
    static func spoolFiles(in directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(BackgroundTaskLedger.spoolSuffix) }.sorted()
    }

    static func exists(_ name: String, in directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path)
    }
}

/// Adds up progress reports.
///
/// `@unchecked Sendable`: `total` is only read and written while holding `lock`.
private final class ByteCount: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    func add(_ bytes: Int) { lock.withLock { total += bytes } }
    var value: Int { lock.withLock { total } }
}
