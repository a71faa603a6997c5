import FerryCore
import FerryServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// A Ferry server running in-process with a fresh data directory: on 127.0.0.1 and a free port (``with(minPartSize:configure:_:)``),
/// or without a socket, its router answering requests in memory (``inMemory(minPartSize:configure:_:)``).
public struct TestServer: Sendable {
    /// The bound port (0 in memory).
    public let port: Int
    /// The server (store, catalog, credentials).
    public let server: FerryServer
    /// The root key.
    public var root: SigV4Credentials { server.rootCredentials }
    /// The router requests go to in memory; nil when the server listens on a socket.
    public let router: InMemoryRouter?
    /// `http://127.0.0.1:PORT`; in memory `http://localhost`, the host the router's requests carry (only
    /// ``client(_:)`` reaches it).
    public var endpoint: String { router == nil ? "http://127.0.0.1:\(port)" : "http://localhost" }
    /// The data directory.
    public var dataDirectory: String { server.configuration.dataDirectory }

    /// A client signing with the root key.
    public func client(_ credentials: SigV4Credentials? = nil) -> S3TestClient {
        var client = S3TestClient(endpoint: endpoint, credentials: credentials ?? root)
        client.router = router
        return client
    }

    /// Starts a server, runs `body`, and shuts the server down.
    public static func with<T: Sendable>(
        minPartSize: Int64 = 5 * 1024 * 1024, configure: (inout FerryServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configuration = configuration(directory: directory, minPartSize: minPartSize, configure: configure)
        let server = try await FerryServer.open(configuration: configuration, environment: [:])
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = server.makeApplication { port in continuation.yield(port) }
        let services = ServiceGroup(configuration: .init(services: [app], logger: configuration.logger))
        return try await runServices(services, ports: ports, portsEnd: { continuation.finish() }) { port in
            try await body(TestServer(port: port, server: server, router: nil))
        }
    }

    /// Opens a server without a socket, runs `body` with requests going straight to its router (Hummingbird's
    /// router test mode: the same responder, services and handlers, no connection), and shuts it down.
    ///
    /// For tests of what the server answers, where a connection adds nothing: only ``client(_:)``'s requests reach
    /// it. Tests of connections (limits, `100 Continue`, bytes on the wire) and of SDK clients use
    /// ``with(minPartSize:configure:_:)``. With `FERRY_TEST_SOCKETS=1` in the environment these tests run on a
    /// socket instead, to show both paths answer alike.
    public static func inMemory<T: Sendable>(
        minPartSize: Int64 = 5 * 1024 * 1024, configure: (inout FerryServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer) async throws -> T
    ) async throws -> T {
        if ProcessInfo.processInfo.environment["FERRY_TEST_SOCKETS"] == "1" {
            return try await with(minPartSize: minPartSize, configure: configure, body)
        }
        let directory = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let configuration = configuration(directory: directory, minPartSize: minPartSize, configure: configure)
        let server = try await FerryServer.open(configuration: configuration, environment: [:])
        return try await server.makeApplication().test(.router) { client in
            try await body(TestServer(port: 0, server: server, router: InMemoryRouter(client: client)))
        }
    }

    /// The configuration every test server starts from: its own data directory, a free port, a fixed root key,
    /// warnings only, no media processing; then `configure`.
    static func configuration(
        directory: String, minPartSize: Int64, configure: (inout FerryServerConfiguration) -> Void
    ) -> FerryServerConfiguration {
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
        // Tools at nice 10 but not SCHED_IDLE: while other suites keep both cores busy a SCHED_IDLE ffmpeg gets almost
        // no CPU, and the media tests' waits ran out.
        configuration.mediaProcessing.idleScheduling = false
        configure(&configuration)
        return configuration
    }
}

/// A server's router reached in memory: a request goes to the responder as a `Request` and its whole response
/// comes back, with no socket, connection or HTTP parsing between.
public struct InMemoryRouter: Sendable {
    let client: any TestClientProtocol

    /// Sends `method` `target` (path and query) with `headers` and `body`; the host is `localhost`.
    func send(
        _ method: String, _ target: String, headers: [(name: String, value: String)], body: [UInt8]
    ) async throws -> S3TestClient.Reply {
        // What cannot be a `Request` cannot be sent in memory; such a test belongs on a socket.
        var fields = HTTPFields()
        for header in headers where header.name.lowercased() != "host" {
            guard let name = HTTPField.Name(header.name) else {
                throw InMemoryRequestError(description: "the header name \(header.name) cannot be sent in memory")
            }
            fields.append(HTTPField(name: name, value: header.value))
        }
        guard let requestMethod = HTTPRequest.Method(method) else {
            throw InMemoryRequestError(description: "the method \(method) cannot be sent in memory")
        }
        let hasBody = !body.isEmpty || method == "PUT" || method == "POST"
        let response = try await client.executeRequest(
            uri: target, method: requestMethod, headers: fields,
            body: hasBody ? ByteBuffer(bytes: body) : nil)
        var replyHeaders = HTTPHeaders()
        for field in response.headers { replyHeaders.add(name: field.name.rawName, value: field.value) }
        var collected = response.body
        return S3TestClient.Reply(
            status: Int(response.status.code), headers: replyHeaders,
            body: collected.readBytes(length: collected.readableBytes) ?? [])
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

/// A request an in-memory router cannot carry (use ``TestServer/with(minPartSize:configure:_:)`` for it).
public struct InMemoryRequestError: Error, CustomStringConvertible {
    /// What could not be sent.
    public var description: String
}
