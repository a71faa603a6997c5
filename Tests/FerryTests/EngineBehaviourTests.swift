import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

#if canImport(Glibc)
import Glibc
#endif

@Suite("Engine: pause, resume, cancel, checkpoints", .timeLimit(.minutes(10)))
struct EngineBehaviourTests {
    static let mib = 1024 * 1024

    /// A request with small parts so the upload takes several requests.
    func request(_ file: URL, key: String, records: URL?) -> ResumableUploadRequest {
        var request = ResumableUploadRequest(bucket: "behaviour", key: key, fileURL: file)
        request.partSize = 5 * Int64(Self.mib)
        request.concurrency = 2
        request.recordDirectory = records
        return request
    }

    /// An engine client for `server` whose configuration the test adjusts (its hooks, for instance).
    func engine(_ server: TestServer, _ adjust: (inout ObjectStorageClient.Configuration) -> Void) -> ObjectStorageClient {
        var configuration = ObjectStorageClient.Configuration()
        configuration.transport = AsyncHTTPClientTransport()
        adjust(&configuration)
        return ObjectStorageClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey),
            configuration: configuration)
    }

    /// Whether a `progress` event arrived between `paused` and the `resumed` after it.
    static func sentWhilePaused(_ events: [UploadEvent]) -> Bool {
        var paused = false
        for event in events {
            switch event {
            case .paused: paused = true
            case .resumed: paused = false
            case .progress where paused: return true
            default: break
            }
        }
        return false
    }

    @Test("pause keeps the upload id and checkpoint; resume finishes byte-identical with monotonic, exact progress")
    func pauseResume() async throws {
        let directory = TemporaryDirectory.make("ferry-pause")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 40 * Self.mib + 17, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("behaviour")
            let upload = try await client.upload(request(file, key: "paused.bin", records: records))
            let (log, collector) = EventLog.collect(upload)
            // Pause once some bytes went out.
            #expect(await log.waitForProgress(Int64(6 * Self.mib)))
            await upload.pause()
            // The event is delivered to the collecting task a moment after pause() returns.
            try await log.waitForPause()
            #expect(log.pauses == 1)
            let checkpoints = try FileManager.default.contentsOfDirectory(atPath: records.path).filter { $0.hasSuffix(".json") }
            #expect(checkpoints.count == 1)
            let open = try await client.listMultipartUploads(bucket: "behaviour")
            #expect(open.map(\.key) == ["paused.bin"])
            await upload.resume()
            let result = try await upload.result
            await collector.value
            #expect(result.size == Int64(40 * Self.mib + 17))
            let progress = log.progress
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.totalBytesSent <= $1.totalBytesSent })
            #expect(progress.last?.totalBytesSent == result.size)
            #expect(try FileManager.default.contentsOfDirectory(atPath: records.path).filter { $0.hasSuffix(".json") }.isEmpty)
            #expect(try await client.listMultipartUploads(bucket: "behaviour").isEmpty)
            let back = URL(fileURLWithPath: directory + "/back")
            try await client.download(bucket: "behaviour", key: "paused.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        }
    }

    @Test(
        "cancelling the task that awaits the result pauses the upload (checkpoint kept), also when it was cancelled before it could wait; resume finishes it",
        arguments: [false, true])
    func callerCancellationPauses(cancelledBeforeWaiting: Bool) async throws {
        let directory = TemporaryDirectory.make("ferry-caller-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 40 * Self.mib + 5, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let awaited = Signals()
            let client = engine(server) { configuration in
                configuration.controlTaken = { if case .resultAwaited = $0 { awaited.signal() } }
            }
            try await client.createBucket("behaviour")
            let upload = try await client.upload(request(file, key: "left.bin", records: records))
            let (log, collector) = EventLog.collect(upload)
            #expect(await log.waitForProgress(Int64(6 * Self.mib)))
            // A view's task that awaited the upload goes away: while it waits, or before it got to wait.
            let view = Task { () async throws -> UploadResult in
                if cancelledBeforeWaiting { withUnsafeCurrentTask { $0?.cancel() } }
                return try await upload.result
            }
            if !cancelledBeforeWaiting {
                // Cancelled once the upload has it waiting for the result.
                #expect(await awaited.wait(for: 1), "the view's task never waited")
                view.cancel()
            }
            await #expect(throws: CancellationError.self) { _ = try await view.value }
            try await log.waitForPause()
            #expect(log.pauses == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: records.path).contains { $0.hasSuffix(".json") })
            #expect(try await client.listMultipartUploads(bucket: "behaviour").map(\.key) == ["left.bin"])
            await upload.resume()
            #expect(try await upload.result.size == Int64(40 * Self.mib + 5))
            await collector.value
            #expect(!Self.sentWhilePaused(log.events), "nothing is sent once paused")
        }
    }

    @Test("cancel with deleteUploadIdOnCancelling aborts the server upload and deletes the checkpoint; without it keeps both",
        arguments: [true, false])
    func cancel(deleteUploadId: Bool) async throws {
        let directory = TemporaryDirectory.make("ferry-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 30 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            // The first checkpoint write names no part; the second comes after a part is stored.
            let writes = Signals()
            let client = engine(server) { $0.beforeCheckpointWrite = { writes.signal() } }
            try await client.createBucket("behaviour")
            var request = request(file, key: "cancelled.bin", records: records)
            request.deleteUploadIdOnCancelling = deleteUploadId
            let upload = try await client.upload(request)
            let (log, collector) = EventLog.collect(upload)
            #expect(await writes.wait(for: 2), "no checkpoint named a part")
            // The cancel waits for that write (the stopped run flushes its checkpoint first).
            await upload.cancel()
            await collector.value
            await #expect(throws: FerryError.self) { try await upload.result }
            #expect(log.count { if case .cancelled = $0 { true } else { false } } == 1)
            let open = try await client.listMultipartUploads(bucket: "behaviour")
            let checkpoints = try FileManager.default.contentsOfDirectory(atPath: records.path).filter { $0.hasSuffix(".json") }
            if deleteUploadId {
                #expect(open.isEmpty)
                #expect(checkpoints.isEmpty)
            } else {
                #expect(open.map(\.key) == ["cancelled.bin"])
                #expect(checkpoints.count == 1)
                // A new run resumes from what the cancelled one left.
                let again = try await client.upload(request)
                let result = try await again.result
                #expect(result.partsResumed >= 1)
                #expect(result.partsResumed + result.partsSent == 6)
            }
        }
    }

    @Test("a creation the server refuses leaves nothing in the record directory (no intent for a later run to chase)")
    func refusedCreationLeavesNoIntent() async throws {
        let directory = TemporaryDirectory.make("ferry-refused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Past the multipart threshold (one part's size): the upload begins with CreateMultipartUpload.
        let file = try makeRandomFile(size: 6 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            // No bucket "behaviour": CreateMultipartUpload is refused with NoSuchBucket.
            let upload = try await engine(server) { _ in }.upload(request(file, key: "refused.bin", records: records))
            let error = await #expect(throws: FerryError.self) { try await upload.result }
            #expect(error?.serverCode == "NoSuchBucket", "\(String(describing: error))")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: records.path)) ?? []
            #expect(left.isEmpty, "\(left)")
        }
    }

    /// How a test changes a file while its parts are sent.
    enum Change: String, CaseIterable, Sendable {
        /// Its first bytes (a part already sent, and the fingerprint's first sample).
        case firstBytes
        /// One byte of the first part, 1 MiB in (away from the samples: the first 64 KiB, the middle, the end), with
        /// its size and times put back.
        case awayFromSamples
        /// Only its mode.
        case modeOnly
    }

    @Test(
        "a file written to while its parts are sent is not completed (cannotResumeUpload, no object), also away from the fingerprint's samples with its size and times put back; a change of its mode alone is completed (its parts are read again)",
        arguments: Change.allCases)
    func fileChangedWhileSent(change: Change) async throws {
        let directory = TemporaryDirectory.make("ferry-changing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 60 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let writes = Signals()
            let path = file.path
            let client = engine(server) { configuration in
                configuration.beforeCheckpointWrite = {
                    writes.signal()
                    // Once a part is stored.
                    guard writes.count == 2 else { return }
                    var original = stat()
                    guard stat(path, &original) == 0, let handle = FileHandle(forUpdatingAtPath: path) else { return }
                    defer { try? handle.close() }
                    switch change {
                    case .firstBytes:
                        try? handle.write(contentsOf: Data(repeating: 0xAB, count: 100))
                    case .awayFromSamples:
                        try? handle.seek(toOffset: UInt64(Self.mib + 12_345))
                        let old = (try? handle.read(upToCount: 1))?.first ?? 0
                        try? handle.seek(toOffset: UInt64(Self.mib + 12_345))
                        try? handle.write(contentsOf: Data([~old]))
                        var times = [original.st_atim, original.st_mtim]
                        _ = utimensat(AT_FDCWD, path, &times, 0)
                    case .modeOnly:
                        chmod(path, 0o640)
                    }
                }
            }
            try await client.createBucket("behaviour")
            let before = try FileFingerprint.of(path: file.path)
            let upload = try await client.upload(request(file, key: "changing.bin", records: records))
            if change == .modeOnly {
                _ = try await upload.result
                let back = URL(fileURLWithPath: directory + "/back")
                try await client.download(bucket: "behaviour", key: "changing.bin", to: back)
                #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
            } else {
                do {
                    _ = try await upload.result
                    Issue.record("an upload of a file that changed while it was sent was completed")
                } catch let error as FerryError {
                    #expect(error.code == .cannotResumeUpload, "\(error)")
                    if change == .awayFromSamples { #expect(error.message.contains("part 1 no longer matches"), "\(error)") }
                }
                if change == .awayFromSamples {
                    #expect(try FileFingerprint.of(path: file.path) == before, "the edit must leave the fingerprint as it was")
                }
                await #expect(throws: FerryError.self) { _ = try await client.headObject(bucket: "behaviour", key: "changing.bin") }
            }
            #expect(writes.count >= 2)
        }
    }

    @Test("one service spelled differently (case, its scheme's default port, trailing slashes) names the same checkpoints; another path or port does not")
    func endpointSpellings() throws {
        func identity(_ text: String) throws -> String {
            ObjectStorageClient(
                endpoint: try #require(URL(string: text)), credentials: Credentials(accessKeyId: "AKIA", secretAccessKey: "s")
            ).checkpointServiceIdentity
        }
        for group in [
            ["http://127.0.0.1:9000", "http://127.0.0.1:9000/", "HTTP://127.0.0.1:9000//"],
            ["http://example.com", "http://Example.COM:80/", "http://example.com/?x=1#f"],
            ["https://example.com/base", "https://EXAMPLE.com:443/base/"],
            ["http://[::1]:9000", "http://[::1]:9000/"],
        ] {
            #expect(Set(try group.map(identity)).count == 1, "\(group)")
            #expect(try identity(group[0]) == group[0])
        }
        #expect(try identity("http://example.com:8080") != identity("http://example.com"))
        #expect(try identity("https://example.com/base") != identity("https://example.com/other"))
        #expect(try identity("https://example.com") != identity("http://example.com"))
    }

    @Test("a file changed since its checkpoint is cannotResumeUpload, or a fresh upload when asked")
    func changedFile() async throws {
        let directory = TemporaryDirectory.make("ferry-changed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await Self.withSlowTail { client in
            try await client.createBucket("behaviour")
            let first = try await client.upload(request(file, key: "changed.bin", records: records))
            let (log, collector) = EventLog.collect(first)
            #expect(await log.waitForProgress(Int64(6 * Self.mib)))
            await first.pause()
            _ = collector
            // Change the middle of the file (same size).
            let handle = try FileHandle(forWritingTo: file)
            try handle.seek(toOffset: UInt64(10 * Self.mib))
            try handle.write(contentsOf: Data(repeating: 0xAB, count: 100))
            try handle.close()

            try await refusedThenFresh(client, file, key: "changed.bin", records: records, directory: directory)
        }
    }

    /// Runs `body` with an engine client of a server whose parts 3 and 4 (of a 20 MiB file in 5 MiB parts) take 4 s
    /// more each: an upload paused once its first part is stored is never done before the pause lands, however busy
    /// the machine.
    static func withSlowTail(_ body: @Sendable (ObjectStorageClient) async throws -> Void) async throws {
        try await throughProxy {
            $0.inject(.delay(seconds: 4), when: .method("PUT") && (.partNumber(3) || .partNumber(4)), times: .max)
        } _: { client, _, _ in
            try await body(client)
        }
    }

    /// Runs `body` with an engine client that reaches a test server through a fault proxy set up by `faults`.
    static func throughProxy(
        _ faults: @Sendable (FaultProxy) -> Void,
        _ body: @Sendable (ObjectStorageClient, FaultProxy, TestServer) async throws -> Void
    ) async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                faults(proxy)
                var configuration = ObjectStorageClient.Configuration()
                configuration.transport = AsyncHTTPClientTransport()
                let client = ObjectStorageClient(
                    endpoint: URL(string: proxy.endpoint)!,
                    credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey),
                    configuration: configuration)
                try await body(client, proxy, server)
            }
        }
    }

    /// Resuming `file`'s upload to `key` after it changed is `cannotResumeUpload` (naming `mentioning` when given);
    /// with `onFileChange = .restart` it is uploaded afresh, whole, and the abandoned multipart upload is aborted.
    func refusedThenFresh(
        _ client: ObjectStorageClient, _ file: URL, key: String, records: URL, directory: String, mentioning: String = ""
    ) async throws {
        let refused = try await client.upload(request(file, key: key, records: records))
        do {
            _ = try await refused.result
            Issue.record("a changed file was resumed with the bytes stored before")
        } catch let error as FerryError {
            #expect(error.code == .cannotResumeUpload && (mentioning.isEmpty || error.message.contains(mentioning)), "\(error)")
        }
        var restart = request(file, key: key, records: records)
        restart.onFileChange = .restart
        let result = try await client.upload(restart).result
        #expect(result.partsResumed == 0)
        let back = URL(fileURLWithPath: directory + "/back")
        try await client.download(bucket: "behaviour", key: key, to: back)
        #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        #expect(try await client.listMultipartUploads(bucket: "behaviour").isEmpty)
    }

    @Test("a file edited in place with its size, time and fingerprint samples kept is not completed with the bytes stored before: its stored parts are read again")
    func fileEditedInPlace() async throws {
        let directory = TemporaryDirectory.make("ferry-edited")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await Self.withSlowTail { client in
            try await client.createBucket("behaviour")
            let first = try await client.upload(request(file, key: "edited.bin", records: records))
            let (_, collector) = EventLog.collect(first)
            // Paused once its checkpoint records a part (the checkpoint is written after the part's progress is
            // told): the edit goes into a part the resume must read again.
            var recorded: [Int] = []
            for _ in 0..<3000 where recorded.isEmpty {
                recorded = checkpointPartNumbers(records.path)
                if recorded.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            }
            try #require(!recorded.isEmpty)
            await first.pause()
            _ = collector
            let part = try #require(checkpointPartNumbers(records.path).min())
            let offset = UInt64((part - 1) * 5 * Self.mib + Self.mib + 12_345)
            // One byte of that part, away from the fingerprint's samples (its first 64 KiB, the middle, the end),
            // with the modification time put back.
            let before = try FileFingerprint.of(path: file.path)
            var original = stat()
            try #require(stat(file.path, &original) == 0)
            let handle = try FileHandle(forUpdating: file)
            try handle.seek(toOffset: offset)
            let old = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: Data([~old]))
            try handle.close()
            var times = [original.st_atim, original.st_mtim]
            try #require(utimensat(AT_FDCWD, file.path, &times, 0) == 0)
            #expect(try FileFingerprint.of(path: file.path) == before, "the edit must leave the fingerprint as it was")

            try await refusedThenFresh(
                client, file, key: "edited.bin", records: records, directory: directory, mentioning: "part \(part)")
        }
    }

    @Test("a checkpoint whose parts lost their checksums resumes: the kept parts' checksums come from the file, and the object is verified")
    func checkpointWithoutChecksums() async throws {
        let directory = TemporaryDirectory.make("ferry-no-checksums")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await Self.withSlowTail { client in
            try await client.createBucket("behaviour")
            let first = try await client.upload(request(file, key: "unsummed.bin", records: records))
            let (_, collector) = EventLog.collect(first)
            for _ in 0..<3000 where checkpointPartNumbers(records.path).isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            try #require(!checkpointPartNumbers(records.path).isEmpty)
            await first.pause()
            _ = collector
            // Every part's checksum removed from the checkpoint.
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: records.path).first { $0.hasSuffix(".json") })
            let path = records.path + "/" + name
            var object = try #require(try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            let parts = try #require(object["parts"] as? [[String: Any]])
            #expect(parts.contains { $0["checksum"] != nil })
            object["parts"] = parts.map { $0.filter { $0.key != "checksum" } }
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))

            let result = try await client.upload(request(file, key: "unsummed.bin", records: records)).result
            // The parts the checkpoint named, and any stored before the pause took hold (found by their MD5).
            #expect(result.partsResumed >= parts.count)
            #expect(result.verification == .checksum)
            let back = URL(fileURLWithPath: directory + "/back")
            try await client.download(bucket: "behaviour", key: "unsummed.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        }
    }

    @Test("a run that finds the object its checkpoint's upload made verifies it as a completion does: a checksum that differs is a mismatch again, not a success")
    func completedObjectIsVerified() async throws {
        let directory = TemporaryDirectory.make("ferry-completed-verified")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = engine(server) { _ in }
            try await client.createBucket("behaviour")
            // Completed, its checkpoint kept (as a run stopped between the completion and the checkpoint's deletion
            // leaves it).
            var first = request(file, key: "done.bin", records: records)
            first.keepsCheckpointOnCompletion = true
            #expect(try await client.upload(first).result.verification == .checksum)
            let again = try await client.upload(first).result
            #expect(again.partsSent == 0 && again.verification == .checksum)

            // The checkpoint's part checksums no longer make the object's (a store whose checksum was wrong at the
            // completion: the run that met the mismatch kept its checkpoint).
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: records.path).first { $0.hasSuffix(".json") })
            let path = records.path + "/" + name
            var object = try #require(try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            let parts = try #require(object["parts"] as? [[String: Any]])
            object["parts"] = parts.map { part in
                var part = part
                part["checksum"] = Data([1, 2, 3, 4]).base64EncodedString()
                return part
            }
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            var keep = request(file, key: "done.bin", records: records)
            keep.keepsCheckpointOnCompletion = true
            let error = await #expect(throws: FerryError.self) { try await client.upload(keep).result }
            #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        }
    }

    @Test("cancelling an upload stopped while its multipart upload was being created (an intent, no checkpoint) aborts the uploads begun then without parts, and keeps others'")
    func cancelAfterLostCreation() async throws {
        let directory = TemporaryDirectory.make("ferry-cancel-intent")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 6 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = engine(server) { _ in }
            try await client.createBucket("behaviour")
            let s3 = server.client()
            // The lost creation, and another client's upload of the key that already holds a part.
            let lost = try await s3.createMultipartUpload("behaviour", "lost.bin")
            let others = try await s3.createMultipartUpload("behaviour", "lost.bin")
            #expect(try await s3.uploadPart("behaviour", "lost.bin", uploadId: others, number: 1, [1, 2, 3]).status == 200)
            let request = request(file, key: "lost.bin", records: records)
            let store = CheckpointStore(directory: records)
            let id = CheckpointStore.identifier(
                endpoint: client.checkpointServiceIdentity, bucket: "behaviour", key: "lost.bin",
                filePath: file.standardizedFileURL.path)
            try store.saveIntent(id, at: Date())

            #expect(try await client.cancelInterruptedUpload(of: request) == .lostCreation(found: 1))
            #expect(try await client.listMultipartUploads(bucket: "behaviour").map(\.uploadId) == [others])
            #expect(store.intent(id) == nil)
            #expect(!lost.isEmpty)
            // Nothing left to cancel.
            #expect(try await client.discardCheckpoint(of: request) == false)
            // A lost creation of which the service lists nothing (it never arrived, or the service dates its uploads
            // otherwise): said so, not that nothing is left.
            try store.saveIntent(id, at: Date().addingTimeInterval(-3600))
            let unmatched = try await client.cancelInterruptedUpload(of: request)
            #expect(unmatched == .lostCreation(found: 0))
            #expect(try await client.listMultipartUploads(bucket: "behaviour").map(\.uploadId) == [others])
        }
    }

    @Test("a key that may write but not read (no s3:GetObject: HEAD is refused) uploads multipart, and a PUT to a key ending in /: the size read-back is skipped, not failed")
    func writeOnlyKey() async throws {
        let directory = TemporaryDirectory.make("ferry-write-only")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib, in: directory)
        let small = try makeRandomFile(size: 1000, in: directory)
        try await TestServer.with { server in
            try await server.engine().createBucket("behaviour")
            let policy = AccessPolicy(statements: [
                .init(actions: ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"], bucket: "behaviour")
            ])
            let issued = server.server.credentials.tokens.issue(
                parent: server.root.accessKeyId, policy: policy, expiration: Date().addingTimeInterval(600))
            let client = ObjectStorageClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(
                    accessKeyId: issued.accessKeyId, secretAccessKey: issued.secretAccessKey, sessionToken: issued.sessionToken))
            await #expect(throws: FerryError.self) { _ = try await client.headObject(bucket: "behaviour", key: "none") }
            let result = try await client.upload(request(file, key: "written.bin", records: nil)).result
            #expect(result.size == 12 * Int64(Self.mib) && result.verification == .checksum)
            _ = try await client.upload(request(small, key: "folder/", records: nil)).result
            #expect(try await server.storedBytes("behaviour", "written.bin") == [UInt8](try Data(contentsOf: file)))
        }
    }

    @Test("a file written to during a pause, away from the samples with its times put back, is caught when the same task resumes: its parts sent before the pause are read again")
    func editedDuringPause() async throws {
        let directory = TemporaryDirectory.make("ferry-edited-paused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await Self.withSlowTail { client in
            try await client.createBucket("behaviour")
            let upload = try await client.upload(request(file, key: "paused.bin", records: records))
            let (_, collector) = EventLog.collect(upload)
            // Parts 1 and 2 share the link and either may be stored first: wait for part 1.
            for _ in 0..<3000 where !checkpointPartNumbers(records.path).contains(1) {
                try await Task.sleep(for: .milliseconds(20))
            }
            try #require(checkpointPartNumbers(records.path).contains(1))
            await upload.pause()
            _ = collector
            var original = stat()
            try #require(stat(file.path, &original) == 0)
            let handle = try FileHandle(forUpdating: file)
            try handle.seek(toOffset: UInt64(Self.mib + 12_345))
            let old = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: UInt64(Self.mib + 12_345))
            try handle.write(contentsOf: Data([~old]))
            try handle.close()
            var times = [original.st_atim, original.st_mtim]
            try #require(utimensat(AT_FDCWD, file.path, &times, 0) == 0)
            await upload.resume()
            let error = await #expect(throws: FerryError.self) { _ = try await upload.result }
            #expect(error?.code == .cannotResumeUpload && error?.message.contains("part 1 no longer matches") == true, "\(String(describing: error))")
        }
    }

    @Test("a file that shrank below the multipart threshold since its checkpoint: cannotResumeUpload, or, asked to restart, one PUT that aborts the old multipart upload and forgets its checkpoint")
    func shrunkFile() async throws {
        let directory = TemporaryDirectory.make("ferry-shrunk")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("behaviour")
            let first = try await client.upload(request(file, key: "shrunk.bin", records: records))
            let (log, collector) = EventLog.collect(first)
            #expect(await log.waitForProgress(Int64(6 * Self.mib)))
            await first.pause()
            _ = collector
            #expect(try await client.listMultipartUploads(bucket: "behaviour").count == 1)
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: 1_000_000)
            try handle.close()

            let refused = try await client.upload(request(file, key: "shrunk.bin", records: records))
            do {
                _ = try await refused.result
                Issue.record("a changed file was sent")
            } catch let error as FerryError {
                #expect(error.code == .cannotResumeUpload, "\(error)")
            }
            var restart = request(file, key: "shrunk.bin", records: records)
            restart.onFileChange = .restart
            let result = try await client.upload(restart).result
            #expect(result.uploadId == nil && result.size == 1_000_000)
            let back = URL(fileURLWithPath: directory + "/back")
            try await client.download(bucket: "behaviour", key: "shrunk.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
            // The abandoned upload is aborted and its checkpoint gone: nothing is left behind.
            #expect(try await client.listMultipartUploads(bucket: "behaviour").isEmpty)
            let left = try FileManager.default.contentsOfDirectory(atPath: records.path)
            #expect(left.isEmpty, "\(left)")
        }
    }

    @Test("a second upload of a checkpoint another is sending fails with uploadInProgress, sending nothing, and cannot discard it; once the first pauses it takes the checkpoint over and finishes; no lock file is left")
    func secondRunOfOneCheckpoint() async throws {
        let directory = TemporaryDirectory.make("ferry-locked")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 20 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        // Slow parts: the first upload is still sending while the second is tried.
        try await Self.throughProxy {
            $0.inject(.delay(seconds: 0.5), when: .query(contains: "partNumber"), times: .max)
        } _: { client, proxy, server in
            try await client.createBucket("behaviour")
            let first = try await client.upload(request(file, key: "locked.bin", records: records))
            let (log, collector) = EventLog.collect(first)
            // Once a part is stored (progress counts bytes as they cross the link, not whole parts at once).
            #expect(await log.waitForStored(Int64(5 * Self.mib)))
            let sent = proxy.log.count
            let second = try await client.upload(request(file, key: "locked.bin", records: records))
            do {
                _ = try await second.result
                Issue.record("a second upload of a checkpoint in use ran")
            } catch let error as FerryError {
                #expect(error.code == .uploadInProgress, "\(error)")
                #expect(error.message.contains(file.path) && error.message.contains(records.path), "\(error.message)")
            }
            do {
                try await client.discardCheckpoint(of: request(file, key: "locked.bin", records: records))
                Issue.record("a checkpoint in use was discarded")
            } catch {
                #expect((error as? FerryError)?.code == .uploadInProgress, "\(error)")
            }
            // Neither sent a request: what the proxy saw since came from the first.
            #expect(proxy.log.dropFirst(sent).allSatisfy { $0.query.contains("partNumber") }, "\(proxy.log.dropFirst(sent))")
            await first.pause()
            _ = collector
            let third = try await client.upload(request(file, key: "locked.bin", records: records))
            let result = try await third.result
            #expect(result.partsResumed >= 1)
            let back = URL(fileURLWithPath: directory + "/back")
            try await server.engine().download(bucket: "behaviour", key: "locked.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: records.path).isEmpty)
        }
    }

    @Test("without a record directory nothing is written to disk; a vanished upload id starts afresh")
    func noRecordDirectoryAndVanishedUpload() async throws {
        let directory = TemporaryDirectory.make("ferry-norecord")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("behaviour")
            let plain = try await client.upload(request(file, key: "plain.bin", records: nil))
            _ = try await plain.result
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == 1)

            let first = try await client.upload(request(file, key: "vanish.bin", records: records))
            let (log, _) = EventLog.collect(first)
            #expect(await log.waitForProgress(Int64(6 * Self.mib)))
            await first.pause()
            for upload in try await client.listMultipartUploads(bucket: "behaviour") {
                try await client.abortMultipartUpload(bucket: "behaviour", key: upload.key, uploadId: upload.uploadId)
            }
            let second = try await client.upload(request(file, key: "vanish.bin", records: records))
            let result = try await second.result
            #expect(result.partsResumed == 0)
            #expect(result.partsSent == 3)
        }
    }

    @Test(
        "a run stopped after the server completed its upload, before it deleted its checkpoint: the next run finds the object and sends nothing; a key written since starts again"
    )
    func completedBeforeCheckpointDeleted() async throws {
        let directory = TemporaryDirectory.make("ferry-completed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 12 * Self.mib, in: directory)
        let records = URL(fileURLWithPath: directory + "/records")
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("behaviour")
            let upload = request(file, key: "done.bin", records: records)
            let done = try await client.upload(upload).result
            let uploadId = try #require(done.uploadId)
            // The checkpoint that run held just before it would have deleted it: every part, under the completed
            // upload's id, with the ETags the server gave them.
            let bytes = try [UInt8](Data(contentsOf: file))
            let partSize = Int(upload.partSize)
            let parts = stride(from: 0, to: bytes.count, by: partSize).enumerated().map { index, offset in
                let part = bytes[offset..<min(offset + partSize, bytes.count)]
                return UploadedPart(number: index + 1, size: Int64(part.count), etag: Hex.encode(Checksum.digest(.md5, of: part)))
            }
            func restoreCheckpoint() async throws {
                let path = file.standardizedFileURL.path
                let id = CheckpointStore.identifier(
                    endpoint: client.checkpointServiceIdentity, bucket: "behaviour", key: "done.bin", filePath: path)
                let writer = CheckpointWriter(store: CheckpointStore(directory: records), identifier: id)
                try writer.submit(
                    UploadCheckpoint(
                        endpoint: client.checkpointServiceIdentity, bucket: "behaviour", key: "done.bin", filePath: path,
                        uploadId: uploadId, partSize: upload.partSize, fingerprint: try FileFingerprint.of(path: file.path),
                        checksumAlgorithm: upload.checksumAlgorithm?.s3Name, parts: parts, createdAt: Date()))
                try await writer.flush()
            }
            try await restoreCheckpoint()
            let stored = try await server.server.store.object(bucket: "behaviour", key: "done.bin")

            let again = try await client.upload(upload).result
            #expect(again.partsSent == 0 && again.partsResumed == 3)
            #expect(again.etag == done.etag && again.uploadId == uploadId && again.size == Int64(bytes.count))
            // Nothing was written again: the same object, and no new multipart upload.
            #expect(try await server.server.store.object(bucket: "behaviour", key: "done.bin").lastModified == stored.lastModified)
            #expect(try await client.listMultipartUploads(bucket: "behaviour").isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: records.path).filter { $0.hasSuffix(".json") }.isEmpty)

            // The key holds other bytes since: the checkpoint's upload is not that object, so the file is sent again.
            _ = try await client.upload(request(try makeRandomFile(size: 1024, in: directory), key: "done.bin", records: nil)).result
            try await restoreCheckpoint()
            let resent = try await client.upload(upload).result
            #expect(resent.partsSent == 3 && resent.partsResumed == 0)
            #expect(try await server.storedBytes("behaviour", "done.bin") == bytes)
        }
    }

    @Test("a process killed mid-upload is resumed by a new one; only parts not on the server are sent again")
    func resumeAfterSIGKILL() async throws {
        let directory = TemporaryDirectory.make("ferry-kill")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeRandomFile(size: 64 * Self.mib, in: directory)
        let records = directory + "/records"
        try await TestServer.with { server in
            let client = server.engine()
            try await client.createBucket("behaviour")
            func child() throws -> (Process, Pipe) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
                process.arguments = [
                    "upload", file.path, "--endpoint", server.endpoint, "--bucket", "behaviour", "--key", "killed.bin",
                    "--record-dir", records, "--part-size", "5MiB", "--parallel", "2", "--json",
                ]
                var env = ProcessInfo.processInfo.environment
                env["FERRY_ACCESS_KEY_ID"] = server.root.accessKeyId
                env["FERRY_SECRET_ACCESS_KEY"] = server.root.secretAccessKey
                process.environment = env
                let out = Pipe()
                process.standardOutput = out
                process.standardError = FileHandle.nullDevice
                try process.run()
                return (process, out)
            }
            let (first, _) = try child()
            // Kill it once its checkpoint records at least three parts.
            var recorded = 0
            for _ in 0..<2000 where recorded < 3 {
                try await Task.sleep(for: .milliseconds(10))
                recorded = checkpointPartCount(records)
            }
            #expect(recorded >= 3)
            kill(first.processIdentifier, SIGKILL)
            await first.exited()
            let open = try await client.listMultipartUploads(bucket: "behaviour")
            let uploadId = try #require(open.first?.uploadId)
            let onServer = try await client.listParts(bucket: "behaviour", key: "killed.bin", uploadId: uploadId)
            #expect(onServer.count >= recorded)

            let (second, out) = try child()
            let reader = out.fileHandleForReading
            let output = try await runBlocking { reader.readDataToEndOfFile() }
            await second.exited()
            #expect(second.terminationStatus == 0)
            let lines = String(decoding: output, as: UTF8.self).split(separator: "\n")
            let completed = try #require(
                lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                    .first { $0["event"] as? String == "completed" })
            let resumed = try #require(completed["partsResumed"] as? Int)
            let sent = try #require(completed["partsSent"] as? Int)
            // Every part the server had at the kill was kept; only the rest went again. A part whose body had fully
            // arrived when the client died can still be stored just after ListParts looked, so up to the two parts
            // that were in flight (--parallel 2) may be found on resume as well.
            #expect(resumed >= onServer.count)
            #expect(resumed <= onServer.count + 2)
            #expect(resumed + sent == 13)
            let back = URL(fileURLWithPath: directory + "/back")
            try await client.download(bucket: "behaviour", key: "killed.bin", to: back)
            #expect(FileManager.default.contentsEqual(atPath: file.path, andPath: back.path))
        }
    }
}

/// The numbers of the parts recorded in the (single) checkpoint in a record directory.
func checkpointPartNumbers(_ records: String) -> [Int] {
    guard let name = try? FileManager.default.contentsOfDirectory(atPath: records).first(where: { $0.hasSuffix(".json") }),
        let data = FileManager.default.contents(atPath: records + "/" + name),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let parts = object["parts"] as? [[String: Any]]
    else { return [] }
    return parts.compactMap { $0["number"] as? Int }
}

/// Parts recorded in the (single) checkpoint in a record directory.
func checkpointPartCount(_ records: String) -> Int {
    guard let name = try? FileManager.default.contentsOfDirectory(atPath: records).first(where: { $0.hasSuffix(".json") }),
        let data = FileManager.default.contents(atPath: records + "/" + name),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        let parts = object["parts"] as? [Any]
    else { return 0 }
    return parts.count
}
