import Ferry
import FerryAsyncHTTPClient
import FerryCore
import FerryTestSupport
import Foundation
import FerryTransport
import NIOConcurrencyHelpers
import Testing

@Suite("Stream uploads (tus and the IETF draft) over a link that loses answers", .timeLimit(.minutes(10)))
struct StreamUploaderTests {
    @Test("a tus chunk damaged on its way is refused by its SHA-1 (460, nothing of it kept) and sent again: the object is the file; an IETF upload damaged on its way is told by the CRC64NVME of what the server received and never completed, and a rerun sends it afresh")
    func damagedChunk() async throws {
        try await Self.withStream("damaged.bin", size: 3 * 1024 * 1024) { server, proxy, file, bytes, creation in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 1024 * 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
            // The second chunk arrives with one byte flipped.
            proxy.inject(.corruptRequestByte(at: 4321), when: .method("PATCH"), times: 1)
            proxy.inject(.corruptRequestByte(at: 0), when: .method("PATCH") && .header("Upload-Offset", "1048576"))
            try await Self.uploadWhole(file, bytes, with: uploader, to: creation, signer: server.root)
            #expect(proxy.pendingFaults.isEmpty)
            let outcomes = proxy.log.filter { $0.method == "PATCH" }.map(\.outcome)
            #expect(outcomes == ["460", "204", "460", "204", "204"], "\(proxy.log)")
            let stored = try await server.client().get("streams", "damaged.bin")
            #expect(stored.status == 200 && stored.body == bytes)

            let ietf = StreamUploader(protocol: .ietf)
            proxy.inject(.corruptRequestByte(at: 2_000_000), when: .method("PATCH"))
            let ietfCreation = try #require(URL(string: proxy.endpoint + "/_ferry/uploads/s3/streams/damaged-ietf.bin"))
            let created = NIOLockedValueBox<URL?>(nil)
            do {
                _ = try await ietf.upload(
                    file: file, creationURL: ietfCreation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    onCreated: { url in created.withLockedValue { $0 = url } })
                Issue.record("a damaged IETF upload was reported done")
            } catch {
                #expect((error as? FerryError)?.code == .checksumMismatch, "\(error)")
                #expect((error as? FerryError)?.message.contains("damaged on their way") == true, "\(error)")
            }
            #expect(proxy.pendingFaults.isEmpty)
            // What the server received is not the file: the upload was ended uncompleted, no object was made of it.
            let damaged = try #require(created.withLockedValue { $0 })
            #expect(try await server.client().get("streams", "damaged-ietf.bin").status == 404)
            #expect(try await ietf.completed(damaged, file: file) == nil)
            #expect(proxy.log.filter { $0.method == "PATCH" && $0.path == damaged.path }.count == 1, "\(proxy.log)")
            // A rerun finds it gone and sends the file afresh.
            _ = try await ietf.upload(
                file: file, creationURL: ietfCreation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                resuming: damaged)
            #expect(try await server.client().get("streams", "damaged-ietf.bin").body == bytes)
        }
    }

    @Test("a file rewritten while its tus chunks are sent is not sent on: the upload stops before its next chunk, uncompleted, and says the file changed")
    func fileChangedBetweenChunks() async throws {
        try await Self.withStream("changed.bin", size: 4 * 1024 * 1024) { server, proxy, file, bytes, creation in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 1024 * 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 0)
            let rewritten = NIOLockedValueBox(false)
            let created = NIOLockedValueBox<URL?>(nil)
            do {
                _ = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    onCreated: { url in created.withLockedValue { $0 = url } },
                    progress: { progress in
                        // Once the first chunk is stored, an editor saves the file again: its head (sent) and its
                        // tail (not yet sent) change, and so does its modification time.
                        guard progress.totalBytesStored >= 1024 * 1024, !rewritten.withLockedValue({ $0 }) else { return }
                        rewritten.withLockedValue { $0 = true }
                        guard let handle = try? FileHandle(forWritingTo: file) else { return }
                        for offset: UInt64 in [100, UInt64(bytes.count - 100)] {
                            try? handle.seek(toOffset: offset)
                            try? handle.write(contentsOf: Data(repeating: 0xEE, count: 14))
                        }
                        try? handle.close()
                        try? FileManager.default.setAttributes(
                            [.modificationDate: Date().addingTimeInterval(5)], ofItemAtPath: file.path)
                    })
                Issue.record("an upload of a file rewritten midway was reported done")
            } catch {
                #expect((error as? FerryError)?.code == .cannotResumeUpload, "\(error)")
                #expect((error as? FerryError)?.message.contains("changed while it was being uploaded") == true, "\(error)")
            }
            #expect(rewritten.withLockedValue { $0 })
            // Nothing was completed: no object mixes the two versions, and a rerun does not take the upload as done.
            let absent = try await server.client().get("streams", "changed.bin")
            #expect(absent.status == 404)
            let url = try #require(created.withLockedValue { $0 })
            let done = try await uploader.completed(url, file: file)
            #expect(done == nil, "a rerun took the upload of the rewritten file as done: \(String(describing: done))")
        }
    }

    @Test("a file that grows during the append that completes its upload is not reported uploaded (tus and IETF): the object holds it as it was, and the error says the file changed", arguments: StreamUploader.WireProtocol.allCases)
    func fileGrowsDuringLastAppend(_ wire: StreamUploader.WireProtocol) async throws {
        try await Self.withStream("grows.bin", size: 3 * 1024 * 1024) { server, proxy, file, bytes, creation in
            var uploader = StreamUploader(protocol: wire, chunkSize: 1024 * 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 0)
            let grown = NIOLockedValueBox(false)
            do {
                _ = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    progress: { progress in
                        // While the last append is sent, a recorder appends to the file.
                        guard progress.totalBytesSent > Int64(bytes.count) - 512 * 1024, !grown.withLockedValue({ $0 })
                        else { return }
                        grown.withLockedValue { $0 = true }
                        guard let handle = try? FileHandle(forWritingTo: file) else { return }
                        _ = try? handle.seekToEnd()
                        try? handle.write(contentsOf: Data(repeating: 0x42, count: 100_000))
                        try? handle.close()
                    })
                Issue.record("an upload of a file that grew was reported done")
            } catch {
                // tus completes the upload with the append that reaches its length; an IETF upload is completed only
                // once the file is seen unchanged after its bytes went, so it is not completed at all.
                #expect((error as? FerryError)?.code == (wire == .tus ? .checksumMismatch : .cannotResumeUpload), "\(error)")
                #expect((error as? FerryError)?.message.contains("changed while it was being uploaded") == true, "\(error)")
            }
            #expect(grown.withLockedValue { $0 })
            let stored = try await server.client().get("streams", "grows.bin")
            if wire == .tus {
                #expect(stored.body == bytes)
            } else {
                #expect(stored.status == 404)
            }
        }
    }

    @Test("a file written to while its one IETF append is sent (a part already sent changes, its modification time put back) is not completed: the object stored before at its key stays as it was, not a mix")
    func fileRewrittenDuringIETFAppend() async throws {
        try await Self.withStream("rewritten.bin", size: 4 * 1024 * 1024) { server, proxy, file, bytes, creation in
            let earlier = [UInt8](repeating: 7, count: 1000)
            #expect(try await server.client().put("streams", "rewritten.bin", earlier).status == 200)
            var uploader = StreamUploader(protocol: .ietf)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 0)
            uploader.progressInterval = .zero
            let modified = try #require(
                try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date)
            let rewritten = NIOLockedValueBox(false)
            do {
                _ = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    progress: { progress in
                        // Half sent: bytes already sent are written over, and the modification time put back.
                        guard progress.totalBytesSent >= 2 * 1024 * 1024, !rewritten.withLockedValue({ $0 }) else { return }
                        rewritten.withLockedValue { $0 = true }
                        guard let handle = try? FileHandle(forWritingTo: file) else { return }
                        try? handle.seek(toOffset: 1024)
                        try? handle.write(contentsOf: Data(repeating: 0xEE, count: 4096))
                        try? handle.close()
                        try? FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: file.path)
                    })
                Issue.record("an upload of a file rewritten while it was sent was reported done")
            } catch {
                #expect(
                    [.cannotResumeUpload, .checksumMismatch].contains((error as? FerryError)?.code), "\(error)")
                #expect((error as? FerryError)?.message.contains("changed while it was being uploaded") == true, "\(error)")
            }
            #expect(rewritten.withLockedValue { $0 })
            #expect(try await server.client().get("streams", "rewritten.bin").body == earlier)
        }
    }

    @Test("resuming an upload whose stored bytes are no longer the file's start (rewritten with its size and time kept) ends it and sends the file afresh: the object is the file, not a mix")
    func resumeOfRewrittenFile() async throws {
        try await Self.withStream("rewritten.bin", size: 4 * 1024 * 1024) { server, proxy, file, bytes, creation in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 1024 * 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 0)
            // The link goes down after the first chunk is stored.
            proxy.inject(.dropAfterRequestBytes(0), when: .method("PATCH") && .header("Upload-Offset", "1048576"))
            let created = NIOLockedValueBox<URL?>(nil)
            await #expect(throws: FerryError.self) {
                _ = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    onCreated: { url in created.withLockedValue { $0 = url } })
            }
            let first = try #require(created.withLockedValue { $0 })
            // An edit inside the stored first chunk, the file's size and modification time kept.
            let time = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate] as? Date)
            var edited = bytes
            for index in 100..<120 { edited[index] = 0xEE }
            try Data(edited).write(to: file)
            try FileManager.default.setAttributes([.modificationDate: time], ofItemAtPath: file.path)
            let result = try await uploader.upload(
                file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                resuming: first)
            #expect(result.uploadURL != first)
            let stored = try await server.client().get("streams", "rewritten.bin")
            #expect(stored.body == edited)
            #expect(proxy.log.contains { $0.method == "DELETE" && $0.path == first.path }, "\(proxy.log)")
        }
    }

    @Test("a link that cuts every tus chunk short (keeping nothing of a checksummed chunk) gets smaller chunks through: the upload completes")
    func halvingChunks() async throws {
        try await Self.withStream("halving.bin", size: 6 * 1024 * 1024) { server, proxy, file, bytes, creation in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 4 * 1024 * 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 2, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
            // Every append of 4 MiB is cut after 3 MiB: only smaller ones arrive whole.
            proxy.inject(.dropAfterRequestBytes(3 * 1024 * 1024), when: .method("PATCH") && .header("Content-Length", "4194304"), times: .max)
            try await Self.uploadWhole(file, bytes, with: uploader, to: creation, signer: server.root)
            #expect(proxy.log.contains { $0.outcome == "dropped" }, "\(proxy.log)")
            #expect(try await server.client().get("streams", "halving.bin").body == bytes)
        }
    }

    /// Uploads `file` (holding `bytes`) and checks the result and the last progress report: every byte stored.
    static func uploadWhole(
        _ file: URL, _ bytes: [UInt8], with uploader: StreamUploader, to creation: URL, signer credentials: SigV4Credentials
    ) async throws {
        let reports = NIOLockedValueBox<[UploadProgress]>([])
        let result = try await uploader.upload(
            file: file, creationURL: creation, signer: SigV4Signer(credentials: credentials, region: "us-east-1"),
            progress: { progress in reports.withLockedValue { $0.append(progress) } })
        #expect(result.size == Int64(bytes.count))
        #expect(reports.withLockedValue { $0.last?.totalBytesStored } == Int64(bytes.count))
    }

    /// Runs `body` with a server whose bucket `streams` exists, a fault proxy in front of it, a file of `size`
    /// patterned bytes, and the creation URL of `key` in `streams` through the proxy.
    static func withStream(
        _ key: String, size: Int, _ body: @Sendable (TestServer, FaultProxy, URL, [UInt8], URL) async throws -> Void
    ) async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                #expect(try await server.client().createBucket("streams").status == 200)
                let directory = TemporaryDirectory.make("ferry-stream")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let file = URL(fileURLWithPath: directory + "/clip.bin")
                let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
                try Data(bytes).write(to: file)
                let creation = try #require(URL(string: proxy.endpoint + "/_ferry/uploads/s3/streams/" + key))
                try await body(server, proxy, file, bytes, creation)
            }
        }
    }

    @Test(
        "an upload whose completing append was stored but whose answer was lost is found complete, and resuming it sends nothing",
        arguments: StreamUploader.WireProtocol.allCases)
    func lostCompletionAnswer(_ wire: StreamUploader.WireProtocol) async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                #expect(try await server.client().createBucket("streams").status == 200)
                let directory = TemporaryDirectory.make("ferry-stream-lost")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let file = URL(fileURLWithPath: directory + "/clip.bin")
                let bytes = (0..<(3 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
                try Data(bytes).write(to: file)
                let key = "lost-\(wire.rawValue).bin"
                let creation = try #require(URL(string: proxy.endpoint + "/_ferry/uploads/s3/streams/" + key))
                var uploader = StreamUploader(protocol: wire, chunkSize: 4 * 1024 * 1024)
                uploader.retryPolicy = RetryPolicy(maxRetryCount: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
                uploader.progressInterval = .zero
                // The one append reaches the server, which stores it and makes the object; its answer never comes back.
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("PATCH"))
                let created = NIOLockedValueBox<URL?>(nil)
                let reports = NIOLockedValueBox<[UploadProgress]>([])
                let result = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    onCreated: { url in created.withLockedValue { $0 = url } },
                    progress: { progress in reports.withLockedValue { $0.append(progress) } })
                #expect(proxy.pendingFaults.isEmpty, "the answer was never lost")
                #expect(result.size == Int64(bytes.count))
                // Progress moves while the append is on its way, and counts it stored only once the server says so.
                let size = Int64(bytes.count)
                let progress = reports.withLockedValue { $0 }
                #expect(progress.contains { $0.totalBytesSent == size && $0.totalBytesStored == 0 }, "\(progress)")
                #expect(progress.contains { $0.totalBytesSent > 0 && $0.totalBytesSent < size }, "\(progress)")
                #expect(progress.allSatisfy { $0.totalBytesStored <= $0.totalBytesSent })
                #expect(progress.last?.totalBytesStored == size)
                let stored = try await server.client().get("streams", key)
                #expect(stored.status == 200 && stored.body == bytes)
                #expect(result.etag == stored.header("ETag")?.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))

                // A process that died before hearing the answer resumes the same upload: it is complete, nothing is sent.
                proxy.clearLog()
                let uploadURL = try #require(created.withLockedValue { $0 })
                let resumed = try await uploader.upload(
                    file: file, creationURL: creation, signer: SigV4Signer(credentials: server.root, region: "us-east-1"),
                    resuming: uploadURL)
                #expect(resumed.uploadURL == uploadURL && resumed.size == Int64(bytes.count))
                if wire == .ietf {
                    #expect(!proxy.log.contains { $0.method != "HEAD" }, "\(proxy.log)")
                }
            }
        }
    }
}

@Suite("Stream uploads and listings against a service that misbehaves", .timeLimit(.minutes(5)))
struct MisbehavingServiceTests {
    @Test(
        "a tus service that stores nothing it accepts, or answers offsets no upload can have, is given up on after the retries: no crash, no endless appends",
        arguments: [
            // PATCH status, its Upload-Offset, HEAD's Upload-Offset, most PATCHes the uploader may send.
            (204, "0", "0", 3), (204, "-9223372036854775808", "0", 1), (204, "999999999", "0", 1),
            (409, "0", "-9223372036854775808", 1),
        ])
    func lyingTusService(_ patchStatus: Int, _ patchOffset: String, _ headOffset: String, _ most: Int) async throws {
        let directory = TemporaryDirectory.make("ferry-stream-lying")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = URL(fileURLWithPath: directory + "/clip.bin")
        try Data(repeating: 7, count: 3000).write(to: file)
        try await HTTPReceiver.answering({ request in
            switch request.method {
            case "POST": return .init(201, [("Location", "/files/1"), ("Tus-Resumable", "1.0.0")])
            case "HEAD": return .init(200, [("Upload-Offset", headOffset), ("Tus-Resumable", "1.0.0")])
            default: return .init(patchStatus, [("Upload-Offset", patchOffset), ("Tus-Resumable", "1.0.0")])
            }
        }) { receiver in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))
            let creation = try #require(URL(string: receiver.url("/files")))
            await #expect(throws: FerryError.self) { try await uploader.upload(file: file, creationURL: creation) }
            let patches = await receiver.recorder.requests.filter { $0.method == "PATCH" }.count
            #expect((1...most).contains(patches), "\(patches) appends")
        }
    }

    @Test("a 2xx answer without what tus or the IETF draft requires (a middlebox's garbled page) is the service's failure, retried and resumable, not a refusal of the request or a completed upload")
    func garbledAnswers() async throws {
        let directory = TemporaryDirectory.make("ferry-stream-garbled")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = URL(fileURLWithPath: directory + "/clip.bin")
        try Data(repeating: 7, count: 3000).write(to: file)
        try await HTTPReceiver.answering({ request in
            request.method == "POST" ? .init(201, [("Location", "/files/1")]) : .init(200, [("Content-Type", "text/html")])
        }) { receiver in
            var uploader = StreamUploader(protocol: .tus, chunkSize: 1024)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))
            let creation = try #require(URL(string: receiver.url("/files")))
            let error = await #expect(throws: FerryError.self) { try await uploader.upload(file: file, creationURL: creation) }
            #expect(error?.code == .server, "\(String(describing: error))")
            let heads = await receiver.recorder.requests.filter { $0.method == "HEAD" }.count
            #expect(heads >= 2, "\(heads) offset reads: not retried")
        }
        // IETF: the completing append answered so is not taken as the upload's completion.
        try await HTTPReceiver.answering({ request in
            switch (request.method, request.headers["upload-complete"]) {
            case ("POST", _): .init(201, [("Location", "/files/1")])
            case ("HEAD", _): .init(204, [("Upload-Offset", "3000"), ("Upload-Complete", "?0")])
            case ("PATCH", "?0"): .init(204, [("Upload-Offset", "3000"), ("Upload-Complete", "?0")])
            default: .init(200, [("Content-Type", "text/html")])
            }
        }) { receiver in
            var uploader = StreamUploader(protocol: .ietf)
            uploader.retryPolicy = RetryPolicy(maxRetryCount: 2, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))
            let creation = try #require(URL(string: receiver.url("/files")))
            let error = await #expect(throws: FerryError.self) { try await uploader.upload(file: file, creationURL: creation) }
            #expect(error?.code == .server, "\(String(describing: error))")
            let completions = await receiver.recorder.requests.filter { $0.headers["upload-complete"] == "?1" }.count
            #expect(completions >= 2, "\(completions) completing appends: not retried")
        }
    }

    @Test("ListParts from a service that pages on without end stops where part numbers end instead of paging for ever")
    func endlessListParts() async throws {
        try await HTTPReceiver.answering({ request in
            let marker = (request.query ?? "").split(separator: "&").first { $0.hasPrefix("part-number-marker=") }
                .flatMap { Int($0.dropFirst("part-number-marker=".count)) } ?? 0
            return .init(
                200, [("Content-Type", "application/xml")],
                body: """
                    <ListPartsResult><Bucket>b</Bucket><Key>k</Key><UploadId>u</UploadId>\
                    <PartNumberMarker>\(marker)</PartNumberMarker><NextPartNumberMarker>\(marker + 1000)</NextPartNumberMarker>\
                    <MaxParts>1000</MaxParts><IsTruncated>true</IsTruncated><StorageClass>STANDARD</StorageClass>\
                    <Part><PartNumber>\(marker + 1)</PartNumber><ETag>"0"</ETag><Size>1</Size></Part></ListPartsResult>
                    """)
        }) { receiver in
            let client = ObjectStorageClient(
                endpoint: try #require(URL(string: receiver.url(""))),
                credentials: Credentials(accessKeyId: "FKIATEST", secretAccessKey: "secret"))
            #expect(try await client.listParts(bucket: "b", key: "k", uploadId: "u").map(\.number) == Array(stride(from: 1, to: 10_000, by: 1000)))
            #expect(await receiver.recorder.requests.count <= 10)
        }
    }

    @Test("a redirect is the answer, not followed: a signed request and its security token go nowhere else")
    func redirectsAreNotFollowed() async throws {
        try await HTTPReceiver.with(status: 200, answer: "elsewhere") { elsewhere in
            try await HTTPReceiver.answering({ _ in .init(307, [("Location", elsewhere.url("/stolen"))]) }) { origin in
                let response = try await AsyncHTTPClientTransport().send(
                    TransportRequest(
                        method: "GET", url: origin.url("/bucket/key"), headers: [("x-amz-security-token", "secret-token")],
                        timeout: .seconds(30)),
                    bodyProgress: { _ in }, responseSink: nil)
                #expect(response.status == 307)
                #expect(await elsewhere.recorder.requests.isEmpty)
            }
        }
    }
}

@Suite("The AsyncHTTPClient transport on a link that goes silent", .timeLimit(.minutes(5)))
struct SilentLinkTests {
    @Test("an answer whose body trickles in is held to the request's time limit, not only its head")
    func tricklingAnswerTimesOut() async throws {
        try await HTTPReceiver.with(status: 200, answer: String(repeating: "x", count: 100), trickle: .milliseconds(200)) { receiver in
            let started = ContinuousClock.now
            do {
                _ = try await AsyncHTTPClientTransport().send(
                    TransportRequest(method: "GET", url: receiver.url("/slow"), headers: [], timeout: .seconds(2)),
                    bodyProgress: { _ in }, responseSink: nil)
                Issue.record("the trickling answer was read whole")
            } catch let error as TransportError {
                #expect(error.isTimeout, "\(error)")
            }
            // The whole answer takes 20 s; the request's limit is 2 s.
            #expect(ContinuousClock.now - started < .seconds(15))
        }
    }

    @Test("a request body the connection stops taking (the peer acknowledges nothing) fails as a timeout after the idle limit, not at the request's own limit")
    func stalledBodyTimesOut() async throws {
        try await TestServer.with { server in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                // The proxy holds the request without reading its body: the socket buffers fill and stay full.
                proxy.inject(.stall(seconds: 120), when: .method("PUT"))
                var transport = AsyncHTTPClientTransport()
                transport.idleWriteTimeout = .seconds(2)
                let directory = TemporaryDirectory.make("ferry-silent-link")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                let path = directory + "/body.bin"
                let length = 64 * 1024 * 1024
                try Data(count: length).write(to: URL(fileURLWithPath: path))
                let started = ContinuousClock.now
                do {
                    _ = try await transport.send(
                        TransportRequest(
                            method: "PUT", url: proxy.endpoint + "/silent/k",
                            headers: [("Content-Length", String(length))],
                            streamedBody: StreamedBody([.file(path: path, length: Int64(length))]), timeout: .seconds(600)),
                        bodyProgress: { _ in }, responseSink: nil)
                    Issue.record("the stalled request did not fail")
                } catch let error as TransportError {
                    #expect(error.isTimeout, "\(error)")
                }
                let waited = ContinuousClock.now - started
                #expect(waited < .seconds(60), "failed after \(waited)")
            }
        }
    }
}
