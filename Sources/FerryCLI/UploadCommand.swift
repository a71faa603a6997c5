import ArgumentParser
import Ferry
import FerryCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Exit codes of `ferry`.
enum ExitCodes {
    /// Everything worked.
    static let success: Int32 = 0
    /// An upload or a service call failed.
    static let failed: Int32 = 1
    /// Interrupted (Ctrl-C), or the network or the service failed past the retries: the checkpoint stays; run the
    /// same command again to resume.
    static let interrupted: Int32 = 75
    /// What the command printed could not all be written (its reader went away: a closed pipe), though the command
    /// did its work: a key's secret or an event may be lost (EX_IOERR).
    static let outputLost: Int32 = 74

    /// The exit code of an upload that failed with `error`: ``interrupted`` when the network or the service gave out
    /// (a timeout, a dropped connection, a 5xx, a 408 or 429 past the retries, a 409 of a concurrent operation: the
    /// same command resumes), ``failed`` otherwise (a refusal the same command would meet again: a bad key, a quota,
    /// a denied access, a conflict such as a bucket that is not empty or an image that goes with its video).
    static func of(_ error: any Error) -> Int32 {
        guard let error = error as? FerryError, [.network, .timeout, .server].contains(error.code) else { return failed }
        if error.code == .server, let status = error.httpStatus, (400..<500).contains(status),
            ![408, 425, 429].contains(status), !resumableCodes.contains(error.serverCode ?? "")
        {
            return failed
        }
        return interrupted
    }

    /// Failure codes past which a rerun resumes: the client's own for the network and timeouts (and a server error
    /// without a code), and the service's for being busy, out of room, cut short by the network (S3's
    /// `RequestTimeout` and `IncompleteBody` are 400s) or by a concurrent operation (409 `OperationAborted`,
    /// `ConditionalRequestConflict`). A queue item's failure carries only its code.
    static let resumableCodes: Set<String> = [
        "network", "timeout", "server", "InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "Throttling",
        "InsufficientStorage", "IncompleteBody", "OperationAborted", "ConditionalRequestConflict",
    ]

    /// `error` as a sentence: its description with a full stop, unless it has one.
    static func sentence(_ error: any Error) -> String {
        let text = "\(error)"
        return text.hasSuffix(".") ? text : text + "."
    }

    /// What to tell the user after `error` ended an upload with `code`.
    static func advice(_ code: Int32, _ error: any Error) -> String {
        if code == interrupted { return " The checkpoint is kept: run the same command again to resume." }
        if (error as? FerryError)?.code == .cannotResumeUpload {
            return " Add --no-resume to upload it afresh, or --cancel to abort what was sent."
        }
        return ""
    }
}

/// `ferry upload`: uploads videos, images or plain objects with the resumable engine and live progress.
struct UploadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload videos, images or objects, resumably, with live progress.",
        discussion: """
            A video is created with CreateUploadVideo and uploaded through the engine; its VideoId is printed (with \
            --wait, its renditions too, once processed). An image (png, jpg, jpeg, gif, webp, heic) prints its \
            ImageURL. With --bucket the file is a plain object upload. Without --endpoint or FERRY_ENDPOINT, Ferry \
            runs in-process on --data-dir \
            (default ~/.ferry). Ctrl-C pauses the batch: the checkpoints stay, files not started are named, and \
            running the same command again resumes; it skips the files an earlier run with the same options finished \
            (unless changed since; the rerun may name more files or fewer), until a run ends with every file done. \
            --no-resume sends every file afresh. --cancel (or a \
            second Ctrl-C while the pause is under way) aborts and cleans up. With --wait the progress line follows the video's processing until it is Normal \
            (its renditions are printed) or TranscodeFail (exit 1; 75 when the service, not the file, failed past its \
            retries: the same command then sends the file again).
            Exit codes: 0 success, 1 upload failed (also when another run is uploading the same file to the same \
            place: it holds the checkpoint), 64 usage error, 74 what it printed could not all be written (its reader \
            went away), 75 interrupted or the network failed past the retries (resumable).
            """)

    @Argument(help: "Files to upload (after --, names that begin with a dash).")
    var files: [String] = []

    @Option(
        name: .customLong("files-from"),
        help: "Upload the files this list names too, one path per line ('-' reads standard input): for more files than a command line holds.")
    var filesFrom: String?

    @OptionGroup var service: ServiceOptions

    @Option(help: "Cover image for the video(s).") var cover: String?
    @Option(help: "Video title; default the file name.") var title: String?
    @Option(help: "Comma-separated tags.") var tags: String?
    @Option(help: "Description.") var desc: String?
    @Option(name: .customLong("cate-id"), help: "Category id.") var cateId: Int?
    @Option(help: "Transcoding template group (default, NoTranscode, or a group the server defines).") var transcode: String?
    @Flag(help: "After a video is uploaded, follow its processing (probe, cover, renditions) until it is Normal or TranscodeFail, then print its renditions.") var wait = false

    @Option(help: "Plain object upload to this bucket (no video is created); a bucket that does not exist is created, and said so.") var bucket: String?
    @Option(help: "Object key with --bucket (one file only); default the file's name.") var key: String?

    @Option(name: .customLong("part-size"), help: "Fixed part size, e.g. 8MiB, 8388608. Default: 5MiB parts growing up to 16MiB on a fast link.") var partSize: String?
    @Option(help: "Parts sent at once. Default 4.") var parallel: Int = 4
    @Option(help: "Files uploaded at once, up to 64. Default 1.") var jobs: Int = 1
    /// The most files uploaded at once.
    static let maxJobs = 64
    /// The smallest part of a multipart upload (S3's).
    static let minPartSize: Int64 = 5 << 20
    /// The smallest tus chunk `--part-size` sets.
    static let minChunkSize: Int64 = 64 << 10
    @Option(help: "Checksum: crc32c (default), crc32, crc64nvme, sha256, sha1, md5 or none.") var checksum: String = "crc32c"
    @Option(name: .customLong("record-dir"), help: "Checkpoint directory. Default <data dir>/checkpoints or ~/.ferry/checkpoints.")
    var recordDirectory: String?
    @Flag(name: .customLong("no-resume"), help: "Start afresh instead of resuming.") var noResume = false
    @Flag(help: "Cancel an interrupted upload of these files: abort it on the server, delete its checkpoint and its unfinished video or image. The files need not exist any more.") var cancel = false
    @Option(name: .customLong("max-retries"), help: "Retries per request before giving up. Default 8.") var maxRetries: Int = 8
    @Flag(help: "Print one JSON object per event instead of progress lines.") var json = false
    @Option(
        name: .customLong("protocol"),
        help: "Send each file as one resumable stream in tus or ietf (the IETF resumable-upload draft) instead of parallel multipart parts; useful behind proxies that dislike many parallel requests. --part-size sets the tus chunk (default 64MiB). Not with --cover or --wait.")
    var wireProtocol: String?

    mutating func validate() throws {
        if let filesFrom {
            let listed = try Self.fileList(filesFrom)
            if listed.isEmpty {
                throw ValidationError("--files-from: '\(TerminalText.safe(filesFrom))' names no file.")
            }
            files += listed
        }
        if files.isEmpty { throw ValidationError("Name the files to upload, or a list of them with --files-from.") }
        if key != nil && bucket == nil { throw ValidationError("--key needs --bucket.") }
        if key != nil && files.count > 1 { throw ValidationError("--key works with one file only.") }
        if bucket != nil, key == nil, files.count > 1 {
            // Each file's key is its name: two files of one name would overwrite each other, the last one kept.
            var seen: [String: String] = [:]
            for path in files {
                let name = URL(fileURLWithPath: path).lastPathComponent
                if let first = seen[name] {
                    throw ValidationError(
                        "'\(TerminalText.safe(first))' and '\(TerminalText.safe(path))' would both be stored as "
                            + "'\(TerminalText.safe(name))' (a file's key is its name): upload them apart, with --key.")
                }
                seen[name] = path
            }
        }
        if !(1...ResumableUploadRequest.maxConcurrency).contains(parallel) {
            throw ValidationError("--parallel must be from 1 to \(ResumableUploadRequest.maxConcurrency).")
        }
        if !(1...Self.maxJobs).contains(jobs) { throw ValidationError("--jobs must be from 1 to \(Self.maxJobs).") }
        if maxRetries < 0 { throw ValidationError("--max-retries must not be negative.") }
        if checksum.lowercased() != "none" && ChecksumAlgorithm(name: checksum) == nil {
            throw ValidationError("--checksum '\(checksum)' is not one of crc32c, crc32, crc64nvme, sha256, sha1, md5, none.")
        }
        if let wireProtocol, StreamUploader.WireProtocol(rawValue: wireProtocol.lowercased()) == nil {
            throw ValidationError("--protocol '\(wireProtocol)' is not one of tus, ietf.")
        }
        if wireProtocol != nil, cover != nil || wait {
            throw ValidationError("--protocol does not combine with --cover or --wait.")
        }
        if let partSize, ByteSize.parse(partSize) == nil {
            throw ValidationError("--part-size '\(partSize)' is not a size such as 8MiB or 5242880.")
        }
        // A multipart upload of smaller parts is sent whole and then refused (EntityTooSmall): refused here instead.
        if wireProtocol == nil, let partSize, let size = ByteSize.parse(partSize), size < Self.minPartSize {
            throw ValidationError("--part-size must be at least 5MiB, S3's smallest part (with --protocol tus it is the chunk size, from 64KiB).")
        }
        // Each tus chunk is a request: tiny ones send a file at a few KB/s, too slowly to show progress.
        if wireProtocol != nil, let partSize, let size = ByteSize.parse(partSize), size < Self.minChunkSize {
            throw ValidationError("--part-size with --protocol must be at least 64KiB: each tus chunk is one request.")
        }
    }

    /// The largest list --files-from reads: 64 MiB.
    static let largestFileList = 64 << 20

    /// The paths a list names, one a line (a line may end with CR LF; empty lines are skipped); a relative path is
    /// read from the working directory, as one given as an argument.
    static func fileList(_ path: String) throws -> [String] {
        let handle = path == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: path)
        guard let handle, let data = try? handle.read(upToCount: largestFileList + 1) ?? Data() else {
            throw ValidationError("--files-from: cannot read '\(TerminalText.safe(path))'.")
        }
        guard data.count <= largestFileList else {
            throw ValidationError("--files-from: the list is larger than 64 MiB; split it over several runs.")
        }
        // Split as bytes: to a String, CR LF is one character, not a line break after a CR.
        return data.split(separator: UInt8(ascii: "\n")).compactMap { line in
            let path = line.last == UInt8(ascii: "\r") ? line.dropLast() : line
            return path.isEmpty ? nil : String(decoding: path, as: UTF8.self)
        }
    }

    func run() async throws {
        let output = ProgressPrinter(json: json)
        // --cancel needs only the path, which names the upload: a file deleted or moved since can be cancelled.
        for path in cancel ? [] : files + (cover.map { [$0] } ?? []) {
            // A regular file only: a pipe or a device has no size to plan parts by (one was stored empty).
            let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            let type = (try? FileManager.default.attributesOfItem(atPath: resolved))?[.type] as? FileAttributeType
            guard type == .typeRegular, FileManager.default.isReadableFile(atPath: path) else {
                // A name that is not UTF-8 reaches the command with its bytes replaced by U+FFFD: no such file exists.
                // Said as a file's failure: with --json, a `failed` event names it too.
                let name = URL(fileURLWithPath: path).lastPathComponent
                if type == nil, path.unicodeScalars.contains("\u{FFFD}") {
                    output.failure(
                        "ferry: cannot read \(path): its name is not valid UTF-8, which Ferry cannot open; rename the file.",
                        file: name, code: "\(FerryError.Code.invalidArgument)")
                    throw ExitCode(ExitCodes.failed)
                }
                output.failure(
                    "ferry: cannot read \(path): no such file, not a regular file (a directory, a pipe, a device), or not readable.",
                    file: name, code: "\(FerryError.Code.invalidArgument)")
                throw ExitCode(ExitCodes.failed)
            }
        }
        let code = try await service.with { connection in
            try await uploadAll(connection: connection, output: output)
        }
        if code != ExitCodes.success { throw ExitCode(code) }
    }

    func uploadAll(connection: ServiceConnection, output: ProgressPrinter) async throws -> Int32 {
        var configuration = ObjectStorageClient.Configuration()
        configuration.retryPolicy.maxRetryCount = maxRetries
        configuration.serviceIdentity = connection.serviceIdentity
        configuration.onRetry = ServiceConnection.sayUnreachable
        let env = ProcessInfo.processInfo.environment
        let records = URL(fileURLWithPath: recordDirectory ?? (service.dataDirectory ?? env["FERRY_DATA_DIR"] ?? defaultDataDirectory(env)) + "/checkpoints")
        // Made (0700) before anything is created on the server: a record directory that cannot be used stops the run
        // with nothing left behind (a video made for a file whose checkpoint could not be written).
        do {
            try JSONRecordFiles(directory: records).createDirectory()
        } catch {
            output.error("ferry: the record directory \(records.path) cannot be used: \(Self.systemReason(error)).")
            return ExitCodes.failed
        }
        // What the options make of the files: a rerun of the same command skips those an earlier run finished.
        let destination = [
            "1", bucket ?? "", key ?? "", wireProtocol?.lowercased() ?? "multipart", cover ?? "", title ?? "", tags ?? "",
            desc ?? "", cateId.map(String.init) ?? "", transcode ?? "",
        ]
        let batch = BatchRecord(records: records, destination: destination, paths: files + (cover.map { [$0] } ?? []))
        if cancel || noResume { batch.clear() }
        let context = UploadContext(
            connection: connection, configuration: configuration, records: records, output: output,
            interrupts: SignalCounter.install(), batch: batch)
        let silence = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                output.noticeSilence()
            }
        }
        defer { silence.cancel() }
        let code: Int32
        if let wireProtocol, let wire = StreamUploader.WireProtocol(rawValue: wireProtocol.lowercased()) {
            code = try await uploadStreams(context: context, wire: wire)
        } else if bucket == nil {
            code = try await uploadMedia(context: context)
            if code == ExitCodes.success { Self.forgetJournalLeftovers(files, context: context) }
        } else {
            let command = self
            code = try await Self.batch(files, jobs: jobs, context: context) { try await command.uploadObject($0, context: context) }
        }
        if code == ExitCodes.success { batch.clear() }
        return code
    }

    /// Removes the media upload journal's entries a kill left between a file's batch record and the entry's removal
    /// (the queue records the batch first): with the batch gone, the same command's next run would find the entry's
    /// video stored and print it again instead of sending the file. Only an entry of the video the batch recorded for
    /// the file goes: one of another upload of it (another command's, paused) is not this batch's.
    static func forgetJournalLeftovers(_ paths: [String], context: UploadContext) {
        let journal = MediaUploadJournal(directory: context.records)
        for path in paths {
            let file = URL(fileURLWithPath: path)
            guard let videoId = context.batch.finished(path)?["VideoId"], journal.lookup(file)?.id == videoId else {
                continue
            }
            journal.remove(file)
        }
    }

    /// Runs `upload` for each of `paths`, `jobs` at once, and returns the batch's exit code: 75 when a file was
    /// paused or did not start, else the first failure's. A file that failed (the network gave out) leaves the others
    /// to go on; Ctrl-C pauses the batch: no more files start, and those that did not are named. A file an earlier run
    /// of the batch finished is skipped (`context.batch`); `upload` records those it finishes.
    static func batch(
        _ paths: [String], jobs: Int, context: UploadContext, _ upload: @escaping @Sendable (String) async throws -> Int32
    ) async throws -> Int32 {
        try await withThrowingTaskGroup(of: Int32.self) { group in
            var next = 0
            var worst = ExitCodes.success
            func launch() {
                guard next < paths.count else { return }
                let path = paths[next]
                next += 1
                group.addTask {
                    let name = URL(fileURLWithPath: path).lastPathComponent
                    // Silence counts from the file's first request (a bucket check, a video's creation) on.
                    context.output.silence.heard(name)
                    defer { context.output.silence.forget(name) }
                    if let fields = await Self.finished(path, context: context) {
                        context.output.skipped(file: name, fields: fields)
                        return ExitCodes.success
                    }
                    return try await upload(path)
                }
            }
            for _ in 0..<jobs { launch() }
            while let code = try await group.next() {
                if code == ExitCodes.interrupted || worst == ExitCodes.success { worst = max(worst, code) }
                if context.interrupts.count == 0 { launch() }
            }
            for path in paths[next...] { context.output.notStarted(file: URL(fileURLWithPath: path).lastPathComponent) }
            return next < paths.count ? max(worst, ExitCodes.interrupted) : worst
        }
    }

    /// What an earlier run of the batch made of `path` (``BatchRecord/finished(_:)``), unless it is a video deleted
    /// since, or one whose processing the service gave up on (``serviceGaveUp(_:)``): that file is sent again, as a
    /// new video. A video that failed for its file's sake (unreadable, too long, refused by ffmpeg) stays skipped: the
    /// same bytes fail the same way. A service that cannot say keeps the file skipped.
    static func finished(_ path: String, context: UploadContext) async -> [String: String]? {
        guard let fields = context.batch.finished(path) else { return nil }
        guard let videoId = fields["VideoId"] else { return fields }
        do {
            // A Ctrl-C meanwhile keeps the file skipped, as a service that cannot say does.
            let media = context.connection.media(context.configuration)
            let info = try await asked(context) { () async throws(FerryError) in
                try await media.getVideoInfo(videoId: videoId)
            }
            if info.status != "Deleted" && !serviceGaveUp(info) { return fields }
        } catch where error.serverCode == "InvalidVideo.NotFound" {
            // Deleted and gone.
        } catch {
            return fields
        }
        context.batch.forget(path)
        return nil
    }

    /// Whether `info` is a video whose processing failed for the service's sake, not its file's: its jobs failed past
    /// their retries (`ProcessingFailed`). Running the same command again sends the file anew.
    static func serviceGaveUp(_ info: MediaServiceClient.VideoInfo) -> Bool {
        info.status == "TranscodeFail" && info.errorCode == "ProcessingFailed"
    }

    struct UploadContext: Sendable {
        var connection: ServiceConnection
        var configuration: ObjectStorageClient.Configuration
        var records: URL
        var output: ProgressPrinter
        var interrupts: SignalCounter
        /// The files of the batch an earlier run finished, and those this one finishes.
        var batch: BatchRecord

        /// Records that `path` finished, making `fields` (``BatchRecord/record(_:_:)``), and says so on standard
        /// error when the record cannot be written: the file is done, but a rerun would send it again. Returns
        /// whether it was written; the upload's own record is kept when it was not, by which a rerun finds the file.
        @discardableResult
        func recordFinished(_ path: String, _ fields: [String: String]) -> Bool {
            do {
                try batch.record(path, fields)
                return true
            } catch {
                output.error(
                    "ferry: \(path) is done, but its record could not be written (\(error)); running the same command "
                        + "again may send it again.")
                return false
            }
        }
    }

    /// A request to the service before a file's upload begins, as ``untilInterrupted(_:_:)`` runs it: an interruption
    /// is thrown as ``FerryError/Code/cancelled``.
    static func asked<T: Sendable>(
        _ context: UploadContext, _ request: @escaping @Sendable () async throws(FerryError) -> T
    ) async throws(FerryError) -> T {
        do {
            if let answer = try await untilInterrupted(context, request) { return answer }
        } catch let error as FerryError {
            throw error
        } catch {}
        throw FerryError(.cancelled, "The run was interrupted before the upload began.")
    }

    /// Runs `body` (requests before a file's upload begins, which a silent link can hold for minutes) until it ends
    /// or the run is interrupted (Ctrl-C, also before it began): nil then, its requests cancelled.
    static func untilInterrupted<T: Sendable>(
        _ context: UploadContext, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T? {
        let interrupts = context.interrupts
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                while interrupts.count == 0 { try await Task.sleep(for: .milliseconds(50)) }
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { return nil }
            return first
        }
    }

    /// Creates `bucket` when it is missing, and says so (a mistyped name is seen, not silently made). A key that may
    /// not look at or create buckets (one scoped to a prefix) goes on: the upload itself says whether it may write
    /// there.
    static func ensureBucket(_ bucket: String, client: ObjectStorageClient, output: ProgressPrinter, file: String) async throws {
        let exists = try await client.bucketExists(bucket)
        if exists == true { return }
        let created = try await createBucket(bucket, client: client)
        guard created, exists == false, output.createdBuckets.withLock({ $0.insert(bucket).inserted }) else { return }
        output.message("Created the bucket \(bucket): it did not exist.", file: file)
    }

    /// Creates `bucket`; false when the key may not (AccessDenied), as a key scoped to a prefix may not.
    private static func createBucket(_ bucket: String, client: ObjectStorageClient) async throws -> Bool {
        do {
            try await client.createBucket(bucket)
            return true
        } catch where error.serverCode == "AccessDenied" {
            return false
        }
    }

    /// A plain object upload (`--bucket`) through the engine.
    func uploadObject(_ path: String, context: UploadContext) async throws -> Int32 {
        let bucket = self.bucket ?? ""
        let url = URL(fileURLWithPath: path)
        let client = context.connection.objects(context.configuration)
        do {
            guard try await Self.untilInterrupted(context, {
                try await Self.ensureBucket(bucket, client: client, output: context.output, file: url.lastPathComponent)
            }) != nil else {
                context.output.paused(file: url.lastPathComponent)
                return ExitCodes.interrupted
            }
        } catch {
            // This file's failure: the batch goes on, and the exit code says whether a rerun helps.
            context.output.failure("ferry: \(path): \(error)", file: url.lastPathComponent, error: error)
            return ExitCodes.of(error)
        }
        var request = request(for: url, bucket: bucket, key: key ?? url.lastPathComponent, records: context.records)
        request.contentType = Self.contentType(url.pathExtension)
        if cancel {
            let cancelled: ObjectStorageClient.InterruptedUploadCancellation
            do {
                cancelled = try await client.cancelInterruptedUpload(of: request)
            } catch {
                context.output.failure(Self.failureText(path, error), file: url.lastPathComponent, error: error)
                return ExitCodes.of(error)
            }
            context.output.message(Self.cancellationText(path, cancelled), file: url.lastPathComponent)
            return ExitCodes.success
        }
        let (code, result) = try await run(request, client: client, context: context)
        if let result {
            // Recorded before it is told: a run killed once the user has seen it leaves the record behind.
            context.recordFinished(
                path, ["Bucket": result.bucket, "Key": result.key, "ETag": result.etag, "Size": String(result.size)])
            context.output.completed(result, file: url.lastPathComponent)
        }
        return code
    }

    /// What `--cancel` tells of a file: only what it knows is left on the server.
    static func cancellationText(_ path: String, _ cancelled: ObjectStorageClient.InterruptedUploadCancellation) -> String {
        switch cancelled {
        case .none: "No interrupted upload of \(path) to cancel."
        case .aborted: "Cancelled the upload of \(path); nothing is left on the server."
        case .abortRefused(let status):
            "Cancelled the upload of \(path), but the service refused to abort its upload (HTTP \(status)): it stays "
                + "until the service ends unfinished uploads."
        case .lostCreation(found: let found?) where found > 0:
            "Cancelled the upload of \(path); nothing is left on the server."
        case .lostCreation(found: 0):
            "Cancelled the upload of \(path). It was stopped while its upload was being begun, and the service lists no "
                + "upload of that time to abort: one it began, if any, stays until the service ends unfinished uploads."
        case .lostCreation:
            "Cancelled the upload of \(path). It was stopped while its upload was being begun, and the service's uploads "
                + "could not be listed to find it: one it began, if any, stays until the service ends unfinished uploads."
        }
    }

    func request(for file: URL, bucket: String, key: String, records: URL) -> ResumableUploadRequest {
        var request = ResumableUploadRequest(bucket: bucket, key: key, fileURL: file)
        request.concurrency = parallel
        request.checksumAlgorithm = checksum.lowercased() == "none" ? nil : ChecksumAlgorithm(name: checksum)
        if let partSize { request.partSize = ByteSize.parse(partSize)! }
        request.recordDirectory = records
        return request
    }

    /// Videos and images go through the SDK's ``UploadQueue`` (VODUploadClient), authorized with the command's key as
    /// an STS credential: the queue calls CreateUploadVideo / CreateUploadImage, remembers which video each file became
    /// (a rerun after Ctrl-C or a kill continues the same video and multipart upload), refreshes expired upload
    /// credentials, and uploads with the engine. The command only turns its options into the queue's configuration and
    /// its events into output.
    func uploadMedia(context: UploadContext) async throws -> Int32 {
        let journal = MediaUploadJournal(directory: context.records)
        if cancel || noResume {
            let objects = context.connection.objects(context.configuration)
            for path in files + (cover.map { [$0] } ?? []) {
                let url = URL(fileURLWithPath: path).standardizedFileURL
                if let previous = journal.lookup(url) ?? journal.abandoned(url) {
                    do {
                        try await objects.discardCheckpoint(
                            of: request(for: url, bucket: previous.bucket, key: previous.key, records: context.records))
                    } catch {
                        // Another run is sending it (or the abort failed): its video and journal entry stay.
                        context.output.failure(Self.failureText(path, error), file: url.lastPathComponent, error: error)
                        return ExitCodes.of(error)
                    }
                    journal.remove(url)
                    // A video whose upload is cancelled or started over (or whose file changed) is deleted rather than
                    // left Uploading until it expires.
                    let media = context.connection.media(context.configuration)
                    if MediaKind(fileURL: url) == .video {
                        await media.deleteAbandonedVideo(previous.id)
                    } else {
                        await media.deleteAbandonedImage(previous.id)
                    }
                    if cancel {
                        context.output.message("Cancelled the upload of \(path); nothing is left on the server.", file: url.lastPathComponent)
                    }
                } else if cancel {
                    context.output.message("No interrupted upload of \(path) to cancel.", file: url.lastPathComponent)
                }
            }
            if cancel { return ExitCodes.success }
        }
        let queue = UploadQueue(
            authorization: .sts(endpoint: context.connection.endpoint, credentials: context.connection.credentials),
            configuration: queueConfiguration(context))
        let follower = QueueFollower(queue: queue, output: context.output, interrupts: context.interrupts)
        var coverURL: String?
        if let cover, let fields = context.batch.finished(cover) {
            context.output.skipped(file: URL(fileURLWithPath: cover).lastPathComponent, fields: fields)
            coverURL = fields["ImageURL"]
        } else if let cover {
            let id = await queue.addCoverImage(URL(fileURLWithPath: cover), info: MediaInfo(title: URL(fileURLWithPath: cover).lastPathComponent))
            let outcome = await follower.run([id: cover])
            guard outcome.code == ExitCodes.success else {
                // Ctrl-C paused the cover: the videos, which would name it, did not start.
                if outcome.code == ExitCodes.interrupted {
                    for path in files { context.output.notStarted(file: URL(fileURLWithPath: path).lastPathComponent) }
                }
                return outcome.code
            }
            coverURL = outcome.results[id]?.imageURL
        }
        var names: [UploadQueue.Item.ID: String] = [:]
        // Videos an earlier run of the batch uploaded: not sent again, but followed with --wait.
        var finishedVideos: [(path: String, videoId: String)] = []
        for path in files {
            let url = URL(fileURLWithPath: path)
            if let fields = await Self.finished(path, context: context) {
                context.output.skipped(file: url.lastPathComponent, fields: fields)
                if let videoId = fields["VideoId"] { finishedVideos.append((path, videoId)) }
                continue
            }
            let kind = MediaKind(fileURL: url)
            if kind == .video { Self.warnIfNotMedia(url) }
            var info = MediaInfo(
                title: title ?? Self.defaultTitle(kind == .image ? url.lastPathComponent : url.deletingPathExtension().lastPathComponent),
                tags: tags, desc: desc, cateId: cateId)
            if kind == .video { info.coverURL = coverURL }
            names[await queue.addFile(url, info: info, kind: kind)] = path
        }
        let outcome = await follower.run(names)
        guard outcome.code == ExitCodes.success, wait else { return outcome.code }
        let media = context.connection.media(context.configuration)
        var worst = ExitCodes.success
        let videos = names.compactMap { id, path in outcome.results[id]?.videoId.map { (path: path, videoId: $0) } }
        for (path, videoId) in (videos + finishedVideos).sorted(by: { $0.path < $1.path }) {
            let code = try await follow(videoId, media: media, context: context, file: URL(fileURLWithPath: path).lastPathComponent)
            if code != ExitCodes.success { worst = max(worst, code) }
        }
        return worst
    }

    /// The queue's configuration from the command's options.
    func queueConfiguration(_ context: UploadContext) -> UploadQueue.Configuration {
        var configuration = UploadQueue.Configuration()
        configuration.objectStorage = context.configuration
        configuration.maxRetryCount = maxRetries
        configuration.recordDirectoryPath = context.records
        configuration.region = context.connection.region
        configuration.partConcurrency = parallel
        configuration.maxConcurrentUploads = jobs
        configuration.checksumAlgorithm = checksum.lowercased() == "none" ? nil : ChecksumAlgorithm(name: checksum)
        if let partSize, let size = ByteSize.parse(partSize) {
            configuration.uploadPartSize = size
        } else {
            configuration.partSizing = .adaptive
        }
        if transcode == "NoTranscode" {
            configuration.transcode = false
        } else {
            configuration.templateGroupId = transcode
        }
        // Recorded before the queue forgets the upload and before it is told: a run killed at any instant leaves
        // either this record or the queue's journal entry, by which a rerun finds the file done.
        // Unrecorded (said on standard error), the queue keeps its own record, by which a rerun finds the file.
        configuration.fileStored = { item, result in
            let fields = QueueFollower.fields(item.kind, videoId: result.videoId, imageURL: result.imageURL)
            guard context.recordFinished(item.fileURL.path, fields) else {
                throw FerryError(.invalidArgument, "The batch record could not be written.")
            }
        }
        return configuration
    }

    /// Follows a video's processing until it ends, a progress line showing its status (and the transcode's percent),
    /// then prints its renditions. Ctrl-C stops following (exit 75); the service goes on processing. Any Ctrl-C of the
    /// run counts: one as the uploads ended, or while an earlier video was followed, stops it before it begins.
    func follow(_ videoId: String, media: MediaServiceClient, context: UploadContext, file: String) async throws -> Int32 {
        var last = ""
        while true {
            if context.interrupts.count > 0 {
                context.output.message("Stopped following \(file); the service goes on processing it (ferry videos info \(videoId)).", file: file)
                return ExitCodes.interrupted
            }
            let info = try await report { try await media.getVideoInfo(videoId: videoId) }
            let text = VideosCommand.statusText(info)
            if text != last {
                context.output.processing(info, file: file, text: text)
                last = text
            }
            switch info.status {
            case "Normal":
                let play = try await report { try await media.getPlayInfo(videoId: videoId) }
                context.output.renditions(play, file: file)
                return ExitCodes.success
            case "TranscodeFail", "UploadFail", "Deleted":
                let reason = info.errorMessage ?? info.statusMessage ?? "no reason given"
                if Self.serviceGaveUp(info) {
                    let again = "the service failed, not the file: the same command sends it again"
                    context.output.failure("ferry: \(file): \(info.status): \(reason) (\(again))", file: file)
                    return ExitCodes.interrupted
                }
                context.output.failure("ferry: \(file): \(info.status): \(reason)", file: file)
                return ExitCodes.failed
            default:
                if info.status == "UploadSucc", let reason = info.statusMessage, reason.contains("not installed") || reason.contains("turned off") {
                    context.output.failure("ferry: \(file): \(reason)", file: file)
                    return ExitCodes.failed
                }
            }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    static func contentType(_ ext: String) -> String? { MediaKind.contentType(forExtension: ext) }

    /// Warns on standard error when a file about to be sent as a video shows, by its first bytes, a format that is
    /// neither video nor audio (text, an image of a kind not taken as an image, a PDF, an archive): processing will
    /// refuse it, and whoever sent it most likely meant a plain object. Bytes of no known format are not warned of
    /// (a raw stream ffmpeg may read). It is sent all the same.
    static func warnIfNotMedia(_ file: URL) {
        guard let handle = try? FileHandle(forReadingFrom: file) else { return }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: ContentSniffer.headLength)) ?? Data())
        guard !head.isEmpty else { return }
        let type = ContentSniffer.type(of: head, declared: nil)
        let media = ["video/", "audio/", "application/vnd.rn-realmedia"].contains { type.hasPrefix($0) }
        guard !media, type != "application/octet-stream" else { return }
        complain(
            "ferry: \(file.lastPathComponent) does not look like a video (its first bytes are \(type)); it is sent as "
                + "one, and processing will likely refuse it. To store it as a plain object, name a bucket: "
                + "--bucket NAME.")
    }

    /// A title made from a file name: at most the 128 bytes a title holds, cut at a character.
    static func defaultTitle(_ name: String) -> String {
        var title = ""
        for character in name {
            guard title.utf8.count + String(character).utf8.count <= 128 else { break }
            title.append(character)
        }
        return title
    }

    /// Runs one upload; Ctrl-C pauses (exit 75), a second Ctrl-C before the pause has ended cancels. The caller tells
    /// the result.
    func run(_ request: ResumableUploadRequest, client: ObjectStorageClient, context: UploadContext) async throws -> (Int32, UploadResult?) {
        let upload: ResumableUploadTask
        do {
            if noResume { try await client.discardCheckpoint(of: request) }
            upload = try await client.upload(request)
        } catch {
            context.output.failure(Self.failureText(request.fileURL.path, error), file: request.fileURL.lastPathComponent, error: error)
            return (ExitCodes.of(error), nil)
        }
        let interrupts = context.interrupts
        let watcher = Task {
            // Every Ctrl-C of the run counts, also one while the upload was being begun.
            var seen = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(50))
                let count = interrupts.count
                if count > seen {
                    seen = count
                    if count == 1 { await upload.pause() } else { await upload.cancel() }
                }
            }
        }
        defer { watcher.cancel() }
        let name = request.fileURL.lastPathComponent
        // Watched from its first request (a multipart upload's creation comes before its `started` event), so a service
        // that holds that answer is said to be waited for too.
        context.output.silence.heard(name)
        for await event in upload.events {
            if case .paused = event, interrupts.count > 0 {
                context.output.paused(file: name)
                return (ExitCodes.interrupted, nil)
            }
            context.output.event(event, file: name)
            // The engine waits for fresher credentials, which the command has no way to get: the run ends, resumably
            // with new ones.
            if case .credentialsExpired = event {
                await upload.pause()
                context.output.failure(
                    "ferry: \(request.fileURL.path): the credentials expired; the checkpoint is kept: run the same command again with fresh credentials to resume.",
                    file: name, code: "\(FerryError.Code.credentialsExpired)")
                return (ExitCodes.failed, nil)
            }
        }
        do {
            return (ExitCodes.success, try await upload.result)
        } catch let error as FerryError {
            // Cancelled (a second Ctrl-C): aborted, nothing to resume.
            if error.code == .cancelled { return (ExitCodes.failed, nil) }
            let code = ExitCodes.of(error)
            if error.code == .uploadInProgress {
                context.output.failure(Self.failureText(request.fileURL.path, error), file: name, error: error)
                return (code, nil)
            }
            context.output.failure("ferry: \(request.fileURL.path): \(ExitCodes.sentence(error))\(ExitCodes.advice(code, error))", file: name, error: error)
            return (code, nil)
        }
    }

    /// Why a file system call failed, as the system says it ("Not a directory", "Permission denied"): Foundation's own
    /// text on Linux is often no more than its error number.
    static func systemReason(_ error: any Error) -> String {
        let error = error as NSError
        // On Linux the underlying error is a Swift error, which bridges only from `any Error`.
        let underlying = (error.userInfo[NSUnderlyingErrorKey] as? any Error).map { $0 as NSError }
        let posix = [error, underlying].compactMap { $0 }.first { $0.domain == NSPOSIXErrorDomain }
        return posix.map { String(cString: strerror(Int32($0.code))) } ?? error.localizedDescription
    }

    /// The line for an upload of `path` that failed with `error`: for another run sending the same upload, that run
    /// and its checkpoint (which this run neither kept nor touched), else the file and the error.
    static func failureText(_ path: String, _ error: any Error) -> String {
        if let error = error as? FerryError, error.code == .uploadInProgress {
            // "another upload of FILE is running (checkpoint …)"
            return "ferry: " + error.message.prefix(1).lowercased() + error.message.dropFirst()
                + "; nothing was sent. Run the same command again once it has finished."
        }
        return "ferry: \(path): \(error)"
    }
}

/// Sizes such as `8MiB`, `5MB`, `1048576`: at least one byte, at most what 64 bits hold (nil otherwise, never a trap).
enum ByteSize {
    static func parse(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [
            ("KIB", 1024), ("MIB", 1 << 20), ("GIB", 1 << 30), ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000),
            ("K", 1024), ("M", 1 << 20), ("G", 1 << 30), ("B", 1),
        ]
        let upper = text.uppercased().trimmingCharacters(in: .whitespaces)
        for (suffix, factor) in units where upper.hasSuffix(suffix) {
            guard let value = Double(upper.dropLast(suffix.count)), value.isFinite, value > 0 else { return nil }
            let bytes = (value * Double(factor)).rounded(.down)
            // Double(Int64.max) rounds up to 2^63, which Int64 cannot hold: only sizes below it convert.
            guard bytes >= 1, bytes < Double(Int64.max) else { return nil }
            return Int64(bytes)
        }
        guard let value = Int64(upper), value > 0 else { return nil }
        return value
    }
}

/// Counts SIGINTs.
final class SignalCounter: @unchecked Sendable {
    // `value` is only touched while holding `lock`; `source` is set once before the counter is shared.
    private let lock = NSLock()
    private var value = 0
    private var source: (any DispatchSourceSignal)?
    var count: Int { lock.withLock { value } }

    /// The counter ``install()`` made last: Ctrl-C goes to it, not to the default handler.
    static var current: SignalCounter? { installed.withLock { $0 } }
    private static let installed = LockedValue<SignalCounter?>(nil)

    static func install() -> SignalCounter {
        let counter = SignalCounter()
        installed.withLock { $0 = counter }
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { counter.lock.withLock { counter.value += 1 } }
        source.resume()
        counter.source = source
        return counter
    }
}
