import ArgumentParser
import Ferry
import FerryCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Exit codes of `ferry upload`.
enum ExitCodes {
    /// Every file uploaded.
    static let success: Int32 = 0
    /// An upload failed.
    static let failed: Int32 = 1
    /// Interrupted (Ctrl-C): the checkpoint stays; run the same command again to resume.
    static let interrupted: Int32 = 75
}

/// `ferry upload`: uploads files with the resumable engine and live progress.
struct UploadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload files, resumably, with live progress.",
        discussion: """
            Credentials come from FERRY_ACCESS_KEY_ID / FERRY_SECRET_ACCESS_KEY / FERRY_SESSION_TOKEN or the AWS_* \
            equivalents, and the endpoint from --endpoint or FERRY_ENDPOINT. Ctrl-C pauses: the checkpoint stays and \
            running the same command again resumes. A second Ctrl-C, or --cancel, aborts and cleans up.
            Exit codes: 0 success, 1 upload failed, 64 usage error, 75 interrupted (resumable).
            """)

    @Argument(help: "Files to upload.")
    var files: [String]

    @Option(help: "Service endpoint, e.g. http://127.0.0.1:9000 (or FERRY_ENDPOINT).")
    var endpoint: String?

    @Option(help: "Destination bucket.")
    var bucket: String

    @Option(help: "Destination key (one file only); default the file's name.")
    var key: String?

    @Option(name: .customLong("part-size"), help: "Part size, e.g. 5MiB, 8388608. Default 5MiB.")
    var partSize: String?

    @Option(help: "Parts sent at once. Default 4.")
    var parallel: Int = 4

    @Option(help: "Checksum: crc32c (default), crc32, crc64nvme, sha256, sha1, md5 or none.")
    var checksum: String = "crc32c"

    @Option(name: .customLong("record-dir"), help: "Checkpoint directory. Default ~/.ferry/checkpoints.")
    var recordDirectory: String?

    @Flag(name: .customLong("no-resume"), help: "Start afresh instead of resuming from a checkpoint.")
    var noResume = false

    @Flag(help: "Cancel an interrupted upload of these files: abort it on the server and delete its checkpoint.")
    var cancel = false

    @Option(name: .customLong("max-retries"), help: "Retries per request before giving up. Default 8.")
    var maxRetries: Int = 8

    @Option(help: "Region to sign for. Default us-east-1.")
    var region: String = "us-east-1"

    @Flag(help: "Print one JSON object per event instead of a progress line.")
    var json = false

    func validate() throws {
        if key != nil && files.count > 1 { throw ValidationError("--key works with one file only.") }
        if parallel < 1 { throw ValidationError("--parallel must be at least 1.") }
        if maxRetries < 0 { throw ValidationError("--max-retries must not be negative.") }
        if checksum.lowercased() != "none" && ChecksumAlgorithm(name: checksum) == nil {
            throw ValidationError("--checksum '\(checksum)' is not one of crc32c, crc32, crc64nvme, sha256, sha1, md5, none.")
        }
        if let partSize, ByteSize.parse(partSize) == nil {
            throw ValidationError("--part-size '\(partSize)' is not a size such as 8MiB or 5242880.")
        }
    }

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        guard let endpointString = endpoint ?? env["FERRY_ENDPOINT"], let endpointURL = URL(string: endpointString),
            endpointURL.host != nil
        else {
            throw ValidationError("Give --endpoint URL or set FERRY_ENDPOINT.")
        }
        guard let id = env["FERRY_ACCESS_KEY_ID"] ?? env["AWS_ACCESS_KEY_ID"],
            let secret = env["FERRY_SECRET_ACCESS_KEY"] ?? env["AWS_SECRET_ACCESS_KEY"]
        else {
            throw ValidationError("Set FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY (or the AWS_* equivalents).")
        }
        let credentials = Credentials(
            accessKeyId: id, secretAccessKey: secret, sessionToken: env["FERRY_SESSION_TOKEN"] ?? env["AWS_SESSION_TOKEN"])
        var configuration = ObjectStorageClient.Configuration()
        configuration.retryPolicy.maxRetryCount = maxRetries
        let client = ObjectStorageClient(
            endpoint: endpointURL, region: region, credentials: credentials, configuration: configuration)
        let output = ProgressPrinter(json: json)
        for path in files {
            guard FileManager.default.isReadableFile(atPath: path) else {
                output.error("ferry: cannot read \(path): no such file, or it is not readable.")
                throw ExitCode(ExitCodes.failed)
            }
            var request = ResumableUploadRequest(
                bucket: bucket, key: key ?? URL(fileURLWithPath: path).lastPathComponent,
                fileURL: URL(fileURLWithPath: path))
            request.concurrency = parallel
            request.checksumAlgorithm = checksum.lowercased() == "none" ? nil : ChecksumAlgorithm(name: checksum)
            if let partSize { request.partSize = ByteSize.parse(partSize)! }
            request.recordDirectory = URL(fileURLWithPath: recordDirectory ?? (NSHomeDirectory() + "/.ferry/checkpoints"))
            if noResume { request.onFileChange = .restart }
            let code = try await upload(request, client: client, output: output, cancelOnly: cancel, fresh: noResume)
            if code != ExitCodes.success { throw ExitCode(code) }
        }
    }

    /// Runs one upload; Ctrl-C pauses (exit 75), a second Ctrl-C cancels.
    func upload(
        _ request: ResumableUploadRequest, client: ObjectStorageClient, output: ProgressPrinter, cancelOnly: Bool,
        fresh: Bool
    ) async throws -> Int32 {
        if fresh || cancelOnly {
            // Abort any earlier upload of this file and forget its checkpoint.
            try await client.discardCheckpoint(of: request)
            if cancelOnly {
                output.line("Cancelled the upload of \(request.fileURL.path); nothing is left on the server.")
                return ExitCodes.success
            }
        }
        let upload = try await client.upload(request)
        let interrupts = SignalCounter.install()
        let watcher = Task {
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
        for await event in upload.events {
            output.event(event, file: request.fileURL.lastPathComponent)
            if case .paused = event {
                output.line(
                    "Paused. The checkpoint is kept; run the same command again to resume, or add --cancel to abort.")
                return ExitCodes.interrupted
            }
        }
        do {
            let result = try await upload.result
            output.completed(result)
            return ExitCodes.success
        } catch let error as FerryError {
            if error.code == .cancelled { return ExitCodes.interrupted }
            output.error("ferry: \(request.fileURL.path): \(error)")
            return ExitCodes.failed
        }
    }
}

/// Sizes such as `8MiB`, `5MB`, `1048576`.
enum ByteSize {
    static func parse(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [
            ("KIB", 1024), ("MIB", 1 << 20), ("GIB", 1 << 30), ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000),
            ("K", 1024), ("M", 1 << 20), ("G", 1 << 30), ("B", 1),
        ]
        let upper = text.uppercased().trimmingCharacters(in: .whitespaces)
        for (suffix, factor) in units where upper.hasSuffix(suffix) {
            guard let value = Double(upper.dropLast(suffix.count)), value > 0 else { return nil }
            return Int64(value * Double(factor))
        }
        guard let value = Int64(upper), value > 0 else { return nil }
        return value
    }
}

/// Counts SIGINTs.
final class SignalCounter: @unchecked Sendable {
    // `count` is read from one task and written by the signal source's queue; reads of a stale value only delay the
    // reaction by one poll.
    private let lock = NSLock()
    private var value = 0
    private var source: (any DispatchSourceSignal)?
    var count: Int { lock.withLock { value } }

    static func install() -> SignalCounter {
        let counter = SignalCounter()
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { counter.lock.withLock { counter.value += 1 } }
        source.resume()
        counter.source = source
        return counter
    }
}
