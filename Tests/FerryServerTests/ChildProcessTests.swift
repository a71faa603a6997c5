import FerryStorage
import Foundation
import Testing

@testable import FerryMedia
@testable import FerryServer

@Suite("Child processes for the media tools", .timeLimit(.minutes(10)))
struct ChildProcessTests {
    static func temporaryFile() -> String { NSTemporaryDirectory() + "ferry-child-\(UUID().uuidString)" }

    /// Fields of /proc/<pid>/stat after the command name.
    static func statFields(_ text: String) -> [String] {
        guard let close = text.lastIndex(of: ")") else { return [] }
        return text[text.index(after: close)...].split(separator: " ").map(String.init)
    }

    @Test("a tool runs at a lower priority, in a process group of its own, with nothing of the server's environment")
    func isolation() async throws {
        let output = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: output) }
        var process = ChildProcess(executable: "/bin/cat", arguments: ["/proc/self/stat"])
        process.niceness = 10
        process.idleScheduling = true
        process.standardOutput = output
        let outcome = try await process.run()
        #expect(outcome == .init(exitCode: 0, signal: nil, timedOut: false))
        let stat = try String(contentsOfFile: output, encoding: .utf8)
        let pid = stat.split(separator: " ").first.map(String.init)
        let fields = Self.statFields(stat)
        // After the name: state(0) ppid(1) pgrp(2) … nice is field 19 of the whole line, 16 here.
        #expect(fields[2] == pid, "own process group")
        #expect(fields[16] == "10", "niceness")
        // policy (field 41 of the line, 38 here): 5 is SCHED_IDLE.
        #expect(fields[38] == "5", "scheduling policy")

        var env = ChildProcess(executable: "/usr/bin/env", arguments: [])
        env.standardOutput = output
        _ = try await env.run()
        let variables = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").map { $0.split(separator: "=").first.map(String.init) ?? "" }
        #expect(Set(variables) == ["PATH", "LC_ALL"])
    }

    @Test("exit codes and signals are reported; a tool that cannot start is an error, not an exit 127")
    func outcomes() async throws {
        #expect(try await ChildProcess(executable: "/bin/sh", arguments: ["-c", "exit 3"]).run().exitCode == 3)
        #expect(try await ChildProcess(executable: "/bin/sh", arguments: ["-c", "kill -9 $$"]).run().signal == SIGKILL)
        await #expect(throws: ChildProcess.SpawnError.self) {
            _ = try await ChildProcess(executable: "/nonexistent/ffmpeg", arguments: []).run()
        }
        let errors = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: errors) }
        var noisy = ChildProcess(executable: "/bin/sh", arguments: ["-c", "echo first >&2; echo last words >&2; exit 1"])
        noisy.standardError = errors
        #expect(try await noisy.run().exitCode == 1)
        #expect(ChildProcess.tail(of: errors, limit: 11) == "last words\n")
    }

    @Test("cancelling the task kills the tool and everything it started; a time limit does too")
    func cancellationAndTimeLimit() async throws {
        let marker = "\(Int.random(in: 100_000...999_999))"
        let task = Task {
            // A child of the tool (the background sleep) must go with it: the whole group is killed.
            try await ChildProcess(executable: "/bin/sh", arguments: ["-c", "sleep 29.\(marker) & sleep 31.\(marker)"]).run()
        }
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        task.cancel()
        await #expect(throws: CancellationError.self) { _ = try await task.value }
        // Far sooner than the tool's 31 s, with room for a loaded machine.
        #expect(ContinuousClock.now - started < .seconds(10))
        // The killed group is gone once the kernel has reaped it (quickly; a busy machine may take longer).
        for _ in 0..<200 where !Self.processes(mentioning: marker).isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        #expect(Self.processes(mentioning: marker).isEmpty)

        var slow = ChildProcess(executable: "/bin/sleep", arguments: ["30"])
        slow.timeLimit = .milliseconds(300)
        let outcome = try await slow.run()
        #expect(outcome.timedOut && outcome.signal == SIGKILL && !outcome.succeeded)
    }

    @Test("a tool is not started while its disk has less free than it must leave, and is stopped once it has")
    func keepsTheReserveFree() async throws {
        let marker = Self.temporaryFile()
        var refused = ChildProcess(executable: "/bin/sh", arguments: ["-c", "touch \(marker)"])
        refused.keepFree = (NSTemporaryDirectory(), Int64.max / 2)
        await #expect(throws: FerryDomainError.self) { _ = try await refused.run() }
        #expect(!FileManager.default.fileExists(atPath: marker), "the tool ran")
        guard getuid() == 0 else { return }  // The rest fills a small tmpfs, which needs root to mount.
        try await StorageFullTests.withSmallDisk(megabytes: 16) { disk in
            // The disk filled most of the way to the reserve first, so that a slow writer reaches it soon: 64 KiB every
            // 100 ms, which would then fill the disk and go on failing. The 2 MiB the check allows below the reserve
            // are more than three seconds of writing (a CI run's loaded machine once checked over a second late).
            #expect(FileManager.default.createFile(atPath: disk + "/filler", contents: Data(count: 7 << 20)))
            var writer = ChildProcess(
                executable: "/bin/sh",
                arguments: ["-c", "while true; do head -c 65536 /dev/zero >> \(disk)/out; sleep 0.1; done"])
            writer.keepFree = (disk, 8 << 20)
            writer.pollInterval = .milliseconds(10)
            writer.timeLimit = .seconds(20)
            do {
                let outcome = try await writer.run()
                Issue.record("the writer ran on: \(outcome)")
            } catch let error as FerryDomainError {
                #expect(error.code == .storageFull)
            }
            let free = try #require(DiskSpace.of(disk)?.free)
            #expect(free >= 6 << 20, "\(free) bytes left")
        }
    }

    /// Live processes whose command line mentions `text`.
    static func processes(mentioning text: String) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            return String(decoding: data, as: UTF8.self).contains(text) && statFields(stat).first != "Z"
        }
    }
}
