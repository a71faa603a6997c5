import FerryCore
import Foundation
import Logging

/// A client of any S3-compatible service that takes path-style requests (Ferry's own, AWS S3, MinIO, Ceph RGW,
/// SeaweedFS).
///
/// ```swift
/// let client = ObjectStorageClient(
///     endpoint: URL(string: "http://127.0.0.1:9000")!, region: "us-east-1",
///     credentials: Credentials(accessKeyId: id, secretAccessKey: secret))
/// let handle = try await client.upload(file: movieURL, bucket: "media", key: "movie.mp4")
/// for await event in handle.events { print(event) }
/// let result = try await handle.result
/// ```
public final class ObjectStorageClient: Sendable {
    /// How the client behaves; every field has a default.
    public struct Configuration: Sendable {
        /// The transport. Default: `AsyncHTTPClientTransport` on Linux, ``URLSessionTransport`` on Apple platforms.
        public var transport: any HTTPTransport
        /// Retries for every request.
        public var retryPolicy = RetryPolicy()
        /// What waits between retries sleep on. Default: the continuous clock; tests inject one that does not wait.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// What the client reads the time of day from when it judges whether credentials have expired (a refused
        /// request with credentials past their expiry is refreshed, not retried). Default: the services' time as the
        /// device knows it (``ServiceClock``); tests inject a time of their own instead of waiting for credentials to
        /// expire.
        public var now: @Sendable () -> Date = { ServiceClock.now() }
        /// Time one request may take before it is abandoned and retried. Default 120 s. A request that sends a body (a
        /// part, an object) is abandoned only when its body goes this long without moving (with the AsyncHTTPClient
        /// transport at most 60 s), or its answer 300 s once the body is sent: a slow link that keeps taking a part
        /// is not cut off, and the part sent again from its start, however long it takes.
        public var timeoutIntervalForRequest: Duration = .seconds(120)
        /// How long, at least, a multipart upload's part waits for its answer once its body has been handed to the
        /// network, before the answer is taken as lost (a connection that died silently) and the part sent again.
        /// The wait is four times the longest one the upload's earlier parts took, when that is longer (a slow link's
        /// buffers drain before the answer), at most 300 s; each wait that runs out doubles this shortest wait for the
        /// rest of the upload. The first part answered sets the measure; until then only the transport's limits hold.
        /// Default 60 s.
        public var shortestAnswerWait: Duration = .seconds(60)
        /// The smallest part size a multipart upload uses: a requested size below it (a fixed part size, or adaptive
        /// sizes' bounds) is raised to it. Default 5 MiB, the smallest part but the last that S3 (and Ferry's service
        /// by default) accepts: smaller parts would be refused only when the upload completes. Lower it only for a
        /// service that takes smaller parts.
        public var smallestPartSize: Int64 = UploadPlan.defaultPartSize
        /// Where the library logs (at debug and trace only). Default: a logger that discards everything.
        public var logger = Logger(label: "ferry.client", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Whether payloads are signed (SHA-256 in the signature) instead of `UNSIGNED-PAYLOAD`. Needed by servers
        /// that require it over plain HTTP; costs a hash pass. Default false: the checksum header protects the bytes.
        public var signPayload = false
        /// Told of each retry of any request sent with this configuration (by an ``ObjectStorageClient``, a
        /// ``MediaServiceClient`` made with it, or a ``VideoPublisher`` whose `client` it is), before its wait:
        /// which retry, the failure, the wait. An upload's events report the retries of its own requests too; this
        /// also hears those made before an upload begins (a bucket's check, a video's creation), which no upload
        /// reports. A ``StreamUploader`` has a hook of its own. Default nil.
        public var onRetry: (@Sendable (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void)?
        /// What names the service in checkpoints, so that an interrupted upload resumes only against the service it
        /// began on. Default nil: the endpoint URL. Set it when one service is reached at changing addresses — an
        /// embedded service on a free port, or a service behind several names — so a resume after a restart finds its
        /// checkpoint.
        public var serviceIdentity: String?
        /// Called on the checkpoint writer's queue before each checkpoint write (tests hold a write here to open the
        /// window between a failure and its report).
        var beforeCheckpointWrite: (@Sendable () -> Void)?
        /// Called on an upload's actor once a run that stopped has fixed why (failure, pause or cancel), before it
        /// flushes its checkpoint (tests act in the window that opens there instead of guessing when it opened).
        var stopDecided: (@Sendable () -> Void)?
        /// Called on an upload's actor once it has taken in a pause, a cancel, or a caller that waits for the result
        /// (tests act once the upload has it instead of guessing when it arrived).
        var controlTaken: (@Sendable (ResumableUploadTask.Control) -> Void)?

        /// The defaults.
        public init() {
            transport = platformDefaultTransport()
        }
    }

    /// The service's base URL, e.g. `http://127.0.0.1:9000`.
    public let endpoint: URL
    /// The signing region.
    public let region: String
    /// Where credentials come from.
    public let credentialProvider: any CredentialProvider
    /// The configuration.
    public let configuration: Configuration

    /// What checkpoints name the service by: ``Configuration/serviceIdentity``, or the endpoint as
    /// ``canonicalEndpoint(_:)`` spells it, so that `http://Host:80/` finds the checkpoint of `http://host`.
    var checkpointServiceIdentity: String { configuration.serviceIdentity ?? Self.canonicalEndpoint(endpoint) }

    /// `endpoint` with its scheme and host in lower case, without the scheme's default port, a trailing `/`, a query or
    /// a fragment: one spelling for every way of writing the same service's address.
    static func canonicalEndpoint(_ endpoint: URL) -> String {
        guard var parts = URLComponents(url: endpoint, resolvingAgainstBaseURL: false), let scheme = parts.scheme?.lowercased()
        else { return endpoint.absoluteString }
        parts.scheme = scheme
        // The host as written (an IPv6 literal keeps its brackets), in lower case.
        parts.percentEncodedHost = parts.percentEncodedHost?.lowercased()
        if (scheme == "http" && parts.port == 80) || (scheme == "https" && parts.port == 443) { parts.port = nil }
        while parts.path.hasSuffix("/") { parts.path.removeLast() }
        parts.query = nil
        parts.fragment = nil
        return parts.string ?? endpoint.absoluteString
    }

    /// Creates a client with a credential provider.
    public init(
        endpoint: URL, region: String = "us-east-1", credentialProvider: any CredentialProvider,
        configuration: Configuration = .init()
    ) {
        self.endpoint = endpoint
        self.region = region
        self.credentialProvider = credentialProvider
        self.configuration = configuration
    }

    /// Creates a client with fixed credentials.
    public convenience init(
        endpoint: URL, region: String = "us-east-1", credentials: Credentials, configuration: Configuration = .init()
    ) {
        self.init(
            endpoint: endpoint, region: region, credentialProvider: StaticCredentialProvider(credentials),
            configuration: configuration)
    }

    /// `host[:port]` as signed.
    var hostHeader: String { HTTPTarget.authority(of: endpoint) ?? "localhost" }

    /// The encoded path of a bucket or object, path-style.
    func path(bucket: String, key: String? = nil) -> String {
        var base = endpoint.path
        if base.hasSuffix("/") { base.removeLast() }
        var path = base + "/" + SigV4.uriEncode(bucket, encodeSlash: true)
        if let key { path += "/" + SigV4.uriEncode(key, encodeSlash: false) }
        return path
    }
}
