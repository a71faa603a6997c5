import Crypto
import Ferry
import AsyncHTTPClient
import FerryAsyncHTTPClient
import FerryCore
import FerryTestSupport
import FerryTransport
import Foundation
import NIOCore
import Testing

@testable import Ferry
@testable import FerryAsyncHTTPClient

/// The engine against answers no storage service gives: a captive portal's page, a proxy's, a broken or hostile
/// endpoint's.
@Suite("The engine against answers no storage service gives", .timeLimit(.minutes(5)))
struct HostileAnswerTests {
    static func client(_ receiver: HTTPReceiver) -> ObjectStorageClient {
        var configuration = ObjectStorageClient.Configuration()
        configuration.retryPolicy.maxRetryCount = 0
        return ObjectStorageClient(
            endpoint: URL(string: receiver.url(""))!, credentials: Credentials(accessKeyId: "AKIDHOSTILE", secretAccessKey: "hostile"),
            configuration: configuration)
    }

    @Test("a 200 without an ETag (a captive portal's page) stored nothing: the single PUT fails, and no result says it was uploaded")
    func putWithoutETag() async throws {
        let file = try makeRandomFile(size: 4096)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        try await HTTPReceiver.with(status: 200, answer: "<html>Sign in to the network</html>", contentType: "text/html") { receiver in
            let upload = try await Self.client(receiver).upload(ResumableUploadRequest(bucket: "b", key: "k", fileURL: file))
            let error = await #expect(throws: FerryError.self) { try await upload.result }
            #expect(error?.message.contains("PutObject answered without an ETag") == true, "\(String(describing: error))")
            #expect(await receiver.recorder.requests.map(\.method) == ["PUT"])
        }
    }

    @Test("an upload id or ETag no storage service makes (a megabyte long, or with control characters) fails the upload with a clear error before it is sent back")
    func implausibleIds() async throws {
        let file = try makeRandomFile(size: 6 << 20)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        for uploadId in [String(repeating: "u", count: 1 << 20), "id\tx"] {
            let answer = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>\(uploadId)</UploadId></InitiateMultipartUploadResult>"
            try await HTTPReceiver.with(status: 200, answer: answer, contentType: "application/xml") { receiver in
                var request = ResumableUploadRequest(bucket: "b", key: "k", fileURL: file)
                request.multipartThreshold = 1
                let upload = try await Self.client(receiver).upload(request)
                let error = await #expect(throws: FerryError.self) { try await upload.result }
                #expect(error?.message.contains("named an upload id no storage service makes") == true, "\(String(describing: error))")
                // Only the creation was sent: no part and no abort carried the id back.
                #expect(await receiver.recorder.requests.map(\.method) == ["POST"])
            }
        }
        #expect(!ObjectStorageClient.isPlausible(String(repeating: "e", count: 70_000)))
        #expect(!ObjectStorageClient.isPlausible(""))
        #expect(ObjectStorageClient.isPlausible("\"9b2cf535f27731c974343645a3985328\""))
    }

    /// The MD5s of the parts a scripted store received, by part number.
    final class ReceivedMD5s: @unchecked Sendable {
        private let lock = NSLock()
        private var md5s: [Int: [UInt8]] = [:]
        func set(_ number: Int, _ md5: [UInt8]) { lock.withLock { md5s[number] = md5 } }
        var ordered: [[UInt8]] { lock.withLock { md5s.sorted { $0.key < $1.key }.map(\.value) } }
    }

    @Test("a store that reports no checksum (OSS, an older MinIO): with the default CRC32C the object is verified by its ETags, each part's against the MD5 of the file's bytes; bytes damaged on their way fail the upload", arguments: [true, false])
    func verifiedByETagsWithoutChecksums(multipart: Bool) async throws {
        let file = try makeRandomFile(size: multipart ? 12 << 20 : 4096)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        for damaged in [false, true] {
            let received = ReceivedMD5s()
            try await HTTPReceiver.answering({ request in
                let query = request.query ?? ""
                switch request.method {
                case "POST" where query.hasPrefix("uploads"):
                    return .init(200, body: "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u-1</UploadId></InitiateMultipartUploadResult>")
                case "PUT":
                    let number = query.split(separator: "&").first { $0.hasPrefix("partNumber=") }
                        .flatMap { Int($0.dropFirst("partNumber=".count)) } ?? 1
                    var body = request.body
                    // The store received other bytes than were sent for the second part (or the one PUT).
                    if damaged && number == (multipart ? 2 : 1) && !body.isEmpty { body[0] ^= 1 }
                    let md5 = Checksum.digest(.md5, of: body)
                    received.set(number, md5)
                    // It takes the checksum header and says nothing of it.
                    return .init(200, [("ETag", "\"\(Hex.encode(md5))\"")])
                case "POST":
                    let etag = Checksum.multipartETag(partMD5s: received.ordered)
                    return .init(200, body: "<CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>\"\(etag)\"</ETag></CompleteMultipartUploadResult>")
                default:
                    return .init(404)
                }
            }) { receiver in
                var request = ResumableUploadRequest(bucket: "b", key: "k", fileURL: file)
                #expect(request.checksumAlgorithm == .crc32c)
                request.partSize = 5 << 20
                let upload = try await Self.client(receiver).upload(request)
                if damaged {
                    let error = await #expect(throws: FerryError.self) { try await upload.result }
                    #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
                    let said = multipart ? "ETag of part 2 is not the MD5" : "ETag is not the MD5 of the bytes sent"
                    #expect(error?.message.contains(said) == true, "\(String(describing: error))")
                } else {
                    let result = try await upload.result
                    #expect(result.verification == .etag, "\(result)")
                    #expect(result.partsSent == (multipart ? 3 : 1))
                }
            }
        }
    }

    @Test("a store that answers the completion (or a PUT to a key ending in /) but keeps another size fails the upload: no success for an object that is not the file", arguments: [false, true])
    func storedSizeIsChecked(multipart: Bool) async throws {
        let file = try makeRandomFile(size: multipart ? 6 << 20 : 4096)
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        // A folder store: every write is answered as if stored; the key holds nothing.
        try await HTTPReceiver.answering({ request in
            let query = request.query ?? ""
            switch request.method {
            case "POST" where query.hasPrefix("uploads"):
                return .init(200, body: "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>dir/</Key><UploadId>u-1</UploadId></InitiateMultipartUploadResult>")
            case "PUT":
                let etag = Insecure.MD5.hash(data: request.body).map { String(format: "%02x", $0) }.joined()
                return .init(200, [("ETag", "\"\(etag)\"")])
            case "POST":
                return .init(200, body: "<CompleteMultipartUploadResult><Location>http://store/b/dir/</Location><Bucket>b</Bucket><Key>dir/</Key><ETag>\"0123456789abcdef0123456789abcdef-2\"</ETag></CompleteMultipartUploadResult>")
            case "HEAD":
                return .init(200, [("Content-Length", "0"), ("ETag", "\"d41d8cd98f00b204e9800998ecf8427e\""), ("Content-Type", "application/x-directory")])
            default:
                return .init(404)
            }
        }) { receiver in
            var request = ResumableUploadRequest(bucket: "b", key: "dir/", fileURL: file)
            request.checksumAlgorithm = nil
            if multipart { request.multipartThreshold = 1 }
            let upload = try await Self.client(receiver).upload(request)
            let error = await #expect(throws: FerryError.self) { try await upload.result }
            #expect(error?.code == .checksumMismatch && error?.message.contains("is 0 bytes, not the file's") == true, "\(String(describing: error))")
            #expect(await receiver.recorder.requests.last?.method == "HEAD")
        }
    }

    @Test("forgetting an upload whose id the service refuses (400) deletes its checkpoint: nothing on the server can be resumed or aborted")
    func discardRefusedUpload() async throws {
        let file = try makeRandomFile(size: 1024)
        let records = TemporaryDirectory.make("ferry-hostile-records")
        defer {
            try? FileManager.default.removeItem(at: file.deletingLastPathComponent())
            try? FileManager.default.removeItem(atPath: records)
        }
        try await HTTPReceiver.with(status: 400, answer: "<Error><Code>InvalidArgument</Code></Error>", contentType: "application/xml") { receiver in
            let client = Self.client(receiver)
            var request = ResumableUploadRequest(bucket: "b", key: "k", fileURL: file)
            request.recordDirectory = URL(fileURLWithPath: records)
            let store = CheckpointStore(directory: URL(fileURLWithPath: records))
            let id = CheckpointStore.identifier(
                endpoint: client.checkpointServiceIdentity, bucket: "b", key: "k", filePath: file.standardizedFileURL.path)
            try store.save(
                UploadCheckpoint(
                    endpoint: client.checkpointServiceIdentity, bucket: "b", key: "k", filePath: file.standardizedFileURL.path,
                    uploadId: "refused-upload", partSize: 5 << 20, fingerprint: try FileFingerprint.of(path: file.path),
                    parts: [], createdAt: Date()),
                as: id)
            #expect(store.load(id) != nil)
            #expect(try await client.discardCheckpoint(of: request))
            #expect(store.load(id) == nil)
            #expect(await receiver.recorder.requests.map(\.method) == ["DELETE"])
        }
    }

    @Test("an error answer's body is read to 64 KiB at most: a broken server's megabytes are not held for every part in flight; a success's is read whole")
    func errorBodyIsCapped() async throws {
        let page = String(repeating: "<p>error</p>", count: (2 << 20) / 12)
        let transport = AsyncHTTPClientTransport()
        for status in [500, 200] {
            try await HTTPReceiver.with(status: status, answer: page, contentType: "text/html") { receiver in
                let response = try await transport.send(
                    TransportRequest(method: "GET", url: receiver.url("/k"), headers: [], timeout: .seconds(30)),
                    bodyProgress: { _ in }, responseSink: nil)
                #expect(response.status == status)
                #expect(response.body.count == (status == 500 ? 64 * 1024 : page.utf8.count), "\(status): \(response.body.count) bytes")
            }
        }
    }

    @Test("a refusal whose connection closes as it ends, while the request's body is still going out, is read as the refusal, not as a reset connection")
    func refusalBeforeTheBody() async throws {
        // What AsyncHTTPClient hands over when a server refuses a part before its body has all gone out (an expired
        // token, with Connection: close): the whole document, then a failure of the connection it closed.
        let document = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>"
        let closed = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
            continuation.yield(ByteBuffer(string: String(document.prefix(40))))
            continuation.yield(ByteBuffer(string: String(document.dropFirst(40))))
            continuation.finish(throwing: ChannelError.ioOnClosedChannel)
        }
        let kept = try await AsyncHTTPClientTransport.errorDocument(
            .stream(closed), length: document.utf8.count, deadline: .now + .seconds(5))
        #expect(String(decoding: kept, as: UTF8.self) == document)
        // A document cut short, or none, tells no reason: the failure stays the connection's (retried, so an expired
        // token is renewed and the part sent again).
        for sent in [0, 40] {
            let cut = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
                if sent > 0 { continuation.yield(ByteBuffer(string: String(document.prefix(sent)))) }
                continuation.finish(throwing: ChannelError.ioOnClosedChannel)
            }
            await #expect(throws: ChannelError.self) {
                _ = try await AsyncHTTPClientTransport.errorDocument(.stream(cut), length: document.utf8.count, deadline: .now + .seconds(5))
            }
        }
        // A body that does not come in time is still a timeout.
        let endless = AsyncThrowingStream<ByteBuffer, any Error> { _ in }
        await #expect(throws: TransportError.self) {
            _ = try await AsyncHTTPClientTransport.errorDocument(.stream(endless), length: nil, deadline: .now + .milliseconds(100))
        }
    }
}
