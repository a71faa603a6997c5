import Crypto
import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// A distributed store under Ferry's object API: the bytes of objects and parts live in SeaweedFS or moto (real
/// servers started here), the metadata in Ferry's catalog.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case seaweedfs, moto
    var testDescription: String { rawValue }

    /// Starts the store; returns where Ferry keeps its blobs there and how to stop it.
    func start() async throws -> (location: S3StoreLocation, store: S3TestClient, stop: @Sendable () async -> Void) {
        switch self {
        case .seaweedfs:
            let server = try await SeaweedFSServer.start()
            let location = server.location()
            return (location, S3TestClient(endpoint: server.endpoint, credentials: SeaweedFSServer.credentials), { await server.destroy() })
        case .moto:
            let server = try await MotoServer.start()
            let credentials = SigV4Credentials(accessKeyId: "FERRYMOTOKEY", secretAccessKey: "ferry-moto-secret")
            let location = S3StoreLocation(endpoint: server.endpoint, bucket: "ferry-blobs", prefix: "node", credentials: credentials)
            return (location, S3TestClient(endpoint: server.endpoint, credentials: credentials), { await server.stop() })
        }
    }
}

extension S3TestClient {
    /// The keys of Ferry's blobs in the store.
    func blobKeys(_ location: S3StoreLocation) async throws -> [String] {
        let reply = try await send(
            "GET", S3TestClient.path(location.bucket), query: [("list-type", "2"), ("prefix", location.prefix + "blobs/")])
        #expect(reply.status == 200, "\(reply.text)")
        return reply.text.components(separatedBy: "<Key>").dropFirst().map { String($0.prefix { $0 != "<" }) }
    }
}

@Suite("S3-backed store: object bytes in SeaweedFS or moto", .serialized, .timeLimit(.minutes(10)))
struct S3BackedStoreTests {
    static func random(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    @Test(
        "Objects, ranges, overwrites, multipart, copies and deletes go through the store; a body that fails verification leaves nothing there",
        arguments: StoreBackend.allCases)
    func roundTrip(backend: StoreBackend) async throws {
        let (location, store, stop) = try await backend.start()
        do {
            try await TestServer.with(configure: { $0.objectStore = location }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("bkt").status == 200)
                let first = Self.random(3 << 20 + 17)
                var crc = Checksummer(.crc32)
                crc.update(first)
                let put = try await s3.put(
                    "bkt", "dir/a.bin", first, headers: [("x-amz-checksum-crc32", Data(crc.finalize()).base64EncodedString())])
                #expect(put.status == 200, "\(put.text)")
                #expect(try await s3.get("bkt", "dir/a.bin").body == first)
                let range = try await s3.get("bkt", "dir/a.bin", headers: [("range", "bytes=1048570-1048600")])
                #expect(range.status == 206)
                #expect(range.body == Array(first[1_048_570...1_048_600]))
                #expect(try await store.blobKeys(location).count == 1)

                // A wrong Content-MD5: BadDigest, no object, and no blob left in the store.
                let wrong = try await s3.put(
                    "bkt", "bad.bin", Self.random(100_000), headers: [("content-md5", Data(Insecure.MD5.hash(data: [1])).base64EncodedString())])
                #expect(wrong.errorCode == "BadDigest")
                #expect(try await s3.get("bkt", "bad.bin").status == 404)
                #expect(try await store.blobKeys(location).count == 1)

                // An overwrite replaces the blob.
                let second = Self.random(1 << 20)
                #expect(try await s3.put("bkt", "dir/a.bin", second).status == 200)
                #expect(try await s3.get("bkt", "dir/a.bin").body == second)
                #expect(try await store.blobKeys(location).count == 1)

                // Multipart: three parts, one of them sent twice (the second replaces the first).
                let parts = [Self.random(5 << 20), Self.random(5 << 20), Self.random(700_000)]
                let uploadId = try await s3.createMultipartUpload("bkt", "m.bin")
                _ = try await s3.uploadPart("bkt", "m.bin", uploadId: uploadId, number: 2, Self.random(5 << 20))
                var etags: [(Int, String)] = []
                for (index, part) in parts.enumerated() {
                    let reply = try await s3.uploadPart("bkt", "m.bin", uploadId: uploadId, number: index + 1, part)
                    #expect(reply.status == 200, "\(reply.text)")
                    etags.append((index + 1, reply.header("etag") ?? ""))
                }
                let completed = try await s3.complete("bkt", "m.bin", uploadId: uploadId, xml: S3TestClient.completeXML(etags))
                #expect(completed.status == 200, "\(completed.text)")
                #expect(completed.text.contains("-3&quot;") || completed.text.contains("-3\""))
                let whole = parts.flatMap { $0 }
                #expect(try await s3.get("bkt", "m.bin").body == whole)
                let across = try await s3.get("bkt", "m.bin", headers: [("range", "bytes=5242000-10486000")])
                #expect(across.body == Array(whole[5_242_000...10_486_000]))
                #expect(try await store.blobKeys(location).count == 4)

                // A server-side copy shares nothing with the source once made: deleting the source leaves it whole.
                let copy = try await s3.send(
                    "PUT", S3TestClient.path("bkt", "copy.bin"), headers: [("x-amz-copy-source", "/bkt/m.bin")])
                #expect(copy.status == 200, "\(copy.text)")
                #expect(try await store.blobKeys(location).count == 7)
                #expect(try await s3.send("DELETE", S3TestClient.path("bkt", "m.bin")).status == 204)
                #expect(try await s3.get("bkt", "copy.bin").body == whole)

                // Everything deleted: nothing left in the store.
                #expect(try await s3.send("DELETE", S3TestClient.path("bkt", "copy.bin")).status == 204)
                #expect(try await s3.send("DELETE", S3TestClient.path("bkt", "dir/a.bin")).status == 204)
                #expect(try await store.blobKeys(location).isEmpty)
            }
        } catch {
            await stop()
            throw error
        }
        await stop()
    }

    @Test("SeaweedFS killed mid-upload: requests answer 503 SlowDown, and the engine's upload completes byte-identical once it is back")
    func storeOutage() async throws {
        let seaweed = try await SeaweedFSServer.start()
        do {
            let location = seaweed.location()
            try await TestServer.with(configure: { $0.objectStore = location }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("bkt").status == 200)
                let kept = Self.random(200_000)
                #expect(try await s3.put("bkt", "kept.bin", kept).status == 200)

                let file = try makeRandomFile(size: 40 << 20)
                defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
                let client = server.engine(
                    retry: RetryPolicy(maxRetryCount: 240, baseDelay: .milliseconds(200), maxDelay: .seconds(1)))
                var request = ResumableUploadRequest(bucket: "bkt", key: "big.bin", fileURL: file)
                request.partSize = 5 << 20
                request.concurrency = 2
                let upload = try await client.upload(request)
                // Wait until some parts are stored, then take the store away.
                for await event in upload.events {
                    if case .progress(let progress) = event, progress.totalBytesSent >= 10 << 20 { break }
                }
                await seaweed.stop()
                for key in ["during.bin", "during-2.bin"] {
                    let refused = try await s3.put("bkt", key, Self.random(1000))
                    #expect(refused.status == 503)
                    #expect(refused.errorCode == "SlowDown")
                    #expect(refused.header("Retry-After") == "1")
                    #expect(!refused.text.contains(SeaweedFSServer.credentials.secretAccessKey))
                }
                // A GET fails before its status line: 503, not a 200 cut short.
                let unavailable = try await s3.get("bkt", "kept.bin")
                #expect(unavailable.status == 503)
                #expect(unavailable.errorCode == "SlowDown")
                #expect(unavailable.header("Retry-After") == "1")
                try await Task.sleep(for: .seconds(2))
                try await seaweed.startProcess()

                let result = try await upload.result
                #expect(result.size == 40 << 20)
                let body = try await s3.get("bkt", "big.bin").body
                #expect(Insecure.MD5.hash(data: body) == Insecure.MD5.hash(data: try Data(contentsOf: file)))
                #expect(try await s3.get("bkt", "kept.bin").body == kept)
                #expect(try await s3.get("bkt", "during.bin").status == 404)
            }
        } catch {
            await seaweed.destroy()
            throw error
        }
        await seaweed.destroy()
    }

    /// Runs `body` with a store location in moto behind a fault proxy (the proxy, to inject the store's faults), and
    /// stops both after.
    static func withMotoBehindProxy(_ body: (S3StoreLocation, FaultProxy) async throws -> Void) async throws {
        let moto = try await MotoServer.start()
        let proxy = try await FaultProxy.start(upstream: moto.endpoint)
        do {
            let credentials = SigV4Credentials(accessKeyId: "FERRYMOTOKEY", secretAccessKey: "ferry-moto-secret")
            try await body(
                S3StoreLocation(endpoint: proxy.endpoint, bucket: "ferry-blobs", prefix: "node", credentials: credentials),
                proxy)
        } catch {
            try? await proxy.shutdown()
            await moto.stop()
            throw error
        }
        try? await proxy.shutdown()
        await moto.stop()
    }

    @Test("a store's answer that ends mid-body, or holds another range than the one asked, is asked for again from where it stopped, and the download is whole; asked for again 3 times in a row without a byte, the read fails, never passed off as whole")
    func storeAnswerEndsMidBody() async throws {
        try await Self.withMotoBehindProxy { location, proxy in
            let log = LogRecorder()
            try await TestServer.with(configure: {
                $0.objectStore = location
                $0.logger = log.logger()
            }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("bkt").status == 200)
                let body = Self.random(3 << 20)
                #expect(try await s3.put("bkt", "k", body).status == 200)
                // The store's connection ends twice mid-body (as when the HTTP client's read timeout fires while a
                // slow download leaves the store's bytes unread).
                proxy.clearLog()
                proxy.inject(.dropResponseMidBody(afterBytes: 1 << 20), when: .method("GET"), times: 2)
                let whole = try await s3.get("bkt", "k")
                #expect(whole.status == 200 && whole.body == body, "\(whole.status), \(whole.body.count) bytes")
                #expect(proxy.log.filter { $0.method == "GET" }.map(\.outcome) == ["dropped", "dropped", "206"])
                // After the first MiB, answers that bring nothing at all: asked for again three times, then the read
                // fails, and says so.
                proxy.clearLog()
                proxy.inject(.dropResponseMidBody(afterBytes: 1 << 20), when: .method("GET"), times: 1)
                proxy.inject(.dropResponseMidBody(afterBytes: 0), when: .method("GET"), times: 10)
                let failed = try? await s3.get("bkt", "k")
                #expect(failed.map { $0.status != 200 || $0.body != body } ?? true)
                #expect(proxy.log.filter { $0.method == "GET" }.count == 4, "\(proxy.log)")
                #expect(log.records.contains { $0.level == .warning && $0.message.contains("the answer ends short") })
                // An answer that holds another part of the blob than the one asked for brings nothing: the range is
                // asked for again, and the download is whole.
                proxy.clearFaults()
                proxy.clearLog()
                proxy.inject(.dropResponseMidBody(afterBytes: 1 << 20), when: .method("GET"), times: 1)
                proxy.inject(.shiftRange(by: 4096), when: .method("GET"), times: 2)
                let shifted = try await s3.get("bkt", "k")
                #expect(shifted.status == 200 && shifted.body == body, "\(shifted.status), \(shifted.body.count) bytes")
                #expect(proxy.log.filter { $0.method == "GET" }.count == 4, "\(proxy.log)")
                proxy.clearFaults()
                #expect(try await s3.get("bkt", "k").body == body)
            }
        }
    }

    @Test("a store that takes a body slower than a body window does not cost the client its connection: a window counts only the time the server asked for the body")
    func slowStoreKeepsTheClient() async throws {
        try await Self.withMotoBehindProxy { location, proxy in
            try await TestServer.with(configure: {
                $0.objectStore = location
                $0.connectionLimits.bodyWindow = .seconds(2)
            }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("bkt").status == 200)
                // The store holds the node's write for three windows without reading it: the node reads no more of the
                // client's body (more than the connections' buffers hold) until the store takes it.
                let chunk = Self.random(1 << 20)
                let body = Array((0..<64).map { _ in chunk }.joined())
                proxy.clearLog()
                proxy.inject(.delay(seconds: 6), when: .method("PUT"), times: 1)
                let started = ContinuousClock.now
                let put = try await s3.put("bkt", "k", body)
                #expect(put.status == 200, "\(put.status) \(put.text)")
                #expect(proxy.log.filter { $0.method == "PUT" }.map(\.outcome) == ["200"], "\(proxy.log)")
                #expect(ContinuousClock.now - started >= .seconds(6))
                #expect(try await s3.get("bkt", "k").body == body)
            }
        }
    }

    @Test("the store fails while a body is still arriving: the answer is 503 SlowDown, and the server goes on serving")
    func storeFailsMidBody() async throws {
        let seaweed = try await SeaweedFSServer.start()
        do {
            try await TestServer.with(configure: { $0.objectStore = seaweed.location() }) { server in
                let s3 = server.client()
                #expect(try await s3.createBucket("bkt").status == 200)
                let total = 4 << 20
                let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
                let headers = signer.sign(
                    method: "PUT", path: "/bkt/slow.bin", query: [],
                    headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(total))],
                    payloadHash: SigV4.unsignedPayload, date: Date()).headers
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", "/bkt/slow.bin", headers).utf8))
                // The body trickles in, 64 KiB every 50 ms; the store goes away after the first MiB, while the server's
                // client to the store is waiting for the next bytes of this body.
                let piece = [UInt8](repeating: 0x42, count: 64 << 10)
                var sent = 0
                var answer: [UInt8] = []
                while sent < total, !RawSocket.isCompleteResponse(answer) {
                    guard (try? RawSocket.write(socket, piece)) != nil else { break }
                    sent += piece.count
                    if sent == 1 << 20 { await seaweed.stop() }
                    try await Task.sleep(for: .milliseconds(50))
                    answer += await RawSocket.receive(socket, timeout: .milliseconds(1)) { RawSocket.isCompleteResponse(answer + $0) }.bytes
                }
                if !RawSocket.isCompleteResponse(answer) {
                    answer += await RawSocket.receive(socket, timeout: .seconds(45)) { RawSocket.isCompleteResponse(answer + $0) }.bytes
                }
                let text = String(decoding: answer, as: UTF8.self)
                #expect(text.hasPrefix("HTTP/1.1 503"), "\(text)")
                #expect(text.contains("<Code>SlowDown</Code>"), "\(text)")
                // The server lives on: the catalog answers without the store, and nothing was stored.
                #expect(try await s3.send("GET", "/bkt", query: [("list-type", "2")]).status == 200)
                #expect(try await s3.get("bkt", "slow.bin").status == 404)
            }
        } catch {
            await seaweed.destroy()
            throw error
        }
        await seaweed.destroy()
    }
}
