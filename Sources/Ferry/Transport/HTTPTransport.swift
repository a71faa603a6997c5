import Foundation
import NIOCore

/// A request as the transport sends it: everything signed already.
public struct TransportRequest: Sendable {
    /// HTTP method.
    public var method: String
    /// Full URL, path and query already percent-encoded.
    public var url: String
    /// Headers to send (the transport adds Host from the URL).
    public var headers: [(name: String, value: String)]
    /// The body's bytes (none when empty). A transport that can hand a `ByteBuffer` to the network sends slices of
    /// it without copying; upload parts are read from the file straight into it.
    public var bodyBuffer: ByteBuffer
    /// The body as an array: a copy of ``bodyBuffer``'s bytes.
    public var body: [UInt8] {
        get { Array(bodyBuffer.readableBytesView) }
        set { bodyBuffer = ByteBuffer(bytes: newValue) }
    }
    /// A body read while it is sent (files in bounded chunks); when set it is sent instead of ``bodyBuffer``, with its
    /// length as `Content-Length`.
    public var streamedBody: StreamedBody?
    /// The most time the whole exchange may take.
    public var timeout: Duration

    /// Creates a request.
    public init(method: String, url: String, headers: [(name: String, value: String)], body: [UInt8] = [], timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.bodyBuffer = ByteBuffer(bytes: body)
        self.timeout = timeout
    }

    /// Creates a request whose body is already in a `ByteBuffer`.
    public init(
        method: String, url: String, headers: [(name: String, value: String)], bodyBuffer: ByteBuffer,
        timeout: Duration
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.bodyBuffer = bodyBuffer
        self.timeout = timeout
    }

    /// Creates a request whose body is read while it is sent.
    public init(
        method: String, url: String, headers: [(name: String, value: String)], streamedBody: StreamedBody,
        timeout: Duration
    ) {
        self.init(method: method, url: url, headers: headers, timeout: timeout)
        self.streamedBody = streamedBody
    }
}

/// A response head and, unless it was streamed elsewhere, the body.
public struct TransportResponse: Sendable {
    /// HTTP status.
    public var status: Int
    /// Response headers.
    public var headers: [(name: String, value: String)]
    /// The body (empty when it went to a sink).
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header with this name, case-insensitively.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }
}

/// The transport Ferry's clients use unless told otherwise: ``URLSessionTransport`` on Apple platforms,
/// ``AsyncHTTPClientTransport`` elsewhere.
func platformDefaultTransport() -> any HTTPTransport {
    #if canImport(Darwin)
    URLSessionTransport()
    #else
    AsyncHTTPClientTransport()
    #endif
}

/// Sends HTTP requests. Ferry ships two: ``AsyncHTTPClientTransport`` (the default on Linux) and
/// ``URLSessionTransport`` (the default on Apple platforms).
public protocol HTTPTransport: Sendable {
    /// Sends a request.
    ///
    /// - Parameters:
    ///   - request: the signed request.
    ///   - bodyProgress: called with the number of body bytes handed to the network since the last call.
    ///   - responseSink: when given, receives a successful (2xx) response body in pieces instead of collecting it.
    /// - Throws: `URLError`-like network errors or cancellation; an HTTP error status is a response, not a throw.
    func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse
}

/// A failure below HTTP: the connection broke, was refused, or timed out.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// Whether the request ran out of time.
    public var isTimeout: Bool
    /// What happened.
    public var message: String
    /// Creates an error.
    public init(isTimeout: Bool = false, _ message: String) {
        self.isTimeout = isTimeout
        self.message = message
    }
    /// The message.
    public var description: String { message }
}
