import FerryTestSupport
import Foundation
import Testing

@testable import FerryMedia
@testable import FerryServer

#if canImport(Glibc)
import Glibc
#endif

/// The floor under idle-scheduled media tools: on a machine whose every core is kept busy under normal scheduling, a
/// SCHED_IDLE tool gets next to no CPU; below its floor it moves to normal scheduling at its niceness and finishes.
@Suite("CPU floor of the media tools", .serialized, .timeLimit(.minutes(10)))
struct CPUFloorTests {
    /// Busy loops under normal scheduling, four per core, until the returned stop is called. They run at nice 19: any
    /// normal-scheduled load takes the cores from a SCHED_IDLE tool (these leave it about 2% of a core each), while
    /// the suites running beside this one lose little to them.
    static func saturate() throws -> @Sendable () -> Void {
        var hogs: [Process] = []
        for _ in 0..<(4 * ProcessInfo.processInfo.activeProcessorCount) {
            let hog = Process()
            hog.executableURL = URL(fileURLWithPath: "/usr/bin/nice")
            hog.arguments = ["-n", "19", "/bin/sh", "-c", "while :; do :; done"]
            try hog.run()
            hogs.append(hog)
        }
        // Only the returned closure touches them, once.
        let processes = hogs
        return {
            // SIGKILL: the test process may block SIGTERM, and its children inherit the mask.
            for hog in processes { kill(hog.processIdentifier, SIGKILL) }
            for hog in processes { hog.waitUntilExit() }
        }
    }

    @Test("an idle-scheduled tool starved by busy cores falls below its floor, moves to normal scheduling (its children too) and finishes")
    func toolFinishesUnderLoad() async throws {
        let output = NSTemporaryDirectory() + "ferry-floor-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let stop = try Self.saturate()
        defer { stop() }
        // About half a second of CPU for the shell, then its child reports the policy it was started with.
        var tool = ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; cat /proc/self/stat"])
        tool.idleScheduling = true
        tool.niceness = 10
        tool.cpuFloor = .init(share: 0.1, window: .seconds(2))
        tool.standardOutput = output
        tool.timeLimit = .seconds(300)
        let started = ContinuousClock.now
        let outcome = try await tool.run()
        let elapsed = ContinuousClock.now - started
        #expect(outcome.succeeded, "\(outcome)")
        #expect(outcome.promoted, "the tool was never moved off SCHED_IDLE")
        #expect(elapsed < .seconds(240), "took \(elapsed)")
        let stat = try String(contentsOfFile: output, encoding: .utf8)
        let fields = ChildProcessTests.statFields(stat)
        #expect(fields.count > 38 && fields[38] == "0", "the child's policy (0 is SCHED_OTHER): \(fields.count > 38 ? fields[38] : "?")")
        #expect(fields.count > 16 && fields[16] == "10", "the child's niceness")
    }

    @Test("a media job on a machine whose cores stay busy still reaches Normal: the pipeline's tools run under SCHED_IDLE with their floor")
    func jobFinishesUnderLoad() async throws {
        try await MediaHarness.with(configure: { configuration in
            configuration.mediaProcessing.idleScheduling = true
            configuration.mediaProcessing.cpuFloorWindow = .seconds(2)
            configuration.mediaProcessing.lease = .seconds(30)
        }) { harness in
            let source = try await harness.fixture(.noAudio, seconds: 1)
            let stop = try Self.saturate()
            defer { stop() }
            let started = ContinuousClock.now
            let videoId = try await harness.upload(source, transcode: nil)
            let info = try await harness.waitFor(videoId, ["Normal", "TranscodeFail"], timeout: .seconds(400))
            #expect(info.status == "Normal", "\(info.errorMessage ?? "")")
            #expect(ContinuousClock.now - started < .seconds(400))
        }
    }
}
