import AsyncHTTPClient
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

#if canImport(Glibc)
import Glibc
#endif

/// The resumable upload resource at `/_ferry/uploads/`, driven by clients no one here wrote or that send exactly what
/// the protocols' texts send: tuspy (tus 1.0) and a scripted raw-socket IETF client (interop versions 3, 5 and 6),
/// directly and through HAProxy with `deploy/haproxy.cfg`.
@Suite("Resumable uploads: tus and the IETF draft", .serialized)
struct ResumableUploadTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path + "/Scripts/resumable_client.py"

    /// Runs the client script and returns the JSON object on its last line.
    static func client(_ arguments: [String]) async throws -> [String: Any] {
        let (status, output, errors) = try await runBlocking { () throws -> (Int32, String, String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script] + arguments
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            let errorData = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self), String(decoding: errorData, as: UTF8.self))
        }
        guard status == 0, let last = output.split(separator: "\n").last,
            let object = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        else {
            Issue.record("resumable_client.py \(arguments.first ?? "") failed (\(status)): \(errors.suffix(3000))")
            throw ClientFailed()
        }
        return object
    }

    struct ClientFailed: Error {}

    /// `--later` arguments naming the creation URLs of `count` more videos (each takes one upload of its source).
    static func laterURLs(_ server: TestServer, count: Int, media: MediaServiceClient? = nil) async throws -> [String] {
        var arguments: [String] = []
        for index in 0..<count {
            let ticket = try await (media ?? Self.media(server)).createUploadVideo(.init(title: "later \(index)", fileName: "clip.mp4"))
            arguments += ["--later", try #require(ticket.resumableUploadURL).absoluteString]
        }
        return arguments
    }

    static func media(_ server: TestServer, endpoint: String? = nil) -> MediaServiceClient {
        MediaServiceClient(
            endpoint: URL(string: endpoint ?? server.endpoint)!,
            credentials: Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey))
    }

    static func sha256(_ bytes: [UInt8]) -> String { SigV4.hexSHA256(bytes) }

    /// A file of random bytes, and its bytes.
    static func file(_ directory: String, size: Int) throws -> (path: String, bytes: [UInt8]) {
        let url = try makeRandomFile(size: size, in: directory)
        return (url.path, [UInt8](try Data(contentsOf: url)))
    }

    @Test("tuspy uploads a video through its media upload URL in chunks: the object is byte-identical, the video is uploaded, and its tus title names it")
    func tuspyMediaUpload() async throws {
        try await TestServer.with { server in
            let directory = TemporaryDirectory.make("ferry-tus")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let media = Self.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "placeholder", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            #expect(url.path.hasPrefix("/_ferry/uploads/grant/"))
            let source = try Self.file(directory, size: 3_000_000)
            let result = try await Self.client([
                "tus-upload", "--endpoint", url.absoluteString, "--file", source.path, "--chunk", "1000000",
                "--checksum", "--metadata", #"{"title": "Sent with tuspy", "filename": "clip.mp4", "filetype": "video/mp4"}"#,
            ])
            #expect(result["offset"] as? Int == 3_000_000)
            let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
            #expect(stored.status == 200)
            #expect(Self.sha256(stored.body) == Self.sha256(source.bytes))
            #expect(stored.headers.first(name: "Content-Type") == "video/mp4")
            // Three appends of one part each: the multipart ETag, and a full-object CRC64NVME.
            #expect(stored.headers.first(name: "ETag")?.hasSuffix("-3\"") == true)
            let info = try await media.getVideoInfo(videoId: ticket.id)
            #expect(info.status == "UploadSucc")
            #expect(info.title == "Sent with tuspy")
        }
    }

    @Test("a video uploaded with tuspy to its media upload URL goes through the same pipeline as an S3 upload: probed, transcoded, Normal with HLS renditions")
    func tuspyVideoReachesNormal() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (scripts/test installs Debian's ffmpeg)")
        try await TestServer.with(configure: { $0.mediaProcessing.workers = 1 }) { server in
            let directory = TemporaryDirectory.make("ferry-tus-media")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let clip = try await MediaFixtures.make(.noAudio, seconds: 2, in: directory)
            let media = Self.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "tus video", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            _ = try await Self.client([
                "tus-upload", "--endpoint", url.absoluteString, "--file", clip, "--chunk", "100000",
                "--metadata", #"{"filetype": "video/mp4"}"#,
            ])
            let deadline = ContinuousClock.now + .seconds(180)
            var status = ""
            while ContinuousClock.now < deadline {
                status = try await media.getVideoInfo(videoId: ticket.id).status
                if status == "Normal" || status == "TranscodeFail" { break }
                try await Task.sleep(for: .milliseconds(300))
            }
            #expect(status == "Normal")
            let play = try await media.getPlayInfo(videoId: ticket.id)
            #expect(play.stream(format: "m3u8") != nil)
            #expect((play.duration ?? 0) > 1.5)
        }
    }

    @Test("tus: discovery, creation-with-upload, 460 on a wrong checksum with nothing kept, md5 and crc32 checksums, 409 on a wrong offset, 412 without Tus-Resumable")
    func tusScenarios() async throws {
        try await TestServer.with { server in
            let media = Self.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "tus", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            let out = try await Self.client(["tus-scenarios", "--endpoint", url.absoluteString])
            let options = try #require(out["options"] as? [String: Any])
            #expect(options["status"] as? Int == 204)
            #expect(options["version"] as? String == "1.0.0")
            let extensions = Set(((options["extensions"] as? String) ?? "").split(separator: ",").map(String.init))
            #expect(extensions.isSuperset(of: ["creation", "creation-with-upload", "creation-defer-length", "termination", "checksum", "expiration", "concatenation"]))
            #expect(options["checksums"] as? String == "sha1,md5,crc32")
            let created = try #require(out["creationWithUpload"] as? [String: Any])
            #expect(created["status"] as? Int == 201)
            #expect(created["offset"] as? String == "100000")
            #expect((created["expires"] as? String)?.hasSuffix("GMT") == true)
            let mismatch = try #require(out["checksumMismatch"] as? [String: Any])
            #expect(mismatch["status"] as? Int == 460)
            #expect(mismatch["offsetAfter"] as? String == "100000")
            let match = try #require(out["checksumMatch"] as? [String: Any])
            #expect(match["status"] as? Int == 204)
            #expect(match["offset"] as? String == "200000")
            #expect((out["wrongOffset"] as? [String: Any])?["status"] as? Int == 409)
            let completed = try #require(out["completed"] as? [String: Any])
            #expect(completed["status"] as? Int == 204)
            #expect(completed["offset"] as? String == "300000")
            #expect(completed["etag"] is String)
            #expect(completed["headLength"] as? String == "300000")
            #expect((completed["headMetadata"] as? String)?.contains("filename ") == true)
            let noVersion = try #require(out["noVersion"] as? [String: Any])
            #expect(noVersion["status"] as? Int == 412)
            #expect(noVersion["tusVersion"] as? String == "1.0.0" && noVersion["tusResumable"] as? String == "1.0.0")
            let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
            #expect(Self.sha256(stored.body) == out["sha256"] as? String)
        }
    }

    @Test("tus with a SigV4-signed creation: unsigned and out-of-policy creations are refused; a body must be the one signed (tus and IETF); termination removes the upload; a deferred length arrives with the last append")
    func tusSignedCreation() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("tus-bucket").status == 200)
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let first = try await s3.send(
                "POST", "/_ferry/uploads/s3/tus-bucket/a/terminated.bin", headers: tus + [("Upload-Length", "5000")],
                payload: .unsigned)
            #expect(first.status == 201)
            let deferred = try await s3.send(
                "POST", "/_ferry/uploads/s3/tus-bucket/a/deferred.bin", headers: tus + [("Upload-Defer-Length", "1")],
                payload: .unsigned)
            #expect(deferred.status == 201)
            let unsigned = try await S3TestClient.fetchRaw(
                "POST", server.endpoint + "/_ferry/uploads/s3/tus-bucket/a/x.bin", headers: tus + [("Upload-Length", "1")])
            #expect(unsigned.status == 403)
            let noBucket = try await s3.send(
                "POST", "/_ferry/uploads/s3/missing-bucket/x.bin", headers: tus + [("Upload-Length", "1")], payload: .unsigned)
            #expect(noBucket.status == 404)
            let scoped = try await Self.media(server).createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:PutObject"], bucket: "tus-bucket", keyPrefix: "mine/")]),
                description: "tus test")
            let scopedClient = server.client(
                SigV4Credentials(accessKeyId: scoped.accessKeyId, secretAccessKey: scoped.secretAccessKey))
            let outside = try await scopedClient.send(
                "POST", "/_ferry/uploads/s3/tus-bucket/theirs/x.bin", headers: tus + [("Upload-Length", "1")],
                payload: .unsigned)
            #expect(outside.status == 403)
            let inside = try await scopedClient.send(
                "POST", "/_ferry/uploads/s3/tus-bucket/mine/x.bin", headers: tus + [("Upload-Length", "1")],
                payload: .unsigned)
            #expect(inside.status == 201)

            // The body is held to the SHA-256 its signature covers: signed headers replayed with other bytes are
            // refused and make nothing, the signed bytes are stored.
            let good = Array("GOOD".utf8)
            let goodHash = SigV4.hexSHA256(Data(good))
            let ietf: [(name: String, value: String)] = [("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?1")]
            for (name, headers) in [
                ("tus", tus + [("Content-Type", "application/offset+octet-stream"), ("Upload-Length", "4")]), ("ietf", ietf),
            ] {
                let path = "/_ferry/uploads/s3/tus-bucket/signed-\(name).bin"
                let replayed = try await s3.send("POST", path, headers: headers, body: Array("EVIL".utf8), payload: .hash(goodHash))
                #expect(replayed.status == 400 && replayed.text.contains("XAmzContentSHA256Mismatch"), "\(replayed.text)")
                #expect(try await s3.get("tus-bucket", "signed-\(name).bin").status == 404)
                if let location = replayed.headers.first(name: "Location") {
                    #expect(try await S3TestClient.fetchRaw("HEAD", location, headers: tus).status == 404)
                }
                let signed = try await s3.send("POST", path, headers: headers, body: good, payload: .signed)
                #expect((200..<300).contains(signed.status), "\(signed.text)")
                #expect(try await s3.get("tus-bucket", "signed-\(name).bin").body == good)
            }
            // A creation without a body signed as having one, and an aws-chunked creation: refused, nothing made.
            for (headers, hash) in [
                (tus + [("Upload-Length", "4")], goodHash),
                (ietf, "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
            ] {
                let refused = try await s3.send(
                    "POST", "/_ferry/uploads/s3/tus-bucket/refused.bin", headers: headers, body: good, payload: .hash(hash))
                #expect(refused.status == 400, "\(refused.text)")
            }
            #expect(try await s3.get("tus-bucket", "refused.bin").status == 404)

            let locations = [first, deferred].compactMap { $0.headers.first(name: "Location") }
            #expect(locations.count == 2)
            let out = try await Self.client(["tus-signed", "--url", locations.joined(separator: ",")])
            let termination = try #require(out["termination"] as? [String: Any])
            #expect(termination["status"] as? Int == 204)
            #expect(termination["headAfter"] as? Int == 404)
            let lengths = try #require(out["deferred"] as? [String: Any])
            #expect(lengths["deferHeader"] as? String == "1")
            #expect(lengths["first"] as? Int == 204)
            #expect(lengths["last"] as? Int == 204)
            #expect(lengths["etag"] is String)
            #expect(try await s3.get("tus-bucket", "a/terminated.bin").status == 404)
            let stored = try await s3.get("tus-bucket", "a/deferred.bin")
            #expect(stored.body == [UInt8](repeating: UInt8(ascii: "b"), count: 1000) + [UInt8](repeating: UInt8(ascii: "c"), count: 500))
        }
    }

    /// A tus PATCH of `length` bytes at `offset` to the upload at `url` that waits for `100 Continue` before its body
    /// (sent on a connection of its own, closed after): the answer, nil when none came whole.
    static func patchAwaitingContinue(_ server: TestServer, _ url: URL, offset: Int, length: Int) async
        -> RawHTTPExchange.Response?
    {
        let head =
            "PATCH \(url.path) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nTus-Resumable: 1.0.0\r\n"
            + "Upload-Offset: \(offset)\r\nContent-Type: application/offset+octet-stream\r\nContent-Length: \(length)\r\n"
            + "Expect: 100-continue\r\nConnection: close\r\n\r\n"
        guard case .answered(let answer) = await RawHTTPExchange.send(
            port: server.port,
            .init(head: Array(head.utf8), body: [UInt8](repeating: 1, count: length), waitsForContinue: true))
        else { return nil }
        return answer
    }

    @Test("a tus append whose Content-Length passes the upload's length is refused (413) before its body: no 100 Continue, nothing kept")
    func tusAppendPastLengthRefusedAtHeaders() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("tus-long").status == 200)
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/tus-long/short.bin", headers: tus + [("Upload-Length", "100")], payload: .unsigned)
            #expect(created.status == 201)
            let location = try #require(created.header("Location"))
            let url = try #require(URL(string: location.hasPrefix("http") ? location : server.endpoint + location))
            let answer = try #require(await Self.patchAwaitingContinue(server, url, offset: 0, length: 1000))
            #expect(answer.status == 413 && answer.interim.isEmpty, "\(answer.status) \(answer.interim) \(answer.text)")
            let offset = try await S3TestClient.fetchRaw("HEAD", url.absoluteString, headers: tus)
            #expect(offset.status == 200 && offset.header("Upload-Offset") == "0")
            // The upload goes on: the 100 bytes it was made for complete it.
            let rest = try await S3TestClient.fetchRaw(
                "PATCH", url.absoluteString,
                headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                body: [UInt8](repeating: 2, count: 100))
            #expect(rest.status == 204 && rest.header("Upload-Offset") == "100")
            #expect(try await s3.get("tus-long", "short.bin").body == [UInt8](repeating: 2, count: 100))
        }
    }

    @Test("an empty append stores nothing: 204 at the upload's offset, 409 elsewhere; one carrying the deferred length completes the upload; a creation's body typed with a parameter is its first append")
    func tusEmptyAppends() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("tus-empty").status == 200)
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/tus-empty/deferred.bin", headers: tus + [("Upload-Defer-Length", "1")],
                payload: .unsigned)
            #expect(created.status == 201)
            let location = try #require(created.header("Location"))
            let url = location.hasPrefix("http") ? location : server.endpoint + location
            func patch(
                offset: Int, _ body: [UInt8], type: String = "application/offset+octet-stream",
                extra: [(name: String, value: String)] = []
            ) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetchRaw(
                    "PATCH", url, headers: tus + [("Upload-Offset", String(offset)), ("Content-Type", type)] + extra,
                    body: body)
            }
            let empty = try await patch(offset: 0, [])
            #expect(empty.status == 204)
            #expect(empty.header("Upload-Offset") == "0")
            #expect(try await patch(offset: 5, []).status == 409)
            let bytes = [UInt8](repeating: 7, count: 10)
            // A Content-Type with a parameter, or in another case, is an append's all the same.
            let written = try await patch(offset: 0, bytes, type: "Application/Offset+Octet-Stream; charset=binary")
            #expect(written.status == 204 && written.header("Upload-Offset") == "10")
            let again = try await patch(offset: 0, [])
            #expect(again.status == 409 && again.header("Upload-Offset") == "10")
            let last = try await patch(offset: 10, [], extra: [("Upload-Length", "10")])
            #expect(last.status == 204)
            #expect(last.header("Upload-Offset") == "10")
            let stored = try await s3.get("tus-empty", "deferred.bin")
            #expect(stored.status == 200 && stored.body == bytes)

            // A creation's body whose Content-Type carries a parameter, or another case, is its first append too (it
            // was dropped without a word), as a PATCH's is.
            let withParameter = try await s3.send(
                "POST", "/_ferry/uploads/s3/tus-empty/typed.bin",
                headers: tus + [("Upload-Length", "10"), ("Content-Type", "Application/Offset+Octet-Stream; charset=binary")],
                body: bytes, payload: .unsigned)
            #expect(withParameter.status == 201 && withParameter.header("Upload-Offset") == "10", "\(withParameter.status)")
            #expect(try await s3.get("tus-empty", "typed.bin").body == bytes)
        }
    }

    @Test("tus with a Qiniu-style upload token: the scope's key or the metadata's key, insertOnly, fsizeLimit and mimeLimit hold, an expired or forged token is refused")
    func tusUploadToken() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("tokens").status == 200)
            let root = server.root
            func token(_ scope: String, _ configure: (inout PutPolicy) -> Void = { _ in }) -> String {
                var policy = PutPolicy(scope: scope, deadline: Date().addingTimeInterval(3600))
                configure(&policy)
                return UploadToken.make(accessKey: root.accessKeyId, secretKey: root.secretAccessKey, policy: policy)
            }
            let endpoint = server.endpoint + "/_ferry/uploads/"
            func create(_ token: String, _ headers: [(name: String, value: String)]) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetchRaw(
                    "POST", endpoint, headers: [("Tus-Resumable", "1.0.0"), ("Authorization", "UpToken " + token)] + headers)
            }
            let body = [UInt8](repeating: 9, count: 5000)
            func send(_ reply: S3TestClient.Reply) async throws -> Int {
                let location = try #require(reply.headers.first(name: "Location"))
                return try await S3TestClient.fetchRaw(
                    "PATCH", location,
                    headers: [("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                    body: body
                ).status
            }
            let scoped = try await create(token("tokens:scoped.bin"), [("Upload-Length", "5000")])
            #expect(scoped.status == 201)
            #expect(try await send(scoped) == 204)
            #expect(try await s3.get("tokens", "scoped.bin").body == body)
            let named = try await create(
                token("tokens"), [("Upload-Length", "5000"), ("Upload-Metadata", "key " + Data("named/file.bin".utf8).base64EncodedString())])
            #expect(named.status == 201)
            #expect(try await send(named) == 204)
            #expect(try await s3.get("tokens", "named/file.bin").body == body)

            #expect(try await create(token("tokens"), [("Upload-Length", "5")]).status == 400)
            let insertOnly = token("tokens:scoped.bin") { $0.insertOnly = true }
            #expect(try await create(insertOnly, [("Upload-Length", "5000")]).status == 409)
            let limited = token("tokens:limited.bin") { $0.fsizeLimit = 1000 }
            #expect(try await create(limited, [("Upload-Length", "5000")]).status == 413)
            #expect(try await create(limited, [("Upload-Defer-Length", "1")]).status == 400)
            // An IETF creation hears the limit of its token (Upload-Limit), in its 104 and its answer.
            let limitedIETF = try await S3TestClient.fetchRaw(
                "POST", endpoint,
                headers: [("Authorization", "UpToken " + token("tokens:limited-ietf.bin") { $0.fsizeLimit = 1000 }),
                    ("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?0"), ("Upload-Length", "100")],
                body: [UInt8](repeating: 1, count: 10))
            #expect(limitedIETF.status == 201, "\(limitedIETF.status) \(limitedIETF.text)")
            #expect(limitedIETF.header("Upload-Limit") == "min-size=0, max-size=1000")
            let images = token("tokens:image.bin") { $0.mimeLimit = "image/*" }
            #expect(try await create(images, [("Upload-Length", "10"), ("Upload-Metadata", "filetype " + Data("video/mp4".utf8).base64EncodedString())]).status == 403)
            // mimeLimit holds for the content too, checked when the upload completes: a page declared as a PNG is
            // refused and its upload ended; a PNG declared as nothing is an image.
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 7, count: 92)
            let page = Array("<!DOCTYPE html><script>alert(1)</script>".utf8) + [UInt8](repeating: 0x20, count: 60)
            for (key, declared, bytes, status) in [
                ("page.png", "image/png", page, 403), ("plain.png", nil, png, 204), ("typed.png", "image/png", png, 204),
            ] as [(String, String?, [UInt8], Int)] {
                let fields = [("key", key)] + (declared.map { [("filetype", $0)] } ?? [])
                let created = try await create(
                    token("tokens") { $0.mimeLimit = "image/*" },
                    [("Upload-Length", "100"),
                        ("Upload-Metadata", fields.map { $0.0 + " " + Data($0.1.utf8).base64EncodedString() }.joined(separator: ","))])
                let location = try #require(created.headers.first(name: "Location"), "\(created.status) \(created.text)")
                let half = try await S3TestClient.fetchRaw(
                    "PATCH", location, headers: [("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                    body: Array(bytes[..<50]))
                #expect(half.status == 204, "\(key): \(half.text)")
                let last = try await S3TestClient.fetchRaw(
                    "PATCH", location, headers: [("Tus-Resumable", "1.0.0"), ("Upload-Offset", "50"), ("Content-Type", "application/offset+octet-stream")],
                    body: Array(bytes[50...]))
                #expect(last.status == status, "\(key): \(last.text)")
                let stored = try await s3.get("tokens", key)
                if status == 403 {
                    #expect(last.text.contains("text/html"), "\(last.text)")
                    #expect(stored.status == 404)
                    let ended = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Tus-Resumable", "1.0.0")])
                    #expect(ended.status == 404 || ended.status == 410, "\(ended.status)")
                } else {
                    #expect(stored.body == bytes)
                }
            }
            // The IETF draft's upload in one request: its Content-Type is the declared type, its body the content.
            for (key, bytes, refused, flag) in [
                ("ietf-page.png", page, true, ("Upload-Complete", "?1")), ("ietf.png", png, false, ("Upload-Complete", "?1")),
                ("ietf3-page.png", page, true, ("Upload-Incomplete", "?0")),
            ] {
                let ietf = try await S3TestClient.fetchRaw(
                    "POST", endpoint,
                    headers: [("Authorization", "UpToken " + token("tokens:" + key) { $0.mimeLimit = "image/*" }),
                        ("Upload-Draft-Interop-Version", flag.0 == "Upload-Complete" ? "6" : "3"), flag,
                        ("Content-Type", "image/png")],
                    body: bytes)
                #expect(refused ? ietf.status == 403 : (200..<300).contains(ietf.status), "\(key): \(ietf.status) \(ietf.text)")
                // Every byte arrived: the refusal is of the content, and says the upload is complete.
                #expect(ietf.header(flag.0) == flag.1, "\(key)")
                #expect(try await s3.get("tokens", key).status == (refused ? 404 : 200))
            }
            let expired = UploadToken.make(
                accessKey: root.accessKeyId, secretKey: root.secretAccessKey,
                policy: PutPolicy(scope: "tokens:x.bin", deadline: Date().addingTimeInterval(-10)))
            #expect(try await create(expired, [("Upload-Length", "10")]).status == 401)
            let forged = UploadToken.make(
                accessKey: root.accessKeyId, secretKey: "not-the-secret", policy: PutPolicy(scope: "tokens:x.bin", deadline: Date().addingTimeInterval(60)))
            #expect(try await create(forged, [("Upload-Length", "10")]).status == 401)
            #expect(try await S3TestClient.fetchRaw("POST", endpoint, headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "10")]).status == 401)
        }
    }

    @Test("a key's byte quota holds for resumable uploads: a declared length past it is refused at creation, an append past it with nothing kept (before its body and without a 100 Continue when its Content-Length shows it), and the upload goes on within it")
    func quota() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("quota").status == 200)
            let key = try await Self.media(server).createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "quota")]), description: "quota test",
                quota: AccessKeyQuota(storageBytes: 10_000))
            let client = server.client(SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey))
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let tooLarge = try await client.send(
                "POST", "/_ferry/uploads/s3/quota/big.bin", headers: tus + [("Upload-Length", "20000")], payload: .unsigned)
            #expect(tooLarge.status == 403)
            #expect(tooLarge.text.contains("quota"))
            let deferred = try await client.send(
                "POST", "/_ferry/uploads/s3/quota/deferred.bin", headers: tus + [("Upload-Defer-Length", "1")], payload: .unsigned)
            #expect(deferred.status == 201)
            let location = try #require(deferred.headers.first(name: "Location"))
            let append = tus + [("Content-Type", "application/offset+octet-stream")]
            let first = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: append + [("Upload-Offset", "0")], body: [UInt8](repeating: 1, count: 6000))
            #expect(first.status == 204)
            let past = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: append + [("Upload-Offset", "6000")], body: [UInt8](repeating: 2, count: 6000))
            #expect(past.status == 403)
            // One whose Content-Length passes the quota is refused before its body: no 100 Continue.
            let url = try #require(URL(string: location.hasPrefix("http") ? location : server.endpoint + location))
            let answer = try #require(await Self.patchAwaitingContinue(server, url, offset: 6000, length: 50000))
            #expect(answer.status == 403 && answer.interim.isEmpty, "\(answer.status) \(answer.interim) \(answer.text)")
            let head = try await S3TestClient.fetchRaw("HEAD", location, headers: tus)
            #expect(head.headers.first(name: "Upload-Offset") == "6000")
            let last = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: append + [("Upload-Offset", "6000"), ("Upload-Length", "9000")],
                body: [UInt8](repeating: 3, count: 3000))
            #expect(last.status == 204)
            #expect(try await s3.get("quota", "deferred.bin").body.count == 9000)
        }
    }

    @Test("tus concatenation: three partial uploads become one object without copying; a final upload naming an unfinished partial is refused")
    func tusConcatenation() async throws {
        try await TestServer.with { server in
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "concat", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            let out = try await Self.client(["tus-concat", "--endpoint", url.absoluteString])
            #expect(out["unfinishedStatus"] as? Int == 400)
            #expect(out["status"] as? Int == 201)
            #expect((out["headConcat"] as? String)?.hasPrefix("final;") == true)
            #expect(out["headOffset"] as? String == String(out["size"] as? Int ?? -1))
            let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
            #expect(Self.sha256(stored.body) == out["sha256"] as? String)
            #expect(stored.headers.first(name: "ETag").map { "\"\($0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))\"" } == out["etag"] as? String)
        }
    }

    @Test("a tus final upload is checked as an upload of its length and type: an upload token's insertOnly, fsizeLimit and mimeLimit hold, a stored video's file is not replaced; an empty key is refused")
    func tusFinalUploadLimits() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("finals").status == 200)
            #expect(try await s3.put("finals", "existing", Array("ORIGINAL".utf8)).status == 200)
            let root = server.root
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            func token(_ configure: (inout PutPolicy) -> Void) -> String {
                var policy = PutPolicy(scope: "finals", deadline: Date().addingTimeInterval(3600))
                configure(&policy)
                return UploadToken.make(accessKey: root.accessKeyId, secretKey: root.secretAccessKey, policy: policy)
            }
            func metadata(_ pairs: [(String, String)]) -> (name: String, value: String) {
                ("Upload-Metadata", pairs.map { $0.0 + " " + Data($0.1.utf8).base64EncodedString() }.joined(separator: ","))
            }
            func create(_ endpoint: String, _ headers: [(name: String, value: String)]) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetchRaw("POST", endpoint, headers: tus + headers)
            }
            /// Partial uploads of 8 bytes each, fully received; their URLs.
            func partials(
                _ endpoint: String, _ auth: [(name: String, value: String)], count: Int,
                body: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            ) async throws -> [String] {
                var urls: [String] = []
                for index in 0..<count {
                    let created = try await create(
                        endpoint,
                        auth + [("Upload-Concat", "partial"), ("Upload-Length", "8"), metadata([("key", "tmp\(index)"), ("filetype", "image/png")])])
                    let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                    let patched = try await S3TestClient.fetchRaw(
                        "PATCH", location,
                        headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                        body: body)
                    #expect(patched.status == 204)
                    urls.append(location)
                }
                return urls
            }
            let endpoint = server.endpoint + "/_ferry/uploads/"
            let open = [("Authorization", "UpToken " + token { _ in })]
            // An IETF upload has no metadata to name a key in: the token's scope must name it.
            let ietf = try await S3TestClient.fetchRaw(
                "POST", endpoint, headers: open + [("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?1")], body: [1])
            #expect(ietf.status == 400 && ietf.text.contains("bucket:key") && !ietf.text.contains("tus"), "\(ietf.status) \(ietf.text)")
            let parts = try await partials(endpoint, open, count: 3)
            let final = [("Upload-Concat", "final;" + parts.joined(separator: " "))]
            for (configure, key, type, status) in [
                ({ (policy: inout PutPolicy) in policy.insertOnly = true }, "existing", "image/png", 409),
                ({ (policy: inout PutPolicy) in policy.fsizeLimit = 8 }, "new-a", "image/png", 413),
                ({ (policy: inout PutPolicy) in policy.mimeLimit = "image/png" }, "new-b", "text/html", 403),
            ] as [((inout PutPolicy) -> Void, String, String, Int)] {
                let refused = try await create(
                    endpoint, [("Authorization", "UpToken " + token(configure))] + final + [metadata([("key", key), ("filetype", type)])])
                #expect(refused.status == status, "\(key): \(refused.text)")
                #expect(refused.header("Location") == nil)
            }
            // The content is checked as well as the declared type: partial uploads holding a page are not a PNG.
            let pages = try await partials(endpoint, open, count: 3, body: Array("<script>".utf8))
            let page = try await create(
                endpoint,
                [("Authorization", "UpToken " + token { $0.mimeLimit = "image/png" }), ("Upload-Concat", "final;" + pages.joined(separator: " ")),
                    metadata([("key", "new-d"), ("filetype", "image/png")])])
            #expect(page.status == 403 && page.text.contains("text/html"), "\(page.status) \(page.text)")
            // Refusals name headers as the protocols spell them.
            let ietfAppend: [(name: String, value: String)] = [
                ("Upload-Draft-Interop-Version", "6"), ("Content-Type", "application/partial-upload"), ("Upload-Offset", "0"),
            ]
            for (headers, message) in [
                (tus + [("Upload-Offset", "1.0"), ("Content-Type", "application/offset+octet-stream")],
                 "Upload-Offset must be a non-negative integer."),
                (ietfAppend + [("Upload-Complete", "?2")], "Upload-Complete must be ?0 or ?1."),
            ] {
                let refused = try await S3TestClient.fetchRaw("PATCH", try #require(pages.first), headers: headers, body: [1])
                #expect(refused.status == 400 && refused.text.contains(message), "\(refused.status) \(refused.text)")
            }
            for location in pages {  // left as they were: there to be ended
                #expect(try await S3TestClient.fetchRaw("DELETE", location, headers: tus).status == 204)
            }
            #expect(try await s3.get("finals", "existing").body == Array("ORIGINAL".utf8))
            for key in ["new-a", "new-b", "new-d"] { #expect(try await s3.get("finals", key).status == 404) }
            // A partial upload named twice is refused as such.
            let twice = try await create(
                endpoint,
                [("Authorization", "UpToken " + token { _ in }), ("Upload-Concat", "final;\(parts[0]) \(parts[0])"),
                    metadata([("key", "twice"), ("filetype", "image/png")])])
            #expect(twice.status == 400 && twice.text.contains("twice"), "\(twice.status) \(twice.text)")
            // Within the limits, the final upload is made.
            let allowed = token { $0.fsizeLimit = 24; $0.mimeLimit = "image/png"; $0.insertOnly = true }
            let made = try await create(
                endpoint, [("Authorization", "UpToken " + allowed)] + final + [metadata([("key", "new-c"), ("filetype", "image/png")])])
            #expect(made.status == 201, "\(made.text)")
            #expect(try await s3.get("finals", "new-c").body.count == 24)
            // Nothing is in progress: no refused final upload left a multipart upload, and the made one took its partial
            // uploads' bytes (which no longer count beside the object).
            let inProgress = try await s3.send("GET", "/finals", query: [("uploads", "")]).text
            #expect(!inProgress.contains("<Upload>"), "\(inProgress)")
            // An empty key is not a key.
            let empty = try await create(endpoint, open + [("Upload-Length", "3"), ("Upload-Metadata", "key ")])
            #expect(empty.status == 400, "\(empty.text)")

            // A stored video's file: a final upload of other bytes through its upload URL is refused.
            let media = Self.media(server)
            let ticket = try await media.createUploadVideo(.init(title: "stored", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL).absoluteString
            let first = try await create(url, [("Upload-Length", "8")])
            let firstLocation = try #require(first.header("Location"), "\(first.status) \(first.text)")
            #expect(try await S3TestClient.fetchRaw(
                "PATCH", firstLocation, headers: tus + [("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                body: Array("original".utf8)).status == 204)
            #expect(try await media.getVideoInfo(videoId: ticket.id).status == "UploadSucc")
            let other = try await partials(url, [], count: 1)
            let replaced = try await create(url, [("Upload-Concat", "final;" + other.joined(separator: " "))])
            #expect(replaced.status == 403, "\(replaced.text)")
            #expect(try await s3.get(ticket.address.bucket, ticket.address.fileName).body == Array("original".utf8))
            // The refused final upload's multipart upload (made before the check) is gone; the partial upload stays.
            let mediaUploads = try await s3.send("GET", "/" + ticket.address.bucket, query: [("uploads", "")]).text
            #expect(mediaUploads.components(separatedBy: "<Upload>").count - 1 == 1, "\(mediaUploads)")
        }
    }

    @Test("a tus partial upload is its owner's, in its bucket, for tus: a final upload naming another key's partial or one in another bucket is refused, an IETF append to it too; a fully received partial says when it expires; the S3 API lists and aborts a resumable upload's multipart upload but neither appends to nor completes it; an offset past 5 TiB is a conflict")
    func partialUploadBoundaries() async throws {
        try await TestServer.with { server in
            let root = server.client()
            for bucket in ["bka", "bkb"] { #expect(try await root.createBucket(bucket).status == 200) }
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let append: [(name: String, value: String)] = tus + [("Content-Type", "application/offset+octet-stream")]
            let key = try await Self.media(server).createAccessKey(
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "bkb")]), description: "other app")
            let other = server.client(SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey))
            func create(_ client: S3TestClient, _ path: String, _ headers: [(name: String, value: String)]) async throws -> String {
                let created = try await client.send("POST", "/_ferry/uploads/s3/" + path, headers: tus + headers, payload: .unsigned)
                return try #require(created.header("Location"), "\(created.status) \(created.text)")
            }
            /// A fully received partial upload of `bytes` by `client` in `bucket`; its URL.
            func partial(_ client: S3TestClient, _ bucket: String, _ bytes: [UInt8]) async throws -> String {
                let location = try await create(
                    client, "\(bucket)/part-\(UUID().uuidString)", [("Upload-Concat", "partial"), ("Upload-Length", "\(bytes.count)")])
                let patched = try await S3TestClient.fetchRaw("PATCH", location, headers: append + [("Upload-Offset", "0")], body: bytes)
                #expect(patched.status == 204)
                // Received, it still expires until a final upload is made of it, and says when.
                #expect(patched.header("Upload-Expires") != nil)
                #expect(try await S3TestClient.fetchRaw("HEAD", location, headers: tus).header("Upload-Expires") != nil)
                return location
            }
            func final(_ client: S3TestClient, _ path: String, _ partials: [String]) async throws -> S3TestClient.Reply {
                try await client.send(
                    "POST", "/_ferry/uploads/s3/" + path, headers: tus + [("Upload-Concat", "final;" + partials.joined(separator: " "))],
                    payload: .unsigned)
            }
            let secret = try await partial(root, "bka", Array("TOPSECRET!!".utf8))
            let mine = try await partial(other, "bkb", Array("mine".utf8))
            let rootInB = try await partial(root, "bkb", Array("root".utf8))
            // Another key's partial upload, or the same key's in another bucket: refused, nothing made.
            #expect(try await final(other, "bkb/stolen", [mine, secret]).status == 400)
            #expect(try await other.get("bkb", "stolen").status == 404)
            #expect(try await final(root, "bka/moved", [secret, rootInB]).status == 400)
            #expect(try await root.get("bka", "moved").status == 404)
            #expect(try await final(other, "bkb/own", [mine]).status == 201)
            #expect(try await other.get("bkb", "own").body == Array("mine".utf8))

            // An IETF append to a partial upload is refused and makes nothing.
            let open = try await create(root, "bka/open-partial", [("Upload-Concat", "partial"), ("Upload-Length", "11")])
            #expect(try await S3TestClient.fetchRaw("PATCH", open, headers: append + [("Upload-Offset", "0")], body: Array("hello".utf8)).status == 204)
            let ietf = try await S3TestClient.fetchRaw(
                "PATCH", open,
                headers: [
                    ("Upload-Draft-Interop-Version", "6"), ("Upload-Offset", "5"), ("Upload-Complete", "?1"),
                    ("Content-Type", "application/partial-upload"),
                ],
                body: Array(" world".utf8))
            #expect(ietf.status == 400, "\(ietf.text)")
            #expect(try await root.get("bka", "open-partial").status == 404)
            #expect(try await S3TestClient.fetchRaw("HEAD", open, headers: tus).header("Upload-Offset") == "5")

            // The multipart upload holding a resumable upload's bytes: listed, its parts listed, but neither appended to
            // nor completed through the S3 API; the resumable upload goes on and makes exactly its bytes.
            let single = try await create(root, "bka/single", [("Upload-Length", "10")])
            #expect(try await S3TestClient.fetchRaw("PATCH", single, headers: append + [("Upload-Offset", "0")], body: Array("01234".utf8)).status == 204)
            let listing = try await root.send("GET", "/bka", query: [("uploads", "")]).text
            let opening = try #require(listing.range(of: "<Key>single</Key><UploadId>"), "\(listing)")
            let uploadId = String(listing[opening.upperBound...].prefix { $0 != "<" })
            #expect(uploadId.hasPrefix("resumable-"))
            let injected = try await root.send(
                "PUT", "/bka/single", query: [("partNumber", "7"), ("uploadId", uploadId)], body: Array(repeating: 0x41, count: 64))
            #expect(injected.status == 400 && injected.text.contains("InvalidRequest"), "\(injected.status) \(injected.text)")
            let completion = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>"
            let completed = try await root.send("POST", "/bka/single", query: [("uploadId", uploadId)], body: Array(completion.utf8))
            #expect(completed.status == 400 && completed.text.contains("InvalidRequest"), "\(completed.status) \(completed.text)")
            #expect(try await root.send("GET", "/bka/single", query: [("uploadId", uploadId)]).status == 200)
            // An offset no upload reaches is a conflict, answered with the offset to resume from.
            let far = try await S3TestClient.fetchRaw(
                "PATCH", single, headers: append + [("Upload-Offset", "5497558138881")], body: Array("56789".utf8))
            #expect(far.status == 409 && far.header("Upload-Offset") == "5", "\(far.status) \(far.text)")
            #expect(try await S3TestClient.fetchRaw("PATCH", single, headers: append + [("Upload-Offset", "5")], body: Array("56789".utf8)).status == 204)
            #expect(try await root.get("bka", "single").body == Array("0123456789".utf8))
            // Aborting through the S3 API ends a resumable upload.
            let aborted = try await create(root, "bka/aborted", [("Upload-Length", "10")])
            let abortListing = try await root.send("GET", "/bka", query: [("uploads", "")]).text
            let abortOpening = try #require(abortListing.range(of: "<Key>aborted</Key><UploadId>"), "\(abortListing)")
            let abortId = String(abortListing[abortOpening.upperBound...].prefix { $0 != "<" })
            #expect(try await root.send("DELETE", "/bka/aborted", query: [("uploadId", abortId)]).status == 204)
            #expect(try await S3TestClient.fetchRaw("HEAD", aborted, headers: tus).status == 404)
        }
    }

    @Test("an IETF creation over HTTP/1.0 gets no 104 (no 1xx goes to an HTTP/1.0 client), only its final answer; over HTTP/1.1 the 104 comes first")
    func noInterimForHTTP10() async throws {
        try await TestServer.with { server in
            for version in ["1.0", "1.1"] {
                let ticket = try await Self.media(server).createUploadVideo(.init(title: "HTTP/\(version)", fileName: "clip.mp4"))
                let url = try #require(ticket.resumableUploadURL)
                let target = url.path + (url.query.map { "?" + $0 } ?? "")
                let head =
                    "POST \(target) HTTP/\(version)\r\nHost: 127.0.0.1:\(server.port)\r\nUpload-Draft-Interop-Version: 6\r\n"
                    + "Upload-Complete: ?1\r\nContent-Type: video/mp4\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
                guard case .answered(let answer) = await RawHTTPExchange.send(
                    port: server.port, .init(head: Array(head.utf8), body: Array("hello".utf8)))
                else {
                    Issue.record("HTTP/\(version): no complete answer")
                    continue
                }
                #expect(answer.status == 200, "HTTP/\(version): \(answer.text)")
                #expect(answer.interim == (version == "1.0" ? [] : [104]), "HTTP/\(version)")
                #expect(try await server.client().get(ticket.address.bucket, ticket.address.fileName).body == Array("hello".utf8))
            }
        }
    }

    @Test("a creation at an interop version not served, for the whole file (Upload-Complete: ?1), is a plain upload: no 104, the file stored, no upload left; one that says more is to come is refused")
    func unservedVersionPlainCreation() async throws {
        try await TestServer.with { server in
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "later draft", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            let target = url.path + (url.query.map { "?" + $0 } ?? "")
            func create(version: String, complete: String) async throws -> RawHTTPExchange.Response {
                let head =
                    "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nUpload-Draft-Interop-Version: \(version)\r\n"
                    + "Upload-Complete: \(complete)\r\nContent-Type: video/mp4\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
                let outcome = await RawHTTPExchange.send(port: server.port, .init(head: Array(head.utf8), body: Array("hello".utf8)))
                guard case .answered(let answer) = outcome else { throw POSIXError(.EPROTO) }
                return answer
            }
            let more = try await create(version: "8", complete: "?0")
            #expect(more.status == 400 && more.interim == [], "\(more.status) \(more.text)")
            let plain = try await create(version: "8", complete: "?1")
            #expect(plain.status == 200 && plain.interim == [], "\(plain.status) \(plain.interim) \(plain.text)")
            #expect(plain.header("Location") == nil && plain.header("Upload-Draft-Interop-Version") == nil)
            #expect(plain.header("ETag") != nil)
            #expect(try await server.client().get(ticket.address.bucket, ticket.address.fileName).body == Array("hello".utf8))
            let uploads = try await server.client().send("GET", "/" + ticket.address.bucket, query: [("uploads", "")]).text
            #expect(!uploads.contains("<Upload>"), "\(uploads)")
        }
    }

    @Test("an IETF creation refused for want of disk space (507) keeps the upload its 104 named: its offset is 0 and it can be resumed or cancelled")
    func ietfCreationThroughFullDisk() async throws {
        try await TestServer.with(configure: { $0.minFreeBytes = Int64.max / 2 }) { server in
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "full disk", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            let directory = TemporaryDirectory.make("ferry-ietf")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = try Self.file(directory, size: 64 << 10)
            let out = try await Self.client(["ietf-upload", "--endpoint", url.absoluteString, "--file", file.path, "--version", "6"])
            #expect(out["interim"] as? [Int] == [104])
            #expect(out["status"] as? Int == 507)
            // The 507 names the upload as the 104 did, for a client that sees no 1xx.
            #expect(out["finalNamesIt"] as? Bool == true, "\(out)")
            #expect(out["headAfter"] as? Int == 204 && out["headOffset"] as? String == "0", "\(out)")
            #expect(out["cancel"] as? Int == 204)
        }
    }

    @Test("one upload driven by both protocols: a tus append that reaches the length of an IETF-created upload makes the object; an IETF client's empty completing append to an upload completed meanwhile is answered as its completion")
    func mixedProtocols() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("mixed").status == 200)
            let tusAppend: [(name: String, value: String)] = [
                ("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"),
            ]
            let ietf: [(name: String, value: String)] = [("Upload-Draft-Interop-Version", "6")]
            let ietfCreated = try await s3.send(
                "POST", "/_ferry/uploads/s3/mixed/a", headers: ietf + [("Upload-Complete", "?0"), ("Upload-Length", "10")],
                payload: .unsigned)
            let a = try #require(ietfCreated.header("Location"), "\(ietfCreated.status) \(ietfCreated.text)")
            let filled = try await S3TestClient.fetchRaw(
                "PATCH", a, headers: tusAppend + [("Upload-Offset", "0")], body: Array("0123456789".utf8))
            #expect(filled.status == 204 && filled.header("ETag") != nil, "\(filled.status) \(filled.headers)")
            #expect(try await s3.get("mixed", "a").body == Array("0123456789".utf8))

            let tusCreated = try await s3.send(
                "POST", "/_ferry/uploads/s3/mixed/b", headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "10")],
                payload: .unsigned)
            let b = try #require(tusCreated.header("Location"))
            let partial = ietf + [("Content-Type", "application/partial-upload")]
            let appended = try await S3TestClient.fetchRaw(
                "PATCH", b, headers: partial + [("Upload-Offset", "0"), ("Upload-Complete", "?0")], body: Array("abcdefghij".utf8))
            #expect(appended.status == 204)
            // The draft's media type is taken in any case and with parameters, as tus's is.
            let completing = try await S3TestClient.fetchRaw(
                "PATCH", b,
                headers: ietf + [("Content-Type", "Application/Partial-Upload; charset=binary"), ("Upload-Offset", "10"),
                    ("Upload-Complete", "?1")])
            #expect(completing.status == 200 && completing.header("Upload-Complete") == "?1", "\(completing.status) \(completing.text)")
            #expect(try await s3.get("mixed", "b").body == Array("abcdefghij".utf8))
            // Anything else to a completed upload is still refused.
            let more = try await S3TestClient.fetchRaw(
                "PATCH", b, headers: partial + [("Upload-Offset", "10"), ("Upload-Complete", "?1")], body: [1])
            #expect(more.status == 400)
        }
    }

    @Test("the IETF draft at interop versions 3, 5 and 6: 104 with the upload's URL, offset retrieval, 409 with the right offset, completion, cancellation", arguments: [3, 5, 6])
    func ietfVersions(_ version: Int) async throws {
        try await TestServer.with { server in
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "ietf", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            // A video takes one upload of its source: the cancelled second upload is another video's.
            let later = try await Self.laterURLs(server, count: 1)
            let out = try await Self.client(["ietf-scenarios", "--endpoint", url.absoluteString, "--version", String(version)] + later)
            try Self.checkIETF(out, version: version)
            let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
            #expect(Self.sha256(stored.body) == out["sha256"] as? String)
            #expect(try await Self.media(server).getVideoInfo(videoId: ticket.id).status == "UploadSucc")
        }
    }

    /// What the scripted IETF client saw, against the draft's examples.
    static func checkIETF(_ out: [String: Any], version: Int) throws {
        let size = out["size"] as? Int ?? 0
        let incomplete = version >= 5 ? "?0" : "?1"
        let complete = version >= 5 ? "?1" : "?0"
        let creation = try #require(out["creation"] as? [String: Any])
        #expect(creation["interim"] as? [Int] == [104])
        #expect(creation["interimVersion"] as? String == String(version))
        #expect(creation["interimLocation"] as? String == creation["location"] as? String)
        #expect((creation["location"] as? String)?.contains("/_ferry/uploads/") == true)
        #expect(creation["status"] as? Int == 201)
        #expect(creation["offset"] as? String == String(size / 2))
        #expect(creation["complete"] as? String == incomplete)
        let limit = "min-size=0, max-size=\(5 << 40)"
        #expect(creation["interimLimit"] as? String == limit && creation["limit"] as? String == limit, "\(creation)")
        let head = try #require(out["offsetRetrieval"] as? [String: Any])
        #expect(head["status"] as? Int == 204)
        #expect(head["offset"] as? String == String(size / 2))
        #expect(head["complete"] as? String == incomplete)
        #expect(head["cacheControl"] as? String == "no-store")
        let wrong = try #require(out["wrongOffset"] as? [String: Any])
        #expect(wrong["status"] as? Int == 409)
        #expect(wrong["offset"] as? String == String(size / 2))
        // Version 6 (draft 04 on) answers the draft's problem type; earlier versions a reason in plain text.
        if version >= 6 {
            let problem = try #require(wrong["problem"] as? [String: Any], "\(wrong)")
            #expect(problem["type"] as? String == "https://iana.org/assignments/http-problem-types#mismatching-upload-offset")
            #expect(problem["expected-offset"] as? Int == size / 2 && problem["provided-offset"] as? Int == 1, "\(problem)")
        } else {
            #expect((wrong["contentType"] as? String)?.hasPrefix("text/plain") == true, "\(wrong)")
        }
        let append = try #require(out["append"] as? [String: Any])
        #expect(append["status"] as? Int == 200)
        #expect(append["offset"] as? String == String(size))
        #expect(append["complete"] as? String == complete)
        #expect(append["etag"] is String)
        #expect((append["body"] as? String)?.contains("\"Size\":\"\(size)\"") == true)
        let after = try #require(out["afterCompletion"] as? [String: Any])
        #expect(after["status"] as? Int == 204)
        #expect(after["complete"] as? String == complete)
        let cancellation = try #require(out["cancellation"] as? [String: Any])
        #expect(cancellation["status"] as? Int == 204)
        #expect(cancellation["headAfter"] as? Int == 404)
        #expect((out["unknownVersion"] as? [String: Any])?["status"] as? Int == 400)
    }

    @Test("protocol edges: a 412 names the served version and OPTIONS ignores Tus-Resumable; refused creations leave no upload; a refused PATCH keeps the deferred length unset; racing appends and completions answer 204 or 409, never 404; an insertOnly upload whose object appeared ends with 409")
    func tusProtocolEdges() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("edges").status == 200)
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let append = tus + [("Content-Type", "application/offset+octet-stream")]
            func create(_ key: String, _ headers: [(name: String, value: String)], body: [UInt8] = [])
                async throws -> S3TestClient.Reply
            {
                try await s3.send("POST", "/_ferry/uploads/s3/edges/" + key, headers: tus + headers, body: body, payload: .unsigned)
            }
            func patch(_ location: String, offset: Int, _ body: [UInt8], _ extra: [(name: String, value: String)] = [])
                async throws -> S3TestClient.Reply
            {
                try await S3TestClient.fetchRaw(
                    "PATCH", location, headers: append + [("Upload-Offset", String(offset))] + extra, body: body)
            }
            func head(_ location: String) async throws -> S3TestClient.Reply {
                try await S3TestClient.fetchRaw("HEAD", location, headers: tus)
            }
            func uploadsInProgress() async throws -> String {
                try await s3.send("GET", "/edges", query: [("uploads", "")]).text
            }

            // An unserved version: 412 with the versions served; discovery answers whatever the client sends.
            let created = try await create("versions.bin", [("Upload-Length", "10")])
            let location = try #require(created.header("Location"))
            let old = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Tus-Resumable", "0.2.2")])
            #expect(old.status == 412 && old.header("Tus-Version") == "1.0.0")
            let discovery = try await S3TestClient.fetchRaw(
                "OPTIONS", server.endpoint + "/_ferry/uploads/", headers: [("Tus-Resumable", "0.2.2")])
            #expect(discovery.status == 204 && discovery.header("Tus-Version") == "1.0.0")
            #expect(try await S3TestClient.fetchRaw("DELETE", location, headers: tus).status == 204)

            // A tus client's requests with the draft's headers that URLSession adds to upload tasks (at each served
            // interop version, and at one not served) are tus: none is refused or taken as the upload's last append.
            let ietfAdded: [[(name: String, value: String)]] = [
                [("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?1")],
                [("Upload-Draft-Interop-Version", "5"), ("Upload-Complete", "?1")],
                [("Upload-Draft-Interop-Version", "3"), ("Upload-Incomplete", "?0")],
                [("Upload-Draft-Interop-Version", "8"), ("Upload-Complete", "?1")],
            ]
            let both = try await create("both.bin", [("Upload-Length", "20")] + ietfAdded[0])
            #expect(both.status == 201 && both.header("Tus-Resumable") == "1.0.0", "\(both.status): \(both.text)")
            #expect(both.header("Upload-Draft-Interop-Version") == nil)
            let bothLocation = try #require(both.header("Location"))
            for (index, added) in ietfAdded.enumerated() {
                let reply = try await patch(bothLocation, offset: index * 5, [UInt8](repeating: UInt8(index), count: 5), added)
                #expect(reply.status == 204, "\(added): \(reply.status) \(reply.text)")
                #expect(reply.header("Upload-Offset") == String(index * 5 + 5) && reply.header("Tus-Resumable") == "1.0.0")
                #expect(reply.header("Upload-Complete") == nil && reply.header("Upload-Incomplete") == nil)
            }
            #expect(try await s3.get("edges", "both.bin").body == (0..<4).flatMap { [UInt8](repeating: $0, count: 5) })

            // creation-with-upload refused: no URL is given, and no upload is left in progress.
            let body = [UInt8](repeating: 5, count: 100)
            for (headers, status) in [
                ([("Upload-Length", "50")], 413),
                ([("Upload-Length", "100"), ("Upload-Checksum", "sha1 " + Data(repeating: 0, count: 20).base64EncodedString())], 460),
                ([("Upload-Length", "100"), ("Upload-Checksum", "sha1 short")], 400),
            ] {
                let reply = try await create(
                    "refused.bin", headers + [("Content-Type", "application/offset+octet-stream")], body: body)
                #expect(reply.status == status, "\(headers): \(reply.text)")
                #expect(reply.header("Location") == nil)
            }
            #expect(!(try await uploadsInProgress()).contains("<Upload>"))

            // A refused PATCH does not set a deferred length.
            let deferred = try #require(try await create("deferred.bin", [("Upload-Defer-Length", "1")]).header("Location"))
            #expect(try await patch(deferred, offset: 5, [1, 2, 3], [("Upload-Length", "3")]).status == 409)
            #expect(try await patch(deferred, offset: 0, [UInt8](repeating: 1, count: 10), [("Upload-Length", "3")]).status == 413)
            let wrongSum = ("Upload-Checksum", "sha1 " + Data(repeating: 0, count: 20).base64EncodedString())
            #expect(try await patch(deferred, offset: 0, [1, 2, 3], [("Upload-Length", "3"), wrongSum]).status == 460)
            let stillDeferred = try await head(deferred)
            #expect(stillDeferred.header("Upload-Defer-Length") == "1" && stillDeferred.header("Upload-Length") == nil)
            let whole = try await patch(deferred, offset: 0, [UInt8](repeating: 1, count: 10), [("Upload-Length", "10")])
            #expect(whole.status == 204 && whole.header("Upload-Offset") == "10")
            #expect(try await s3.get("edges", "deferred.bin").body == [UInt8](repeating: 1, count: 10))

            // Appends racing to complete an upload, with HEADs beside them: one 204, the others 409 with the final
            // offset; no request finds the upload missing.
            for round in 0..<5 {
                let size = 300_000
                let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ round) }
                let racing = try #require(try await create("race-\(round).bin", [("Upload-Length", String(size))]).header("Location"))
                let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for _ in 0..<3 { group.addTask { [try await patch(racing, offset: 0, bytes).status] } }
                    for _ in 0..<3 {
                        group.addTask {
                            var seen: [Int] = []
                            for _ in 0..<10 { seen.append(try await head(racing).status) }
                            return seen
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0 += $1 }
                }
                #expect(!statuses.contains(404), "round \(round): \(statuses)")
                #expect(statuses.filter { $0 == 204 }.count == 1, "round \(round): \(statuses)")
                #expect(Set(statuses).isSubset(of: [200, 204, 409]), "round \(round): \(statuses)")
                let after = try await head(racing)
                #expect(after.status == 200 && after.header("Upload-Offset") == String(size))
                #expect(try await s3.get("edges", "race-\(round).bin").body == bytes)
            }

            // An insertOnly upload whose object was written meanwhile cannot complete: 409, and the upload ends.
            let root = server.root
            var policy = PutPolicy(scope: "edges:insert-only.bin", deadline: Date().addingTimeInterval(3600))
            policy.insertOnly = true
            let token = UploadToken.make(accessKey: root.accessKeyId, secretKey: root.secretAccessKey, policy: policy)
            let insertOnly = try await S3TestClient.fetchRaw(
                "POST", server.endpoint + "/_ferry/uploads/",
                headers: tus + [("Authorization", "UpToken " + token), ("Upload-Length", "100")])
            let insertLocation = try #require(insertOnly.header("Location"))
            #expect(try await s3.put("edges", "insert-only.bin", [9, 9, 9]).status == 200)
            let refused = try await patch(insertLocation, offset: 0, body)
            #expect(refused.status == 409, "\(refused.text)")
            #expect(try await head(insertLocation).status == 404)
            #expect(try await S3TestClient.fetchRaw("DELETE", insertLocation, headers: tus).status == 404)
            #expect(try await s3.get("edges", "insert-only.bin").body == [9, 9, 9])
            #expect(!(try await uploadsInProgress()).contains("<Upload>"))
        }
    }

    @Test("IETF edges: an upload whose offset reached its length completes only when the client declares it; lengths indicated on appends are recorded or must agree; an append without Upload-Complete is refused; a refused creation ends the upload its 104 named, and one whose headers show its body passes its length makes none", arguments: [5, 6])
    func ietfEdges(_ version: Int) async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("ietf-edges").status == 200)
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "ietf", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL)
            let later = try await Self.laterURLs(server, count: 3)
            let out = try await Self.client(["ietf-edges", "--endpoint", url.absoluteString, "--version", String(version)] + later)
            let undeclared = try #require(out["undeclared"] as? [String: Any])
            #expect(undeclared["creation"] as? Int == 201)
            #expect(undeclared["headComplete"] as? String == "?0" && undeclared["headOffset"] as? String == "6")
            #expect(undeclared["declare"] as? Int == 200)
            #expect((undeclared["declareBody"] as? String)?.contains("\"Size\":\"6\"") == true)
            #expect(undeclared["more"] as? Int == 400, "\(undeclared)")
            #expect(undeclared["moreComplete"] as? String == (version >= 5 ? "?1" : "?0"), "\(undeclared)")
            #expect(try await s3.get(ticket.address.bucket, ticket.address.fileName).body == Array("abcdef".utf8))
            let lengths = try #require(out["lengths"] as? [String: Any])
            #expect(lengths["conflicting"] as? Int == 400)
            // A refused append that said more is to come hears that the upload is not complete (the draft's MUST).
            let incomplete = version >= 5 ? "?0" : "?1"
            #expect(lengths["conflictingComplete"] as? String == incomplete, "\(lengths)")
            let conflictingType = (lengths["conflictingProblem"] as? [String: Any])?["type"] as? String
            #expect(
                conflictingType == (version >= 6 ? "https://iana.org/assignments/http-problem-types#inconsistent-upload-length" : nil),
                "\(lengths)")
            #expect(lengths["recorded"] as? Int == 204)
            if version >= 6 { #expect(lengths["headLength"] as? String == "8") }
            #expect(lengths["unflagged"] as? Int == 400)
            #expect(lengths["offsetAfterUnflagged"] as? String == "6" && lengths["completeAfterUnflagged"] as? String == "?0")
            #expect(lengths["sixteenDigits"] as? Int == 400 && lengths["parameterized"] as? Int == 204, "\(lengths)")
            #expect(lengths["offsetAfterParameterized"] as? String == "8", "\(lengths)")
            let refused = try #require(out["refusedCreation"] as? [String: Any])
            #expect(refused["interim"] as? [Int] == [104])
            #expect(refused["status"] as? Int == 413)
            #expect(refused["headAfter"] as? Int == 404)
            #expect(refused["announcedInterim"] as? [Int] == [] && refused["announcedStatus"] as? Int == 413, "\(refused)")
            #expect(refused["announcedComplete"] as? String == incomplete, "\(refused)")
        }
    }

    @Test("the IETF draft through HAProxy with deploy/haproxy.cfg: the 104 reaches the client, and every exchange answers as it does directly")
    func ietfThroughHAProxy() async throws {
        try await TestServer.with { server in
            let proxy = try await HAProxyServer.start(nodes: [server.port])
            do {
                let media = Self.media(server, endpoint: proxy.endpoint)
                let ticket = try await media.createUploadVideo(.init(title: "proxied", fileName: "clip.mp4"))
                let url = try #require(ticket.resumableUploadURL)
                #expect(url.absoluteString.hasPrefix(proxy.endpoint))
                let later = try await Self.laterURLs(server, count: 1, media: media)
                let out = try await Self.client(["ietf-scenarios", "--endpoint", url.absoluteString, "--version", "6"] + later)
                try Self.checkIETF(out, version: 6)
                let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
                #expect(Self.sha256(stored.body) == out["sha256"] as? String)
            } catch {
                await proxy.stop()
                throw error
            }
            await proxy.stop()
        }
    }

    @Test("bad input gets a clear refusal and leaves nothing behind: malformed and overflowing integers, bad metadata, checksums and versions, a body past the length, unknown upload ids, methods the resource does not answer")
    func hostileRequests() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("hostile").status == 200)
            let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
            let append = tus + [("Content-Type", "application/offset+octet-stream")]
            func create(_ headers: [(name: String, value: String)]) async throws -> S3TestClient.Reply {
                try await s3.send("POST", "/_ferry/uploads/s3/hostile/h.bin", headers: headers, payload: .unsigned)
            }
            for (headers, status) in [
                (tus + [("Upload-Length", "-1")], 400), (tus + [("Upload-Length", "99999999999999999999999")], 400),
                (tus + [("Upload-Length", "6000000000000")], 413), (tus + [("Upload-Length", "1e3")], 400),
                (tus, 400), (tus + [("Upload-Length", "10"), ("Upload-Defer-Length", "1")], 400),
                (tus + [("Upload-Defer-Length", "2")], 400),
                (tus + [("Upload-Length", "10"), ("Upload-Metadata", "name not-base64!")], 400),
                (tus + [("Upload-Length", "10"), ("Upload-Metadata", "a YQ==,a YQ==")], 400),
                (tus + [("Upload-Length", "10"), ("Upload-Metadata", String(repeating: "k,", count: 40) + "k")], 400),
                (tus + [("Upload-Length", "10"), ("Upload-Concat", "sideways")], 400),
                (tus + [("Upload-Concat", "final;" + String(repeating: "/_ferry/uploads/x ", count: 1001))], 400),
                (tus + [("Upload-Concat", "final;/_ferry/uploads/00000000000000000000000000000000")], 400),
                ([("Tus-Resumable", "0.2.2"), ("Upload-Length", "10")], 412),
                ([("Upload-Draft-Interop-Version", "4"), ("Upload-Complete", "?1")], 400),
                ([("Upload-Draft-Interop-Version", "+99"), ("Upload-Complete", "?1")], 400),
                ([("Upload-Draft-Interop-Version", "06"), ("Upload-Complete", "?1")], 400),
                ([("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "yes")], 400),
                ([("Upload-Draft-Interop-Version", "6")], 400),
                ([("Upload-Draft-Interop-Version", "6"), ("Upload-Complete", "?1"), ("Upload-Offset", "5")], 400),
            ] {
                let reply = try await create(headers)
                #expect(reply.status == status, "\(headers): \(reply.text)")
            }
            // A final upload naming 1000 partial uploads by absolute URL (as tus clients name them) is read whole.
            let absolute = (0..<1000).map { _ in server.endpoint + "/_ferry/uploads/" + UUID().uuidString.replacingOccurrences(of: "-", with: "") }
            let named = try await create(tus + [("Upload-Concat", "final;" + absolute.joined(separator: " "))])
            #expect(named.status == 400 && named.text.contains("not a partial upload here"), "\(named.text)")
            // Nothing those refusals touched is left: no upload in progress in the bucket.
            let uploads = try await s3.send("GET", "/hostile", query: [("uploads", "")])
            #expect(!uploads.text.contains("<Upload>"), "\(uploads.text)")

            let created = try await create(tus + [("Upload-Length", "100")])
            let location = try #require(created.headers.first(name: "Location"))
            let tooLong = try await S3TestClient.fetchRaw(
                "PATCH", location, headers: append + [("Upload-Offset", "0")], body: [UInt8](repeating: 1, count: 150))
            #expect(tooLong.status == 413)
            for (headers, status) in [
                (append + [("Upload-Offset", "x")], 400), (append + [("Upload-Offset", "18446744073709551616")], 400),
                (tus + [("Upload-Offset", "0"), ("Content-Type", "text/plain")], 415),
                (append + [("Upload-Offset", "0"), ("Upload-Checksum", "sha256 AAAA")], 400),
                (append + [("Upload-Offset", "0"), ("Upload-Checksum", "sha1 short")], 400),
                (append, 400), (append + [("Upload-Offset", "0"), ("Upload-Length", "99")], 400),
                // A checksum in a trailer (checksum-trailer, not served) is refused, not the bytes kept unverified.
                (append + [("Upload-Offset", "0"), ("Trailer", "Upload-Checksum")], 400),
            ] {
                let reply = try await S3TestClient.fetchRaw("PATCH", location, headers: headers, body: [1, 2, 3])
                #expect(reply.status == status, "\(headers): \(reply.text)")
            }
            let head = try await S3TestClient.fetchRaw("HEAD", location, headers: tus)
            #expect(head.headers.first(name: "Upload-Offset") == "0")
            let base = server.endpoint + "/_ferry/uploads/"
            for (method, path, status) in [
                ("HEAD", "0123456789abcdef0123456789abcdef", 404), ("PATCH", "not-an-id", 404), ("GET", "0123", 405),
                ("HEAD", "../../etc/passwd", 404), ("DELETE", "0123456789abcdef0123456789abcdef/extra", 404),
                ("POST", "grant/forged.token", 403), ("POST", "grant/", 404),
            ] {
                let reply = try await S3TestClient.fetchRaw(method, base + path, headers: append + [("Upload-Offset", "0"), ("Upload-Length", "1")])
                #expect(reply.status == status, "\(method) \(path): \(reply.status) \(reply.text)")
            }
            // The server still serves.
            #expect(try await S3TestClient.fetchRaw("HEAD", location, headers: tus).status == 200)
        }
    }

    @Test("IETF refusals of inconsistent lengths carry the draft's problem details at version 6; a 405 names the methods its resource answers (Allow)")
    func lengthProblemsAndAllow() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("problems").status == 200)
            let ietf: [(name: String, value: String)] = [("Upload-Draft-Interop-Version", "6")]
            let problem = "https://iana.org/assignments/http-problem-types#inconsistent-upload-length"
            // A complete creation whose Upload-Length is not its body's length: refused before anything is made.
            let mismatched = try await s3.send(
                "POST", "/_ferry/uploads/s3/problems/a", headers: ietf + [("Upload-Complete", "?1"), ("Upload-Length", "10")],
                body: [1, 2, 3], payload: .unsigned)
            #expect(mismatched.status == 400 && mismatched.header("Content-Type") == "application/problem+json")
            #expect(mismatched.text.contains(problem), "\(mismatched.text)")
            // An append that completes an upload short of its length.
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/problems/b", headers: ietf + [("Upload-Complete", "?0"), ("Upload-Length", "10")],
                body: [1, 2, 3, 4, 5], payload: .unsigned)
            let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
            let short = try await S3TestClient.fetchRaw(
                "PATCH", location,
                headers: ietf + [
                    ("Content-Type", "application/partial-upload"), ("Upload-Offset", "5"), ("Upload-Complete", "?1"),
                ],
                body: [6, 7, 8])
            #expect(short.status == 400 && short.header("Content-Type") == "application/problem+json")
            #expect(short.text.contains(problem), "\(short.text)")
            // 405s: an upload's URL and a creation URL each say what they answer.
            let base = server.endpoint + "/_ferry/uploads/"
            for (method, url, allowed) in [
                ("GET", location, "DELETE, HEAD, OPTIONS, PATCH, POST"), ("PUT", location, "DELETE, HEAD, OPTIONS, PATCH, POST"),
                ("POST", location, "DELETE, HEAD, OPTIONS, PATCH, POST"), ("GET", base, "OPTIONS, POST, PUT"),
                ("PATCH", base, "OPTIONS, POST, PUT"), ("DELETE", base + "s3/problems/c", "OPTIONS, POST, PUT"),
            ] {
                // POST on an upload is a method override; one naming GET is not answered either.
                let headers = method == "POST" ? [("X-HTTP-Method-Override", "GET")] : ietf
                let reply = try await S3TestClient.fetchRaw(method, url, headers: headers)
                #expect(reply.status == 405 && reply.header("Allow") == allowed, "\(method) \(url): \(reply.status) \(reply.headers)")
            }
            // tus creates with POST only.
            let policy = PutPolicy(scope: "problems:tus.bin", deadline: Date().addingTimeInterval(3600))
            let token = UploadToken.make(
                accessKey: server.root.accessKeyId, secretKey: server.root.secretAccessKey, policy: policy)
            let tusPut = try await S3TestClient.fetchRaw(
                "PUT", base,
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "1"), ("Authorization", "UpToken " + token)])
            #expect(tusPut.status == 405 && tusPut.header("Allow") == "OPTIONS, POST, PUT", "\(tusPut.status) \(tusPut.text)")
        }
    }

    @Test("an abandoned upload expires: 410 once its time is past (which removes its record and its bytes), and the collector removes those of the others")
    func expiry() async throws {
        let time = ManualTime()
        try await TestServer.with(configure: { $0.now = time.now }) { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("expiring").status == 200)
            let created = try await s3.send(
                "POST", "/_ferry/uploads/s3/expiring/abandoned.bin",
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "100000")], payload: .unsigned)
            #expect(created.status == 201)
            let location = try #require(created.headers.first(name: "Location"))
            let before = server.blobFiles().stored
            let patch = try await S3TestClient.fetchRaw(
                "PATCH", location,
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                body: [UInt8](repeating: 7, count: 40_000))
            #expect(patch.status == 204)
            #expect(server.blobFiles().stored == before + 1)
            let expires = try #require(patch.headers.first(name: "Upload-Expires"))
            #expect(expires.hasSuffix("GMT"))
            let partial = try await s3.send(
                "POST", "/_ferry/uploads/s3/expiring/partial.bin",
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "10"), ("Upload-Concat", "partial")],
                payload: .unsigned)
            let partialLocation = try #require(partial.headers.first(name: "Location"))
            let filled = try await S3TestClient.fetchRaw(
                "PATCH", partialLocation,
                headers: [("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream")],
                body: [UInt8](repeating: 3, count: 10))
            #expect(filled.status == 204)

            time.advance(by: 25 * 3600)
            let head = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Tus-Resumable", "1.0.0")])
            #expect(head.status == 410)
            // An expired partial upload is not concatenated (the final upload made with an upload token that is
            // still valid: a signature would be too far from the server's clock now).
            let token = UploadToken.make(
                accessKey: server.root.accessKeyId, secretKey: server.root.secretAccessKey,
                policy: PutPolicy(scope: "expiring:final.bin", deadline: Date().addingTimeInterval(72 * 3600)))
            let final = try await S3TestClient.fetchRaw(
                "POST", server.endpoint + "/_ferry/uploads/",
                headers: [
                    ("Tus-Resumable", "1.0.0"), ("Authorization", "UpToken " + token),
                    ("Upload-Concat", "final;" + partialLocation),
                ])
            #expect(final.status == 400, "\(final.text)")
            #expect((try? await server.server.store.object(bucket: "expiring", key: "final.bin")) == nil)
            // The partial upload; the first one was ended by its HEAD (410), which gives its bytes and slot back.
            let expired = try await server.server.store.expireResumableUploads(now: time.now())
            #expect(expired == 1)
            let gone = try await S3TestClient.fetchRaw("HEAD", location, headers: [("Tus-Resumable", "1.0.0")])
            #expect(gone.status == 404)
            #expect(server.blobFiles().stored == before)
        }
    }

    @Test("tuspy killed mid-upload resumes from its URL store where the server's offset says, and the object is byte-identical")
    func tuspyClientKilled() async throws {
        try await TestServer.with { server in
            let directory = TemporaryDirectory.make("ferry-tus-kill")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let ticket = try await Self.media(server).createUploadVideo(.init(title: "killed", fileName: "clip.mp4"))
            let url = try #require(ticket.resumableUploadURL).absoluteString
            let source = try Self.file(directory, size: 4_000_000)
            let store = directory + "/tus-urls.json"
            let arguments = [
                "tus-upload", "--endpoint", url, "--file", source.path, "--chunk", "250000", "--store", store,
            ]
            // The first run: killed once two chunks are acknowledged.
            let acknowledged = try await runBlocking { () throws -> Int in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["python3", Self.script] + arguments + ["--pause", "0.5"]
                let out = Pipe()
                process.standardOutput = out
                process.standardError = FileHandle.nullDevice
                try process.run()
                var text = ""
                var offsets: [Int] = []
                while offsets.count < 2 {
                    let data = out.fileHandleForReading.availableData
                    if data.isEmpty { break }
                    text += String(decoding: data, as: UTF8.self)
                    offsets = text.split(separator: "\n").compactMap { line in
                        line.hasPrefix("offset ") ? Int(line.dropFirst("offset ".count)) : nil
                    }
                }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return offsets.last ?? 0
            }
            #expect(acknowledged >= 500_000)
            let result = try await Self.client(arguments)
            let resumedFrom = try #require(result["resumedFrom"] as? Int)
            #expect(resumedFrom >= acknowledged)
            #expect(resumedFrom < 4_000_000)
            let stored = try await server.client().get(ticket.address.bucket, ticket.address.fileName)
            #expect(Self.sha256(stored.body) == Self.sha256(source.bytes))
        }
    }

    @Test("a tus creation-with-upload stays alive while its body streams, and expires soon after the server is SIGKILLed under it (its client never got its URL), giving back its key's ConcurrentUploads slot; an answered one lives its full time")
    func creationKilledMidBody() async throws {
        let data = TemporaryDirectory.make("ferry-tus-unanswered")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let root = SigV4Credentials(accessKeyId: "FKIAUNANSWERED0001", secretAccessKey: "unanswered-secret-0123456789")
        let environment = [
            "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey, "HOME": data,
        ]
        // A body must progress every 3 s here: an upload being created lives 6 s past its last sign of life.
        func start() async throws -> FerryExecutable.Server {
            try await FerryExecutable.Server.start(
                dataDirectory: data + "/data", arguments: ["--body-timeout", "3", "--media-workers", "0"],
                environment: environment, logFile: data + "/serve.log")
        }
        var server = try await start()
        let media = MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        let key = try await media.createAccessKey(
            policy: AccessPolicy(statements: [.init(actions: ["s3:*"])]), quota: AccessKeyQuota(concurrentUploads: 1))
        #expect(try await S3TestClient(endpoint: server.endpoint, credentials: root).createBucket("slots").status == 200)
        let credentials = SigV4Credentials(accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey)
        func creationURL(_ name: String) throws -> String {
            try S3TestClient(endpoint: server.endpoint, credentials: credentials)
                .presignedURL("POST", "/_ferry/uploads/s3/slots/" + name)
        }
        func create(_ name: String, body: [UInt8] = []) async throws -> S3TestClient.Reply {
            var headers: [(name: String, value: String)] = [
                ("Tus-Resumable", "1.0.0"), ("Upload-Length", String(max(body.count, 10))),
            ]
            if !body.isEmpty { headers.append(("Content-Type", "application/offset+octet-stream")) }
            return try await S3TestClient.fetchRaw("POST", try creationURL(name), headers: headers, body: body)
        }

        // An answered creation-with-upload (the whole file in its body) lives its full time: 24 hours by default.
        let answered = try await create("answered.bin", body: [UInt8](repeating: 7, count: 1000))
        #expect(answered.status == 201, "\(answered.status) \(answered.text)")
        let expires = try #require(answered.header("Upload-Expires").flatMap(S3Date.parseHTTP))
        #expect(expires > Date().addingTimeInterval(23 * 3600))

        // A creation of 1 MiB whose body comes 4 KiB every 200 ms for 12 s, twice the time it lives untouched.
        let target = try creationURL("killed.bin").dropFirst(server.endpoint.count)
        let socket = try RawSocket.connect(port: server.port)
        defer { close(socket) }
        try RawSocket.write(
            socket,
            Array(
                RawSocket.requestHead(
                    "POST", String(target),
                    [
                        ("Host", "127.0.0.1:\(server.port)"), ("Tus-Resumable", "1.0.0"), ("Upload-Length", "1048576"),
                        ("Content-Type", "application/offset+octet-stream"), ("Content-Length", "1048576"),
                    ]
                ).utf8))
        // Written from a thread of its own: a busy test process does not hold the body back past a body window.
        try await runBlocking {
            for _ in 0..<60 {
                try RawSocket.write(socket, [UInt8](repeating: 1, count: 4096))
                usleep(200_000)
            }
        }
        // Alive: another creation of the key is refused for the slot (an expired upload would have been ended for it).
        let refused = try await create("second.bin")
        #expect(refused.status == 403 && refused.text.contains("uploads in progress"), "\(refused.status) \(refused.text)")

        await server.stop(signal: SIGKILL)
        server = try await start()
        defer { kill(server.process.processIdentifier, SIGKILL) }
        try await Task.sleep(for: .seconds(7))
        // Its URL was never sent: it expired 6 s after the kill, and a creation of the key ends it and takes its slot.
        let after = try await create("after.bin")
        #expect(after.status == 201, "\(after.status) \(after.text)")
        let usage = try await MediaServiceClient(
            endpoint: URL(string: server.endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey)
        ).usage(accessKeyId: key.accessKeyId)
        #expect(usage.usage.uploadsInProgress == 1)
        await server.stop()
    }
}

/// Resumable uploads across nodes: two `ferry serve` nodes on one PostgreSQL catalog and one SeaweedFS store, behind
/// HAProxy.
@Suite("Resumable uploads across nodes", .serialized)
struct ResumableUploadClusterTests {
    static let tus: [(name: String, value: String)] = [("Tus-Resumable", "1.0.0")]
    static let append = tus + [("Content-Type", "application/offset+octet-stream")]

    /// The upload's URL on another node.
    static func on(_ node: FerryExecutable.Server, _ location: String, proxy: String) -> String {
        location.replacingOccurrences(of: proxy, with: node.endpoint)
    }

    @Test("a tus upload whose PATCHes alternate between nodes survives a node SIGKILLed mid-PATCH and completes byte-identical through tuspy; of two PATCHes at one offset on two nodes exactly one wins")
    func alternatingNodes() async throws {
        let cluster = try await ScaleOutCluster.start(nodes: 2)
        do {
            try await Self.run(cluster)
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    static func run(_ cluster: ScaleOutCluster) async throws {
        let proxy = cluster.proxy.endpoint
        let s3 = cluster.client(proxy)
        #expect(try await s3.createBucket("tus-cluster").status == 200)
        let directory = TemporaryDirectory.make("ferry-tus-cluster")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = 24_000_000
        let source = try ResumableUploadTests.file(directory, size: size)
        let created = try await s3.send(
            "POST", "/_ferry/uploads/s3/tus-cluster/alternating.bin", headers: tus + [("Upload-Length", String(size))],
            payload: .unsigned)
        #expect(created.status == 201)
        let location = try #require(created.headers.first(name: "Location"))
        #expect(location.hasPrefix(proxy))
        let (first, second) = (cluster.nodes[0], cluster.nodes[1])

        // Two chunks, one on each node.
        var offset = 0
        for (index, node) in [first, second].enumerated() {
            let chunk = Array(source.bytes[offset..<(offset + 2_000_000)])
            let reply = try await S3TestClient.fetchRaw(
                "PATCH", on(node, location, proxy: proxy), headers: append + [("Upload-Offset", String(offset))], body: chunk)
            #expect(reply.status == 204, "chunk \(index)")
            offset += chunk.count
            #expect(reply.headers.first(name: "Upload-Offset") == String(offset))
        }
        let acknowledged = offset

        // Two PATCHes at offset 0 of one upload, at once, one on each node.
        let race = try await s3.send(
            "POST", "/_ferry/uploads/s3/tus-cluster/raced.bin", headers: tus + [("Upload-Length", "6000000")],
            payload: .unsigned)
        let raceLocation = try #require(race.headers.first(name: "Location"))
        let bodies = [[UInt8](repeating: 1, count: 3_000_000), [UInt8](repeating: 2, count: 3_000_000)]
        let urls = [on(first, raceLocation, proxy: proxy), on(second, raceLocation, proxy: proxy)]
        let statuses = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<2 {
                group.addTask {
                    let reply = try await S3TestClient.fetchRaw(
                        "PATCH", urls[index], headers: append + [("Upload-Offset", "0")], body: bodies[index])
                    return (index, reply.status)
                }
            }
            var statuses: [Int: Int] = [:]
            for try await (index, status) in group { statuses[index] = status }
            return statuses
        }
        #expect(statuses.values.sorted() == [204, 409])
        let winner = try #require(statuses.first { $0.value == 204 }?.key)
        let raced = try await S3TestClient.fetchRaw("HEAD", urls[0], headers: tus)
        #expect(raced.headers.first(name: "Upload-Offset") == "3000000")
        let finish = try await S3TestClient.fetchRaw(
            "PATCH", urls[0], headers: append + [("Upload-Offset", "3000000")], body: bodies[1 - winner])
        #expect(finish.status == 204)
        let object = try await cluster.client(first.endpoint).get("tus-cluster", "raced.bin")
        #expect(object.body == bodies[winner] + bodies[1 - winner])

        // A large PATCH to the second node, which is killed while it streams.
        let target = on(second, location, proxy: proxy)
        let rest = Array(source.bytes[offset...])
        let inFlight = Task { try? await S3TestClient.fetchRaw("PATCH", target, headers: append + [("Upload-Offset", String(acknowledged))], body: rest) }
        try await Task.sleep(for: .milliseconds(150))
        await second.stop(signal: SIGKILL)
        _ = await inFlight.value

        // The first node answers for the upload: never less than was acknowledged, never more than was sent.
        let head = try await S3TestClient.fetchRaw("HEAD", on(first, location, proxy: proxy), headers: tus)
        #expect(head.status == 200)
        let durable = try #require(head.headers.first(name: "Upload-Offset").flatMap(Int.init))
        #expect(durable >= acknowledged)
        #expect(durable <= size)

        // tuspy resumes from the first node's offset and finishes.
        let resumed = try await ResumableUploadTests.client([
            "tus-upload", "--endpoint", first.endpoint + "/_ferry/uploads/", "--url", on(first, location, proxy: proxy),
            "--file", source.path, "--chunk", "8000000",
        ])
        #expect(resumed["resumedFrom"] as? Int == durable)
        let stored = try await cluster.client(first.endpoint).get("tus-cluster", "alternating.bin")
        #expect(stored.status == 200)
        #expect(SigV4.hexSHA256(stored.body) == SigV4.hexSHA256(source.bytes))

    }
}
