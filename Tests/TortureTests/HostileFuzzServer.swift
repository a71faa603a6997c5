import FerryTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A `ferry serve` child process on a data directory of its own (kept across restarts), its log in a file per start.
/// It is dying when its process has exited or its log shows a crash (the backtrace is printed while the process still
/// holds its socket).
final class FuzzedServer {
    let directory: String
    private(set) var server: FerryExecutable.Server
    private(set) var starts = 1
    private(set) var logPath: String
    private var logOffset: UInt64 = 0
    private var crashSeen = false

    var port: Int { server.port }

    /// What marks a crash in the log: the runtime's fatal errors and the backtracer's report.
    static let crashMarkers = [
        "Fatal error", "Program crashed", "crashed:", "Segmentation fault", "Illegal instruction",
    ]

    /// The child's environment: the torture root key, a HOME of its own, media processing off and a backtrace of the
    /// crashed thread only, without prompting.
    static func environment(_ directory: String) -> [String: String] {
        var environment = Torture.environment
        environment["HOME"] = directory + "/home"
        environment["FERRY_MEDIA_WORKERS"] = "0"
        environment["SWIFT_BACKTRACE"] =
            "enable=yes,interactive=no,color=no,output-to=stderr,threads=crashed,registers=none,images=none,limit=32,top=4,"
            + "symbolicate=fast"
        return environment
    }

    static let arguments = ["--media-workers", "0", "--cors-origin", "https://app.example"]

    private init(directory: String, server: FerryExecutable.Server, logPath: String) {
        self.directory = directory
        self.server = server
        self.logPath = logPath
    }

    static func start(directory: String) async throws -> FuzzedServer {
        try FileManager.default.createDirectory(atPath: directory + "/home", withIntermediateDirectories: true)
        let logPath = directory + "/serve-1.log"
        let server = try await FerryExecutable.Server.start(
            dataDirectory: directory + "/data", arguments: arguments, environment: environment(directory),
            logFile: logPath)
        return FuzzedServer(directory: directory, server: server, logPath: logPath)
    }

    /// Starts the server again on the same data directory (its fixtures are still there), with a new log.
    func restart() async throws {
        await kill()
        starts += 1
        logPath = directory + "/serve-\(starts).log"
        logOffset = 0
        crashSeen = false
        server = try await FerryExecutable.Server.start(
            dataDirectory: directory + "/data", arguments: Self.arguments, environment: Self.environment(directory),
            logFile: logPath)
    }

    func stop() async {
        if isRunning {
            _ = await server.stopGracefully(within: .seconds(10))
        } else {
            await kill()
        }
    }

    var pid: pid_t { server.process.processIdentifier }

    /// Whether the process runs, judged by /proc (Foundation's `Process` was seen never to notice the exit of a
    /// process that crashed while its backtracer ran, and its `waitUntilExit` then spins for ever).
    var isRunning: Bool {
        if case .running = ProcessState(pid: pid) { return server.process.isRunning }
        return false
    }

    /// Kills the process and what it started (a crash's backtracer), and waits up to 10 s for them to be gone.
    func kill() async {
        let doomed = [pid] + ProcessState.children(of: pid)
        for process in doomed { _ = Glibc.kill(process, SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(10)
        while doomed.contains(where: { if case .running = ProcessState(pid: $0) { true } else { false } }),
            ContinuousClock.now < deadline
        {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether the process has exited or its log shows a crash; reads only what the log gained since the last call.
    func isDying() -> Bool {
        if crashSeen { return true }
        if !isRunning {
            crashSeen = true
            return true
        }
        guard let handle = FileHandle(forReadingAtPath: logPath) else { return false }
        defer { try? handle.close() }
        // Back a little so a marker split across two reads is still seen.
        let from = logOffset > 32 ? logOffset - 32 : 0
        try? handle.seek(toOffset: from)
        let data = handle.readDataToEndOfFile()
        logOffset = from + UInt64(data.count)
        let text = String(decoding: data, as: UTF8.self)
        if Self.crashMarkers.contains(where: text.contains) { crashSeen = true }
        return crashSeen
    }

    /// Waits up to `limit` for the process to show it is dying; returns as soon as it does.
    func waitForDeath(within limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while !isDying(), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The whole log of the current start.
    func log() -> String {
        FileManager.default.contents(atPath: logPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Waits for a crashing process to finish its backtrace and exit (killing it after 90 s), then reads its report.
    /// A crash of a class already reported (`known`, asked as soon as the log names the crash) is killed at once:
    /// symbolicating a backtrace of the debug binary takes seconds.
    func collectCrash(known: (CrashReport) -> Bool = { _ in false }) async -> CrashReport {
        let deadline = ContinuousClock.now + .seconds(90)
        var early = false
        // Its backtracer, which outlives it when it is killed.
        var helpers: Set<pid_t> = []
        while isRunning, ContinuousClock.now < deadline {
            helpers.formUnion(ProcessState.children(of: pid))
            let report = CrashReport(log: log())
            // A fatal error names its source line at once; a signal's class needs its first frame.
            if report.fatalError != nil || (report.crashLine != nil && !report.frames.isEmpty), known(report) {
                early = true
                break
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        let killed = isRunning
        // How it ended: from /proc while it is a zombie, else from Foundation once it has reaped it.
        var exit = "exited, status unknown"
        if case .exited(let status?) = ProcessState(pid: pid) {
            exit = ProcessState.describe(status)
        } else if !killed {
            for _ in 0..<50 where server.process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
            if !server.process.isRunning {
                exit =
                    server.process.terminationReason == .uncaughtSignal
                    ? ProcessState.describe(server.process.terminationStatus)
                    : "exited with status \(server.process.terminationStatus)"
            }
        }
        await kill()
        for helper in helpers where ProcessState.command(of: helper) == "swift-backtrace" {
            _ = Glibc.kill(helper, SIGKILL)
        }
        var report = CrashReport(log: log())
        report.status = early ? "killed once its class was known" : killed ? "killed after 90 s" : exit
        if report.fatalError == nil, report.crashLine == nil, !killed, !early {
            report.crashLine = exit + ", nothing printed"
        }
        return report
    }

    /// Nil while the process runs, its log shows no crash and `GET /_ferry/health` answers 200 `ok`; otherwise what
    /// is wrong.
    func liveness() async -> String? {
        if isDying() { return "the process is dying or gone (\(isRunning ? "running" : "exited"))" }
        let head = Array("GET /_ferry/health HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        let outcome = await RawHTTPExchange.send(
            port: port, .init(head: head, body: []), timeout: .seconds(10), abandon: { self.isDying() })
        guard case .answered(let response) = outcome else { return "GET /_ferry/health: \(outcome)" }
        guard response.status == 200, response.text == "ok\n" else {
            return "GET /_ferry/health answered \(response.status) \(response.text.prefix(100))"
        }
        return isDying() ? "the log shows a crash" : nil
    }
}

/// A process as /proc shows it: running, exited but not yet reaped (with its wait status), or gone.
enum ProcessState {
    case running
    case exited(Int32?)
    case gone

    init(pid: pid_t) {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat"),
            let text = String(data: data, encoding: .utf8), let close = text.lastIndex(of: ")")
        else {
            self = .gone
            return
        }
        // After the command: field 3 (the state) onwards; field 52 is the exit code.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard let state = fields.first else {
            self = .gone
            return
        }
        self = state == "Z" || state == "X" ? .exited(fields.count > 49 ? Int32(fields[49]) : nil) : .running
    }

    /// The processes `pid` started that still run (Linux: /proc/PID/task/PID/children).
    static func children(of pid: pid_t) -> [pid_t] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/task/\(pid)/children") else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: " ").compactMap { pid_t($0) }
    }

    /// The command name of a process (/proc/PID/comm), nil when it is gone.
    static func command(of pid: pid_t) -> String? {
        FileManager.default.contents(atPath: "/proc/\(pid)/comm").map {
            String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// A wait status in words.
    static func describe(_ status: Int32) -> String {
        let signal = status & 0x7F
        if signal != 0 { return "killed by signal \(signal) (\(String(cString: strsignal(signal))))" }
        return "exited with status \((status >> 8) & 0xFF)"
    }
}

/// What a crashed server printed: the fatal error line, the backtracer's line and its top frames.
struct CrashReport: Sendable {
    var fatalError: String?
    var crashLine: String?
    var frames: [String]
    var tail: String
    var status = ""

    init(log: String) {
        let lines = log.components(separatedBy: "\n")
        fatalError = lines.first { $0.contains("Fatal error") }
        crashLine = lines.first { $0.contains("Program crashed") || $0.contains("Segmentation fault") }
        var frames: [String] = []
        if let start = lines.firstIndex(where: { $0.contains("crashed:") }) {
            for line in lines[(start + 1)...] {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { if frames.isEmpty { continue } else { break } }
                if let first = trimmed.first, first.isNumber || trimmed.hasPrefix("...") { frames.append(trimmed) }
                if frames.count >= 16 { break }
            }
        }
        self.frames = frames
        tail = lines.suffix(25).joined(separator: "\n")
    }

    /// What crashed, without addresses: the runtime's fatal error (which names the source line), or for a signal the
    /// backtracer's line and first frame (a thread that overflows its stack prints nothing: `collectCrash` names it by
    /// how the process ended).
    var what: String {
        if let fatalError { return Self.clean(fatalError) }
        guard let crashLine else { return "no crash report in the log" }
        return Self.clean(crashLine) + (frames.first.map { " in " + Self.clean($0) } ?? "")
    }

    /// Without hexadecimal addresses and `+ offset`s.
    static func clean(_ line: String) -> String {
        line.replacing(/0x[0-9a-fA-F]+/, with: "")
            .replacing(#/ \+ \d+/#, with: "")
            .replacing(/^\s*\d+\s+(\[ra\]\s*)?/, with: "")
            .replacing(/\s+/, with: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    var description: String {
        var text =
            "fatal error: \(fatalError ?? "none printed")\nbacktracer: \(crashLine ?? "none printed")\nprocess: \(status)"
        if !frames.isEmpty { text += "\ntop frames:\n  " + frames.prefix(12).joined(separator: "\n  ") }
        return text
    }
}
