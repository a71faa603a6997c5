import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// HAProxy (Debian's package) in front of some `ferry serve` nodes, run with the repository's `deploy/haproxy.cfg`:
/// its bind address, stats address and server lines are replaced by loopback ports, nothing else.
///
/// Nothing is skipped: when haproxy is missing or does not start, ``start(nodes:)`` throws with the reason (`.ci/run`
/// installs it).
public final class HAProxyServer: @unchecked Sendable {
    // `process` is only touched by start and stop, which a test calls from one task.
    private let process: Process
    /// Where it listens: `http://127.0.0.1:PORT`.
    public let endpoint: String
    /// Its statistics page (CSV at `endpoint/stats;csv`).
    public let statsEndpoint: String
    let directory: String

    /// HAProxy could not be found or started.
    public struct Failure: Error, CustomStringConvertible {
        /// Why.
        public var description: String
    }

    private init(process: Process, endpoint: String, statsEndpoint: String, directory: String) {
        self.process = process
        self.endpoint = endpoint
        self.statsEndpoint = statsEndpoint
        self.directory = directory
    }

    /// The repository's reference configuration.
    public static var referenceConfiguration: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/haproxy.cfg").path
    }

    /// Starts HAProxy balancing over `nodes` (ports of 127.0.0.1) and waits until it answers through a healthy node.
    public static func start(nodes: [Int]) async throws -> HAProxyServer {
        guard let binary = ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"].first(where: FileManager.default.isExecutableFile)
        else { throw Failure(description: "haproxy is not installed; .ci/run installs Debian's haproxy") }
        let template = try String(contentsOfFile: referenceConfiguration, encoding: .utf8)
        let port = try MotoServer.freePort()
        var statsPort = try MotoServer.freePort()
        while statsPort == port { statsPort = try MotoServer.freePort() }
        var lines: [String] = []
        var serversWritten = false
        var section = ""
        for line in template.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if !line.hasPrefix(" ") && !trimmed.isEmpty && !trimmed.hasPrefix("#") { section = trimmed }
            if trimmed.hasPrefix("bind ") {
                lines.append("    bind 127.0.0.1:\(section.hasPrefix("listen stats") ? statsPort : port)")
            } else if trimmed.hasPrefix("server ") {
                guard !serversWritten else { continue }
                serversWritten = true
                for (index, node) in nodes.enumerated() {
                    lines.append("    server node\(index + 1) 127.0.0.1:\(node) check inter 1s fall 2 rise 1")
                }
            } else {
                lines.append(String(line))
            }
        }
        let directory = TemporaryDirectory.make("ferry-haproxy")
        let configuration = directory + "/haproxy.cfg"
        try lines.joined(separator: "\n").write(toFile: configuration, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-f", configuration, "-db"]
        let log = directory + "/haproxy.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let server = HAProxyServer(
            process: process, endpoint: "http://127.0.0.1:\(port)", statsEndpoint: "http://127.0.0.1:\(statsPort)/stats",
            directory: directory)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process.isRunning {
            if let reply = try? await S3TestClient.fetch(server.endpoint + "/_ferry/health"), reply.status == 200 {
                return server
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        await server.stop()
        throw Failure(description: "haproxy did not start: \(output.suffix(2000))")
    }

    /// Responses with a 2xx status each node sent, by server name (`node1`, …), from the statistics page.
    public func successfulResponses() async throws -> [String: Int] {
        let reply = try await S3TestClient.fetch(statsEndpoint + ";csv")
        let rows = reply.text.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        guard let header = rows.first?.map({ $0.trimmingCharacters(in: CharacterSet(charactersIn: "# ")) }),
            let name = header.firstIndex(of: "svname"), let ok = header.firstIndex(of: "hrsp_2xx")
        else { return [:] }
        var counts: [String: Int] = [:]
        for row in rows.dropFirst() where row.count > ok && row[name].hasPrefix("node") {
            counts[String(row[name])] = Int(row[ok]) ?? 0
        }
        return counts
    }

    /// Stops HAProxy and deletes its files.
    public func stop() async {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        await process.exited()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
