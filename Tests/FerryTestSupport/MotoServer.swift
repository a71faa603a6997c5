import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// moto's S3 server (`moto_server` from PyPI), a peer no one here wrote, on 127.0.0.1 and a free port.
public final class MotoServer: @unchecked Sendable {
    // `process` is only touched by init and stop(), which a test calls from one task.
    let process: Process
    /// `http://127.0.0.1:PORT`.
    public let endpoint: String

    /// Starts moto and waits until it accepts connections (off the cooperative pool).
    public static func start() async throws -> MotoServer {
        try await runBlocking { try MotoServer() }
    }

    /// Starts moto and waits until it accepts connections; blocks the calling thread.
    init() throws {
        let port = try Self.freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["moto_server", "-H", "127.0.0.1", "-p", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        endpoint = "http://127.0.0.1:\(port)"
        for _ in 0..<300 {
            if let fd = try? RawSocket.connect(port: port) {
                close(fd)
                return
            }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        process.terminate()
        throw MotoStartError()
    }

    /// Stops moto and waits for it to exit.
    public func stop() async {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        await process.exited()
    }

    deinit { if process.isRunning { process.terminate() } }

    /// moto did not start (is `moto[server]` installed?).
    public struct MotoStartError: Error, CustomStringConvertible {
        /// Description.
        public var description: String { "moto_server did not start within 30 s" }
    }

    /// A port nothing listens on now (``LoopbackPort/unused()``).
    public static func freePort() throws -> Int {
        try LoopbackPort.unused()
    }
}
