import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// What a main-actor handler saw: the elements, and whether each was handled on the main queue (the main actor's
/// executor), told by a value only the main queue carries — not by the thread, which the test runner on Linux does not
/// pin.
@MainActor
final class MainActorRecord<Element> {
    var elements: [Element] = []
    var offMainQueue = 0

    /// Marks the main queue, so ``record(_:)`` can tell whether it runs there.
    nonisolated static func markMainQueue() { MainQueueMarker.mark() }

    func record(_ element: Element) {
        elements.append(element)
        if !MainQueueMarker.isOnMainQueue { offMainQueue += 1 }
    }

    /// Whether every element was handled on the main queue.
    var allOnMainActor: Bool { offMainQueue == 0 }
}

/// A value set on the main queue and read back: present only in work the main queue runs.
enum MainQueueMarker {
    static let key = DispatchSpecificKey<String>()
    static func mark() { DispatchQueue.main.setSpecific(key: key, value: "main") }
    static var isOnMainQueue: Bool { DispatchQueue.getSpecific(key: key) == "main" }
}

@Suite("One operation model", .timeLimit(.minutes(10)))
struct UploadOperationTests {
    static let mib = 1024 * 1024

    /// Follows any operation the same way: its events delivered on the main actor, then its result.
    static func follow<Operation: UploadOperation>(_ operation: Operation) async throws
        -> (output: Operation.Output, events: [Operation.Event], onMainActor: Bool)
    {
        MainActorRecord<Operation.Event>.markMainQueue()
        let record = await MainActorRecord<Operation.Event>()
        let delivery = operation.events.deliverOnMainActor { record.record($0) }
        let output = try await operation.result
        await delivery.value
        return (output, await record.elements, await record.allOnMainActor)
    }

    @Test("events reach the main actor in order, once each, and delivery ends when the stream finishes")
    func mainActorDelivery() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        MainActorRecord<Int>.markMainQueue()
        let record = await MainActorRecord<Int>()
        let delivery = stream.deliverOnMainActor { record.record($0) }
        Task.detached {
            for number in 0..<500 { continuation.yield(number) }
            continuation.finish()
        }
        await delivery.value
        #expect(await record.elements == Array(0..<500))
        #expect(await record.allOnMainActor)
        // The check can fail: work off the main actor does not see the marker.
        #expect(await Task.detached { MainQueueMarker.isOnMainQueue }.value == false)
        #expect(await MainActor.run { MainQueueMarker.isOnMainQueue })
    }

    @Test("an engine upload and a form upload are followed by one generic function: events on the main actor, then the result")
    func oneShapeForEveryOperation() async throws {
        let directory = TemporaryDirectory.make("ferry-operations")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib + 5, in: directory)
        try await TestServer.with { server in
            try await server.server.store.createBucket("operations")
            var request = ResumableUploadRequest(bucket: "operations", key: "engine.bin", fileURL: file)
            request.partSize = 5 * Int64(Self.mib)
            let engine = try await Self.follow(try await server.engine().upload(request))
            #expect(engine.output.size == Int64(12 * Self.mib + 5))
            #expect(engine.onMainActor)
            guard case .completed(let completed) = engine.events.last else {
                Issue.record("the engine's last event is \(String(describing: engine.events.last))")
                return
            }
            #expect(completed.etag == engine.output.etag)
            let sent = engine.events.compactMap { if case .progress(let p) = $0 { p.totalBytesSent } else { nil } }
            #expect(sent.last == Int64(12 * Self.mib + 5))

            let token = UploadToken.make(
                accessKey: server.root.accessKeyId, secretKey: server.root.secretAccessKey,
                policy: PutPolicy(scope: "operations", deadline: Date().addingTimeInterval(3600)))
            let uploader = FormUploader(endpoint: URL(string: server.endpoint)!, token: token)
            let form = try await Self.follow(uploader.upload(file: file, key: "form.bin"))
            #expect(form.output.key == "form.bin")
            #expect(form.onMainActor)
            guard case .succeeded(let succeeded) = form.events.last else {
                Issue.record("the form upload's last event is \(String(describing: form.events.last))")
                return
            }
            #expect(succeeded.hash == form.output.hash)
            let stored = try await server.server.store.object(bucket: "operations", key: "form.bin")
            #expect(stored.size == Int64(12 * Self.mib + 5))
        }
    }

    /// Pauses any pausable operation once it has sent something, then resumes it to the end.
    static func pauseThenResume<Operation: PausableUploadOperation>(
        _ operation: Operation, whenStarted started: @escaping @Sendable (Operation.Event) -> Bool
    ) async throws -> (output: Operation.Output, events: [Operation.Event]) {
        let (firstProgress, signal) = AsyncStream.makeStream(of: Void.self)
        let collector = Task {
            var events: [Operation.Event] = []
            for await event in operation.events {
                events.append(event)
                if started(event) { signal.yield() }
            }
            signal.finish()
            return events
        }
        for await _ in firstProgress { break }
        await operation.pause()
        await operation.resume()
        let output = try await operation.result
        return (output, await collector.value)
    }

    @Test("a pausable operation paused through the protocol keeps its parts and resumes to the end")
    func pauseAndResumeThroughTheProtocol() async throws {
        let directory = TemporaryDirectory.make("ferry-operations")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 64 * Self.mib
        let file = try makeRandomFile(size: size, in: directory)
        try await TestServer.with { server in
            try await server.server.store.createBucket("operations")
            var request = ResumableUploadRequest(bucket: "operations", key: "paused.bin", fileURL: file)
            request.partSize = 5 * Int64(Self.mib)
            request.concurrency = 1
            let upload = try await server.engine().upload(request)
            let (output, events) = try await Self.pauseThenResume(upload) {
                if case .progress = $0 { true } else { false }
            }
            #expect(output.size == Int64(size))
            #expect(events.contains { if case .paused = $0 { true } else { false } })
            #expect(events.contains { if case .resumed = $0 { true } else { false } })
            // Progress never went backwards across the pause and ended at exactly the size.
            let sent = events.compactMap { if case .progress(let p) = $0 { p.totalBytesSent } else { nil } }
            #expect(zip(sent, sent.dropFirst()).allSatisfy { $0 <= $1 })
            #expect(sent.last == Int64(size))
            let back = URL(fileURLWithPath: directory + "/back")
            try await server.engine().download(bucket: "operations", key: "paused.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        }
    }
}
