import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL server for a test: a fresh cluster (`initdb`) in a temporary directory, started with `pg_ctl` on
/// 127.0.0.1 and a free port, trusting local connections for the user `ferry`. PostgreSQL refuses to run as root, so
/// when the tests do, the cluster belongs to the `postgres` account and its tools run through `runuser`.
///
/// Nothing is skipped: when PostgreSQL is missing or cannot start, ``start(fsync:)`` throws with the reason (`.ci/run`
/// installs Debian's `postgresql`).
public final class PostgresServer: Sendable {
    /// The port it listens on.
    public let port: Int
    /// Directory holding the cluster, its socket and its log.
    public let directory: String
    /// Directory of the PostgreSQL programs.
    let binaries: String
    /// The account the server runs as when the tests run as root.
    let account: String?

    /// `postgres://ferry@127.0.0.1:PORT/<database>`.
    public func url(database: String) -> String { "postgres://ferry@127.0.0.1:\(port)/\(database)" }

    /// PostgreSQL could not be found or started.
    public struct Failure: Error, CustomStringConvertible {
        /// Why.
        public var description: String
    }

    private init(port: Int, directory: String, binaries: String, account: String?) {
        self.port = port
        self.directory = directory
        self.binaries = binaries
        self.account = account
    }

    /// Where `initdb` and `pg_ctl` are: Debian's versioned directory (newest first), else `PATH`.
    static func locateBinaries() throws -> String {
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions where FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/initdb") {
            return "/usr/lib/postgresql/\(version)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where FileManager.default.isExecutableFile(atPath: "\(directory)/initdb") {
            return String(directory)
        }
        throw Failure(description: "PostgreSQL is not installed (initdb not found); .ci/run installs Debian's postgresql")
    }

    /// Creates and starts a cluster. With `fsync` false (the default) it trades durability for speed; tests that
    /// kill PostgreSQL keep it true.
    public static func start(fsync: Bool = false) async throws -> PostgresServer {
        let binaries = try locateBinaries()
        let directory = TemporaryDirectory.make("ferry-pg")
        let account: String? = getuid() == 0 ? "postgres" : nil
        if let account {
            guard getpwnam(account) != nil else {
                throw Failure(description: "running as root, PostgreSQL needs the \(account) account (apt-get install postgresql)")
            }
            _ = try await run("/bin/chown", ["-R", account, directory], as: nil)
        }
        // Code-point order (C), and the Unicode case folding of a UTF-8 character type, as most installations have.
        let initdb = try await run(
            binaries + "/initdb",
            [
                "-D", directory + "/data", "-U", "ferry", "--auth=trust", "--encoding=UTF8", "--locale=C",
                "--lc-ctype=C.UTF-8", "--no-sync",
            ],
            as: account)
        guard initdb.status == 0 else { throw Failure(description: "initdb failed: \(initdb.errorOutput)") }
        let port = try freePort()
        let server = PostgresServer(port: port, directory: directory, binaries: binaries, account: account)
        try await server.startServer(fsync: fsync)
        return server
    }

    /// Starts (or starts again) the server on its port.
    public func startServer(fsync: Bool = false) async throws {
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=\(fsync ? "on" : "off") -c max_connections=200"
        // The server inherits pg_ctl's descriptors: they go to a file, not to a pipe that would then never close.
        let status = try await Self.runDetached(
            binaries + "/pg_ctl", ["-D", directory + "/data", "-l", directory + "/server.log", "-o", options, "-w", "-t", "60", "start"],
            output: directory + "/pg_ctl.out", as: account)
        guard status == 0 else {
            let output = (try? String(contentsOfFile: directory + "/pg_ctl.out", encoding: .utf8)) ?? ""
            let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
            throw Failure(description: "pg_ctl start failed: \(output) \(log.suffix(2000))")
        }
    }

    /// Creates an empty database; returns its URL.
    public func createDatabase(_ name: String = "ferry_\(UUID().uuidString.prefix(8).lowercased())") async throws -> String {
        let created = try await Self.run(
            binaries + "/createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "ferry", name], as: account)
        guard created.status == 0 else { throw Failure(description: "createdb failed: \(created.errorOutput)") }
        return url(database: name)
    }

    /// Stops the server: `fast` (clean) or `immediate` (as a crash would).
    public func stopServer(mode: String = "fast") async {
        _ = try? await Self.runDetached(
            binaries + "/pg_ctl", ["-D", directory + "/data", "-m", mode, "-w", "stop"], output: directory + "/pg_ctl-stop.out",
            as: account)
    }

    /// Stops the server and deletes the cluster.
    public func destroy() async {
        await stopServer(mode: "immediate")
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `body` with a fresh server and a fresh database (its URL), then removes both.
    public static func withDatabase<T>(_ body: (String) async throws -> T) async throws -> T {
        try await withServer { _, url in try await body(url) }
    }

    /// Runs `body` with a fresh server (to stop and start) and a fresh database on it (its URL), then removes both.
    public static func withServer<T>(_ body: (PostgresServer, String) async throws -> T) async throws -> T {
        let server = try await start()
        do {
            let result = try await body(server, try await server.createDatabase())
            await server.destroy()
            return result
        } catch {
            await server.destroy()
            throw error
        }
    }

    /// Runs a program, as `account` (through runuser) when one is given.
    static func run(_ program: String, _ arguments: [String], as account: String?) async throws -> CapturedRun {
        try await runBlocking {
            let process = Process()
            if let account {
                process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
                process.arguments = ["-u", account, "--", program] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: program)
                process.arguments = arguments
            }
            return try process.runCapturing()
        }
    }

    /// Runs a program with its output going to a file and no other descriptor of the test process; returns its exit
    /// status. (`pg_ctl start` leaves the server running with what pg_ctl inherited, so a pipe, or the descriptor
    /// Foundation's `Process` watches to learn that its child ended, would never close.)
    static func runDetached(_ program: String, _ arguments: [String], output: String, as account: String?) async throws
        -> Int32
    {
        try await runBlocking {
            let argv = (account.map { ["/usr/sbin/runuser", "-u", $0, "--", program] } ?? [program]) + arguments
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            // Every other descriptor open now is closed in the child (glibc ignores those closed meanwhile).
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
                if let fd = Int32(entry), fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
            }
            let cArguments = argv.map { strdup($0) } + [nil]
            defer { for pointer in cArguments { free(pointer) } }
            var pid = pid_t()
            let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
            guard spawned == 0 else { throw Failure(description: "\(argv[0]) could not start: \(String(cString: strerror(spawned)))") }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        }
    }

    /// A TCP port on 127.0.0.1 nothing listens on (``LoopbackPort/unused()``).
    public static func freePort() throws -> Int {
        try LoopbackPort.unused()
    }
}
