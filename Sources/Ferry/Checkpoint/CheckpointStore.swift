import FerryCore
import Foundation

/// What an interrupted upload needs to continue, in another process too.
public struct UploadCheckpoint: Codable, Sendable, Hashable {
    /// Format version; a checkpoint of another version is ignored. Version 2 added ``partSegments``; version 1
    /// checkpoints (one part size) are still read.
    public static let currentVersion = 2
    /// Versions this build reads.
    static let readableVersions = 1...currentVersion
    /// This checkpoint's format version.
    public var version = currentVersion
    /// The service the upload goes to: its endpoint, or the client's `serviceIdentity`.
    public var endpoint: String
    /// Bucket.
    public var bucket: String
    /// Key.
    public var key: String
    /// Local file path.
    public var filePath: String
    /// The multipart upload id.
    public var uploadId: String
    /// Part size the upload was started with.
    public var partSize: Int64
    /// How the file is cut when parts were resized during the upload (nil: every part but the last is ``partSize``).
    public var partSegments: [UploadPlan.Segment]?
    /// The file as it was when the upload started.
    public var fingerprint: FileFingerprint
    /// S3 name of the checksum algorithm, when one is used.
    public var checksumAlgorithm: String?
    /// Parts known to be on the server.
    public var parts: [UploadedPart]
    /// When the upload started.
    public var createdAt: Date

    /// The ETag of the object this upload completes into (the MD5 of its parts' MD5s, and their count), when every
    /// part of the plan for a file of `fileSize` bytes is recorded; nil otherwise.
    func completedETag(fileSize: Int64) -> String? {
        let segments = partSegments ?? [UploadPlan.Segment(firstPart: 1, offset: 0, partSize: partSize)]
        guard let plan = try? UploadPlan(fileSize: fileSize, segments: segments), plan.partCount > 0 else { return nil }
        let sorted = parts.sorted { $0.number < $1.number }
        let md5s = sorted.compactMap { Hex.decode($0.etag) }.filter { $0.count == 16 }
        guard sorted.map(\.number) == Array(1...plan.partCount), md5s.count == sorted.count else { return nil }
        return Checksum.multipartETag(partMD5s: md5s)
    }
}

/// Checkpoints as JSON files in a record directory, written atomically (temporary file, fsync, rename).
struct CheckpointStore: Sendable {
    let directory: URL

    /// The file name for an upload: a hash of the service (endpoint or identity), bucket, key and local path.
    static func identifier(endpoint: String, bucket: String, key: String, filePath: String) -> String {
        String(SigV4.hexSHA256("\(endpoint)\n\(bucket)\n\(key)\n\(filePath)").prefix(40))
    }

    var files: JSONRecordFiles { JSONRecordFiles(directory: directory) }

    static func name(_ identifier: String) -> String { "\(identifier).ferry-checkpoint.json" }
    static func intentName(_ identifier: String) -> String { "\(identifier).ferry-intent" }

    func url(for identifier: String) -> URL { files.url(Self.name(identifier)) }

    /// The checkpoint, or nil when there is none or it is unreadable or of another version.
    func load(_ identifier: String) -> UploadCheckpoint? {
        guard let checkpoint = files.read(UploadCheckpoint.self, name: Self.name(identifier)),
            UploadCheckpoint.readableVersions.contains(checkpoint.version)
        else { return nil }
        return checkpoint
    }

    /// Writes a checkpoint atomically.
    func save(_ checkpoint: UploadCheckpoint, as identifier: String) throws {
        try files.write(checkpoint, name: Self.name(identifier), what: "checkpoint")
    }

    /// Deletes a checkpoint.
    func delete(_ identifier: String) {
        files.remove(Self.name(identifier))
    }

    /// The checkpoints of uploads of the local file `file` to `bucket`/`key`, whatever service they went to, by
    /// identifier: those of an upload no run will continue (its file changed since) are found by what they name.
    func checkpoints(bucket: String, key: String, file: URL) -> [(identifier: String, checkpoint: UploadCheckpoint)] {
        let paths: Set<String> = [file.path, file.standardizedFileURL.path]
        let suffix = Self.name("")
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        return entries.filter { $0.hasSuffix(suffix) && !$0.hasPrefix(".") }.sorted().compactMap { entry in
            let identifier = String(entry.dropLast(suffix.count))
            guard let checkpoint = load(identifier), checkpoint.bucket == bucket, checkpoint.key == key,
                paths.contains(checkpoint.filePath)
            else { return nil }
            return (identifier, checkpoint)
        }
    }

    func intentURL(for identifier: String) -> URL { files.url(Self.intentName(identifier)) }

    /// Takes the lock of an upload's checkpoint (``CheckpointLock``), held while a run sends the upload.
    ///
    /// - Throws: ``FerryError`` `uploadInProgress` when another run holds it, naming the file and the checkpoint;
    ///   `invalidArgument` when the record directory is not writable.
    func lock(_ identifier: String, file: String) throws(FerryError) -> CheckpointLock {
        try FerryError.catching(.invalidArgument, "Creating the record directory \(directory.path)") {
            try files.createDirectory()
        }
        guard let lock = try CheckpointLock.acquire(files.url(".\(identifier).ferry-lock")) else {
            throw FerryError(
                .uploadInProgress, "Another upload of \(file) is running (checkpoint \(url(for: identifier).path))")
        }
        return lock
    }

    /// Records, durably, that a multipart upload is about to be created for this upload: a process killed after the
    /// server created it and before its first checkpoint was written leaves this behind, so the next run can find the
    /// upload it lost instead of leaving it open.
    func saveIntent(_ identifier: String, at date: Date) throws {
        try files.write(data: Data(String(date.timeIntervalSince1970).utf8), name: Self.intentName(identifier), what: "checkpoint")
    }

    /// When the last run began creating a multipart upload it never recorded, if it did.
    func intent(_ identifier: String) -> Date? {
        guard let data = FileManager.default.contents(atPath: intentURL(for: identifier).path),
            let seconds = TimeInterval(String(decoding: data, as: UTF8.self))
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Forgets the intent, once the checkpoint names the upload.
    func deleteIntent(_ identifier: String) {
        files.remove(Self.intentName(identifier))
    }

    /// Deletes a checkpoint no run will continue (its upload completed) and its intent, under its lock; left alone
    /// while a run holds the lock.
    func discard(_ identifier: String, file: String) {
        guard let lock = try? lock(identifier, file: file) else { return }
        delete(identifier)
        deleteIntent(identifier)
        lock.release()
    }
}

/// Writes one upload's checkpoints off the upload's path, so a part's completion never waits on the disk: one write
/// at a time runs on a background queue, and states submitted meanwhile are coalesced into the next write (only the
/// latest matters). A write that fails is reported by the next ``submit(_:)`` or ``flush()``.
///
/// ``delete()`` and ``flush()`` wait for the write under way, so a checkpoint is never written after it was deleted.
final class CheckpointWriter: @unchecked Sendable {
    private let store: CheckpointStore
    private let identifier: String
    private let beforeWrite: (@Sendable () -> Void)?
    // Every access to the fields below holds `lock`.
    private let lock = NSLock()
    private var pending: UploadCheckpoint?
    private var writing = false
    private var failure: (any Error)?
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    init(store: CheckpointStore, identifier: String, beforeWrite: (@Sendable () -> Void)? = nil) {
        self.store = store
        self.identifier = identifier
        self.beforeWrite = beforeWrite
    }

    /// Queues `checkpoint` to be written; throws if an earlier write failed.
    func submit(_ checkpoint: UploadCheckpoint) throws {
        let start: Bool = try lock.withLock {
            if let failure { throw failure }
            pending = checkpoint
            if writing { return false }
            writing = true
            return true
        }
        if start { DispatchQueue.global(qos: .utility).async { self.drain() } }
    }

    /// Returns once everything submitted is written; throws if a write failed.
    func flush() async throws {
        await idle()
        if let failure = lock.withLock({ failure }) { throw failure }
    }

    /// Drops what is not yet written, waits for the write under way, and deletes the checkpoint.
    func delete() async {
        lock.withLock { pending = nil }
        await idle()
        store.delete(identifier)
    }

    private func idle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if !writing { return true }
                idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Writes the latest submitted checkpoint until none is left, then wakes whoever waits for the writer to be idle.
    private func drain() {
        while true {
            let (next, waiters) = lock.withLock { () -> (UploadCheckpoint?, [CheckedContinuation<Void, Never>]) in
                guard let next = pending else {
                    writing = false
                    defer { idleWaiters = [] }
                    return (nil, idleWaiters)
                }
                pending = nil
                return (next, [])
            }
            guard let next else {
                for waiter in waiters { waiter.resume() }
                return
            }
            beforeWrite?()
            do {
                try store.save(next, as: identifier)
            } catch {
                lock.withLock { failure = failure ?? error }
            }
        }
    }
}
