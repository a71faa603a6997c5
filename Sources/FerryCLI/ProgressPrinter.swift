import Ferry
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Prints upload events: a progress line redrawn in place on a terminal, plain lines otherwise, or JSON.
struct ProgressPrinter: Sendable {
    let json: Bool
    let terminal: Bool = isatty(STDOUT_FILENO) == 1

    func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    func emit(_ object: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            line(String(decoding: data, as: UTF8.self))
        }
    }

    func event(_ event: UploadEvent, file: String) {
        switch event {
        case .started(let uploadId):
            if json { emit(["event": "started", "file": file, "uploadId": uploadId ?? NSNull()]) }
        case .progress(let p):
            if json {
                emit([
                    "event": "progress", "file": file, "bytes": p.totalBytesSent, "total": p.totalBytesExpected,
                    "bytesPerSecond": Int(p.bytesPerSecond),
                ])
            } else {
                let text = Self.progressText(file: file, p)
                if terminal {
                    FileHandle.standardOutput.write(Data(("\r\u{1B}[2K" + text).utf8))
                } else if p.totalBytesSent == p.totalBytesExpected || Int(p.fraction * 100) != Int((Double(p.totalBytesSent - p.bytesSent) / Double(max(1, p.totalBytesExpected))) * 100) {
                    line(text)
                }
            }
        case .retrying(let attempt, let error, let delay):
            if json {
                emit(["event": "retrying", "file": file, "attempt": attempt, "error": "\(error.code)", "serverCode": error.serverCode ?? NSNull(), "delayMs": Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)])
            } else {
                newlineIfTerminal()
                line("\(file): retry \(attempt) after \(error.code)\(error.serverCode.map { " (\($0))" } ?? "")")
            }
        case .retryResumed:
            if json { emit(["event": "retryResumed", "file": file]) } else { newlineIfTerminal(); line("\(file): connection back, continuing") }
        case .credentialsExpired:
            if json { emit(["event": "credentialsExpired", "file": file]) } else { newlineIfTerminal(); line("\(file): credentials expired") }
        case .paused:
            if json { emit(["event": "paused", "file": file]) } else { newlineIfTerminal() }
        case .resumed:
            if json { emit(["event": "resumed", "file": file]) }
        case .completed:
            break
        case .failed(let error):
            if json { emit(["event": "failed", "file": file, "code": "\(error.code)", "message": error.message]) } else { newlineIfTerminal() }
        case .cancelled:
            if json { emit(["event": "cancelled", "file": file]) } else { newlineIfTerminal(); line("\(file): cancelled") }
        }
    }

    /// The media result of an upload: VideoId and PlayURL, or ImageId and ImageURL.
    func mediaResult(_ fields: [String: String], file: String) {
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

    /// A video's processing status changed (`ferry upload --wait`).
    func processing(_ video: MediaServiceClient.VideoInfo, file: String, text: String) {
        if json {
            var object: [String: Any] = ["event": "processing", "file": file, "VideoId": video.videoId, "Status": video.status]
            if let value = video.processingProgress { object["ProcessingProgress"] = value }
            if let value = video.statusMessage { object["StatusMessage"] = value }
            emit(object)
        } else if terminal {
            FileHandle.standardOutput.write(Data(("\r\u{1B}[2K\(file): " + text).utf8))
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
            for row in VideosCommand.renditionTable(play) { line(row) }
        }
    }

    func completed(_ result: UploadResult) {
        if json {
            emit([
                "event": "completed", "bucket": result.bucket, "key": result.key, "etag": result.etag, "size": result.size,
                "partsResumed": result.partsResumed, "partsSent": result.partsSent, "checksum": result.checksum ?? NSNull(),
            ])
        } else {
            newlineIfTerminal()
            line("Uploaded \(result.bucket)/\(result.key) (\(result.size) bytes, ETag \(result.etag))")
        }
    }

    private func newlineIfTerminal() {
        if terminal && !json { FileHandle.standardOutput.write(Data("\n".utf8)) }
    }

    static func progressText(file: String, _ p: UploadProgress) -> String {
        let mb = Double(p.totalBytesSent) / 1_000_000
        let total = Double(p.totalBytesExpected) / 1_000_000
        var text = String(format: "%@: %.1f / %.1f MB (%3.0f%%) %.1f MB/s", file, mb, total, p.fraction * 100, p.bytesPerSecond / 1_000_000)
        if let eta = p.estimatedTimeRemaining, p.totalBytesSent < p.totalBytesExpected {
            text += " ETA \(eta.components.seconds)s"
        }
        return text
    }
}
