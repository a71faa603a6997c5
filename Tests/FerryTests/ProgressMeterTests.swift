@testable import Ferry
import Foundation

#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite("Progress meter")
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
}
