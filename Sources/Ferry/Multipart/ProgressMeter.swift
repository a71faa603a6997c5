import FerryCore
import Foundation

/// Counts bytes sent across parts and retries so that progress never goes backwards and never passes the total.
///
/// Each part counts the most bytes any of its attempts sent; a retry starts its attempt count at zero and only adds
/// once it passes what was counted. Reports come at most once per `interval` while parts are being sent, and always
/// when a part is on the server and when the total is reached, each carrying the bytes counted since the last one; an
/// empty file gets one report when it is stored. `@unchecked Sendable`: every access to the mutable state holds `lock`, and `report`
/// (which must not block or call back into the meter) is called under it so reports stay in counting order.
final class ProgressMeter: @unchecked Sendable {
    private let lock = NSLock()
    private var attempt: [Int: Int64] = [:]
    private var counted: [Int: Int64] = [:]
    private var total: Int64
    private let expected: Int64
    private let start = ContinuousClock.now
    private let startBytes: Int64
    private let interval: Duration
    private var lastReport: ContinuousClock.Instant?
    /// Bytes counted but not reported yet.
    private var unreported: Int64 = 0
    private let report: @Sendable (UploadProgress) -> Void

    init(
        alreadySent: Int64, expected: Int64, interval: Duration = .zero,
        report: @escaping @Sendable (UploadProgress) -> Void
    ) {
        total = alreadySent
        startBytes = alreadySent
        self.expected = expected
        self.interval = interval
        self.report = report
    }

    var totalSent: Int64 { lock.withLock { total } }

    /// An attempt of `part` (of `size` bytes) sent `bytes` more.
    func add(_ bytes: Int, part: Int, size: Int64) {
        add(bytes, part: part, size: size, force: false)
    }

    private func add(_ bytes: Int, part: Int, size: Int64, force: Bool) {
        // Reported while holding the lock, so reports from parts sent on different threads arrive in the order their
        // totals were counted; `report` only enqueues an event.
        lock.withLock {
            let now = min(size, (attempt[part] ?? 0) + Int64(bytes))
            attempt[part] = now
            let before = counted[part] ?? 0
            if now > before {
                counted[part] = now
                total += now - before
                unreported += now - before
            }
            // A stored part with nothing new reports only when nothing has been reported yet (an empty file's one
            // report: 0 of 0 bytes).
            guard unreported > 0 || (force && lastReport == nil) else { return }
            let clock = ContinuousClock.now
            if !force, total < expected, let lastReport, clock - lastReport < interval { return }
            lastReport = clock
            report(snapshot(delta: unreported))
            unreported = 0
        }
    }

    /// A new attempt of `part` starts from zero.
    func restart(part: Int) {
        lock.withLock { attempt[part] = 0 }
    }

    /// `part` is on the server: count whatever of it was not counted yet, and report.
    func finish(part: Int, size: Int64) {
        add(Int(size), part: part, size: size, force: true)
    }

    private func snapshot(delta: Int64) -> UploadProgress {
        let elapsed = ContinuousClock.now - start
        let seconds = elapsed.timeInterval
        let rate = seconds > 0 ? Double(total - startBytes) / seconds : 0
        let remaining = expected - total
        let eta: Duration? = rate > 0 ? .milliseconds(Int64(Double(remaining) / rate * 1000)) : nil
        return UploadProgress(
            bytesSent: delta, totalBytesSent: total, totalBytesExpected: expected, bytesPerSecond: rate,
            estimatedTimeRemaining: eta)
    }
}
