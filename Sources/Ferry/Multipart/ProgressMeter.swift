import FerryCore
import Foundation

/// Counts bytes sent across parts and retries so that progress never goes backwards and never passes the total, and
/// apart from them the bytes the server has confirmed storing.
///
/// Each part counts the most bytes any of its attempts sent; a retry starts its attempt count at zero and only adds
/// once it passes what was counted. A part counts as stored once, when the server answered for it. A stream (tus, the
/// IETF draft) counts one append at a time from its offset instead, and stores up to the offsets the server confirms.
/// Reports come at most once per `interval` while bytes are being sent, and always when bytes are stored and when the
/// total is reached, each carrying the bytes counted since the last one; an empty file gets one report when it is
/// stored. `@unchecked Sendable`: every access to the mutable state holds `lock`, and `report` (which must not block
/// or call back into the meter) is called under it so reports stay in counting order.
final class ProgressMeter: @unchecked Sendable {
    private let lock = NSLock()
    private var attempt: [Int: Int64] = [:]
    private var counted: [Int: Int64] = [:]
    private var storedParts: Set<Int> = []
    private var total: Int64
    private var stored: Int64
    /// The offset the stream's current append started at, and the bytes it has handed over.
    private var append: (offset: Int64, sent: Int64) = (0, 0)
    private let expected: Int64
    /// The rate reports carry: over about the last 10 s.
    private var recent: RecentRate
    private let interval: Duration
    private var lastReport: ContinuousClock.Instant?
    /// What the last report said.
    private var reported: (total: Int64, stored: Int64)
    private let report: @Sendable (UploadProgress) -> Void

    init(
        alreadySent: Int64, expected: Int64, interval: Duration = .zero,
        report: @escaping @Sendable (UploadProgress) -> Void
    ) {
        total = alreadySent
        stored = alreadySent
        recent = RecentRate(start: .now, count: alreadySent)
        reported = (alreadySent, alreadySent)
        self.expected = expected
        self.interval = interval
        self.report = report
    }

    var totalSent: Int64 { lock.withLock { total } }

    /// Measures the rate afresh from now: an upload resumed after a pause is not shown slowed by the pause.
    func restartRate() {
        lock.withLock { recent = RecentRate(start: .now, count: total) }
    }

    /// An attempt of `part` (of `size` bytes) sent `bytes` more.
    func add(_ bytes: Int, part: Int, size: Int64) {
        lock.withLock {
            count(bytes, part: part, size: size)
            publish(force: false)
        }
    }

    /// A new attempt of `part` starts from zero.
    func restart(part: Int) {
        lock.withLock { attempt[part] = 0 }
    }

    /// `part` is on the server: count whatever of it was not counted yet, store it, and report.
    func finish(part: Int, size: Int64) {
        lock.withLock {
            count(Int(size), part: part, size: size)
            if storedParts.insert(part).inserted { stored = min(expected, stored + size) }
            publish(force: true)
        }
    }

    /// A stream's append starts at `offset`.
    func beginAppend(at offset: Int64) {
        lock.withLock { append = (offset, 0) }
    }

    /// The stream's current append handed `bytes` more to the network.
    func appended(_ bytes: Int) {
        lock.withLock {
            append.sent += Int64(bytes)
            total = max(total, min(expected, append.offset + append.sent))
            publish(force: false)
        }
    }

    /// The server holds the stream's bytes up to `offset`.
    func stored(upTo offset: Int64) {
        lock.withLock {
            stored = max(stored, min(expected, offset))
            total = max(total, stored)
            publish(force: true)
        }
    }

    /// Counts `part`'s attempt up to `bytes` more; holds `lock`.
    private func count(_ bytes: Int, part: Int, size: Int64) {
        let now = min(size, (attempt[part] ?? 0) + Int64(bytes))
        attempt[part] = now
        let before = counted[part] ?? 0
        if now > before {
            counted[part] = now
            total += now - before
        }
    }

    /// Reports what changed since the last report; holds `lock`. Reported while holding the lock, so reports from
    /// parts sent on different threads arrive in the order their totals were counted; `report` only enqueues an event.
    private func publish(force: Bool) {
        // Nothing new reports only when nothing has been reported yet (an empty file's one report: 0 of 0 bytes).
        guard total > reported.total || stored > reported.stored || (force && lastReport == nil) else { return }
        let clock = ContinuousClock.now
        if !force, total < expected, let lastReport, clock - lastReport < interval { return }
        lastReport = clock
        report(snapshot(delta: total - reported.total))
        reported = (total, stored)
    }

    private func snapshot(delta: Int64) -> UploadProgress {
        let rate = recent.rate(at: .now, count: total)
        let remaining = expected - total
        let eta: Duration? = rate > 0 ? .milliseconds(Int64(Double(remaining) / rate * 1000)) : nil
        return UploadProgress(
            bytesSent: delta, totalBytesSent: total, totalBytesStored: stored, totalBytesExpected: expected,
            bytesPerSecond: rate, estimatedTimeRemaining: eta)
    }
}
