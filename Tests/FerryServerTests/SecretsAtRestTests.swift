import FerryCore
@testable import FerryServer
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

@Suite("Secrets at rest and the data directory's modes", .timeLimit(.minutes(10)))
struct SecretsAtRestTests {
    @Test("every directory of the data directory is 0700 and every file 0600, even when it existed as 0755")
    func modes() async throws {
        let directory = TemporaryDirectory.make("ferry-modes")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
        _ = FileManager.default.createFile(atPath: directory + "/left-over", contents: Data([1]), attributes: [.posixPermissions: 0o644])
        try await TestServer.inMemory(configure: { $0.dataDirectory = directory }) { server in
            let s3 = server.client()
            try await s3.createBucket("modes")
            try await s3.put("modes", "k", Array(repeating: 1, count: 3000))
            let id = try await s3.createMultipartUpload("modes", "mp")
            _ = try await s3.uploadPart("modes", "mp", uploadId: id, number: 1, [2])
            _ = try await server.server.credentials.createTestKey(
                catalog: server.server.catalog, policy: AccessPolicy(statements: [.init(actions: ["s3:*"])]))
            var checked = 0
            for path in [directory] + (FileManager.default.subpaths(atPath: directory) ?? []).map({ directory + "/" + $0 }) {
                let attributes = try FileManager.default.attributesOfItem(atPath: path)
                let mode = (attributes[.posixPermissions] as? Int ?? -1) & 0o777
                if attributes[.type] as? FileAttributeType == .typeDirectory {
                    #expect(mode == 0o700, "\(path) is \(String(mode, radix: 8))")
                } else {
                    #expect(mode == 0o600, "\(path) is \(String(mode, radix: 8))")
                }
                checked += 1
            }
            #expect(FileManager.default.fileExists(atPath: directory + "/catalog.sqlite-wal"))
            #expect(checked > 8)
        }
    }

    @Test("access key secrets are sealed in the catalog: a copy of it alone yields none")
    func sealedSecrets() async throws {
        let directory = TemporaryDirectory.make("ferry-sealed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = try await TestServer.inMemory(configure: { $0.dataDirectory = directory }) { server in
            let key = try await server.server.credentials.createTestKey(
                catalog: server.server.catalog, policy: AccessPolicy(statements: [.init(actions: ["s3:*"])]))
            // The key works: the server opens its secret.
            #expect(try await server.client(key).createBucket("sealed").status == 200)
            return key
        }
        for name in ["catalog.sqlite", "catalog.sqlite-wal"] {
            let bytes = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
            #expect(bytes.range(of: Data(key.secretAccessKey.utf8)) == nil, "\(name) holds the secret in clear")
        }
        // Without the server's key, the catalog says nothing usable.
        let copy = try SQLiteCatalog(path: directory + "/catalog.sqlite")
        let stored = try #require(try await copy.accessKey(key.accessKeyId))
        #expect(stored.secretAccessKey != key.secretAccessKey)
        #expect(stored.secretAccessKey.hasPrefix(SecretBox.prefix))
        #expect(!String(describing: stored).contains(stored.secretAccessKey))
        // A catalog written before sealing is sealed when the server opens it.
        let old = TemporaryDirectory.make("ferry-unsealed")
        defer { try? FileManager.default.removeItem(atPath: old) }
        let plain = try SQLiteCatalog(path: old + "/catalog.sqlite")
        try await plain.insertAccessKey(
            StoredAccessKey(
                accessKeyId: "FKIAOLDKEY0000000000", secretAccessKey: "old-plain-secret-value", policy: .fullAccess,
                status: .active, description: "", createdAt: Date()))
        try await TestServer.inMemory(configure: { $0.dataDirectory = old }) { server in
            let reopened = try #require(try await server.server.catalog.accessKey("FKIAOLDKEY0000000000"))
            #expect(reopened.secretAccessKey == "old-plain-secret-value")
            let raw = try #require(try await SQLiteCatalog(path: old + "/catalog.sqlite").accessKey("FKIAOLDKEY0000000000"))
            #expect(raw.secretAccessKey.hasPrefix(SecretBox.prefix))
        }
    }
}
