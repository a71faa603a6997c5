import Foundation

/// Runs blocking work (waiting for a process, reading a pipe) on a thread of its own, so the cooperative thread pool
/// (two threads on a two-core machine) keeps serving in-process servers meanwhile.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}

extension Process {
    /// Waits for the process to exit without blocking the cooperative pool.
    ///
    /// A child that has exited but that Foundation has not reaped counts as exited after ten seconds as a zombie:
    /// seen once, a `ferry serve` that crashed while its backtracer hung stayed a zombie, and `waitUntilExit` spun on
    /// it for ever, holding up the whole test run.
    public func exited() async {
        var zombieSince: ContinuousClock.Instant?
        while isRunning {
            if Self.isZombie(processIdentifier) {
                let since = zombieSince ?? .now
                zombieSince = since
                if ContinuousClock.now - since > .seconds(10) { return }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Whether the process has exited and waits to be reaped (state `Z` in `/proc/<pid>/stat`).
    static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }
}

/// What a process printed, and how it ended.
public struct CapturedRun: Sendable {
    /// Exit status.
    public var status: Int32
    /// Standard output.
    public var output: String
    /// Standard error.
    public var errorOutput: String
}

extension Process {
    /// Runs the process (already given its executable, arguments and environment) to its end and captures both
    /// outputs, draining them while it runs so a chatty process cannot block on a full pipe. With `interruptWhen`,
    /// sends `signal` (SIGINT unless named) once a line of standard output satisfies it; with `signalAfter`, sends it
    /// after that many seconds whatever was printed. Blocks: call it through ``runBlocking(_:)`` from async code.
    public func runCapturing(
        interruptWhen: ((String) -> Bool)? = nil, signal: Int32 = SIGINT, signalAfter: TimeInterval? = nil
    ) throws -> CapturedRun {
        let out = Pipe()
        let err = Pipe()
        standardOutput = out
        standardError = err
        try run()
        nonisolated(unsafe) var errorData = Data()
        let errorReader = Thread { errorData = err.fileHandleForReading.readDataToEndOfFile() }
        errorReader.start()
        if let signalAfter {
            // Linux hands out pids in sequence, so within seconds this one still names the process or no process.
            let pid = processIdentifier
            Thread {
                Thread.sleep(forTimeInterval: signalAfter)
                kill(pid, signal)
            }.start()
        }
        var output = Data()
        var interrupted = false
        while true {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            output.append(chunk)
            if let interruptWhen, !interrupted,
                String(decoding: output, as: UTF8.self).split(separator: "\n").contains(where: { interruptWhen(String($0)) })
            {
                interrupted = true
                kill(processIdentifier, signal)
            }
        }
        waitUntilExit()
        while !errorReader.isFinished { usleep(1000) }
        return CapturedRun(
            status: terminationStatus, output: String(decoding: output, as: UTF8.self),
            errorOutput: String(decoding: errorData, as: UTF8.self))
    }
}
