import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import GRDB
import Logging
import Testing

@testable import FerryStorage

#if canImport(Glibc)
import Glibc
#endif

@Suite("Crash safety", .serialized, .timeLimit(.minutes(10)))
struct CrashSafetyTests {
    /// Opens a connection and sends a signed PUT that announces `announcing` bytes but sends only `sending`: a body
    /// the server is still receiving. Returns the socket (close it when done).
    static func startPut(
        port: Int, credentials: SigV4Credentials, path: String, query: [(name: String, value: String)] = [],
        announcing length: Int, sending count: Int
    ) throws -> Int32 {
        let headers = SigV4Signer(credentials: credentials, region: "us-east-1").sign(
            method: "PUT", path: path, query: query,
            headers: [("host", "127.0.0.1:\(port)"), ("content-length", String(length))],
            payloadHash: SigV4.unsignedPayload, date: Date()).headers
        let target = query.isEmpty ? path : path + "?" + query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        var head = "PUT \(target) HTTP/1.1\r\n"
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        head += "\r\n"
        let socket = try RawSocket.connect(port: port)
        do {
            try RawSocket.write(socket, Array(head.utf8) + [UInt8](repeating: 2, count: count))
        } catch {
            close(socket)
            throw error
        }
        return socket
    }

    @Test("the SQLite catalog syncs its write-ahead log at every commit (synchronous FULL), so a power cut or an OS crash cannot take back a change already acknowledged; GRDB's default for WAL (NORMAL) syncs only at checkpoints")
    func catalogCommitsDurably() throws {
        let directory = TemporaryDirectory.make("ferry-catalog-sync")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let catalog = try SQLiteCatalog(path: directory + "/catalog.sqlite")
        let level = try catalog.pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        #expect(level == 2, "PRAGMA synchronous is \(level.map(String.init) ?? "nil"), not FULL (2)")
        let mode = try catalog.pool.writeWithoutTransaction { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("SIGTERM while a request body never finishes: the server logs the signal, exits within its shutdown timeout (--shutdown-timeout) saying what happened, and loses nothing acknowledged")
    func boundedShutdown() async throws {
        let data = TemporaryDirectory.make("ferry-shutdown")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIASHUTDOWN00000", "FERRY_SECRET_ACCESS_KEY": "shutdown-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        // A body may stall for ten minutes before the connection is closed: only the shutdown bound can end this one.
        let arguments = ["--body-timeout", "600", "--idle-timeout", "600"]
        let log = data + "/serve.log"
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/data", arguments: arguments + ["--shutdown-timeout", "2", "--log-level", "notice"],
            environment: env, logFile: log)
        var s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        try await s3.createBucket("stall")
        let kept = [UInt8](repeating: 9, count: 70_000)
        #expect(try await s3.put("stall", "kept.bin", kept).status == 200)

        let socket = try Self.startPut(
            port: server.port, credentials: root, path: "/stall/stalled.bin", announcing: 8 * 1024 * 1024,
            sending: 1024 * 1024)
        defer { close(socket) }
        // The body is being received (its bytes are going to a file of the store's) before the signal: a request the
        // server has not begun yet would not hold the shutdown up.
        let tmp = data + "/data/objects/tmp"
        var writing = false
        for _ in 0..<1200 where !writing {
            writing = !((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty
            if !writing { try await Task.sleep(for: .milliseconds(25)) }
        }
        #expect(writing, "the body was not being received")
        // Graceful shutdown waits for the request in flight for the shutdown timeout (2 s), then cancels it; the
        // process would be ended 10 s later if the cancellation did not end it.
        #expect(await server.stopGracefully(within: .seconds(11)), "the server did not exit on SIGTERM")
        #expect(server.process.terminationStatus == 0)
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains("ferry serve shutting down") && said.contains("signal=SIGTERM"), "\(said)")
        #expect(said.contains("ferry serve: shutdown did not finish within 2 s of the signal; what still ran was cancelled."))
        #expect(!said.contains("CancellationError"), "\(said)")

        let again = try await FerryExecutable.Server.start(
            dataDirectory: data + "/data", arguments: arguments, environment: env)
        s3 = S3TestClient(endpoint: again.endpoint, credentials: root)
        #expect(try await s3.get("stall", "kept.bin").body == kept)
        #expect(try await s3.get("stall", "stalled.bin").status == 404)
        await again.stop()
    }

    @Test("SIGKILL while a part is being written: after a restart the part is absent and the upload completes")
    func killedMidPart() async throws {
        let data = TemporaryDirectory.make("ferry-crash")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIACRASHTEST0000", "FERRY_SECRET_ACCESS_KEY": "crash-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        let arguments = ["--min-part-size", "1024"]
        let first = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        var s3 = S3TestClient(endpoint: first.endpoint, credentials: root)
        try await s3.createBucket("crash")
        let id = try await s3.createMultipartUpload("crash", "video.mp4")
        let part1 = [UInt8](repeating: 1, count: 4096)
        let etag1 = try #require(try await s3.uploadPart("crash", "video.mp4", uploadId: id, number: 1, part1).header("ETag"))

        // Part 2 announces 8 MiB and sends 3 MiB, then the server is killed while it writes.
        let path = "/crash/video.mp4"
        let socket = try Self.startPut(
            port: first.port, credentials: root, path: path,
            query: [(name: "partNumber", value: "2"), (name: "uploadId", value: id)], announcing: 8 * 1024 * 1024,
            sending: 3 * 1024 * 1024)
        defer { close(socket) }
        let tmp = data + "/objects/tmp"
        var writing = false
        for _ in 0..<1200 {
            if let files = try? FileManager.default.contentsOfDirectory(atPath: tmp), !files.isEmpty {
                writing = true
                break
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(writing, "the part was not being written")
        await first.stop(signal: SIGKILL)

        let second = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        s3 = S3TestClient(endpoint: second.endpoint, credentials: root)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
        let listed = try S3XML.decode(
            ListPartsResult.self,
            from: Data(try await s3.send("GET", path, query: [("uploadId", id)]).body))
        #expect(listed.parts.map(\.partNumber) == [1])
        let part2 = [UInt8](repeating: 2, count: 3000)
        let etag2 = try #require(try await s3.uploadPart("crash", "video.mp4", uploadId: id, number: 2, part2).header("ETag"))
        let done = try await s3.complete(
            "crash", "video.mp4", uploadId: id, xml: S3TestClient.completeXML([(1, etag1), (2, etag2)]))
        #expect(done.status == 200)
        #expect(try await s3.get("crash", "video.mp4").body == part1 + part2)
        await second.stop()
    }

    @Test("SIGKILL during tus concatenations: each final object is whole or absent, and once an hour old the multipart uploads the kills left with no upload owning them are aborted at the next start; the partial uploads stay")
    func killedConcatenation() async throws {
        let data = TemporaryDirectory.make("ferry-crash-concat")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIACRASHCONCAT00", "FERRY_SECRET_ACCESS_KEY": "crash-concat-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        var server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        var s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        try await s3.createBucket("concat")
        let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
        let chunk = [UInt8](repeating: 5, count: 1024)
        let appends = 40
        let partialSize = appends * chunk.count
        /// The resumable-upload multipart uploads of a bucket, by ListMultipartUploads.
        func resumableUploads(_ s3: S3TestClient) async throws -> [String] {
            let listed = try await s3.send("GET", "/concat", query: [("uploads", "")])
            return listed.text.components(separatedBy: "<UploadId>").dropFirst().compactMap {
                $0.components(separatedBy: "</UploadId>").first
            }.filter { $0.hasPrefix(ResumableUpload.multipartIdPrefix) }
        }

        var partials: [String] = []
        var leftovers: [String] = []
        // When to kill, after the final upload is sent: halved after a kill that came too late (the object was
        // stored), doubled after one that came too early (nothing was begun), so a slow machine finds its moment.
        var delay = 60.0
        for cycle in 0..<15 where leftovers.isEmpty {
            var paths: [String] = []
            for index in 0..<3 {
                let created = try await s3.send(
                    "POST", "/_ferry/uploads/s3/concat/p\(cycle)-\(index)",
                    headers: tus + [("Upload-Length", String(partialSize)), ("Upload-Concat", "partial")], payload: .unsigned)
                try #require(created.status == 201)
                let path = try #require(created.header("Location").flatMap { URL(string: $0)?.path })
                for number in 0..<appends {
                    let patch = try await S3TestClient.fetchRaw(
                        "PATCH", server.endpoint + path,
                        headers: tus + [
                            ("Upload-Offset", String(number * chunk.count)), ("Content-Type", "application/offset+octet-stream"),
                        ], body: chunk)
                    try #require(patch.status == 204)
                }
                paths.append(path)
            }
            partials += paths
            let before = Set(try await resumableUploads(s3))
            let key = "final-\(cycle)"
            let concat = "final;" + paths.map { server.endpoint + $0 }.joined(separator: " ")
            let client = s3
            let final = Task {
                try? await client.send(
                    "POST", "/_ferry/uploads/s3/concat/" + key, headers: tus + [("Upload-Concat", concat)], payload: .unsigned)
            }
            try await Task.sleep(for: .milliseconds(Int(delay * Double.random(in: 0.5...1.5))))
            await server.stop(signal: SIGKILL)
            _ = await final.value

            server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
            s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
            let object = try await s3.get("concat", key)
            if object.status == 200 {
                #expect(object.body == [UInt8](repeating: 5, count: 3 * partialSize), "a final object that is not whole")
            } else {
                #expect(object.status == 404)
            }
            leftovers = try await resumableUploads(s3).filter { !before.contains($0) }
            if object.status == 200 { delay /= 2 } else if leftovers.isEmpty { delay = min(delay * 2, 5000) }
        }
        #expect(!leftovers.isEmpty, "no kill landed inside a concatenation in fifteen tries")

        // As if the server had been down for two hours: every upload is old enough for the collector, which aborts, in
        // its first pass after the start, the multipart uploads that no resumable upload owns, and only those. A kill
        // after the final upload's record was written leaves that record owning its multipart upload for 15 minutes
        // (the same final upload sent again finds its claim); two hours on, it has expired, and the same pass ends it.
        await server.stop()
        let aged = Process()
        aged.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        aged.arguments = [
            "python3", "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('UPDATE upload SET initiated = initiated - 7200'); "
                + "c.execute('UPDATE resumableUpload SET expiresAt = expiresAt - 7200'); c.commit()",
            data + "/catalog.sqlite",
        ]
        try aged.run()
        aged.waitUntilExit()
        try #require(aged.terminationStatus == 0)
        server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        var remaining = try await resumableUploads(s3)
        for _ in 0..<100 where !Set(leftovers).isDisjoint(with: remaining) {
            try await Task.sleep(for: .milliseconds(100))
            remaining = try await resumableUploads(s3)
        }
        #expect(Set(leftovers).isDisjoint(with: remaining), "multipart uploads no upload owns are still there")
        for path in partials {
            let head = try await S3TestClient.fetchRaw("HEAD", server.endpoint + path, headers: tus)
            #expect(head.status == 200 && head.header("Upload-Offset") == String(partialSize), "partial \(path) changed")
        }
        await server.stop()
    }
    @Test("SIGKILL while lifecycle rules expire objects and abort uploads: after each restart every acknowledged object is whole or absent (kept ones whole), every upload listed or gone; in the end the expired are gone and a blob nothing references is at most one per kill, removed by the orphan collection")
    func killedDuringLifecycle() async throws {
        let data = TemporaryDirectory.make("ferry-crash-lifecycle")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIACRASHLIFE0000", "FERRY_SECRET_ACCESS_KEY": "crash-life-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        // A lifecycle day is a second: a rule of one day expires an object a second after it is written, and the rules
        // are applied five times a second.
        let arguments = ["--lifecycle-day", "1"]
        var server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        var s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        try await s3.createBucket("life")
        let rules = """
            <LifecycleConfiguration>
            <Rule><ID>expire</ID><Filter><Prefix>exp/</Prefix></Filter><Status>Enabled</Status>\
            <Expiration><Days>1</Days></Expiration></Rule>
            <Rule><ID>abort</ID><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status>\
            <AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>
            </LifecycleConfiguration>
            """
        try #require(try await s3.send("PUT", "/life", query: [("lifecycle", "")], body: Array(rules.utf8)).status == 200)

        /// Every object acknowledged, by key.
        var written: [String: [UInt8]] = [:]
        /// The multipart uploads created, by upload id.
        var uploads: Set<String> = []
        func uploadIds(_ s3: S3TestClient) async throws -> Set<String> {
            let listed = try await s3.send("GET", "/life", query: [("uploads", "")])
            try #require(listed.status == 200)
            return Set(
                listed.text.components(separatedBy: "<UploadId>").dropFirst().compactMap {
                    $0.components(separatedBy: "</UploadId>").first
                })
        }
        /// Each object whole or absent (a kept one whole), each upload created listed or gone.
        func check(_ s3: S3TestClient) async throws {
            for (key, bytes) in written {
                let object = try await s3.get("life", key)
                if key.hasPrefix("keep/") || object.status != 404 {
                    #expect(object.status == 200 && object.body == bytes, "\(key): \(object.status), not whole")
                }
            }
            #expect(try await uploadIds(s3).isSubset(of: uploads), "an upload no one created is listed")
        }

        let rounds = 6
        let perRound = 150
        var partlyExpired = 0
        for round in 0..<rounds {
            for index in 0..<4 {
                let key = "up/\(round)-\(index)"
                let id = try await s3.createMultipartUpload("life", key)
                #expect(try await s3.uploadPart("life", key, uploadId: id, number: 1, [UInt8](repeating: 7, count: 2048)).status == 200)
                uploads.insert(id)
            }
            for index in 0..<perRound + 3 {
                let key = index < perRound ? "exp/\(round)/\(index)" : "keep/\(round)/\(index)"
                let bytes = (0..<Int.random(in: 1...4096)).map { _ in UInt8.random(in: 0...255) }
                #expect(try await s3.put("life", key, bytes).status == 200)
                written[key] = bytes
            }
            // The round's first objects are due by now; the kill comes while the passes delete them.
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...1200)))
            await server.stop(signal: SIGKILL)

            server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
            s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
            let left = try await s3.send("GET", "/life", query: [("list-type", "2"), ("prefix", "exp/\(round)/")])
            let count = left.text.components(separatedBy: "<Key>").count - 1
            if count > 0 && count < perRound { partlyExpired += 1 }
            try await check(s3)
        }
        print("CrashSafetyTests: \(rounds) kills during lifecycle passes, \(partlyExpired) with the round's objects partly expired at the restart")
        #expect(partlyExpired > 0, "no kill landed while a round's objects were being expired")

        // Everything due is gone once the restarted server has applied the rules; the kept objects stay whole.
        var remaining = written.keys.filter { $0.hasPrefix("exp/") }.count
        var openUploads = uploads
        for _ in 0..<300 where remaining > 0 || !openUploads.isEmpty {
            try await Task.sleep(for: .milliseconds(100))
            let listed = try await s3.send("GET", "/life", query: [("list-type", "2"), ("prefix", "exp/")])
            remaining = listed.text.components(separatedBy: "<Key>").count - 1
            openUploads = try await uploadIds(s3)
        }
        #expect(remaining == 0, "\(remaining) expired objects are still listed")
        #expect(openUploads.isEmpty, "\(openUploads.count) uploads past their rule are still listed")
        try await check(s3)
        await server.stop()

        let referenced = try await Self.collectOrphans(data, kills: rounds, after: "lifecycle")
        #expect(referenced.count == written.keys.filter { $0.hasPrefix("keep/") }.count)
    }
    /// Runs one SQL statement on the embedded catalog of a stopped server with Python's sqlite3; returns the first
    /// column of the first row, if any.
    static func sqlite(_ data: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); r = c.execute(sys.argv[2]).fetchone(); c.commit(); "
                + "print(r[0] if r else '')",
            data + "/catalog.sqlite", sql,
        ]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CocoaError(.fileReadCorruptFile) }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts `ferry serve` on `data` and SIGKILLs it within `window` milliseconds, again and again, while the pass
    /// each start makes leaves `remaining` (a count read from the stopped server's catalog) above zero, at most twelve
    /// times; `check` looks at the catalog after each kill. Returns the kills and how many landed inside a pass (the
    /// count went down, not to zero).
    static func killDuringPassesAtStart(
        _ data: String, environment: [String: String], remaining sql: String, from count: Int, window: Int,
        check: () throws -> Void
    ) async throws -> (kills: Int, insidePass: Int) {
        var left = count
        var kills = 0
        var insidePass = 0
        while left > 0 && kills < 12 {
            let server = try await FerryExecutable.Server.start(dataDirectory: data, environment: environment)
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...window)))
            await server.stop(signal: SIGKILL)
            kills += 1
            let now = try #require(Int(try sqlite(data, sql)))
            if now > 0 && now < left { insidePass += 1 }
            left = now
            try check()
        }
        return (kills, insidePass)
    }

    /// Opens the stopped server's embedded store: what kills left between a catalog change and its file's removal is a
    /// blob nothing references, at most one per kill (the passes remove one thing at a time), and the orphan
    /// collection removes it; afterwards every blob file is referenced. Returns the referenced blobs.
    static func collectOrphans(_ data: String, kills: Int, after what: String) async throws -> Set<String> {
        let catalog = try SQLiteCatalog(path: data + "/catalog.sqlite")
        let store = try CatalogObjectStore(directory: data + "/objects", catalog: catalog, logger: Logger(label: "ferry.test"))
        let orphans = try await store.collectOrphanBlobs(olderThan: -5)
        print("CrashSafetyTests: \(orphans) blobs nothing referenced after the \(what) kills")
        #expect(orphans <= kills, "\(orphans) blobs nothing references after \(kills) kills")
        let referenced = try await store.catalog.referencedBlobs()
        #expect(try await store.files.blobs(olderThan: Date().addingTimeInterval(5)).count == referenced.count)
        return referenced
    }

    @Test("SIGKILL while the collector's pass at start expires resumable uploads: each upload is kept as it was or gone, a finished one's object stays; a multipart upload a kill left without its record is aborted once an hour old, and a blob nothing references is at most one per kill, removed by the orphan collection")
    func killedDuringResumableExpiry() async throws {
        let data = TemporaryDirectory.make("ferry-crash-expiry")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIACRASHEXPIRY00", "FERRY_SECRET_ACCESS_KEY": "crash-expiry-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        var server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        var s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        try await s3.createBucket("expiry")
        let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
        func create(_ key: String, length: Int, sending bytes: [UInt8]) async throws -> String {
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/expiry/" + key, headers: tus + [("Upload-Length", String(length))],
                payload: .unsigned)
            try #require(created.status == 201)
            let path = try #require(created.header("Location").flatMap { URL(string: $0)?.path })
            let patch = try await S3TestClient.fetchRaw(
                "PATCH", server.endpoint + path,
                headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")], body: bytes)
            try #require(patch.status == 204)
            return path
        }
        let count = 300
        for index in 0..<count {
            _ = try await create("u\(index)", length: 8192, sending: [UInt8](repeating: UInt8(index % 256), count: 4096))
        }
        let finished = (0..<1024).map { UInt8(truncatingIfNeeded: $0 * 7) }
        _ = try await create("done", length: finished.count, sending: finished)
        #expect(try await s3.get("expiry", "done").body == finished)
        await server.stop()

        // As if two days had passed: every upload is past its expiry, which the collector's pass at each start applies.
        _ = try Self.sqlite(data, "UPDATE resumableUpload SET expiresAt = expiresAt - 172800")
        let unfinished = "SELECT count(*) FROM resumableUpload WHERE etag IS NULL"
        let (kills, insidePass) = try await Self.killDuringPassesAtStart(
            data, environment: env, remaining: unfinished, from: count, window: 100
        ) { () throws in
            // What is left is as it was: its offset, and the part that holds those bytes.
            #expect(try Self.sqlite(data, "SELECT count(*) FROM resumableUpload WHERE etag IS NULL AND received != 4096") == "0")
            let broken = """
                SELECT count(*) FROM resumableUpload r WHERE r.etag IS NULL AND NOT EXISTS (
                    SELECT 1 FROM part p WHERE p.uploadId = r.uploadId AND p.size = 4096)
                """
            #expect(try Self.sqlite(data, broken) == "0", "an unexpired upload lost its bytes")
        }
        let unclaimed = try Self.sqlite(
            data, "SELECT count(*) FROM upload u WHERE NOT EXISTS (SELECT 1 FROM resumableUpload r WHERE r.uploadId = u.id)")
        print("CrashSafetyTests: \(kills) kills during resumable expiry, \(insidePass) inside a pass, \(unclaimed) multipart uploads without a record")
        #expect(insidePass > 0, "no kill landed inside an expiry pass")

        // Once an hour old, the multipart uploads the kills left without a record are aborted at the next start.
        _ = try Self.sqlite(data, "UPDATE upload SET initiated = initiated - 7200")
        server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        var listed = ""
        for _ in 0..<300 {
            listed = try await s3.send("GET", "/expiry", query: [("uploads", "")]).text
            if !listed.contains("<UploadId>") && (try? Self.sqlite(data, unfinished)) == "0" { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(!listed.contains("<UploadId>"), "multipart uploads of expired resumable uploads are still listed")
        #expect(try Self.sqlite(data, unfinished) == "0")
        #expect(try await s3.get("expiry", "done").body == finished)
        await server.stop()

        #expect(try await !Self.collectOrphans(data, kills: kills, after: "expiry").isEmpty)
    }
    @Test("SIGKILL while the collector's pass at start expires videos whose upload never completed: each video is still Uploading with its bytes, or UploadFail with a removal job; once the removal jobs run every expired video's bytes are gone and its VideoUploadExpired event stored")
    func killedDuringVideoExpiry() async throws {
        let data = TemporaryDirectory.make("ferry-crash-video-expiry")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = [
            "FERRY_ACCESS_KEY_ID": "FKIACRASHVIDEO000", "FERRY_SECRET_ACCESS_KEY": "crash-video-secret-0123456789",
            // Events are stored for a receiver that is never reached: they stay in the catalog to be counted.
            "FERRY_WEBHOOK_URL": "http://127.0.0.1:9/events", "FERRY_WEBHOOK_SECRET": "crash-video-webhook-secret",
        ]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        var server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        let admin = MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        let count = 120
        var bucket = ""
        for index in 0..<count {
            let ticket = try await admin.createUploadVideo(.init(title: "clip \(index)", fileName: "clip\(index).mp4"))
            bucket = ticket.address.bucket
            // Part of the file arrives as a multipart upload that never completes.
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: ticket.auth.credentials)
            let uploadId = try await s3.createMultipartUpload(bucket, ticket.address.fileName)
            #expect(try await s3.uploadPart(bucket, ticket.address.fileName, uploadId: uploadId, number: 1, [1, 2, 3]).status == 200)
        }
        await server.stop()

        // As if eight days had passed: every video is past the week an upload may take.
        _ = try Self.sqlite(data, "UPDATE video SET createdAt = createdAt - 8 * 86400")
        let uploading = "SELECT count(*) FROM video WHERE status = 'Uploading'"
        let (kills, insidePass) = try await Self.killDuringPassesAtStart(
            data, environment: env, remaining: uploading, from: count, window: 150
        ) { () throws in
            // A video still uploading keeps what arrived; one that expired has the job that finishes its removal.
            let lostBytes = """
                SELECT count(*) FROM video v WHERE v.status = 'Uploading' AND NOT EXISTS (
                    SELECT 1 FROM upload u JOIN part p ON p.uploadId = u.id WHERE u.bucket = v.bucket AND u.key = v.key)
                """
            #expect(try Self.sqlite(data, lostBytes) == "0", "a video still uploading lost its bytes")
            let unfinishable = """
                SELECT count(*) FROM video v WHERE v.status = 'UploadFail' AND NOT EXISTS (
                    SELECT 1 FROM mediaJob j WHERE j.videoId = v.videoId AND j.kind = 'remove-files')
                """
            #expect(try Self.sqlite(data, unfinishable) == "0", "an expired video has no removal job")
        }
        print("CrashSafetyTests: \(kills) kills during video expiry, \(insidePass) inside a pass")
        #expect(insidePass > 0, "no kill landed inside an expiry pass")

        // The removal jobs wait five minutes for the node that enqueued them; made due now, the next start runs them.
        _ = try Self.sqlite(data, "UPDATE mediaJob SET runAt = 0 WHERE state = 'queued'")
        server = try await FerryExecutable.Server.start(dataDirectory: data, environment: env)
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        let unannounced = """
            SELECT count(*) FROM video v WHERE NOT EXISTS (
                SELECT 1 FROM webhookEvent e WHERE e.type = 'VideoUploadExpired' AND instr(e.payload, v.videoId) > 0)
            """
        // A video this start expired itself (the kills may leave some) has its job due in five minutes, with nothing
        // left to do: only the jobs due now must have run.
        let pendingJobs = """
            SELECT count(*) FROM mediaJob WHERE kind = 'remove-files'
            AND (state = 'running' OR (state = 'queued' AND runAt <= CAST(strftime('%s', 'now') AS REAL)))
            """
        var listed = ""
        for _ in 0..<600 {
            listed = try await s3.send("GET", "/" + bucket, query: [("uploads", "")]).text
            if !listed.contains("<UploadId>"), (try? Self.sqlite(data, unannounced)) == "0",
                (try? Self.sqlite(data, pendingJobs)) == "0"
            {
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try Self.sqlite(data, "SELECT count(*) FROM video WHERE status != 'UploadFail'") == "0")
        #expect(!listed.contains("<UploadId>"), "an expired video's multipart upload is still there")
        #expect(try Self.sqlite(data, unannounced) == "0", "an expired video has no VideoUploadExpired event")
        #expect(try Self.sqlite(data, pendingJobs) == "0", "removal jobs did not finish")
        await server.stop()

        #expect(try await Self.collectOrphans(data, kills: kills, after: "video expiry").isEmpty)
    }
}
