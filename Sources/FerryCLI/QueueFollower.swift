import Ferry
import Foundation

/// Prints an ``UploadQueue``'s events for `ferry upload` and turns Ctrl-C into a pause of the queue.
///
/// The queue's events and the interrupts are merged into one stream, read by ``run(_:)`` from one task at a time.
final class QueueFollower: @unchecked Sendable {
    // `iterator` and `rates` are touched only by the task running `run(_:)`, one call at a time; the pumps
    // only yield into the merged stream.
    private enum Input {
        case event(UploadQueueEvent)
        case interrupted
    }

    /// What a run produced.
    struct Outcome {
        /// The command's exit code so far.
        var code: Int32
        /// The results of the items that finished.
        var results: [UploadQueue.Item.ID: MediaUploadResult]
    }

    private let queue: UploadQueue
    private let output: ProgressPrinter
    private var iterator: AsyncStream<Input>.Iterator
    private let pumps: [Task<Void, Never>]
    private var rates: [UploadQueue.Item.ID: RecentRate] = [:]

    /// Follows `queue`, printing to `output`.
    init(queue: UploadQueue, output: ProgressPrinter, interrupts: SignalCounter) {
        self.queue = queue
        self.output = output
        let (merged, continuation) = AsyncStream<Input>.makeStream(bufferingPolicy: .unbounded)
        iterator = merged.makeAsyncIterator()
        pumps = [
            Task {
                for await event in queue.events { continuation.yield(.event(event)) }
            },
            Task {
                let seen = interrupts.count
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                    if interrupts.count > seen {
                        continuation.yield(.interrupted)
                        return
                    }
                }
            },
        ]
    }

    /// What a finished file made, as the command prints and records it: its VideoId, or its ImageURL.
    static func fields(_ kind: MediaKind, videoId: String?, imageURL: String?) -> [String: String] {
        if let videoId, kind == .video { return ["VideoId": videoId] }
        if let imageURL { return ["ImageURL": imageURL] }
        return [:]
    }

    deinit {
        for pump in pumps { pump.cancel() }
    }

    /// Starts the queue and prints the events of `names`' items until each has finished or failed; Ctrl-C pauses
    /// the queue (its checkpoints stay) and ends the run with exit code 75.
    func run(_ names: [UploadQueue.Item.ID: String]) async -> Outcome {
        await queue.start()
        var pending = Set(names.keys)
        var outcome = Outcome(code: ExitCodes.success, results: [:])
        func file(_ item: UploadQueue.Item) -> String { URL(fileURLWithPath: names[item.id] ?? item.fileURL.path).lastPathComponent }
        while !pending.isEmpty, let input = await iterator.next() {
            switch input {
            case .interrupted:
                await queue.pause()
                // A file with nothing on the service yet (waiting for its turn) did not start; one with its video or
                // image made (and maybe its upload begun) is paused; one the queue finished while its events were
                // still on their way here is done (and recorded as such by the queue's `fileStored`).
                for id in pending.sorted(by: { $0.description < $1.description }) {
                    let name = URL(fileURLWithPath: names[id] ?? "").lastPathComponent
                    let item = await queue.item(id)
                    if let item, item.state == .succeeded {
                        output.mediaResult(Self.fields(item.kind, videoId: item.videoId, imageURL: item.imageURL), file: name)
                        continue
                    }
                    let began = item.map { $0.object != nil || $0.uploadId != nil } ?? false
                    if began { output.paused(file: name) } else { output.notStarted(file: name) }
                }
                outcome.code = ExitCodes.interrupted
                return outcome
            case .event(let event):
                switch event {
                case .started(let item):
                    // Its turn came: its video or image is being made. Silence counts from here.
                    if pending.contains(item.id) { output.silence.heard(file(item)) }
                case .progress(let item, let sent, let total):
                    guard pending.contains(item.id) else { break }
                    let now = ContinuousClock.now
                    if rates[item.id] == nil {
                        rates[item.id] = RecentRate(start: now, count: sent)
                        // The checkpoint is written and the first bytes are on their way.
                        if output.json {
                            output.emit(["event": "started", "file": file(item), "uploadId": item.uploadId ?? NSNull()])
                        }
                    }
                    let rate = rates[item.id]?.rate(at: now, count: sent) ?? 0
                    output.progress(file: file(item), sent: sent, stored: item.storedSize, total: total, bytesPerSecond: rate)
                case .finished(let item, let result):
                    guard pending.remove(item.id) != nil else { break }
                    outcome.results[item.id] = result
                    let fields = Self.fields(item.kind, videoId: result.videoId, imageURL: result.imageURL)
                    output.completed(result.upload, file: file(item))
                    if !fields.isEmpty { output.mediaResult(fields, file: file(item)) }
                case .failed(let item, let code, let message):
                    guard pending.remove(item.id) != nil else { break }
                    // The network or the service gave out past the retries: the checkpoint stays and a rerun resumes,
                    // as for a plain object upload (exit 75); before an upload began there is nothing to resume.
                    let resumable = ExitCodes.resumableCodes.contains(code)
                    let advice =
                        !resumable ? ""
                        : item.uploadId == nil ? " Nothing was uploaded yet: run the same command again to start."
                        : " The checkpoint is kept: run the same command again to resume."
                    output.failure(
                        "ferry: \(names[item.id] ?? item.fileURL.path): \(message) (\(code))\(advice)", file: file(item), code: code)
                    if resumable {
                        outcome.code = ExitCodes.interrupted
                    } else if outcome.code == ExitCodes.success {
                        outcome.code = ExitCodes.failed
                    }
                case .tokenExpired(let item):
                    guard pending.remove(item.id) != nil else { break }
                    // The command's key does not expire; temporary ones cannot be renewed from here.
                    await queue.cancelFile(item.id)
                    output.failure(
                        "ferry: \(names[item.id] ?? item.fileURL.path): the credentials expired; the checkpoint is kept.", file: file(item),
                        code: "\(FerryError.Code.credentialsExpired)")
                    if outcome.code == ExitCodes.success { outcome.code = ExitCodes.failed }
                case .retry(let item, let attempt, let error):
                    output.retrying(file: file(item), attempt: attempt, error: error)
                case .retryResumed(let item):
                    output.retryResumed(file: file(item))
                }
            }
        }
        return outcome
    }
}
