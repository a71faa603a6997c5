import CFerryProcess
import FerryStorage
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs a media tool (ffmpeg, ffprobe) as a child process: arguments as an array (never through a shell), at a lower
/// CPU priority, in a process group of its own, killed when the calling task is cancelled or its time runs out, and
/// (on Linux) killed by the kernel when the server dies.
///
/// Output goes to files the caller names, so nothing has to drain pipes: a tool's progress (`-progress FILE`) is
/// read from its file while it runs, and the end of its standard error says why it failed.
struct ChildProcess: Sendable {
    /// How a run ended.
    struct Outcome: Sendable, Equatable {
        /// The exit status, when it exited.
        var exitCode: Int32?
        /// The signal that ended it, when one did.
        var signal: Int32?
        /// Whether it was stopped because its time ran out.
        var timedOut: Bool
        /// Whether it fell below its CPU floor and was moved from SCHED_IDLE to normal scheduling.
        var promoted = false

        /// Whether it exited with status 0.
        var succeeded: Bool { exitCode == 0 && !timedOut }
    }

    /// Starting the tool failed (not found, not executable, no resources).
    struct SpawnError: Error, CustomStringConvertible {
        var executable: String
        var code: Int32
        var description: String { "\((executable as NSString).lastPathComponent) could not be started: \(String(cString: strerror(code)))" }
    }

    /// Absolute path of the executable.
    var executable: String
    /// Arguments after the executable's name.
    var arguments: [String]
    /// How much lower than the server's the tool's CPU priority is (0–19). Default 10.
    var niceness: Int32 = 10
    /// Whether the tool runs only on CPU time nothing else wants (Linux's SCHED_IDLE policy). Default false.
    var idleScheduling = false
    /// The least CPU an idle-scheduled tool is let fall to (see ``CPUFloor``); nil for none. Default: 10% of one core
    /// over 10 s.
    var cpuFloor: CPUFloor? = CPUFloor()
    /// File that receives standard output; nil discards it.
    var standardOutput: String?
    /// File that receives standard error; nil discards it.
    var standardError: String?
    /// Longest run; nil for no limit.
    var timeLimit: Duration?
    /// How often the run is checked (ended, cancelled, out of time) and `poll` is called. Default 100 ms.
    var pollInterval: Duration = .milliseconds(100)
    /// The disk the tool writes to and the bytes it must leave free there: it is not started, or is stopped, when less
    /// is free (``FerryDomainError/outOfSpace``), so its outputs never take the room the catalog's commits and the
    /// deletes that free space need. Nil: no check.
    var keepFree: (path: String, bytes: Int64)?

    /// The floor under an idle-scheduled tool: SCHED_IDLE gives it only the CPU time nothing else wants, which on a
    /// machine that stays busy is next to none, so a job could wait for ever. When the tool got less than `share` of
    /// one core over a `window`, its threads move to normal scheduling at its niceness for the rest of the run: from
    /// then on it competes as a nice process (at nice 10, a tenth of the weight of each busy request thread), slowed
    /// but never stopped.
    struct CPUFloor: Sendable, Equatable {
        /// Share of one core (0–1). Default 0.1.
        var share: Double = 0.1
        /// How long the share is measured over. Default 10 s.
        var window: Duration = .seconds(10)
    }

    /// Runs the tool to its end. `poll` is called between checks (to read progress). Throws `CancellationError`
    /// when the task is cancelled — the tool is killed (its whole process group) and reaped first —, `outOfSpace`
    /// when less than ``keepFree`` is free (killed likewise), and ``SpawnError`` when it cannot start.
    func run(poll: @Sendable () async -> Void = {}) async throws -> Outcome {
        if isShortOfSpace { throw FerryDomainError.outOfSpace }
        let pid = try spawn()
        let started = ContinuousClock.now
        var status: Int32 = 0
        var timedOut = false
        var promoted = false
        var windowStart = (time: ContinuousClock.now, cpu: Self.cpuSeconds(pid))
        while true {
            let state = ferry_try_wait(pid, &status)
            if state != 0 { break }
            if idleScheduling, !promoted, let floor = cpuFloor, ContinuousClock.now - windowStart.time >= floor.window {
                let now = (time: ContinuousClock.now, cpu: Self.cpuSeconds(pid))
                if let before = windowStart.cpu, let after = now.cpu,
                    (after - before) / (now.time - windowStart.time).timeInterval < floor.share
                {
                    promoted = Self.promote(pid, niceness: niceness)
                }
                windowStart = now
            }
            if Task.isCancelled {
                _ = stop(pid)
                throw CancellationError()
            }
            if isShortOfSpace {
                _ = stop(pid)
                throw FerryDomainError.outOfSpace
            }
            if let timeLimit, ContinuousClock.now - started > timeLimit {
                timedOut = true
                status = stop(pid)
                break
            }
            await poll()
            try? await Task.sleep(for: pollInterval)
        }
        await poll()
        let code = ferry_exit_code(status)
        let signal = ferry_term_signal(status)
        return Outcome(
            exitCode: code >= 0 ? code : nil, signal: signal != 0 ? signal : nil, timedOut: timedOut, promoted: promoted)
    }

    /// Whether less than ``keepFree`` is free.
    private var isShortOfSpace: Bool {
        guard let keepFree, keepFree.bytes > 0, let disk = DiskSpace.of(keepFree.path) else { return false }
        return disk.free < keepFree.bytes
    }

    /// The CPU time (user and system, every thread) a process has used, from `/proc/<pid>/stat`; nil where unknown.
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        #if os(Linux)
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After the name: state(0) … utime(11) stime(12), in clock ticks.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ticks > 0 ? (user + system) / ticks : nil
        #else
        return nil
        #endif
    }

    /// Moves every thread of `pid` from SCHED_IDLE to normal scheduling at `niceness`; whether any moved.
    static func promote(_ pid: pid_t, niceness: Int32) -> Bool {
        #if os(Linux)
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return false }
        var moved = false
        for thread in threads.compactMap({ pid_t($0) }) {
            var none = sched_param()
            if sched_setscheduler(thread, SCHED_OTHER, &none) == 0 {
                moved = true
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(thread), niceness)
            }
        }
        return moved
        #else
        return false
        #endif
    }

    /// Kills the process group and reaps the child; returns its wait status.
    private func stop(_ pid: pid_t) -> Int32 {
        _ = ferry_kill_group(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    private func spawn() throws -> pid_t {
        func openOutput(_ path: String?) throws -> Int32 {
            guard let path else { return -1 }
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            if fd < 0 { throw SpawnError(executable: executable, code: errno) }
            return fd
        }
        let out = try openOutput(standardOutput)
        defer { if out >= 0 { close(out) } }
        let err = try openOutput(standardError)
        defer { if err >= 0 { close(err) } }
        // The tool sees a minimal environment: nothing of the server's (keys, tokens) reaches it.
        let environment = ["PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"]
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = argv.withUnsafeBufferPointer { args in
            envp.withUnsafeBufferPointer { env in
                ferry_spawn(executable, args.baseAddress, env.baseAddress, -1, out, err, niceness, idleScheduling ? 1 : 0, &pid)
            }
        }
        if result != 0 { throw SpawnError(executable: executable, code: result) }
        return pid
    }

    /// The last `limit` bytes of a file, as text (for a tool's standard error).
    static func tail(of path: String, limit: Int = 4096) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        let start = size > UInt64(limit) ? size - UInt64(limit) : 0
        try? handle.seek(toOffset: start)
        let data = (try? handle.readToEnd()) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
