import ArgumentParser
import Ferry
import FerryCore
import FerryServer
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Where commands send their requests: a remote endpoint, or the embedded default.
struct ServiceOptions: ParsableArguments {
    @Option(help: "Service endpoint, e.g. http://127.0.0.1:9000 (or FERRY_ENDPOINT). Without one, Ferry runs in-process on --data-dir.")
    var endpoint: String?

    @Option(name: .customLong("data-dir"), help: "Data directory of the embedded service (or FERRY_DATA_DIR). Default ~/.ferry.")
    var dataDirectory: String?

    @Option(help: "Region to sign for (or FERRY_REGION). Default us-east-1.")
    var region: String?

    /// Connects: to the endpoint with credentials from the environment, or to an in-process service (on a data
    /// directory that holds one already when `existing`: else exit 1, nothing made).
    func connect(existing: Bool = false) async throws -> ServiceConnection {
        let env = ProcessInfo.processInfo.environment
        let region = self.region ?? defaultRegion(env)
        if let text = endpoint ?? env["FERRY_ENDPOINT"] {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
            else {
                throw ValidationError(
                    "--endpoint '\(HTTPTarget.quoted(text))' is not an http or https URL "
                        + "such as http://127.0.0.1:9000.")
            }
            // One set, whole: Ferry's own variables when its key id is set, else the AWS ones. A session token left
            // in the shell from another AWS session is not sent with a Ferry key.
            let prefix = (env["FERRY_ACCESS_KEY_ID"] ?? "").isEmpty ? "AWS_" : "FERRY_"
            guard let id = env[prefix + "ACCESS_KEY_ID"], let secret = env[prefix + "SECRET_ACCESS_KEY"] else {
                let message =
                    if env[prefix + "ACCESS_KEY_ID"] != nil {
                        // FERRY_SECRET_ACCESS_KEY does not go with AWS_ACCESS_KEY_ID: one set is taken whole.
                        "\(prefix)ACCESS_KEY_ID is set without \(prefix)SECRET_ACCESS_KEY: set both."
                    } else {
                        "Set FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY (or the AWS_* equivalents)."
                    }
                throw ValidationError(message)
            }
            let credentials = Credentials(
                accessKeyId: id, secretAccessKey: secret, sessionToken: env[prefix + "SESSION_TOKEN"])
            return ServiceConnection(
                endpoint: url, publicEndpoint: url, region: region, credentials: credentials, embedded: nil, dataDirectory: nil)
        }
        let directory = dataDirectory ?? env["FERRY_DATA_DIR"] ?? defaultDataDirectory(env)
        if existing, !FileManager.default.fileExists(atPath: directory + "/catalog.sqlite") {
            complain(
                "ferry: \(directory) is not a Ferry data directory (it holds no catalog.sqlite); "
                    + "name one with --data-dir.")
            throw ExitCode(ExitCodes.failed)
        }
        // Taken before the directory is looked at: another command's embedded service waits for it before it stops,
        // and one stopping now is waited for here (then this command opens the directory itself).
        var client: ServiceClientLock? = try await ServiceClientLock.wait(exclusive: false, directory: directory) {
            complain("ferry: the service on \(directory) is stopping; waiting to open it.")
        }
        // A process that holds the directory and has not yet said where its service listens (commands started at
        // once on one directory) is given this long to say it.
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            do {
                let embedded = try await EmbeddedService.start(dataDirectory: directory, region: region)
                // The service is this command's own: no lock of a client (its own stop would wait for it).
                client = nil
                return ServiceConnection(
                    endpoint: embedded.endpoint, publicEndpoint: URL(string: EmbeddedService.publicEndpoint)!,
                    region: region, credentials: embedded.credentials, embedded: embedded, dataDirectory: directory)
            } catch let busy as DataDirectoryInUse {
                // `ferry serve`, or another command's embedded service, runs on this directory: talk to it rather
                // than open the directory a second time.
                if let text = busy.endpoint, let url = URL(string: text) {
                    guard let root = FerryServer.rootCredentials(dataDirectory: directory, environment: env) else {
                        // No root-credentials.json this command can read: the key came from the environment of
                        // `ferry serve`, is in PostgreSQL, or the file is another user's.
                        complain(
                            "ferry: ferry serve runs on \(directory) (listening on \(text)), and this command "
                                + "cannot read its root key there (root-credentials.json is missing or unreadable: "
                                + "the key came from FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY, is kept in "
                                + "PostgreSQL, or the file is another user's): set FERRY_ACCESS_KEY_ID and "
                                + "FERRY_SECRET_ACCESS_KEY for this command.")
                        throw ExitCode(ExitCodes.failed)
                    }
                    return ServiceConnection(
                        endpoint: url, publicEndpoint: url, region: region,
                        credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey),
                        embedded: nil, dataDirectory: directory, client: client)
                }
                guard ContinuousClock.now < deadline else { throw dataDirectoryBusy(busy) }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}

/// A data directory another Ferry process holds without answering requests on it (another command's embedded
/// service, or one starting): told on standard error, and exit 1, for it is not a usage error.
func dataDirectoryBusy(_ busy: DataDirectoryInUse) -> ExitCode {
    complain("ferry: \(busy.description)")
    return ExitCode(ExitCodes.failed)
}

extension ServiceOptions {
    /// Connects (``connect(existing:)``), runs `body`, and closes the connection (stopping an embedded service)
    /// whatever happens.
    func with<T>(existing: Bool = false, _ body: (ServiceConnection) async throws -> T) async throws -> T {
        let connection = try await connect(existing: existing)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }
}

/// A connection to a service; `close()` stops an embedded one.
struct ServiceConnection: Sendable {
    /// Where requests go.
    var endpoint: URL
    /// ``endpoint`` as text without a trailing `/`, for appending paths to (`http://host:9000/` gave `//_ferry/…`).
    var base: String {
        var text = endpoint.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }
    /// The address URLs are made for (the embedded service signs them for `ferry serve`'s default address).
    var publicEndpoint: URL
    var region: String
    var credentials: Credentials
    var embedded: EmbeddedService?
    /// The data directory of the service, when the command found it by one (embedded, or `ferry serve` running on it).
    var dataDirectory: String?
    /// Held while the command uses the service of another process on ``dataDirectory``.
    var client: ServiceClientLock?

    /// What checkpoints name the service by: a service found by its data directory by that directory (the embedded
    /// service's port changes with every run, and a rerun must find the checkpoint of an interrupted upload, also when
    /// `ferry serve` runs on the directory meanwhile), any other by its endpoint.
    var serviceIdentity: String? {
        dataDirectory.map { "ferry-embedded:" + URL(fileURLWithPath: $0).standardizedFileURL.path }
    }

    func objects(_ configuration: ObjectStorageClient.Configuration = .init()) -> ObjectStorageClient {
        var configuration = configuration
        configuration.serviceIdentity = configuration.serviceIdentity ?? serviceIdentity
        configuration.onRetry = configuration.onRetry ?? Self.sayUnreachable
        return ObjectStorageClient(endpoint: endpoint, region: region, credentials: credentials, configuration: configuration)
    }

    func media(_ configuration: ObjectStorageClient.Configuration = .init()) -> MediaServiceClient {
        var configuration = configuration
        configuration.onRetry = configuration.onRetry ?? Self.sayUnreachable
        return MediaServiceClient(
            endpoint: endpoint, region: region, credentials: credentials, configuration: configuration)
    }

    /// Whether the command said that the service could not be reached.
    private static let saidUnreachable = LockedValue(false)

    /// Says on standard error, once a command, that a request is retried because nothing answers at the endpoint (the
    /// connection refused, the host not found): a mistyped port or a service not running, which the retries would
    /// otherwise leave silent for as long as they take.
    @Sendable static func sayUnreachable(attempt: Int, error: FerryError, delay: Duration) {
        guard let transport = error.underlying as? TransportError,
            [.connectionRefused, .hostNotFound].contains(transport.kind),
            saidUnreachable.withLock({ said in defer { said = true }; return !said })
        else { return }
        let what = TerminalText.headline(transport.message)
        complain("ferry: \(what) Trying again for a while; Ctrl-C stops.")
    }

    func close() async {
        await embedded?.stop()
    }
}

/// The Ferry service run inside the command, on a free loopback port, over a data directory; its keys are created on
/// first use, so `ferry upload movie.mp4` works with nothing else running.
final class EmbeddedService: Sendable {
    /// Where `ferry serve` listens by default; URLs the embedded service hands out are signed for it.
    static let publicEndpoint = "http://127.0.0.1:9000"

    let endpoint: URL
    let credentials: Credentials
    /// The data directory it runs on.
    let dataDirectory: String
    private let services: ServiceGroup
    private let runner: Task<Void, any Error>
    /// The exclusive lock on the directory's clients, once the service stops.
    private let clients = LockedValue<ServiceClientLock?>(nil)

    private init(
        endpoint: URL, credentials: Credentials, dataDirectory: String, services: ServiceGroup,
        runner: Task<Void, any Error>
    ) {
        self.endpoint = endpoint
        self.credentials = credentials
        self.dataDirectory = dataDirectory
        self.services = services
        self.runner = runner
    }

    /// Starts the service on a free port (or `port`). URLs it hands out are signed for `ferry serve`'s default address
    /// unless `followRequests`, when they name the address each request came to (as a browser needs).
    static func start(
        dataDirectory: String, region: String, port: Int = 0, followRequests: Bool = false,
        shutdownSignals: [UnixSignal] = []
    ) async throws -> EmbeddedService {
        var configuration = FerryServerConfiguration(dataDirectory: dataDirectory)
        configuration.port = port
        configuration.region = region
        configuration.publicEndpoint = followRequests ? nil : publicEndpoint
        configuration.uploadAddressesFollowRequests = true
        configuration.mediaProcessing = try MediaOptions.configuration(environment: ProcessInfo.processInfo.environment)
        var logger = Logger(label: "ferry.embedded")
        logger.logLevel = .error
        configuration.logger = logger
        let server = try FerryServer(configuration: configuration)
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = server.makeApplication { port in continuation.yield(port) }
        let services = ServiceGroup(
            configuration: .init(services: [app], gracefulShutdownSignals: shutdownSignals, logger: logger))
        // When the service cannot start (its port cannot be bound), the stream ends and the reason is thrown at once.
        let runner = Task {
            defer { continuation.finish() }
            try await services.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            do {
                try await runner.value
            } catch {
                throw ValidationError("The embedded service did not start: \(error)")
            }
            throw ValidationError("The embedded service did not start.")
        }
        return EmbeddedService(
            endpoint: URL(string: "http://127.0.0.1:\(port)")!,
            credentials: Credentials(
                accessKeyId: server.rootCredentials.accessKeyId, secretAccessKey: server.rootCredentials.secretAccessKey),
            dataDirectory: dataDirectory, services: services, runner: runner)
    }

    func stop() async {
        await waitForClients()
        await services.triggerGracefulShutdown()
        _ = try? await runner.value
    }

    /// Waits until no other command uses this service (a second `ferry upload` on the same data directory joins it
    /// rather than opening the directory, and would fail with "connection refused" halfway), saying so on standard
    /// error when it has to wait; a Ctrl-C meanwhile stops it at once. The lock taken stays until the process ends,
    /// so a command arriving now waits for the service to stop and then opens the directory itself.
    private func waitForClients() async {
        let interrupts = SignalCounter.current
        let seen = interrupts?.count ?? 0
        let lock = try? await ServiceClientLock.wait(exclusive: true, directory: dataDirectory) {
            complain(
                "ferry: another command is using the service this one runs on \(self.dataDirectory); waiting for it to end (Ctrl-C stops the service now).")
        } until: {
            (interrupts?.count ?? 0) > seen
        }
        clients.withLock { $0 = lock }
    }

    /// Waits until the service stops (on one of its shutdown signals).
    func wait() async throws {
        try await runner.value
    }
}

/// Commands that send their requests to the process owning a data directory (rather than open it) hold a shared lock
/// (`flock`) on its `clients` file while they do. An embedded service takes it exclusively before it stops, so that it
/// does not stop under another command's requests; a command that finds it taken so waits, then opens the directory
/// itself. The kernel lets go of it when the process ends, however it ends.
final class ServiceClientLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Takes the lock without waiting; nil when it is held in a mode that excludes `exclusive`. A directory that does
    /// not exist yet (or cannot be used, which opening it as a data directory then reports) has no one to lock out:
    /// the lock holds nothing.
    static func take(exclusive: Bool, directory: String) -> ServiceClientLock? {
        let descriptor = open(directory + "/clients", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return ServiceClientLock(descriptor: -1) }
        while flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            let failure = errno
            if failure == EINTR { continue }
            close(descriptor)
            return failure == EWOULDBLOCK ? nil : ServiceClientLock(descriptor: -1)
        }
        return ServiceClientLock(descriptor: descriptor)
    }

    /// Takes the lock, polling while another holds it; `waiting` is called once if it must wait, and the wait ends
    /// without the lock (nil) when `stop` says so.
    static func wait(
        exclusive: Bool, directory: String, waiting: () -> Void = {}, until stop: () -> Bool = { false }
    ) async throws -> ServiceClientLock? {
        var told = false
        while true {
            if let lock = take(exclusive: exclusive, directory: directory) { return lock }
            if !told {
                waiting()
                told = true
            }
            if stop() { return nil }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// A value shared between tasks, read and written under a lock.
final class LockedValue<Value>: @unchecked Sendable {
    // `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.withLock { body(&value) }
    }
}
