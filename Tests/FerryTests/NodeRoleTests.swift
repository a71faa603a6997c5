import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// `ferry serve --role api|worker`: media workers scale apart from the nodes that answer requests, over one SeaweedFS
/// and one PostgreSQL.
@Suite("Node roles: API nodes and media workers apart", .serialized, .timeLimit(.minutes(10)))
struct NodeRoleTests {
    static let root = SigV4Credentials(accessKeyId: "FKIANODEROLES0000", secretAccessKey: "node-roles-secret-0123456789")

    /// A directory holding `ffmpeg` and `ffprobe` scripts that append their process id to `log` and run the real
    /// tool: what a node ran, told apart from what another node ran.
    static func recordingTools(in directory: String, log: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for tool in ["ffmpeg", "ffprobe"] {
            let real = try #require(
                ["/usr/bin/\(tool)", "/usr/local/bin/\(tool)"].first { FileManager.default.isExecutableFile(atPath: $0) },
                "\(tool) is not installed")
            let path = directory + "/" + tool
            try "#!/bin/sh\necho \"\(tool) $$\" >> '\(log)'\nexec \(real) \"$@\"\n".write(
                toFile: path, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        return directory
    }

    /// The TCP ports process `pid` listens on, read from its descriptors and the kernel's socket tables.
    ///
    /// The kernel makes `/proc/net/tcp` one page per read, and a socket opened or closed between two reads can shift
    /// a listening socket out of the text (many tests open and close connections beside this one). The tables are
    /// read several times and the ports found are joined: a port is missed only if every reading misses it.
    static func listeningPorts(of pid: Int32) throws -> Set<Int> {
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        var inodes: Set<String> = []
        for descriptor in descriptors {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)"),
                target.hasPrefix("socket:[")
            else { continue }
            inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
        }
        var ports: Set<Int> = []
        for _ in 0..<25 {
            ports.formUnion(listeningPorts(owning: inodes))
        }
        return ports
    }

    /// The listening TCP ports among the sockets `inodes`, from one reading of the kernel's socket tables.
    static func listeningPorts(owning inodes: Set<String>) -> Set<Int> {
        var ports: Set<Int> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl, local address, remote address, state (0A: listening), …, inode (the tenth field).
                guard fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])),
                    let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) })
                else { continue }
                ports.insert(port)
            }
        }
        return ports
    }

    @Test("an api node queues media jobs and never runs ffmpeg; a worker node runs them to Normal and listens on no port")
    func rolesSplitTheWork() async throws {
        let data = TemporaryDirectory.make("ferry-roles")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let backends = try await SharedBackends.start(bucket: "ferry-roles", prefix: "r/")
        let arguments = backends.serveArguments
        var nodes: [FerryExecutable.Server] = []
        do {
            let keys = backends.serveEnvironment.merging([
                "FERRY_ACCESS_KEY_ID": Self.root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": Self.root.secretAccessKey,
            ]) { $1 }
            let apiLog = data + "/api-tools.log"
            let workerLog = data + "/worker-tools.log"
            let api = try await FerryExecutable.Server.start(
                dataDirectory: data + "/api",
                arguments: arguments + [
                    "--role", "api", "--ffmpeg", try Self.recordingTools(in: data + "/api-tools", log: apiLog),
                ],
                environment: keys, logFile: data + "/api.log")
            nodes.append(api)
            let worker = try await FerryExecutable.Server.startWorker(
                dataDirectory: data + "/worker",
                arguments: arguments + [
                    "--ffmpeg", try Self.recordingTools(in: data + "/worker-tools", log: workerLog),
                ],
                environment: keys, logFile: data + "/worker.log")
            nodes.append(worker)

            // The worker answers nothing: it holds no listening socket; the API node holds its one.
            #expect(try Self.listeningPorts(of: worker.process.processIdentifier).isEmpty)
            // The kernel's tables can leave out a socket in a reading taken while others come and go (a loaded
            // machine): the API node's is looked for until found, for up to 10 s.
            var apiPorts: Set<Int> = []
            for _ in 0..<100 where !apiPorts.contains(api.port) {
                apiPorts = try Self.listeningPorts(of: api.process.processIdentifier)
                if !apiPorts.contains(api.port) { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(apiPorts.contains(api.port))

            let video = try await MediaFixtures.make(.landscape480, seconds: 2, in: data)
            let media = MediaServiceClient(
                endpoint: URL(string: api.endpoint)!,
                credentials: Credentials(accessKeyId: Self.root.accessKeyId, secretAccessKey: Self.root.secretAccessKey))
            let ticket = try await media.createUploadVideo(.init(title: "roles", fileName: "roles.mp4"))
            let upload = try await ticket.objectStorageClient().upload(
                file: URL(fileURLWithPath: video), bucket: ticket.address.bucket, key: ticket.address.fileName)
            _ = try await upload.result

            var status = ""
            let deadline = ContinuousClock.now + .seconds(240)
            while ContinuousClock.now < deadline {
                status = try await media.getVideoInfo(videoId: ticket.id).status
                if status == "Normal" || status == "TranscodeFail" { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(status == "Normal")
            // What the worker made is in the shared store: the API node serves it.
            let play = try await media.getPlayInfo(videoId: ticket.id)
            let stream = try #require(play.streams.first)
            #expect(try await S3TestClient.fetch(stream.url).status == 200)

            // Every media tool ran on the worker, none on the API node.
            let workerRuns = (try? String(contentsOfFile: workerLog, encoding: .utf8)) ?? ""
            #expect(workerRuns.contains("ffprobe"))
            #expect(workerRuns.contains("ffmpeg"))
            #expect(!FileManager.default.fileExists(atPath: apiLog), "the API node ran a media tool")
        } catch {
            for node in nodes { await node.stop(signal: SIGKILL) }
            await backends.destroy()
            throw error
        }
        for node in nodes { await node.stop() }
        await backends.destroy()
    }

    /// Every file the master playlist of `videoId` names, and the playlists those name, answers 200; the files found.
    static func playsWhole(_ media: MediaServiceClient, _ videoId: String) async throws -> Int {
        let master = try #require(try await media.getPlayInfo(videoId: videoId).stream(format: "m3u8", definition: "AUTO"))
        var pending = [master.url]
        var seen = 0
        while let next = pending.popLast() {
            let reply = try await S3TestClient.fetch(next)
            #expect(reply.status == 200, "\(next): \(reply.status)")
            seen += 1
            guard next.contains(".m3u8"), let base = URL(string: next) else { continue }
            for line in reply.text.split(separator: "\n") {
                var uris = line.hasPrefix("#") ? [] : [String(line)]
                if let range = line.range(of: "URI=\"") {
                    uris.append(String(line[range.upperBound...].prefix { $0 != "\"" }))
                }
                for uri in uris where !uri.isEmpty {
                    if let url = URL(string: uri, relativeTo: base) { pending.append(url.absoluteString) }
                }
            }
        }
        return seen
    }

    @Test("a worker that stalls past its lease while storing a transcode, and wakes once another worker has taken the job over and published it, neither deletes nor replaces what the other published")
    func stalledWorkerLeavesTheTakeoverAlone() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (.ci/run installs Debian's ffmpeg)")
        let data = TemporaryDirectory.make("ferry-stalled-worker")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let backends = try await SharedBackends.start(bucket: "ferry-stall", prefix: "s/")
        let arguments = backends.serveArguments + ["--media-lease", "2"]
        var nodes: [FerryExecutable.Server] = []
        do {
            let keys = backends.serveEnvironment.merging([
                "FERRY_ACCESS_KEY_ID": Self.root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": Self.root.secretAccessKey,
            ]) { $1 }
            let api = try await FerryExecutable.Server.start(
                dataDirectory: data + "/api", arguments: arguments + ["--role", "api"], environment: keys,
                logFile: data + "/api.log")
            nodes.append(api)
            // The first worker's store takes a while over each write (a slow link): its transcode's files go one by
            // one, and the worker is stopped (as a machine pauses) once the first of them is stored.
            let slow = try await FaultProxy.start(upstream: try #require(
                arguments.firstIndex(of: "--store-endpoint").map { arguments[$0 + 1] }))
            slow.inject(.delay(seconds: 0.7), when: .method("PUT"), times: .max)
            let first = try await FerryExecutable.Server.startWorker(
                dataDirectory: data + "/first",
                arguments: arguments.enumerated().map {
                    $0.offset > 0 && arguments[$0.offset - 1] == "--store-endpoint" ? slow.endpoint : $0.element
                },
                environment: keys, logFile: data + "/first.log")
            nodes.append(first)

            // A source whose ladder has one definition, and so no first stream: the whole ladder is stored at once.
            let source = data + "/source.mp4"
            try await MediaFixtures.ffmpeg([
                "-f", "lavfi", "-i", "testsrc=duration=12:size=320x240:rate=25", "-f", "lavfi", "-i",
                "sine=frequency=600:duration=12", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv444p",
                "-c:a", "aac", "-shortest", source,
            ])
            let media = MediaServiceClient(
                endpoint: URL(string: api.endpoint)!,
                credentials: Credentials(accessKeyId: Self.root.accessKeyId, secretAccessKey: Self.root.secretAccessKey))
            let ticket = try await media.createUploadVideo(.init(title: "stalled", fileName: "stalled.mp4"))
            _ = try await ticket.objectStorageClient().upload(
                file: URL(fileURLWithPath: source), bucket: ticket.address.bucket, key: ticket.address.fileName
            ).result
            let s3 = S3TestClient(endpoint: api.endpoint, credentials: Self.root)
            func outputs() async throws -> [String] {
                let listing = try await s3.send(
                    "GET", "/" + ticket.address.bucket,
                    query: [("list-type", "2"), ("prefix", "video/\(ticket.id)/out/")])
                return listing.text.components(separatedBy: "<Key>").dropFirst()
                    .compactMap { $0.components(separatedBy: "</Key>").first }.sorted()
            }
            var deadline = ContinuousClock.now + .seconds(180)
            while try await outputs().isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            kill(first.process.processIdentifier, SIGSTOP)
            try #require(try await !outputs().isEmpty, "the first worker stored nothing of its transcode")

            // Its lease runs out; a second worker takes the job over and publishes it.
            let second = try await FerryExecutable.Server.startWorker(
                dataDirectory: data + "/second", arguments: arguments, environment: keys, logFile: data + "/second.log")
            nodes.append(second)
            var status = ""
            deadline = ContinuousClock.now + .seconds(180)
            while ContinuousClock.now < deadline {
                status = try await media.getVideoInfo(videoId: ticket.id).status
                if status == "Normal" || status == "TranscodeFail" { break }
                try await Task.sleep(for: .milliseconds(300))
            }
            try #require(status == "Normal")
            let published = try await Self.playsWhole(media, ticket.id)
            #expect(published > 3)
            let stored = try await outputs()

            // The first worker wakes: it finds its claim gone and stops, its own files removed, the other's kept.
            kill(first.process.processIdentifier, SIGCONT)
            let work = data + "/first/media-work"
            deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(500))
                if ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).isEmpty { break }
            }
            try await Task.sleep(for: .seconds(3))
            #expect(try await media.getVideoInfo(videoId: ticket.id).status == "Normal")
            #expect(try await Self.playsWhole(media, ticket.id) == published)
            // Every file published stays, and nothing was written among them: what the first worker stored (of its own
            // run, under a prefix of its own) is removed with the video if a write of it landed after its clean-up.
            let after = try await outputs()
            #expect(Set(stored).subtracting(after).isEmpty, "gone: \(Set(stored).subtracting(after).sorted())")
            let anyPublished = try #require(stored.first)
            let prefix = anyPublished.split(separator: "/").prefix(4).joined(separator: "/") + "/"
            #expect(stored.allSatisfy { $0.hasPrefix(prefix) })
            let added = Set(after).subtracting(stored)
            #expect(added.allSatisfy { !$0.hasPrefix(prefix) }, "added among the published: \(added.sorted())")
            try await slow.shutdown()
        } catch {
            for node in nodes {
                kill(node.process.processIdentifier, SIGCONT)
                await node.stop(signal: SIGKILL)
            }
            await backends.destroy()
            throw error
        }
        for node in nodes { await node.stop() }
        await backends.destroy()
    }

    @Test("api and worker refuse to start without the shared catalog and store, a worker also without media workers", arguments: [
        (["--role", "worker"], "--catalog"),
        (["--role", "api", "--catalog", "postgres://ferry@127.0.0.1:1/ferry"], "--store"),
        (
            [
                "--role", "worker", "--catalog", "postgres://ferry@127.0.0.1:1/ferry", "--store", "s3://ferry-roles",
                "--store-endpoint", "http://127.0.0.1:1", "--media-workers", "0",
            ], "--media-workers must be at least 1"
        ),
        (["--role", "cook"], "--role must be all, api or worker"),
    ])
    func rolesNeedTheSharedCatalog(arguments: [String], complaint: String) async throws {
        let data = TemporaryDirectory.make("ferry-roles-refused")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
        process.arguments = ["serve", "--data-dir", data, "--port", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging([
            "HOME": data, "FERRY_STORE_ACCESS_KEY_ID": "store-key", "FERRY_STORE_SECRET_ACCESS_KEY": "store-secret",
        ]) { $1 }
        let run = try await runBlocking { try process.runCapturing() }
        #expect(process.terminationStatus != 0)
        #expect(run.errorOutput.contains(complaint), "\(run.errorOutput)")
        #expect(!run.output.contains("listening"))
    }
}
