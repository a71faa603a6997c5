import ArgumentParser
import Ferry
import FerryCore
import Foundation

/// `ferry status`: the service's status as GetServiceStatus answers it (root key only).
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the service's nodes, queues, backends and disk space (root key only).",
        discussion: """
            Lists every node whose heartbeat the catalog holds (stale: not seen for a minute), the media job queue, \
            the webhook backlog, whether the catalog and the object store answer and how fast, and the space left on \
            the data directory's disk. Exits with 1 when the catalog or the store did not answer, or when uploads \
            are refused because the disk has less free than --min-free-bytes (with --json too). \
            With --json: GetServiceStatus' answer exactly as the service sent it.
            """)
    @OptionGroup var service: ServiceOptions
    @Flag(help: "Print GetServiceStatus' JSON answer.") var json = false

    func run() async throws {
        // A data directory that does not exist yet (a mistyped --data-dir) is not made just to be reported healthy.
        let data = try await service.with(existing: true) { connection in
            try await report { try await connection.media().callJSON("GetServiceStatus", body: Data("{}".utf8)) }
        }
        if json { sayJSON(String(decoding: data, as: UTF8.self)) }
        let status: MediaContract.ServiceStatusAnswer
        do {
            status = try MediaContract.decode(MediaContract.ServiceStatusAnswer.self, from: data)
        } catch {
            complain("ferry: the service's status answer cannot be read: \(error)")
            throw ExitCode(ExitCodes.failed)
        }
        if !json { for line in Self.lines(status) { say(line) } }
        if !status.catalog.healthy || !status.store.healthy || status.diskFree?.refusesUploads == true {
            throw ExitCode(ExitCodes.failed)
        }
    }

    /// The answer as people read it: a table of nodes, then one line for each queue, backend and the disk.
    static func lines(_ status: MediaContract.ServiceStatusAnswer) -> [String] {
        var lines = ["Ferry \(status.version), answered by \(status.node)", ""]
        let rows =
            [["NODE", "ROLE", "VERSION", "STARTED", "LAST SEEN", "STATE"]]
            + status.nodes.map { [$0.name, $0.role, $0.version, $0.startedAt, $0.lastSeen, $0.stale ? "stale" : "ok"] }
        lines += table(rows)
        lines.append("")
        var facts: [[String]] = []
        facts.append(["Catalog", health(status.catalog)])
        facts.append(["Store", health(status.store)])
        if let jobs = status.jobQueue {
            let scheduled = jobs.scheduled.map { ", \($0) scheduled" } ?? ""
            var text = "\(jobs.queued) queued\(scheduled), \(jobs.running) running, \(jobs.failed) failed"
            if let age = jobs.oldestQueuedAgeSeconds { text += "; oldest due job waiting \(seconds(age))" }
            facts.append(["Job queue", text])
        } else {
            facts.append(["Job queue", "unknown (the catalog did not answer)"])
        }
        if let webhooks = status.webhookBacklog {
            var text = "\(webhooks.pending) pending"
            if let age = webhooks.oldestPendingAgeSeconds { text += "; oldest waiting \(seconds(age))" }
            facts.append(["Webhooks", text])
        } else {
            facts.append(["Webhooks", "unknown (the catalog did not answer)"])
        }
        if let disk = status.diskFree {
            let percent = disk.totalBytes > 0 ? Double(disk.freeBytes) / Double(disk.totalBytes) * 100 : 0
            var text = "\(bytes(disk.freeBytes)) of \(bytes(disk.totalBytes)) (\(String(format: "%.0f", percent))%)"
            if let reserve = disk.reserveBytes, disk.refusesUploads {
                text += "; uploads refused: less than the \(bytes(reserve)) kept free"
            }
            facts.append(["Disk free", text])
        }
        lines += table(facts)
        return lines
    }

    /// Rows with their columns padded to the widest cell, two spaces apart.
    static func table(_ rows: [[String]]) -> [String] {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
    }

    static func health(_ health: MediaContract.BackendHealth) -> String {
        let latency = String(format: "%.1f ms", health.latencyMs)
        return health.healthy ? "ok (\(latency))" : "FAILING after \(latency): \(health.error ?? "no answer")"
    }

    static func seconds(_ value: Double) -> String {
        let total = Int(value.rounded())
        if total < 120 { return "\(total) s" }
        if total < 7200 { return "\(total / 60) min" }
        return "\(total / 3600) h"
    }

    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB", "PB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f", value) + " " + units[unit]
    }
}
