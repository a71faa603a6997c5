import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

/// Every transition of the upload queue's state machine, valid and not, without I/O: engine uploads are stand-ins.
@Suite("Upload queue state machine")
struct UploadQueueStateMachineTests {
    /// Stands in for an engine upload.
    final class FakeUpload: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { name }
    }

    typealias Machine = UploadQueue.StateMachine<FakeUpload>
    typealias ID = UploadQueue.Item.ID

    static func file(_ name: String) -> URL { URL(fileURLWithPath: "/media/\(name)") }

    static func describe(_ starts: [Machine.Start]) -> [String] {
        starts.map { start in
            switch start {
            case .resume(let id, let upload): "resume \(id) \(upload)"
            case .run(let id, let generation): "run \(id) g\(generation)"
            }
        }
    }

    static func describe(_ halt: Machine.Halt) -> String {
        switch halt {
        case .pauseUpload(let id, let upload): "pause \(id) \(upload)"
        case .endWaits(let id): "endWaits \(id)"
        }
    }

    static func isNil<T>(_ value: T?) -> Bool { value == nil }

    static func states(_ machine: Machine) -> [UploadQueue.Item.State] { machine.items.map(\.state) }

    static func ticket(video id: String = "v1", imageURL: String? = nil) throws -> MediaServiceClient.UploadTicket {
        try MediaServiceClient.UploadTicket(
            id: id, imageURL: imageURL,
            address: UploadAddress(endpoint: "http://127.0.0.1:9000", bucket: "media", fileName: "sv/\(id).mp4").encoded(),
            auth: UploadAuth(
                accessKeyId: "AK", accessKeySecret: "secret", securityToken: "token",
                expiration: Date(timeIntervalSince1970: 1_900_000_000), region: "us-east-1"
            ).encoded())
    }

    /// A machine with `count` video files, and their ids.
    static func machine(files count: Int, concurrent: Int = 1) -> (Machine, [ID]) {
        var machine = Machine(maxConcurrentUploads: concurrent)
        var ids: [ID] = []
        for index in 0..<count {
            let (id, starts) = machine.add(file("f\(index).mp4"), info: MediaInfo(), kind: .video)
            #expect(starts.isEmpty, "a stopped queue starts nothing")
            ids.append(id)
        }
        return (machine, ids)
    }

    /// Every state a file can be in, reached through transitions only; the file is the first of two, and the
    /// queue runs one at a time.
    enum Situation: String, CaseIterable, CustomTestStringConvertible {
        case ready, uploadingWaitingForCredentials, uploading, paused, cancelled, succeeded, failed
        var testDescription: String { rawValue }

        /// The machine, the file's id, and its engine upload when it has one.
        func make() -> (Machine, ID, FakeUpload?) {
            let (made, ids) = UploadQueueStateMachineTests.machine(files: 2)
            var machine = made
            let id = ids[0]
            let upload = FakeUpload("up")
            switch self {
            case .ready:
                return (machine, id, nil)
            case .uploadingWaitingForCredentials:
                _ = machine.start()
                return (machine, id, nil)
            case .uploading:
                _ = machine.start()
                _ = machine.attach(upload, to: id, generation: 1)
                return (machine, id, upload)
            case .paused:
                _ = machine.start()
                _ = machine.attach(upload, to: id, generation: 1)
                _ = machine.pause()
                return (machine, id, upload)
            case .cancelled:
                _ = machine.cancelFile(id)
                return (machine, id, nil)
            case .succeeded:
                _ = machine.start()
                _ = machine.attach(upload, to: id, generation: 1)
                _ = machine.finish(id, upload: upload, .success(ResumableUploadStateMachineTests.result))
                _ = machine.stop()
                return (machine, id, nil)
            case .failed:
                _ = machine.start()
                _ = machine.runFailed(id, generation: 1, FerryError(.fileNotFound, "gone"))
                _ = machine.stop()
                return (machine, id, nil)
            }
        }

        var state: UploadQueue.Item.State {
            switch self {
            case .ready: .ready
            case .uploadingWaitingForCredentials, .uploading: .uploading
            case .paused: .paused
            case .cancelled: .cancelled
            case .succeeded: .succeeded
            case .failed: .failed
            }
        }
    }

    @Test("each situation is the state it says", arguments: Situation.allCases)
    func situations(_ situation: Situation) {
        let (machine, id, _) = situation.make()
        #expect(machine.item(id)?.state == situation.state)
    }

    // MARK: The list

    @Test("added files are ready, numbered in order, standardized; a running queue starts one as it is added")
    func add() {
        var machine = Machine(maxConcurrentUploads: 1)
        let (first, none) = machine.add(URL(fileURLWithPath: "/media/../media/a.mp4"), info: MediaInfo(title: "A"), kind: .video)
        #expect(none.isEmpty)
        #expect(machine.item(first)?.fileURL.path == "/media/a.mp4")
        #expect(machine.item(first)?.info.title == "A")
        #expect(Self.describe(machine.start()) == ["run #1 g1"])
        let (second, starts) = machine.add(Self.file("b.png"), info: MediaInfo(), kind: .image, imageType: "cover")
        #expect(starts.isEmpty, "one at a time: the second waits")
        #expect(second != first)
        #expect(machine.item(second)?.imageType == "cover")
        #expect(Self.states(machine) == [.uploading, .ready])
    }

    @Test("delete removes a file in any state, makes its run stale and hands over its engine upload", arguments: Situation.allCases)
    func delete(_ situation: Situation) {
        let (made, id, upload) = situation.make()
        var machine = made
        let running = machine.isRunning
        let deletion = machine.delete(id)
        #expect(deletion?.item.id == id)
        #expect(deletion?.upload === upload)
        #expect(machine.item(id) == nil)
        #expect(machine.items.count == 1)
        #expect(!machine.isCurrent(id, 1))
        #expect(Self.isNil(machine.delete(id)), "deleted twice")
        // The next file starts once the queue schedules (after the deleted upload is cancelled).
        #expect(Self.describe(machine.schedule()) == (running ? ["run #2 g1"] : []))
    }

    @Test("a deleted file's engine upload ending changes nothing")
    func finishAfterDelete() {
        let (made, id, upload) = Situation.uploading.make()
        var machine = made
        _ = machine.delete(id)
        #expect(Self.isNil(machine.finish(id, upload: upload!, .success(ResumableUploadStateMachineTests.result))))
    }

    @Test("cancelFile: a waiting file is cancelled, an uploading one halted, an ended one left", arguments: Situation.allCases)
    func cancelFile(_ situation: Situation) {
        let (made, id, _) = situation.make()
        var machine = made
        let action = machine.cancelFile(id)
        switch (situation, action) {
        case (.ready, .cancelled(let starts)), (.paused, .cancelled(let starts)):
            #expect(starts.isEmpty, "the queue does not run")
            #expect(machine.item(id)?.state == .cancelled)
        case (.uploading, .halt(let halt)):
            #expect(Self.describe(halt) == "pause #1 up")
            #expect(machine.item(id)?.state == .cancelled)
            #expect(machine.isCurrent(id, 1) == false, "the file no longer uploads")
            #expect(Self.describe(machine.schedule()) == ["run #2 g1"])
        case (.uploadingWaitingForCredentials, .halt(let halt)):
            #expect(Self.describe(halt) == "endWaits #1")
            #expect(machine.item(id)?.state == .cancelled)
            #expect(Self.describe(machine.schedule()) == ["run #2 g1"])
        case (.cancelled, .none), (.succeeded, .none), (.failed, .none):
            #expect(machine.item(id)?.state == situation.state)
        default:
            Issue.record("unexpected \(action) for \(situation)")
        }
        let unknown = machine.cancelFile(ID(value: 99))
        if case .none = unknown {} else { Issue.record("a file not listed was cancelled: \(unknown)") }
    }

    @Test("cancelling a ready file of a running queue starts the next one")
    func cancelReadyStartsNext() {
        let (made, ids) = Self.machine(files: 3)
        var machine = made
        _ = machine.start()
        _ = machine.cancelFile(ids[0])  // uploading, halted
        guard case .cancelled(let starts) = machine.cancelFile(ids[1]) else { Issue.record("not cancelled"); return }
        #expect(Self.describe(starts) == ["run #3 g1"])
        #expect(Self.states(machine) == [.cancelled, .cancelled, .uploading])
    }

    @Test("resumeFile: a cancelled, paused or failed file is ready again and the queue runs; others are left", arguments: Situation.allCases)
    func resumeFile(_ situation: Situation) {
        let (made, id, upload) = situation.make()
        var machine = made
        let starts = machine.resumeFile(id)
        switch situation {
        case .cancelled, .failed:
            #expect(Self.describe(starts ?? []) == ["run #1 g\(situation == .failed ? 2 : 1)"])
            #expect(machine.item(id)?.state == .uploading)
            #expect(machine.item(id)?.failureCode == nil && machine.item(id)?.failureMessage == nil)
            #expect(machine.isRunning)
        case .paused:
            // The paused engine upload continues.
            #expect(Self.describe(starts ?? []) == ["resume #1 \(upload!)"])
            #expect(machine.isRunning)
        case .ready, .uploading, .uploadingWaitingForCredentials, .succeeded:
            #expect(Self.isNil(starts))
            #expect(machine.item(id)?.state == situation.state)
        }
        #expect(Self.isNil(machine.resumeFile(ID(value: 99))))
    }

    // MARK: The queue

    @Test("start runs the queue: ready files start up to the limit, each run with a new generation")
    func start() {
        let (made, ids) = Self.machine(files: 3, concurrent: 2)
        var machine = made
        #expect(!machine.isRunning)
        #expect(Self.describe(machine.start()) == ["run #1 g1", "run #2 g1"])
        #expect(machine.isRunning)
        #expect(Self.states(machine) == [.uploading, .uploading, .ready])
        #expect(machine.isCurrent(ids[0], 1) && machine.isCurrent(ids[1], 1) && !machine.isCurrent(ids[2], 1))
        #expect(machine.start().isEmpty, "started twice: nothing more")
    }

    @Test("stop cancels the uploading files (pausing their engine uploads), leaves the others, and starts nothing")
    func stop() {
        let (made, ids) = Self.machine(files: 3, concurrent: 2)
        var machine = made
        _ = machine.start()
        let upload = FakeUpload("a")
        #expect(Self.isAttached(machine.attach(upload, to: ids[0], generation: 1), pause: false))
        let halts = machine.stop()
        #expect(halts.map(Self.describe) == ["pause #1 a", "endWaits #2"])
        #expect(Self.states(machine) == [.cancelled, .cancelled, .ready])
        #expect(!machine.isRunning)
        #expect(machine.schedule().isEmpty)
        #expect(!machine.isCurrent(ids[1], 1), "a run waiting for credentials is stale")
        #expect(machine.stop().isEmpty, "stopped twice: nothing to halt")
        // Resumed, the cancelled file continues its engine upload; the other starts a new run.
        #expect(Self.describe(machine.resumeFile(ids[0]) ?? []) == ["resume #1 a", "run #3 g1"])
    }

    @Test("pause pauses the uploading files and the queue; resume makes them ready and starts them again")
    func pauseAndResume() {
        let (made, ids) = Self.machine(files: 2, concurrent: 2)
        var machine = made
        _ = machine.start()
        let upload = FakeUpload("a")
        _ = machine.attach(upload, to: ids[0], generation: 1)
        #expect(machine.pause().map(Self.describe) == ["pause #1 a", "endWaits #2"])
        #expect(Self.states(machine) == [.paused, .paused])
        #expect(!machine.isRunning)
        #expect(machine.pause().isEmpty)
        #expect(Self.describe(machine.resume()) == ["resume #1 a", "run #2 g3"])
        #expect(Self.states(machine) == [.uploading, .uploading])
        #expect(machine.isRunning)
        #expect(machine.resume().isEmpty, "resumed twice: nothing more")
    }

    @Test("resume runs a stopped queue too, but does not bring back cancelled files")
    func resumeAfterStop() {
        var (machine, _) = Self.machine(files: 2)
        _ = machine.start()
        _ = machine.stop()
        #expect(Self.describe(machine.resume()) == ["run #2 g1"])
        #expect(Self.states(machine) == [.cancelled, .uploading])
    }

    @Test("schedule starts nothing while the queue does not run, and keeps to the limit")
    func schedule() {
        let (made, ids) = Self.machine(files: 3)
        var machine = made
        #expect(machine.schedule().isEmpty)
        _ = machine.start()
        #expect(machine.schedule().isEmpty, "one uploads already")
        _ = machine.runFailed(ids[0], generation: 1, FerryError(.network, "down"))
        #expect(Self.states(machine) == [.failed, .uploading, .ready])
    }

    // MARK: A file's run

    @Test("a run's ticket is recorded while the run is current; a stale run's is not")
    func record() throws {
        let (made, ids) = Self.machine(files: 2)
        var machine = made
        #expect(machine.record(try Self.ticket(), for: ids[0], generation: 1) == nil, "not uploading")
        _ = machine.start()
        let item = machine.record(try Self.ticket(video: "v9"), for: ids[0], generation: 1)
        #expect(item?.videoId == "v9")
        #expect(item?.bucket == "media" && item?.object == "sv/v9.mp4" && item?.endpoint == "http://127.0.0.1:9000")
        #expect(machine.record(try Self.ticket(), for: ids[0], generation: 2) == nil, "another generation")
        // An image keeps no video id but takes the image URL.
        var images = Machine(maxConcurrentUploads: 1)
        let (image, _) = images.add(Self.file("i.png"), info: MediaInfo(), kind: .image)
        _ = images.start()
        let recorded = images.record(try Self.ticket(video: "i1", imageURL: "http://x/i.png"), for: image, generation: 1)
        #expect(recorded?.videoId == nil && recorded?.imageURL == "http://x/i.png")
    }

    @Test("attach: a current run's upload is taken over; a stale run's is paused, a removed file's cancelled")
    func attach() {
        let (made, ids) = Self.machine(files: 2)
        var machine = made
        _ = machine.start()
        #expect(Self.isStale(machine.attach(FakeUpload("old"), to: ids[0], generation: 7), removed: false))
        let upload = FakeUpload("a")
        #expect(Self.isAttached(machine.attach(upload, to: ids[0], generation: 1), pause: false))
        #expect(machine.uploadingUpload(ids[0]) === upload)
        // Paused with its upload (same generation): a second upload of that run is taken over and paused.
        _ = machine.pause()
        #expect(Self.isAttached(machine.attach(FakeUpload("b"), to: ids[0], generation: 1), pause: true))
        _ = machine.delete(ids[0])
        #expect(Self.isStale(machine.attach(FakeUpload("c"), to: ids[0], generation: 1), removed: true))
    }

    static func isStale(_ action: Machine.AttachAction, removed: Bool) -> Bool {
        if case .stale(removed) = action { true } else { false }
    }

    static func isAttached(_ action: Machine.AttachAction, pause: Bool) -> Bool {
        if case .attached(pause) = action { true } else { false }
    }

    @Test("progress and the upload id are recorded on a listed file; an unlisted one, or progress that changes nothing, is not told")
    func progressAndUploadId() {
        let (made, ids) = Self.machine(files: 1)
        var machine = made
        let item = machine.progressed(ids[0], sent: 5, stored: 3, of: 10)
        #expect(item?.uploadedSize == 5 && item?.storedSize == 3 && item?.totalSize == 10)
        machine.uploadStarted(ids[0], uploadId: "u1")
        #expect(machine.item(ids[0])?.uploadId == "u1")
        #expect(machine.progressed(ID(value: 99), sent: 1, stored: 0, of: 2) == nil)
        // A run resumed after a failure starts at what was stored: the bytes sent do not go back; past them, they
        // count on. A file of another size (changed, uploaded afresh) starts over.
        #expect(machine.progressed(ids[0], sent: 3, stored: 3, of: 10) == nil)
        #expect(machine.item(ids[0])?.uploadedSize == 5)
        #expect(machine.progressed(ids[0], sent: 7, stored: 3, of: 10)?.uploadedSize == 7)
        // The server's confirmation of the last bytes sent is told (the stored bytes advance), only once.
        #expect(machine.progressed(ids[0], sent: 7, stored: 7, of: 10)?.storedSize == 7)
        #expect(machine.progressed(ids[0], sent: 7, stored: 7, of: 10) == nil)
        #expect(machine.progressed(ids[0], sent: 2, stored: 0, of: 12)?.uploadedSize == 2)
        machine.uploadStarted(ID(value: 99), uploadId: "x")
        #expect(machine.items.count == 1)
    }

    @Test("a run that fails before its upload exists fails the file with the server's code, or the code's name; a stale run's failure is ignored")
    func runFailed() {
        let (made, ids) = Self.machine(files: 2)
        var machine = made
        _ = machine.start()
        #expect(Self.isNil(machine.runFailed(ids[0], generation: 2, FerryError(.network, "late"))))
        let failed = machine.runFailed(ids[0], generation: 1, FerryError(.server, "No.", httpStatus: 403, serverCode: "Forbidden"))
        #expect(failed?.item?.failureCode == "Forbidden" && failed?.item?.failureMessage == "No.")
        #expect(Self.describe(failed?.starts ?? []) == ["run #2 g1"])
        let other = machine.runFailed(ids[1], generation: 1, FerryError(.fileNotFound, "missing"))
        #expect(other?.item?.failureCode == "fileNotFound")
        #expect(Self.states(machine) == [.failed, .failed])
    }

    @Test("an engine upload's end: stored, cancelled (a stopped file stays as it was) or failed; the next starts")
    func finish() {
        let (made, ids) = Self.machine(files: 3)
        var machine = made
        _ = machine.start()
        let a = FakeUpload("a")
        _ = machine.attach(a, to: ids[0], generation: 1)
        #expect(Self.isNil(machine.finish(ids[0], upload: FakeUpload("other"), .success(ResumableUploadStateMachineTests.result))))
        guard case .succeeded(let item, let starts) = machine.finish(ids[0], upload: a, .success(ResumableUploadStateMachineTests.result))
        else { Issue.record("not stored"); return }
        #expect(item?.state == .succeeded && item?.uploadedSize == 42 && item?.totalSize == 42)
        #expect(Self.describe(starts) == ["run #2 g1"])
        #expect(Self.isNil(machine.finish(ids[0], upload: a, .success(ResumableUploadStateMachineTests.result))), "ended twice")

        let b = FakeUpload("b")
        _ = machine.attach(b, to: ids[1], generation: 1)
        guard case .failed(let failed, let next) = machine.finish(ids[1], upload: b, .failure(FerryError(.checksumMismatch, "bad")))
        else { Issue.record("not failed"); return }
        #expect(failed?.state == .failed && failed?.failureCode == "checksumMismatch")
        #expect(Self.describe(next) == ["run #3 g1"])

        let c = FakeUpload("c")
        _ = machine.attach(c, to: ids[2], generation: 1)
        guard case .cancelled(let none) = machine.finish(ids[2], upload: c, .failure(FerryError.cancelledError()))
        else { Issue.record("not cancelled"); return }
        #expect(none.isEmpty)
        #expect(Self.states(machine) == [.succeeded, .failed, .cancelled])
    }

    @Test("a paused file whose engine upload ends as cancelled stays paused")
    func cancelledWhilePaused() {
        let (made, id, upload) = Situation.paused.make()
        var machine = made
        guard case .cancelled = machine.finish(id, upload: upload!, .failure(FerryError.cancelledError())) else {
            Issue.record("not cancelled")
            return
        }
        #expect(machine.item(id)?.state == .paused)
    }

    // MARK: Expired credentials

    @Test("a file waits for a credential only while it uploads with an engine upload", arguments: Situation.allCases)
    func credentialExpired(_ situation: Situation) {
        let (made, id, _) = situation.make()
        var machine = made
        let item = machine.credentialExpired(id)
        if situation == .uploading {
            #expect(item?.id == id)
            #expect(machine.takeExpired() == [id])
            #expect(machine.takeExpired().isEmpty, "taken once")
        } else {
            #expect(item == nil)
            #expect(machine.takeExpired().isEmpty)
        }
    }

    @Test("a file's own credential goes to that file: named, or the one that has waited longest; another waiting file keeps waiting")
    func oneFileTakesACredential() {
        let (made, ids) = Self.machine(files: 3, concurrent: 3)
        var machine = made
        _ = machine.start()
        for (index, id) in ids.enumerated() { _ = machine.attach(FakeUpload("up\(index)"), to: id, generation: 1) }
        for id in [ids[1], ids[2], ids[0]] { #expect(machine.credentialExpired(id)?.id == id) }
        #expect(machine.takeExpired(ids[2]) == ids[2], "the file named")
        #expect(machine.takeExpired(ids[2]) == nil, "taken once")
        #expect(machine.takeExpired(nil) == ids[1], "unnamed: the one that has waited longest")
        #expect(machine.takeExpired(nil) == ids[0])
        #expect(machine.takeExpired(nil) == nil && machine.takeExpired().isEmpty)
        #expect(machine.takeExpired(ID(value: 99)) == nil)
    }

    @Test("renewals stop after three in a row with no byte stored between them; stored bytes and the app's own credential count afresh")
    func renewalsWithoutProgress() {
        let (made, id, _) = Situation.uploading.make()
        var machine = made
        _ = machine.progressed(id, sent: 10, stored: 5, of: 100)
        var answers = (0..<4).map { _ in machine.mayRenew(id, limit: 3) }
        #expect(answers == [true, true, true, false], "a fourth renewal with nothing stored since the first is refused")
        _ = machine.progressed(id, sent: 20, stored: 15, of: 100)
        answers = (0..<4).map { _ in machine.mayRenew(id, limit: 3) }
        #expect(answers == [true, true, true, false], "bytes were stored: counted afresh")
        _ = machine.credentialExpired(id)
        #expect(machine.takeExpired() == [id])
        let afresh = machine.mayRenew(id, limit: 3)
        #expect(afresh, "the app's credential: counted afresh")
        let unknown = machine.mayRenew(ID(value: 99), limit: 3)
        #expect(!unknown, "no such file")
    }

    @Test("a file stopped or removed while it waits for a credential waits no more")
    func expiredFileStopped() {
        let (made, ids) = Self.machine(files: 2, concurrent: 2)
        var machine = made
        _ = machine.start()
        _ = machine.attach(FakeUpload("a"), to: ids[0], generation: 1)
        _ = machine.attach(FakeUpload("b"), to: ids[1], generation: 1)
        _ = machine.credentialExpired(ids[0])
        _ = machine.credentialExpired(ids[1])
        _ = machine.cancelFile(ids[0])
        _ = machine.delete(ids[1])
        #expect(machine.takeExpired().isEmpty)
        #expect(Self.isNil(machine.uploadingUpload(ids[0])), "a cancelled file's upload is not resumed with a credential")
    }

    @Test("any mix of adding, removing, cancelling, resuming, pausing, stopping, runs taking over their uploads and ending every way keeps each file found by its id and the queue full: while it runs, a file is ready only when as many as it uploads at once are uploading")
    func bookkeepingHoldsUnderAnyMix() {
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SeededGenerator(seed: seed)
        var machine = Machine(maxConcurrentUploads: 3)
        var ids: [ID] = []
        // Each file's current run, as the starts named it, and the engine upload its run attached.
        var runs: [ID: Int] = [:]
        var uploads: [ID: FakeUpload] = [:]
        func note(_ starts: [Machine.Start]) {
            for case .run(let id, let generation) in starts { runs[id] = generation }
        }
        let lost = FerryError(.network, "lost")
        for step in 0..<6_000 {
            let some = machine.items.map(\.id).randomElement(using: &random)
            let uploading = machine.items.filter { $0.state == .uploading }.map(\.id).randomElement(using: &random)
            switch Int.random(in: 0..<16, using: &random) {
            case 0, 1:
                let (id, starts) = machine.add(Self.file("f\(step).mp4"), info: MediaInfo(), kind: .video)
                ids.append(id)
                note(starts)
            // Then the next file starts, as the queue has it.
            case 2: if let some, machine.delete(some) != nil { note(machine.schedule()) }
            case 3:
                guard let some else { break }
                switch machine.cancelFile(some) {
                case .halt: note(machine.schedule())
                case .cancelled(let starts): note(starts)
                case .none: break
                }
            case 4: if let some { note(machine.resumeFile(some) ?? []) }
            case 5: _ = Int.random(in: 0..<4, using: &random) == 0 ? machine.pause() : machine.stop()
            case 6: note(Int.random(in: 0..<2, using: &random) == 0 ? machine.resume() : machine.start())
            case 7, 8:
                // A run takes over its engine upload (or finds itself stale, as the queue then drops the upload).
                guard let id = uploading ?? some, let generation = runs[id] else { break }
                let upload = FakeUpload("u\(step)")
                if case .attached = machine.attach(upload, to: id, generation: generation) { uploads[id] = upload }
            case 9, 10:
                // An engine upload ends: stored, cancelled or failed.
                guard let (id, upload) = uploads.randomElement(using: &random) else { break }
                let outcome: Result<UploadResult, FerryError> = [
                    .success(ResumableUploadStateMachineTests.result), .failure(FerryError(.cancelled, "stopped")), .failure(lost),
                ].randomElement(using: &random)!
                switch machine.finish(id, upload: upload, outcome) {
                case .succeeded(_, let starts), .cancelled(let starts), .failed(_, let starts): note(starts)
                case nil: break
                }
                uploads[id] = nil
            case 11:
                // A run finds its file stored by an earlier one.
                guard let id = uploading, let generation = runs[id] else { break }
                note(machine.storedEarlier(id, generation: generation, videoId: "v", imageId: nil, imageURL: nil, at: ("b", "k"), size: 1)?.starts ?? [])
            case 12:
                guard let id = uploading, let generation = runs[id] else { break }
                note(machine.runFailed(id, generation: generation, lost)?.starts ?? [])
            case 13:
                guard let id = uploading, machine.credentialExpired(id) != nil else { break }
                if Int.random(in: 0..<2, using: &random) == 0, let refused = machine.renewalRefused(id, lost) {
                    uploads[id] = nil
                    note(refused.starts)
                }
            default:
                if let uploading { note(machine.fail(uploading, lost).starts) }
            }
            for item in machine.items {
                guard machine.item(item.id)?.id == item.id, machine.item(item.id)?.state == item.state else {
                    Issue.record("step \(step) (seed \(seed)): \(item.id) is not found as listed")
                    return
                }
            }
            let uploadingCount = machine.items.count { $0.state == .uploading }
            let ready = machine.items.count { $0.state == .ready }
            guard uploadingCount <= 3, !machine.isRunning || uploadingCount == 3 || ready == 0 else {
                Issue.record("step \(step) (seed \(seed)): \(uploadingCount) uploading, \(ready) ready, running \(machine.isRunning)")
                return
            }
        }
        let gone = Set(ids).subtracting(machine.items.map(\.id))
        #expect(gone.allSatisfy { machine.item($0) == nil }, "seed \(seed)")
        #expect(!gone.isEmpty && !machine.items.isEmpty, "the mix removed some files and kept others (seed \(seed))")
        let states = Set(machine.items.map(\.state))
        #expect(states.contains(.succeeded) && states.contains(.failed), "the mix ended files both ways (seed \(seed)): \(states)")
    }
}
