import Foundation
import Testing

/// Reading Prometheus's text exposition format in tests: one sample's value, and promtool's verdict on the text.
public enum PrometheusText {
    /// The value of the sample of `name` whose labels include every one of `labels`, from exposition text.
    public static func sample(_ text: String, _ name: String, _ labels: [String: String] = [:]) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            let hasAll = labels.allSatisfy { line.contains("\($0.key)=\"\($0.value)\"") }
            if hasAll, let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
        }
        return nil
    }

    /// Runs `promtool check metrics` on `text`; returns its exit status and what it said.
    public static func promtoolCheck(_ text: String) async throws -> (status: Int32, said: String) {
        let promtool = try #require(
            ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "promtool is not installed (scripts/test installs Debian's prometheus)")
        let file = TemporaryDirectory.make("ferry-promtool") + "/metrics.txt"
        defer { try? FileManager.default.removeItem(atPath: (file as NSString).deletingLastPathComponent) }
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\"$0\" check metrics < \"$1\"", promtool, file]
        let run = try await runBlocking { try process.runCapturing() }
        return (process.terminationStatus, run.output + run.errorOutput)
    }
}
