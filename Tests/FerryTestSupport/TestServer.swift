import FerryCore
import FerryServer
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// A Ferry server running in-process on 127.0.0.1 and a free port, with a fresh data directory.
public struct TestServer: Sendable {
    /// The bound port.
    public let port: Int
    /// The server (store, catalog, credentials).
    public let server: FerryServer
    /// The root key.
    public var root: SigV4Credentials { server.rootCredentials }
    /// `http://127.0.0.1:PORT`.
    public var endpoint: String { "http://127.0.0.1:\(port)" }
    /// The data directory.
    public var dataDirectory: String { server.configuration.dataDirectory }

    /// A client signing with the root key.
    public func client(_ credentials: SigV4Credentials? = nil) -> S3TestClient {
        S3TestClient(endpoint: endpoint, credentials: credentials ?? root)
    }

    /// Starts a server, runs `body`, and shuts the server down.
    public static func with<T: Sendable>(
        minPartSize: Int64 = 5 * 1024 * 1024, configure: (inout FerryServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = FerryServerConfiguration(dataDirectory: directory)
        configuration.port = 0
        configuration.minPartSize = minPartSize
        configuration.rootCredentials = SigV4Credentials(
            accessKeyId: "FKIATESTROOT0000", secretAccessKey: "test-root-secret-key-0123456789")
        var logger = Logger(label: "ferry.test")
        logger.logLevel = .warning
        configuration.logger = logger
        // Videos stay at UploadSucc unless a test turns processing on (ffmpeg is not every test's business).
        configuration.mediaProcessing.workers = 0
        configure(&configuration)
        let server = try await FerryServer.open(configuration: configuration, environment: [:])
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = server.makeApplication { port in continuation.yield(port) }
        let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
        return try await runServices(services, ports: ports, portsEnd: { continuation.finish() }) { port in
            try await body(TestServer(port: port, server: server))
        }
    }
}

/// Runs `services` until `body`, given the first port reported on `ports`, returns or throws; then shuts them down
/// gracefully and waits for them.
///
/// With `portsEnd` (which ends the `ports` stream), services that stop before they report a port (one that cannot be
/// bound) fail the call at once with their error instead of leaving it waiting.
public func runServices<T: Sendable>(
    _ services: ServiceGroup, ports: AsyncStream<Int>, portsEnd: @escaping @Sendable () -> Void = {},
    _ body: @Sendable (Int) async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            defer { portsEnd() }
            try await services.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            try await group.waitForAll()
            throw CancellationError()
        }
        do {
            let result = try await body(port)
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
            return result
        } catch {
            await services.triggerGracefulShutdown()
            try? await group.waitForAll()
            throw error
        }
    }
}

/// Temporary directories for tests.
public enum TemporaryDirectory {
    /// Creates a new empty directory under the system temporary directory.
    public static func make(_ prefix: String = "ferry-test") -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
