import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ferry backup` and `ferry restore` of a data directory of the embedded default, with `ferry serve` running on it.
@Suite("ferry backup and restore", .timeLimit(.minutes(10)))
struct BackupTests {
    static let bucket = "backups"

    /// Deterministic bytes for an object: `count` bytes from a generator seeded with `seed`.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1
        out.withUnsafeMutableBytes { buffer in
            var index = 0
            while index < count {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let word = state ^ (state >> 29)
                let n = Swift.min(8, count - index)
                withUnsafeBytes(of: word) { buffer.baseAddress!.advanced(by: index).copyMemory(from: $0.baseAddress!, byteCount: n) }
                index += n
            }
        }
        return out
    }

    /// A `ferry serve` on a new data directory (its own HOME), small parts allowed, no media workers.
    static func startServer(_ data: String) async throws -> FerryExecutable.Server {
        try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: ["--min-part-size", "1024", "--media-workers", "0"],
            environment: ["HOME": data + "-home"], logFile: data + "-serve.log")
    }

    /// The root key the server generated and keeps in its data directory.
    static func root(_ data: String) throws -> SigV4Credentials {
        try #require(FerryServer.rootCredentials(dataDirectory: data, environment: [:]))
    }

    /// Every object of the bucket (one page: the tests keep fewer than 1000).
    static func listing(_ s3: S3TestClient) async throws -> [ListBucketResult.Object] {
        let reply = try await s3.send("GET", S3TestClient.path(bucket), query: [("list-type", "2")])
        #expect(reply.status == 200, "\(reply.text)")
        let result = try S3XML.decode(ListBucketResult.self, from: Data(reply.body))
        #expect(!result.isTruncated)
        return result.contents
    }

    /// Runs `ferry backup` or `ferry restore` on `data`.
    static func ferry(_ command: String, data: String, _ path: String) async throws -> FerryRun {
        try await FerryRun.run([command, "--data-dir", data, path])
    }

    /// The names below `directory` (recursively), for comparing a directory before and after a refused restore.
    static func contents(_ directory: String) -> [String] {
        ((FileManager.default.enumerator(atPath: directory)?.allObjects as? [String]) ?? []).sorted()
    }

    @Test("a backup taken while ferry serve runs and a writer overwrites objects restores every acknowledged object byte for byte, with the same keys")
    func backupWhileServing() async throws {
        let work = TemporaryDirectory.make("ferry-backup")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        let server = try await Self.startServer(data)
        let root = try Self.root(data)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        #expect(try await s3.createBucket(Self.bucket).status == 200)

        // A scoped access key: its secret is sealed in the catalog with the server key, so the restored server must
        // have both.
        let media = MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        let scoped = try await media.createAccessKey(
            policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: Self.bucket)]), description: "backup test")

        // Objects acknowledged before the backup starts: plain ones (one overwritten, one deleted), a multipart one,
        // and a multipart upload still in progress.
        var acknowledged: [String: String] = [:]
        for index in 0..<24 {
            let body = Self.bytes(1000 + index * 37_000, seed: UInt64(index))
            #expect(try await s3.put(Self.bucket, "plain/\(index)", body).status == 200)
            acknowledged["plain/\(index)"] = SigV4.hexSHA256(body)
        }
        let replacement = Self.bytes(4321, seed: 999)
        #expect(try await s3.put(Self.bucket, "plain/0", replacement).status == 200)
        acknowledged["plain/0"] = SigV4.hexSHA256(replacement)
        #expect(try await s3.send("DELETE", S3TestClient.path(Self.bucket, "plain/1")).status == 204)
        acknowledged["plain/1"] = nil

        let multipartParts = [Self.bytes(300_000, seed: 101), Self.bytes(200_000, seed: 102), Self.bytes(5_000, seed: 103)]
        let multipartId = try await s3.createMultipartUpload(Self.bucket, "multipart/done")
        var etags: [(Int, String)] = []
        for (offset, part) in multipartParts.enumerated() {
            let reply = try await s3.uploadPart(Self.bucket, "multipart/done", uploadId: multipartId, number: offset + 1, part)
            #expect(reply.status == 200)
            etags.append((offset + 1, try #require(reply.header("ETag"))))
        }
        let completed = try await s3.complete(
            Self.bucket, "multipart/done", uploadId: multipartId, xml: S3TestClient.completeXML(etags))
        #expect(completed.status == 200, "\(completed.text)")
        acknowledged["multipart/done"] = SigV4.hexSHA256(multipartParts.flatMap { $0 })

        let openParts = [Self.bytes(150_000, seed: 201), Self.bytes(7_000, seed: 202)]
        let openId = try await s3.createMultipartUpload(Self.bucket, "multipart/open")
        var openETags: [(Int, String)] = []
        for (offset, part) in openParts.enumerated() {
            let reply = try await s3.uploadPart(Self.bucket, "multipart/open", uploadId: openId, number: offset + 1, part)
            #expect(reply.status == 200)
            openETags.append((offset + 1, try #require(reply.header("ETag"))))
        }

        // A writer that overwrites and deletes objects all through the backup, so the server deletes blob files while
        // they are being backed up. Every body it ever sent is remembered: a restored `live/` object must be one.
        let written = NIOLockedValueBox<Set<String>>([])
        let writes = NIOLockedValueBox(0)
        let writer = Task {
            var round: UInt64 = 0
            while !Task.isCancelled {
                round += 1
                let key = "live/\(round % 6)"
                let body = Self.bytes(20_000 + Int(round % 7) * 9_000, seed: 10_000 + round)
                written.withLockedValue { _ = $0.insert(SigV4.hexSHA256(body)) }
                if round % 11 == 0 {
                    _ = try? await s3.send("DELETE", S3TestClient.path(Self.bucket, key))
                } else if (try? await s3.put(Self.bucket, key, body))?.status == 200 {
                    writes.withLockedValue { $0 += 1 }
                }
            }
        }
        // The writer has stored objects before the backup starts.
        while writes.withLockedValue({ $0 }) < 20 { try await Task.sleep(for: .milliseconds(10)) }
        let writesBefore = writes.withLockedValue { $0 }

        let output = work + "/backup"
        let backup = try await Self.ferry("backup", data: data, output)
        let writesAfter = writes.withLockedValue { $0 }
        writer.cancel()
        _ = await writer.result
        #expect(backup.status == 0, "\(backup.error)")
        #expect(backup.output.contains("Backed up"))
        #expect(writesAfter > writesBefore, "the writer stored nothing while the backup ran")
        for secret in [root.secretAccessKey, scoped.secretAccessKey] {
            #expect(!backup.output.contains(secret) && !backup.error.contains(secret))
        }
        #expect(FileManager.default.fileExists(atPath: output + "/manifest.json"))
        // The backup keeps no link of its own in the data directory.
        #expect(Self.contents(data + "/objects/tmp").filter { $0.hasPrefix("backup-") }.isEmpty)
        await server.stop()

        let restoredData = work + "/restored"
        let restore = try await Self.ferry("restore", data: restoredData, output)
        #expect(restore.status == 0, "\(restore.error)")
        #expect(restore.output.contains("Restored"))
        for secret in [root.secretAccessKey, scoped.secretAccessKey] {
            #expect(!restore.output.contains(secret) && !restore.error.contains(secret))
        }

        let restored = try await Self.startServer(restoredData)
        let s3Restored = S3TestClient(endpoint: restored.endpoint, credentials: root)

        // Every object acknowledged before the backup, byte for byte; the deleted one stays deleted.
        for (key, checksum) in acknowledged {
            let reply = try await s3Restored.get(Self.bucket, key)
            #expect(reply.status == 200, "\(key): \(reply.text)")
            #expect(SigV4.hexSHA256(reply.body) == checksum, "\(key) differs after the restore")
        }
        #expect(try await s3Restored.get(Self.bucket, "plain/1").status == 404)

        // Every object in the restored catalog is readable in full (no blob is missing), and each `live/` one holds
        // a body the writer sent.
        let listed = try await Self.listing(s3Restored)
        #expect(listed.count >= acknowledged.count)
        let sent = written.withLockedValue { $0 }
        for object in listed {
            let reply = try await s3Restored.get(Self.bucket, object.key)
            #expect(reply.status == 200, "\(object.key) is listed but does not read: \(reply.text)")
            #expect(Int64(reply.body.count) == object.size, "\(object.key)")
            if object.key.hasPrefix("live/") { #expect(sent.contains(SigV4.hexSHA256(reply.body)), "\(object.key)") }
        }

        // The multipart upload in progress completes on the restored server.
        let finished = try await s3Restored.complete(
            Self.bucket, "multipart/open", uploadId: openId, xml: S3TestClient.completeXML(openETags))
        #expect(finished.status == 200, "\(finished.text)")
        let open = try await s3Restored.get(Self.bucket, "multipart/open")
        #expect(SigV4.hexSHA256(open.body) == SigV4.hexSHA256(openParts.flatMap { $0 }))

        // The stored access key works: its sealed secret opened with the restored server key.
        let s3Scoped = S3TestClient(
            endpoint: restored.endpoint,
            credentials: SigV4Credentials(accessKeyId: scoped.accessKeyId, secretAccessKey: scoped.secretAccessKey))
        let scopedRead = try await s3Scoped.get(Self.bucket, "multipart/done")
        #expect(scopedRead.status == 200, "\(scopedRead.text)")
        #expect(SigV4.hexSHA256(scopedRead.body) == acknowledged["multipart/done"])
        // And a key the server never had does not.
        let stranger = S3TestClient(
            endpoint: restored.endpoint,
            credentials: SigV4Credentials(accessKeyId: "FKIANOSUCHKEY0000", secretAccessKey: "not-a-secret"))
        #expect(try await stranger.get(Self.bucket, "multipart/done").status == 403)
        // The nodes of the original service are not carried over: the restored one lists only itself.
        let restoredMedia = MediaServiceClient(
            endpoint: URL(string: restored.endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        var status = try await restoredMedia.serviceStatus()
        let deadline = ContinuousClock.now + .seconds(30)
        while status.nodes.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            status = try await restoredMedia.serviceStatus()
        }
        #expect(status.nodes.count == 1 && status.nodes.first?.name == status.node, "\(status.nodes.map(\.name))")
        await restored.stop()
    }

    /// A data directory with a few objects, its server stopped, and a backup of it at `work/backup`.
    static func smallBackup(in work: String) async throws -> (data: String, backup: String, objects: [String: String]) {
        let data = work + "/data"
        let server = try await startServer(data)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: try root(data))
        #expect(try await s3.createBucket(bucket).status == 200)
        var objects: [String: String] = [:]
        for index in 0..<5 {
            let body = bytes(10_000 + index, seed: UInt64(500 + index))
            #expect(try await s3.put(bucket, "small/\(index)", body).status == 200)
            objects["small/\(index)"] = SigV4.hexSHA256(body)
        }
        await server.stop()
        let backup = work + "/backup"
        let run = try await ferry("backup", data: data, backup)
        #expect(run.status == 0, "\(run.error)")
        return (data, backup, objects)
    }

    @Test("restore refuses a data directory that is not empty, and one a running server holds, and changes neither")
    func restoreRefusesUsedDirectories() async throws {
        let work = TemporaryDirectory.make("ferry-restore-refused")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let (data, backup, _) = try await Self.smallBackup(in: work)

        let used = work + "/used"
        try FileManager.default.createDirectory(atPath: used, withIntermediateDirectories: true)
        try "keep me".write(toFile: used + "/notes.txt", atomically: true, encoding: .utf8)
        let refused = try await Self.ferry("restore", data: used, backup)
        #expect(refused.status == 1)
        #expect(refused.error.contains("is not empty"), "\(refused.error)")
        #expect(Self.contents(used) == ["notes.txt"])

        // The original data directory, with a server running on it.
        let server = try await Self.startServer(data)
        let before = Self.contents(data)
        let busy = try await Self.ferry("restore", data: data, backup)
        #expect(busy.status == 1)
        #expect(busy.error.contains("in use by a running Ferry process"), "\(busy.error)")
        #expect(Self.contents(data) == before)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: try Self.root(data))
        #expect(try await s3.get(Self.bucket, "small/0").status == 200)
        await server.stop()

        // An empty directory is fine.
        let empty = work + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let accepted = try await Self.ferry("restore", data: empty, backup)
        #expect(accepted.status == 0, "\(accepted.error)")
        #expect(FileManager.default.fileExists(atPath: empty + "/catalog.sqlite"))

        // What a restore killed while staging leaves (its lock file and a staging directory of partial copies) does
        // not stop the same restore run again: it is cleared, and the restore completes.
        let killed = work + "/killed"
        try FileManager.default.createDirectory(atPath: killed + "/.restore-0badf00d/objects/blobs/ab", withIntermediateDirectories: true)
        try Data(repeating: 1, count: 1000).write(to: URL(fileURLWithPath: killed + "/.restore-0badf00d/objects/blobs/ab/partial"))
        try "123\n".write(toFile: killed + "/lock", atomically: true, encoding: .utf8)
        // Killed after it renamed the blobs and keys into place, before the catalog (which goes last).
        try FileManager.default.createDirectory(atPath: killed + "/objects/blobs/cd", withIntermediateDirectories: true)
        try Data(repeating: 2, count: 10).write(to: URL(fileURLWithPath: killed + "/objects/blobs/cd/stale"))
        try Data(repeating: 3, count: 32).write(to: URL(fileURLWithPath: killed + "/token-key"))
        // A service is not opened there (by `ferry serve`, or a command's embedded one): it would start empty with
        // keys of its own, and the restore could no longer complete.
        let left = Self.contents(killed)
        var configuration = FerryServerConfiguration(dataDirectory: killed)
        configuration.port = 0
        do {
            _ = try await FerryServer.open(configuration: configuration, environment: [:])
            Issue.record("a service was opened on the directory of a restore that did not finish")
        } catch {
            let text = String(describing: error)
            #expect(text.contains("holds a restore that did not finish (.restore-0badf00d)"), "\(text)")
            #expect(text.contains("ferry restore --data-dir \(killed) BACKUP"), "\(text)")
        }
        #expect(Self.contents(killed) == left)
        let again = try await Self.ferry("restore", data: killed, backup)
        #expect(again.status == 0, "\(again.error)")
        #expect(Self.contents(killed).filter { $0.hasPrefix(".restore-") }.isEmpty, "\(Self.contents(killed))")
        #expect(FileManager.default.fileExists(atPath: killed + "/catalog.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: killed + "/objects/blobs/cd/stale"))
        #expect(FileManager.default.contents(atPath: killed + "/token-key") == FileManager.default.contents(atPath: data + "/token-key"))
    }

    /// The blob files below `directory`'s `objects/blobs/`: how many names, and how many files (inodes) they are.
    static func blobFiles(_ directory: String) -> (names: Int, files: Int) {
        let blobs = directory + "/objects/blobs"
        var inodes: Set<UInt64> = []
        var names = 0
        for relative in contents(blobs) {
            var info = stat()
            guard lstat(blobs + "/" + relative, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            names += 1
            inodes.insert(UInt64(info.st_ino))
        }
        return (names, inodes.count)
    }

    @Test("copies of an object, which share one blob file in the data directory, share one file in the backup and in the restored directory, and read back whole")
    func sharedBlobsStayShared() async throws {
        let work = TemporaryDirectory.make("ferry-backup-shared")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        let server = try await Self.startServer(data)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: try Self.root(data))
        #expect(try await s3.createBucket(Self.bucket).status == 200)
        let body = Self.bytes(1 << 20, seed: 77)
        #expect(try await s3.put(Self.bucket, "original", body).status == 200)
        let keys = ["original"] + (1...3).map { "copy-\($0)" }
        for key in keys.dropFirst() {
            let copied = try await s3.send(
                "PUT", S3TestClient.path(Self.bucket, key), headers: [("x-amz-copy-source", "/\(Self.bucket)/original")])
            #expect(copied.status == 200, "\(copied.text)")
        }
        await server.stop()
        let original = Self.blobFiles(data)
        #expect(original.names == 4 && original.files == 1, "\(original)")

        let backup = work + "/backup"
        let backedUp = try await Self.ferry("backup", data: data, backup)
        #expect(backedUp.status == 0, "\(backedUp.error)")
        let inBackup = Self.blobFiles(backup)
        #expect(inBackup.names == 4 && inBackup.files == 1, "\(inBackup)")

        let restored = work + "/restored"
        let restore = try await Self.ferry("restore", data: restored, backup)
        #expect(restore.status == 0, "\(restore.error)")
        let inRestored = Self.blobFiles(restored)
        #expect(inRestored.names == 4 && inRestored.files == 1, "\(inRestored)")

        let again = try await Self.startServer(restored)
        let client = S3TestClient(endpoint: again.endpoint, credentials: try Self.root(restored))
        for key in keys {
            let reply = try await client.get(Self.bucket, key)
            #expect(reply.status == 200 && reply.body == body, "\(key): \(reply.status), \(reply.body.count) bytes")
        }
        await again.stop()
    }

    @Test("a damaged or incomplete backup is refused and nothing is written to the target")
    func restoreRefusesDamagedBackups() async throws {
        let work = TemporaryDirectory.make("ferry-restore-damaged")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let (_, backup, objects) = try await Self.smallBackup(in: work)
        let blobs = Self.contents(backup + "/objects/blobs").filter { $0.split(separator: "/").count == 2 }
        #expect(blobs.count == objects.count)
        let blob = backup + "/objects/blobs/" + (try #require(blobs.last))

        // One byte changed in one blob, the size kept.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: blob)))
        let original = bytes
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: blob))
        let fresh = work + "/fresh"
        let tampered = try await Self.ferry("restore", data: fresh, backup)
        #expect(tampered.status == 1)
        #expect(tampered.error.contains("does not match its manifest"), "\(tampered.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh), "a refused restore left \(Self.contents(fresh))")

        // Into an empty directory: it stays empty.
        let empty = work + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        #expect(try await Self.ferry("restore", data: empty, backup).status == 1)
        #expect(Self.contents(empty).isEmpty, "a refused restore left \(Self.contents(empty))")

        // A blob file missing.
        try FileManager.default.removeItem(atPath: blob)
        let incomplete = try await Self.ferry("restore", data: fresh, backup)
        #expect(incomplete.status == 1)
        #expect(incomplete.error.contains("lacks"), "\(incomplete.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // Without the server key (the file and its manifest entry gone): the catalog's sealed secrets could not be
        // opened, so the backup is incomplete.
        try Data(original).write(to: URL(fileURLWithPath: blob))
        let manifestPath = backup + "/manifest.json"
        let manifestData = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        var manifest = try #require(try JSONSerialization.jsonObject(with: manifestData) as? [String: Any])
        manifest["files"] = (manifest["files"] as? [[String: Any]] ?? []).filter { $0["path"] as? String != "token-key" }
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: manifestPath))
        try FileManager.default.moveItem(atPath: backup + "/token-key", toPath: work + "/token-key")
        let keyless = try await Self.ferry("restore", data: fresh, backup)
        #expect(keyless.status == 1)
        #expect(keyless.error.contains("token-key"), "\(keyless.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh))
        try manifestData.write(to: URL(fileURLWithPath: manifestPath))
        try FileManager.default.moveItem(atPath: work + "/token-key", toPath: backup + "/token-key")

        // The catalog changed.
        let catalog = try FileHandle(forUpdating: URL(fileURLWithPath: backup + "/catalog.sqlite"))
        _ = try catalog.seekToEnd()
        try catalog.write(contentsOf: Data([0]))
        try catalog.close()
        let grown = try await Self.ferry("restore", data: fresh, backup)
        #expect(grown.status == 1)
        #expect(grown.error.contains("catalog.sqlite"), "\(grown.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // No manifest.
        try FileManager.default.removeItem(atPath: backup + "/manifest.json")
        let unlisted = try await Self.ferry("restore", data: fresh, backup)
        #expect(unlisted.status == 1)
        #expect(unlisted.error.contains("manifest.json"), "\(unlisted.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // A manifest that names a path outside the backup's layout.
        let hostile = """
            {"format": 1, "ferryVersion": "0.1.0", "createdAt": "2026-01-01T00:00:00Z",
             "counts": {"buckets": 0, "objects": 0, "multipartUploads": 0, "parts": 0, "accessKeys": 0, "blobs": 0, "blobBytes": 0},
             "files": [{"path": "catalog.sqlite", "size": 0, "sha256": "\(String(repeating: "0", count: 64))"},
                       {"path": "../outside", "size": 0, "sha256": "\(String(repeating: "0", count: 64))"}]}
            """
        try hostile.write(toFile: backup + "/manifest.json", atomically: true, encoding: .utf8)
        let escaping = try await Self.ferry("restore", data: fresh, backup)
        #expect(escaping.status == 1)
        #expect(escaping.error.contains("a Ferry backup does not hold: ../outside"), "\(escaping.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh))
        #expect(!FileManager.default.fileExists(atPath: work + "/outside"))
    }

    @Test("a backup named by a bare relative path exits 0; a directory restored and never served backs up again; its token-key missing, damaged or another's (the catalog holding sealed secrets) stops the service without being replaced, and put back it serves the keys again")
    func restoredDirectoryKeepsItsKeys() async throws {
        let work = TemporaryDirectory.make("ferry-backup-relative")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        let environment = ["HOME": work]
        let file = work + "/small.bin"
        try Data(Self.bytes(3000, seed: 5)).write(to: URL(fileURLWithPath: file))
        let created = try await FerryRun.run(["keys", "create", "--actions", "s3:*", "--data-dir", data], environment: environment)
        #expect(created.status == 0, "\(created.error)")
        let uploaded = try await FerryRun.run(
            ["upload", file, "--bucket", Self.bucket, "--data-dir", data], environment: environment)
        #expect(uploaded.status == 0, "\(uploaded.error)")

        // `ferry backup --data-dir data copy`, run in the work directory.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
        process.arguments = ["backup", "--data-dir", data, "copy"]
        process.currentDirectoryURL = URL(fileURLWithPath: work)
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let relative = try await runBlocking { try process.runCapturing() }
        #expect(relative.status == 0, "\(relative.errorOutput)")
        #expect(FileManager.default.fileExists(atPath: work + "/copy/manifest.json"))

        // Restored, then backed up again before any server ran on it.
        let restored = work + "/restored"
        #expect(try await Self.ferry("restore", data: restored, work + "/copy").status == 0)
        let again = try await Self.ferry("backup", data: restored, work + "/again")
        #expect(again.status == 0, "\(again.error)")
        // `OUT/` and `OUT/.` are the directory OUT; a directory inside the data directory is refused before anything
        // is written (one under objects/tmp would be removed by the next server's start).
        for (given, made) in [(work + "/slash/", work + "/slash"), (work + "/dot/./", work + "/dot")] {
            let named = try await Self.ferry("backup", data: data, given)
            #expect(named.status == 0, "\(given): \(named.error)")
            #expect(FileManager.default.fileExists(atPath: made + "/manifest.json"), "\(given)")
        }
        // Also through a link to it, below a directory not made yet.
        try FileManager.default.createSymbolicLink(atPath: work + "/link", withDestinationPath: data)
        for inside in [
            data + "/objects/tmp/copy", data + "/copy", work + "/../" + (work as NSString).lastPathComponent + "/data/x",
            work + "/link/new/copy",
        ] {
            let refused = try await Self.ferry("backup", data: data, inside)
            #expect(refused.status == 1 && refused.error.contains("is inside the data directory"), "\(inside): \(refused.error)")
            let parent = (inside as NSString).deletingLastPathComponent
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
            #expect(!leftovers.contains { $0.hasPrefix((inside as NSString).lastPathComponent) }, "\(inside): \(leftovers)")
        }
        #expect(!FileManager.default.fileExists(atPath: data + "/new"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.contains(".partial-") }.isEmpty)

        // The catalog's access keys are sealed with token-key: a missing or damaged one stops the service, and is
        // left as it is for the operator to put back.
        let keyPath = restored + "/token-key"
        let key = try Data(contentsOf: URL(fileURLWithPath: keyPath))
        // Another 32-byte key (another directory's or backup's) is refused as well: it does not open them.
        let other = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        for damage in ["other", "truncated", "missing"] {
            switch damage {
            case "other": try other.write(to: URL(fileURLWithPath: keyPath))
            case "truncated": try key.prefix(16).write(to: URL(fileURLWithPath: keyPath))
            default: try FileManager.default.removeItem(atPath: keyPath)
            }
            let refused = try await FerryRun.run(["keys", "list", "--data-dir", restored], environment: environment)
            #expect(refused.status != 0, "\(damage): \(refused.output)")
            #expect(refused.error.contains("token-key"), "\(damage): \(refused.error)")
            if damage == "other" {
                #expect(refused.error.contains("does not open the catalog's sealed secrets"), "\(refused.error)")
            }
            let left = FileManager.default.contents(atPath: keyPath)
            let kept = damage == "other" ? left == other : damage == "truncated" ? left?.count == 16 : left == nil
            #expect(kept, "\(damage): the key file was replaced")
        }
        // Without its key (as a node on PostgreSQL has none) the backup is refused before anything is written, and
        // the refusal says where such a node's key is and how to back it up.
        let keyless = try await Self.ferry("backup", data: restored, work + "/keyless")
        #expect(keyless.status == 1, "\(keyless.error)")
        #expect(keyless.error.contains("no server key (token-key). A node on PostgreSQL (--catalog) keeps its key in PostgreSQL"), "\(keyless.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.hasPrefix("keyless") }.isEmpty)
        try key.write(to: URL(fileURLWithPath: keyPath))
        let listed = try await FerryRun.run(["keys", "list", "--data-dir", restored], environment: environment)
        #expect(listed.status == 0, "\(listed.error)")
        #expect(listed.output.contains("\tactive\t"), "\(listed.output)")
    }

    @Test("a backup SIGKILLed mid-way leaves nothing restore accepts, and the next backup succeeds")
    func killedBackupLeavesNothingRestorable() async throws {
        let work = TemporaryDirectory.make("ferry-backup-killed")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        let server = try await Self.startServer(data)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: try Self.root(data))
        #expect(try await s3.createBucket(Self.bucket).status == 200)
        // Enough blob files (each copied and fsynced on its own) that the backup is still copying when it is killed.
        let block = Self.bytes(512 * 1024, seed: 77)
        for index in 0..<160 {
            var body = block
            withUnsafeBytes(of: UInt64(index).bigEndian) { body.replaceSubrange(0..<8, with: $0) }
            #expect(try await s3.put(Self.bucket, "bulk/\(index)", body).status == 200)
        }

        let output = work + "/backup"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
        process.arguments = ["backup", "--data-dir", data, output]
        process.environment = ProcessInfo.processInfo.environment.merging(["HOME": data + "-home"]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Killed once it has copied some blob files into its partial directory.
        var partial: String?
        while process.isRunning {
            partial = try FileManager.default.contentsOfDirectory(atPath: work)
                .first { $0.hasPrefix("backup.partial-") }.map { work + "/" + $0 }
            if let partial, Self.contents(partial + "/objects/blobs").contains(where: { $0.split(separator: "/").count == 2 }) {
                break
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        kill(process.processIdentifier, SIGKILL)
        await process.exited()
        #expect(process.terminationReason == .uncaughtSignal, "the backup finished before it could be killed")
        let killedPID = process.processIdentifier

        #expect(!FileManager.default.fileExists(atPath: output))
        let target = work + "/restored"
        let fromOutput = try await Self.ferry("restore", data: target, output)
        #expect(fromOutput.status == 1)
        let leftover = try #require(partial)
        let fromPartial = try await Self.ferry("restore", data: target, leftover)
        #expect(fromPartial.status == 1)
        #expect(fromPartial.error.contains("manifest.json"), "\(fromPartial.error)")
        #expect(!FileManager.default.fileExists(atPath: target))

        // The next backup, the server still running, succeeds and removes the killed one's links.
        let again = try await Self.ferry("backup", data: data, output)
        #expect(again.status == 0, "\(again.error)")
        #expect(!Self.contents(data + "/objects/tmp").contains { $0.hasPrefix("backup-\(killedPID)-") })
        let restored = try await Self.ferry("restore", data: target, output)
        #expect(restored.status == 0, "\(restored.error)")
        await server.stop()
    }
}
