import Foundation

/// Runs the built `ferry` executable (next to the test bundle in the build directory).
public enum FerryExecutable {
    /// Path of the built `ferry` binary.
    public static var path: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("ferry").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/ferry").path
    }

    /// A `ferry serve` child process on a free loopback port.
    public final class Server: @unchecked Sendable {
        // Only mutated in init and terminate(), which tests call from one task.
        public let process: Process
        /// `http://127.0.0.1:PORT`; empty for a worker node, which listens on no port.
        public let endpoint: String
        /// The port; 0 for a worker node.
        public let port: Int

        /// Starts `ferry serve --port 0` on `dataDirectory` and waits, off the cooperative pool, until it listens.
        ///
        /// - Parameters:
        ///   - logFile: where its standard error (the log) goes; nowhere when nil.
        ///   - openFiles: the open-file limit (soft and hard) it runs under; the test's when nil.
        public static func start(
            dataDirectory: String, arguments: [String] = [], environment: [String: String], logFile: String? = nil,
            openFiles: Int? = nil
        ) async throws -> Server {
            try await runBlocking {
                try Server(
                    dataDirectory: dataDirectory, arguments: arguments, environment: environment, logFile: logFile,
                    openFiles: openFiles)
            }
        }

        /// Starts `ferry serve --role worker` on `dataDirectory` and waits, off the cooperative pool, until it says it
        /// runs (it listens on no port).
        public static func startWorker(
            dataDirectory: String, arguments: [String] = [], environment: [String: String], logFile: String? = nil
        ) async throws -> Server {
            try await runBlocking {
                try Server(
                    dataDirectory: dataDirectory, arguments: ["--role", "worker"] + arguments, environment: environment,
                    logFile: logFile, worker: true)
            }
        }

        /// Starts `ferry serve --port 0` on `dataDirectory` and waits until it prints its address (a worker: until it
        /// says it runs); blocks the thread.
        init(
            dataDirectory: String, arguments: [String] = [], environment: [String: String], logFile: String? = nil,
            worker: Bool = false, openFiles: Int? = nil
        ) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
            process.arguments = ["serve", "--data-dir", dataDirectory, "--port", "0"] + arguments
            if let openFiles {
                // The shell sets the limit and becomes the server (same process).
                process.arguments = ["-c", "ulimit -n \(openFiles) && exec \"$0\" \"$@\"", FerryExecutable.path]
                    + (process.arguments ?? [])
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
            }
            var env = ProcessInfo.processInfo.environment
            // Media tools at nice 10 but not SCHED_IDLE (as TestServer's): a SCHED_IDLE ffmpeg gets almost no CPU while
            // other suites keep the cores busy. A test may still pass "1".
            env["FERRY_MEDIA_IDLE_SCHEDULING"] = "0"
            env.merge(environment) { $1 }
            process.environment = env
            let out = Pipe()
            process.standardOutput = out
            if let logFile {
                _ = FileManager.default.createFile(atPath: logFile, contents: nil)
                process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
            } else {
                process.standardError = FileHandle.nullDevice
            }
            try process.run()
            var buffer = ""
            var port: Int?
            let handle = out.fileHandleForReading
            while port == nil {
                let data = handle.availableData
                if data.isEmpty { break }
                buffer += String(decoding: data, as: UTF8.self)
                if worker, buffer.contains("ferry serve worker running") {
                    port = 0
                } else if let range = buffer.range(of: "listening on http://127.0.0.1:") {
                    let digits = buffer[range.upperBound...].prefix { $0.isNumber }
                    if buffer[range.upperBound...].dropFirst(digits.count).first != nil { port = Int(digits) }
                }
            }
            guard let port else {
                process.terminate()
                throw ServerStartError(output: buffer)
            }
            self.process = process
            self.port = port
            self.endpoint = worker ? "" : "http://127.0.0.1:\(port)"
        }

        /// Sends a signal and waits for the process to exit.
        public func stop(signal: Int32 = SIGTERM) async {
            if process.isRunning { kill(process.processIdentifier, signal) }
            await process.exited()
        }

        /// Sends SIGTERM and waits up to `limit` for the server to exit on its own; kills it if it does not. Returns
        /// whether it exited gracefully in time.
        public func stopGracefully(within limit: Duration) async -> Bool {
            guard process.isRunning else { return true }
            kill(process.processIdentifier, SIGTERM)
            let deadline = ContinuousClock.now + limit
            while process.isRunning && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(100))
            }
            let graceful = !process.isRunning
            if !graceful { kill(process.processIdentifier, SIGKILL) }
            await process.exited()
            return graceful
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    /// `ferry serve` exited before it listened.
    public struct ServerStartError: Error, CustomStringConvertible {
        /// What it printed.
        public var output: String
        /// Description.
        public var description: String { "ferry serve did not start: \(output)" }
    }
}
