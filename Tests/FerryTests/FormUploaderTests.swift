import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import FerryServer

extension TestServer {
    /// A token for `policy` signed with the root key.
    func uploadToken(_ policy: PutPolicy) -> String {
        UploadToken.make(accessKey: root.accessKeyId, secretKey: root.secretAccessKey, policy: policy)
    }

    /// A form uploader for this server.
    func formUploader(
        token: String, transport: (any HTTPTransport)? = nil, chunkSize: Int = 64 * 1024, timeout: Duration = .seconds(60)
    ) -> FormUploader {
        var configuration = FormUploader.Configuration()
        if let transport { configuration.transport = transport }
        configuration.chunkSize = chunkSize
        configuration.timeoutIntervalForRequest = timeout
        return FormUploader(endpoint: URL(string: endpoint)!, token: token, configuration: configuration)
    }

    /// Files of stored objects, and bodies being written.
    func blobFiles() -> (stored: Int, temporary: Int) {
        func count(_ path: String) -> Int {
            let enumerator = FileManager.default.enumerator(atPath: path)
            var files = 0
            while let item = enumerator?.nextObject() as? String {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path + "/" + item, isDirectory: &isDirectory),
                    !isDirectory.boolValue
                {
                    files += 1
                }
            }
            return files
        }
        return (count(dataDirectory + "/objects/blobs"), count(dataDirectory + "/objects/tmp"))
    }

    /// The stored bytes of an object.
    func storedBytes(_ bucket: String, _ key: String) async throws -> [UInt8] {
        let object = try await server.store.object(bucket: bucket, key: key)
        var bytes: [UInt8] = []
        for try await buffer in try await server.store.readObject(object, range: nil) { bytes += Array(buffer.readableBytesView) }
        return bytes
    }
}

@Suite("Form uploader", .timeLimit(.minutes(10)))
struct FormUploaderTests {
    static let bucket = "photos"
    static let future = Date().addingTimeInterval(3600)

    static func makeFile(size: Int, in directory: String, name: String = "cat.png") throws -> URL {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let url = URL(fileURLWithPath: directory + "/" + name)
        try Data(bytes).write(to: url)
        return url
    }

    /// Runs `body` with a server that has the bucket, and a random file of `size` bytes.
    static func withServer(
        size: Int = 300_000, configure: @escaping @Sendable (inout FerryServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, URL) async throws -> Void
    ) async throws {
        let directory = TemporaryDirectory.make("ferry-form")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try makeFile(size: size, in: directory)
        // The callback receivers of these tests listen on loopback, which callbacks may reach only when allowed.
        try await TestServer.with(configure: { configuration in
            configuration.callbackAllow = ["127.0.0.1"]
            configure(&configuration)
        }) { server in
            try await server.server.store.createBucket(bucket)
            try await body(server, file)
        }
    }

    /// The error an upload failed with, checked against its failed event.
    static func failure(_ upload: FormUpload) async throws -> FerryError {
        var failedEvent: FerryError?
        for await event in upload.events {
            if case .failed(let error) = event { failedEvent = error }
            if case .succeeded = event { Issue.record("the upload succeeded") }
            // 100 % comes only with the server's answer that the file is stored.
            if case .progress(let fraction) = event { #expect(fraction < 1, "a failing upload reported 100 %") }
        }
        do {
            _ = try await upload.result
            Issue.record("the upload succeeded")
            throw CancellationError()
        } catch let error as FerryError {
            #expect(failedEvent?.serverCode == error.serverCode)
            #expect(failedEvent?.httpStatus == error.httpStatus)
            return error
        }
    }

    static func expectNothingStored(_ server: TestServer, key: String, blobsBefore: Int) async {
        await #expect(throws: FerryDomainError.self) { try await server.server.store.object(bucket: bucket, key: key) }
        #expect(server.blobFiles().stored == blobsBefore)
        #expect(server.blobFiles().temporary == 0)
    }

    // MARK: The seed's flow

    @Test(
        "seed flow: token, upload with mimeType/customMeta/crc32 → progress to 1, succeeded with hash = stored ETag",
        arguments: ["AsyncHTTPClient", "URLSession"])
    func seedFlow(transportName: String) async throws {
        try await Self.withServer(size: 3 * 1024 * 1024 + 123) { server, file in
            let transport: any HTTPTransport =
                transportName == "URLSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
            let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            let uploader = server.formUploader(token: token, transport: transport)
            let bytes = [UInt8](try Data(contentsOf: file))
            var extra = FormUploader.ExtraParameters()
            extra.mimeType = "image/png"
            extra.customMeta = ["Note": "holiday snap"]
            extra.crc32 = try await FormUploader.crc32(of: file)
            let expectedCRC = Checksum.digest(.crc32, of: bytes).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(extra.crc32 == expectedCRC)

            let upload = uploader.upload(file: file, key: "2024/cat.png", extraParams: extra)
            var fractions: [Double] = []
            var succeeded: FormUploadResult?
            for await event in upload.events {
                switch event {
                case .progress(let fraction): fractions.append(fraction)
                case .succeeded(let result): succeeded = result
                case .failed(let error): Issue.record("failed: \(error)")
                }
            }
            let result = try await upload.result
            #expect(succeeded == result)
            #expect(fractions.count >= 2)
            #expect(fractions == fractions.sorted())
            #expect(fractions.last == 1)
            #expect(fractions.filter { $0 == 1 }.count == 1, "100 % is reported once: \(fractions.suffix(3))")
            #expect(fractions.allSatisfy { $0 >= 0 && $0 <= 1 })

            let object = try await server.server.store.object(bucket: Self.bucket, key: "2024/cat.png")
            #expect(result.key == "2024/cat.png")
            #expect(result.hash == object.etag)
            #expect(result.hash == Hex.encode(Checksum.digest(.md5, of: bytes)))
            #expect(result.callbackBody == nil)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(result.responseBody)) as? [String: String])
            #expect(json == ["key": "2024/cat.png", "hash": object.etag])
            #expect(object.size == Int64(bytes.count))
            #expect(object.attributes.contentType == "image/png")
            #expect(object.attributes.userMetadata == ["note": "holiday snap"])
            #expect(object.checksums["CRC32"] == Checksum.base64(Checksum.digest(.crc32, of: bytes)))
            #expect(try await server.storedBytes(Self.bucket, "2024/cat.png") == bytes)
            #expect(server.blobFiles().temporary == 0)
        }
    }

    @Test("an upload that cannot have been stored is sent again: its connection reset before the whole file was sent, or a 503 with Retry-After; one whose answer was lost after the file was sent, or a 500, is not; RetryPolicy.none sends once")
    func retriesWhatCannotBeStored() async throws {
        try await Self.withServer(size: 1_000_000) { server, file in
            try await FaultProxy.with(upstream: server.endpoint) { proxy in
                let bytes = [UInt8](try Data(contentsOf: file))
                let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
                func uploader(retries: RetryPolicy = RetryPolicy(maxRetryCount: 3, baseDelay: .milliseconds(10))) -> FormUploader {
                    var configuration = FormUploader.Configuration()
                    configuration.retryPolicy = retries
                    configuration.timeoutIntervalForRequest = .seconds(60)
                    return FormUploader(endpoint: URL(string: proxy.endpoint)!, token: token, configuration: configuration)
                }
                func posts() -> Int { proxy.log.filter { $0.method == "POST" }.count }

                // Reset a third of the way through the file, then throttled: sent a third time, stored once.
                proxy.inject(.dropAfterRequestBytes(300_000), when: .method("POST"))
                proxy.inject(.throttled(retryAfter: 1), when: .method("POST"))
                let upload = uploader().upload(file: file, key: "again.bin")
                var fractions: [Double] = []
                for await event in upload.events { if case .progress(let fraction) = event { fractions.append(fraction) } }
                let result = try await upload.result
                #expect(posts() == 3)
                #expect(result.hash == Hex.encode(Checksum.digest(.md5, of: bytes)))
                #expect(try await server.storedBytes(Self.bucket, "again.bin") == bytes)
                #expect(fractions == fractions.sorted() && fractions.last == 1, "\(fractions)")

                // The whole file sent and its answer lost: the server stored it and may have called back; not sent again.
                proxy.inject(.dropAfterRequestBytes(.max), when: .method("POST"))
                let lost = try await Self.failure(uploader().upload(file: file, key: "lost.bin"))
                #expect(lost.code == .network, "\(lost)")
                #expect(posts() == 4)
                #expect(try await server.storedBytes(Self.bucket, "lost.bin") == bytes)

                // A 500 is not sent again; nor is anything with RetryPolicy.none.
                proxy.inject(.status(500, code: "InternalError"), when: .method("POST"))
                #expect(try await Self.failure(uploader().upload(file: file, key: "five.bin")).httpStatus == 500)
                #expect(posts() == 5)
                proxy.inject(.dropAfterRequestBytes(300_000), when: .method("POST"))
                #expect(try await Self.failure(uploader(retries: .none).upload(file: file, key: "once.bin")).code == .network)
                #expect(posts() == 6)
            }
        }
    }

    @Test("without a mimeType the object takes the type of the file's extension for videos and images, else application/octet-stream")
    func mimeTypeFromExtension() async throws {
        try await Self.withServer { server, file in
            let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            let uploader = server.formUploader(token: token, transport: AsyncHTTPClientTransport())
            for (name, type) in [("snap.PNG", "image/png"), ("clip.mov", "video/quicktime"), ("data.bin", "application/octet-stream")] {
                let named = file.deletingLastPathComponent().appendingPathComponent(name)
                try FileManager.default.copyItem(at: file, to: named)
                _ = try await uploader.upload(file: named, key: name, extraParams: FormUploader.ExtraParameters()).result
                let object = try await server.server.store.object(bucket: Self.bucket, key: name)
                #expect(object.attributes.contentType == type, "\(name)")
            }
        }
    }

    @Test("a wrong CRC32 → 406 CRC32Mismatch, failed event, nothing stored")
    func crcMismatch() async throws {
        try await Self.withServer { server, file in
            let before = server.blobFiles().stored
            var extra = FormUploader.ExtraParameters()
            extra.crc32 = try await FormUploader.crc32(of: file) &+ 1
            let upload = server.formUploader(
                token: server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            )
            .upload(file: file, key: "cat.png", extraParams: extra)
            let error = try await Self.failure(upload)
            #expect(error.code == .server)
            #expect(error.httpStatus == 406)
            #expect(error.formUploadCode == .crc32Mismatch)
            #expect(error.requestId?.isEmpty == false)
            await Self.expectNothingStored(server, key: "cat.png", blobsBefore: before)
        }
    }

    // MARK: Callbacks

    @Test("callback answers: signed form POST with magic variables and params; its body comes back to the client")
    func callbackAnswers() async throws {
        try await HTTPReceiver.with(answer: #"{"ok":true,"avatar":"https://cdn/42.png"}"#) { receiver in
            try await Self.withServer { server, file in
                var policy = PutPolicy(scope: Self.bucket + ":avatars/42.png", deadline: Self.future)
                policy.callbackUrl = receiver.url("/uploaded?app=photos")
                policy.callbackBody =
                    "key=$(key)&hash=$(etag)&size=$(fsize)&mime=$(mimeType)&uid=$(x:uid)&name=$(fname)"
                var extra = FormUploader.ExtraParameters()
                extra.mimeType = "image/png"
                extra.callbackParams = ["uid": "42", "device": "iPhone 15 & co"]
                let upload = server.formUploader(token: server.uploadToken(policy)).upload(
                    file: file, key: nil, extraParams: extra)
                let result = try await upload.result
                let object = try await server.server.store.object(bucket: Self.bucket, key: "avatars/42.png")
                #expect(result.key == "avatars/42.png")
                #expect(result.hash == object.etag)
                #expect(result.callbackBody == #"{"ok":true,"avatar":"https://cdn/42.png"}"#)

                let requests = await receiver.recorder.requests
                #expect(requests.count == 1)
                let callback = try #require(requests.first)
                #expect(callback.method == "POST")
                #expect(callback.path == "/uploaded")
                #expect(callback.query == "app=photos")
                #expect(callback.headers["content-type"] == "application/x-www-form-urlencoded")
                let body = String(decoding: callback.body, as: UTF8.self)
                #expect(
                    body == "key=avatars%2F42.png&hash=\(object.etag)&size=300000&mime=image%2Fpng&uid=42&name=cat.png"
                        + "&x%3Adevice=iPhone%2015%20%26%20co")
                let authorization = try #require(callback.headers["authorization"])
                #expect(authorization.hasPrefix("QBox \(server.root.accessKeyId):"))
                #expect(
                    FormCallbackSignature.verify(
                        authorization: authorization, secretKey: server.root.secretAccessKey, path: "/uploaded",
                        query: "app=photos", body: callback.body))

                // A URL mixing escapes and characters a URL cannot hold reaches the app server as it was named, only
                // those characters escaped (a raw `ü` made the client escape the whole URL: `%2F` came as `%252F`).
                policy.scope = Self.bucket + ":avatars/43.png"
                policy.callbackUrl = receiver.url("/ok/%2F/\u{FC}?y=%2F z")
                _ = try await server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: nil).result
                let mixed = try #require(await receiver.recorder.requests.last)
                #expect(mixed.path == "/ok/%2F/%C3%BC" && mixed.query == "y=%2F%20z", "\(mixed.path) \(mixed.query ?? "")")
                #expect(
                    FormCallbackSignature.verify(
                        authorization: mixed.headers["authorization"] ?? "", secretKey: server.root.secretAccessKey,
                        path: "/ok/%2F/%C3%BC", query: "y=%2F%20z", body: mixed.body))
            }
        }
    }

    @Test("callbackUrl fallbacks: URLs separated by ; are tried in order until one answers 2xx; when none does, 579")
    func callbackFallbacks() async throws {
        let closed = try await HTTPReceiver.closedPort()
        try await HTTPReceiver.with(answer: #"{"ok":"second"}"#) { working in
            try await HTTPReceiver.with(status: 500, answer: "boom") { failing in
                try await Self.withServer { server, file in
                    var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
                    policy.callbackUrl = "http://127.0.0.1:\(closed)/cb;\(failing.url("/cb")); \(working.url("/cb"))"
                    let result = try await server.formUploader(token: server.uploadToken(policy)).upload(
                        file: file, key: "fallback.png"
                    ).result
                    #expect(result.callbackBody == #"{"ok":"second"}"#)
                    #expect(await failing.recorder.requests.count == 1)
                    #expect(await working.recorder.requests.count == 1)
                    policy.callbackUrl = "http://127.0.0.1:\(closed)/cb;\(failing.url("/cb"))"
                    let error = try await Self.failure(
                        server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: "none.png"))
                    #expect(error.httpStatus == 579 && error.formUploadCode == .callbackFailed)
                    #expect(await failing.recorder.requests.count == 2)
                }
            }
        }
    }

    @Test("a token whose fsizeLimit is negative or whose callbackUrl cannot be called (another scheme, no host, a port past 65535) → 400 InvalidArgument before the file is read: nothing stored, nothing called, the server up")
    func unusablePolicy() async throws {
        try await HTTPReceiver.with { receiver in
            try await Self.withServer { server, file in
                let before = server.blobFiles().stored
                var negative = PutPolicy(scope: Self.bucket, deadline: Self.future)
                negative.fsizeLimit = -1
                negative.callbackUrl = receiver.url("/cb")
                var ftp = PutPolicy(scope: Self.bucket, deadline: Self.future)
                ftp.callbackUrl = "ftp://127.0.0.1:\(receiver.port)/cb"
                var blank = PutPolicy(scope: Self.bucket, deadline: Self.future)
                blank.callbackUrl = " ; "
                // A port no connection can have (it stopped the server when the callback was made).
                var port = PutPolicy(scope: Self.bucket, deadline: Self.future)
                port.callbackUrl = "http://127.0.0.1:99999/cb"
                // A listening receiver first: the unusable fallback after it refuses the token before anything runs.
                var fallbackPort = PutPolicy(scope: Self.bucket, deadline: Self.future)
                fallbackPort.callbackUrl = receiver.url("/cb") + ";http://localhost:70000/cb"
                for policy in [negative, ftp, blank, port, fallbackPort] {
                    let error = try await Self.failure(
                        server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: "unusable.png"))
                    #expect(error.httpStatus == 400 && error.formUploadCode == .invalidArgument, "\(error)")
                    await Self.expectNothingStored(server, key: "unusable.png", blobsBefore: before)
                }
                #expect(await receiver.recorder.requests.isEmpty)
            }
        }
    }

    @Test("callback receiver down, answering 500, too slow or trickling its answer → 579 CallbackFailed, and the file stays stored")
    func callbackFails() async throws {
        let closed = try await HTTPReceiver.closedPort()
        try await HTTPReceiver.with(delay: .seconds(6)) { slow in
            try await HTTPReceiver.with(answer: #"{"ok":true,"pad":"0123456789"}"#, trickle: .milliseconds(200)) { trickling in
                try await HTTPReceiver.with(status: 500, answer: "boom") { failing in
                    try await Self.withServer(configure: { $0.formCallbackTimeout = .milliseconds(500) }) { server, file in
                        let bytes = [UInt8](try Data(contentsOf: file))
                        let urls = ["http://127.0.0.1:\(closed)/cb", failing.url("/cb"), slow.url("/cb"), trickling.url("/cb")]
                        for (index, url) in urls.enumerated() {
                            var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
                            policy.callbackUrl = url
                            let key = "kept-\(index).png"
                            let error = try await Self.failure(
                                server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: key))
                            // The slow receiver's answer (6 s after the request) is not waited for, nor the end of the
                            // trickling one's (its 30 bytes take 6 s): the client has its 579 while the receiver it
                            // called has not finished. (Each is checked as soon as its own upload has ended: the slow
                            // one may well have answered by the end of the checks below.)
                            if index == 2 { #expect(await slow.recorder.answered == 0) }
                            if index == 3 { #expect(await trickling.recorder.answered == 0) }
                            #expect(error.httpStatus == 579)
                            #expect(error.formUploadCode == .callbackFailed)
                            #expect(!error.message.contains("127.0.0.1"))
                            let object = try await server.server.store.object(bucket: Self.bucket, key: key)
                            #expect(object.etag == Hex.encode(Checksum.digest(.md5, of: bytes)))
                            #expect(try await server.storedBytes(Self.bucket, key) == bytes)
                        }
                        #expect(await failing.recorder.requests.count == 1)
                        #expect(await slow.recorder.requests.count == 1)
                        #expect(await trickling.recorder.requests.count == 1)
                    }
                }
            }
        }
    }

    @Test("callbacks to loopback, private, link-local or unresolvable targets are refused unless allowed: 579, nothing sent")
    func callbackTargetsRefused() async throws {
        try await HTTPReceiver.with(answer: "internal secret") { receiver in
            try await Self.withServer(configure: { $0.callbackAllow = [] }) { server, file in
                let targets = [
                    receiver.url("/internal"), "http://localhost:\(receiver.port)/internal", "http://[::1]:\(receiver.port)/x",
                    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/admin", "http://0.0.0.0:\(receiver.port)/x",
                    "http://[::ffff:127.0.0.1]:\(receiver.port)/x", "http://no-such-host.invalid/cb",
                ]
                for (index, url) in targets.enumerated() {
                    var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
                    policy.callbackUrl = url
                    let error = try await Self.failure(
                        server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: "ssrf-\(index)"))
                    #expect(error.httpStatus == 579, "\(url)")
                    #expect(!error.message.contains("secret") && !error.message.contains("127.0.0.1"), "\(url)")
                }
                #expect(await receiver.recorder.requests.isEmpty, "a refused target was called")
            }
            // Allowed explicitly, by network, the same receiver is called.
            try await Self.withServer(configure: { $0.callbackAllow = ["127.0.0.0/8"] }) { server, file in
                var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
                policy.callbackUrl = receiver.url("/allowed")
                let result = try await server.formUploader(token: server.uploadToken(policy)).upload(file: file, key: "ok").result
                #expect(result.callbackBody == "internal secret")
            }
        }
        // A malformed network stops the server from opening, with the check's own error (not a failure to create a
        // data directory, whatever user runs the tests).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-cidr-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = FerryServerConfiguration(dataDirectory: directory)
        configuration.callbackAllow = ["10.0.0.0/99"]
        let error = #expect(throws: CallbackTargetsError.self) { _ = try FerryServer(configuration: configuration) }
        #expect(error?.description.contains("10.0.0.0/99") == true)
        configuration.callbackAllow = ["10.0.0.0/8"]
        _ = try FerryServer(configuration: configuration)
        // IPv6 addresses that carry an IPv4 one (IPv4-compatible, NAT64, 6to4, Teredo) are refused whatever they
        // carry: a relay or tunnel may deliver them to it. A public address is taken as it is.
        let targets = try CallbackTargets(allow: [])
        for refused in ["[::127.0.0.1]", "[::8.8.8.8]", "[2002:7f00:1::]", "[2002:808:808::1]", "[64:ff9b:1::a00:1]",
            "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[::1]", "[::ffff:10.0.0.1]", "[::ffff:0:7f00:1]"]
        {
            #expect(await targets.address(for: refused) == nil, "\(refused)")
        }
        #expect(await targets.address(for: "8.8.8.8") == "8.8.8.8")
        #expect(await targets.address(for: "[2606:4700:4700::1111]") == "2606:4700:4700::1111")
    }

    @Test("custom metadata: names must be header tokens, values single-line, at most 2 KiB → 400 InvalidArgument")
    func metadataValidation() async throws {
        try await Self.withServer(size: 100) { server, file in
            let uploader = server.formUploader(
                token: server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future)))
            for meta in [
                ["bad name": "v"], ["ok": "line\r\nX-Injected: 1"], ["big": String(repeating: "v", count: 3000)],
            ] {
                var extra = FormUploader.ExtraParameters()
                extra.customMeta = meta
                let error = try await Self.failure(uploader.upload(file: file, key: "meta", extraParams: extra))
                #expect(error.httpStatus == 400)
                #expect(error.formUploadCode == .invalidArgument)
            }
            await #expect(throws: FerryDomainError.self) {
                try await server.server.store.object(bucket: Self.bucket, key: "meta")
            }
        }
    }

    @Test("keys the object API would refuse (dot segments, control characters, too long) are refused here too")
    func keyValidation() async throws {
        try await Self.withServer(size: 100) { server, file in
            let uploader = server.formUploader(token: server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future)))
            for key in ["a/../b", "a/./b", "..", "a\u{01}b", "a\u{85}b", String(repeating: "k", count: 1025)] {
                let error = try await Self.failure(uploader.upload(file: file, key: key))
                #expect(error.httpStatus == 400, "\(key.debugDescription)")
                // Said of the key (a form field), not of a URI.
                #expect(!error.message.contains("URI"), "\(key.debugDescription): \(error.message)")
                if key.contains("\u{01}") { #expect(error.message.contains("control character"), "\(error.message)") }
            }
            // Nothing was stored under any of them.
            let files = server.blobFiles()
            #expect(files.stored == 0 && files.temporary == 0)
            #expect(try await server.client().send("GET", "/\(Self.bucket)", query: [("list-type", "2")]).text.contains("<Key>") == false)
        }
    }

    // MARK: Tokens and policies

    @Test("bad tokens → 401: wrong signature, malformed, unknown or disabled access key, expired deadline")
    func badTokens() async throws {
        try await Self.withServer(size: 2000) { server, file in
            let before = server.blobFiles().stored
            let policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
            // A stored access key works while active.
            let stored = StoredAccessKey(
                accessKeyId: "FKIAFORMSTORED01", secretAccessKey: "stored-secret", policy: .fullAccess, status: .active,
                description: "form", createdAt: Date())
            try await server.server.catalog.insertAccessKey(stored)
            let storedToken = UploadToken.make(
                accessKey: stored.accessKeyId, secretKey: "stored-secret", policy: policy)
            #expect(
                try await server.formUploader(token: storedToken).upload(file: file, key: "by-stored-key").result.key
                    == "by-stored-key")
            _ = try await server.server.catalog.setAccessKeyStatus(stored.accessKeyId, .disabled)

            let cases: [(String, String)] = [
                (
                    UploadToken.make(accessKey: server.root.accessKeyId, secretKey: "wrong-secret", policy: policy),
                    "BadToken"
                ),
                ("not-a-token", "BadToken"),
                (UploadToken.make(accessKey: "FKIANOBODY000000", secretKey: "x", policy: policy), "UnknownAccessKey"),
                (storedToken, "UnknownAccessKey"),
                (
                    server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Date().addingTimeInterval(-5))),
                    "ExpiredToken"
                ),
            ]
            for (index, (token, code)) in cases.enumerated() {
                let error = try await Self.failure(
                    server.formUploader(token: token).upload(file: file, key: "bad-\(index)"))
                #expect(error.httpStatus == 401, "\(code)")
                #expect(error.serverCode == code)
                #expect(!error.message.contains(token))
                await Self.expectNothingStored(server, key: "bad-\(index)", blobsBefore: before + 1)
            }
        }
    }

    @Test("a form's token is verified as soon as its field is read: a bad one is answered before the rest of the body comes; x: variables are held up to 16 KiB before the token and 1 MiB after it")
    func tokenFirst() async throws {
        try await Self.withServer(size: 10) { server, _ in
            func field(_ name: String, _ value: String) -> String {
                "--B\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n"
            }
            // A bad token, then a field that goes on: the answer comes without the rest of the body (a form held
            // every field before the token was looked at, up to 200 of 64 KiB, with no credential).
            let socket = try RawSocket.connect(port: server.port)
            defer { close(socket) }
            let head = RawSocket.requestHead(
                "POST", FormUploadFields.path,
                [("Host", "127.0.0.1"), ("Content-Type", "multipart/form-data; boundary=B"), ("Content-Length", "10000000")])
            try RawSocket.write(socket, Array((head + field("token", "not-a-token") + "--B\r\nContent-Disposition: form-data; name=\"x:a\"\r\n\r\nmore").utf8))
            let (received, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { RawSocket.isCompleteResponse($0) }
            let answer = String(decoding: received, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 401") && answer.contains("BadToken"), "\(answer.prefix(300))")

            let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            let transport = AsyncHTTPClientTransport()
            func post(_ fields: String) async throws -> (status: Int, text: String) {
                let body = fields + "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxyz\r\n--B--\r\n"
                let response = try await transport.send(
                    TransportRequest(
                        method: "POST", url: server.endpoint + FormUploadFields.path,
                        headers: [("Content-Type", "multipart/form-data; boundary=B")], body: Array(body.utf8),
                        timeout: .seconds(30)),
                    bodyProgress: { _ in }, responseSink: nil)
                return (response.status, String(decoding: response.body, as: UTF8.self))
            }
            let tenKiB = String(repeating: "v", count: 10 * 1024)
            let sixtyKiB = String(repeating: "v", count: 60 * 1024)
            // Before the token, 16 KiB of variables at most; after it, 1 MiB.
            let early = try await post(field("x:a", tenKiB) + field("x:b", tenKiB) + field("token", token) + field("key", "early"))
            #expect(early.status == 400 && early.text.contains("before its token field"), "\(early)")
            let late = try await post(field("token", token) + field("key", "late") + field("x:a", tenKiB) + field("x:b", tenKiB))
            #expect(late.status == 200, "\(late)")
            let many = (0..<18).map { field("x:v\($0)", sixtyKiB) }.joined()
            let tooMany = try await post(field("token", token) + field("key", "many") + many)
            #expect(tooMany.status == 400 && tooMany.text.contains("larger than 1 MiB"), "\(tooMany.status)")
            let twice = try await post(field("token", token) + field("token", token) + field("key", "twice"))
            #expect(twice.status == 400 && twice.text.contains("two token fields"), "\(twice)")
            #expect(try await server.client().get(Self.bucket, "late").status == 200)
            for key in ["early", "many", "twice"] { #expect(try await server.client().get(Self.bucket, key).status == 404, "\(key)") }
        }
    }

    @Test("scope bucket:key: that key (given or implied) is stored; another key → 403 KeyNotAllowed")
    func scopedKey() async throws {
        try await Self.withServer(size: 5000) { server, file in
            let token = server.uploadToken(PutPolicy(scope: Self.bucket + ":only/this.png", deadline: Self.future))
            let before = server.blobFiles().stored
            let error = try await Self.failure(server.formUploader(token: token).upload(file: file, key: "other.png"))
            #expect(error.httpStatus == 403)
            #expect(error.formUploadCode == .keyNotAllowed)
            await Self.expectNothingStored(server, key: "other.png", blobsBefore: before)
            await #expect(throws: FerryDomainError.self) {
                try await server.server.store.object(bucket: Self.bucket, key: "only/this.png")
            }
            #expect(
                try await server.formUploader(token: token).upload(file: file, key: "only/this.png").result.key
                    == "only/this.png")
            #expect(
                try await server.formUploader(token: token).upload(file: file, key: nil).result.key == "only/this.png")
            // The scope's key is compared by bytes: the canonically equivalent spelling is another key.
            let accented = server.uploadToken(PutPolicy(scope: Self.bucket + ":\u{E9}.png", deadline: Self.future))
            let equivalent = try await Self.failure(server.formUploader(token: accented).upload(file: file, key: "e\u{301}.png"))
            #expect(equivalent.httpStatus == 403 && equivalent.formUploadCode == .keyNotAllowed)
            // A bucket scope needs a key.
            let bucketToken = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            let missing = try await Self.failure(server.formUploader(token: bucketToken).upload(file: file, key: nil))
            #expect(missing.httpStatus == 400)
            #expect(missing.formUploadCode == .missingField)
        }
    }

    @Test("insertOnly: a new key is stored; an existing key → 614 FileExists and the old object stays")
    func insertOnly() async throws {
        try await Self.withServer(size: 4000) { server, file in
            let directory = file.deletingLastPathComponent().path
            let other = try Self.makeFile(size: 777, in: directory, name: "other.bin")
            var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
            policy.insertOnly = true
            let uploader = server.formUploader(token: server.uploadToken(policy))
            let first = try await uploader.upload(file: file, key: "once.png").result
            let before = server.blobFiles().stored
            let error = try await Self.failure(uploader.upload(file: other, key: "once.png"))
            #expect(error.httpStatus == 614)
            #expect(error.formUploadCode == .fileExists)
            let object = try await server.server.store.object(bucket: Self.bucket, key: "once.png")
            #expect(object.etag == first.hash)
            #expect(object.size == 4000)
            #expect(server.blobFiles().stored == before)
            #expect(server.blobFiles().temporary == 0)
        }
    }

    @Test("limits: fsizeLimit exceeded → 413, MIME outside mimeLimit → 403, missing bucket → 631; nothing stored")
    func limits() async throws {
        try await Self.withServer(size: 200_000) { server, file in
            let before = server.blobFiles().stored
            var sized = PutPolicy(scope: Self.bucket, deadline: Self.future)
            sized.fsizeLimit = 199_999
            let tooLarge = try await Self.failure(
                server.formUploader(token: server.uploadToken(sized)).upload(file: file, key: "big"))
            #expect(tooLarge.httpStatus == 413)
            #expect(tooLarge.formUploadCode == .fileTooLarge)
            await Self.expectNothingStored(server, key: "big", blobsBefore: before)
            sized.fsizeLimit = 200_000
            #expect(
                try await server.formUploader(token: server.uploadToken(sized)).upload(file: file, key: "fits").result
                    .key == "fits")

            var typed = PutPolicy(scope: Self.bucket, deadline: Self.future)
            typed.mimeLimit = "image/*;video/mp4"
            var movie = FormUploader.ExtraParameters()
            movie.mimeType = "video/quicktime"
            let wrongType = try await Self.failure(
                server.formUploader(token: server.uploadToken(typed)).upload(
                    file: file, key: "movie.mov", extraParams: movie))
            #expect(wrongType.httpStatus == 403)
            #expect(wrongType.formUploadCode == .mimeTypeNotAllowed)
            await Self.expectNothingStored(server, key: "movie.mov", blobsBefore: before + 1)
            movie.mimeType = "video/mp4"
            let mp4 = file.deletingLastPathComponent().appendingPathComponent("movie.mp4")
            try Data([0, 0, 0, 0x18] + Array("ftypisom".utf8) + [UInt8](repeating: 1, count: 1000)).write(to: mp4)
            #expect(
                try await server.formUploader(token: server.uploadToken(typed)).upload(
                    file: mp4, key: "movie.mp4", extraParams: movie
                ).result.key == "movie.mp4")

            let noBucket = try await Self.failure(
                server.formUploader(token: server.uploadToken(PutPolicy(scope: "nope", deadline: Self.future))).upload(
                    file: file, key: "x"))
            #expect(noBucket.httpStatus == 631)
            #expect(noBucket.formUploadCode == .noSuchBucket)
        }
    }

    @Test(
        "mimeLimit holds for what the content shows: a page declared as a PNG or random bytes are refused, nothing stored; an undeclared JPEG is an image and stored as one; a declared type of the same kind stands",
        arguments: [
            ("page", "image/png", Array("  <HTML><body>hi</body></HTML>".utf8), "image/*", "text/html"),
            ("noise", "image/png", [0x00, 0x13, 0x37, 0xFE] + [UInt8](repeating: 0, count: 60), "image/*", "application/octet-stream"),
            ("jpeg", nil, [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 60), "image/*", nil),
            ("octets", "application/octet-stream", [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 60), "image/*", nil),
            ("mov", "video/quicktime", [0, 0, 0, 0x18] + Array("ftypmp42".utf8) + [UInt8](repeating: 0, count: 60), "video/quicktime", nil),
            ("script", "text/plain", Array("<script>fetch('/')</script>".utf8), "text/*;!text/html", "text/html"),
            ("comma", "image/gif;,text/html", Array("GIF89a<script>alert(1)</script>".utf8), "image/*", "image/gif;,text/html"),
            ("jpeg-as-text", "text/plain", [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0, count: 60), "text/plain", "image/jpeg"),
        ] as [(String, String?, [UInt8], String, String?)])
    func mimeLimitContent(name: String, declared: String?, bytes: [UInt8], limit: String, refused: String?) async throws {
        try await Self.withServer(size: 1) { server, file in
            let before = server.blobFiles().stored
            let upload = file.deletingLastPathComponent().appendingPathComponent(name)
            try Data(bytes).write(to: upload)
            var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
            policy.mimeLimit = limit
            var extra = FormUploader.ExtraParameters()
            extra.mimeType = declared
            let uploader = server.formUploader(token: server.uploadToken(policy))
            if let refused {
                let failure = try await Self.failure(uploader.upload(file: upload, key: name, extraParams: extra))
                #expect(failure.httpStatus == 403)
                #expect(failure.formUploadCode == .mimeTypeNotAllowed)
                #expect(failure.message.contains(refused), "\(failure.message)")
                await Self.expectNothingStored(server, key: name, blobsBefore: before)
            } else {
                #expect(try await uploader.upload(file: upload, key: name, extraParams: extra).result.key == name)
                let object = try await server.server.store.object(bucket: Self.bucket, key: name)
                let expected = declared == "video/quicktime" ? "video/quicktime" : "image/jpeg"
                #expect(object.attributes.contentType == expected)
                #expect(try await server.storedBytes(Self.bucket, name) == bytes)
            }
        }
    }

    // MARK: The wire

    @Test("a part after the file → 400 FileNotLast, nothing stored; non-multipart → 400 MalformedForm")
    func fileMustBeLast() async throws {
        try await Self.withServer(size: 10) { server, _ in
            let before = server.blobFiles().stored
            let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            let body =
                "--B\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n\(token)\r\n"
                + "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
                + String(repeating: "x", count: 100_000) + "\r\n"
                + "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nlate.txt\r\n--B--\r\n"
            let transport = AsyncHTTPClientTransport()
            let url = server.endpoint + FormUploadFields.path
            let response = try await transport.send(
                TransportRequest(
                    method: "POST", url: url, headers: [("Content-Type", "multipart/form-data; boundary=B")],
                    body: Array(body.utf8), timeout: .seconds(30)),
                bodyProgress: { _ in }, responseSink: nil)
            #expect(response.status == 400)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
            #expect(json["code"] == "MissingField")  // the key came after the file: the scope names none
            // With the key first, the late part is an extra field after the file.
            let withKey = body.replacingOccurrences(
                of: "--B\r\nContent-Disposition: form-data; name=\"file\"",
                with:
                    "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nlate.txt\r\n--B\r\nContent-Disposition: form-data; name=\"file\""
            )
            let second = try await transport.send(
                TransportRequest(
                    method: "POST", url: url, headers: [("Content-Type", "multipart/form-data; boundary=B")],
                    body: Array(withKey.utf8), timeout: .seconds(30)),
                bodyProgress: { _ in }, responseSink: nil)
            #expect(second.status == 400)
            let secondJSON = try #require(
                try JSONSerialization.jsonObject(with: Data(second.body)) as? [String: String])
            #expect(secondJSON["code"] == FormUploadErrorCode.fileNotLast.rawValue)
            #expect(secondJSON["requestId"]?.isEmpty == false)
            #expect(secondJSON["error"]?.contains("last") == true)
            await Self.expectNothingStored(server, key: "late.txt", blobsBefore: before)

            let plain = try await transport.send(
                TransportRequest(
                    method: "POST", url: url, headers: [("Content-Type", "application/json")], body: Array("{}".utf8),
                    timeout: .seconds(30)),
                bodyProgress: { _ in }, responseSink: nil)
            #expect(plain.status == 400)
            #expect(String(decoding: plain.body, as: UTF8.self).contains(FormUploadErrorCode.malformedForm.rawValue))

            // A field that is not UTF-8 text (the key here) is refused, not read with replacement characters.
            let badKey =
                Array("--B\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n\(token)\r\n".utf8)
                + Array("--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n".utf8) + [0xFF, 0xFE]
                + Array("\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxyz\r\n--B--\r\n".utf8)
            let notText = try await transport.send(
                TransportRequest(
                    method: "POST", url: url, headers: [("Content-Type", "multipart/form-data; boundary=B")],
                    body: badKey, timeout: .seconds(30)),
                bodyProgress: { _ in }, responseSink: nil)
            #expect(notText.status == 400)
            #expect(String(decoding: notText.body, as: UTF8.self).contains("not UTF-8"))

            // crc32 is decimal digits: a sign is refused, as a hex or negative number is.
            for crc in ["+1234", "-1", "0x10"] {
                let signed =
                    "--B\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n\(token)\r\n"
                    + "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\ncrc.txt\r\n"
                    + "--B\r\nContent-Disposition: form-data; name=\"crc32\"\r\n\r\n\(crc)\r\n"
                    + "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nxyz\r\n--B--\r\n"
                let refused = try await transport.send(
                    TransportRequest(
                        method: "POST", url: url, headers: [("Content-Type", "multipart/form-data; boundary=B")],
                        body: Array(signed.utf8), timeout: .seconds(30)),
                    bodyProgress: { _ in }, responseSink: nil)
                #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains("crc32"), "\(crc)")
            }
            await Self.expectNothingStored(server, key: "\u{FFFD}\u{FFFD}", blobsBefore: before)
        }
    }

    @Test("the answer follows the closing boundary at once: a Content-Length that promises more than comes still gets it, and an epilogue after the boundary is read past on a kept-alive connection")
    func answerAfterClosingBoundary() async throws {
        try await Self.withServer(size: 10) { server, _ in
            let token = server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future))
            func form(_ key: String) -> String {
                "--B\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n\(token)\r\n"
                    + "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n\(key)\r\n"
                    + "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nDATA\r\n--B--\r\n"
            }
            func head(_ length: Int) -> String {
                RawSocket.requestHead(
                    "POST", FormUploadFields.path,
                    [("Host", "127.0.0.1"), ("Content-Type", "multipart/form-data; boundary=B"), ("Content-Length", String(length))])
            }
            func answers(_ bytes: [UInt8]) -> Int { String(decoding: bytes, as: UTF8.self).components(separatedBy: "HTTP/1.1 200").count - 1 }
            // 50 bytes promised that never come: the upload is whole at its closing boundary, and answered.
            let lying = try RawSocket.connect(port: server.port)
            defer { close(lying) }
            try RawSocket.write(lying, Array((head(form("short.txt").utf8.count + 50) + form("short.txt")).utf8))
            let (answer, _) = await RawSocket.receive(lying, timeout: .seconds(10)) { answers($0) == 1 && RawSocket.isCompleteResponse($0) }
            #expect(answers(answer) == 1, "\(String(decoding: answer, as: UTF8.self))")
            #expect(try await server.client().get(Self.bucket, "short.txt").body == Array("DATA".utf8))
            // An epilogue (allowed after the closing boundary) is read past; the connection takes the next request.
            let kept = try RawSocket.connect(port: server.port)
            defer { close(kept) }
            let epilogue = String(repeating: "e", count: 100_000)
            try RawSocket.write(
                kept, Array((head(form("one.txt").utf8.count + epilogue.utf8.count) + form("one.txt") + epilogue).utf8))
            try RawSocket.write(kept, Array((head(form("two.txt").utf8.count) + form("two.txt")).utf8))
            let (both, _) = await RawSocket.receive(kept, timeout: .seconds(10)) { answers($0) == 2 && RawSocket.isCompleteResponse($0) }
            #expect(answers(both) == 2, "\(String(decoding: both, as: UTF8.self))")
            #expect(try await server.client().get(Self.bucket, "two.txt").body == Array("DATA".utf8))
        }
    }

    @Test("returnBody is substituted with JSON values; unknown variables become null")
    func returnBody() async throws {
        try await Self.withServer(size: 1234) { server, file in
            var policy = PutPolicy(scope: Self.bucket, deadline: Self.future)
            policy.returnBody =
                #"{"name":$(fname),"size":$(fsize),"hash":$(etag),"uid":$(x:uid),"w":$(imageInfo.width),"key":"$(key)"}"#
            var extra = FormUploader.ExtraParameters()
            extra.callbackParams = ["uid": "a\"b"]
            let result = try await server.formUploader(token: server.uploadToken(policy)).upload(
                file: file, key: "r.png", extraParams: extra
            ).result
            let json = try #require(try JSONSerialization.jsonObject(with: Data(result.responseBody)) as? [String: Any])
            #expect(json["name"] as? String == "cat.png")
            #expect(json["size"] as? Int == 1234)
            #expect(json["hash"] as? String == result.hash)
            #expect(json["uid"] as? String == "a\"b")
            #expect(json["w"] is NSNull)
            // Quoted in the template, as Qiniu's own examples write it: escaped inside the quotes.
            #expect(json["key"] as? String == "r.png")
        }
    }

    @Test(
        "streamed bodies arrive intact through both transports, the file read in 256 KiB chunks",
        arguments: ["AsyncHTTPClient", "URLSession"])
    func streamedBody(transportName: String) async throws {
        let directory = TemporaryDirectory.make("ferry-stream")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try Self.makeFile(size: 1_300_000, in: directory, name: "data.bin")
        let bytes = [UInt8](try Data(contentsOf: file))
        let transport: any HTTPTransport =
            transportName == "URLSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
        try await HTTPReceiver.with { receiver in
            let body = StreamedBody(
                [
                    .bytes(Array("head|".utf8)), .file(path: file.path, offset: 1000, length: 1_000_000), .bytes([]),
                    .bytes(Array("|tail".utf8)),
                ])
            #expect(body.chunkSize == 256 * 1024)
            #expect(body.length == 1_000_010)
            let counter = ByteCounter()
            let response = try await transport.send(
                TransportRequest(
                    method: "POST", url: receiver.url("/stream"),
                    headers: [("Content-Type", "application/octet-stream")],
                    streamedBody: body, timeout: .seconds(60)),
                bodyProgress: { counter.add($0) }, responseSink: nil)
            #expect(response.status == 200)
            let received = try #require(await receiver.recorder.requests.first)
            #expect(received.headers["content-length"] == "1000010")
            #expect(received.body == Array("head|".utf8) + Array(bytes[1000..<1_001_000]) + Array("|tail".utf8))
            #expect(counter.total <= 1_000_010)
            #expect(counter.total >= 1_000_010 - 256 * 1024)
            // Chunks are bounded by the chunk size.
            var largest = 0
            for try await chunk in body.chunks { largest = max(largest, chunk.count) }
            #expect(largest == 256 * 1024)
        }
        // A file that is shorter than promised fails the request instead of sending garbage.
        try await HTTPReceiver.with { receiver in
            let short = StreamedBody([.file(path: file.path, offset: 1_299_000, length: 5000)])
            await #expect(throws: (any Error).self) {
                _ = try await transport.send(
                    TransportRequest(
                        method: "POST", url: receiver.url(), headers: [], streamedBody: short, timeout: .seconds(30)),
                    bodyProgress: { _ in }, responseSink: nil)
            }
        }
    }

    @Test("cancel() ends the upload with cancelled and stores nothing")
    func cancel() async throws {
        try await Self.withServer(size: 8 * 1024 * 1024) { server, file in
            let before = server.blobFiles().stored
            let upload = server.formUploader(
                token: server.uploadToken(PutPolicy(scope: Self.bucket, deadline: Self.future)), chunkSize: 16 * 1024
            )
            .upload(file: file, key: "cancelled.bin")
            upload.cancel()
            var failed: FerryError?
            for await event in upload.events { if case .failed(let error) = event { failed = error } }
            #expect(failed?.code == .cancelled)
            // A failure on the device has no server code to view.
            #expect(failed != nil && failed?.formUploadCode == nil)
            await #expect(throws: FerryError.self) { _ = try await upload.result }
            await #expect(throws: FerryDomainError.self) {
                try await server.server.store.object(bucket: Self.bucket, key: "cancelled.bin")
            }
            #expect(server.blobFiles().stored == before)
        }
    }
}

/// Counts bytes reported from transport threads.
final class ByteCounter: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = 0
    func add(_ bytes: Int) { lock.withLock { value += bytes } }
    var total: Int { lock.withLock { value } }
}
