import Ferry
import FerryAsyncHTTPClient
import FerryCore
import FerryTestSupport
import Foundation
import FerryTransport
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ferry upload` when the bytes, the checkpoint or the network go wrong.
@Suite("ferry upload faults", .serialized, .timeLimit(.minutes(10)))
struct UploadCommandFaultTests {
    /// The id of the video or image (`kind`) a `ferry upload` error names (`Video ID…`, `Image ID…`).
    static func id(of kind: String, in text: String) -> String? {
        guard let range = text.range(of: kind + " ") else { return nil }
        let id = text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return id.isEmpty ? nil : String(id)
    }

    /// A `ferry upload` process with `environment`, as ``FerryRun/run(_:environment:inTerminal:interruptWhen:)`` starts
    /// one.
    static func process(_ arguments: [String], environment: [String: String]) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for name in ["FERRY_DATA_DIR", "FERRY_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] { env[name] = nil }
        env.merge(environment) { $1 }
        process.environment = env
        return process
    }

    @Test(
        "a second ferry upload of a file another is uploading to the same place stops at once (exit 1) naming the run and its checkpoint, sends nothing and claims no checkpoint; once the first is killed (SIGKILL) the lock is gone and the same command resumes",
        arguments: [[], ["--protocol", "tus"]])
    func concurrentRunsOfOneFile(_ wire: [String]) async throws {
        try await CommandLineTests.withService("ferry-cli-lock") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let file = try makeRandomFile(size: 24 * 1024 * 1024, in: data)
                // Slow appends and parts, so the first run is still sending when the second starts.
                proxy.inject(.delay(seconds: 0.3), when: .method("PUT") || .method("PATCH"), times: .max)
                let arguments =
                    [
                        "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "locks", "--key", "l.bin",
                        "--part-size", wire.isEmpty ? "5MiB" : "2MiB", "--parallel", "1", "--record-dir", data + "/records",
                        "--json",
                    ] + wire
                let second = NIOLockedValueBox<CapturedRun?>(nil)
                let first = try await runBlocking { [environment] in
                    try Self.process(arguments, environment: environment).runCapturing(
                        interruptWhen: { line in
                            // Once the first run has stored 4 MiB (its checkpoint written and locked, a part or two
                            // chunks kept): the second runs to its end, then the first is killed.
                            guard FerryRun.progressed(to: 4 * 1024 * 1024, field: "stored")(line) else { return false }
                            if second.withLockedValue({ $0 == nil }) {
                                let run = try? Self.process(arguments, environment: environment).runCapturing()
                                second.withLockedValue { $0 = run }
                            }
                            return true
                        }, signal: SIGKILL)
                }
                #expect(first.status == SIGKILL || first.status == 128 + SIGKILL, "\(first.status) \(first.errorOutput)")
                let refused = try #require(second.withLockedValue { $0 })
                #expect(refused.status == 1, "\(refused.status) \(refused.output) \(refused.errorOutput)")
                #expect(
                    refused.errorOutput.contains("another upload of \(file.path) is running (checkpoint \(data)/records/"),
                    "\(refused.errorOutput)")
                #expect(!refused.errorOutput.contains("kept"), "\(refused.errorOutput)")
                #expect(!refused.output.contains("progress"), "\(refused.output)")
                // One upload made on the server: the second created none.
                let creations = proxy.log.filter { ($0.method == "POST" && $0.query.contains("uploads")) || ($0.method == "POST" && $0.path.contains("/_ferry/uploads/")) }
                #expect(creations.count == 1, "\(proxy.log.map { "\($0.method) \($0.path)?\($0.query)" })")

                // The killed run's lock went with it: the same command resumes from what it sent.
                proxy.clearFaults()
                let resumed = try await FerryRun.run(arguments, environment: environment)
                #expect(resumed.status == 0, "\(resumed.error)")
                let stored = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("locks", "l.bin")
                #expect(Data(stored.body) == (try Data(contentsOf: file)))
                if wire.isEmpty {
                    let completed = try #require(resumed.jsonLines.first { $0["event"] as? String == "completed" }, "\(resumed.output)")
                    #expect((completed["partsResumed"] as? Int ?? 0) >= 1, "\(completed)")
                } else {
                    let progress = resumed.jsonLines.first { $0["event"] as? String == "progress" }
                    #expect((progress?["bytes"] as? Int ?? 0) >= 4 * 1024 * 1024, "\(resumed.output.prefix(300))")
                }
            }
        }
    }

    @Test("a refused connection is told as one, naming the endpoint (scheme://host:port) and never the query; object (multipart and tus) and media uploads exit 75, and with --json each ends in a failed event naming the file")
    func refusedConnection() async throws {
        let port = try LoopbackPort.unused()
        let data = TemporaryDirectory.make("ferry-cli-refused")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let small = data + "/small.bin"
        try Data(repeating: 3, count: 1000).write(to: URL(fileURLWithPath: small))
        let environment = ["FERRY_ACCESS_KEY_ID": "FKIAX", "FERRY_SECRET_ACCESS_KEY": "secret-value-123", "HOME": data]
        for (media, options) in [(false, []), (true, []), (false, ["--protocol", "tus"]), (true, ["--protocol", "ietf"])] {
            let file = media ? CommandLineTests.sample : small
            let run = try await FerryRun.run(
                ["upload", file, "--endpoint", "http://127.0.0.1:\(port)", "--max-retries", "0", "--json"]
                    + (media ? [] : ["--bucket", "b"]) + options,
                environment: environment)
            #expect(run.status == 75, "\(run.error)")
            // A program reading the events learns the file's end from them, with the words printed on standard error.
            let failed = run.jsonLines.filter { $0["event"] as? String == "failed" }
            #expect(failed.count == 1, "\(media) \(options): \(run.output)")
            #expect(failed.first?["file"] as? String == URL(fileURLWithPath: file).lastPathComponent, "\(run.output)")
            #expect((failed.first?["message"] as? String).map { run.error.contains($0) } == true, "\(run.output)")
            #expect(failed.first?["code"] is String, "\(run.output)")
            #expect(
                run.error.contains("Could not connect to http://127.0.0.1:\(port): the connection was refused"),
                "\(media): \(run.error)")
            #expect(!run.error.contains("secret-value-123") && !run.error.contains("Signature"), "\(run.error)")
            if media, options.isEmpty {
                // Nothing reached the service: the queue has no upload, so no checkpoint to speak of.
                #expect(!run.error.contains("checkpoint is kept") && run.error.contains("Nothing was uploaded yet"), "\(run.error)")
            }
        }

        // A library's words that quote the URL keep neither its path (a resumable upload's is its capability) nor its
        // query.
        let quoted = TransportError(
            .other, url: "http://127.0.0.1:9/_ferry/uploads/cap0123?X-Amz-Signature=sig0456",
            detail: "failed: http://127.0.0.1:9/_ferry/uploads/cap0123?X-Amz-Signature=sig0456 (path /_ferry/uploads/cap0123)")
        #expect(!quoted.message.contains("cap0123") && !quoted.message.contains("sig0456"), "\(quoted.message)")
        #expect(quoted.message.hasPrefix("The request to http://127.0.0.1:9 failed. Detail: failed: "), "\(quoted.message)")

        // The transport itself: the kind, the endpoint, no query; and a peer that never answers is a timeout.
        let transport = AsyncHTTPClientTransport()
        do {
            _ = try await transport.send(
                TransportRequest(
                    method: "GET", url: "http://127.0.0.1:\(port)/b/k?X-Amz-Signature=abc123&X-Amz-Security-Token=tok456",
                    headers: [], body: [], timeout: .seconds(5)),
                bodyProgress: { _ in }, responseSink: nil)
            Issue.record("a request to a port nothing listens on succeeded")
        } catch let error as TransportError {
            #expect(error.kind == .connectionRefused, "\(error)")
            #expect(error.message.hasPrefix("Could not connect to http://127.0.0.1:\(port)"), "\(error)")
            #expect(!error.message.contains("abc123") && !error.message.contains("tok456"), "\(error)")
        }
        let silent = try Self.silentListener()
        defer { close(silent.fd) }
        do {
            _ = try await transport.send(
                TransportRequest(
                    method: "GET", url: "http://127.0.0.1:\(silent.port)/b/k?X-Amz-Signature=abc123", headers: [], body: [],
                    timeout: .seconds(1)),
                bodyProgress: { _ in }, responseSink: nil)
            Issue.record("a request to a peer that never answers succeeded")
        } catch let error as TransportError {
            #expect(error.kind == .timeout && error.isTimeout, "\(error)")
            #expect(error.message.hasPrefix("http://127.0.0.1:\(silent.port) did not answer in time"), "\(error)")
            #expect(!error.message.contains("abc123"), "\(error)")
        }
    }

    @Test(
        "a stream upload the service throttles says each retry and its wait (the service's Retry-After): a retrying event with delayMs in --json, 'retry 1 in 3 s' in plain output; the file then completes",
        arguments: ["tus", "ietf"])
    func throttledStreamSaysItsWait(_ wire: String) async throws {
        try await CommandLineTests.withService("ferry-cli-throttled") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let file = try makeRandomFile(size: 3 * 1024 * 1024, in: data)
                for json in [true, false] {
                    proxy.inject(.throttled(retryAfter: 3), when: .method("PATCH"))
                    let key = "t-\(json).bin"
                    let run = try await FerryRun.run(
                        [
                            "upload", file.path, "--endpoint", proxy.endpoint, "--bucket", "throttled", "--key", key,
                            "--protocol", wire, "--record-dir", data + "/records",
                        ] + (json ? ["--json"] : []),
                        environment: environment)
                    #expect(run.status == 0, "\(run.error)")
                    if json {
                        let retries = run.jsonLines.filter { $0["event"] as? String == "retrying" }
                        #expect(retries.count == 1, "\(run.output)")
                        #expect(retries.first?["delayMs"] as? Int == 3000, "\(run.output)")
                        #expect(retries.first?["error"] as? String == "server", "\(run.output)")
                        // The failure's words, as plain output would print them on a failure.
                        #expect((retries.first?["message"] as? String)?.isEmpty == false, "\(run.output)")
                    } else {
                        // With its cause in words.
                        let retry = run.output.split(separator: "\n").first { $0.contains(": retry 1 in 3 s after ") }
                        #expect(
                            retry?.hasPrefix("\(file.lastPathComponent): retry 1 in 3 s after server: Could not append: HTTP 503")
                                == true, "\(run.output)")
                    }
                    let stored = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("throttled", key)
                    #expect(Data(stored.body) == (try Data(contentsOf: file)))
                }
            }
        }
    }

    @Test(
        "a stream upload under a key of one request a second completes: an append refused for the rate is sent again after the wait, without asking for the offset first (which would take the turn it waited for)",
        arguments: ["tus", "ietf"])
    func streamUnderRequestRate(_ wire: String) async throws {
        try await CommandLineTests.withService("ferry-cli-rate") { server, root, environment, data in
            let media = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
            let slow = try await media.createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"])]), quota: AccessKeyQuota(requestsPerSecond: 1))
            #expect(try await S3TestClient(endpoint: server.endpoint, credentials: root).createBucket("rated").status == 200)
            let file = try makeRandomFile(size: 3 * 1024 * 1024, in: data)
            var env = environment
            env["FERRY_ACCESS_KEY_ID"] = slow.accessKeyId
            env["FERRY_SECRET_ACCESS_KEY"] = slow.secretAccessKey
            let run = try await FerryRun.run(
                [
                    "upload", file.path, "--endpoint", server.endpoint, "--bucket", "rated", "--key", "r.bin", "--protocol", wire,
                    "--part-size", "1MiB", "--record-dir", data + "/records", "--json",
                ], environment: env)
            #expect(run.status == 0, "\(run.output) \(run.error)")
            let stored = try await S3TestClient(endpoint: server.endpoint, credentials: root).get("rated", "r.bin")
            #expect(Data(stored.body) == (try Data(contentsOf: file)))
        }
    }

    /// A socket on 127.0.0.1 that takes connections and never answers.
    static func silentListener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a video or image uploaded as an IETF stream whose bytes were damaged on their way is not completed: the command exits 1 saying so, nothing is stored, and the same command then uploads the same video or image")
    func damagedStreamMediaIsNotCompleted() async throws {
        try await CommandLineTests.withService("ferry-cli-damaged") { server, root, environment, data in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                for ext in ["mp4", "png"] {
                    let file = data + "/file.\(ext)"
                    try FileManager.default.moveItem(atPath: try makeRandomFile(size: 3 * 1024 * 1024, in: data).path, toPath: file)
                    proxy.clearFaults()
                    proxy.inject(.corruptRequestByte(at: 1_000_000), when: .method("PATCH"))
                    let arguments = [
                        "upload", file, "--endpoint", proxy.endpoint, "--protocol", "ietf", "--max-retries", "1",
                        "--record-dir", data + "/records",
                    ]
                    let damaged = try await FerryRun.run(arguments, environment: environment)
                    #expect(damaged.status == 1, "\(damaged.error)")
                    #expect(damaged.error.contains("damaged on their way"), "\(damaged.error)")
                    #expect(!damaged.error.contains("was deleted"), "\(damaged.error)")
                    proxy.clearFaults()
                    let again = try await FerryRun.run(arguments, environment: environment)
                    #expect(again.status == 0, "\(again.error)")
                    let kind = ext == "mp4" ? "Video" : "Image"
                    let id = try #require(Self.id(of: kind + "Id:", in: again.output), "\(again.output)")
                    if kind == "Video" {
                        let media = MediaServiceClient(
                            endpoint: URL(string: server.endpoint)!,
                            credentials: .init(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
                        #expect(try await media.getVideoInfo(videoId: id).status != "Uploading")
                        // One video for the file: the damaged run's, completed by the second.
                        #expect(try await media.listVideos().total == 1)
                    }
                    try FileManager.default.removeItem(atPath: file)
                }
            }
        }
    }
}
