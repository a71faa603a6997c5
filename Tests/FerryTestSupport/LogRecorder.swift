import Foundation
import Logging

/// Keeps what a logger logs, for tests that check what reaches a log (and what never does).
public final class LogRecorder: @unchecked Sendable {
    /// One logged message with its metadata, values as strings.
    public struct Record: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
    }

    // Every access to `stored` holds `lock`.
    private let lock = NSLock()
    private var stored: [Record] = []

    public init() {}

    /// What was logged so far.
    public var records: [Record] { lock.withLock { stored } }

    /// A logger that records everything at `level` and above here.
    public func logger(label: String = "ferry.test", level: Logger.Level = .debug) -> Logger {
        var logger = Logger(label: label, factory: { _ in Handler(recorder: self) })
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ record: Record) { lock.withLock { stored.append(record) } }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            for (key, value) in event.metadata ?? [:] { merged[key] = value }
            recorder.append(
                Record(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
