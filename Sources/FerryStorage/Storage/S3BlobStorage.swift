import AsyncHTTPClient
import FerryCore
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// Where the blobs of an S3-backed store live: a bucket (and a key prefix in it) of an S3-compatible service, and the
/// credentials Ferry signs its requests to it with.
public struct S3StoreLocation: Sendable, Hashable {
    /// The service's URL, `http://host:port` or `https://host`.
    public var endpoint: String
    /// The bucket holding Ferry's blobs.
    public var bucket: String
    /// A key prefix inside the bucket (empty, or ending in `/`).
    public var prefix: String
    /// The region requests are signed for.
    public var region: String
    /// The store's credentials (secret: never logged, never handed to clients).
    public var credentials: SigV4Credentials

    /// Creates a location.
    public init(endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1",
                credentials: SigV4Credentials) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.bucket = bucket
        self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix : prefix + "/"
        self.region = region
        self.credentials = credentials
    }

    /// Parses `s3://BUCKET[/PREFIX]`; nil when it is not of that form.
    public static func parse(_ url: String, endpoint: String, region: String = "us-east-1",
                             credentials: SigV4Credentials) -> S3StoreLocation? {
        guard url.hasPrefix("s3://") else { return nil }
        let rest = url.dropFirst(5)
        let bucket = rest.prefix { $0 != "/" }
        guard !bucket.isEmpty, URL(string: endpoint)?.host != nil else { return nil }
        let prefix = rest.dropFirst(bucket.count).drop { $0 == "/" }
        return S3StoreLocation(
            endpoint: endpoint, bucket: String(bucket), prefix: String(prefix), region: region, credentials: credentials)
    }
}

/// Blobs as objects in a bucket of an S3-compatible store (SeaweedFS, Ceph RGW, MinIO, AWS S3):
/// `<prefix>blobs/<xx>/<name>`.
///
/// Requests are signed with FerryCore's SigV4 signer (the client engine's code); bodies are streamed to the store
/// with chunked transfer encoding and `UNSIGNED-PAYLOAD` while their MD5 and checksums are computed on the way, so
/// nothing is buffered on local disk and memory stays a chunk or two per body. A blob is written under its final
/// name, but nothing can read it before the catalog references it: a body that fails verification is deleted, and
/// one left by a crash is collected as an orphan. Links are server-side copies; reads are ranged GETs streamed to
/// the consumer. A failure of the store (refused connection, timeout, 5xx) is `SlowDown` (503), which clients retry.
package struct S3BlobStorage: BlobStorage {
    let location: S3StoreLocation
    let signer: SigV4Signer
    let leases = BlobLeases()
    /// How long a blob no longer referenced stays for readers on other nodes: zero when this process is the only
    /// reader (its leases cover every read); with a shared catalog, long enough for downloads under way elsewhere.
    /// Deletions that wait are queued in the catalog (``CatalogObjectStore/retire(_:)``), so a restart does not lose
    /// them.
    package var retireAfter: Duration = .zero
    private let host: String
    private let basePath: String

    /// Bytes hashed and sent at a time.
    static let chunk = 1 << 20

    /// One client for every S3-backed store in the process: connections are pooled and reused, and up to 64 run at
    /// once per store (a part in flight holds one).
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(2), read: .seconds(60))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    package init(location: S3StoreLocation) {
        self.location = location
        signer = SigV4Signer(credentials: location.credentials, region: location.region)
        let url = URL(string: location.endpoint)
        let port = url?.port.map { ":\($0)" } ?? ""
        host = (url?.host ?? "") + port
        basePath = url?.path ?? ""
    }

    /// Creates the bucket when it does not exist yet. A store that is starting (refused connections, 5xx) is given
    /// `patience`; one that refuses the credentials or the bucket fails at once with its answer.
    package func prepare(patience: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + patience
        while true {
            var failure: StoreError
            do {
                let response = try await send("PUT", key: nil)
                let body = try await Self.collect(response.body, limit: 64 * 1024)
                let code = Self.errorCode(body)
                if response.status == .ok || code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" { return }
                failure = StoreError(status: Int(response.status.code), code: code, operation: "CreateBucket")
                if failure.status < 500 { throw failure }
            } catch let error as FerryDomainError where error.code == .storeUnavailable {
                failure = StoreError(status: 503, code: "unreachable", operation: "CreateBucket")
            }
            guard ContinuousClock.now < deadline else { throw failure }
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    func objectKey(_ blob: String) -> String { "\(location.prefix)blobs/\(blob.prefix(2))/\(blob)" }

    // MARK: BlobStorage

    func write<Body: AsyncSequence & Sendable>(
        _ body: Body, checksums algorithms: [ChecksumAlgorithm], maxSize: Int64
    ) async throws -> (tempPath: String, digests: BodyDigests) where Body.Element == ByteBuffer {
        let name = Hex.randomId()
        let hashing = HashingBody(base: body, algorithms: algorithms, maxSize: maxSize)
        do {
            let response: HTTPClientResponse
            do {
                response = try await send(
                    "PUT", key: objectKey(name), body: .stream(hashing, length: .unknown),
                    payloadHash: SigV4.unsignedPayload)
            } catch {
                // The client's body task may still be reading the request: it must be done before this returns.
                await hashing.state.close()
                throw error
            }
            await hashing.state.close()
            let answer = try await Self.collect(response.body, limit: 64 * 1024)
            guard response.status == .ok else {
                throw StoreError(status: Int(response.status.code), code: Self.errorCode(answer), operation: "PutObject")
            }
            guard let digests = hashing.state.digests else {
                throw StoreError(status: 200, code: nil, operation: "PutObject (body not fully sent)")
            }
            return (name, digests)
        } catch {
            // The store may hold a whole body whose answer was lost: deleted before the client hears of the failure,
            // even when the client went away (a blob that cannot be deleted is collected as an orphan).
            await removeIgnoringCancellation([name])
            // The body's own failure (the client went away, the body is too large) is the one to report, as it is:
            // it is not the store's.
            throw hashing.state.failure ?? Self.mapped(error)
        }
    }

    func commit(tempPath: String) async throws -> String { tempPath }

    func discard(tempPath: String) async { await remove([tempPath]) }

    func link(_ blob: String) async throws -> String {
        let name = Hex.randomId()
        let source = "/" + location.bucket + "/" + SigV4.uriEncode(objectKey(blob), encodeSlash: false)
        do {
            let response = try await send("PUT", key: objectKey(name), headers: [("x-amz-copy-source", source)])
            let answer = try await Self.collect(response.body, limit: 64 * 1024)
            // A copy can fail after its 200 status line: the body is then an error document.
            guard response.status == .ok, Self.errorCode(answer) == nil else {
                throw StoreError(status: Int(response.status.code), code: Self.errorCode(answer), operation: "CopyObject")
            }
            return name
        } catch {
            // The copy may exist although its answer was lost.
            await removeIgnoringCancellation([name])
            throw Self.mapped(error)
        }
    }

    func bytes(of blob: String, offset: Int64, length: Int64) -> AsyncThrowingStream<ByteBuffer, any Error> {
        let reader = RangeReader(storage: self, key: objectKey(blob), offset: offset, length: length)
        return AsyncThrowingStream(unfolding: { try await reader.next() })
    }

    @discardableResult
    func remove(_ blobs: [String]) async -> [String] {
        var failed: [String] = []
        for blob in blobs {
            do {
                let response = try await send("DELETE", key: objectKey(blob))
                let answer = try await Self.collect(response.body, limit: 64 * 1024)
                // S3 answers 204 whether or not the key existed; 404 means the same here.
                guard (200..<300).contains(response.status.code) || response.status == .notFound else {
                    throw StoreError(status: Int(response.status.code), code: Self.errorCode(answer), operation: "DeleteObject")
                }
            } catch {
                failed.append(blob)
            }
        }
        return failed
    }

    /// Deletes blobs before returning, even when the calling task is cancelled.
    private func removeIgnoringCancellation(_ blobs: [String]) async {
        let storage = self
        _ = await whileIgnoringCancellation { await storage.remove(blobs) }
    }

    var retirementGrace: Duration? { retireAfter }

    /// Not asked: with a ``retirementGrace``, deletions that wait for a reader are queued in the catalog, never in
    /// ``BlobLeases``.
    func removeDetached(_ blobs: [String]) {
        assertionFailure("blobs in an S3-compatible store are retired through the catalog's deletion queue")
    }

    func blobs(olderThan cutoff: Date) async throws -> [String] {
        var names: [String] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", location.prefix + "blobs/")]
            if let token { query.append(("continuation-token", token)) }
            let response = try await send("GET", key: nil, query: query)
            let body = try await Self.collect(response.body, limit: 16 << 20)
            guard response.status == .ok else {
                throw StoreError(status: Int(response.status.code), code: Self.errorCode(body), operation: "ListObjectsV2")
            }
            let page = try S3XML.decode(ListPage.self, from: Data(buffer: body), trimming: false)
            for entry in page.contents ?? [] {
                guard let modified = Self.parseDate(entry.lastModified), modified < cutoff,
                    let name = entry.key.split(separator: "/").last
                else { continue }
                names.append(String(name))
            }
            token = page.isTruncated == true ? page.nextContinuationToken : nil
        } while token != nil
        return names
    }

    // MARK: Requests

    /// Sends one signed request to the store: to the bucket (`key` nil) or to an object in it.
    func send(
        _ method: String, key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [],
        body: HTTPClientRequest.Body? = nil, payloadHash: String = SigV4.emptyPayloadHash
    ) async throws -> HTTPClientResponse {
        var path = basePath + "/" + SigV4.uriEncode(location.bucket, encodeSlash: true)
        if let key { path += "/" + SigV4.uriEncode(key, encodeSlash: false) }
        let items = query.map { (name: $0.0, value: $0.1) }
        var headers: [(name: String, value: String)] = [(name: "host", value: host)]
        headers += extra.map { (name: $0.0, value: $0.1) }
        let signed = signer.sign(
            method: method, path: path, query: items, headers: headers, payloadHash: payloadHash, date: Date()
        ).headers
        let queryString = items.isEmpty ? "" : "?" + SigV4.canonicalQueryString(items)
        var request = HTTPClientRequest(url: location.endpoint + path.dropFirst(basePath.count) + queryString)
        request.method = HTTPMethod(rawValue: method)
        for header in signed where header.name.lowercased() != "host" {
            request.headers.add(name: header.name, value: header.value)
        }
        if let body { request.body = body }
        do {
            return try await Self.client.execute(request, timeout: .hours(24))
        } catch {
            throw Self.mapped(error)
        }
    }

    /// Reads a response body up to `limit` bytes.
    static func collect(_ body: HTTPClientResponse.Body, limit: Int) async throws -> ByteBuffer {
        do { return try await body.collect(upTo: limit) } catch { throw mapped(error) }
    }

    /// The `<Code>` of an error document, nil when the body is not one.
    static func errorCode(_ body: ByteBuffer) -> String? {
        let text = String(buffer: body)
        guard text.contains("<Error>"), let start = text.range(of: "<Code>"),
            let end = text.range(of: "</Code>", range: start.upperBound..<text.endIndex)
        else { return nil }
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// What a client is told when the store fails: S3 errors pass through, everything else is a retryable 503.
    static func mapped(_ error: any Error) -> any Error {
        if error is FerryDomainError || error is CancellationError { return error }
        if let failure = error as? StoreError, failure.status < 500 {
            return FerryDomainError(.storeRefused, "The object store refused a request (\(failure.operation)).")
        }
        return FerryDomainError(
            .storeUnavailable, "The object store is unavailable; please retry the request.", retryAfterSeconds: 1)
    }

    /// A listing's `LastModified`: an internet date-time, with or without fractional seconds; nil otherwise (an entry
    /// whose age cannot be told is never taken for an orphan).
    static func parseDate(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// An unexpected answer of the store. Its description names the operation and the store's code, never a key,
    /// a credential or a signature.
    struct StoreError: Error, CustomStringConvertible {
        var status: Int
        var code: String?
        var operation: String
        var description: String { "object store: \(operation) answered \(status)\(code.map { " \($0)" } ?? "")" }
    }

    struct ListPage: Decodable {
        struct Entry: Decodable {
            var key: String
            var lastModified: String
            enum CodingKeys: String, CodingKey { case key = "Key", lastModified = "LastModified" }
        }
        var contents: [Entry]?
        var isTruncated: Bool?
        var nextContinuationToken: String?
        enum CodingKeys: String, CodingKey {
            case contents = "Contents", isTruncated = "IsTruncated", nextContinuationToken = "NextContinuationToken"
        }
    }
}

/// A request body that computes the MD5 and checksums of the bytes passing through it, and records how it ended.
///
/// Bytes are handed on in chunks of about ``S3BlobStorage/chunk`` bytes as soon as they are read; each chunk is hashed
/// on the thread pool while it is being sent (hashes run one after another, at most two chunks behind), so hashing
/// and sending overlap. The digests are final before the body ends.
struct HashingBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let algorithms: [ChecksumAlgorithm]
    let maxSize: Int64
    let state = Outcome()

    /// Thrown to the HTTP client's body task when it reads after the write ended.
    struct Closed: Error {}

    /// How the body ended (its digests once fully read, or the error that ended it), and a gate on reading it.
    ///
    /// The HTTP client reads the body from a task of its own, which can still be waiting for the next bytes of the
    /// request when the store's answer (an error) ends the write. The request's body must not be read after the
    /// handler is done with it — the server reads the connection's next request then — so ``close()`` waits for a
    /// read under way and lets no other begin.
    final class Outcome: Sendable {
        private struct State {
            var digests: BodyDigests?
            var failure: (any Error)?
            var closed = false
            var reading = false
            var waiters: [CheckedContinuation<Void, Never>] = []
        }
        private let box = NIOLockedValueBox(State())
        var digests: BodyDigests? { box.withLockedValue { $0.digests } }
        var failure: (any Error)? { box.withLockedValue { $0.failure } }
        func finish(_ digests: BodyDigests) { box.withLockedValue { $0.digests = digests } }
        func fail(_ error: any Error) {
            // Closing the gate ends the client's reading; the write's own error is the one to report.
            guard !(error is Closed) else { return }
            box.withLockedValue { if $0.failure == nil { $0.failure = error } }
        }

        /// Starts a read of the body; false once closed.
        func enter() -> Bool {
            box.withLockedValue { state in
                guard !state.closed else { return false }
                state.reading = true
                return true
            }
        }

        /// Ends a read; wakes a ``close()`` that waits for it.
        func leave() {
            let waiters = box.withLockedValue { state in
                state.reading = false
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        /// Lets no read begin, and returns once the read under way (if any) has ended.
        func close() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = box.withLockedValue { state in
                    state.closed = true
                    if state.reading { state.waiters.append(continuation) }
                    return !state.reading
                }
                if now { continuation.resume() }
            }
        }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let algorithms: [ChecksumAlgorithm]
        let maxSize: Int64
        let state: Outcome
        var size: Int64 = 0
        var done = false
        /// The hash jobs under way, oldest first; each continues the state of the one before it.
        var hashing: [Task<MultiChecksummer, any Error>]
        var latest: Task<MultiChecksummer, any Error>

        /// The next bytes of the base, through the gate.
        private mutating func read() async throws -> ByteBuffer? {
            guard state.enter() else { throw Closed() }
            defer { state.leave() }
            return try await base.next()
        }

        mutating func next() async throws -> ByteBuffer? {
            guard !done else { return nil }
            do {
                var chunk = ByteBuffer()
                while chunk.readableBytes < S3BlobStorage.chunk, var buffer = try await read() {
                    size += Int64(buffer.readableBytes)
                    if size > maxSize {
                        throw FerryDomainError(.tooLarge, "Your proposed upload exceeds the maximum allowed size.")
                    }
                    if chunk.readableBytes == 0 { chunk = buffer } else { chunk.writeBuffer(&buffer) }
                }
                if chunk.readableBytes > 0 {
                    if hashing.count >= 2 { _ = try await hashing.removeFirst().value }
                    let previous = latest
                    let bytes = chunk
                    latest = Task {
                        let current = try await previous.value
                        return try await NIOThreadPool.singleton.runIfActive {
                            var next = current
                            bytes.withUnsafeReadableBytes { next.update($0) }
                            return next
                        }
                    }
                    hashing.append(latest)
                }
                if chunk.readableBytes < S3BlobStorage.chunk {
                    // The base ended: the digests are complete before the last bytes go out.
                    done = true
                    let hasher = try await latest.value
                    hashing = []
                    state.finish(BodyDigests(size: size, hasher: hasher, algorithms: algorithms))
                    if chunk.readableBytes == 0 { return nil }
                }
                return chunk
            } catch {
                done = true
                for task in hashing { task.cancel() }
                state.fail(error)
                throw error
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        let start = MultiChecksummer([.md5] + algorithms.filter { $0 != .md5 })
        let first = Task<MultiChecksummer, any Error> { start }
        return AsyncIterator(
            base: base.makeAsyncIterator(), algorithms: algorithms, maxSize: maxSize, state: state, hashing: [],
            latest: first)
    }
}

/// A range of a blob, read from the store as the consumer asks, chunk by chunk: one ranged GET, started on the first
/// read, and another for what is left whenever a response ends early or fails. A blob never changes, so the bytes
/// asked for again are the same; and a store's connection can end mid-body for no fault of the blob: the HTTP client
/// gives up on a response it has read nothing of for its read timeout (60 s), which is what happens while a client
/// downloads slowly enough for the socket buffers in between to hold minutes of its bytes. A GET the store cannot
/// answer (5xx, no connection) is asked for again the same way; one it refuses (a 4xx: the blob is gone) fails the
/// read at once. Asked for again ``retries`` times in a row without a byte coming in between, the read fails: never a
/// short body passed off as whole.
final class RangeReader: Sendable {
    private struct State {
        var iterator: HTTPClientResponse.Body.AsyncIterator?
        var received: Int64 = 0
        /// GETs in a row that ended or failed without a byte since the last that brought one.
        var failures = 0
    }
    let storage: S3BlobStorage
    let key: String
    let offset: Int64
    let length: Int64
    // Only `next()` touches the state, and AsyncThrowingStream(unfolding:) calls it one call at a time.
    private nonisolated(unsafe) var state = State()
    /// How many times in a row a range is asked for again without a byte coming in between.
    static let retries = 3

    init(storage: S3BlobStorage, key: String, offset: Int64, length: Int64) {
        self.storage = storage
        self.key = key
        self.offset = offset
        self.length = length
    }

    func next() async throws -> ByteBuffer? {
        guard state.received < length else {
            state.iterator = nil
            return nil
        }
        while true {
            var failure: (any Error)?
            var buffer: ByteBuffer?
            do {
                if state.iterator == nil { state.iterator = try await open() }
                buffer = try await state.iterator?.next()
            } catch let error as FerryDomainError where error.code != .storeUnavailable {
                // The store refused (the blob is gone): asking again would not help.
                throw error
            } catch {
                failure = error
            }
            if var buffer {
                let wanted = length - state.received
                if Int64(buffer.readableBytes) > wanted {
                    buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(wanted)) ?? buffer
                }
                state.received += Int64(buffer.readableBytes)
                if buffer.readableBytes > 0 { state.failures = 0 }
                return buffer
            }
            state.iterator = nil
            state.failures += 1
            if failure is CancellationError || Task.isCancelled || state.failures > Self.retries {
                throw S3BlobStorage.mapped(
                    failure ?? S3BlobStorage.StoreError(status: 502, code: "IncompleteBody", operation: "GetObject"))
            }
            // A moment first, longer each time: a store that restarts is back within a second or two.
            try await Task.sleep(for: .milliseconds(250 * state.failures))
        }
    }

    /// A GET of what is left of the range.
    private func open() async throws -> HTTPClientResponse.Body.AsyncIterator {
        let start = offset + state.received
        let range = "bytes=\(start)-\(offset + length - 1)"
        let response = try await storage.send("GET", key: key, headers: [("range", range)])
        guard response.status == .partialContent || (response.status == .ok && start == 0) else {
            let body = try await S3BlobStorage.collect(response.body, limit: 64 * 1024)
            throw S3BlobStorage.mapped(S3BlobStorage.StoreError(
                status: Int(response.status.code), code: S3BlobStorage.errorCode(body), operation: "GetObject"))
        }
        // A part of the blob other than the one asked for (a cache or proxy in front of the store that answers ranges
        // its own way) would be sent as the object's bytes: it counts as an answer that brought nothing.
        if response.status == .partialContent, Self.rangeStart(response.headers.first(name: "content-range")) != start {
            throw S3BlobStorage.mapped(
                S3BlobStorage.StoreError(status: 502, code: "RangeMismatch", operation: "GetObject"))
        }
        return response.body.makeAsyncIterator()
    }

    /// The first byte a `Content-Range: bytes FIRST-LAST/SIZE` answer holds; nil when the header is missing or not
    /// that.
    static func rangeStart(_ header: String?) -> Int64? {
        guard let header, header.lowercased().hasPrefix("bytes "), let dash = header.firstIndex(of: "-") else {
            return nil
        }
        return Int64(header[header.index(header.startIndex, offsetBy: 6)..<dash])
    }
}
