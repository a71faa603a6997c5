import Foundation

/// Runs a peer tool (awscli, python) and captures its output.
enum PeerProcess {
    struct Result {
        var status: Int32
        var output: String
        var errorOutput: String
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Drain both pipes while the process runs so a chatty tool cannot block on a full pipe.
        nonisolated(unsafe) var errData = Data()
        let errThread = Thread { errData = err.fileHandleForReading.readDataToEndOfFile() }
        errThread.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while errThread.isExecuting || !errThread.isFinished { usleep(1000) }
        return Result(
            status: process.terminationStatus, output: String(decoding: outData, as: UTF8.self),
            errorOutput: String(decoding: errData, as: UTF8.self))
    }

    /// The directory holding the test scripts.
    static var scripts: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path
    }
}
