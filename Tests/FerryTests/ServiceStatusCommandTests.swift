import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The service's status across processes: nodes of one shared catalog see each other, and `ferry status` prints what
/// a running `ferry serve` answers.
@Suite("Service status across nodes and on the command line", .serialized, .timeLimit(.minutes(10)))
struct ServiceStatusCommandTests {
    static let root = SigV4Credentials(accessKeyId: "FKIASTATUSTEST000", secretAccessKey: "status-secret-0123456789abc")
    static var rootEnvironment: [String: String] {
        ["FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey]
    }

    static func media(_ endpoint: String) -> MediaServiceClient {
        MediaServiceClient(
            endpoint: URL(string: endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
    }

    /// Polls the status until `done` holds (or 30 s pass); the last answer.
    static func status(
        _ media: MediaServiceClient, within limit: Duration = .seconds(30),
        until done: (MediaContract.ServiceStatusAnswer) -> Bool
    ) async throws -> MediaContract.ServiceStatusAnswer {
        let deadline = ContinuousClock.now + limit
        var status = try await media.serviceStatus()
        while !done(status), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
            status = try await media.serviceStatus()
        }
        return status
    }

    /// Runs `ferry` with `arguments` and the root key (or `environment`) in its environment.
    static func ferry(_ arguments: [String], environment: [String: String] = rootEnvironment, home: String) async throws
        -> CapturedRun
    {
        try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment.merging(["HOME": home]) { $1 }) {
                $1
            }
            return try process.runCapturing()
        }
    }

    @Test("an api node and a worker node on shared PostgreSQL and SeaweedFS both list both; one stopping gracefully leaves the list")
    func sharedNodesSeeEachOther() async throws {
        let data = TemporaryDirectory.make("ferry-status-nodes")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let backends = try await SharedBackends.start(bucket: "ferry-status", prefix: "s/")
        var nodes: [FerryExecutable.Server] = []
        do {
            let environment = backends.serveEnvironment.merging(Self.rootEnvironment) { $1 }
            let api = try await FerryExecutable.Server.start(
                dataDirectory: data + "/api", arguments: backends.serveArguments + ["--role", "api"],
                environment: environment, logFile: data + "/api.log")
            nodes.append(api)
            let worker = try await FerryExecutable.Server.startWorker(
                dataDirectory: data + "/worker", arguments: backends.serveArguments, environment: environment,
                logFile: data + "/worker.log")
            nodes.append(worker)
            let apiPid = api.process.processIdentifier
            let workerPid = worker.process.processIdentifier

            let media = Self.media(api.endpoint)
            // Both nodes seen, and each backend answered within the status's two seconds (a loaded machine can miss them).
            let status = try await Self.status(media) {
                $0.nodes.count >= 2 && $0.catalog.healthy && $0.store.healthy && $0.jobQueue != nil && $0.webhookBacklog != nil
            }
            #expect(status.nodes.count == 2, "\(status.nodes)")
            let apiNode = try #require(status.nodes.first { $0.name.contains("-\(apiPid)-") }, "\(status.nodes)")
            let workerNode = try #require(status.nodes.first { $0.name.contains("-\(workerPid)-") }, "\(status.nodes)")
            #expect(apiNode.role == "api" && workerNode.role == "worker")
            #expect(!apiNode.stale && !workerNode.stale)
            #expect(status.node == apiNode.name)
            #expect(status.catalog.healthy && status.store.healthy, "\(status.catalog) \(status.store)")
            // Objects live in the shared store: no disk of the node's to report.
            #expect(status.diskFree == nil)
            #expect(status.jobQueue != nil && status.webhookBacklog != nil)

            // A worker that shuts down gracefully removes its heartbeat.
            #expect(await worker.stopGracefully(within: .seconds(30)))
            let after = try await Self.status(media) { $0.nodes.count == 1 }
            #expect(after.nodes.map(\.name) == [apiNode.name])

            // A node whose shutdown waits for a request to drain (a slow upload, longer than the shutdown's 30 s)
            // removes its heartbeat when the signal comes, while the catalog surely answers.
            let draining = try await FerryExecutable.Server.start(
                dataDirectory: data + "/draining", arguments: backends.serveArguments + ["--role", "api"],
                environment: environment, logFile: data + "/draining.log")
            nodes.append(draining)
            let drainingPid = draining.process.processIdentifier
            let s3 = S3TestClient(endpoint: draining.endpoint, credentials: Self.root)
            #expect(try await s3.createBucket("draining").status == 200)
            let upload = try #require(URL(string: try s3.presignedURL("PUT", "/draining/slow.bin")))
            let socket = try RawSocket.connect(port: try #require(upload.port))
            defer { close(socket) }
            let target = upload.path + "?" + (upload.query ?? "")
            try RawSocket.write(
                socket,
                Array(RawSocket.requestHead(
                    "PUT", target, [("Host", "\(upload.host ?? ""):\(upload.port ?? 0)"), ("Content-Length", "10000000")]).utf8)
                    + [UInt8](repeating: 7, count: 4096))
            let listed = try await Self.status(media) { $0.nodes.contains { $0.name.contains("-\(drainingPid)-") } }
            try #require(listed.nodes.contains { $0.name.contains("-\(drainingPid)-") }, "\(listed.nodes)")
            kill(drainingPid, SIGTERM)
            let left = try await Self.status(media, within: .seconds(10)) {
                !$0.nodes.contains { $0.name.contains("-\(drainingPid)-") }
            }
            #expect(!left.nodes.contains { $0.name.contains("-\(drainingPid)-") }, "\(left.nodes)")
            #expect(draining.process.isRunning, "the node did not wait for its request")
            await draining.stop(signal: SIGKILL)
        } catch {
            for node in nodes { await node.stop(signal: SIGKILL) }
            await backends.destroy()
            throw error
        }
        for node in nodes { await node.stop() }
        await backends.destroy()
    }

    @Test("ferry status prints a table of the running ferry serve's node and backends; --json is GetServiceStatus' answer; another key exits 1")
    func statusCommand() async throws {
        let data = TemporaryDirectory.make("ferry-status-cli")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server", arguments: ["--media-workers", "0"], environment: Self.rootEnvironment,
            logFile: data + "/server.log")
        let pid = server.process.processIdentifier
        let table = try await Self.ferry(["status", "--endpoint", server.endpoint], home: data)
        #expect(table.status == 0, "\(table.output)\n\(table.errorOutput)")
        let lines = table.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("Ferry \(FerryCoreVersion.string), answered by ") == true, "\(table.output)")
        let headerIndex = try #require(lines.firstIndex { $0.hasPrefix("NODE ") }, "\(table.output)")
        let header = lines[headerIndex]
        #expect(lines.first?.hasSuffix(" answered by " + (lines[headerIndex + 1].split(separator: " ").first ?? "")) == true)
        // The node's row, under the header: its name carries the server's process id.
        let row = try #require(lines[(headerIndex + 1)...].first { $0.contains("-\(pid)-") }, "\(table.output)")
        let cells = row.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        #expect(cells.count == 6 && cells[1] == "all" && cells[2] == FerryCoreVersion.string && cells[5] == "ok", "\(row)")
        // The columns line up under the header.
        let roleColumn = try #require(header.range(of: "ROLE")).lowerBound.utf16Offset(in: header)
        #expect(row.dropFirst(roleColumn).hasPrefix("all "), "\(header)\n\(row)")
        #expect(lines.contains { $0.hasPrefix("Catalog ") && $0.contains("ok (") }, "\(table.output)")
        #expect(lines.contains { $0.hasPrefix("Store ") && $0.contains("ok (") }, "\(table.output)")
        #expect(lines.contains { $0.hasPrefix("Job queue ") && $0.contains("0 queued, 0 scheduled, 0 running, 0 failed") }, "\(table.output)")
        #expect(lines.contains { $0.hasPrefix("Webhooks ") && $0.contains("0 pending") }, "\(table.output)")
        #expect(lines.contains { $0.hasPrefix("Disk free ") && $0.contains(" of ") }, "\(table.output)")
        #expect(!table.output.contains(Self.root.secretAccessKey))

        let json = try await Self.ferry(["status", "--endpoint", server.endpoint, "--json"], home: data)
        #expect(json.status == 0, "\(json.errorOutput)")
        let answer = try MediaContract.decode(MediaContract.ServiceStatusAnswer.self, from: Data(json.output.utf8))
        #expect(answer.nodes.count == 1 && answer.nodes.first?.name.contains("-\(pid)-") == true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect(object["RequestId"] is String && object["Nodes"] is [Any])

        // A store that does not answer: exit 1, with --json too (the answer printed says why).
        let blobs = data + "/server/objects/blobs"
        try FileManager.default.moveItem(atPath: blobs, toPath: blobs + ".off")
        let failing = try await Self.ferry(["status", "--endpoint", server.endpoint], home: data)
        #expect(failing.status == 1 && failing.output.contains("Store "), "\(failing.output)")
        let failingJSON = try await Self.ferry(["status", "--endpoint", server.endpoint, "--json"], home: data)
        #expect(failingJSON.status == 1, "\(failingJSON.output)")
        let failed = try MediaContract.decode(MediaContract.ServiceStatusAnswer.self, from: Data(failingJSON.output.utf8))
        #expect(!failed.store.healthy)
        try FileManager.default.moveItem(atPath: blobs + ".off", toPath: blobs)

        // A key that is not the root key is refused.
        let created = try await Self.ferry(
            ["keys", "create", "--endpoint", server.endpoint, "--actions", "media:*", "--description", "status"],
            home: data)
        let printed = created.output.split(separator: "\n")
        let id = printed.first { $0.hasPrefix("FERRY_ACCESS_KEY_ID=") }.map { String($0.dropFirst(20)) } ?? ""
        let secret = printed.first { $0.hasPrefix("FERRY_SECRET_ACCESS_KEY=") }.map { String($0.dropFirst(24)) } ?? ""
        #expect(!id.isEmpty && !secret.isEmpty, "\(created.output) \(created.errorOutput)")
        let refused = try await Self.ferry(
            ["status", "--endpoint", server.endpoint],
            environment: ["FERRY_ACCESS_KEY_ID": id, "FERRY_SECRET_ACCESS_KEY": secret], home: data)
        #expect(refused.status == 1)
        #expect(refused.errorOutput.contains("root key"), "\(refused.errorOutput)")
        await server.stop()

        // A disk with less free than the reserve: uploads are refused, and the status says so and exits 1.
        let full = try await FerryExecutable.Server.start(
            dataDirectory: data + "/full", arguments: ["--media-workers", "0"],
            environment: Self.rootEnvironment.merging(["FERRY_MIN_FREE_BYTES": String(Int64.max / 2)]) { $1 },
            logFile: data + "/full.log")
        let refusing = try await Self.ferry(["status", "--endpoint", full.endpoint], home: data)
        #expect(refusing.status == 1)
        #expect(
            refusing.output.split(separator: "\n").contains { $0.hasPrefix("Disk free ") && $0.contains("; uploads refused: less than the ") },
            "\(refusing.output)")
        await full.stop()

        // On a data directory, the embedded service answers; a directory that is none (a mistyped --data-dir) is
        // refused, not made and reported healthy.
        let embedded = try await Self.ferry(["status", "--data-dir", data + "/server"], home: data)
        #expect(embedded.status == 0 && embedded.output.contains("Catalog "), "\(embedded.output) \(embedded.errorOutput)")
        let typo = try await Self.ferry(["status", "--data-dir", data + "/sever"], home: data)
        #expect(typo.status == 1 && typo.errorOutput.contains("is not a Ferry data directory"), "\(typo.errorOutput)")
        #expect(!FileManager.default.fileExists(atPath: data + "/sever"))
    }
}
