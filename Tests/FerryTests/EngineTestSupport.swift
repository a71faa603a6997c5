import Ferry
import FerryCore
import FerryTestSupport
import Foundation

/// A temporary file of random bytes.
func makeRandomFile(size: Int, in directory: String = TemporaryDirectory.make("ferry-engine")) throws -> URL {
    let url = URL(fileURLWithPath: directory).appendingPathComponent("file-\(UUID().uuidString).bin")
    guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw POSIXError(.EACCES) }
    let handle = try FileHandle(forWritingTo: url)
    var generator = SystemRandomNumberGenerator()
    var remaining = size
    while remaining > 0 {
        let count = min(remaining, 1 << 20)
        let words = (0..<(count + 7) / 8).map { _ in generator.next() as UInt64 }
        try words.withUnsafeBytes { try handle.write(contentsOf: Data($0.prefix(count))) }
        remaining -= count
    }
    try handle.close()
    return url
}

enum TransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case asyncHTTPClient, urlSession
    var testDescription: String { rawValue }
    func make() -> any HTTPTransport {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport()
        case .urlSession: URLSessionTransport()
        }
    }
}

import Testing

extension TestServer {
    /// An engine client for this server.
    func engine(
        transport: any HTTPTransport = AsyncHTTPClientTransport(), retry: RetryPolicy = RetryPolicy(),
        credentials: Credentials? = nil
    ) -> ObjectStorageClient {
        var configuration = ObjectStorageClient.Configuration()
        configuration.transport = transport
        configuration.retryPolicy = retry
        return ObjectStorageClient(
            endpoint: URL(string: endpoint)!,
            credentials: credentials ?? Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey),
            configuration: configuration)
    }
}

/// Collects an upload's events while it runs.
final class EventLog: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var _events: [UploadEvent] = []
    var events: [UploadEvent] { lock.withLock { _events } }
    func append(_ event: UploadEvent) { lock.withLock { _events.append(event) } }

    /// Starts collecting; the task ends when the sequence finishes.
    static func collect(_ upload: ResumableUploadTask) -> (EventLog, Task<Void, Never>) {
        let log = EventLog()
        let task = Task { for await event in upload.events { log.append(event) } }
        return (log, task)
    }

    var progress: [UploadProgress] {
        events.compactMap { if case .progress(let p) = $0 { p } else { nil } }
    }
    func count(where predicate: (UploadEvent) -> Bool) -> Int { events.filter(predicate).count }

    /// How many times the upload reported `paused`.
    var pauses: Int { count { if case .paused = $0 { true } else { false } } }

    /// Waits until a `paused` event has arrived (it reaches the collecting task a moment after the pause), or `limit`
    /// has passed.
    func waitForPause(within limit: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + limit
        while pauses == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }
}
