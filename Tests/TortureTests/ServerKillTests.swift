import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the clients of a killed server sent and what it acknowledged, key by key.
actor Ledger {
    struct Entry {
        /// The content the server acknowledged last (its SHA-256), nil when none.
        var acknowledged: String?
        /// Contents sent whose answer never came: each may or may not have been stored.
        var unanswered: Set<String> = []
    }
    private(set) var entries: [String: Entry] = [:]
    /// Requests under way, by kind.
    private(set) var underWay: [String: Int] = [:]
    /// Kinds of request under way at the moments the server was killed.
    private(set) var underWayAtKill: [String: Int] = [:]

    func sending(_ key: String, _ hash: String) { entries[key, default: Entry()].unanswered.insert(hash) }
    func acknowledged(_ key: String, _ hash: String) {
        entries[key, default: Entry()].acknowledged = hash
        entries[key]?.unanswered.remove(hash)
    }
    func begin(_ kind: String) { underWay[kind, default: 0] += 1 }
    func end(_ kind: String) { underWay[kind, default: 0] -= 1 }
    func killed() {
        for (kind, count) in underWay where count > 0 { underWayAtKill[kind, default: 0] += 1 }
    }
    /// After a verified restart the stored state is what counts from now on.
    func settle(_ key: String, stored hash: String?) { entries[key] = Entry(acknowledged: hash) }
}

@Suite("Torture: ferry serve killed with SIGKILL mid-write", .serialized, .timeLimit(.minutes(20)))
struct ServerKillTests {
    static let bucket = "torture"

    /// Runs a request, counting it as under way meanwhile.
    static func tracked<T>(_ ledger: Ledger, _ kind: String, _ body: () async throws -> T) async throws -> T {
        await ledger.begin(kind)
        do {
            let result = try await body()
            await ledger.end(kind)
            return result
        } catch {
            await ledger.end(kind)
            throw error
        }
    }

    /// One client: single PUTs (new keys and overwrites), multipart uploads (some left unfinished) and deletes, until
    /// the server goes away.
    static func client(_ s3: S3TestClient, ledger: Ledger, worker: Int, round: Int, seed: UInt64) async {
        var random = SeededGenerator(seed: seed)
        var mine: [String] = []
        var n = 0
        while !Task.isCancelled {
            n += 1
            let choice = Int.random(in: 0..<10, using: &random)
            do {
                if choice < 4 || mine.isEmpty {
                    // A new key, or an overwrite of one of this worker's keys.
                    let key = choice == 0 && !mine.isEmpty ? mine.randomElement(using: &random)! : "r\(round)/w\(worker)/put-\(n)"
                    let body = Torture.randomBytes(Int.random(in: 0...(3 << 20), using: &random), using: &random)
                    let hash = Torture.sha256(body)
                    await ledger.sending(key, hash)
                    if try await tracked(ledger, "PutObject", { try await s3.put(bucket, key, body) }).status == 200 {
                        await ledger.acknowledged(key, hash)
                        if !mine.contains(key) { mine.append(key) }
                    }
                } else if choice < 9 {
                    let key = "r\(round)/w\(worker)/mpu-\(n)"
                    let id = try await s3.createMultipartUpload(bucket, key)
                    var whole: [UInt8] = []
                    var parts: [(Int, String)] = []
                    for number in 1...Int.random(in: 2...6, using: &random) {
                        let part = Torture.randomBytes(Int.random(in: (64 << 10)...(1 << 20), using: &random), using: &random)
                        let reply = try await tracked(ledger, "UploadPart") {
                            try await s3.uploadPart(bucket, key, uploadId: id, number: number, part)
                        }
                        guard reply.status == 200, let etag = reply.header("ETag") else { throw TortureError("part \(reply.status)") }
                        parts.append((number, etag))
                        whole += part
                    }
                    // One in five is left unfinished, for the restart to complete or abort.
                    if Int.random(in: 0..<5, using: &random) == 0 { continue }
                    let hash = Torture.sha256(whole)
                    await ledger.sending(key, hash)
                    let done = try await tracked(ledger, "CompleteMultipartUpload") {
                        try await s3.complete(bucket, key, uploadId: id, xml: S3TestClient.completeXML(parts))
                    }
                    if done.status == 200, !done.text.contains("<Error>") {
                        await ledger.acknowledged(key, hash)
                        mine.append(key)
                    }
                } else if let key = mine.popLast() {
                    await ledger.sending(key, "deleted")
                    if try await s3.send("DELETE", S3TestClient.path(bucket, key)).status == 204 {
                        await ledger.acknowledged(key, "deleted")
                    }
                }
            } catch {
                // The server was killed under this request: what it acknowledged before is what the restart must show.
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    @Test("after each SIGKILL every acknowledged object is there byte for byte, no partial object is visible, listings are exact, and unfinished uploads complete or abort")
    func killDuringWrites() async throws {
        let seed = tortureSeed()
        print("ServerKillTests seed \(seed) (FERRY_TORTURE_SEED repeats it)")
        var random = SeededGenerator(seed: seed)
        let data = TemporaryDirectory.make("ferry-torture-server")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let arguments = ["--min-part-size", "1024"]
        let ledger = Ledger()
        var server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: Torture.environment)
        #expect(try await S3TestClient(endpoint: server.endpoint, credentials: Torture.root).createBucket(Self.bucket).status == 200)
        var completedOnRestart = 0
        var abortedOnRestart = 0
        let rounds = 8
        for round in 0..<rounds {
            let s3 = S3TestClient(endpoint: server.endpoint, credentials: Torture.root)
            let workerSeeds = (0..<6).map { _ in random.next() }
            let workers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for (worker, workerSeed) in workerSeeds.enumerated() {
                        group.addTask { await Self.client(s3, ledger: ledger, worker: worker, round: round, seed: workerSeed) }
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 400...1200, using: &random)))
            await ledger.killed()
            await server.stop(signal: SIGKILL)
            workers.cancel()
            await workers.value

            server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: Torture.environment)
            let restarted = S3TestClient(endpoint: server.endpoint, credentials: Torture.root)
            // Nothing half-written is left behind.
            #expect(Torture.files(under: data + "/objects/tmp").isEmpty, "round \(round): temporary files survived the restart")

            // Every listed key is one a client sent, with the content of one of its requests, and its listed size.
            let listed = try await Torture.listAll(restarted, bucket: Self.bucket)
            let entries = await ledger.entries
            for (key, size) in listed {
                guard let entry = entries[key] else {
                    Issue.record("round \(round): \(key) is listed but no client wrote it")
                    continue
                }
                let reply = try await restarted.get(Self.bucket, key)
                #expect(reply.status == 200, "round \(round): \(key) listed but GET answered \(reply.status)")
                #expect(Int64(reply.body.count) == size, "round \(round): \(key) listed with \(size) bytes, GET gave \(reply.body.count)")
                let hash = Torture.sha256(reply.body)
                let allowed = entry.unanswered.union(entry.acknowledged.map { [$0] } ?? [])
                #expect(allowed.contains(hash), "round \(round): \(key) holds content no request sent (partial or corrupt)")
                await ledger.settle(key, stored: hash)
            }
            // Every acknowledged object is listed, unless a delete or another write of it went unanswered.
            for (key, entry) in entries where listed[key] == nil {
                if let acknowledged = entry.acknowledged, acknowledged != "deleted", !entry.unanswered.contains("deleted") {
                    Issue.record("round \(round): \(key) was acknowledged and is gone")
                }
                await ledger.settle(key, stored: nil)
            }
            // Unfinished uploads, including those killed mid-part or mid-completion: alternately completed and aborted.
            for (index, upload) in try await Torture.openUploads(restarted, bucket: Self.bucket).enumerated() {
                if index % 2 == 0 {
                    let body = Torture.randomBytes(2048, using: &random)
                    let part = try await restarted.uploadPart(Self.bucket, upload.key, uploadId: upload.uploadId, number: 1, body)
                    let etag = try #require(part.header("ETag"), "round \(round): UploadPart after restart answered \(part.status)")
                    let done = try await restarted.complete(
                        Self.bucket, upload.key, uploadId: upload.uploadId, xml: S3TestClient.completeXML([(1, etag)]))
                    #expect(done.status == 200 && !done.text.contains("<Error>"), "round \(round): \(done.text)")
                    #expect(try await restarted.get(Self.bucket, upload.key).body == body)
                    await ledger.settle(upload.key, stored: Torture.sha256(body))
                    completedOnRestart += 1
                } else {
                    let abort = try await restarted.send(
                        "DELETE", S3TestClient.path(Self.bucket, upload.key), query: [("uploadId", upload.uploadId)])
                    #expect(abort.status == 204, "round \(round): abort answered \(abort.status)")
                    let parts = try await restarted.send(
                        "GET", S3TestClient.path(Self.bucket, upload.key), query: [("uploadId", upload.uploadId)])
                    #expect(parts.errorCode == "NoSuchUpload")
                    abortedOnRestart += 1
                }
            }
        }
        // After the last round, the listing matches the ledger exactly.
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: Torture.root)
        let finalListing = try await Torture.listAll(s3, bucket: Self.bucket)
        let expected = await ledger.entries.filter { $0.value.acknowledged != nil && $0.value.acknowledged != "deleted" }
        #expect(Set(finalListing.keys) == Set(expected.keys))
        #expect(try await Torture.openUploads(s3, bucket: Self.bucket).isEmpty)
        await server.stop()
        let killedUnder = await ledger.underWayAtKill
        print("ServerKillTests: \(rounds) kills with requests under way \(killedUnder), \(finalListing.count) objects, unfinished uploads completed \(completedOnRestart), aborted \(abortedOnRestart)")
        #expect(killedUnder["PutObject", default: 0] + killedUnder["UploadPart", default: 0] >= rounds / 2)
    }
}
