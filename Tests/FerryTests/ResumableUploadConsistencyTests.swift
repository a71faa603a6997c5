import FerryCore
import FerryServer
import FerryStorage
import FerryTestSupport
import Foundation
import NIOCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Ferry
@testable import FerryStorage

/// What a resumable upload may become, whatever arrives at the same time: a partial upload never an object, a
/// stored media file only its own bytes, a final upload all of its partials or nothing.
@Suite("Resumable uploads: what an upload may become", .serialized)
struct ResumableUploadConsistencyTests {
    static let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
    static let append = tus + [("Content-Type", "application/offset+octet-stream")]

    /// Creates a tus upload at `path` (`<bucket>/<key>`) signed by `s3`; its URL.
    static func create(_ s3: S3TestClient, _ path: String, _ headers: [(name: String, value: String)]) async throws
        -> String
    {
        let created = try await s3.send(
            "POST", "/_ferry/uploads/s3/" + path, headers: tus + headers, payload: .unsigned)
        return try #require(created.header("Location"), "\(created.status) \(created.text)")
    }

    @Test("an empty tus partial upload makes no object (the key keeps what it held), and a final upload naming it makes the other partials' bytes")
    func emptyPartialUploadWaitsForItsFinalUpload() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("parts").status == 200)
            #expect(try await s3.put("parts", "precious", Array("precious bytes".utf8)).status == 200)
            let empty = try await Self.create(
                s3, "parts/precious", [("Upload-Concat", "partial"), ("Upload-Length", "0")])
            #expect(try await s3.get("parts", "precious").body == Array("precious bytes".utf8))
            let head = try await S3TestClient.fetchRaw("HEAD", empty, headers: Self.tus)
            #expect(head.status == 200 && head.header("ETag") == nil && head.header("Upload-Concat") == "partial")
            let five = try await Self.create(s3, "parts/five", [("Upload-Concat", "partial"), ("Upload-Length", "5")])
            let patched = try await S3TestClient.fetchRaw(
                "PATCH", five, headers: Self.append + [("Upload-Offset", "0")], body: Array("hello".utf8))
            #expect(patched.status == 204)
            let final = try await s3.send(
                "POST", "/_ferry/uploads/s3/parts/joined",
                headers: Self.tus + [("Upload-Concat", "final;\(empty) \(five)")], payload: .unsigned)
            #expect(final.status == 201, "\(final.text)")
            #expect(try await s3.get("parts", "joined").body == Array("hello".utf8))
            #expect(try await s3.get("parts", "precious").body == Array("precious bytes".utf8))
        }
    }

    @Test("the same final upload sent twice at once (a client that timed out and sent it again) is answered twice as the one final upload: 201, one Location, one ETag, one object")
    func finalUploadSentTwiceAtOnce() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("twice").status == 200)
            for round in 0..<4 {
                var names: [String] = []
                for index in 0..<3 {
                    let url = try await Self.create(
                        s3, "twice/part-\(round)-\(index)", [("Upload-Concat", "partial"), ("Upload-Length", "65536")])
                    let patched = try await S3TestClient.fetchRaw(
                        "PATCH", url, headers: Self.append + [("Upload-Offset", "0")],
                        body: [UInt8](repeating: UInt8(index), count: 65536))
                    #expect(patched.status == 204)
                    names.append(url)
                }
                let final = Self.tus + [("Upload-Concat", "final;" + names.joined(separator: " "))]
                async let first = s3.send("POST", "/_ferry/uploads/s3/twice/joined-\(round)", headers: final, payload: .unsigned)
                async let second = s3.send("POST", "/_ferry/uploads/s3/twice/joined-\(round)", headers: final, payload: .unsigned)
                let (a, b) = try await (first, second)
                #expect(a.status == 201 && b.status == 201, "round \(round): \(a.status) \(a.text) / \(b.status) \(b.text)")
                #expect(a.header("Location") != nil && a.header("Location") == b.header("Location"))
                #expect(a.header("ETag") != nil && a.header("ETag") == b.header("ETag"))
                let object = try await s3.get("twice", "joined-\(round)")
                #expect(object.body == (0..<3).flatMap { [UInt8](repeating: UInt8($0), count: 65536) })
                // Made once: no upload is left in progress, and each partial upload names the one final upload.
                #expect(try await server.server.store.uploadCount() == 0)
                let finalId = try #require(a.header("Location")?.split(separator: "/").last.map(String.init))
                for name in names {
                    let id = try #require(name.split(separator: "/").last.map(String.init))
                    #expect(try await server.server.store.resumableUpload(id)?.info.concatenatedInto == finalId)
                }
            }
        }
    }

    @Test("a tus creation-with-upload whose connection drops mid-body is ended: its client never got the URL, and no upload is left holding a slot")
    func droppedCreationWithUploadIsEnded() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("dropped").status == 200)
            func uploadsInProgress() async throws -> Bool {
                try await s3.send("GET", "/dropped", query: [("uploads", "")]).text.contains("<Upload>")
            }
            let path = "/_ferry/uploads/s3/dropped/clip.bin"
            let signed = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
                method: "POST", path: path, query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", "100000")],
                payloadHash: SigV4.unsignedPayload, date: Date()
            ).headers
            let head = signed + Self.append + [("Upload-Length", "100000")]
            let socket = try RawSocket.connect(port: server.port)
            try RawSocket.write(socket, Array(RawSocket.requestHead("POST", path, head).utf8) + [UInt8](repeating: 7, count: 30_000))
            // The upload exists and is taking the body; then the connection drops.
            var started = false
            for _ in 0..<100 where !started {
                started = try await uploadsInProgress()
                if !started { try await Task.sleep(for: .milliseconds(100)) }
            }
            close(socket)
            #expect(started, "the creation never began")
            var ended = false
            for _ in 0..<100 where !ended {
                ended = try await !uploadsInProgress()
                if !ended { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(ended, "the dropped creation's upload is still in progress")
            #expect(try await s3.get("dropped", "clip.bin").status == 404)
        }
    }

    /// An IETF creation (a complete upload of `length` bytes, signed with the root key) sent on a raw socket with its
    /// first `sending` bytes (a multiple of 60,000): the socket, still open, and the upload URL its 104 named (sent
    /// before the bytes are taken).
    static func beginCreation(_ server: TestServer, path: String, length: Int, sending: Int) async throws
        -> (socket: Int32, location: String)
    {
        let signed = SigV4Signer(credentials: server.root, region: "us-east-1").sign(
            method: "POST", path: path, query: [],
            headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(length))],
            payloadHash: SigV4.unsignedPayload, date: Date()
        ).headers
        let head = signed + [("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?1")]
        let socket = try RawSocket.connect(port: server.port)
        do {
            try RawSocket.write(socket, Array(RawSocket.requestHead("POST", path, head).utf8))
            for _ in 0..<(sending / 60_000) { try RawSocket.write(socket, [UInt8](repeating: 9, count: 60_000)) }
            let (interim, _) = await RawSocket.receive(socket, timeout: .seconds(10)) {
                String(decoding: $0, as: UTF8.self).contains("\r\n\r\n")
            }
            let text = String(decoding: interim, as: UTF8.self)
            let location = try #require(
                text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }?.dropFirst("location:".count)
                    .trimmingCharacters(in: .whitespaces), "\(text)")
            return (socket, location)
        } catch {
            close(socket)
            throw error
        }
    }

    @Test("an IETF upload whose completion a stopped server left between making its object and recording it says complete at the next HEAD, with the object's ETag; the client's completing append sent again is answered as the completion")
    func completionLeftAfterItsObject() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("left").status == 200)
            let bytes = Array("twelve bytes".utf8)
            let ietf = [("Upload-Draft-Interop-Version", "6")]
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/left/clip.bin",
                headers: ietf + [("Upload-Complete", "?0"), ("Upload-Length", "12")], body: bytes, payload: .unsigned)
            #expect(created.status == 201, "\(created.status) \(created.text)")
            let location = try #require(created.header("Location"))
            let id = try #require(location.split(separator: "/").last.map(String.init))
            // The completion's first step alone, as a server stopped between its two steps leaves it: the object.
            let store = server.server.store
            let upload = try #require(try await store.resumableUpload(id))
            #expect(upload.etag == nil && upload.isFullyReceived)
            let multipart = try await store.multipartUpload(upload.uploadId, bucket: "left", key: "clip.bin")
            let parts = try await store.listParts(multipart, after: 0, maxParts: 1000).parts
            let object = try await store.assemble(multipart, parts: parts, fullObjectChecksums: [:], condition: .none)
            #expect(try await s3.get("left", "clip.bin").body == bytes)

            let head = try await S3TestClient.fetchRaw("HEAD", location, headers: ietf)
            #expect(head.status == 204)
            #expect(head.header("Upload-Complete") == "?1" && head.header("Upload-Offset") == "12", "\(head.headers)")
            #expect(head.header("ETag") == "\"\(object.etag)\"")
            let again = try await S3TestClient.fetchRaw(
                "PATCH", location,
                headers: ietf + [
                    ("Upload-Complete", "?1"), ("Upload-Offset", "12"), ("Content-Type", "application/partial-upload"),
                ])
            #expect(again.status == 200 && again.header("Upload-Complete") == "?1", "\(again.status) \(again.text)")
            #expect(try await s3.get("left", "clip.bin").body == bytes)
        }
    }

    @Test("an IETF append whose connection is reset keeps what arrived, and a HEAD sent at once counts it")
    func resetAppendKeepsWhatArrived() async throws {
        // The connection's end must be the test's reset. The guard's body window counts the bytes the server reads,
        // and on a loaded machine the server can read none of the 6 MB for longer than the default 30 s while its
        // disk lags: a clean-clone run lost the connection to that before the reset.
        try await TestServer.with(configure: { $0.connectionLimits.bodyWindow = .seconds(600) }) { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("reset").status == 200)
            let sent = 6_000_000
            let (socket, location) = try await Self.beginCreation(
                server, path: "/_ferry/uploads/s3/reset/clip.bin", length: 30_000_000, sending: sent)
            // A reset, as a mobile link or a middlebox gives: the server still has bytes of it to read.
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            close(socket)
            // What the server read before the reset is kept (the kernel drops what it had not read), and the HEAD
            // waits for that record: a HEAD a second later finds the same offset.
            let reply = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Upload-Draft-Interop-Version", "6")])
            #expect(reply.status == 204, "\(reply.status)")
            let offset = Int(reply.header("Upload-Offset") ?? "") ?? 0
            #expect(offset > 0 && offset <= sent, "\(offset) of \(sent)")
            try await Task.sleep(for: .seconds(1))
            let later = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Upload-Draft-Interop-Version", "6")])
            #expect(later.header("Upload-Offset") == String(offset))
        }
    }

    @Test("a tus append whose connection drops keeps what arrived, and a HEAD sent at once counts it: the client resumes from there, as tuspy does, without a conflict")
    func droppedTusAppendIsCountedAtOnce() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("dropped").status == 200)
            let file = (0..<4_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let location = try await Self.create(s3, "dropped/clip.bin", [("Upload-Length", String(file.count))])
            let path = try #require(URL(string: location)?.path)
            for round in 0..<2 {
                // An append of the rest, of which 1,500,000 bytes arrive before the connection drops.
                let head = try await S3TestClient.fetchRaw("HEAD", location, headers: Self.tus)
                let from = try #require(Int(head.header("Upload-Offset") ?? ""))
                let socket = try RawSocket.connect(port: server.port)
                let request = RawSocket.requestHead(
                    "PATCH", path,
                    Self.append + [("Host", "127.0.0.1:\(server.port)"), ("Upload-Offset", String(from)),
                        ("Content-Length", String(file.count - from))])
                try RawSocket.write(socket, Array(request.utf8) + Array(file[from..<(from + 1_500_000)]))
                // The append is under way on the server (as when a link drops mid-upload), then the connection goes.
                try await Task.sleep(for: .milliseconds(500))
                close(socket)
                let reply = try await S3TestClient.fetchRaw("HEAD", location, headers: Self.tus)
                #expect(reply.header("Upload-Offset") == String(from + 1_500_000), "round \(round): \(reply.headers)")
            }
            let offset = 3_000_000
            let rest = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: Self.append + [("Upload-Offset", String(offset))], body: Array(file[offset...]))
            #expect(rest.status == 204, "\(rest.status) \(rest.text)")
            #expect(try await s3.get("dropped", "clip.bin").body == file)
        }
    }

    @Test("an IETF append whose link went silent (the server hears no reset) is ended by the client's next HEAD: it keeps what arrived, the HEAD counts it at once, and an append from there completes the upload")
    func silentAppendIsEndedByTheNextRequest() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("silent").status == 200)
            let total = 8_000_000
            let sent = 3_000_000
            let (socket, location) = try await Self.beginCreation(
                server, path: "/_ferry/uploads/s3/silent/clip.bin", length: total, sending: sent)
            defer { close(socket) }
            // The link goes silent: the connection stays open on the server's side and no more bytes come (its body
            // window, 30 s, is far off). The client asks for the offset on a new connection.
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            let reply = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Upload-Draft-Interop-Version", "6")])
            let waited = ContinuousClock.now - started
            #expect(reply.status == 204, "\(reply.status)")
            let offset = Int(reply.header("Upload-Offset") ?? "") ?? 0
            #expect(offset > 0 && offset <= sent, "\(offset) of \(sent)")
            #expect(waited < .seconds(3), "the HEAD waited \(waited) for the silent append")
            // The rest from there completes the upload, and the object is every byte.
            let rest = [UInt8](repeating: 9, count: total - offset)
            let completed = try await S3TestClient.fetchRaw(
                "PATCH", location,
                headers: [
                    ("Upload-Draft-Interop-Version", "6"), ("Upload-Offset", String(offset)), ("Upload-Complete", "?1"),
                    ("Content-Type", "application/partial-upload"),
                ], body: rest)
            #expect(completed.status == 200, "\(completed.status) \(completed.text)")
            #expect(try await s3.get("silent", "clip.bin").body == [UInt8](repeating: 9, count: total))
        }
    }

    @Test("an IETF HEAD sent as a completing append's last bytes arrive never finds the upload at its length yet incomplete: it waits for the append to complete it, and the upload always ends as the bytes sent")
    func headRacingACompletingAppend() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("race").status == 200)
            let ietf: [(name: String, value: String)] = [("Upload-Draft-Interop-Version", "6")]
            for round in 0..<12 {
                let length = 256 * 1024 + round * 4096
                let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ round) }
                let created = try await s3.send(
                    "POST", "/_ferry/uploads/s3/race/clip\(round).bin",
                    headers: ietf + [("Upload-Complete", "?0"), ("Upload-Length", String(length))], payload: .unsigned)
                let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                let path = try #require(URL(string: location)).path()
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                let head = ietf + [
                    ("Host", "127.0.0.1:\(server.port)"), ("Upload-Offset", "0"), ("Upload-Complete", "?1"),
                    ("Content-Type", "application/partial-upload"), ("Content-Length", String(length)),
                ]
                try RawSocket.write(socket, Array(RawSocket.requestHead("PATCH", path, head).utf8) + bytes)
                try await Task.sleep(for: .milliseconds(round % 4 * 5))
                let reply = try await S3TestClient.fetchRaw("HEAD", location, headers: ietf)
                #expect(reply.status == 204, "\(reply.status)")
                let offset = Int(reply.header("Upload-Offset") ?? "") ?? -1
                let complete = reply.header("Upload-Complete") == "?1"
                // Every byte recorded means the append that declared itself complete has completed the upload.
                #expect(complete == (offset == length), "round \(round): offset \(offset) of \(length), complete \(complete)")
                // The append is answered, or its connection closed (a HEAD that came before its body was whole, or
                // before it began); the client then resumes from the offset it asks for.
                let (answer, _) = await RawSocket.receive(socket, timeout: .seconds(10)) { RawSocket.isCompleteResponse($0) }
                if !String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 200") {
                    let now = try await S3TestClient.fetchRaw("HEAD", location, headers: ietf)
                    let offset = try #require(Int(now.header("Upload-Offset") ?? ""), "\(now.status)")
                    #expect((now.header("Upload-Complete") == "?1") == (offset == length))
                    if offset < length {
                        let rest = try await S3TestClient.fetchRaw(
                            "PATCH", location,
                            headers: ietf + [
                                ("Upload-Offset", String(offset)), ("Upload-Complete", "?1"),
                                ("Content-Type", "application/partial-upload"),
                            ], body: Array(bytes[offset...]))
                        #expect(rest.status == 200, "round \(round): \(rest.status) \(rest.text)")
                    }
                }
                #expect(try await s3.get("race", "clip\(round).bin").body == bytes, "round \(round)")
            }
        }
    }

    @Test("a media upload's tus title is checked as the media API checks a Title: one with NUL or past 128 bytes refuses the creation (400 naming title) and is not stored; 128 bytes is stored")
    func mediaUploadTitleIsCheckedAsTheMediaAPIChecksIt() async throws {
        try await TestServer.with { server in
            let media = ResumableUploadTests.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "kept", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL).absoluteString
            func create(title: String) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetchRaw(
                    "POST", url,
                    headers: Self.tus + [
                        ("Upload-Length", "5"), ("Upload-Metadata", "title " + Data(title.utf8).base64EncodedString()),
                    ])
            }
            for title in ["a\u{0}b", String(repeating: "\u{20AC}", count: 43)] {
                let refused = try await create(title: title)
                #expect(refused.status == 400 && refused.text.contains("title"), "\(refused.status) \(refused.text)")
                #expect(refused.header("Location") == nil)
                #expect(try await media.getVideoInfo(videoId: ticket.id).title == "kept")
            }
            let longest = String(repeating: "\u{1F600}", count: 32)
            #expect(try await create(title: longest).status == 201)
            #expect(try await media.getVideoInfo(videoId: ticket.id).title == longest)
        }
    }

    @Test("tus uploads of a video's file completing at once: of different bytes exactly one is accepted and becomes the file, the others get 403; of the same bytes every one is accepted with the file's ETag")
    func concurrentCompletionsOfAMediaFileMakeOneFile() async throws {
        try await TestServer.with { server in
            let media = ResumableUploadTests.media(server)
            /// Completes, all at once, an upload of each of `letters` (200,000 of it, in two appends) through one
            /// video's upload URL; each letter's answer (status, ETag), and the video's file.
            func race(_ letters: [UInt8]) async throws -> (answers: [(UInt8, Int, String?)], file: [UInt8]) {
                let ticket = try await media.createUploadVideo(.init(title: "race", fileName: "clip.mp4"))
                let url = try #require(ticket.resumableUploadURL).absoluteString
                var locations: [(String, UInt8)] = []
                for letter in letters {
                    let half = [UInt8](repeating: letter, count: 100_000)
                    let created = try await S3TestClient.fetchRaw(
                        "POST", url, headers: Self.tus + [("Upload-Length", "200000")])
                    let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                    let first = try await S3TestClient.fetchRaw(
                        "PATCH", location, headers: Self.append + [("Upload-Offset", "0")], body: half)
                    #expect(first.status == 204)
                    locations.append((location, letter))
                }
                let answers = try await withThrowingTaskGroup(of: (UInt8, Int, String?).self) { group in
                    for (location, letter) in locations {
                        group.addTask {
                            let reply = try await S3TestClient.fetchRaw(
                                "PATCH", location, headers: Self.append + [("Upload-Offset", "100000")],
                                body: [UInt8](repeating: letter, count: 100_000))
                            return (letter, reply.status, reply.header("ETag"))
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                return (answers, try await server.client().get(ticket.address.bucket, ticket.address.fileName).body)
            }
            for round in 0..<3 {
                let (answers, file) = try await race(Array("ABC".utf8))
                let accepted = answers.filter { $0.1 == 204 }
                #expect(accepted.count == 1 && answers.filter { $0.1 == 403 }.count == 2, "round \(round): \(answers)")
                let isAccepted = file.count == 200_000 && file.allSatisfy { $0 == accepted.first?.0 }
                #expect(isAccepted, "round \(round)")
            }
            let (same, file) = try await race(Array("SS".utf8))
            #expect(same.allSatisfy { $0.1 == 204 } && Set(same.map(\.2)).count == 1, "\(same)")
            #expect(file.count == 200_000 && file.allSatisfy { $0 == UInt8(ascii: "S") })
        }
    }

    @Test("a tus final upload through a video's upload URL does not replace a file another upload made meanwhile (403); a final upload of the file's own bytes again is accepted")
    func finalUploadOfAMediaFileMakesNoSecondFile() async throws {
        try await TestServer.with { server in
            let media = ResumableUploadTests.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "joined", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL).absoluteString
            func partial(_ text: String) async throws -> String {
                let created = try await S3TestClient.fetchRaw(
                    "POST", url, headers: Self.tus + [("Upload-Concat", "partial"), ("Upload-Length", "\(text.utf8.count)")])
                let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                let patched = try await S3TestClient.fetchRaw(
                    "PATCH", location, headers: Self.append + [("Upload-Offset", "0")], body: Array(text.utf8))
                #expect(patched.status == 204)
                return location
            }
            let hello = try await partial("hello")
            // Another upload's file arrives after the final upload's look at the video and before its write: stored
            // here without the library hearing of it, so the video is still Uploading.
            _ = try await server.server.store.putObject(
                bucket: ticket.address.bucket, key: ticket.address.fileName, attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> { continuation in
                    continuation.yield(ByteBuffer(string: "other"))
                    continuation.finish()
                },
                checksums: [], condition: .none, verify: { _ in })
            let refused = try await S3TestClient.fetchRaw(
                "POST", url, headers: Self.tus + [("Upload-Concat", "final;\(hello)")])
            #expect(refused.status == 403, "\(refused.status) \(refused.text)")
            #expect(try await server.client().get(ticket.address.bucket, ticket.address.fileName).body == Array("other".utf8))

            // A video whose file a final upload made: the same final upload again is accepted with the file's ETag.
            let second = try await media.createUploadVideo(.init(title: "again", fileName: "clip.mp4"))
            let secondURL = try #require(second.resumableUploadURL).absoluteString
            let created = try await S3TestClient.fetchRaw(
                "POST", secondURL, headers: Self.tus + [("Upload-Concat", "partial"), ("Upload-Length", "5")])
            let location = try #require(created.header("Location"))
            _ = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: Self.append + [("Upload-Offset", "0")], body: Array("hello".utf8))
            let first = try await S3TestClient.fetchRaw("POST", secondURL, headers: Self.tus + [("Upload-Concat", "final;\(location)")])
            let again = try await S3TestClient.fetchRaw("POST", secondURL, headers: Self.tus + [("Upload-Concat", "final;\(location)")])
            #expect(first.status == 201 && again.status == 201, "\(first.text) \(again.text)")
            #expect(first.header("ETag") != nil && first.header("ETag") == again.header("ETag"))
            #expect(first.header("Location") != nil && first.header("Location") == again.header("Location"))
            // Any other final upload naming that partial upload is refused: it made its object.
            let fresh = try await S3TestClient.fetchRaw(
                "POST", secondURL, headers: Self.tus + [("Upload-Concat", "partial"), ("Upload-Length", "5")])
            let freshLocation = try #require(fresh.header("Location"))
            _ = try await S3TestClient.fetchRaw(
                "PATCH", freshLocation, headers: Self.append + [("Upload-Offset", "0")], body: Array("hello".utf8))
            for names in ["\(freshLocation) \(location)", "\(location) \(location)"] {
                let other = try await S3TestClient.fetchRaw("POST", secondURL, headers: Self.tus + [("Upload-Concat", "final;\(names)")])
                #expect(other.status == 400 && other.header("Location") == nil, "\(other.status) \(other.text)")
            }
            // Its URL still answers HEAD, complete.
            let head = try await S3TestClient.fetchRaw("HEAD", location, headers: Self.tus)
            #expect(head.status == 200 && head.header("Upload-Offset") == "5", "\(head.status)")
        }
    }
}
