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
        var values: [Int64] = []
        func append(_ value: Int64) { lock.withLock { values.append(value) } }
    }

    @Test("reports from parts counted on many threads at once arrive in increasing order and end at the total")
    func concurrentPartsReportInOrder() async throws {
        let reports = Reports()
        let parts = 16
        let size: Int64 = 64 * 1024
        // A report that takes a moment (as a consumer's enqueue can) widens any window in which reports could cross.
        let meter = ProgressMeter(alreadySent: 0, expected: Int64(parts) * size) { progress in
            usleep(UInt32.random(in: 0...20))
            reports.append(progress.totalBytesSent)
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
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
        #expect(values.last == Int64(parts) * size)
        #expect(values.count == parts * 64)
    }

    @Test("with an interval, reports are spaced out, carry the bytes counted meanwhile, and the total always comes")
    func throttledReports() async throws {
        final class Deltas: @unchecked Sendable {
            // Every access holds `lock`.
            let lock = NSLock()
            var values: [(delta: Int64, total: Int64)] = []
        }
        let deltas = Deltas()
        let size: Int64 = 1024 * 1024
        let meter = ProgressMeter(alreadySent: 0, expected: 2 * size, interval: .seconds(3600)) { progress in
            deltas.lock.withLock { deltas.values.append((progress.bytesSent, progress.totalBytesSent)) }
        }
        for _ in 0..<256 { meter.add(1024, part: 1, size: size) }  // the first report, then nothing within the hour
        #expect(deltas.lock.withLock { deltas.values.count } == 1)
        meter.finish(part: 1, size: size)  // a stored part always reports what was counted since
        for _ in 0..<1023 { meter.add(1024, part: 2, size: size) }
        #expect(deltas.lock.withLock { deltas.values.count } == 2)
        meter.add(1024, part: 2, size: size)  // the last byte always reports
        let values = deltas.lock.withLock { deltas.values }
        #expect(values.map(\.total) == [1024, size, 2 * size])
        #expect(values.map(\.delta).reduce(0, +) == 2 * size)
        meter.finish(part: 2, size: size)  // nothing new: no report
        #expect(deltas.lock.withLock { deltas.values.count } == 3)
    }
}
