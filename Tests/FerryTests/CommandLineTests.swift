@testable import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `ferry` executable.
struct FerryRun: Sendable {
    var status: Int32
    var output: String
    var error: String
    var jsonLines: [[String: Any]] {
        output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// A predicate for `interruptWhen`: a `--json` progress line of at least `bytes`.
    /// A `--json` progress event whose `field` (`bytes` sent, or `stored`) reached `bytes`.
    static func progressed(to bytes: Int, field: String = "bytes") -> @Sendable (String) -> Bool {
        { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["event"] as? String == "progress", let sent = object[field] as? Int
            else { return false }
            return sent >= bytes
        }
    }

    /// The lines of standard output that are not JSON objects (with `--json`, there should be none).
    var linesNotJSON: [String] {
        output.split(separator: "\n").map(String.init).filter {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) == nil
        }
    }

    /// Runs `ferry arguments…`; with `interruptWhen`, sends `signal` (SIGINT, Ctrl-C) once a stdout line satisfies it,
    /// with `signalAfter`, that many seconds after the start; with `clockOffset` (seconds, negative behind), with its
    /// wall clock that far off (``WallClockShim``), as on a device whose clock is wrong; in `directory` when given.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], inTerminal: Bool = false,
        interruptWhen: (@Sendable (String) -> Bool)? = nil, signal: Int32 = SIGINT, signalAfter: TimeInterval? = nil,
        clockOffset: Int? = nil, inDirectory directory: String? = nil, standardInput: String? = nil
    ) async throws -> FerryRun {
        try await runBlocking {
            let process = Process()
            if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
            if let standardInput { process.standardInput = FileHandle(forReadingAtPath: standardInput) }
            if inTerminal {
                // util-linux `script` runs the command on a pseudo-terminal and copies what it prints.
                process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
                let command = ([FerryExecutable.path] + arguments).map { "'" + $0 + "'" }.joined(separator: " ")
                process.arguments = ["-qec", command, "/dev/null"]
            } else {
                process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
                process.arguments = arguments
            }
            var env = ProcessInfo.processInfo.environment
            for name in [
                "FERRY_DATA_DIR", "FERRY_ENDPOINT", "FERRY_ACCESS_KEY_ID", "FERRY_SECRET_ACCESS_KEY", "FERRY_SESSION_TOKEN",
                "FERRY_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            ] {
                env[name] = nil
            }
            // Never the real home: each run gets its own HOME unless the test names one.
            env["HOME"] = TemporaryDirectory.make("ferry-cli-home")
            // The embedded service's media tools at nice 10 but not SCHED_IDLE (as FerryExecutable.Server's).
            env["FERRY_MEDIA_IDLE_SCHEDULING"] = "0"
            env.merge(environment) { $1 }
            if let clockOffset { env = try WallClockShim.environment(offset: clockOffset, base: env) }
            process.environment = env
            defer { if environment["HOME"] == nil, let home = env["HOME"] { try? FileManager.default.removeItem(atPath: home) } }
            let run = try process.runCapturing(interruptWhen: interruptWhen, signal: signal, signalAfter: signalAfter)
            return FerryRun(status: run.status, output: run.output, error: run.errorOutput)
        }
    }
}

/// The bytes of an object in a data directory, read with the server library after the command has exited.
func storedBytes(dataDirectory: String, bucket: String, key: String) async throws -> Data {
    var configuration = FerryServerConfiguration(dataDirectory: dataDirectory)
    configuration.logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let server = try FerryServer(configuration: configuration, environment: [:])
    let object = try await server.store.object(bucket: bucket, key: key)
    var data = Data()
    for try await buffer in try await server.store.readObject(object, range: nil) { data.append(contentsOf: buffer.readableBytesView) }
    return data
}

/// The root key a `ferry serve` on `dataDirectory` generated (its `root-credentials.json`).
func rootCredentials(dataDirectory: String) throws -> SigV4Credentials {
    let stored = try #require(FileManager.default.contents(atPath: dataDirectory + "/root-credentials.json"))
    let root = try JSONSerialization.jsonObject(with: stored) as? [String: String] ?? [:]
    return SigV4Credentials(accessKeyId: root["accessKeyId"] ?? "", secretAccessKey: root["secretAccessKey"] ?? "")
}

/// The keys of the multipart uploads in progress in `bucket` of the embedded service on `dataDirectory` (resumable
/// uploads hold one each).
func uploadsInProgress(dataDirectory: String, bucket: String) async throws -> [String] {
    var configuration = FerryServerConfiguration(dataDirectory: dataDirectory)
    configuration.logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    let server = try FerryServer(configuration: configuration, environment: [:])
    return try await server.store.listMultipartUploads(
        bucket: bucket, prefix: "", delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 1000
    ).uploads.map(\.key)
}

@Suite("ferry command line", .serialized, .timeLimit(.minutes(10)))
struct CommandLineTests {
    static var sample: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Samples/ferry-sample.mp4").path
    }

    @Test("a command on the data directory of a running ferry serve talks to it instead of opening the directory again")
    func sharesRunningServer() async throws {
        let data = TemporaryDirectory.make("ferry-cli-shared")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: ["--media-workers", "0"], environment: ["HOME": data])
        // Stands for a body the server is receiving: opening the directory again would clear it.
        let inFlight = data + "/objects/tmp/body-being-received"
        #expect(FileManager.default.createFile(atPath: inFlight, contents: Data([1, 2, 3])))
        let upload = try await FerryRun.run(
            ["upload", Self.sample, "--data-dir", data, "--bucket", "shared", "--key", "clip.mp4", "--json"],
            environment: ["HOME": data])
        #expect(upload.status == 0, "\(upload.error)")
        #expect(FileManager.default.fileExists(atPath: inFlight))
        let list = try await FerryRun.run(["videos", "list", "--data-dir", data], environment: ["HOME": data])
        #expect(list.status == 0, "\(list.error)")
        // The object went to the running server.
        let client = S3TestClient(endpoint: server.endpoint, credentials: try rootCredentials(dataDirectory: data))
        let fetched = try await client.get("shared", "clip.mp4")
        let sample = try Data(contentsOf: URL(fileURLWithPath: Self.sample))
        #expect(fetched.status == 200 && Data(fetched.body) == sample)
        await server.stop()
        // Stopped: the directory is free again, and the command runs the service itself.
        let after = try await FerryRun.run(["videos", "list", "--data-dir", data], environment: ["HOME": data])
        #expect(after.status == 0, "\(after.error)")
    }

    @Test("ferry serve under an open-file limit that holds fewer connections than --max-connections takes as many as fit, says so, and stays up when more come")
    func connectionsFitTheOpenFileLimit() async throws {
        let data = TemporaryDirectory.make("ferry-cli-files")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let log = data + "/serve.log"
        // 400 descriptors hold (400 - 256) / 3 = 48 connections; 450 idle ones would take every descriptor.
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/data", arguments: ["--media-workers", "0"], environment: ["HOME": data], logFile: log,
            openFiles: 400)
        var sockets: [Int32] = []
        for _ in 0..<450 {
            guard let socket = try? RawSocket.connect(port: server.port) else { break }
            sockets.append(socket)
        }
        // Requests on them keep the thread pool busy; its monitor opens a file every second while it is, and a process
        // out of descriptors stops within that second.
        let request = Array("GET /_ferry/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        for _ in 0..<3 {
            for socket in sockets { try? RawSocket.write(socket, request) }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(server.process.isRunning, "the server stopped with every descriptor taken")
        // It holds the connections that fit, far from its limit (at rest it holds a few dozen descriptors).
        let held = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.processIdentifier)/fd"))?.count
        #expect((held ?? 0) > 48 && (held ?? .max) < 200, "\(held ?? -1) descriptors")
        for socket in sockets { close(socket) }
        var healthy = false
        for _ in 0..<50 where !healthy {
            healthy = (try? await S3TestClient.fetchRaw("GET", server.endpoint + "/_ferry/health").status) == 200
            if !healthy { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(healthy)
        await server.stop()
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(text.contains("open-file-limit=400") && text.contains("max-connections=48"), "\(text)")
    }

    @Test("ferry console runs the directory's service and prints the console's URL; with ferry serve on the directory it prints that server's")
    func consoleCommand() async throws {
        let data = TemporaryDirectory.make("ferry-cli-console")
        defer { try? FileManager.default.removeItem(atPath: data) }
        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var page: String?
        }
        let seen = Seen()
        let run = try await FerryRun.run(["console", "--data-dir", data], environment: ["HOME": data]) { line in
            guard line.hasPrefix("Ferry console: "), let url = line.dropFirst(15).split(separator: " ").first.flatMap({ URL(string: String($0)) })
            else { return false }
            // The page it names is served while the command runs.
            let body = (try? Data(contentsOf: url)).map { String(decoding: $0, as: UTF8.self) }
            seen.lock.withLock { seen.page = body }
            return true
        }
        #expect(run.status == 0, "\(run.output) \(run.error)")
        #expect(seen.lock.withLock { seen.page }?.contains("Sign in to Ferry") == true, "\(run.output)")
        #expect(run.output.contains("root-credentials.json"))

        // Without the console's files it says so and where they go, rather than print a URL that answers 503.
        let empty = TemporaryDirectory.make("ferry-cli-console-site")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let missing = try await FerryRun.run(
            ["console", "--data-dir", data], environment: ["HOME": data, "FERRY_CONSOLE_DIR": empty])
        #expect(missing.status == 1 && !missing.output.contains("/console/"), "\(missing.output) \(missing.error)")
        #expect(missing.error.contains("the console's files are not installed"), "\(missing.error)")

        let server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: ["--media-workers", "0"], environment: ["HOME": data])
        let pointed = try await FerryRun.run(["console", "--data-dir", data], environment: ["HOME": data])
        #expect(pointed.status == 0 && pointed.output.contains("\(server.endpoint)/console/"), "\(pointed.output) \(pointed.error)")
        await server.stop()
    }

    @Test("videos info shows the first stream of a video that plays while its ladder is encoded (Playable), as GetPlayInfo answers it")
    func infoWhilePlayable() async throws {
        let data = TemporaryDirectory.make("ferry-cli-playable")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let gate = data + "/open-the-ladder"
        let tools = try MediaFixtures.heldTools(gate: gate)
        defer { try? FileManager.default.removeItem(atPath: tools) }
        let directory = data + "/ferry"
        let server = try await FerryExecutable.Server.start(
            dataDirectory: directory, arguments: ["--ffmpeg", tools], environment: ["HOME": data])
        defer { _ = FileManager.default.createFile(atPath: gate, contents: nil) }
        let upload = try await FerryRun.run(["upload", Self.sample, "--data-dir", directory, "--json"], environment: ["HOME": data])
        #expect(upload.status == 0, "\(upload.error)")
        let videoId = try #require(upload.jsonLines.first { $0["event"] as? String == "media" }?["VideoId"] as? String)

        // The ladder is held: the video plays its first stream while it is Transcoding.
        var object: [String: Any] = [:]
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let info = try await FerryRun.run(["videos", "info", videoId, "--data-dir", directory, "--json"], environment: ["HOME": data])
            object = info.jsonLines.first ?? [:]
            if (object["Video"] as? [String: Any])?["Playable"] as? Bool == true { break }
            try await Task.sleep(for: .milliseconds(300))
        }
        #expect((object["Video"] as? [String: Any])?["Status"] as? String == "Transcoding", "\(object)")
        let streams = object["PlayInfoList"] as? [[String: Any]] ?? []
        // The first stream (one definition) and the master playlist that names it.
        #expect(streams.count == 2 && streams.allSatisfy { $0["Format"] as? String == "m3u8" }, "\(object)")
        #expect(streams.contains { $0["Definition"] as? String == "AUTO" }, "\(object)")
        let plain = try await FerryRun.run(["videos", "info", videoId, "--data-dir", directory], environment: ["HOME": data])
        #expect(plain.output.contains("Status: Transcoding") && plain.output.contains(", playable"), "\(plain.output)")
        #expect(plain.output.contains("AUTO\tm3u8\t"), "\(plain.output)")
        #expect(FileManager.default.createFile(atPath: gate, contents: nil))
        await server.stop()
    }

    @Test("upload --wait on the embedded default follows processing and prints the renditions; videos list, info and play-url find them")
    func embeddedDefault() async throws {
        let data = TemporaryDirectory.make("ferry-cli")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let json = try await FerryRun.run(["upload", Self.sample, "--data-dir", data, "--json", "--wait"])
        #expect(json.status == 0, "\(json.error)")
        let media = try #require(json.jsonLines.first { $0["event"] as? String == "media" })
        let videoId = try #require(media["VideoId"] as? String)
        #expect(json.jsonLines.contains { $0["event"] as? String == "progress" && $0["bytes"] as? Int == 70983 })
        let statuses = json.jsonLines.filter { $0["event"] as? String == "processing" }.compactMap { $0["Status"] as? String }
        #expect(statuses.last == "Normal" && Set(statuses).isSubset(of: ["UploadSucc", "Transcoding", "Normal"]), "\(statuses)")
        let processed = try #require(json.jsonLines.first { $0["event"] as? String == "processed" })
        #expect(processed["Status"] as? String == "Normal")
        let streams = processed["PlayInfoList"] as? [[String: Any]] ?? []
        #expect(Set(streams.map { "\($0["Definition"] ?? "")/\($0["Format"] ?? "")" }) == ["LD/m3u8", "LD/mp4", "SQ/m3u8", "SQ/m4a", "AUTO/m3u8", "AUTO/mpd"])
        #expect(streams.allSatisfy { ($0["PlayURL"] as? String)?.hasPrefix("http://127.0.0.1:9000/_ferry/play/") == true })

        let list = try await FerryRun.run(["videos", "list", "--data-dir", data])
        #expect(list.status == 0)
        #expect(list.output.contains("\(videoId)\tNormal\t70983"))
        let info = try await FerryRun.run(["videos", "info", videoId, "--data-dir", data])
        #expect(info.output.contains("Status: Normal"))
        #expect(info.output.contains("Size: 70983"))
        #expect(info.output.contains("Duration: 5.00 s"))
        #expect(info.output.contains("Resolution: 320x240 at 25 fps"))
        #expect(info.output.contains("Cover: http://127.0.0.1:9000/_ferry/play/"))
        #expect(info.output.contains("LD\tmp4\t320x240\t"))
        let infoJSON = try await FerryRun.run(["videos", "info", videoId, "--data-dir", data, "--json"])
        let object = try #require(infoJSON.jsonLines.first)
        #expect(Set(object.keys) == ["Video", "PlayInfoList"])
        #expect((object["Video"] as? [String: Any])?["Status"] as? String == "Normal")
        #expect((object["PlayInfoList"] as? [[String: Any]])?.count == 6)
        let playURL = try await FerryRun.run(["videos", "play-url", videoId, "--data-dir", data, "--definition", "LD", "--format", "mp4"])
        // A signed video (the default): the URL carries the token the server signed.
        #expect(playURL.output.contains("/_ferry/play/\(videoId)/LD.mp4?token="))
        let master = try await FerryRun.run(["videos", "play-url", videoId, "--data-dir", data])
        #expect(master.output.contains("/_ferry/play/\(videoId)/master.m3u8?token="))

        // Not a terminal: plain progress lines, then the result.
        let plain = try await FerryRun.run(["upload", Self.sample, "--data-dir", data, "--title", "Second"])
        #expect(plain.status == 0)
        #expect(plain.output.contains("(100%)"))
        #expect(!plain.output.contains("\u{1B}["))
        #expect(plain.output.contains("VideoId: "))
        let stored = try await storedBytes(dataDirectory: data, bucket: "ferry-media", key: "video/\(videoId)/source.mp4")
        #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: Self.sample))))
    }

    @Test("on a terminal the progress line is redrawn in place, then the result is printed on its own lines")
    func terminalProgress() async throws {
        let data = TemporaryDirectory.make("ferry-cli-tty")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
        let run = try await FerryRun.run(
            ["upload", file.path, "--data-dir", data + "/ferry", "--parallel", "1", "--bucket", "tty", "--key", "redrawn.bin"],
            inTerminal: true)
        #expect(run.status == 0, "\(run.output.suffix(400))")
        // Each redraw returns to the start of the line and clears it; the lines in between are not new lines.
        let redraws = run.output.components(separatedBy: "\r\u{1B}[2K").dropFirst()
        #expect(redraws.count >= 3, "\(run.output.suffix(400))")
        #expect(redraws.dropLast().allSatisfy { !$0.contains("\n") && $0.contains("MB/s") })
        #expect(redraws.last?.contains("(100%)") == true)
        #expect(run.output.contains("Uploaded tty/redrawn.bin (25165824 bytes"))
    }

    @Test("Ctrl-C pauses with exit 75; the same command resumes the same video and the object is byte-identical")
    func interruptAndResume() async throws {
        let data = TemporaryDirectory.make("ferry-cli-int")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 48 * 1024 * 1024, in: data)
        let arguments = ["upload", file.path, "--data-dir", data + "/ferry", "--json", "--parallel", "1", "--part-size", "5242880"]
        // Interrupted once three parts are through: the in-process service gets a new port on every run, yet the
        // checkpoint names the service by its data directory, so the rerun continues the same multipart upload.
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 3 * 5_242_880))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        #expect(first.jsonLines.contains { $0["event"] as? String == "paused" })
        let storedBefore = first.jsonLines.compactMap { $0["event"] as? String == "progress" ? $0["stored"] as? Int : nil }.max() ?? 0
        let second = try await FerryRun.run(arguments)
        #expect(second.status == 0, "\(second.error)")
        let uploadIds = [first, second].map { run in run.jsonLines.first { $0["event"] as? String == "started" }?["uploadId"] as? String }
        #expect(uploadIds[0] != nil && uploadIds[0] == uploadIds[1], "the rerun started another multipart upload: \(uploadIds)")
        // The rerun's progress starts where the parts already stored end (the server may hold one more, whose answer
        // the pause cut off).
        let resumedAt = second.jsonLines.first { $0["event"] as? String == "progress" }?["stored"] as? Int ?? 0
        #expect(storedBefore >= 3 * 5_242_880 - 5_242_880, "\(storedBefore)")
        #expect(resumedAt >= storedBefore, "resumed at \(resumedAt) after \(storedBefore) had been stored")
        let media = try #require(second.jsonLines.first { $0["event"] as? String == "media" })
        let videoId = try #require(media["VideoId"] as? String)
        let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
        #expect(list.output.contains("1 video(s)"), "resuming created a second video: \(list.output)")
        let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "ferry-media", key: "video/\(videoId)/source.bin")
        #expect(stored == (try Data(contentsOf: file)))
    }

    @Test("Ctrl-C pauses an image upload too; the same command continues the same image and multipart upload")
    func interruptAndResumeImage() async throws {
        let data = TemporaryDirectory.make("ferry-cli-int-image")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let random = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
        let file = data + "/poster.png"
        try FileManager.default.moveItem(atPath: random.path, toPath: file)
        let arguments = ["upload", file, "--data-dir", data + "/ferry", "--json", "--parallel", "1", "--part-size", "5242880"]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 5_242_880))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        let second = try await FerryRun.run(arguments)
        #expect(second.status == 0, "\(second.error)")
        let uploadIds = [first, second].map { run in run.jsonLines.first { $0["event"] as? String == "started" }?["uploadId"] as? String }
        #expect(uploadIds[0] != nil && uploadIds[0] == uploadIds[1], "the rerun started another multipart upload: \(uploadIds)")
        let completed = try #require(second.jsonLines.first { $0["event"] as? String == "completed" })
        #expect((completed["partsResumed"] as? Int ?? 0) >= 1, "\(completed)")
        #expect(second.jsonLines.contains { ($0["ImageURL"] as? String) != nil }, "\(second.output)")

        // As a tus stream: the rerun continues the image the stream record names, not a new one.
        let stream = arguments + ["--protocol", "tus", "--no-resume"]
        let interrupted = try await FerryRun.run(stream, interruptWhen: FerryRun.progressed(to: 5_242_880, field: "stored"))
        #expect(interrupted.status == 75, "\(interrupted.output.suffix(500)) \(interrupted.error)")
        let streams = data + "/ferry/checkpoints/streams"
        let recorded = try FileManager.default.contentsOfDirectory(atPath: streams).compactMap { name in
            (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: streams + "/" + name)))) as? [String: Any]
        }.compactMap { $0["imageId"] as? String }
        #expect(recorded.count == 1, "\(recorded)")
        let resumed = try await FerryRun.run(arguments + ["--protocol", "tus"])
        #expect(resumed.status == 0, "\(resumed.error)")
        let printed = resumed.jsonLines.compactMap { $0["ImageId"] as? String }
        #expect(printed == recorded, "\(resumed.output)")
        // The file's end is told as for parts: `completed` (its size), then `media`.
        let ends = resumed.jsonLines.compactMap { $0["event"] as? String }.filter { ["completed", "media"].contains($0) }
        #expect(ends == ["completed", "media"], "\(resumed.output)")
        #expect(resumed.jsonLines.first { $0["event"] as? String == "completed" }?["size"] as? Int == 24 * 1024 * 1024)

        // A record naming an image that takes no uploads (gone): the rerun makes a new image and sends it every byte,
        // rather than continuing the upload of another image.
        let again = try await FerryRun.run(stream, interruptWhen: FerryRun.progressed(to: 5_242_880, field: "stored"))
        #expect(again.status == 75, "\(again.output.suffix(500)) \(again.error)")
        let recordName = try #require(try FileManager.default.contentsOfDirectory(atPath: streams).first)
        let recordURL = URL(fileURLWithPath: streams + "/" + recordName)
        var record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: recordURL)) as? [String: Any])
        record["imageId"] = String(repeating: "0", count: 32)
        try JSONSerialization.data(withJSONObject: record).write(to: recordURL)
        let fresh = try await FerryRun.run(arguments + ["--protocol", "tus"])
        #expect(fresh.status == 0, "\(fresh.error)")
        let freshImage = try #require(fresh.jsonLines.compactMap { $0["ImageId"] as? String }.first, "\(fresh.output)")
        #expect(freshImage != String(repeating: "0", count: 32) && !recorded.contains(freshImage))
        let firstStored = fresh.jsonLines.first { $0["stored"] != nil }?["stored"] as? Int
        #expect(firstStored == 0, "the rerun continued the other image's upload: \(fresh.output.prefix(800))")
    }

    @Test(
        "a video whose upload is cancelled, or started over with --no-resume, is deleted, not left Uploading (multipart and a stream)",
        arguments: [[], ["--protocol", "tus"]])
    func cancelledVideoIsDeleted(_ wire: [String]) async throws {
        let data = TemporaryDirectory.make("ferry-cli-cancel-video")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
        let arguments = ["upload", file.path, "--data-dir", data + "/ferry", "--json", "--parallel", "1", "--part-size", "5242880"] + wire
        let list = ["videos", "list", "--data-dir", data + "/ferry"]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 5_242_880))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        #expect(try await FerryRun.run(list + ["--status", "Uploading"]).output.contains("1 video(s)"))
        let cancelled = try await FerryRun.run(arguments + ["--cancel"])
        #expect(cancelled.status == 0, "\(cancelled.error)")
        #expect(cancelled.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("Cancelled the") == true }, "\(cancelled.output)")
        let afterCancel = try await FerryRun.run(list)
        #expect(afterCancel.output.contains("0 video(s)"), "\(afterCancel.output)")

        let second = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 5_242_880))
        #expect(second.status == 75, "\(second.output.suffix(500)) \(second.error)")
        let fresh = try await FerryRun.run(arguments + ["--no-resume"])
        #expect(fresh.status == 0, "\(fresh.error)")
        let media = try #require(fresh.jsonLines.first { $0["event"] as? String == "media" })
        let videoId = try #require(media["VideoId"] as? String)
        let afterFresh = try await FerryRun.run(list)
        #expect(afterFresh.output.contains("1 video(s)"), "the interrupted video was left: \(afterFresh.output)")
        #expect(afterFresh.output.contains(videoId))
    }

    @Test(
        "a stream upload of a video or image that the service completed while the run was stopped (its record kept) is found complete: the rerun prints that video or image, sends nothing and makes no second one",
        arguments: [("tus", "bin"), ("ietf", "bin"), ("tus", "png")])
    func completedStreamIsNotSentAgain(_ wire: String, _ ext: String) async throws {
        let data = TemporaryDirectory.make("ferry-cli-stream-completed")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let random = try makeRandomFile(size: 48 * 1024 * 1024, in: data)
        let file = random.deletingPathExtension().appendingPathExtension(ext)
        if file != random { try FileManager.default.moveItem(at: random, to: file) }
        let field = ext == "png" ? "ImageId" : "VideoId"
        let arguments = ["upload", file.path, "--data-dir", data + "/ferry", "--json", "--protocol", wire, "--part-size", "2MiB"]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 1024 * 1024))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        // The record as a run killed after the service completed the upload, before the run heard, leaves it.
        let streams = data + "/ferry/checkpoints/streams"
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: streams).first { $0.hasSuffix(".json") })
        let record = try Data(contentsOf: URL(fileURLWithPath: streams + "/" + name))
        let finished = try await FerryRun.run(arguments)
        #expect(finished.status == 0, "\(finished.error)")
        let mediaId = try #require(finished.jsonLines.compactMap { $0[field] as? String }.first, "\(finished.output)")
        try record.write(to: URL(fileURLWithPath: streams + "/" + name))

        let again = try await FerryRun.run(arguments)
        #expect(again.status == 0, "\(again.output.suffix(500)) \(again.error)")
        #expect(again.jsonLines.compactMap { $0[field] as? String } == [mediaId], "\(again.output.suffix(800))")
        #expect(!again.jsonLines.contains { $0["event"] as? String == "progress" }, "bytes were sent again: \(again.output.prefix(800))")
        if field == "ImageId" {
            #expect(again.jsonLines.contains { ($0["ImageURL"] as? String)?.isEmpty == false }, "\(again.output.suffix(800)) \(again.error)")
        } else {
            let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
            #expect(list.output.contains("1 video(s)"), "\(list.output)")
        }
        #expect(!FileManager.default.fileExists(atPath: streams + "/" + name), "the record was kept")
    }

    @Test("a video uploading over tus is not the one the same file becomes over IETF or from another record directory (each run its own, though both are under way): each finishes as its own video, and the interrupted run continues its own")
    func otherProtocolOrRecordsIsAnotherVideo() async throws {
        let data = TemporaryDirectory.make("ferry-cli-stream-scopes")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 12 * 1024 * 1024, in: data)
        let base = ["upload", file.path, "--data-dir", data + "/ferry", "--json", "--part-size", "2MiB", "--transcode", "NoTranscode"]
        let tus = base + ["--protocol", "tus"]
        let first = try await FerryRun.run(tus, interruptWhen: FerryRun.progressed(to: 2 * 1024 * 1024))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        func videoId(_ run: FerryRun) -> String? {
            run.jsonLines.first { $0["event"] as? String == "media" }?["VideoId"] as? String
        }
        let streams = data + "/ferry/checkpoints/streams"
        let interrupted = try FileManager.default.contentsOfDirectory(atPath: streams).compactMap { name in
            (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: streams + "/" + name)))) as? [String: Any]
        }.compactMap { $0["videoId"] as? String }
        #expect(interrupted.count == 1, "\(interrupted)")
        var made: [String] = []
        for other in [base + ["--protocol", "ietf"], tus + ["--record-dir", data + "/elsewhere"], tus] {
            let run = try await FerryRun.run(other)
            #expect(run.status == 0, "\(run.output.suffix(500)) \(run.error)")
            made.append(videoId(run) ?? "none")
        }
        #expect(Set(made).count == 3, "\(made)")
        #expect(made.last == interrupted.first, "the interrupted run did not continue its video: \(made) \(interrupted)")
        let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
        #expect(list.output.contains("3 video(s)"), "\(list.output)")
    }

    /// Completes the upload at `url` (of `size` bytes) with other bytes than its file's, as another holder of its URL
    /// could: a tus append from the offset the server reaches once the stopped run's last append is recorded.
    static func completeWithOtherBytes(_ url: String, size: Int) async throws {
        let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
        var other: S3TestClient.Reply?
        for _ in 0..<50 where other?.status != 204 {
            let head = try await S3TestClient.fetchRaw("HEAD", url, headers: tus)
            let offset = try #require(Int(head.header("Upload-Offset") ?? ""), "\(head.status)")
            // A conflict is answered before the body is read, and the connection closed under it.
            other = try? await S3TestClient.fetchRaw(
                "PATCH", url,
                headers: tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Offset", String(offset))],
                body: [UInt8](repeating: 0x5A, count: size - offset))
            if other?.status != 204 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(other?.status == 204, "\(String(describing: other?.status)) \(other?.text ?? "")")
    }

    /// Runs `arguments` (a stream upload, without its endpoint) through a proxy that refuses every append (503), so
    /// that the upload is created and recorded but the service has none of the file when the run gives up (exit 75);
    /// the stream record it leaves in `records`: its file name, its bytes, and its fields.
    static func stoppedStream(
        _ arguments: [String], server: FerryExecutable.Server, environment: [String: String], records: String
    ) async throws -> (name: String, saved: Data, record: [String: Any]) {
        try await FaultProxy.with(upstream: server.endpoint) { proxy in
            proxy.inject(.status(503, code: "ServiceUnavailable"), when: .method("PATCH"), times: 1000)
            let first = try await FerryRun.run(
                arguments + ["--endpoint", proxy.endpoint, "--max-retries", "1"], environment: environment)
            #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        }
        let streams = records + "/streams"
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: streams).first { $0.hasSuffix(".json") })
        let saved = try Data(contentsOf: URL(fileURLWithPath: streams + "/" + name))
        return (name, saved, try #require(try JSONSerialization.jsonObject(with: saved) as? [String: Any]))
    }

    @Test(
        "an object stream rerun whose recorded upload is complete but whose object is gone (deleted or replaced since) sends the file afresh rather than taking it as done; --cancel of a completed upload says its object stays",
        arguments: ["tus", "ietf"])
    func objectStreamCompletedElsewhere(_ wire: String) async throws {
        try await Self.withService("ferry-cli-stream-object") { server, root, environment, data in
            let size = 24 * 1024 * 1024
            let file = try makeRandomFile(size: size, in: data)
            let command = [
                "upload", file.path, "--json", "--protocol", wire, "--part-size", "2MiB", "--record-dir", data + "/records",
                "--bucket", "elsewhere", "--key", "e.bin",
            ]
            let (name, saved, record) = try await Self.stoppedStream(
                command, server: server, environment: environment, records: data + "/records")
            let streams = data + "/records/streams"
            let arguments = command + ["--endpoint", server.endpoint]
            try await Self.completeWithOtherBytes(server.endpoint + (try #require(record["uploadPath"] as? String)), size: size)
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
            #expect(try await s3.send("DELETE", S3TestClient.path("elsewhere", "e.bin")).status == 204)

            let again = try await FerryRun.run(arguments, environment: environment)
            #expect(again.status == 0, "\(again.output.suffix(500)) \(again.error)")
            let firstStored = again.jsonLines.first { $0["stored"] != nil }?["stored"] as? Int
            #expect(firstStored == 0, "the rerun did not send the file afresh: \(again.output.prefix(800))")
            #expect(try await s3.get("elsewhere", "e.bin").body == [UInt8](try Data(contentsOf: file)))

            try saved.write(to: URL(fileURLWithPath: streams + "/" + name))
            let cancelled = try await FerryRun.run(arguments + ["--cancel"], environment: environment)
            #expect(cancelled.status == 0, "\(cancelled.error)")
            let message = cancelled.jsonLines.compactMap { $0["message"] as? String }.joined(separator: " ")
            #expect(message.contains("it had completed, and the object elsewhere/e.bin stays"), "\(cancelled.output)")
        }
    }

    @Test(
        "a stream rerun that finds its recorded upload completed with other bytes (by another holder of its URL) makes the file a new video and sends it whole; --cancel of that record says the stored video is kept, and with no record that there is nothing to cancel",
        arguments: ["tus", "ietf"])
    func streamCompletedWithOtherBytes(_ wire: String) async throws {
        try await Self.withService("ferry-cli-stream-other") { server, _, environment, data in
            let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
            let command = ["upload", file.path, "--json", "--protocol", wire, "--part-size", "2MiB", "--record-dir", data + "/records"]
            let (name, saved, record) = try await Self.stoppedStream(
                command, server: server, environment: environment, records: data + "/records")
            let streams = data + "/records/streams"
            let arguments = command + ["--endpoint", server.endpoint]
            let recordedVideo = try #require(record["videoId"] as? String)
            let upload = server.endpoint + (try #require(record["uploadPath"] as? String))

            try await Self.completeWithOtherBytes(upload, size: 24 * 1024 * 1024)

            // The rerun: the file becomes a new video, every byte sent.
            let again = try await FerryRun.run(arguments, environment: environment)
            #expect(again.status == 0, "\(again.output.suffix(500)) \(again.error)")
            let videoId = try #require(again.jsonLines.compactMap { $0["VideoId"] as? String }.first, "\(again.output.suffix(800))")
            #expect(videoId != recordedVideo)
            let firstStored = again.jsonLines.first { $0["stored"] != nil }?["stored"] as? Int
            #expect(firstStored == 0, "the rerun did not send the file afresh: \(again.output.prefix(800))")

            // A --cancel of that record ends it and says the stored video stays; a second one finds nothing to cancel.
            try saved.write(to: URL(fileURLWithPath: streams + "/" + name))
            let cancelled = try await FerryRun.run(arguments + ["--cancel"], environment: environment)
            #expect(cancelled.status == 0, "\(cancelled.error)")
            let message = cancelled.jsonLines.compactMap { $0["message"] as? String }.joined(separator: " ")
            #expect(message.contains("video \(recordedVideo) is kept"), "\(cancelled.output)")
            let nothing = try await FerryRun.run(arguments + ["--cancel"], environment: environment)
            #expect(nothing.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("No interrupted upload") == true }, "\(nothing.output)")
            let list = try await FerryRun.run(["videos", "list", "--endpoint", server.endpoint], environment: environment)
            #expect(list.output.contains("2 video(s)"), "\(list.output)")
        }
    }

    @Test(
        "--cancel of an interrupted upload whose file was deleted since ends it all the same: the upload, its records and its video go",
        arguments: [[], ["--bucket", "gone", "--key", "g.bin"], ["--protocol", "ietf"]])
    func cancelWithoutTheFile(_ destination: [String]) async throws {
        let data = TemporaryDirectory.make("ferry-cli-cancel-gone")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 48 * 1024 * 1024, in: data)
        let arguments = ["upload", file.path, "--data-dir", data + "/ferry", "--json", "--parallel", "1", "--part-size", "5242880"] + destination
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 5_242_880))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        let records = data + "/ferry/checkpoints"
        func kept() -> [String] {
            let names = (FileManager.default.enumerator(atPath: records)?.allObjects as? [String]) ?? []
            return names.filter { $0.hasSuffix(".json") }
        }
        #expect(!kept().isEmpty)
        try FileManager.default.removeItem(at: file)

        let cancelled = try await FerryRun.run(arguments + ["--cancel"])
        #expect(cancelled.status == 0, "\(cancelled.output) \(cancelled.error)")
        #expect(cancelled.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("Cancelled the") == true }, "\(cancelled.output)")
        #expect(kept().isEmpty, "records were left: \(kept())")
        if destination.first != "--bucket" {
            let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
            #expect(list.output.contains("0 video(s)"), "the video was left: \(list.output)")
        }
    }

    @Test("--cancel with --bucket aborts an interrupted object upload and forgets its checkpoint; the next run starts afresh")
    func cancelObjectUpload() async throws {
        let data = TemporaryDirectory.make("ferry-cli-cancel")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 48 * 1024 * 1024, in: data)
        let arguments = [
            "upload", file.path, "--data-dir", data + "/ferry", "--bucket", "cancels", "--key", "c.bin", "--json",
            "--parallel", "1", "--part-size", "5242880",
        ]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 2 * 5_242_880))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        let cancelled = try await FerryRun.run(arguments + ["--cancel"])
        #expect(cancelled.status == 0, "\(cancelled.error)")
        #expect(cancelled.linesNotJSON.isEmpty, "\(cancelled.linesNotJSON)")
        #expect(cancelled.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("Cancelled the upload") == true }, "\(cancelled.output)")
        #expect(!cancelled.jsonLines.contains { $0["event"] as? String == "completed" })
        let again = try await FerryRun.run(arguments + ["--cancel"])
        #expect(again.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("No interrupted upload") == true }, "\(again.output)")
        let fresh = try await FerryRun.run(arguments)
        #expect(fresh.status == 0, "\(fresh.error)")
        let uploadIds = [first, fresh].map { run in run.jsonLines.first { $0["event"] as? String == "started" }?["uploadId"] as? String }
        #expect(uploadIds[0] != nil && uploadIds[1] != nil && uploadIds[0] != uploadIds[1], "\(uploadIds)")
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "cancels", key: "c.bin") == (try Data(contentsOf: file)))
    }

    /// `count` random files of `size` bytes in `data`, and the `ferry upload` of them all on `data/ferry` with
    /// `options`, one part or chunk at a time (5 MiB parts, 2 MiB tus chunks), printing JSON.
    static func batch(of count: Int, size: Int, in data: String, _ options: [String]) throws -> ([URL], [String]) {
        let files = try (0..<count).map { _ in try makeRandomFile(size: size, in: data) }
        let arguments = ["upload"] + files.map(\.path) + [
            "--data-dir", data + "/ferry", "--part-size", options.contains("tus") ? "2MiB" : "5MiB", "--parallel", "1", "--json",
        ] + options
        return (files, arguments)
    }

    @Test(
        "Ctrl-C pauses a batch: no more files start, those that did not are named, the exit is 75 even when no file was running; the same command then uploads them all",
        arguments: [["--bucket", "batch"], ["--bucket", "batch", "--protocol", "tus"], ["--transcode", "NoTranscode"]])
    func interruptBatch(_ options: [String]) async throws {
        let data = TemporaryDirectory.make("ferry-cli-batch")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (files, arguments) = try Self.batch(of: 3, size: 32 * 1024 * 1024, in: data, options)
        let objects = options.contains("--bucket")
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 4 * 1024 * 1024))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        let notStarted = first.jsonLines.compactMap { line in
            (line["message"] as? String)?.hasPrefix("Not started") == true ? line["file"] as? String : nil
        }
        #expect(notStarted.contains(files[2].lastPathComponent), "\(first.output.suffix(800))")
        // The file that was sending is paused, named once.
        let paused = first.jsonLines.filter { $0["event"] as? String == "paused" }.compactMap { $0["file"] as? String }
        #expect(paused == [files[0].lastPathComponent], "\(first.output.suffix(800))")
        for name in notStarted where objects {
            let stored = try? await storedBytes(dataDirectory: data + "/ferry", bucket: "batch", key: name)
            #expect(stored == nil, "\(name) was uploaded after Ctrl-C")
        }
        let second = try await FerryRun.run(arguments)
        #expect(second.status == 0, "\(second.error)")
        for file in files where objects {
            let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "batch", key: file.lastPathComponent)
            #expect(stored == (try Data(contentsOf: file)))
        }
        let listed = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"]).output
        #expect(objects || listed.contains("3 video(s)"), "\(listed)")
    }

    @Test(
        "a second ferry upload on a data directory whose embedded service another ferry upload runs joins that service; the first, stopped while the second sends, waits for it to end (saying so), and the second completes"
    )
    func secondUploadOutlivesFirst() async throws {
        let data = TemporaryDirectory.make("ferry-cli-join")
        defer { try? FileManager.default.removeItem(atPath: data) }
        // The first command's file is long enough to be sending still when the second starts (sparse: it is stopped
        // long before its end).
        let long = URL(fileURLWithPath: data + "/long.bin")
        #expect(FileManager.default.createFile(atPath: long.path, contents: nil))
        try FileHandle(forWritingTo: long).truncate(atOffset: 4 << 30)
        let other = try makeRandomFile(size: 128 * 1024 * 1024, in: data)
        let common = ["--data-dir", data + "/ferry", "--json", "--part-size", "5MiB", "--parallel", "1"]
        let firstSending = Signals()
        let secondSending = Signals()
        async let first = FerryRun.run(
            ["upload", long.path, "--bucket", "first"] + common,
            interruptWhen: { line in
                if FerryRun.progressed(to: 1)(line) { firstSending.signal() }
                return secondSending.count > 0
            })
        #expect(await firstSending.wait(for: 1, within: .seconds(120)))
        let second = try await FerryRun.run(
            ["upload", other.path, "--bucket", "second"] + common,
            interruptWhen: { line in
                if FerryRun.progressed(to: 1)(line) { secondSending.signal() }
                return false
            })
        let firstRun = try await first
        #expect(firstRun.status == 75, "\(firstRun.error)")
        #expect(firstRun.error.contains("another command is using the service"), "\(firstRun.error)")
        #expect(second.status == 0, "\(second.error)")
        let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "second", key: other.lastPathComponent)
        #expect(stored == (try Data(contentsOf: other)))
    }

    @Test(
        "a batch killed once two files were done, run again with a file more, skips them (the same video or object, not a second one) unless the file changed since, and sends the rest; a batch that ended done is forgotten",
        arguments: [["--transcode", "NoTranscode"], ["--protocol", "tus"], ["--bucket", "batch"]])
    func rerunSkipsFinished(_ options: [String]) async throws {
        let data = TemporaryDirectory.make("ferry-cli-rerun")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (files, arguments) = try Self.batch(of: 4, size: 8 * 1024 * 1024, in: data, options)
        let objects = options.contains("--bucket")
        // What a run made of each file by name (its VideoId, or its object's ETag), told by `event`: "media" for a video,
        // "completed" for an object, "skipped" for a file it did not send.
        func made(_ run: FerryRun, _ event: String) -> [String: String] {
            var made: [String: String] = [:]
            for line in run.jsonLines where line["event"] as? String == event {
                if let file = line["file"] as? String, let id = (line["VideoId"] ?? line["etag"] ?? line["ETag"]) as? String {
                    made[file] = id
                }
            }
            return made
        }
        let doneEvent = objects ? "completed" : "media"
        let second = files[1].lastPathComponent
        let first = try await FerryRun.run(
            arguments,
            interruptWhen: { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
                return object["event"] as? String == doneEvent && object["file"] as? String == second
            }, signal: SIGKILL)
        #expect(first.status == SIGKILL || first.status == 128 + SIGKILL, "\(first.status) \(first.error)")
        let firstMade = made(first, doneEvent)
        #expect(firstMade[files[0].lastPathComponent] != nil && firstMade[second] != nil, "\(first.output.suffix(800))")

        // The second file is replaced by other bytes: it is sent again; the first is skipped. The rerun names a file
        // more (one added to the folder since): the files it names are sent to the same place with the same details.
        let replacement = try makeRandomFile(size: 8 * 1024 * 1024, in: data)
        try FileManager.default.removeItem(at: files[1])
        try FileManager.default.moveItem(at: replacement, to: files[1])
        let added = try makeRandomFile(size: 1024 * 1024, in: data)
        let rerun = try await FerryRun.run(arguments + [added.path])
        #expect(rerun.status == 0, "\(rerun.error)")
        let skipped = made(rerun, "skipped")
        #expect(skipped == [files[0].lastPathComponent: firstMade[files[0].lastPathComponent] ?? "?"], "\(rerun.output.suffix(1500))")
        for file in files + [added] where objects {
            let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "batch", key: file.lastPathComponent)
            #expect(stored == (try Data(contentsOf: file)))
        }
        func videos() async throws -> String {
            try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"]).output
        }
        // Two from the first run, one for the changed file, one each for the last two (the one under way resumed) and
        // one for the file added.
        let listed = try await videos()
        #expect(objects || listed.contains("6 video(s)"), "\(listed)")

        // Done: the same command is a new batch that sends every file.
        let again = try await FerryRun.run(arguments)
        #expect(again.status == 0, "\(again.error)")
        #expect(made(again, "skipped").isEmpty, "\(again.output.suffix(800))")
        let listedAgain = try await videos()
        #expect(objects || listedAgain.contains("10 video(s)"), "\(listedAgain)")
    }

    @Test(
        "a run of one file killed once the video is made (here while --wait follows it), run again, prints that video and follows it, sending nothing: no second video; one whose video was deleted meanwhile sends the file again")
    func singleFileKilledAsDone() async throws {
        let data = TemporaryDirectory.make("ferry-cli-single-rerun")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let upload = ["upload", Self.sample, "--data-dir", data + "/ferry", "--json", "--transcode", "NoTranscode"]
        func videoIds(_ run: FerryRun, _ event: String) -> [String] {
            run.jsonLines.filter { $0["event"] as? String == event }.compactMap { $0["VideoId"] as? String }
        }
        let first = try await FerryRun.run(
            upload + ["--wait"], interruptWhen: { $0.contains("\"event\":\"media\"") }, signal: SIGKILL)
        #expect(first.status == SIGKILL || first.status == 128 + SIGKILL, "\(first.status) \(first.error)")
        let made = try #require(videoIds(first, "media").first, "\(first.output.suffix(800))")

        let rerun = try await FerryRun.run(upload + ["--wait"])
        #expect(rerun.status == 0, "\(rerun.output.suffix(800)) \(rerun.error)")
        #expect(videoIds(rerun, "skipped") == [made], "\(rerun.output.suffix(800))")
        #expect(!rerun.jsonLines.contains { $0["event"] as? String == "progress" }, "bytes were sent again: \(rerun.output.prefix(800))")
        let listed = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"]).output
        #expect(listed.contains("1 video(s)") && listed.contains(made), "\(listed)")

        // That run ended done: the same command is a new upload of the file, a video of its own.
        let again = try await FerryRun.run(upload)
        #expect(again.status == 0, "\(again.error)")
        #expect(videoIds(again, "media").count == 1 && videoIds(again, "skipped").isEmpty, "\(again.output.suffix(800))")

        // Killed again; the video it made is deleted before the rerun, which sends the file as a new video.
        let killed = try await FerryRun.run(
            upload + ["--wait"], interruptWhen: { $0.contains("\"event\":\"media\"") }, signal: SIGKILL)
        let deleted = try #require(videoIds(killed, "media").first, "\(killed.output.suffix(800))")
        let removal = try await FerryRun.run(["videos", "delete", deleted, "--data-dir", data + "/ferry"])
        #expect(removal.status == 0, "\(removal.output) \(removal.error)")
        let resent = try await FerryRun.run(upload)
        #expect(resent.status == 0, "\(resent.error)")
        let fresh = videoIds(resent, "media")
        #expect(fresh.count == 1 && fresh.first != deleted && videoIds(resent, "skipped").isEmpty, "\(resent.output.suffix(800))")
    }

    @Test("a rerun skips a file whose video failed for the file's sake (exit 1 again, no second video) and sends again one whose processing the service gave up on")
    func rerunAfterTranscodeFail() async throws {
        let data = TemporaryDirectory.make("ferry-cli-failed-rerun")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let broken = data + "/broken.mp4"
        try Data((0..<64 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: URL(fileURLWithPath: broken))
        let upload = ["upload", broken, "--data-dir", data + "/ferry", "--json", "--wait"]
        func videoIds(_ run: FerryRun, _ event: String) -> [String] {
            run.jsonLines.filter { $0["event"] as? String == event }.compactMap { $0["VideoId"] as? String }
        }
        let first = try await FerryRun.run(upload)
        #expect(first.status == 1, "\(first.output.suffix(800)) \(first.error)")
        let made = try #require(videoIds(first, "media").first, "\(first.output.suffix(800))")
        #expect(first.error.contains("TranscodeFail"), "\(first.error)")

        // The same bytes fail the same way: the rerun follows the failed video again and sends nothing.
        let rerun = try await FerryRun.run(upload)
        #expect(rerun.status == 1, "\(rerun.output.suffix(800)) \(rerun.error)")
        #expect(videoIds(rerun, "skipped") == [made] && videoIds(rerun, "media").isEmpty, "\(rerun.output.suffix(800))")

        // The service gave up on it (its jobs failed past their retries): the rerun sends the file as a new video.
        let catalog = try SQLiteCatalog(path: data + "/ferry/catalog.sqlite")
        try await catalog.updateVideo(made) { video in
            video.errorCode = "ProcessingFailed"
            return .save()
        }
        let resent = try await FerryRun.run(upload)
        #expect(resent.status == 1, "\(resent.output.suffix(800)) \(resent.error)")
        let fresh = videoIds(resent, "media")
        #expect(fresh.count == 1 && fresh.first != made && videoIds(resent, "skipped").isEmpty, "\(resent.output.suffix(800))")
        let listed = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"]).output
        #expect(listed.contains("2 video(s)"), "\(listed)")
    }

    @Test(
        "an upload's own record (a stream record, the media journal's entry) a kill left beside the file's batch record goes when the rerun ends done: the same command after that sends the file as a new video, not the finished upload again; a record of another upload stays",
        arguments: ["tus", "multipart"])
    func staleUploadRecord(_ wire: String) async throws {
        let data = TemporaryDirectory.make("ferry-cli-stale-\(wire)")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (file, later) = (data + "/clip.mp4", data + "/later.mp4")
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 24 * 1024 * 1024, in: data).path, toPath: file)
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 64 * 1024 * 1024, in: data).path, toPath: later)
        // One file at a time: the run is still sending the second when the first's result is printed.
        let upload = [
            "upload", file, later, "--data-dir", data + "/ferry", "--transcode", "NoTranscode", "--jobs", "1", "--json",
        ] + (wire == "multipart" ? ["--part-size", "5MiB", "--parallel", "1"] : ["--protocol", wire, "--part-size", "2MiB"])
        func videoIds(_ run: FerryRun, _ event: String) -> [String] {
            run.jsonLines.filter { $0["event"] as? String == event && $0["file"] as? String == "clip.mp4" }
                .compactMap { $0["VideoId"] as? String }
        }
        // Where the upload of clip.mp4 keeps its own record: a stream record, or the media upload journal's entry.
        let directory = data + "/ferry/checkpoints" + (wire == "multipart" ? "" : "/streams")
        func records() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: directory).filter {
                $0.hasSuffix(".json") && (wire != "multipart" || $0.hasPrefix("media-"))
            }
        }
        /// Pauses an upload of clip.mp4 (keeping its record's bytes), then kills the run once clip.mp4 is stored
        /// and its result printed: its batch record is written and its own record removed.
        func killedOnceStored() async throws -> (made: String, name: String, record: Data) {
            let paused = try await FerryRun.run(upload, interruptWhen: FerryRun.progressed(to: 4 * 1024 * 1024))
            #expect(paused.status == 75, "\(paused.output.suffix(500)) \(paused.error)")
            let names = try records()
            let name = try #require(names.count == 1 ? names.first : nil, "records: \(names)")
            let record = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            let killed = try await FerryRun.run(
                upload, interruptWhen: { $0.contains("\"event\":\"media\"") && $0.contains("clip.mp4") }, signal: SIGKILL)
            try #require(killed.status == SIGKILL || killed.status == 128 + SIGKILL, "\(killed.status) \(killed.output.suffix(800))")
            let made = try #require(videoIds(killed, "media").first, "\(killed.output.suffix(800))")
            #expect(try records().isEmpty)
            return (made, name, record)
        }

        if wire == "tus" {
            // A record of another upload of the file (another command's, paused) is not this batch's: it stays.
            let (made, name, record) = try await killedOnceStored()
            let foreign = String(decoding: record, as: UTF8.self).replacingOccurrences(of: made, with: String(repeating: "f", count: made.count))
            try Data(foreign.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
            let rerun = try await FerryRun.run(upload)
            #expect(rerun.status == 0 && videoIds(rerun, "skipped") == [made], "\(rerun.output.suffix(800)) \(rerun.error)")
            #expect(try records() == [name], "another upload's record went with the batch")
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
        // The batch's own leftover, put back as a kill between the batch record and its removal leaves it.
        let (made, name, record) = try await killedOnceStored()
        try record.write(to: URL(fileURLWithPath: directory + "/" + name))
        let rerun = try await FerryRun.run(upload)
        #expect(rerun.status == 0, "\(rerun.output.suffix(800)) \(rerun.error)")
        #expect(videoIds(rerun, "skipped") == [made] && videoIds(rerun, "media").isEmpty, "\(rerun.output.suffix(800))")
        #expect(try records().isEmpty, "the upload's record outlived a run that ended done")

        let again = try await FerryRun.run(upload)
        #expect(again.status == 0, "\(again.output.suffix(800)) \(again.error)")
        let fresh = videoIds(again, "media")
        #expect(fresh.count == 1 && fresh.first != made, "\(again.output.suffix(800))")
    }

    @Test(
        "a finished file whose batch record cannot be written is told on standard error, and its upload's own record (a stream record, the media journal's entry) stays: the same command run after a kill finds the file stored as the same video",
        arguments: ["tus", "multipart"])
    func unwritableBatchRecord(_ wire: String) async throws {
        let data = TemporaryDirectory.make("ferry-cli-unrecorded-\(wire)")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (file, later) = (data + "/clip.mp4", data + "/later.mp4")
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 8 * 1024 * 1024, in: data).path, toPath: file)
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 64 * 1024 * 1024, in: data).path, toPath: later)
        // Where batch records go is a file: every batch record fails (as on a full device or a read-only directory,
        // which a test run as root cannot make), while the stream records beside it are written.
        try FileManager.default.createDirectory(atPath: data + "/ferry/checkpoints", withIntermediateDirectories: true)
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: data + "/ferry/checkpoints/batches"))
        let upload = [
            "upload", file, later, "--data-dir", data + "/ferry", "--transcode", "NoTranscode", "--jobs", "1", "--json",
        ] + (wire == "multipart" ? ["--part-size", "5MiB", "--parallel", "1"] : ["--protocol", wire, "--part-size", "2MiB"])
        func videoIds(_ run: FerryRun) -> [String] {
            run.jsonLines.filter { $0["event"] as? String == "media" && $0["file"] as? String == "clip.mp4" }
                .compactMap { $0["VideoId"] as? String }
        }
        let killed = try await FerryRun.run(
            upload, interruptWhen: { $0.contains("\"event\":\"media\"") && $0.contains("clip.mp4") }, signal: SIGKILL)
        try #require(killed.status == SIGKILL || killed.status == 128 + SIGKILL, "\(killed.status) \(killed.output.suffix(800))")
        let made = try #require(videoIds(killed).first, "\(killed.output.suffix(800))")
        #expect(killed.error.contains("clip.mp4 is done, but its record could not be written"), "\(killed.error)")
        let rerun = try await FerryRun.run(upload)
        #expect(rerun.status == 0, "\(rerun.output.suffix(800)) \(rerun.error)")
        #expect(videoIds(rerun) == [made], "a second video of clip.mp4: \(rerun.output.suffix(800))")
    }

    @Test("upload --wait ends a video the service gave up on (ProcessingFailed) with exit 75, and the same command sends the file again as a new video")
    func followedVideoTheServiceGaveUpOn() async throws {
        let data = TemporaryDirectory.make("ferry-cli-gave-up")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let upload = ["upload", Self.sample, "--data-dir", data + "/ferry", "--json", "--wait"]
        func videoIds(_ run: FerryRun, _ event: String) -> [String] {
            run.jsonLines.filter { $0["event"] as? String == event }.compactMap { $0["VideoId"] as? String }
        }
        // While the run follows the video, the service gives up on it (as after its jobs' last retry). The catalog
        // is opened once the run has printed the video (stored, so the run made the catalog long before).
        let printed = PrintedFlag()
        let gaveUp = Task {
            let deadline = ContinuousClock.now + .seconds(120)
            var opened: SQLiteCatalog?
            while ContinuousClock.now < deadline {
                if opened == nil, printed.value.withLock({ $0 }) {
                    opened = try SQLiteCatalog(path: data + "/ferry/catalog.sqlite")
                }
                if let catalog = opened,
                    let video = try await catalog.videos(status: nil, cateId: nil, tag: nil, owner: nil, offset: 0, limit: 1)
                        .videos.first, ["UploadSucc", "Transcoding"].contains(video.status)
                {
                    try await catalog.updateVideo(video.videoId) { video in
                        guard ["UploadSucc", "Transcoding"].contains(video.status) else { return .keep }
                        video.status = "TranscodeFail"
                        video.errorCode = "ProcessingFailed"
                        video.errorMessage = "Processing failed 3 times; last: the store is unavailable"
                        return .save(cancelJobs: true)
                    }
                    return video.videoId
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            return ""
        }
        let first = try await FerryRun.run(upload, interruptWhen: { line in
            if line.contains("\"event\":\"media\"") { printed.value.withLock { $0 = true } }
            return false
        })
        let failed = try await gaveUp.value
        #expect(first.status == 75, "\(first.output.suffix(800)) \(first.error)")
        #expect(videoIds(first, "media") == [failed], "\(first.output.suffix(800))")
        #expect(first.error.contains("the same command sends it again"), "\(first.error)")

        let rerun = try await FerryRun.run(upload)
        #expect(rerun.status == 0, "\(rerun.output.suffix(800)) \(rerun.error)")
        let fresh = videoIds(rerun, "media")
        #expect(fresh.count == 1 && fresh.first != failed && videoIds(rerun, "skipped").isEmpty, "\(rerun.output.suffix(800))")
    }

    @Test("Ctrl-C while the service holds the requests before an upload begins (its bucket's check, its video's creation) pauses the run at once (exit 75), multipart and stream")
    func interruptBeforeTheUploadBegins() async throws {
        let data = TemporaryDirectory.make("ferry-cli-silent")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 1024, in: data)
        // A service that takes connections and never answers.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 64) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let environment = [
            "FERRY_ENDPOINT": "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))",
            "FERRY_ACCESS_KEY_ID": "FKIASILENT000000", "FERRY_SECRET_ACCESS_KEY": "silent-secret-0123456789",
        ]
        let clip = data + "/clip.mp4"
        try FileManager.default.copyItem(atPath: file.path, toPath: clip)
        let destinations = [[file.path, "--bucket", "silent"], [clip, "--transcode", "NoTranscode"]]
        for wire in [[], ["--protocol", "tus"]] {
            for destination in destinations {
                let started = ContinuousClock.now
                let run = try await FerryRun.run(
                    ["upload"] + destination + ["--record-dir", data + "/records", "--json"] + wire,
                    environment: environment, signalAfter: 2)
                #expect(run.status == 75, "\(wire + destination): \(run.output.suffix(500)) \(run.error)")
                #expect(ContinuousClock.now - started < .seconds(30), "\(wire + destination): the run went on for \(ContinuousClock.now - started)")
            }
        }

        // A rerun asks the service whether a video an earlier run finished is still there (deleted, or given up on,
        // it is sent again): held, that question gives way to a Ctrl-C too.
        let (first, second) = (data + "/first.mp4", data + "/second.mp4")
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 1024 * 1024, in: data).path, toPath: first)
        try FileManager.default.moveItem(atPath: try makeRandomFile(size: 64 * 1024 * 1024, in: data).path, toPath: second)
        let batch = ["upload", first, second, "--transcode", "NoTranscode", "--jobs", "1", "--json"]
        let killed = try await FerryRun.run(
            batch + ["--data-dir", data + "/ferry", "--part-size", "5MiB", "--parallel", "1"],
            interruptWhen: { $0.contains("\"event\":\"media\"") && $0.contains("first.mp4") }, signal: SIGKILL)
        try #require(killed.status == SIGKILL || killed.status == 128 + SIGKILL, "\(killed.status) \(killed.output.suffix(800))")
        let started = ContinuousClock.now
        let rerun = try await FerryRun.run(
            batch + ["--record-dir", data + "/ferry/checkpoints"], environment: environment, signalAfter: 2)
        #expect(rerun.status == 75, "\(rerun.output.suffix(500)) \(rerun.error)")
        #expect(ContinuousClock.now - started < .seconds(30), "the rerun went on for \(ContinuousClock.now - started)")
    }

    @Test("Ctrl-C as the upload ends stops upload --wait from following the video (exit 75); the service goes on processing it")
    func interruptBeforeFollowing() async throws {
        let data = TemporaryDirectory.make("ferry-cli-wait-stop")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let run = try await FerryRun.run(
            ["upload", Self.sample, "--data-dir", data + "/ferry", "--wait", "--json"],
            interruptWhen: { $0.contains("\"event\":\"media\"") })
        #expect(run.status == 75, "\(run.output.suffix(800)) \(run.error)")
        #expect(
            run.jsonLines.contains { ($0["message"] as? String)?.hasPrefix("Stopped following") == true },
            "\(run.output.suffix(800))")
        #expect(!run.jsonLines.contains { $0["event"] as? String == "processed" }, "\(run.output.suffix(800))")
    }

    @Test("a record directory that cannot be made stops the run before anything is made: no video is left Uploading")
    func unusableRecordDirectory() async throws {
        let data = TemporaryDirectory.make("ferry-cli-records")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let blocker = data + "/not-a-directory"
        try Data("x".utf8).write(to: URL(fileURLWithPath: blocker))
        let file = try makeRandomFile(size: 1024 * 1024, in: data)
        for wire in [[], ["--protocol", "tus"]] {
            let run = try await FerryRun.run(
                ["upload", file.path, "--data-dir", data + "/ferry", "--record-dir", blocker + "/records"] + wire)
            #expect(run.status == 1, "\(run.output) \(run.error)")
            #expect(run.error.contains("record directory \(blocker)/records cannot be used: Not a directory."), "\(run.error)")
        }
        let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
        #expect(list.output.contains("0 video(s)"), "\(list.output)")
    }

    @Test("upload --protocol tus sends an object as one resumable tus stream; Ctrl-C pauses with exit 75 and the same command resumes it from the server's offset")
    func tusStreamInterruptAndResume() async throws {
        let data = TemporaryDirectory.make("ferry-cli-tus")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
        let arguments = [
            "upload", file.path, "--data-dir", data + "/ferry", "--bucket", "streams", "--key", "tus.bin", "--protocol", "tus",
            "--part-size", "2MiB", "--json",
        ]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 4 * 1024 * 1024, field: "stored"))
        #expect(first.status == 75, "\(first.output.suffix(500)) \(first.error)")
        #expect(first.linesNotJSON.isEmpty, "\(first.linesNotJSON)")
        // "bytes" counts what was sent, "stored" what the server confirmed (whole 2 MiB appends).
        let progress = first.jsonLines.filter { $0["event"] as? String == "progress" }
        #expect(progress.allSatisfy { ($0["stored"] as? Int ?? -1) <= ($0["bytes"] as? Int ?? 0) })
        let acknowledged = progress.compactMap { $0["stored"] as? Int }.max() ?? 0
        #expect(acknowledged >= 4 * 1024 * 1024 && acknowledged % (2 * 1024 * 1024) == 0)
        // The record names the upload's URL (its credential): the user's alone.
        let streams = data + "/ferry/checkpoints/streams"
        let records = try FileManager.default.contentsOfDirectory(atPath: streams).filter { $0.hasSuffix(".json") }
        #expect(records.count == 1)
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        #expect(try mode(streams) == 0o700 && mode(streams + "/" + (records.first ?? "")) == 0o600)
        // The same file sent elsewhere is another upload: it does not continue the first one's.
        let elsewhere = try await FerryRun.run(arguments.map { $0 == "tus.bin" ? "other.bin" : $0 })
        #expect(elsewhere.status == 0, "\(elsewhere.error)")
        #expect(elsewhere.linesNotJSON.isEmpty, "\(elsewhere.linesNotJSON)")
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "streams", key: "other.bin") == (try Data(contentsOf: file)))
        let second = try await FerryRun.run(arguments)
        #expect(second.status == 0, "\(second.error)")
        // The rerun's first progress is the server's offset: what the first run had acknowledged, or more.
        let resumedAt = second.jsonLines.first { $0["event"] as? String == "progress" }?["stored"] as? Int ?? 0
        #expect(resumedAt >= acknowledged, "resumed at \(resumedAt) after \(acknowledged) had been acknowledged")
        let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "streams", key: "tus.bin")
        #expect(stored == (try Data(contentsOf: file)))
    }

    @Test("a stream upload of a file replaced since (same size and time, other bytes) starts afresh and ends the old upload on the server; --cancel ends it too")
    func streamOfChangedFile() async throws {
        let data = TemporaryDirectory.make("ferry-cli-changed")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 16 * 1024 * 1024, in: data)
        // tus: its 2 MiB appends let the first run stop part way (an IETF upload is one append, over at once here).
        for wire in ["tus"] {
            let key = "\(wire).bin"
            let arguments = [
                "upload", file.path, "--data-dir", data + "/ferry", "--bucket", "changes", "--key", key, "--protocol", wire,
                "--part-size", "2MiB", "--json",
            ]
            let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 4 * 1024 * 1024))
            #expect(first.status == 75, "\(wire): \(first.output.suffix(500)) \(first.error)")
            #expect(try await uploadsInProgress(dataDirectory: data + "/ferry", bucket: "changes") == [key])
            // Another file copied over it with the same size and time (cp -p, rsync -a).
            let modified = try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date
            let replacement = try makeRandomFile(size: 16 * 1024 * 1024, in: data)
            try Data(contentsOf: replacement).write(to: file, options: .atomic)
            try FileManager.default.setAttributes([.modificationDate: modified as Any], ofItemAtPath: file.path)
            let second = try await FerryRun.run(arguments)
            #expect(second.status == 0, "\(wire): \(second.error)")
            #expect(second.output.contains("changed since its upload started"), "\(wire): \(second.output.suffix(500))")
            #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "changes", key: key) == (try Data(contentsOf: file)))
            #expect(try await uploadsInProgress(dataDirectory: data + "/ferry", bucket: "changes").isEmpty, "\(wire)")
        }
        // --cancel ends an interrupted stream on the server and forgets it.
        let arguments = [
            "upload", file.path, "--data-dir", data + "/ferry", "--bucket", "changes", "--key", "cancelled.bin", "--protocol",
            "tus", "--part-size", "2MiB", "--json",
        ]
        let interrupted = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 4 * 1024 * 1024))
        #expect(interrupted.status == 75, "\(interrupted.error)")
        let cancelled = try await FerryRun.run(arguments + ["--cancel"])
        #expect(cancelled.status == 0, "\(cancelled.error)")
        #expect(try await uploadsInProgress(dataDirectory: data + "/ferry", bucket: "changes").isEmpty)
        let streams = data + "/ferry/checkpoints/streams"
        #expect(try FileManager.default.contentsOfDirectory(atPath: streams).filter { $0.hasSuffix(".json") }.isEmpty)
    }

    @Test("a multipart upload of a file changed since its checkpoint is refused with the way out named; --no-resume then uploads it afresh")
    func multipartOfChangedFile() async throws {
        let data = TemporaryDirectory.make("ferry-cli-changed-parts")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
        let arguments = [
            "upload", file.path, "--data-dir", data + "/ferry", "--bucket", "parts", "--key", "p.bin", "--part-size", "5MiB",
            "--parallel", "1", "--json",
        ]
        let first = try await FerryRun.run(arguments, interruptWhen: FerryRun.progressed(to: 5 * 1024 * 1024))
        #expect(first.status == 75, "\(first.error)")
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([1, 2, 3]))
        try handle.close()
        let refused = try await FerryRun.run(arguments)
        #expect(refused.status == 1 && refused.error.contains("--no-resume"), "\(refused.error)")
        let fresh = try await FerryRun.run(arguments + ["--no-resume"])
        #expect(fresh.status == 0, "\(fresh.error)")
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "parts", key: "p.bin") == (try Data(contentsOf: file)))
        #expect(try await uploadsInProgress(dataDirectory: data + "/ferry", bucket: "parts").isEmpty)
    }

    @Test("an upload the service fails past its retries exits 75 with its checkpoint kept, and the same command then finishes it")
    func failurePastRetriesIsResumable() async throws {
        try await Self.withService("ferry-cli-retries") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let file = try makeRandomFile(size: 12 * 1024 * 1024, in: data)
                let arguments = [
                    "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "retries", "--key", "r.bin", "--part-size", "5MiB",
                    "--max-retries", "1", "--record-dir", data + "/records", "--json",
                ]
                // Every part is refused: the upload gives up, resumably.
                proxy.inject(.status(503, code: "ServiceUnavailable"), when: .method("PUT").and(.query(contains: "partNumber")), times: 1000)
                let failed = try await FerryRun.run(arguments, environment: environment)
                #expect(failed.status == 75, "\(failed.output.suffix(300)) \(failed.error)")
                #expect(failed.error.contains("run the same command again to resume"), "\(failed.error)")
                proxy.clearFaults()
                let finished = try await FerryRun.run(arguments, environment: environment)
                #expect(finished.status == 0, "\(finished.error)")
                let object = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("retries", "r.bin")
                let expected = try Data(contentsOf: file)
                #expect(object.status == 200 && Data(object.body) == expected)
            }
        }
    }

    @Test("an object upload whose credentials expire midway ends (exit 1) with its checkpoint kept, instead of waiting for ever for fresher ones; the same command with fresh credentials finishes it")
    func expiredCredentialsEndTheRun() async throws {
        try await Self.withService("ferry-cli-expired") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let file = try makeRandomFile(size: 12 * 1024 * 1024, in: data)
                let arguments = [
                    "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "expiry", "--key", "e.bin", "--part-size", "5MiB",
                    "--parallel", "1", "--record-dir", data + "/records", "--json",
                ]
                // From the second part on, the service says the session token expired (as a temporary credential does).
                proxy.inject(.status(400, code: "ExpiredToken"), when: .method("PUT") && .partNumber(2), times: 1000)
                let expired = try await FerryRun.run(arguments, environment: environment)
                #expect(expired.status == 1, "\(expired.output.suffix(300)) \(expired.error)")
                #expect(expired.error.contains("the credentials expired; the checkpoint is kept"), "\(expired.error)")
                proxy.clearFaults()
                let finished = try await FerryRun.run(arguments, environment: environment)
                #expect(finished.status == 0, "\(finished.error)")
                let completed = try #require(finished.jsonLines.first { $0["event"] as? String == "completed" })
                #expect((completed["partsResumed"] as? Int ?? 0) >= 1, "\(completed)")
                let object = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("expiry", "e.bin")
                let expected = try Data(contentsOf: file)
                #expect(object.status == 200 && Data(object.body) == expected)
            }
        }
    }

    @Test("a multipart upload with adaptive part sizes whose completion answer is lost: the rerun finds the completed object by its checkpoint and sends nothing again")
    func lostCompletionAnswer() async throws {
        try await Self.withService("ferry-cli-completion") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                // No --part-size: parts start at 5 MiB and grow on a fast link, so the parts are of more than one size.
                let file = try makeRandomFile(size: 40 * 1024 * 1024, in: data)
                let arguments = [
                    "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "completion", "--key", "c.bin",
                    "--max-retries", "1", "--record-dir", data + "/records", "--json",
                ]
                // The server completes the upload, and every answer to CompleteMultipartUpload is lost.
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("POST").and(.query(contains: "uploadId")), times: 1000)
                let failed = try await FerryRun.run(arguments, environment: environment)
                #expect(failed.status == 75, "\(failed.output.suffix(300)) \(failed.error)")
                // Fewer than 8 parts for 40 MiB, the first of them 5 MiB: the parts are of more than one size.
                let parts = Set(proxy.log.filter { $0.method == "PUT" }.compactMap { entry in
                    entry.query.split(separator: "&").first { $0.hasPrefix("partNumber=") }
                })
                #expect((2..<8).contains(parts.count), "\(parts)")
                proxy.clearFaults()
                let logged = proxy.log.count
                let finished = try await FerryRun.run(arguments, environment: environment)
                #expect(finished.status == 0, "\(finished.error)")
                let rerun = proxy.log.dropFirst(logged)
                // No part, no new upload, no completion: a look at the parts (the upload is gone) and a HEAD of the object.
                let sent = rerun.filter { ($0.method == "PUT" && $0.query.contains("partNumber")) || $0.method == "POST" }
                #expect(sent.isEmpty && rerun.contains { $0.method == "HEAD" }, "\(rerun.map { "\($0.method) \($0.query)" })")
                let object = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("completion", "c.bin")
                let expected = try Data(contentsOf: file)
                #expect(object.status == 200 && Data(object.body) == expected)
                let records = (try? FileManager.default.contentsOfDirectory(atPath: data + "/records")) ?? []
                #expect(records.filter { !$0.hasPrefix(".") }.isEmpty, "\(records)")
            }
        }
    }

    @Test("a CreateMultipartUpload whose answer is lost is retried, and the upload it made is aborted: none is left open")
    func lostCreationAnswer() async throws {
        try await Self.withService("ferry-cli-creation") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let file = try makeRandomFile(size: 12 * 1024 * 1024, in: data)
                // The server creates the upload; its answer never reaches the client, which asks again.
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("POST").and(.query(contains: "uploads")), times: 1)
                let run = try await FerryRun.run(
                    [
                        "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "creation", "--key", "c.bin",
                        "--part-size", "5MiB", "--record-dir", data + "/records", "--json",
                    ], environment: environment)
                #expect(run.status == 0, "\(run.error)")
                let s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
                #expect(proxy.log.filter { $0.method == "POST" && $0.query.contains("uploads") }.count == 2)
                let open = try await s3.send("GET", "/creation", query: [("uploads", "")]).text
                #expect(!open.contains("<Upload>"), "\(open)")
                let expected = try Data(contentsOf: file)
                #expect(Data(try await s3.get("creation", "c.bin").body) == expected)
            }
        }
    }

    @Test("ferry upload's edges: a pipe is refused, a refusal a rerun would meet exits 1, a prefix-scoped key uploads without creating the bucket, an endpoint ending in / works for streams, a failed file leaves the rest of a batch to go on, an image goes as a tus stream")
    func uploadEdges() async throws {
        try await Self.withService("ferry-cli-edges") { server, root, environment, data in
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
            #expect(try await s3.createBucket("edges").status == 200)
            let small = try makeRandomFile(size: 1000, in: data)

            // A bucket that does not exist is created, and said so (a mistyped name is seen); an existing one is not.
            let made = try await FerryRun.run(
                ["upload", small.path, "--endpoint", server.endpoint, "--bucket", "made-here"], environment: environment)
            #expect(made.status == 0 && made.output.contains("Created the bucket made-here: it did not exist."), "\(made.output)")
            let existing = try await FerryRun.run(
                ["upload", small.path, "--endpoint", server.endpoint, "--bucket", "made-here", "--key", "again"],
                environment: environment)
            #expect(existing.status == 0 && !existing.output.contains("Created the bucket"), "\(existing.output)")

            // A pipe has no size to plan by: refused, nothing stored.
            let fifo = data + "/pipe.bin"
            #expect(mkfifo(fifo, 0o600) == 0)
            let piped = try await FerryRun.run(
                ["upload", fifo, "--endpoint", server.endpoint, "--bucket", "edges"], environment: environment)
            #expect(piped.status == 1 && piped.error.contains("not a regular file"), "\(piped.error)")
            #expect(try await s3.get("edges", "pipe.bin").status == 404)

            // A key the server refuses (400): the same command would meet it again, so exit 1 and no advice to rerun.
            let refused = try await FerryRun.run(
                ["upload", small.path, "--endpoint", server.endpoint, "--bucket", "edges", "--key", "a/../b"],
                environment: environment)
            #expect(refused.status == 1, "\(refused.error)")
            #expect(!refused.error.contains("run the same command again"), "\(refused.error)")

            // A key scoped to a prefix may not create buckets; it uploads into its prefix all the same.
            let admin = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: .init(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
            let scoped = try await admin.createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "edges", keyPrefix: "users/42/")]))
            let scopedEnvironment = ["HOME": data, "FERRY_ACCESS_KEY_ID": scoped.accessKeyId, "FERRY_SECRET_ACCESS_KEY": scoped.secretAccessKey]
            for wire in [[], ["--protocol", "tus"]] {
                let key = "users/42/" + (wire.isEmpty ? "multipart" : "tus") + ".bin"
                let run = try await FerryRun.run(
                    ["upload", small.path, "--endpoint", server.endpoint + "/", "--bucket", "edges", "--key", key] + wire,
                    environment: scopedEnvironment)
                #expect(run.status == 0, "\(wire): \(run.error)")
                #expect(try await s3.get("edges", key).body.count == 1000)
            }

            // One file of a batch fails past the retries: the files after it are still uploaded, and the run exits 75.
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let big = try makeRandomFile(size: 6 * 1024 * 1024, in: data)
                proxy.inject(.status(503, code: "ServiceUnavailable"), when: .method("PUT").and(.path(contains: big.lastPathComponent)), times: 1000)
                let files = try (1...2).map { index -> String in
                    let path = data + "/after-\(index).bin"
                    try Data(repeating: UInt8(index), count: 100).write(to: URL(fileURLWithPath: path))
                    return path
                }
                let batch = try await FerryRun.run(
                    ["upload", big.path] + files + [
                        "--endpoint", proxy.endpoint, "--bucket", "edges", "--jobs", "1", "--max-retries", "1",
                        "--part-size", "5MiB", "--record-dir", data + "/records",
                    ], environment: environment)
                #expect(batch.status == 75, "\(batch.error)")
                for path in files { #expect(try await s3.get("edges", URL(fileURLWithPath: path).lastPathComponent).status == 200) }
                // A video whose parts the service refuses past the retries: resumable, as an object upload is (75).
                let clip = data + "/clip.mp4"
                try FileManager.default.copyItem(atPath: big.path, toPath: clip)
                proxy.inject(.status(503, code: "ServiceUnavailable"), when: .method("PUT").and(.path(contains: "/video/")), times: 1000)
                let media = try await FerryRun.run(
                    ["upload", clip, "--endpoint", proxy.endpoint, "--max-retries", "1", "--part-size", "5MiB", "--record-dir", data + "/records"],
                    environment: environment)
                #expect(media.status == 75 && media.error.contains("run the same command again"), "\(media.error)")
            }

            // An image as a tus stream: its upload URL comes with it.
            let png = data + "/poster.png"
            try Data(repeating: 7, count: 5000).write(to: URL(fileURLWithPath: png))
            let image = try await FerryRun.run(
                ["upload", png, "--endpoint", server.endpoint, "--protocol", "tus", "--json"], environment: environment)
            #expect(image.status == 0, "\(image.error)")

            // --cancel of a run stopped while its upload was being begun, of which the service lists nothing: said so,
            // not that nothing is left.
            let cancelRecords = data + "/records-cancel"
            let identity = ObjectStorageClient(endpoint: URL(string: server.endpoint)!, credentials: .init(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey)).checkpointServiceIdentity
            let id = CheckpointStore.identifier(
                endpoint: identity, bucket: "edges", key: "begun.bin", filePath: small.standardizedFileURL.path)
            try CheckpointStore(directory: URL(fileURLWithPath: cancelRecords)).saveIntent(id, at: Date().addingTimeInterval(-3600))
            let cancelled = try await FerryRun.run(
                ["upload", small.path, "--endpoint", server.endpoint, "--bucket", "edges", "--key", "begun.bin", "--cancel",
                 "--record-dir", cancelRecords], environment: environment)
            #expect(cancelled.status == 0, "\(cancelled.error)")
            #expect(cancelled.output.contains("lists no upload of that time") && !cancelled.output.contains("nothing is left"), "\(cancelled.output)")
        }
    }

    /// Runs `body` with a `ferry serve` (no media workers) in a temporary directory, the root key, the environment
    /// `ferry` runs with as that key, and the directory.
    static func withService(
        _ name: String,
        _ body: (FerryExecutable.Server, SigV4Credentials, [String: String], String) async throws -> Void
    ) async throws {
        let data = TemporaryDirectory.make(name)
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/service", arguments: ["--media-workers", "0"], environment: ["HOME": data])
        let root = try rootCredentials(dataDirectory: data + "/service")
        let environment = ["HOME": data, "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey]
        do {
            try await body(server, root, environment, data)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test("a command takes one set of credentials whole (a session token left from an AWS session is not sent with a Ferry key) and signs for FERRY_REGION")
    func credentialSetAndRegion() async throws {
        let data = TemporaryDirectory.make("ferry-cli-region")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/service", arguments: ["--media-workers", "0", "--region", "eu-west-1"],
            environment: ["HOME": data])
        let root = try rootCredentials(dataDirectory: data + "/service")
        let keys = [
            "HOME": data, "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey,
            "AWS_SESSION_TOKEN": "left-from-another-session",
        ]
        let list = try await FerryRun.run(
            ["videos", "list", "--endpoint", server.endpoint], environment: keys.merging(["FERRY_REGION": "eu-west-1"]) { $1 })
        #expect(list.status == 0, "\(list.output) \(list.error)")
        // Signed for the default region, the same command is refused: the region it signs for is the variable's.
        let defaulted = try await FerryRun.run(["videos", "list", "--endpoint", server.endpoint], environment: keys)
        #expect(defaulted.status != 0, "\(defaulted.output)")
        let half = try await FerryRun.run(
            ["videos", "list", "--endpoint", server.endpoint],
            environment: ["HOME": data, "FERRY_ACCESS_KEY_ID": root.accessKeyId, "AWS_SECRET_ACCESS_KEY": "x"])
        #expect(half.status != 0 && half.error.contains("FERRY_SECRET_ACCESS_KEY"), "\(half.error)")
        let awsHalf = try await FerryRun.run(
            ["videos", "list", "--endpoint", server.endpoint],
            environment: ["HOME": data, "AWS_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": "x"])
        #expect(awsHalf.status == 64, "\(awsHalf.error)")
        #expect(awsHalf.error.contains("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY: set both."), "\(awsHalf.error)")
        await server.stop()
        // FERRY_REGION set to nothing is not a region: the server and the commands take the default.
        let unset = try await FerryExecutable.Server.start(
            dataDirectory: data + "/unset", arguments: ["--media-workers", "0"], environment: ["HOME": data, "FERRY_REGION": ""])
        let unsetRoot = try rootCredentials(dataDirectory: data + "/unset")
        let listed = try await FerryRun.run(
            ["videos", "list", "--endpoint", unset.endpoint],
            environment: [
                "HOME": data, "FERRY_ACCESS_KEY_ID": unsetRoot.accessKeyId, "FERRY_SECRET_ACCESS_KEY": unsetRoot.secretAccessKey,
                "FERRY_REGION": "",
            ])
        #expect(listed.status == 0, "\(listed.output) \(listed.error)")
        await unset.stop()

        // A server whose root key came from its environment keeps none in its data directory: a command on that
        // directory without credentials says so at once, and with them talks to it.
        let given = ["FERRY_ACCESS_KEY_ID": "FKIAGIVENROOT0001", "FERRY_SECRET_ACCESS_KEY": "given-root-secret-0001"]
        let envRoot = try await FerryExecutable.Server.start(
            dataDirectory: data + "/env-root", arguments: ["--media-workers", "0"],
            environment: given.merging(["HOME": data]) { $1 })
        let keyless = try await FerryRun.run(["videos", "list", "--data-dir", data + "/env-root"], environment: ["HOME": data])
        #expect(keyless.status == 1, "\(keyless.output) \(keyless.error)")
        #expect(keyless.error.contains("this command cannot read its root key there"), "\(keyless.error)")
        let keyed = try await FerryRun.run(
            ["videos", "list", "--data-dir", data + "/env-root"], environment: given.merging(["HOME": data]) { $1 })
        #expect(keyed.status == 0 && keyed.output.contains("0 video(s)"), "\(keyed.output) \(keyed.error)")
        await envRoot.stop()
    }

    @Test("ferry presign signs a URL for any key, a folder's (ending in a slash) too, and refuses what names no key")
    func presignKeys() async throws {
        let data = TemporaryDirectory.make("ferry-cli-presign")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: ["--media-workers", "0"], environment: ["HOME": data])
        let client = S3TestClient(endpoint: server.endpoint, credentials: try rootCredentials(dataDirectory: data))
        #expect(try await client.createBucket("shelf").status == 200)
        for key in ["photos/", "a b/c.txt"] {
            #expect(try await client.put("shelf", key, Array(key.utf8)).status == 200)
            let presign = try await FerryRun.run(["presign", "get", "shelf/" + key, "--data-dir", data], environment: ["HOME": data])
            #expect(presign.status == 0, "\(key): \(presign.error)")
            let url = presign.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let fetched = try await S3TestClient.fetchRaw("GET", url)
            #expect(fetched.status == 200 && fetched.body == Array(key.utf8), "\(key): \(url) \(fetched.status)")
        }
        for object in ["shelf/", "/photos", "shelf", ""] {
            let refused = try await FerryRun.run(["presign", "get", object, "--data-dir", data], environment: ["HOME": data])
            #expect(refused.status == 64 && refused.error.contains("BUCKET/KEY"), "\(object): \(refused.error)")
        }
        await server.stop()
    }

    @Test("upload --protocol ietf sends a video as one IETF resumable upload to its media upload URL: the video is created and its file byte-identical")
    func ietfStreamVideo() async throws {
        let data = TemporaryDirectory.make("ferry-cli-ietf")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let run = try await FerryRun.run([
            "upload", Self.sample, "--data-dir", data + "/ferry", "--protocol", "ietf", "--title", "Streamed", "--json",
            "--media-workers", "0",
        ].filter { $0 != "--media-workers" && $0 != "0" })
        #expect(run.status == 0, "\(run.error)")
        let media = try #require(run.jsonLines.first { $0["event"] as? String == "media" })
        let videoId = try #require(media["VideoId"] as? String)
        let stored = try await storedBytes(dataDirectory: data + "/ferry", bucket: "ferry-media", key: "video/\(videoId)/source.mp4")
        #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: Self.sample))))
        let bad = try await FerryRun.run(["upload", Self.sample, "--data-dir", data + "/ferry", "--protocol", "ftp"])
        #expect(bad.status == 64)
        #expect(bad.error.contains("tus, ietf"))
    }

    @Test("upload --bucket of two files of one name (a/dup.bin, b/dup.bin) is refused before anything is sent: each would be stored as dup.bin, the last one kept")
    func sameNameRefused() async throws {
        let data = TemporaryDirectory.make("ferry-cli-same-name")
        defer { try? FileManager.default.removeItem(atPath: data) }
        try FileManager.default.createDirectory(atPath: data + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: data + "/b", withIntermediateDirectories: true)
        for directory in ["a", "b"] { try Data(directory.utf8).write(to: URL(fileURLWithPath: data + "/\(directory)/dup.bin")) }
        let same = try await FerryRun.run(
            ["upload", "--bucket", "dups", "--data-dir", data + "/ferry", data + "/a/dup.bin", data + "/b/dup.bin"])
        #expect(same.status == 64 && same.error.contains("would both be stored as 'dup.bin'"), "\(same.error)")
        await #expect(throws: (any Error).self) {
            try await storedBytes(dataDirectory: data + "/ferry", bucket: "dups", key: "dup.bin")
        }
    }

    @Test("upload --files-from reads the files to send from a list (CR LF and empty lines too), or from standard input (-), beside those named; a name beginning with a dash goes after --; no file at all is a usage error")
    func filesFromList() async throws {
        let data = TemporaryDirectory.make("ferry-cli-files-from")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let names = ["one.bin", "two words.bin", "-x.bin", "named.bin"]
        for name in names { try Data(name.utf8).write(to: URL(fileURLWithPath: data + "/" + name)) }
        let list = data + "/list.txt"
        try Data("\(data)/one.bin\n\n\(data)/two words.bin\r\n\(data)/-x.bin".utf8).write(to: URL(fileURLWithPath: list))
        let run = try await FerryRun.run(
            ["upload", "--bucket", "listed", "--data-dir", data + "/ferry", "--files-from", list, data + "/named.bin"])
        #expect(run.status == 0, "\(run.error)")
        for name in names {
            #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "listed", key: name) == Data(name.utf8), "\(name)")
        }
        // A name beginning with a dash, as an argument: after --.
        try Data("dash".utf8).write(to: URL(fileURLWithPath: data + "/-y.bin"))
        let dashed = try await FerryRun.run(["upload", "--bucket", "listed", "--data-dir", data + "/ferry", "--", "-y.bin"], inDirectory: data)
        #expect(dashed.status == 0, "\(dashed.error)")
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "listed", key: "-y.bin") == Data("dash".utf8))
        // The list on standard input.
        try Data("\(data)/one.bin\n\(data)/-y.bin\n".utf8).write(to: URL(fileURLWithPath: data + "/stdin.txt"))
        let piped = try await FerryRun.run(
            ["upload", "--bucket", "piped", "--data-dir", data + "/ferry", "--files-from", "-"], standardInput: data + "/stdin.txt")
        #expect(piped.status == 0, "\(piped.error)")
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "piped", key: "one.bin") == Data("one.bin".utf8))
        #expect(try await storedBytes(dataDirectory: data + "/ferry", bucket: "piped", key: "-y.bin") == Data("dash".utf8))
        let none = try await FerryRun.run(["upload", "--bucket", "listed", "--data-dir", data + "/ferry"])
        #expect(none.status == 64 && none.error.contains("--files-from"), "\(none.error)")
        let unreadable = try await FerryRun.run(["upload", "--bucket", "listed", "--files-from", data + "/no-such-list"])
        #expect(unreadable.status == 64 && unreadable.error.contains("cannot read"), "\(unreadable.error)")
        try Data("\r\n\n".utf8).write(to: URL(fileURLWithPath: data + "/empty.txt"))
        let empty = try await FerryRun.run(["upload", "--bucket", "listed", "--files-from", data + "/empty.txt"])
        #expect(empty.status == 64 && empty.error.contains("names no file"), "\(empty.error)")
    }

    @Test("without --data-dir the embedded service keeps its data under $HOME/.ferry, whatever the account's home")
    func honoursHome() async throws {
        let home = TemporaryDirectory.make("ferry-cli-home")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let run = try await FerryRun.run(
            ["upload", Self.sample, "--bucket", "home", "--key", "clip.mp4"], environment: ["HOME": home])
        #expect(run.status == 0, "\(run.error)")
        #expect(FileManager.default.fileExists(atPath: home + "/.ferry/catalog.sqlite"))
        let stored = try await storedBytes(dataDirectory: home + "/.ferry", bucket: "home", key: "clip.mp4")
        #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: Self.sample))))
    }

    @Test("a video whose file name is longer than a title holds gets the name cut at a character as its title")
    func longFileName() async throws {
        let data = TemporaryDirectory.make("ferry-cli-long-name")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let name = String(repeating: "é", count: 120) + ".mp4"
        try FileManager.default.copyItem(atPath: Self.sample, toPath: data + "/" + name)
        let run = try await FerryRun.run(["upload", data + "/" + name, "--data-dir", data + "/ferry", "--json"])
        #expect(run.status == 0, "\(run.error)")
        let list = try await FerryRun.run(["videos", "list", "--data-dir", data + "/ferry"])
        #expect(list.output.contains(String(repeating: "é", count: 64)) && !list.output.contains(String(repeating: "é", count: 65)), "\(list.output)")
    }

    @Test("a page number or size no service accepts is a usage error, not a crash; so are an unknown status, a data directory that is a file and a damaged root key")
    func pageOverflow() async throws {
        let data = TemporaryDirectory.make("ferry-cli-page")
        defer { try? FileManager.default.removeItem(atPath: data) }
        for page in ["9223372036854775807", "4611686018427387904", "1000001", "0"] {
            let run = try await FerryRun.run(["videos", "list", "--data-dir", data, "--page", page])
            #expect(run.status == 64, "\(page): \(run.output) \(run.error)")
            #expect(run.error.contains("--page must be between 1 and 1000000"), "\(page): \(run.error)")
        }
        for size in ["101", "0"] {
            let run = try await FerryRun.run(["videos", "list", "--data-dir", data, "--page-size", size])
            #expect(run.status == 64, "\(size): \(run.output) \(run.error)")
            #expect(run.error.contains("--page-size must be between 1 and 100"), "\(size): \(run.error)")
        }
        let last = try await FerryRun.run(["videos", "list", "--data-dir", data, "--page", "1000000", "--page-size", "100"])
        #expect(last.status == 0 && last.output.contains("0 video(s)"), "\(last.output) \(last.error)")
        let ok = try await FerryRun.run(["videos", "list", "--data-dir", data])
        #expect(ok.status == 0, "\(ok.error)")
        // A status no video has is a usage error naming those there are.
        let status = try await FerryRun.run(["videos", "list", "--data-dir", data, "--status", "Bogus"])
        #expect(status.status == 64 && status.error.contains("TranscodeFail"), "\(status.status) \(status.error)")
        // A data directory that is a file, and a damaged root key, are named.
        let file = data + "/plain-file"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let notDirectory = try await FerryRun.run(["videos", "list", "--data-dir", file])
        #expect(notDirectory.status != 0 && notDirectory.error.contains("plain-file cannot be used as a directory: it is a file"), "\(notDirectory.error)")
        let damaged = data + "/damaged"
        try FileManager.default.createDirectory(atPath: damaged, withIntermediateDirectories: true)
        try Data(#"{"accessKeyId": "FKIA"#.utf8).write(to: URL(fileURLWithPath: damaged + "/root-credentials.json"))
        let root = try await FerryRun.run(["videos", "list", "--data-dir", damaged])
        #expect(root.status != 0 && root.error.contains("root-credentials.json is damaged"), "\(root.error)")
    }

    @Test("what a newcomer meets: --version; ferry serve on a port another program holds stops before it makes a root key; a later start says where the key is, and a start without the console's pages warns; a text file sent as a video is warned of, a video is not; a bucket made for files sent at once is said to be made once")
    func newcomerEdges() async throws {
        let version = try await FerryRun.run(["--version"])
        #expect(version.status == 0 && version.output.trimmingCharacters(in: .whitespacesAndNewlines) == FerryCoreVersion.string)
        try await Self.withService("ferry-cli-newcomer") { server, _, environment, data in
            let port = try #require(URL(string: server.endpoint)?.port)
            let fresh = data + "/fresh"
            let busy = try await FerryRun.run(["serve", "--data-dir", fresh, "--port", String(port)], environment: ["HOME": data])
            #expect(busy.status == 1, "\(busy.output) \(busy.error)")
            #expect(busy.error.contains("cannot listen on 127.0.0.1:\(port): another program listens there"), "\(busy.error)")
            #expect(!busy.output.contains("Generated root credentials"), "\(busy.output)")
            #expect(!FileManager.default.fileExists(atPath: fresh + "/root-credentials.json"))
            // The first start also runs without the console's pages (FERRY_CONSOLE_DIR names an empty directory),
            // and warns of it; the second finds them beside the binary.
            let noPages = data + "/no-pages"
            try FileManager.default.createDirectory(atPath: noPages, withIntermediateDirectories: true)
            for (round, says) in [(1, "Generated root credentials"), (2, "root key in \(fresh)/root-credentials.json")] {
                let started = try await FerryRun.run(
                    ["serve", "--data-dir", fresh, "--port", "0", "--media-workers", "0"],
                    environment: ["HOME": data].merging(round == 1 ? ["FERRY_CONSOLE_DIR": noPages] : [:]) { $1 },
                    interruptWhen: { $0.contains("listening on") })
                #expect(started.output.contains(says), "round \(round): \(started.output)")
                if round == 1 { #expect(!started.output.contains("root key in"), "\(started.output)") }
                #expect(
                    started.error.contains("the console's files are not installed: /console/ answers 503") == (round == 1),
                    "round \(round): \(started.error)")
            }

            let text = data + "/notes.txt"
            try Data("meeting notes\n".utf8).write(to: URL(fileURLWithPath: text))
            let warned = try await FerryRun.run(["upload", text, "--endpoint", server.endpoint], environment: environment)
            #expect(warned.status == 0, "\(warned.output) \(warned.error)")
            #expect(warned.error.contains("notes.txt does not look like a video (its first bytes are text/plain)"), "\(warned.error)")
            let video = try await FerryRun.run(["upload", Self.sample, "--endpoint", server.endpoint], environment: environment)
            #expect(video.status == 0 && !video.error.contains("does not look like"), "\(video.output) \(video.error)")

            let files = try (0..<4).map { _ in try makeRandomFile(size: 1000, in: data).path }
            let together = try await FerryRun.run(
                ["upload"] + files + ["--endpoint", server.endpoint, "--bucket", "made-once", "--jobs", "4"],
                environment: environment)
            #expect(together.status == 0, "\(together.output) \(together.error)")
            #expect(together.output.components(separatedBy: "Created the bucket made-once").count == 2, "\(together.output)")
        }
    }

    @Test("bad flags are a usage error; a missing file and an unreachable endpoint get clear messages")
    func errors() async throws {
        let usage = try await FerryRun.run(["upload", Self.sample, "--parallel", "0"])
        #expect(usage.status == 64)
        #expect(usage.error.contains("--parallel"))
        for (flag, value) in [
            ("--parallel", "9223372036854775807"), ("--jobs", "3000000000"), ("--part-size", "1MiB"),
            // Sizes past 64 bits, not finite, or below a byte: a usage error, not a trap or a chunk of nothing.
            ("--part-size", "1e30GiB"), ("--part-size", "infB"), ("--part-size", "nanMiB"), ("--part-size", "9000000000GiB"),
            ("--part-size", "99999999999999G"), ("--part-size", "0.5B"),
        ] {
            let refused = try await FerryRun.run(["upload", Self.sample, "--bucket", "b", flag, value])
            #expect(refused.status == 64, "\(flag) \(value): \(refused.output) \(refused.error)")
            #expect(refused.error.contains(flag), "\(flag): \(refused.error)")
        }
        // A tus chunk is a request: one of a byte would send at a few KB/s.
        let tiny = try await FerryRun.run(["upload", Self.sample, "--bucket", "b", "--protocol", "tus", "--part-size", "1"])
        #expect(tiny.status == 64 && tiny.error.contains("at least 64KiB"), "\(tiny.error)")
        let unknown = try await FerryRun.run(["upload", "--no-such-flag"])
        #expect(unknown.status == 64)
        let unusedData = TemporaryDirectory.make("ferry-cli-bad-env")
        defer { try? FileManager.default.removeItem(atPath: unusedData) }
        let scheduling = try await FerryRun.run(
            ["serve", "--data-dir", unusedData, "--port", "0"],
            environment: ["FERRY_MEDIA_IDLE_SCHEDULING": "yes"])
        #expect(scheduling.status == 64, "\(scheduling.output) \(scheduling.error)")
        #expect(scheduling.error.contains("FERRY_MEDIA_IDLE_SCHEDULING must be 0 or 1"), "\(scheduling.error)")
        // The media settings read from the environment are the same for `serve` and the service run in-process.
        for command in [["serve", "--port", "0"], ["videos", "list"]] {
            let longest = try await FerryRun.run(
                command + ["--data-dir", unusedData], environment: ["FERRY_MAX_TRANSCODE_DURATION": "abc"])
            #expect(longest.status == 64, "\(command): \(longest.output) \(longest.error)")
            #expect(longest.error.contains("FERRY_MAX_TRANSCODE_DURATION must be between 0 and 1000000"), "\(longest.error)")
        }
        // A setting's variable that is not a plain number in range stops the command, naming it: it does not leave the
        // default in force. Set to nothing, it is unset.
        for (name, value, says) in [
            ("FERRY_IDLE_TIMEOUT", "30s", "between 0.1 and 86400 seconds"), ("FERRY_MEDIA_LEASE", "0x10", "between 1 and 3600"),
            ("FERRY_MAX_CONNECTIONS", "1e6", "between 1 and 1000000"), ("FERRY_BODY_TIMEOUT", "nan", "between 0.1 and"),
            ("FERRY_PORT", "70000", "between 0 and 65535"), ("FERRY_MIN_PART_SIZE", "5MiB", "a number of bytes, 1 or more"),
            ("FERRY_FIRST_STREAM_RETENTION", "-1", "between 0 and 2592000"), ("FERRY_MEDIA_WORKERS", "2.5", "between 0 and 64"),
            ("FERRY_LOG_LEVEL", "verbose", "is not a level"), ("FERRY_MEDIA_LEASE", "5.", "between 1 and 3600"),
            ("FERRY_PORT", "+9000", "between 0 and 65535"),
        ] {
            // `--port` would stand in front of FERRY_PORT.
            let port = name == "FERRY_PORT" ? [] : ["--port", "0"]
            let refused = try await FerryRun.run(["serve", "--data-dir", unusedData] + port, environment: [name: value])
            #expect(refused.status == 64 && refused.error.contains("\(name)"), "\(name)=\(value): \(refused.error)")
            #expect(refused.error.contains(says), "\(name)=\(value): \(refused.error)")
        }
        // A number flag is read as its variable is: `1e3` or `0x10` is a typo, not a thousand or sixteen seconds.
        for (flag, value) in [
            ("--body-timeout", "1e3"), ("--media-lease", "0x10"), ("--lifecycle-day", "inf"), ("--idle-timeout", "30s"),
        ] {
            let refused = try await FerryRun.run(["serve", "--data-dir", unusedData, "--port", "0", flag, value])
            #expect(refused.status == 64 && refused.error.contains(flag), "\(flag) \(value): \(refused.error)")
            #expect(refused.error.contains("is not a decimal number"), "\(flag) \(value): \(refused.error)")
        }
        let keyLimit = try await FerryRun.run(
            ["keys", "create", "--data-dir", unusedData, "--actions", "s3:*", "--requests-per-second", "0x10"])
        #expect(keyLimit.status == 64 && keyLimit.error.contains("is not a decimal number"), "\(keyLimit.error)")
        for environment in [
            ["FERRY_MAX_TRANSCODE_DURATION": "", "FERRY_MEDIA_WORKERS": "", "FERRY_MEDIA_IDLE_SCHEDULING": ""],
            // Spaces around a number, and a fraction without its leading 0, are taken.
            ["FERRY_MAX_TRANSCODE_DURATION": ".5", "FERRY_MEDIA_WORKERS": " 2 "],
        ] {
            let taken = try await FerryRun.run(["videos", "list", "--data-dir", unusedData], environment: environment)
            #expect(taken.status == 0, "\(environment): \(taken.error)")
        }
        // A metrics token set to nothing would leave the series open: refused, by flag or variable.
        for (arguments, environment) in [(["--metrics-token", ""], [:]), ([], ["FERRY_METRICS_TOKEN": " \n"])] {
            let empty = try await FerryRun.run(
                ["serve", "--data-dir", unusedData, "--port", "0"] + arguments, environment: environment)
            #expect(empty.status == 64 && empty.error.contains("metrics token"), "\(arguments) \(environment): \(empty.error)")
        }
        // A bad origin or public endpoint is a usage error naming where it came from; spaces after commas are taken.
        for (arguments, environment, says) in [
            ([], ["FERRY_CORS_ORIGINS": "https://a.example, app.example"], "FERRY_CORS_ORIGINS: The origin 'app.example'"),
            (["--cors-origin", "app.example"], [:], "--cors-origin: The origin 'app.example'"),
            (["--public-endpoint", "ftp://files.example"], [:], "The public endpoint 'ftp://files.example'"),
        ] {
            let refused = try await FerryRun.run(
                ["serve", "--data-dir", unusedData, "--port", "0"] + arguments, environment: environment)
            #expect(refused.status == 64 && refused.error.contains(says), "\(arguments) \(environment): \(refused.error)")
        }
        // Half a root pair is refused, not dropped while the stored root key goes on.
        for half in ["FERRY_ACCESS_KEY_ID", "FERRY_SECRET_ACCESS_KEY"] {
            let refused = try await FerryRun.run(
                ["serve", "--data-dir", unusedData, "--port", "0"], environment: [half: "FKIAHALFAPAIR0000000"])
            #expect(refused.status == 64 && refused.error.contains("\(half) is set without"), "\(refused.error)")
        }
        let samePort = try await FerryRun.run(["serve", "--data-dir", unusedData, "--port", "9123", "--metrics-port", "9123"])
        #expect(samePort.status == 64 && samePort.error.contains("--metrics-port must differ"), "\(samePort.error)")

        let missing = try await FerryRun.run(["upload", "/nonexistent/holiday.mp4", "--data-dir", TemporaryDirectory.make()])
        #expect(missing.status == 1)
        #expect(missing.error.contains("/nonexistent/holiday.mp4"))
        let directory = TemporaryDirectory.make()
        let notAFile = try await FerryRun.run(["upload", directory, "--bucket", "b", "--data-dir", TemporaryDirectory.make()])
        #expect(notAFile.status == 1 && notAFile.error.contains("directory"), "\(notAFile.error)")
        // With --json the refusal is an event naming the file too, as any file's failure is.
        let notAFileJSON = try await FerryRun.run(["upload", directory, "--bucket", "b", "--json", "--data-dir", TemporaryDirectory.make()])
        let failed = notAFileJSON.jsonLines.first { $0["event"] as? String == "failed" }
        #expect(notAFileJSON.status == 1 && failed?["file"] as? String == URL(fileURLWithPath: directory).lastPathComponent, "\(notAFileJSON.output)")
        #expect(failed?["code"] as? String == "invalidArgument", "\(notAFileJSON.output)")
        let ftp = try await FerryRun.run(
            ["upload", Self.sample, "--endpoint", "ftp://127.0.0.1:21"],
            environment: ["FERRY_ACCESS_KEY_ID": "FKIAX", "FERRY_SECRET_ACCESS_KEY": "secret-value-123"])
        #expect(ftp.status == 64 && ftp.error.contains("http or https"), "\(ftp.error)")

        let port = try MotoServer.freePort()
        let unreachable = try await FerryRun.run(
            ["upload", Self.sample, "--endpoint", "http://127.0.0.1:\(port)", "--max-retries", "1"],
            environment: ["FERRY_ACCESS_KEY_ID": "FKIAX", "FERRY_SECRET_ACCESS_KEY": "secret-value-123"])
        // The network failed past the retries: the same command goes on once the service is reachable (75).
        #expect(unreachable.status == 75, "\(unreachable.error)")
        #expect(unreachable.error.contains("network") || unreachable.error.contains("Connect"), "\(unreachable.error)")
        #expect(!unreachable.error.contains("secret-value-123"))
        // While the requests before the upload (the video's creation) are retried, the command says why, once.
        let said = "ferry: Could not connect to http://127.0.0.1:\(port): the connection was refused; is the service "
            + "running on that port? Trying again for a while; Ctrl-C stops."
        #expect(unreachable.error.components(separatedBy: said).count == 2, "\(unreachable.error)")
    }
}

/// Whether a run has printed a line yet, set from the thread that reads its output.
final class PrintedFlag: Sendable {
    let value = Mutex(false)
}
