import Foundation

/// What several `ferry serve` nodes share: one SeaweedFS as the object store and one PostgreSQL database as the
/// catalog, with the arguments and environment that point a node at them.
public struct SharedBackends: Sendable {
    /// The object store.
    public let seaweed: SeaweedFSServer
    /// The catalog's server.
    public let postgres: PostgresServer
    /// `--store`, `--store-endpoint` and `--catalog` for `ferry serve`.
    public let serveArguments: [String]
    /// The store's key, as `ferry serve` reads it.
    public let serveEnvironment: [String: String]

    /// Starts SeaweedFS and PostgreSQL, and names a store location (`bucket`, `prefix`) and a new database for nodes.
    /// Nothing started is left running when it throws.
    public static func start(bucket: String, prefix: String) async throws -> SharedBackends {
        let seaweed = try await SeaweedFSServer.start()
        let postgres: PostgresServer
        do { postgres = try await PostgresServer.start() } catch {
            await seaweed.destroy()
            throw error
        }
        do {
            let url = try await postgres.createDatabase()
            let (arguments, environment) = seaweed.serveArguments(seaweed.location(bucket: bucket, prefix: prefix))
            return SharedBackends(
                seaweed: seaweed, postgres: postgres, serveArguments: arguments + ["--catalog", url],
                serveEnvironment: environment)
        } catch {
            await seaweed.destroy()
            await postgres.destroy()
            throw error
        }
    }

    /// Stops both and removes their data.
    public func destroy() async {
        await seaweed.destroy()
        await postgres.destroy()
    }
}
