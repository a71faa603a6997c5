import Foundation

/// A request as the transport sends it: everything signed already.
public struct TransportRequest: Sendable {
    /// HTTP method.
    public var method: String
    /// Full URL, path and query already percent-encoded.
    public var url: String
    /// Headers to send (the transport adds Host from the URL).
    public var headers: [(name: String, value: String)]
    /// The body's bytes in memory, nil when there are none. Upload parts are read from the file straight into a
    /// buffer the transport made (``HTTPTransport/makeBodyBuffer(capacity:)``), so it sends them without a copy.
    public var bodyBuffer: (any BodyBuffer)?
    /// The body as an array: a copy of ``bodyBuffer``'s bytes (empty when there is none).
    public var body: [UInt8] {
        get { bodyBuffer?.bytes ?? [] }
        set { bodyBuffer = newValue.isEmpty ? nil : HeapBodyBuffer(bytes: newValue) }
    }
    /// A body read while it is sent (files in bounded chunks); when set it is sent instead of ``bodyBuffer``, with its
    /// length as `Content-Length`.
    public var streamedBody: StreamedBody?
    /// The most time the whole exchange may take.
    public var timeout: Duration

    /// Bytes in the body, whichever form it has.
    public var bodyLength: Int64 { streamedBody?.length ?? Int64(bodyBuffer?.count ?? 0) }

    /// Creates a request.
    public init(method: String, url: String, headers: [(name: String, value: String)], body: [UInt8] = [], timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.body = body
    }

    /// Creates a request whose body is already in a ``BodyBuffer``.
    public init(
        method: String, url: String, headers: [(name: String, value: String)], bodyBuffer: (any BodyBuffer)?,
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

/// Sends HTTP requests: the one seam between Ferry's clients and the network.
///
/// Ferry ships three: `AsyncHTTPClientTransport` (product `FerryAsyncHTTPClient`, the default on Linux),
/// `URLSessionTransport` (the default on Apple platforms) and `BackgroundURLSessionTransport` (parts uploaded from
/// files by a background session that goes on while the app is suspended).
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

    /// Memory for a request body of up to `capacity` bytes, of the kind this transport sends without copying.
    /// Default: a ``HeapBodyBuffer``.
    func makeBodyBuffer(capacity: Int) -> any BodyBuffer
}

extension HTTPTransport {
    /// A ``HeapBodyBuffer`` with room for `capacity` bytes.
    public func makeBodyBuffer(capacity: Int) -> any BodyBuffer { HeapBodyBuffer(capacity: capacity) }
}

/// A failure below HTTP: the connection broke, was refused, or timed out.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure below HTTP it was.
    public enum Kind: String, Sendable {
        /// Nothing accepted the connection (nothing listens on the port, or a firewall refuses it).
        case connectionRefused
        /// The host name did not resolve.
        case hostNotFound
        /// The connection or the answer did not come in time.
        case timeout
        /// The TLS handshake failed (a certificate not trusted or not for the host, or no TLS at that port).
        case tls
        /// The connection was reset or closed before the answer came.
        case connectionReset
        /// Anything else.
        case other
    }

    /// Whether the request ran out of time.
    public var isTimeout: Bool
    /// What happened.
    public var message: String
    /// What kind of failure it was.
    public var kind: Kind

    /// Creates an error.
    public init(isTimeout: Bool = false, _ message: String) {
        self.isTimeout = isTimeout
        self.message = message
        self.kind = isTimeout ? .timeout : .other
    }

    /// An error of `kind` in reaching `url`: the message names the kind and the endpoint (`scheme://host:port`, never
    /// the path or query, which may hold a signature or token: a resumable upload's path is its capability) and ends
    /// with `detail`, the underlying library's words, with the URL's path and query taken out.
    public init(_ kind: Kind, url: String, detail: String) {
        self.kind = kind
        self.isTimeout = kind == .timeout
        let endpoint = Self.endpoint(of: url)
        var detail = detail
        // The query as written after the first `?` (also when the URL cannot be read), then the path and query as
        // a library may quote them, encoded or not.
        let components = URLComponents(string: url)
        let written = url.firstIndex(of: "?").map { String(url[url.index(after: $0)...]) }
        let parts = [
            written, components?.percentEncodedQuery, components?.percentEncodedPath, components?.query,
            components?.path,
        ]
        for secret in parts.compactMap({ $0 }) where secret.count > 1 {
            detail = detail.replacingOccurrences(of: secret, with: "…")
        }
        let what: String
        switch kind {
        case .connectionRefused:
            what = "Could not connect to \(endpoint): the connection was refused; is the service running on that port"
        case .hostNotFound: what = "Could not connect to \(endpoint): the host was not found"
        case .timeout: what = "\(endpoint) did not answer in time"
        case .tls: what = "Could not connect to \(endpoint): the TLS handshake failed"
        case .connectionReset: what = "The connection to \(endpoint) was reset before the answer came"
        case .other: what = "The request to \(endpoint) failed"
        }
        self.message = what + (kind == .connectionRefused ? "?" : ".") + (detail.isEmpty ? "" : " Detail: \(detail)")
    }

    /// `scheme://host:port` of `url`, the port spelled out (80 or 443 when the URL names none); the URL as far as its
    /// authority when it cannot be read, with any user and password left out.
    public static func endpoint(of url: String) -> String {
        if let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host {
            let port = components.port ?? (scheme.lowercased() == "https" ? 443 : 80)
            let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return "\(scheme)://\(shown):\(port)"
        }
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? url[...]
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last.map(String.init) ?? ""
        return url.range(of: "://").map { String(url[..<$0.upperBound]) + host } ?? host
    }

    /// The message.
    public var description: String { message }
}
