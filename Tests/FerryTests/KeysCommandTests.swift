import Crypto
import Ferry
import FerryCore
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

    @Test("a service that cannot be reached past the retries exits 75 (running the command again may succeed), as ferry upload does; a refusal exits 1")
    func unreachableServiceExits75() async throws {
        let port = try LoopbackPort.unused()
        let home = TemporaryDirectory.make("ferry-keys-unreachable")
        defer { try? FileManager.default.removeItem(atPath: home) }
        for command in [["keys", "list"], ["videos", "list"], ["signing-keys", "list"]] {
            let run = try await FerryRun.run(
                command,
                environment: [
                    "FERRY_ENDPOINT": "http://127.0.0.1:\(port)", "FERRY_ACCESS_KEY_ID": "FKIAX",
                    "FERRY_SECRET_ACCESS_KEY": "secret-value-123", "HOME": home,
                ])
            #expect(run.status == 75, "\(command): \(run.status) \(run.error)")
            #expect(run.error.contains("Could not connect to http://127.0.0.1:\(port)"), "\(run.error)")
        }
    }

    @Test("output whose reader went away (ferry videos list | head -1) is dropped: the command does its work and exits 74, never a crash")
    func closedPipe() async throws {
        try await TestServer.with { server in
            let home = TemporaryDirectory.make("ferry-closed-pipe")
            defer { try? FileManager.default.removeItem(atPath: home) }
            _ = try await ferry(["keys", "create", "--actions", "media:*", "--description", "listed"], server: server)
            for command in ["keys list", "videos list", "keys create --actions media:*"] {
                let run = try await runBlocking {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: "/bin/bash")
                    // The reader closes its end at once and stays a moment, so what ferry prints meets a closed pipe.
                    process.arguments = ["-c", "\"$0\" \(command) | { exec 0<&-; sleep 2; }; exit ${PIPESTATUS[0]}", FerryExecutable.path]
                    process.environment = ProcessInfo.processInfo.environment.merging([
                        "HOME": home, "FERRY_ENDPOINT": server.endpoint, "FERRY_ACCESS_KEY_ID": server.root.accessKeyId,
                        "FERRY_SECRET_ACCESS_KEY": server.root.secretAccessKey,
                    ]) { $1 }
                    return try process.runCapturing()
                }
                #expect(run.status == 74, "\(command): \(run.status) \(run.errorOutput.prefix(500))")
                #expect(!run.errorOutput.contains("Fatal error"), "\(command): \(run.errorOutput.prefix(500))")
            }
        }
    }

    @Test("commands started at once on one data directory all succeed: the first opens it, the others wait for its service to say where it listens and send their requests there")
    func commandsStartedAtOnce() async throws {
        let work = TemporaryDirectory.make("ferry-keys-at-once")
        defer { try? FileManager.default.removeItem(atPath: work) }
        for round in ["new", "existing"] {
            let runs = try await withThrowingTaskGroup(of: FerryRun.self) { group in
                for _ in 0..<5 {
                    group.addTask { try await FerryRun.run(["keys", "list", "--data-dir", work + "/data"], environment: ["HOME": work]) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for run in runs { #expect(run.status == 0, "\(round): \(run.status) \(run.error)") }
        }
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
            #expect(listed.output.contains("\(id)\tactive\tapp server\tno limits"), "\(listed.output)")
            #expect(!listed.output.contains(secret))

            #expect(try await ferry(["keys", "disable", id], server: server).status == 0)
            #expect(try await ferry(["keys", "list"], server: server).output.contains("\(id)\tdisabled"))
            await #expect(throws: FerryError.self) { try await server.media(key).listVideos() }
            // A misspelt action is refused (it would allow nothing), and no key is made.
            let misspelt = try await ferry(["keys", "create", "--actions", "media:*,s3:PutObjekt"], server: server)
            #expect(misspelt.status == 1)
            #expect(misspelt.error.contains("InvalidParameter") && misspelt.error.contains("s3:PutObjekt"), "\(misspelt.error)")
            #expect(try await ferry(["keys", "list"], server: server).output.split(separator: "\n").count(where: { $0.hasPrefix("FKIA") }) == 1)
            let missing = try await ferry(["keys", "disable", "FKIANOSUCHKEY"], server: server)
            #expect(missing.status == 1)
            #expect(missing.error.contains("InvalidAccessKey.NotFound"))
            #expect(missing.error.contains("No access key has the id FKIANOSUCHKEY"), "\(missing.error)")
        }
    }

    @Test("create and update set a quota; usage shows what the key holds against it")
    func quotas() async throws {
        try await TestServer.with { server in
            let created = try await ferry(
                ["keys", "create", "--actions", "s3:*,media:*", "--storage-bytes", "4", "--concurrent-uploads", "1"],
                server: server)
            #expect(created.status == 0, "\(created.error)")
            let id = try #require(
                created.output.split(separator: "\n").first { $0.hasPrefix("FERRY_ACCESS_KEY_ID=") }?
                    .dropFirst("FERRY_ACCESS_KEY_ID=".count))
            let secret = try #require(
                created.output.split(separator: "\n").first { $0.hasPrefix("FERRY_SECRET_ACCESS_KEY=") }?
                    .dropFirst("FERRY_SECRET_ACCESS_KEY=".count))
            #expect(try await server.client().createBucket("cli").status == 200)
            let s3 = server.client(SigV4Credentials(accessKeyId: String(id), secretAccessKey: String(secret)))
            #expect(try await s3.put("cli", "a", [1, 2, 3]).status == 200)
            #expect(try await s3.put("cli", "b", [1, 2]).errorCode == "QuotaExceeded")

            let usage = try await ferry(["keys", "usage", String(id)], server: server)
            #expect(usage.status == 0, "\(usage.error)")
            #expect(usage.output.contains("storage-bytes\t3\t4"), "\(usage.output)")
            #expect(usage.output.contains("uploads-in-progress\t0\t1"), "\(usage.output)")
            #expect(usage.output.contains("videos\t0\tunlimited"), "\(usage.output)")

            // The answer names every limit the key now has: the concurrent-uploads limit not named is gone.
            let updated = try await ferry(["keys", "update", String(id), "--storage-bytes", "10"], server: server)
            #expect(updated.status == 0 && updated.output.contains(": storage-bytes 10 (limits not named are removed)"), "\(updated.output)")
            #expect(try await s3.put("cli", "b", [1, 2]).status == 200)
            #expect(try await ferry(["keys", "list"], server: server).output.contains("\(id)\tactive\t\tstorage-bytes 10\n"))
            // Limits the service would refuse are usage errors, told before anything is sent.
            for bad in [["--requests-per-second", "nan"], ["--requests-per-second", "inf"], ["--storage-bytes=-1"]] {
                let refused = try await ferry(["keys", "update", String(id)] + bad, server: server)
                #expect(refused.status == 64, "\(bad): \(refused.status) \(refused.error)")
            }
            let raised = try await ferry(["keys", "usage", String(id)], server: server)
            #expect(raised.output.contains("storage-bytes\t5\t10"), "\(raised.output)")
            #expect(raised.output.contains("uploads-in-progress\t0\tunlimited"), "\(raised.output)")
        }
    }

    @Test("signing-keys create writes the private key to a new 0600 file, list shows the public half, delete stops it")
    func signingKeys() async throws {
        try await TestServer.with { server in
            let directory = TemporaryDirectory.make("ferry-signing-keys")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/playback.pem"
            let created = try await ferry(["signing-keys", "create", "--private-key-file", file], server: server)
            #expect(created.status == 0, "\(created.error)")
            #expect(!created.output.contains("PRIVATE KEY"), "\(created.output)")
            #expect(created.output.contains("ALGORITHM=ES256"), "\(created.output)")
            let id = try #require(
                created.output.split(separator: "\n").first { $0.hasPrefix("SIGNING_KEY_ID=") }?
                    .dropFirst("SIGNING_KEY_ID=".count))
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600)
            // The file's private key is the half of the public key the server keeps.
            let privateKey = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: file, encoding: .utf8))
            let listed = try await server.media().signingKeys()
            #expect(listed.map(\.keyId) == [String(id)])
            #expect(
                listed.first?.publicKey.trimmingCharacters(in: .whitespacesAndNewlines)
                    == privateKey.publicKey.pemRepresentation.trimmingCharacters(in: .whitespacesAndNewlines))

            // An existing file is never overwritten, and no key is made for it.
            let again = try await ferry(["signing-keys", "create", "--private-key-file", file], server: server)
            #expect(again.status != 0)
            #expect(again.error.contains("exists"), "\(again.error)")
            // A file that cannot be written: the key made for it is deleted again.
            let unwritable = try await ferry(
                ["signing-keys", "create", "--private-key-file", directory + "/missing/key.pem"], server: server)
            #expect(unwritable.status == 1)
            #expect(unwritable.error.contains("cannot write the private key"), "\(unwritable.error)")
            #expect(try await server.media().signingKeys().map(\.keyId) == [String(id)])

            // Without a file the private key is printed; list shows both keys with their algorithms.
            let rsa = try await ferry(["signing-keys", "create", "--algorithm", "RS256"], server: server)
            #expect(rsa.status == 0, "\(rsa.error)")
            #expect(rsa.output.contains("ALGORITHM=RS256\n-----BEGIN PRIVATE KEY-----"), "\(rsa.output)")
            let rsaId = try #require(
                rsa.output.split(separator: "\n").first { $0.hasPrefix("SIGNING_KEY_ID=") }?
                    .dropFirst("SIGNING_KEY_ID=".count))
            let list = try await ferry(["signing-keys", "list"], server: server)
            #expect(list.output.contains("\(id)\tES256\t"), "\(list.output)")
            #expect(list.output.contains("\(rsaId)\tRS256\t"), "\(list.output)")
            #expect(!list.output.contains("PRIVATE"))

            #expect(try await ferry(["signing-keys", "delete", String(rsaId)], server: server).status == 0)
            #expect(try await server.media().signingKeys().map(\.keyId) == [String(id)])
            let missing = try await ferry(["signing-keys", "delete", String(rsaId)], server: server)
            #expect(missing.status == 1)
            #expect(missing.error.contains("InvalidSigningKey.NotFound"), "\(missing.error)")

            // A conflict a rerun would meet again (409 with a code: the most signing keys a key may have) exits 1,
            // not 75 as a conflict that passes does.
            for _ in 1..<50 { _ = try await server.media().createSigningKey() }
            let full = try await ferry(["signing-keys", "create"], server: server)
            #expect(full.status == 1, "\(full.status) \(full.error)")
            #expect(full.error.contains("QuotaExceeded.SigningKeys"), "\(full.error)")
        }
    }
}
