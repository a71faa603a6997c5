import FerryTestSupport
import Foundation

/// Runs a peer tool (awscli, python) and captures its output.
enum PeerProcess {
    typealias Result = CapturedRun

    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        return try process.runCapturing()
    }

    /// The directory holding the test scripts.
    static var scripts: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path
    }
}
