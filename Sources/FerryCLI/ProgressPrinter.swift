import Ferry
import FerryCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Prints upload events: a progress line redrawn in place on a terminal, plain lines otherwise, or JSON.
struct ProgressPrinter: Sendable {
    let json: Bool
    let terminal: Bool = isatty(STDOUT_FILENO) == 1
    let lastPercent = PercentLog()
    /// When each file in flight was last heard of, for ``noticeSilence(now:)``.
    let silence = SilenceWatch()
    /// Buckets this run said it created: files sent at once (`--jobs`) each find the bucket missing, and it is said
    /// once.
    let createdBuckets = LockedValue(Set<String>())

    func line(_ text: String) {
        say(text)
    }

    /// A stream upload that completed: with `--json` a `completed` event (for a video or image too, before its
    /// `media` event, as for parts), otherwise `message` as a line when there is one.
    func streamResult(file: String, size: Int64, etag: String?, message: String?) {
        silence.forget(file)
        if json {
            emit(["event": "completed", "file": file, "size": size, "etag": etag ?? NSNull()])
        } else if let message {
            newlineIfTerminal()
            line(message)
        }
    }

    /// A message for people: a line, or with `--json` a `message` event, so that every line of JSON output is JSON.
    func message(_ text: String, file: String) {
        if json { emit(["event": "message", "file": file, "message": text]) } else { line(text) }
    }

    /// A message on standard error, for what concerns no one file (or a file's failure: ``failure(_:file:error:)``).
    func error(_ text: String) {
        complain(text)
    }

    /// A file of the batch that failed: `text` on standard error, and with `--json` also a `failed` event naming the
    /// file, so that a program reading the events learns of every file's end. `code` is the error's ``FerryError/Code``
    /// when it has one.
    func failure(_ text: String, file: String, error: (any Error)? = nil) {
        failure(text, file: file, code: (error as? FerryError).map { "\($0.code)" })
    }

    /// A file of the batch that failed with `code` (the service's or ``FerryError/Code``'s name), as
    /// ``failure(_:file:error:)``.
    func failure(_ text: String, file: String, code: String?) {
        silence.forget(file)
        self.error(text)
        if json { emit(["event": "failed", "file": file, "message": text, "code": code ?? NSNull()]) }
    }

    func emit(_ object: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            sayJSON(String(decoding: data, as: UTF8.self))
        }
    }

    func event(_ event: UploadEvent, file: String) {
        switch event {
        case .started, .resumed, .credentialsExpired: silence.heard(file)
        case .completed, .failed, .cancelled, .paused: silence.forget(file)
        case .progress, .retrying, .retryResumed: break
        }
        switch event {
        case .started(let uploadId):
            if json { emit(["event": "started", "file": file, "uploadId": uploadId ?? NSNull()]) }
        case .progress(let p):
            progress(file: file, p)
        case .retrying(let attempt, let error, let delay):
            retrying(file: file, attempt: attempt, error: error, delay: delay)
        case .retryResumed:
            retryResumed(file: file)
        case .credentialsExpired:
            if json { emit(["event": "credentialsExpired", "file": file]) } else { newlineIfTerminal(); line("\(file): credentials expired") }
        case .paused:
            if json { emit(["event": "paused", "file": file]) } else { newlineIfTerminal() }
        case .resumed:
            if json { emit(["event": "resumed", "file": file]) }
        case .completed:
            break
        case .failed:
            // The command reports the failure itself (``failure(_:file:error:)``), with its advice.
            newlineIfTerminal()
        case .cancelled:
            if json { emit(["event": "cancelled", "file": file]) } else { newlineIfTerminal(); line("\(file): cancelled") }
        }
    }

    /// An upload's progress: bytes sent, and those the server confirmed storing.
    func progress(file: String, _ p: UploadProgress) {
        progress(
            file: file, sent: p.totalBytesSent, stored: p.totalBytesStored, total: p.totalBytesExpected,
            bytesPerSecond: p.bytesPerSecond, eta: p.estimatedTimeRemaining)
    }

    /// Bytes of a file sent so far, and those the server confirmed storing when known (shown while they lag): a line
    /// redrawn in place on a terminal, a line per percent otherwise, or JSON.
    func progress(
        file: String, sent: Int64, stored: Int64? = nil, total: Int64, bytesPerSecond: Double, eta: Duration? = nil
    ) {
        silence.heard(file)
        if json {
            var object: [String: Any] = [
                "event": "progress", "file": file, "bytes": sent, "total": total, "bytesPerSecond": Int(bytesPerSecond),
            ]
            if let stored { object["stored"] = stored }
            emit(object)
            return
        }
        let fraction = total > 0 ? Double(sent) / Double(total) : 1
        var text = String(
            format: "%@: %.1f / %.1f MB (%3.0f%%) %.1f MB/s", file, Double(sent) / 1_000_000, Double(total) / 1_000_000,
            fraction * 100, bytesPerSecond / 1_000_000)
        if let stored, stored < sent { text += String(format: ", %.1f MB stored", Double(stored) / 1_000_000) }
        let remaining = eta ?? (bytesPerSecond > 0 ? .seconds(Double(total - sent) / bytesPerSecond) : nil)
        if let remaining, sent < total { text += " ETA \(Int(remaining.timeInterval))s" }
        if terminal {
            write("\r\u{1B}[2K" + TerminalText.safe(text))
        } else {
            let percent = Int(fraction * 100)
            if sent == total || percent != lastPercent.exchange(percent, for: file) { line(text) }
        }
    }

    /// A request failed and is tried again.
    func retrying(file: String, attempt: Int, error: FerryError, delay: Duration? = nil) {
        // The wait before the next attempt is said here; silence counts from its end.
        silence.heard(file, quietFor: delay ?? .zero)
        if json {
            var object: [String: Any] = [
                "event": "retrying", "file": file, "attempt": attempt, "error": "\(error.code)",
                "serverCode": error.serverCode ?? NSNull(), "message": error.message,
            ]
            if let delay { object["delayMs"] = Int(delay.timeInterval * 1000) }
            emit(object)
        } else {
            newlineIfTerminal()
            // A wait of a second or more is said, so that a long one (a service's Retry-After) is not taken for a hang.
            let wait = delay.map(\.timeInterval).flatMap { $0 >= 1 ? " in \(Int($0.rounded())) s" : nil } ?? ""
            // Its cause in words (a timeout, a reset, a refusal): requests of one file fail one by one.
            let headline = TerminalText.headline(error.message)
            let cause = headline.isEmpty ? "" : ": " + headline.prefix(200)
            let code = error.serverCode.map { " (\($0))" } ?? ""
            line("\(file): retry \(attempt)\(wait) after \(error.code)\(code)\(cause)")
        }
    }

    /// Requests succeed again after retries.
    func retryResumed(file: String) {
        silence.heard(file)
        if json { emit(["event": "retryResumed", "file": file]) } else { newlineIfTerminal(); line("\(file): connection back, continuing") }
    }

    /// The media result of an upload: VideoId and PlayURL, or ImageId and ImageURL.
    func mediaResult(_ fields: [String: String], file: String) {
        silence.forget(file)
        if json {
            var object: [String: Any] = ["event": "media", "file": file]
            for (name, value) in fields { object[name] = value }
            emit(object)
        } else {
            for name in ["VideoId", "Status", "PlayURL", "ImageId", "ImageURL"] {
                if let value = fields[name] { line("\(name): \(value)") }
            }
        }
    }

    /// A file paused by Ctrl-C, its checkpoint kept: a line, or with `--json` a `paused` event. One text for every
    /// path (multipart, queue, stream).
    func paused(file: String) {
        silence.forget(file)
        if json {
            emit(["event": "paused", "file": file])
        } else {
            newlineIfTerminal()
            line("Paused \(file). The checkpoint is kept: run the same command again to resume, or add --cancel to abort.")
        }
    }

    /// A file of the batch that Ctrl-C stopped before it started: a line, or with `--json` a `message` event.
    func notStarted(file: String) {
        message("Not started: \(file). Run the same command again to upload it.", file: file)
    }

    /// A file of the batch that an earlier run of the same command finished (``BatchRecord``): not sent again.
    /// `fields` is what that upload made.
    func skipped(file: String, fields: [String: String]) {
        if json {
            var object: [String: Any] = ["event": "skipped", "file": file]
            for (name, value) in fields { object[name] = value }
            // A size is a number, as in every other event.
            if let size = fields["Size"].flatMap({ Int64($0) }) { object["Size"] = size }
            emit(object)
        } else {
            let made = ["VideoId", "ImageId", "ImageURL", "Bucket", "Key", "ETag"].compactMap { name in
                fields[name].map { "\(name) \($0)" }
            }
            line(
                "\(file): uploaded by an earlier run of this command (\(made.joined(separator: ", "))); not sent again."
                    + " Add --no-resume to send every file afresh.")
        }
    }

    /// A video's processing status changed (`ferry upload --wait`).
    func processing(_ video: MediaServiceClient.VideoInfo, file: String, text: String) {
        silence.forget(file)
        if json {
            var object: [String: Any] = ["event": "processing", "file": file, "VideoId": video.videoId, "Status": video.status]
            if let value = video.processingProgress { object["ProcessingProgress"] = value }
            if let value = video.playable { object["Playable"] = value }
            if let value = video.statusMessage { object["StatusMessage"] = value }
            emit(object)
        } else if terminal {
            write("\r\u{1B}[2K" + TerminalText.safe("\(file): " + text))
        } else {
            line("\(file): " + text)
        }
    }

    /// A processed video's renditions (`ferry upload --wait`).
    func renditions(_ play: MediaServiceClient.PlayInfo, file: String) {
        if json {
            emit([
                "event": "processed", "file": file, "VideoId": play.videoId, "Status": play.status,
                "PlayInfoList": play.streams.map(VideosCommand.object),
            ])
        } else {
            newlineIfTerminal()
            for row in VideosCommand.renditionTable(play.streams) { line(row) }
        }
    }

    /// An upload of `file` that completed: a line, or with `--json` a `completed` event.
    func completed(_ result: UploadResult, file: String) {
        silence.forget(file)
        if json {
            emit([
                "event": "completed", "file": file, "bucket": result.bucket, "key": result.key, "etag": result.etag, "size": result.size,
                "partsResumed": result.partsResumed, "partsSent": result.partsSent, "checksum": result.checksum ?? NSNull(),
            ])
        } else {
            newlineIfTerminal()
            line("Uploaded \(result.bucket)/\(result.key) (\(result.size) bytes, ETag \(result.etag))")
        }
    }

    /// Says, for each file in flight that nothing has been heard of for ``SilenceWatch/notice`` (nothing sent or
    /// answered: a service that holds its answer, a link that went silent without closing), that it is still waited
    /// for; again after each further minute. Without it a stalled request looks like a hang until its timeout.
    func noticeSilence(now: ContinuousClock.Instant = .now) {
        for (file, quiet) in silence.due(now: now) {
            let seconds = Int(quiet.timeInterval.rounded())
            if json {
                emit(["event": "stalled", "file": file, "seconds": seconds])
            } else {
                newlineIfTerminal()
                line(
                    "\(file): nothing sent or received for \(seconds) s; still waiting for the service"
                        + " (a request that stays stalled is given up and tried again)")
            }
        }
    }

    private func newlineIfTerminal() {
        if terminal && !json { write("\n") }
    }

}

/// The last whole percent printed per file (plain output prints a line when it changes).
final class PercentLog: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var percents: [String: Int] = [:]

    /// Records `percent` for `file`; returns the one recorded before (-1 when none).
    func exchange(_ percent: Int, for file: String) -> Int {
        lock.withLock {
            let previous = percents[file] ?? -1
            percents[file] = percent
            return previous
        }
    }
}

/// When each file in flight was last heard of (a progress, retry or start event), and when its silence was last said.
final class SilenceWatch: @unchecked Sendable {
    /// Silence long enough to be said: 30 s, then every further 60 s.
    static let notice: Duration = .seconds(30)
    static let repeatEvery: Duration = .seconds(60)

    private struct Entry {
        var since: ContinuousClock.Instant
        var nextNotice: Duration
    }

    // Every access holds `lock`.
    private let lock = NSLock()
    private var entries: [String: Entry] = [:]

    /// `file` was heard of now; with `quietFor`, a wait that was announced (a retry's delay) is not counted.
    func heard(_ file: String, quietFor: Duration = .zero, now: ContinuousClock.Instant = .now) {
        lock.withLock { entries[file] = Entry(since: now + quietFor, nextNotice: Self.notice) }
    }

    /// `file` is no longer in flight (done, failed, paused).
    func forget(_ file: String) {
        _ = lock.withLock { entries.removeValue(forKey: file) }
    }

    /// The files whose silence reached its next notice, with that notice's length (30 s, 90 s, …).
    func due(now: ContinuousClock.Instant) -> [(file: String, quiet: Duration)] {
        lock.withLock {
            var due: [(file: String, quiet: Duration)] = []
            for (file, entry) in entries where now - entry.since >= entry.nextNotice {
                due.append((file, entry.nextNotice))
                entries[file]?.nextNotice = entry.nextNotice + Self.repeatEvery
            }
            return due.sorted { $0.file < $1.file }
        }
    }
}
