import Ferry
import FerryTestSupport
import Foundation
import Testing

@Suite("ferry keys", .timeLimit(.minutes(10)))
struct KeysCommandTests {
    /// Runs the built `ferry` with the server's endpoint and root key.
    func ferry(_ arguments: [String], server: TestServer) async throws -> FerryRun {
        try await FerryRun.run(
            arguments,
            environment: [
                "FERRY_ENDPOINT": server.endpoint, "FERRY_ACCESS_KEY_ID": server.root.accessKeyId,
                "FERRY_SECRET_ACCESS_KEY": server.root.secretAccessKey,
            ])
    }

    @Test("create prints a working key once, list shows it, disable stops it")
    func lifecycle() async throws {
        try await TestServer.with { server in
            let created = try await ferry(["keys", "create", "--actions", "media:*", "--description", "app server"], server: server)
            #expect(created.status == 0, "\(created.error)")
            let lines = Dictionary(uniqueKeysWithValues: created.output.split(separator: "\n").compactMap { line -> (String, String)? in
                let parts = line.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            })
            let id = try #require(lines["FERRY_ACCESS_KEY_ID"])
            let secret = try #require(lines["FERRY_SECRET_ACCESS_KEY"])
            let key = Credentials(accessKeyId: id, secretAccessKey: secret)
            #expect(try await server.media(key).listVideos().total == 0)

            let listed = try await ferry(["keys", "list"], server: server)
            #expect(listed.output.contains("\(id)\tactive\tapp server"))
            #expect(!listed.output.contains(secret))

            #expect(try await ferry(["keys", "disable", id], server: server).status == 0)
            #expect(try await ferry(["keys", "list"], server: server).output.contains("\(id)\tdisabled"))
            await #expect(throws: FerryError.self) { try await server.media(key).listVideos() }
            let missing = try await ferry(["keys", "disable", "FKIANOSUCHKEY"], server: server)
            #expect(missing.status == 1)
            #expect(missing.error.contains("InvalidAccessKey.NotFound"))
        }
    }
}
