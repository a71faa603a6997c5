import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Sends requests with AsyncHTTPClient (SwiftNIO); the default transport on Linux.
///
/// Request bodies go out in slices of ``sliceSize`` bytes pulled by the connection as the socket accepts them, so
/// `bodyProgress` reports bytes as they are sent rather than when the whole body is queued.
public struct AsyncHTTPClientTransport: HTTPTransport {
    let client: HTTPClient
    /// Bytes per body slice handed to the connection.
    public static let sliceSize = 64 * 1024

    /// Uses the given client (default: ``sharedClient``).
    public init(client: HTTPClient = AsyncHTTPClientTransport.sharedClient) {
        self.client = client
    }

    /// A process-wide client for Ferry: it does not retry failed connection attempts itself (the engine's retry
    /// policy does, with backoff and events), and gives up connecting after 10 seconds.
    public static let sharedClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout.connect = .seconds(10)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        var http = HTTPClientRequest(url: request.url)
        http.method = HTTPMethod(rawValue: request.method)
        for header in request.headers where header.name.lowercased() != "host" {
            http.headers.add(name: header.name, value: header.value)
        }
        if let streamed = request.streamedBody {
            http.body = .stream(
                StreamedBodySlices(chunks: streamed.chunks, progress: bodyProgress), length: .known(streamed.length))
        } else if request.bodyBuffer.readableBytes > 0 || request.method == "PUT" || request.method == "POST" {
            let body = request.bodyBuffer
            let slices = BodySlices(body: body, sliceSize: Self.sliceSize, progress: bodyProgress)
            http.body = .stream(slices, length: .known(Int64(body.readableBytes)))
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(http, timeout: .nanoseconds(Int64(request.timeout.components.seconds) * 1_000_000_000 + Int64(request.timeout.components.attoseconds / 1_000_000_000)))
        } catch let error as HTTPClientError {
            throw Self.transportError(error)
        }
        let headers = response.headers.map { (name: $0.name, value: $0.value) }
        let status = Int(response.status.code)
        do {
            if let responseSink, (200..<300).contains(status) {
                for try await buffer in response.body {
                    try await responseSink(Array(buffer.readableBytesView))
                }
                return TransportResponse(status: status, headers: headers, body: [])
            }
            var collected = try await response.body.collect(upTo: 64 * 1024 * 1024)
            return TransportResponse(
                status: status, headers: headers, body: collected.readBytes(length: collected.readableBytes) ?? [])
        } catch let error as HTTPClientError {
            throw Self.transportError(error)
        }
    }

    static func transportError(_ error: HTTPClientError) -> any Error {
        if error == .cancelled { return CancellationError() }
        let timeout = error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout
            || error == .writeTimeout
        return TransportError(isTimeout: timeout, "HTTP request failed: \(error)")
    }
}

/// A body as an async sequence of slices (views of its storage, not copies), counting each slice when the connection
/// pulls it.
struct BodySlices: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: ByteBuffer
    let sliceSize: Int
    let progress: @Sendable (Int) -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        var body: ByteBuffer
        let sliceSize: Int
        let progress: @Sendable (Int) -> Void
        var pending = 0

        mutating func next() async throws -> ByteBuffer? {
            // The previous slice was written once the next one is asked for.
            if pending > 0 {
                progress(pending)
                pending = 0
            }
            guard body.readableBytes > 0 else { return nil }
            try Task.checkCancellation()
            let buffer = body.readSlice(length: Swift.min(sliceSize, body.readableBytes))!
            pending = buffer.readableBytes
            if body.readableBytes == 0 {
                // The last slice counts when handed over; the response confirms it arrived.
                progress(pending)
                pending = 0
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(body: body, sliceSize: sliceSize, progress: progress)
    }
}

/// A ``StreamedBody`` as the connection pulls it, counting each chunk once the next one is asked for (the last when
/// handed over).
struct StreamedBodySlices: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let chunks: StreamedBody.Chunks
    let progress: @Sendable (Int) -> Void

    struct AsyncIterator: AsyncIteratorProtocol {
        var chunks: StreamedBody.Chunks.AsyncIterator
        let progress: @Sendable (Int) -> Void
        var pending = 0

        mutating func next() async throws -> ByteBuffer? {
            if pending > 0 {
                progress(pending)
                pending = 0
            }
            guard let chunk = try await chunks.next() else { return nil }
            pending = chunk.count
            return ByteBuffer(bytes: chunk)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(chunks: chunks.makeAsyncIterator(), progress: progress)
    }
}
