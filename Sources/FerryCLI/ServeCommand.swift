import ArgumentParser
import FerryCore
import FerryServer
import Foundation
import Hummingbird
import Logging
import OTel
import ServiceLifecycle

/// `ferry serve`: runs the object service until SIGINT or SIGTERM.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the Ferry service (S3-compatible object API).",
        discussion: """
            Options fall back to FERRY_DATA_DIR, FERRY_HOST, FERRY_PORT, FERRY_MIN_PART_SIZE, FERRY_MIN_FREE_BYTES, \
            FERRY_REGION, \
            FERRY_WEBHOOK_URL, FERRY_PUBLIC_ENDPOINT, FERRY_CALLBACK_ALLOW, FERRY_TRUSTED_PROXIES, FERRY_IDLE_TIMEOUT, \
            FERRY_BODY_TIMEOUT, \
            FERRY_MAX_CONNECTIONS, FERRY_MAX_CONNECTIONS_PER_ADDRESS, FERRY_UPLOADING_VIDEO_MAX_AGE, FERRY_FFMPEG, FERRY_MEDIA_WORKERS, \
            FERRY_TRANSCODE_TEMPLATES, FERRY_MEDIA_JOB_TIMEOUT, FERRY_MAX_TRANSCODE_DURATION, FERRY_MEDIA_LEASE, FERRY_MEDIA_IDLE_SCHEDULING, \
            FERRY_CATALOG_URL, FERRY_STORE, FERRY_ROLE, FERRY_METRICS_TOKEN, \
            FERRY_STORE_ENDPOINT, FERRY_STORE_REGION, FERRY_CORS_ORIGINS, FERRY_FIRST_STREAM_RETENTION, \
            FERRY_SHUTDOWN_TIMEOUT and FERRY_LOG_LEVEL, then to the defaults shown; the webhook secret comes from \
            FERRY_WEBHOOK_SECRET. Root \
            credentials come from FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY (both, or neither); when unset, a \
            pair is generated on first start, stored in the data directory (mode 0600) and printed once.
            """)

    @Option(name: .customLong("data-dir"), help: "Data directory (objects, catalog, keys). Default ~/.ferry.")
    var dataDirectory: String?

    @Option(help: "Address to listen on. Default 127.0.0.1.")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free port. Default 9000.")
    var port: Int?

    @Option(name: .customLong("min-part-size"), help: "Smallest size in bytes of every multipart part but the last. Default 5242880.")
    var minPartSize: Int64?

    @Option(name: .customLong("min-free-bytes"), help: "Bytes of disk kept free under the data directory: an upload that would leave less is refused (507 InsufficientStorage) so that deletes and the catalog still fit; 0 turns the check off. Default 67108864 (64 MiB).")
    var minFreeBytes: Int64?

    @Option(help: "Region the service reports. Default us-east-1.")
    var region: String?

    @Option(name: .customLong("multipart-max-age"), help: "Seconds after which an unfinished S3 multipart upload is aborted (tus and IETF uploads end at their own Upload-Expires); checked hourly, or every fifth of this when shorter. Default 604800 (7 days).", transform: EnvironmentNumber.decimal)
    var multipartMaxAge: Double?

    @Option(
        name: .customLong("resumable-upload-expiry"),
        help: "Seconds a resumable upload (tus, IETF) lives unfinished before it expires and its bytes are removed. Default 86400 (24 hours).", transform: EnvironmentNumber.decimal)
    var resumableUploadExpiry: Double?

    @Option(
        name: .customLong("lifecycle-day"),
        help: "Seconds a bucket lifecycle rule counts as one day, to watch rules apply quickly when testing. Default: days as S3 counts them.", transform: EnvironmentNumber.decimal)
    var lifecycleDay: Double?

    @Option(
        name: .customLong("uploading-video-max-age"),
        help: "Seconds a video or image may stay Uploading; then what arrived of it is removed, it becomes UploadFail and a VideoUploadExpired or ImageUploadExpired event is sent (or FERRY_UPLOADING_VIDEO_MAX_AGE); checked hourly, or every fifth of this when shorter. Default 604800 (7 days).", transform: EnvironmentNumber.decimal)
    var uploadingVideoMaxAge: Double?

    @Option(name: .customLong("webhook-url"), help: "URL that receives signed event POSTs (or FERRY_WEBHOOK_URL); the secret comes from FERRY_WEBHOOK_SECRET.")
    var webhookURL: String?

    @Option(name: .customLong("public-endpoint"), help: "Base URL clients reach this service at, for upload addresses and playback URLs (or FERRY_PUBLIC_ENDPOINT). Default: the Host of each request.")
    var publicEndpoint: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. Default info.")
    var logLevel: String?

    @Option(name: .customLong("idle-timeout"), help: "Seconds an open connection may wait for a request (or FERRY_IDLE_TIMEOUT). Default 30.", transform: EnvironmentNumber.decimal)
    var idleTimeout: Double?

    @Option(name: .customLong("body-timeout"), help: "Seconds of each window in which a request body must progress by at least 1 KiB (counted while the service reads it; a body that stops is cut off one to two windows after its last bytes), and in which an answer must be taken by the client, or the connection is closed (or FERRY_BODY_TIMEOUT). Default 30.", transform: EnvironmentNumber.decimal)
    var bodyTimeout: Double?

    @Option(name: .customLong("max-connections"), help: "Connections held at once (or FERRY_MAX_CONNECTIONS). Default 1024.")
    var maxConnections: Int?

    @Option(name: .customLong("max-connections-per-address"), help: "Connections held at once from one client address (or FERRY_MAX_CONNECTIONS_PER_ADDRESS); behind a proxy, raise it to --max-connections. Default 256.")
    var maxConnectionsPerAddress: Int?

    @Option(
        name: .customLong("callback-allow"),
        help: "A host, address or network (10.1.0.0/16) form upload callbacks may reach although it is not public; repeat for more (or FERRY_CALLBACK_ALLOW, comma-separated). Default: public addresses only.")
    var callbackAllow: [String] = []

    @Option(
        name: .customLong("trusted-proxy"),
        help: "An address or network (10.0.0.0/8) of a proxy or load balancer in front of the server whose X-Forwarded-For names the client; repeat for more (or FERRY_TRUSTED_PROXIES, comma-separated). Default: none.")
    var trustedProxies: [String] = []

    @Option(
        name: .customLong("cors-origin"),
        help: "An origin (https://app.example.com, or *) whose pages may call the object and media APIs from a browser; repeat for more (or FERRY_CORS_ORIGINS, comma-separated). Default: none.")
    var corsOrigins: [String] = []

    @Option(name: .customLong("catalog"), help: "PostgreSQL catalog shared by several nodes, postgres://user[:password]@host:port/database (or FERRY_CATALOG_URL). Default: SQLite in the data directory.")
    var catalogURL: String?

    @Option(name: .customLong("store"), help: "Keep object bytes in an S3-compatible store, s3://BUCKET[/PREFIX] (or FERRY_STORE); needs --store-endpoint, and the store's key in FERRY_STORE_ACCESS_KEY_ID and FERRY_STORE_SECRET_ACCESS_KEY. Default: files in the data directory.")
    var store: String?

    @Option(name: .customLong("store-endpoint"), help: "URL of the S3-compatible store, e.g. http://127.0.0.1:8333 (or FERRY_STORE_ENDPOINT).")
    var storeEndpoint: String?

    @Option(name: .customLong("store-region"), help: "Region requests to the store are signed for (or FERRY_STORE_REGION). Default us-east-1.")
    var storeRegion: String?

    @Option(name: .customLong("ffmpeg"), help: "Directory holding ffmpeg and ffprobe (or FERRY_FFMPEG). Default: found on PATH.")
    var ffmpegDirectory: String?

    @Option(
        name: .customLong("role"),
        help: "What this node does (or FERRY_ROLE): all (the default), api (answers requests, runs no media job) or worker (runs media jobs, webhook delivery and the collector; listens on no port). api and worker need --catalog and --store.")
    var role: String?

    @Option(
        name: .customLong("metrics-token"),
        help: "Bearer token Prometheus must send for GET /metrics (or FERRY_METRICS_TOKEN; an empty one is refused). Default: the series are open to whoever reaches the port.")
    var metricsToken: String?

    @Option(
        name: .customLong("otel-endpoint"),
        help: "Export traces over OTLP/HTTP to this collector (e.g. http://collector:4318; spans go to /v1/traces). Default: the standard OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_* variables; without any, no tracing.")
    var otelEndpoint: String?

    @Option(
        name: .customLong("metrics-port"),
        help: "Serve GET /metrics on this port only (also on a worker node), not on the main port. Default: on the main port.")
    var metricsPort: Int?

    @Option(name: .customLong("media-workers"), help: "Media jobs (probe, cover, transcode; without ffmpeg only the removal of files a stopped node left) run at once, plus one quick-lane worker for every job but transcodes; 0 turns them off (or FERRY_MEDIA_WORKERS). Default: a quarter of the cores, at least 1.")
    var mediaWorkers: Int?

    @Option(name: .customLong("transcode-templates"), help: "JSON file of transcoding template groups (or FERRY_TRANSCODE_TEMPLATES); see docs/api.md. Default: LD 360p, SD 540p, HD 720p, FHD 1080p.")
    var transcodeTemplates: String?

    @Option(name: .customLong("media-job-timeout"), help: "Seconds one ffmpeg or ffprobe run may take before it is killed and its video fails (or FERRY_MEDIA_JOB_TIMEOUT). Default 7200.", transform: EnvironmentNumber.decimal)
    var mediaJobTimeout: Double?

    @Option(name: .customLong("max-transcode-duration"), help: "Seconds of the longest source a template group transcodes; a longer one ends in TranscodeFail (MediaTooLong), its source kept; 0: no limit (or FERRY_MAX_TRANSCODE_DURATION). Default 43200 (12 hours).", transform: EnvironmentNumber.decimal)
    var maxTranscodeDuration: Double?

    @Option(name: .customLong("media-lease"), help: "Seconds a worker's claim on a media job lasts unless renewed; a job whose worker died is taken over after it (or FERRY_MEDIA_LEASE). Default 30.", transform: EnvironmentNumber.decimal)
    var mediaLease: Double?

    @Option(name: .customLong("first-stream-retention"), help: "Seconds a video's first stream (published before its ladder) stays once the ladder has replaced it, for players already on it; then its files are removed (or FERRY_FIRST_STREAM_RETENTION). Default 86400 (24 hours).", transform: EnvironmentNumber.decimal)
    var firstStreamRetention: Double?

    @Option(name: .customLong("shutdown-timeout"), help: "Seconds a graceful shutdown (SIGTERM, SIGINT) gives requests in flight and media jobs; then what still runs is cancelled, and the process exits 10 s later at the latest (or FERRY_SHUTDOWN_TIMEOUT). Default 30.", transform: EnvironmentNumber.decimal)
    var shutdownTimeout: Double?

    func validate() throws {
        if let role, NodeRole(rawValue: role) == nil { throw ValidationError("--role must be all, api or worker.") }
        if let mediaWorkers, !(0...64).contains(mediaWorkers) { throw ValidationError("--media-workers must be between 0 and 64.") }
        if let mediaJobTimeout, !(1...604_800).contains(mediaJobTimeout) {
            throw ValidationError("--media-job-timeout must be between 1 and 604800 seconds.")
        }
        if let maxTranscodeDuration, !(0...1_000_000).contains(maxTranscodeDuration) {
            throw ValidationError("--max-transcode-duration must be between 0 and 1000000 seconds.")
        }
        if let mediaLease, !(1...3600).contains(mediaLease) { throw ValidationError("--media-lease must be between 1 and 3600 seconds.") }
        if let firstStreamRetention, !(0...2_592_000).contains(firstStreamRetention) {
            throw ValidationError("--first-stream-retention must be between 0 and 2592000 seconds (30 days).")
        }
        if let shutdownTimeout, !(1...3600).contains(shutdownTimeout) {
            throw ValidationError("--shutdown-timeout must be between 1 and 3600 seconds.")
        }
        if let port, !(0...65535).contains(port) { throw ValidationError("--port must be between 0 and 65535.") }
        if let minPartSize, minPartSize < 1 { throw ValidationError("--min-part-size must be at least 1.") }
        if let minFreeBytes, minFreeBytes < 0 { throw ValidationError("--min-free-bytes must be 0 or more.") }
        if let logLevel, Logger.Level(rawValue: logLevel.lowercased()) == nil { throw ValidationError("--log-level '\(logLevel)' is not a level.") }
        for (name, value) in [("--idle-timeout", idleTimeout), ("--body-timeout", bodyTimeout)] {
            if let value, !(0.1...86_400).contains(value) { throw ValidationError("\(name) must be between 0.1 and 86400 seconds.") }
        }
        for (name, value) in [("--multipart-max-age", multipartMaxAge), ("--uploading-video-max-age", uploadingVideoMaxAge)] {
            if let value, !(1...315_360_000).contains(value) { throw ValidationError("\(name) must be between 1 and 315360000 seconds.") }
        }
        if let metricsPort, !(1...65_535).contains(metricsPort) {
            throw ValidationError("--metrics-port must be between 1 and 65535.")
        }
        if let resumableUploadExpiry, !(60...31_536_000).contains(resumableUploadExpiry) {
            throw ValidationError("--resumable-upload-expiry must be between 60 seconds and 365 days.")
        }
        if let lifecycleDay, !(1...86_400).contains(lifecycleDay) {
            throw ValidationError("--lifecycle-day must be between 1 and 86400 seconds.")
        }
        if let maxConnections, !(1...1_000_000).contains(maxConnections) {
            throw ValidationError("--max-connections must be between 1 and 1000000.")
        }
        if let maxConnectionsPerAddress, !(1...1_000_000).contains(maxConnectionsPerAddress) {
            throw ValidationError("--max-connections-per-address must be between 1 and 1000000.")
        }
    }

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        let levelName = logLevel ?? env["FERRY_LOG_LEVEL"].flatMap { $0.isEmpty ? nil : $0 } ?? "info"
        guard let level = Logger.Level(rawValue: levelName.lowercased()) else {
            throw ValidationError(
                "FERRY_LOG_LEVEL '\(levelName)' is not a level (trace, debug, info, notice, warning, error, critical).")
        }
        let tracing = try Self.bootstrapTracing(endpoint: otelEndpoint, environment: env)
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = StreamLogHandler.standardError(label: label, metadataProvider: provider)
                handler.logLevel = level
                return handler
            }, metadataProvider: tracing == nil ? nil : OTel.makeLoggingMetadataProvider())
        let directory = dataDirectory ?? env["FERRY_DATA_DIR"] ?? defaultDataDirectory(env)
        var configuration = FerryServerConfiguration(dataDirectory: directory)
        configuration.host = host ?? env["FERRY_HOST"] ?? "127.0.0.1"
        // A setting's flag, else its variable (`EnvironmentNumber`: a value that is not a number in range stops here).
        func number<Number>(
            _ flag: Number?, _ name: String, _ range: ClosedRange<Number>, unit: String = " seconds",
            must: String? = nil
        ) throws -> Number? where Number: LosslessStringConvertible & Comparable {
            try flag ?? EnvironmentNumber.read(name, in: range, unit: unit, must: must, from: env)
        }
        let port = try number(self.port, "FERRY_PORT", 0...65535, unit: "") ?? 9000
        configuration.port = port
        let bytes = (one: "must be a number of bytes, 1 or more", none: "must be a number of bytes, 0 or more")
        if let size = try number(minPartSize, "FERRY_MIN_PART_SIZE", 1...Int64.max, must: bytes.one) {
            configuration.minPartSize = size
        }
        // A typo here would turn off the space kept for deletes: refused, not ignored.
        if let size = try number(minFreeBytes, "FERRY_MIN_FREE_BYTES", 0...Int64.max, must: bytes.none) {
            configuration.minFreeBytes = size
        }
        configuration.region = region ?? defaultRegion(env)
        if let age = multipartMaxAge { configuration.multipartUploadMaxAge = age }
        configuration.lifecycleDayLength = lifecycleDay
        if let resumableUploadExpiry { configuration.resumableUploadLifetime = resumableUploadExpiry }
        if let age = try number(uploadingVideoMaxAge, "FERRY_UPLOADING_VIDEO_MAX_AGE", 1...315_360_000) {
            configuration.uploadingVideoMaxAge = age
        }
        configuration.publicEndpoint = publicEndpoint ?? env["FERRY_PUBLIC_ENDPOINT"]
        if let endpoint = configuration.publicEndpoint {
            do { _ = try PublicEndpoint(parsing: endpoint) } catch { throw ValidationError("\(error)") }
        }
        if let seconds = try number(idleTimeout, "FERRY_IDLE_TIMEOUT", 0.1...86_400) {
            configuration.connectionLimits.idleTimeout = .milliseconds(Int64(seconds * 1000))
        }
        if let seconds = try number(bodyTimeout, "FERRY_BODY_TIMEOUT", 0.1...86_400) {
            configuration.connectionLimits.bodyWindow = .milliseconds(Int64(seconds * 1000))
        }
        if let count = try number(maxConnections, "FERRY_MAX_CONNECTIONS", 1...1_000_000, unit: "") {
            configuration.connectionLimits.maxConnections = count
        }
        let perAddress = "FERRY_MAX_CONNECTIONS_PER_ADDRESS"
        if let count = try number(maxConnectionsPerAddress, perAddress, 1...1_000_000, unit: "") {
            configuration.connectionLimits.maxConnectionsPerAddress = count
        }
        /// The entries of a comma-separated variable, without the spaces around them.
        func listed(_ name: String) -> [String] {
            (env[name] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        configuration.callbackAllow = callbackAllow.isEmpty ? listed("FERRY_CALLBACK_ALLOW") : callbackAllow
        configuration.trustedProxies = trustedProxies.isEmpty ? listed("FERRY_TRUSTED_PROXIES") : trustedProxies
        configuration.corsOrigins = corsOrigins.isEmpty ? listed("FERRY_CORS_ORIGINS") : corsOrigins
        for origin in configuration.corsOrigins {
            do { try CrossOriginPolicy.validate(origin) } catch {
                throw ValidationError("\(corsOrigins.isEmpty ? "FERRY_CORS_ORIGINS" : "--cors-origin"): \(error)")
            }
        }
        if let text = webhookURL ?? env["FERRY_WEBHOOK_URL"] {
            guard HTTPTarget.components(text) != nil, let url = URL(string: text) else {
                // Not echoed: the text may hold a password or a token.
                throw ValidationError("--webhook-url is not an http(s) URL (http[s]://host[:port][/path], port 1-65535).")
            }
            guard let secret = env["FERRY_WEBHOOK_SECRET"], !secret.isEmpty else {
                throw ValidationError("Set FERRY_WEBHOOK_SECRET, the key webhook receivers verify signatures with.")
            }
            configuration.webhook = WebhookConfiguration(url: url, secret: secret)
        }
        var media = try MediaOptions.configuration(
            ffmpeg: ffmpegDirectory, workers: mediaWorkers, templates: transcodeTemplates,
            maxTranscodeDuration: maxTranscodeDuration, environment: env)
        if let seconds = try number(mediaJobTimeout, "FERRY_MEDIA_JOB_TIMEOUT", 1...604_800) {
            media.jobTimeLimit = .milliseconds(Int64(seconds * 1000))
        }
        if let seconds = try number(mediaLease, "FERRY_MEDIA_LEASE", 1...3600) {
            media.lease = .milliseconds(Int64(seconds * 1000))
        }
        if let seconds = try number(firstStreamRetention, "FERRY_FIRST_STREAM_RETENTION", 0...2_592_000) {
            media.firstStreamRetention = .milliseconds(Int64(seconds * 1000))
        }
        configuration.mediaProcessing = media
        configuration.catalogURL = catalogURL ?? env["FERRY_CATALOG_URL"]
        configuration.objectStore = try Self.storeLocation(
            store ?? env["FERRY_STORE"], endpoint: storeEndpoint ?? env["FERRY_STORE_ENDPOINT"],
            region: storeRegion ?? env["FERRY_STORE_REGION"], environment: env)
        // Half a root pair would be dropped without a word, and the stored root key kept.
        let rootHalves = ["FERRY_ACCESS_KEY_ID", "FERRY_SECRET_ACCESS_KEY"].filter { !(env[$0] ?? "").isEmpty }
        if rootHalves.count == 1 {
            throw ValidationError(
                "\(rootHalves[0]) is set without its other half: set both FERRY_ACCESS_KEY_ID and "
                    + "FERRY_SECRET_ACCESS_KEY, or neither to keep the root key the data directory holds.")
        }
        let roleName = role ?? env["FERRY_ROLE"] ?? "all"
        guard let nodeRole = NodeRole(rawValue: roleName) else { throw ValidationError("FERRY_ROLE must be all, api or worker.") }
        configuration.role = nodeRole
        // A token set to nothing (a secret that rendered empty) would leave the series open: refused, not taken as
        // none.
        if let token = metricsToken ?? env["FERRY_METRICS_TOKEN"],
            token.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        {
            throw ValidationError(
                "The metrics token (--metrics-token or FERRY_METRICS_TOKEN) is empty; "
                    + "leave it unset to serve /metrics without one.")
        }
        configuration.metricsToken = metricsToken ?? env["FERRY_METRICS_TOKEN"]
        configuration.metricsPort = metricsPort
        // A worker node opens no main port: its metrics may take that number.
        if nodeRole != .worker, metricsPort == port {
            throw ValidationError("--metrics-port must differ from the service's port (\(port)); leave it out to serve /metrics there.")
        }
        if let reason = nodeRole.refusal(for: configuration) { throw ValidationError(reason) }
        var serverLogger = Logger(label: "ferry")
        serverLogger.logLevel = level
        configuration.logger = serverLogger
        let logger = serverLogger
        // Never more connections than the open-file limit holds: a process out of descriptors is stopped.
        if let openFiles = OpenFileBudget.raiseLimit(),
            let fitted = OpenFileBudget.fitted(configuration.connectionLimits, openFiles: openFiles)
        {
            logger.warning(
                .init(
                    stringLiteral: "fewer connections than --max-connections: the open-file limit holds no more; "
                        + "raise it (ulimit -n, LimitNOFILE)"),
                metadata: [
                    "open-file-limit": "\(openFiles)", "max-connections": "\(fitted.maxConnections)",
                    "max-connections-per-address": "\(fitted.maxConnectionsPerAddress)",
                ])
            configuration.connectionLimits = fitted
        }

        // A port another program holds is said before anything is opened (a root key made, services started).
        for listened in (nodeRole == .worker ? [] : [port]) + (configuration.metricsPort.map { [$0] } ?? []) {
            if let problem = await FerryServer.listenProblem(host: configuration.host, port: listened) {
                let address = "\(HTTPTarget.bracketed(configuration.host)):\(listened)"
                complain("ferry serve: cannot listen on \(address): \(problem).")
                throw ExitCode(ExitCodes.failed)
            }
        }
        let server = try await FerryServer.open(configuration: configuration)
        if server.rootCredentialsGenerated {
            let place = configuration.catalogURL == nil ? "\(directory)/root-credentials.json" : "the PostgreSQL catalog, sealed"
            say("Generated root credentials (stored in \(place), shown only now):")
            say("  FERRY_ACCESS_KEY_ID=\(server.rootCredentials.accessKeyId)")
            say("  FERRY_SECRET_ACCESS_KEY=\(server.rootCredentials.secretAccessKey)")
        }
        if nodeRole != .worker, !FerryServer.consoleInstalled {
            logger.warning(
                "the console's files are not installed: /console/ answers 503",
                metadata: [
                    "fix": .string(
                        "put the Ferry_FerryServer.resources directory of this build beside the ferry binary, "
                            + "or set FERRY_CONSOLE_DIR to its Site directory")
                ])
        }
        if let reason = server.mediaProcessingUnavailable {
            // A worker that cannot run media jobs has nothing to do; a node that also answers requests still serves.
            guard nodeRole != .worker else { throw ValidationError(reason) }
            logger.warning("videos are not processed", metadata: ["reason": .string(reason)])
        }
        var services: [any Service]
        if nodeRole == .worker {
            services = server.makeBackgroundServices()
            logger.info("ferry serve worker running", metadata: ["data-dir": .string(directory)])
            if let port = configuration.metricsPort {
                let address = "http://\(HTTPTarget.bracketed(configuration.host)):\(port)"
                say("ferry serve worker running, serving only GET /metrics on \(address) (data: \(directory))")
            } else {
                say("ferry serve worker running, listening on no port (data: \(directory))")
            }
        } else {
            let host = HTTPTarget.bracketed(configuration.host)
            // Where the root key is, for a server started after another command made it (the first `ferry upload`):
            // only the first start of a data directory prints it.
            let rootFile = "\(directory)/root-credentials.json"
            let keyPlace =
                !server.rootCredentialsGenerated && rootHalves.isEmpty && configuration.catalogURL == nil
                    && FileManager.default.fileExists(atPath: rootFile) ? "; root key in \(rootFile)" : ""
            services = [
                server.runningServices.tracking(server.makeApplication { port in
                    logger.info(
                        "ferry serve listening", metadata: ["address": "http://\(host):\(port)", "data-dir": .string(directory)])
                    say("ferry serve listening on http://\(host):\(port) (data: \(directory)\(keyPlace))")
                }, as: "HTTPServer")
            ]
        }
        if let tracing {
            // First in the group, so that it ends last and exports the spans of everything else's end.
            services.insert(server.runningServices.tracking(tracing, as: "Tracing"), at: 0)
        }
        // SIGTERM or SIGINT asks every service to finish (requests in flight end, media jobs go back to the queue, the
        // catalog closes); whatever has not finished after the shutdown timeout is cancelled, and a process still
        // running 10 s later exits (ShutdownDeadline). Nothing acknowledged depends on a graceful end, so a bounded one
        // beats a node that never exits.
        let grace = try number(shutdownTimeout, "FERRY_SHUTDOWN_TIMEOUT", 1...3600) ?? 30
        let deadline = ShutdownDeadline(limit: .seconds(grace + 10), running: server.runningServices) { number in
            let signal = number == SIGINT ? "SIGINT" : "SIGTERM"
            logger.notice(
                "ferry serve shutting down",
                metadata: ["signal": .string(signal), "timeout": "\(String(format: "%g", grace)) s"])
            server.beginShutdown()
        }
        var group = ServiceGroupConfiguration(
            services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(grace)
        do {
            try await ServiceGroup(configuration: group).run()
        } catch where deadline.signalled != nil && error is CancellationError {
            // A service that ended with the cancellation below: not an error of the server.
        }
        if let signalled = deadline.signalled, ContinuousClock.now - signalled >= .seconds(grace) {
            write(
                "ferry serve: shutdown did not finish within \(String(format: "%g", grace)) s of the signal; "
                    + "what still ran was cancelled.\n", to: .standardError)
        }
        withExtendedLifetime(deadline) {}
    }
}

extension ServeCommand {
    /// The S3-compatible store `--store` names, with its credentials from the environment; nil without `--store`.
    static func storeLocation(_ store: String?, endpoint: String?, region: String?, environment env: [String: String])
        throws -> S3StoreLocation?
    {
        guard let store else { return nil }
        guard let endpoint, HTTPTarget.components(endpoint) != nil else {
            throw ValidationError(
                "--store needs --store-endpoint (or FERRY_STORE_ENDPOINT), the store's http(s) URL (port 1-65535).")
        }
        guard let id = env["FERRY_STORE_ACCESS_KEY_ID"], let secret = env["FERRY_STORE_SECRET_ACCESS_KEY"], !id.isEmpty,
            !secret.isEmpty
        else {
            throw ValidationError("--store needs the store's key in FERRY_STORE_ACCESS_KEY_ID and FERRY_STORE_SECRET_ACCESS_KEY.")
        }
        guard
            let location = S3StoreLocation.parse(
                store, endpoint: endpoint, region: region ?? "us-east-1",
                credentials: SigV4Credentials(accessKeyId: id, secretAccessKey: secret))
        else { throw ValidationError("--store '\(store)' is not of the form s3://BUCKET[/PREFIX].") }
        return location
    }
}

/// How `ferry serve` and the embedded service process videos: flags, then `FERRY_FFMPEG`, `FERRY_MEDIA_WORKERS`,
/// `FERRY_TRANSCODE_TEMPLATES`, `FERRY_MAX_TRANSCODE_DURATION` and `FERRY_MEDIA_IDLE_SCHEDULING`, then the defaults.
enum MediaOptions {
    static func configuration(
        ffmpeg: String? = nil, workers: Int? = nil, templates: String? = nil, maxTranscodeDuration: Double? = nil,
        environment env: [String: String]
    ) throws -> MediaProcessingConfiguration {
        var media = MediaProcessingConfiguration()
        let longest = try maxTranscodeDuration
            ?? EnvironmentNumber.read("FERRY_MAX_TRANSCODE_DURATION", in: 0...1_000_000, unit: " seconds", from: env)
        if let longest { media.maxTranscodeDuration = longest == 0 ? nil : .milliseconds(Int64(longest * 1000)) }
        media.toolsDirectory = ffmpeg ?? env["FERRY_FFMPEG"]
        if let count = try workers ?? EnvironmentNumber.read("FERRY_MEDIA_WORKERS", in: 0...64, from: env) {
            media.workers = count
        }
        if let path = templates ?? env["FERRY_TRANSCODE_TEMPLATES"] {
            do {
                media.templates = try TranscodeTemplates.load(path: path)
            } catch {
                throw ValidationError("--transcode-templates: \(error)")
            }
        }
        // 0 runs the tools at their lowered priority (nice) only, not as SCHED_IDLE, which a machine kept busy by
        // other work starves of CPU altogether (test machines running suites side by side).
        if let text = env["FERRY_MEDIA_IDLE_SCHEDULING"], !text.isEmpty {
            switch text {
            case "0": media.idleScheduling = false
            case "1": media.idleScheduling = true
            default: throw ValidationError("FERRY_MEDIA_IDLE_SCHEDULING must be 0 or 1.")
            }
        }
        return media
    }
}
