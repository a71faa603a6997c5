import FerryCore
import Foundation
import Logging

/// How `ferry serve` (or a test, in-process) runs the service.
public struct FerryServerConfiguration: Sendable {
    /// Where objects, the catalog and the server's keys live. Created when missing.
    public var dataDirectory: String
    /// Address to listen on. Default `127.0.0.1`.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free one. Default 9000.
    public var port: Int = 9000
    /// Region reported to clients and expected in nothing (any region in a signature's scope is accepted).
    /// Default `us-east-1`.
    public var region: String = "us-east-1"
    /// Smallest size of every part but the last. Default 5 MiB, as S3; tests lower it.
    public var minPartSize: Int64 = 5 * 1024 * 1024
    /// Bytes of disk kept free under the data directory's objects: an upload that would leave less is refused (507
    /// `InsufficientStorage`, nothing kept), so that the catalog's commits and the deletes that free space still fit.
    /// Default 64 MiB; 0 turns the check off. Not used with a `--store` (its blobs are elsewhere).
    public var minFreeBytes: Int64 = 64 * 1024 * 1024
    /// Root credentials; nil reads `FERRY_ACCESS_KEY_ID` / `FERRY_SECRET_ACCESS_KEY` or, when those are unset,
    /// the pair stored in the data directory, generating it on first start.
    public var rootCredentials: SigV4Credentials?
    /// Multipart uploads idle (not completed) longer than this are aborted. Default 7 days.
    public var multipartUploadMaxAge: TimeInterval = 7 * 24 * 3600
    /// Seconds a bucket lifecycle rule counts as a day, applied every fifth of that, so tests watch rules apply in
    /// seconds; nil (the default) counts days as S3 does and applies the rules every 10 minutes.
    public var lifecycleDayLength: TimeInterval?
    /// How often the collector looks for idle uploads and orphaned files. Default 1 hour; a shorter
    /// ``multipartUploadMaxAge`` or ``uploadingVideoMaxAge`` has what is past it looked for more often
    /// (``expiryInterval``).
    public var collectionInterval: TimeInterval = 3600
    /// How often the collector also looks for what is past its age alone (idle multipart uploads, videos and images
    /// still uploading): a fifth of the shorter of ``multipartUploadMaxAge`` and ``uploadingVideoMaxAge`` (a second at
    /// the least) when that is less than ``collectionInterval``, so that an age set short is kept to within a fifth
    /// of itself rather than an hour; nil otherwise. Orphaned files are looked for every ``collectionInterval``.
    var expiryInterval: TimeInterval? {
        let fifth = max(1, min(multipartUploadMaxAge, uploadingVideoMaxAge) / 5)
        return fifth < collectionInterval ? fifth : nil
    }
    /// A video or image still `Uploading` this long after it was created becomes `UploadFail`: its partial files are
    /// removed and a `VideoUploadExpired` or `ImageUploadExpired` event is sent (checked by the collector every
    /// ``collectionInterval``, or ``expiryInterval``). Default 7 days.
    public var uploadingVideoMaxAge: TimeInterval = 7 * 24 * 3600
    /// Bucket the media API keeps videos and images in; created on first use. Default `ferry-media`.
    public var mediaBucket: String = "ferry-media"
    /// How long an upload credential (UploadAuth) lasts. Default 3000 s.
    public var uploadAuthLifetime: TimeInterval = 3000
    /// How long a resumable upload (tus, IETF) lives unfinished before it expires and its bytes are removed.
    public var resumableUploadLifetime: TimeInterval = 24 * 3600
    /// The time credentials are issued and judged by: the expiry of upload credentials, session tokens, presigned
    /// URLs and playback tokens, the time skew of signed requests, publish signatures, upload tokens and POST
    /// policies. The system clock; a test moves it instead of waiting.
    public var now: @Sendable () -> Date = { Date() }
    /// Base URL clients reach the object API at, for upload addresses and playback URLs; nil uses the Host of each
    /// request.
    public var publicEndpoint: String?
    /// Whether upload addresses (and the publish API's storage endpoint) name the Host each request came to even when a
    /// ``publicEndpoint`` is set, which then names only playback and download URLs. For a service whose uploads happen
    /// on a port of its own while it runs, and whose URLs are for another server on the same data (the CLI's
    /// in-process service and `ferry serve`). Default false.
    public var uploadAddressesFollowRequests = false
    /// Logger for the server; request logs are at debug.
    public var logger: Logger = Logger(label: "ferry.server")
    /// Where to deliver webhook events (signed POSTs, persisted in the catalog and retried until acknowledged);
    /// nil (the default) disables webhooks: nothing is enqueued or delivered.
    public var webhook: WebhookConfiguration?
    /// Time a form upload's callback to the app server (the put policy's `callbackUrl`) has to answer, from
    /// connecting to the end of its response; when it runs out the upload answers 579 (the file stays stored).
    /// Default 5 s.
    public var formCallbackTimeout: Duration = .seconds(5)
    /// Timeouts for idle connections and slow bodies, and the most connections held at once.
    public var connectionLimits = ConnectionLimits()
    /// Hosts (`hooks.internal`), addresses and networks (`10.1.0.0/16`, `fd00::/8`) that form upload callbacks may
    /// reach although they are not public. By default a callback goes only to public addresses: never to loopback,
    /// link-local (cloud metadata), private, shared, multicast or reserved ranges, nor to this host's own addresses.
    /// Default: none.
    public var callbackAllow: [String] = []
    /// Addresses and networks (`10.0.0.0/8`) of the proxies or load balancers in front of the server whose
    /// `X-Forwarded-For` it believes: a request from one of them is counted (the console's sign-in throttle) and
    /// logged as from the address they saw. Default: none (every request is from its connection's peer).
    public var trustedProxies: [String] = []
    /// Origins (`https://app.example.com`, or `*`) whose pages may call the object, media, publish and form upload APIs
    /// from a browser (``CrossOriginPolicy``); other origins get only what a bucket's CORS configuration allows.
    /// Default: none.
    public var corsOrigins: [String] = []
    /// A PostgreSQL catalog (`postgres://user[:password]@host[:port]/database`) for videos, images, access keys, media
    /// jobs and webhook events, shared by several nodes; nil keeps them in the data directory's SQLite catalog. Open a
    /// server with one through ``FerryServer/open(configuration:environment:)``.
    public var catalogURL: String?
    /// How uploaded videos are processed: probe, cover, renditions (ffmpeg and ffprobe).
    public var mediaProcessing = MediaProcessingConfiguration()
    /// An S3-compatible store (SeaweedFS, Ceph RGW, MinIO, AWS S3) for the bytes of objects, parts and media outputs;
    /// nil keeps them as files in the data directory. The bucket is created when missing. Open a server with one
    /// through ``FerryServer/open(configuration:environment:)``.
    public var objectStore: S3StoreLocation?
    /// With an ``objectStore`` and a shared catalog, how long the bytes of a replaced or deleted object stay in the
    /// store, so that downloads other nodes started before the change finish. Default 15 minutes.
    public var sharedBlobGrace: Duration = .seconds(900)
    /// What this node does: everything (the default), only the APIs, or only background work. A node that does part
    /// of the work shares it with the others through a PostgreSQL ``catalogURL`` and an ``objectStore``.
    public var role: NodeRole = .all
    /// The bearer token Prometheus must send for `GET /metrics`; nil serves the series to anyone who can reach the
    /// port. Never logged.
    public var metricsToken: String?
    /// A port of its own for `GET /metrics` (on ``host``), where nothing else is served; nil (the default) serves the
    /// series on ``port`` with everything else. A worker node, which listens on no other port, serves them there.
    public var metricsPort: Int?

    /// Creates a configuration for a data directory.
    public init(dataDirectory: String) {
        self.dataDirectory = dataDirectory
    }
}

extension FerryServerConfiguration: CustomReflectable {
    /// A mirror without the catalog URL's password (services are described this way in debug logs).
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "dataDirectory": dataDirectory, "host": host, "port": port, "region": region,
                "catalogURL": catalogURL.map(Self.redactingPassword) as Any, "rootCredentials": rootCredentials as Any,
                "webhook": webhook as Any, "publicEndpoint": publicEndpoint as Any, "mediaProcessing": mediaProcessing,
                "connectionLimits": connectionLimits, "callbackAllow": callbackAllow, "trustedProxies": trustedProxies,
                "metricsToken": metricsToken == nil ? "nil" : "<redacted>",
                "objectStore": objectStore.map { "s3://\($0.bucket)/\($0.prefix) at \($0.endpoint)" } as Any,
            ], displayStyle: .struct)
    }

    /// A URL with its password replaced by `<redacted>`; one that cannot be read, whole.
    static func redactingPassword(_ text: String) -> String {
        guard var components = URLComponents(string: text) else { return "<redacted>" }
        guard components.password != nil else { return text }
        components.password = "redacted"
        return components.string ?? "<redacted>"
    }
}

/// What one `ferry serve` node does, so that media workers scale apart from the nodes that answer requests.
public enum NodeRole: String, Sendable, CaseIterable {
    /// Answers every API and runs the background work: media jobs, webhook delivery, the collector. The default, and
    /// the only role a node on its own (SQLite, files in its data directory) can have.
    case all
    /// Answers every API and delivers webhooks and collects unfinished uploads, but runs no media job (never ffmpeg):
    /// the jobs it queues are run by worker nodes.
    case api
    /// Runs media jobs, webhook delivery and the collector; listens on no port.
    case worker

    /// Why this role cannot run with `configuration`, or nil when it can: a node that does part of the work needs
    /// the PostgreSQL catalog and the object store the others use.
    public func refusal(for configuration: FerryServerConfiguration) -> String? {
        guard self != .all else { return nil }
        guard configuration.catalogURL != nil, configuration.objectStore != nil else {
            return "--role \(rawValue) shares work with other nodes: it needs --catalog (PostgreSQL) and --store."
        }
        if self == .worker, configuration.mediaProcessing.workers <= 0 {
            return "--role worker runs media jobs: --media-workers must be at least 1."
        }
        return nil
    }
}
