/// An error from the Ferry client, with what the server said when there was a response. Every client entry point
/// (the engine, the media, publish and form clients, the transports' file bodies) reports failures as this type.
///
/// Match on ``code``. The client's entry points throw it as their one error type (`throws(FerryError)`), so a `catch`
/// needs no cast:
/// ```swift
/// do { _ = try await client.headObject(bucket: "media", key: "movie.mp4") } catch where error.code == .network { … }
/// ```
/// Messages never contain secrets, signatures or session tokens.
public struct FerryError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case cannotResumeUpload, credentialsExpired, fileNotFound, invalidArgument, cancelled, network, server
            case checksumMismatch, timeout, uploadInProgress
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The file changed since the checkpoint was written, or the checkpoint no longer matches the server.
        public static let cannotResumeUpload = Code(.cannotResumeUpload)
        /// The credentials expired and no fresh ones could be had; resume with new ones.
        public static let credentialsExpired = Code(.credentialsExpired)
        /// The local file does not exist or cannot be read.
        public static let fileNotFound = Code(.fileNotFound)
        /// A parameter is out of range or malformed.
        public static let invalidArgument = Code(.invalidArgument)
        /// The upload was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The connection failed (reset, refused, unreachable) and retries ran out.
        public static let network = Code(.network)
        /// The server answered with an error; see ``FerryError/serverCode`` and ``FerryError/httpStatus``.
        public static let server = Code(.server)
        /// The server's checksum of the stored object differs from the one computed on the device.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A request did not finish within its timeout and retries ran out.
        public static let timeout = Code(.timeout)
        /// Another run (another process, or another task in this one) is uploading the same file to the same place:
        /// it holds the upload's checkpoint. Nothing was sent; try again once it has finished.
        public static let uploadInProgress = Code(.uploadInProgress)

        /// The code's name, safe as a metric label.
        public var description: String { base.rawValue }

        /// The code with this ``description`` (an upload queue item's `failureCode` for a failure on the device's
        /// side), or nil for any other name (a server's code).
        public init?(name: String) {
            guard let base = Base(rawValue: name) else { return nil }
            self.base = base
        }
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, for people.
    public var message: String
    /// The HTTP status, when the server answered.
    public var httpStatus: Int?
    /// The S3 error code (`NoSuchUpload`, `SlowDown`, …), when the server sent one.
    public var serverCode: String?
    /// The server's request id, when it sent one.
    public var requestId: String?
    /// The id the client gave the call (sent on every attempt as `amz-sdk-invocation-id`), when the call reached the
    /// retry policy; the server logs it beside its own request id.
    public var clientRequestId: String?
    /// The error underneath, when there is one.
    public var underlying: (any Error & Sendable)?
    /// How long the server asked the client to wait before trying again (`Retry-After`), when it said.
    public var retryAfter: Duration?
    /// The step-specific code a seed-compatible API gave this failure (a publish's `retCode`), when it gave one; the
    /// client's views of the error (`publishCode`) read it.
    package var seedCode: Int?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, httpStatus: Int? = nil, serverCode: String? = nil, requestId: String? = nil,
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.serverCode = serverCode
        self.requestId = requestId
        self.underlying = underlying
    }

    /// `code: message (HTTP status, server code, request id)`.
    public var description: String {
        var text = "\(code): \(message)"
        var details: [String] = []
        if let httpStatus { details.append("HTTP \(httpStatus)") }
        if let serverCode { details.append(serverCode) }
        if let requestId { details.append("request \(requestId)") }
        if let clientRequestId { details.append("client request \(clientRequestId)") }
        if !details.isEmpty { text += " (" + details.joined(separator: ", ") + ")" }
        return text
    }
}
