import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import PostgresNIO
import Testing

@testable import FerryServer
@testable import FerryStorage

extension SharedCatalogTests {
    /// How a query ended.
    enum QueryEnding: Equatable {
        case answered, failed, timedOut
    }

    /// Connections to `url`'s database other than the one asking.
    static func connections(_ url: String) async throws -> Int {
        let database = String(url.split(separator: "/").last ?? "")
        return try await PostgresCatalog.withConnection(url: url) { catalog in
            let rows = try await catalog.rows(
                """
                SELECT count(*)::bigint AS n FROM pg_stat_activity
                WHERE datname = \(database) AND pid <> pg_backend_pid()
                """)
            return Int(try rows.first?["n"].decode(Int64.self) ?? 0)
        }
    }

    @Test("the catalog's connections run as one of the application's services: open while it serves, closed when it stops")
    func catalogConnectionsAreAService() async throws {
        try await PostgresServer.withDatabase { url in
            let server = try await TestServer.with(configure: { $0.catalogURL = url }) { (node: TestServer) async throws -> FerryServer in
                let root = Credentials(accessKeyId: node.root.accessKeyId, secretAccessKey: node.root.secretAccessKey)
                let media = MediaServiceClient(endpoint: URL(string: node.endpoint)!, credentials: root)
                #expect(try await media.listVideos().total == 0)
                #expect(try await Self.connections(url) >= 1)
                return node.server
            }
            // The application's service group has ended: the catalog's connections are closed...
            let deadline = ContinuousClock.now + .seconds(30)
            var open = try await Self.connections(url)
            while open > 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                open = try await Self.connections(url)
            }
            #expect(open == 0)
            // ... and a query fails at once instead of waiting for a connection that will not come.
            let ending = await withTaskGroup(of: QueryEnding.self) { group in
                group.addTask {
                    do {
                        _ = try await server.mediaCatalog.video("v1")
                        return .answered
                    } catch {
                        return .failed
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return .timedOut
                }
                let first = await group.next() ?? .timedOut
                group.cancelAll()
                return first
            }
            #expect(ending == .failed)
        }
    }
}
