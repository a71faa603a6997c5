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

/// Events as they arrive, and waits for a condition on them that end the moment an event makes it hold.
final class EventRecord<Event: Sendable>: @unchecked Sendable {
    typealias Predicate = @Sendable ([Event]) -> Bool
    // Every access to the mutable state holds `lock`. Conditions are checked, and continuations resumed, after
    // letting go of it (a condition may read the record again).
    private let lock = NSLock()
    private var _events: [Event] = []
    private var ended = false
    private var waiters: [Int: (predicate: Predicate, continuation: CheckedContinuation<Bool, Never>)] = [:]
    private var nextWaiter = 0

    var events: [Event] { lock.withLock { _events } }

    /// Adds an event and answers the waiters whose condition holds now.
    func append(_ event: Event) {
        let (events, waiting) = lock.withLock { () -> ([Event], [Int: Predicate]) in
            _events.append(event)
            return (_events, waiters.mapValues(\.predicate))
        }
        answer(waiting.filter { $0.value(events) }.keys, with: true)
    }

    /// No more events come: every waiter is answered, true when its condition holds.
    func end() {
        let (events, waiting) = lock.withLock { () -> ([Event], [Int: Predicate]) in
            ended = true
            return (_events, waiters.mapValues(\.predicate))
        }
        let holding = waiting.filter { $0.value(events) }.keys
        answer(holding, with: true)
        answer(waiting.keys.filter { !holding.contains($0) }, with: false)
    }

    /// Waits until `predicate` holds for the events so far: true at once when it does, false when the events end or
    /// `limit` passes without it (a bound only a broken test reaches, not a guess at how long it takes).
    func wait(within limit: Duration = .seconds(120), until predicate: @escaping Predicate) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitForever(until: predicate) }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    private func waitForever(until predicate: @escaping Predicate) async -> Bool {
        let number = lock.withLock { () -> Int in
            nextWaiter += 1
            return nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Registered first, then checked: an event appended in between is checked by `append` as well.
                let (events, isEnded) = lock.withLock { () -> ([Event], Bool) in
                    waiters[number] = (predicate, continuation)
                    return (_events, ended)
                }
                if predicate(events) {
                    answer([number], with: true)
                } else if isEnded || Task.isCancelled {
                    answer([number], with: false)
                }
            }
        } onCancel: {
            answer([number], with: false)
        }
    }

    /// Answers the waiters numbered `numbers` that are still waiting (each is answered once).
    private func answer(_ numbers: some Sequence<Int>, with answer: Bool) {
        let continuations = lock.withLock { numbers.compactMap { waiters.removeValue(forKey: $0)?.continuation } }
        for continuation in continuations { continuation.resume(returning: answer) }
    }
}

/// Collects an upload's events while it runs.
final class EventLog: Sendable {
    private let record = EventRecord<UploadEvent>()
    var events: [UploadEvent] { record.events }
    func append(_ event: UploadEvent) { record.append(event) }

    /// Starts collecting; the task ends when the sequence finishes.
    static func collect(_ upload: ResumableUploadTask) -> (EventLog, Task<Void, Never>) {
        let log = EventLog()
        let task = Task {
            for await event in upload.events { log.append(event) }
            log.record.end()
        }
        return (log, task)
    }

    var progress: [UploadProgress] {
        events.compactMap { if case .progress(let p) = $0 { p } else { nil } }
    }
    func count(where predicate: (UploadEvent) -> Bool) -> Int { events.filter(predicate).count }

    /// The failures the upload retried after, in order.
    var retries: [FerryError] {
        events.compactMap { if case .retrying(_, let error, _) = $0 { error } else { nil } }
    }

    /// How many times the upload reported `paused`.
    var pauses: Int { count { if case .paused = $0 { true } else { false } } }

    /// Waits until `predicate` holds for the events so far (false when the upload ends first or `limit` passes).
    @discardableResult
    func wait(within limit: Duration = .seconds(60), until predicate: @escaping @Sendable ([UploadEvent]) -> Bool) async -> Bool {
        await record.wait(within: limit, until: predicate)
    }

    /// Waits until at least `bytes` were reported sent.
    @discardableResult
    func waitForProgress(_ bytes: Int64, within limit: Duration = .seconds(60)) async -> Bool {
        await wait(within: limit) { events in
            events.contains { if case .progress(let progress) = $0 { progress.totalBytesSent >= bytes } else { false } }
        }
    }

    /// Waits until at least `bytes` were reported stored (parts the server answered for).
    @discardableResult
    func waitForStored(_ bytes: Int64, within limit: Duration = .seconds(60)) async -> Bool {
        await wait(within: limit) { events in
            events.contains { if case .progress(let progress) = $0 { progress.totalBytesStored >= bytes } else { false } }
        }
    }

    /// Waits until a `paused` event has arrived (it reaches the collecting task a moment after the pause), or `limit`
    /// has passed.
    func waitForPause(within limit: Duration = .seconds(60)) async throws {
        await wait(within: limit) { events in events.contains { if case .paused = $0 { true } else { false } } }
    }
}

/// Passes every request on to another transport and counts them as the client starts them: once a pause or stop
/// has returned, the count must not move.
final class CountingTransport: HTTPTransport {
    private let inner: any HTTPTransport
    private let counts = EventRecord<String>()

    init(_ inner: any HTTPTransport = AsyncHTTPClientTransport()) { self.inner = inner }

    /// Requests started so far.
    var requests: Int { counts.events.count }

    /// Waits until more than `count` requests have started (false when `limit` passes first).
    func wait(forMoreThan count: Int, within limit: Duration = .seconds(60)) async -> Bool {
        await counts.wait(within: limit) { $0.count > count }
    }

    func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        counts.append(request.url)
        return try await inner.send(request, bodyProgress: bodyProgress, responseSink: responseSink)
    }

    func makeBodyBuffer(capacity: Int) -> any BodyBuffer { inner.makeBodyBuffer(capacity: capacity) }
}

/// Signals a test waits for: something happened (once more).
final class Signals: Sendable {
    private let record = EventRecord<Void>()

    /// Records one.
    func signal() { record.append(()) }

    /// How many were recorded.
    var count: Int { record.events.count }

    /// Waits until `count` have been recorded in all; false when `limit` passes first (a bound only a broken test
    /// reaches).
    @discardableResult
    func wait(for count: Int, within limit: Duration = .seconds(300)) async -> Bool {
        await record.wait(within: limit) { $0.count >= count }
    }
}
