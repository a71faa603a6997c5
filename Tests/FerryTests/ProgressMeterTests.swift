@testable import Ferry
import Foundation

#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite("Progress meter", .timeLimit(.minutes(10)))
struct ProgressMeterTests {
    /// Collects reports in arrival order.
    final class Reports: @unchecked Sendable {
        // Every access holds `lock`.
        let lock = NSLock()
        var values: [(sent: Int64, stored: Int64)] = []
        func append(_ value: (Int64, Int64)) { lock.withLock { values.append(value) } }
    }

    @Test("the rate covers about the last 10 s: a stall and a speed-up show within a window, where an average since the start hid them")
    func recentRate() {
        let t0 = ContinuousClock.now
        var rate = RecentRate(start: t0, count: 0)
        var (time, count, last) = (t0, Int64(0), 0.0)
        /// `seconds` at `bytesPerSecond`, a reading every 100 ms.
        func send(_ seconds: Int, at bytesPerSecond: Int64) {
            for _ in 0..<(seconds * 10) {
                time += .milliseconds(100)
                count += bytesPerSecond / 10
                last = rate.rate(at: time, count: count)
            }
        }
        send(20, at: 1_000_000)
        #expect(abs(last - 1_000_000) < 1)
        // 30 s without a byte, then 20 s at 100 kB/s: the rate is that, where the average since the start is 314 kB/s.
        time += .seconds(30)
        send(20, at: 100_000)
        #expect(abs(last - 100_000) < 1, "\(last)")
        send(20, at: 10_000_000)
        #expect(abs(last - 10_000_000) < 1, "\(last)")
        // A reading no later than the last, and one with nothing new, keep the rate finite.
        #expect(rate.rate(at: time, count: count).isFinite)
        var fresh = RecentRate(start: t0, count: 5)
        #expect(fresh.rate(at: t0, count: 5) == 0)
    }

    @Test("reports from parts counted on many threads at once arrive in increasing order and end at the total")
    func concurrentPartsReportInOrder() async throws {
        let reports = Reports()
        let parts = 16
        let size: Int64 = 64 * 1024
        // A report that takes a moment (as a consumer's enqueue can) widens any window in which reports could cross.
        let meter = ProgressMeter(alreadySent: 0, expected: Int64(parts) * size) { progress in
            usleep(UInt32.random(in: 0...20))
            reports.append((progress.totalBytesSent, progress.totalBytesStored))
        }
        await withTaskGroup(of: Void.self) { group in
            for part in 1...parts {
                group.addTask {
                    for _ in 0..<64 { meter.add(1024, part: part, size: size) }
                    meter.restart(part: part)  // a retry: counts again only past what was counted
                    for _ in 0..<64 { meter.add(1024, part: part, size: size) }
                    meter.finish(part: part, size: size)
                }
            }
        }
        let values = reports.lock.withLock { reports.values }
        // Each report says something new: more sent, or (once per part) more stored.
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.sent <= $1.sent && $0.stored <= $1.stored && $0 != $1 })
        #expect(values.last?.sent == Int64(parts) * size && values.last?.stored == Int64(parts) * size)
        #expect(values.count == parts * 64 + parts)
    }

    @Test("with an interval, reports are spaced out, carry the bytes counted meanwhile, and the total and every stored part always come")
    func throttledReports() async throws {
        let reports = Collected()
        let size: Int64 = 1024 * 1024
        let meter = ProgressMeter(alreadySent: 0, expected: 2 * size, interval: .seconds(3600)) { reports.append($0) }
        for _ in 0..<256 { meter.add(1024, part: 1, size: size) }  // the first report, then nothing within the hour
        #expect(reports.values.count == 1)
        meter.finish(part: 1, size: size)  // a stored part always reports what was counted since
        for _ in 0..<1023 { meter.add(1024, part: 2, size: size) }
        #expect(reports.values.count == 2)
        meter.add(1024, part: 2, size: size)  // the last byte always reports
        #expect(reports.values.count == 3)
        meter.finish(part: 2, size: size)  // nothing new sent, but the part is stored now
        meter.finish(part: 2, size: size)  // the same part again: nothing new at all, no report
        let values = reports.values
        #expect(values.map(\.totalBytesSent) == [1024, size, 2 * size, 2 * size])
        #expect(values.map(\.totalBytesStored) == [0, size, size, 2 * size])
        #expect(values.map(\.bytesSent).reduce(0, +) == 2 * size)
    }

    @Test("a part whose attempt fails keeps what it sent counted, but only a part the server answered for is stored")
    func failedAttemptIsSentNotStored() async throws {
        let reports = Collected()
        let size: Int64 = 1000
        let meter = ProgressMeter(alreadySent: 2 * size, expected: 5 * size) { reports.append($0) }
        meter.add(800, part: 3, size: size)
        meter.restart(part: 3)  // the link failed; the retry starts at zero
        meter.add(600, part: 3, size: size)
        meter.add(500, part: 4, size: size)
        #expect(reports.values.last?.totalBytesSent == 2 * size + 800 + 500)
        #expect(reports.values.allSatisfy { $0.totalBytesStored == 2 * size })  // the parts a resumed upload found
        meter.finish(part: 3, size: size)
        let last = try #require(reports.values.last)
        #expect(last.totalBytesSent == 3 * size + 500 && last.totalBytesStored == 3 * size)
        #expect(last.storedFraction == 0.6)
    }

    @Test("a stream counts each append from its offset; a failed append's bytes stay sent, and stored follows the offsets the server confirms")
    func streamAppends() async throws {
        let reports = Collected()
        let meter = ProgressMeter(alreadySent: 0, expected: 10_000) { reports.append($0) }
        meter.stored(upTo: 0)  // the first report: nothing yet
        meter.beginAppend(at: 0)
        for _ in 0..<6 { meter.appended(1000) }
        // The append failed; the server holds 4,000 bytes of it. The next one starts there.
        meter.stored(upTo: 4000)
        meter.beginAppend(at: 4000)
        meter.appended(1000)  // 5,000: less than was sent before, so nothing new
        for _ in 0..<5 { meter.appended(1000) }
        meter.stored(upTo: 10_000)
        let values = reports.values
        #expect(values.map(\.totalBytesSent) == [0, 1000, 2000, 3000, 4000, 5000, 6000, 6000, 7000, 8000, 9000, 10_000, 10_000])
        #expect(values.map(\.totalBytesStored) == [0, 0, 0, 0, 0, 0, 0, 4000, 4000, 4000, 4000, 4000, 10_000])
        #expect(values.map(\.bytesSent).reduce(0, +) == 10_000)
    }

    /// Reports in arrival order.
    final class Collected: @unchecked Sendable {
        // Every access holds `lock`.
        private let lock = NSLock()
        private var list: [UploadProgress] = []
        func append(_ value: UploadProgress) { lock.withLock { list.append(value) } }
        var values: [UploadProgress] { lock.withLock { list } }
    }
}
