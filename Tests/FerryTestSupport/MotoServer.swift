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

    /// A port the kernel says is free now.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
