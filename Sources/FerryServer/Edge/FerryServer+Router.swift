import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// The edge: one Hummingbird router whose groups are Ferry's dialects, each with its middleware (docs/architecture.md
/// draws them). S3 is the catch-all: routed at `/` and `/**`, it also answers every request no route matched
/// (``UnroutedRequestMiddleware``), so any method and any path gets an answer in some dialect.
extension FerryServer {
    /// The methods the groups route: every method the HTTP/1.1 parser accepts, so that a group answers any method in
    /// its own dialect (the S3 catch-all also takes requests whose path ends below a group's fixed segments).
    static let routedMethods: [HTTPRequest.Method] = [
        "GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "COPY", "LOCK", "UNLOCK", "MOVE",
        "MKCOL", "PROPFIND", "PROPPATCH", "SEARCH", "REPORT", "MERGE", "PURGE", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE",
        "BIND", "REBIND", "UNBIND", "ACL", "LINK", "UNLINK", "MKACTIVITY", "CHECKOUT", "MKCALENDAR", "M-SEARCH", "SOURCE",
        "QUERY",
    ].compactMap { HTTPRequest.Method($0) }

    func makeRouter() -> Router<FerryRequestContext> {
        let router = Router(context: FerryRequestContext.self)
        let media = mediaAPI
        let objects = objectAPI
        let sessions = ConsoleSessions(credentials: credentials)
        let console = ConsoleAPI(media: media, sessions: sessions, site: ConsoleSite.shared)
        let crossOrigin = CrossOriginMiddleware(policy: CrossOriginPolicy(origins: configuration.corsOrigins))
        let consoleHeaders = AnswerMiddleware.consoleHeaders(console)
        let authenticator = RequestAuthenticator(credentials: credentials, region: configuration.region)
        let requestRate = RequestRateMiddleware(limiter: requestRates)
        let all = Self.routedMethods
        let allBut = { (kept: [HTTPRequest.Method]) in all.filter { !kept.contains($0) } }
        let notPost = { (api: String) in
            refusing(MediaError("MethodNotAllowed", "\(api) operations are POST requests.", status: 405))
        }

        // Every request: the isolation of what it is answered and its pacing, its id, its client's address behind
        // trusted proxies, then its access log record, then its metrics, then its span (which continues the caller's
        // `traceparent`), all before the groups, so that they see every answer, refusals included.
        router.add(middleware: AnswerMiddleware.contentIsolation)
        router.add(middleware: AnswerPacingMiddleware())
        router.add(middleware: RequestIdMiddleware(logLevel: configuration.logger.logLevel))
        if !trustedProxies.networks.isEmpty { router.add(middleware: ForwardedClientMiddleware(proxies: trustedProxies)) }
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: MetricsMiddleware(metrics: metrics))
        router.add(middleware: RequestTracingMiddleware())

        // The object API: S3's catch-all.
        let s3 = MiddlewareChain(
            middleware: [
                RouteGroupMiddleware(name: S3Dialect().name), crossOrigin, AnswerMiddleware.bucketCrossOrigin(objects),
                ErrorEnvelopeMiddleware(dialect: S3Dialect()),
                S3OperationMiddleware(), AuthorityMiddleware(), S3AuthenticationMiddleware(authenticator: authenticator),
                requestRate,
            ],
            responder: { request, context in try await objects.respond(to: request, context: context) })
        for path: RouterPath in ["/", "/**", "/s3", "/s3/**"] {
            for method in all { router.on(path, method: method, responder: s3) }
        }

        // The media API: other methods and unknown paths refused before authentication, actions after it.
        let v1 = router.group("/_ferry/v1", MediaDialect(name: "media"), outer: [crossOrigin])
        v1.on(["", "{action}"], methods: allBut([.post]), use: notPost("Media API"))
        v1.on(["{action}/**", "GetServiceStatus/**"], methods: all) { request, _ -> Response in
            throw MediaAPI.invalidAction(request.uri.path.dropFirst(MediaAPI.pathPrefix.count))
        }
        // GetServiceStatus reads nothing from its body: it also answers GET (a status page, a probe).
        v1.on(
            ["GetServiceStatus"], methods: allBut([.get, .post]),
            use: refusing(MediaError("MethodNotAllowed", "GetServiceStatus answers GET and POST requests.", status: 405)))
        v1.add(middleware: MediaActionMiddleware())
        v1.add(middleware: MediaAuthenticationMiddleware(authenticator: authenticator))
        v1.add(middleware: requestRate)
        v1.on(["", "{action}"], methods: [.post]) { request, context in
            try await media.respond(action: context.parameters.get("action") ?? "", request: request, context: context)
        }
        v1.on(["GetServiceStatus"], methods: [.get, .post]) { request, context in
            try await media.respond(action: "GetServiceStatus", request: request, context: context)
        }

        // The publish API: its two actions need a publish signature; anything else is refused without one.
        let publish = PublishAPI(media: media)
        let ugc = router.group("/_ferry/ugc", MediaDialect(name: "publish"), outer: [crossOrigin])
        ugc.on(
            ["", "{action}", "{action}/**", "ApplyUploadUGC", "CommitUploadUGC"], methods: allBut([.post]),
            use: notPost("Publish API"))
        ugc.on(["", "{action}", "{action}/**"], methods: [.post]) { request, _ -> Response in
            throw PublishAPI.invalidAction(request.uri.path.dropFirst(PublishAPI.pathPrefix.count))
        }
        ugc.add(middleware: PublishSignatureMiddleware(credentials: credentials))
        ugc.add(middleware: requestRate)
        for action in ["ApplyUploadUGC", "CommitUploadUGC"] {
            ugc.post(RouterPath(action)) { request, context in
                try await publish.respond(action: action, request: request, context: context)
            }
        }

        // Resumable uploads: tus 1.0 and the IETF draft on one resource. Creation is signed or carries a media upload
        // URL's grant; the upload's URL is the credential of what follows. Bodies stream, so no `100 Continue` before
        // the route has checked the request.
        let resumable = resumableUploadAPI
        let uploads = router.group("/_ferry/uploads", ResumableDialect(), outer: [crossOrigin], continues: false)
        let creation: [RouterPath] = ["grant/{grant}", "s3/**"]
        uploads.on(["", "{id}"] + creation, methods: [.options]) { request, _ in try resumable.options(request) }
        uploads.on(["grant/{grant}"], methods: [.post, .put]) { request, context in
            try await resumable.create(request, context: context, creator: .grant(try context.parameters.require("grant")))
        }
        uploads.on(["s3/**"], methods: [.post, .put]) { request, context in
            let path = String(request.uri.path.dropFirst((ResumableUploadAPI.pathPrefix + "s3").count))
            return try await resumable.create(request, context: context, creator: .signed(path: path))
        }
        uploads.head("{id}") { request, context in try await resumable.head(request, context: context, id: try context.parameters.require("id")) }
        uploads.patch("{id}") { request, context in try await resumable.patch(request, context: context, id: try context.parameters.require("id")) }
        uploads.delete("{id}") { request, context in try await resumable.delete(request, context: context, id: try context.parameters.require("id")) }
        uploads.post("{id}") { request, context in
            try await resumable.overridden(request, context: context, id: try context.parameters.require("id"))
        }
        /// A 405 of the upload URLs, naming the methods the resource answers.
        @Sendable func notAllowed(_ message: String, _ request: Request, upload: Bool) -> ResumableRefusal {
            ResumableRefusal(
                .methodNotAllowed, message, wire: (try? ResumableWire.of(request.headers)) ?? nil,
                headers: [.allow: upload ? ResumableUploadAPI.uploadMethods : ResumableUploadAPI.creationMethods])
        }
        let others = all.filter { ![.options, .head, .patch, .delete, .post, .put].contains($0) }
        uploads.on(["", "{id}"] + creation, methods: others) { request, context -> Response in
            throw notAllowed(
                "This upload resource does not answer \(request.method.rawValue).", request,
                upload: context.parameters.get("id") != nil)
        }
        uploads.on([""], methods: [.post, .put]) { request, context in
            try await resumable.create(request, context: context, creator: .uploadToken)
        }
        uploads.on([""], methods: [.head, .patch, .delete]) { request, _ -> Response in
            throw notAllowed(
                "Create uploads here with an upload token, at /_ferry/uploads/s3/<bucket>/<key> signed, or at a media "
                    + "upload URL.", request, upload: false)
        }
        uploads.on(["{id}"], methods: [.put]) { request, _ -> Response in
            throw notAllowed("An upload answers HEAD, PATCH, DELETE and OPTIONS.", request, upload: true)
        }
        uploads.on(["grant/{grant}"], methods: [.head, .patch, .delete]) { request, _ -> Response in
            throw notAllowed("An upload URL takes POST (tus) or an IETF upload creation.", request, upload: false)
        }
        uploads.on(["s3/**"], methods: [.head, .patch, .delete]) { request, _ -> Response in
            throw notAllowed("A signed creation takes POST (tus) or an IETF upload creation.", request, upload: false)
        }
        uploads.on(["{id}/**", "grant/{grant}/**", "grant", "s3"], methods: all) { request, _ -> Response in
            throw ResumableRefusal(.notFound, "No upload has this URL.", wire: (try? ResumableWire.of(request.headers)) ?? nil)
        }

        // Form uploads.
        let form = formUploadAPI
        let forms = router.group("/_ferry/form", FormDialect(), outer: [crossOrigin], smallBodies: false)
        forms.on(
            [""], methods: allBut([.post]),
            use: refusing(FormUploadError(.methodNotAllowed, "Form uploads are POST requests.")))
        forms.post("") { request, context in
            try await form.upload(request, requestId: context.requestId, logger: context.logger)
        }

        // Playback: any origin may read it (the URL is the credential).
        removeAbandonedPreviewWork()
        let playback = PlaybackAPI(media: media, previews: previewRenderer)
        let play = router.group(
            "/_ferry/play", S3Dialect(namesResource: false), outer: [AnswerMiddleware.playbackCrossOrigin],
            continues: false)
        play.on(["", "**"], methods: all) { request, context in
            try await playback.answer(request, connection: context.channel)
        }

        // Metrics, for Prometheus, unless they have a port of their own; the same path signed for S3 is the bucket
        // `metrics`.
        if configuration.metricsPort == nil {
            let series = metricsEndpoint
            router.group("/metrics", TextDialect(name: "metrics"), checksHost: false, continues: false)
                .get("") { request, context in
                    guard MetricsEndpoint.isScrape(request) else { return try await s3.respond(to: request, context: context) }
                    return await series.respond(to: request)
                }
        }

        // Health, for load balancers: 200 while this node serves, reaches its catalog and can write its blobs, 503
        // otherwise. An answer serves for a second: checks are unauthenticated, and each one a catalog query.
        let lastCheck = NIOLockedValueBox<(at: ContinuousClock.Instant, problem: String?)?>(nil)
        router.group("/_ferry/health", TextDialect(name: "health"), checksHost: false, continues: false)
            .on([""], methods: all) { _, _ in await healthAnswer(lastCheck) }

        // The console: its files, its session, the media API for the session, and the part-signing endpoints.
        let site = router.group(
            "/console", TextDialect(name: "console"), outer: [AnswerMiddleware.consoleHeaders(console, noStore: false)],
            checksHost: false, continues: false)
        site.on(["", "**"], methods: all) { request, _ in console.file(request) }
        let session = router.group("/_ferry/console/session", MediaDialect(name: "console"), outer: [consoleHeaders])
        session.on([""], methods: all) { request, context in try await console.session(request, context: context) }
        let consoleAPI = router.group("/_ferry/console/api", MediaDialect(name: "console"), outer: [consoleHeaders])
        consoleAPI.on(["{action}"], methods: allBut([.post]), use: notPost("Console API"))
        consoleAPI.add(middleware: ConsoleSessionMiddleware(sessions: sessions)).add(middleware: requestRate)
        // The media API's operation for the session ``ConsoleSessionMiddleware`` verified.
        consoleAPI.post("{action}") { request, context in
            try await media.respond(action: try context.parameters.require("action"), request: request, context: context)
        }
        addSigningRoutes(
            router.group("/s3/multipart", SigningDialect(), outer: [consoleHeaders])
                .add(middleware: ConsoleSessionMiddleware(sessions: sessions, csrfOnEveryRequest: false, acceptsUppy: true))
                .add(middleware: requestRate),
            MultipartSigningAPI(media: media))

        // Any other path of Ferry's own, also below the groups' fixed segments, is a JSON 404.
        router.group("/_ferry", MediaDialect(name: "ferry"), checksHost: false, continues: false).on(
            [
                "", "**", "health/**", "form/**", "console", "console/**", "console/session/**", "console/api",
                "console/api/{action}/**",
            ],
            methods: all, use: refusing(MediaError("NotFound", "No Ferry endpoint has this path.", status: 404)))

        // Last, so that it stands only in front of the not-found responder.
        router.add(middleware: UnroutedRequestMiddleware(s3: s3))
        return router
    }

    /// The part-signing endpoints Uppy calls; any other method or path below them is `NotFound`.
    private func addSigningRoutes(_ sign: RouterGroup<FerryRequestContext>, _ signing: MultipartSigningAPI) {
        let all = Self.routedMethods
        let notFound = refusing(MultipartSigningAPI.notFound)
        sign.post("") { request, context in try await signing.create(request, context: context) }
        sign.get("{uploadId}") { request, context in try await signing.listParts(request, context: context) }
        sign.delete("{uploadId}") { request, context in try await signing.abort(request, context: context) }
        sign.get("{uploadId}/{partNumber}") { request, context in try await signing.signPart(request, context: context) }
        sign.get("{uploadId}/complete") { request, context in try await signing.signPart(request, context: context) }
        sign.post("{uploadId}/complete") { request, context in try await signing.complete(request, context: context) }
        for (path, routed) in [
            ("", [HTTPRequest.Method.post]), ("{uploadId}", [.get, .delete]), ("{uploadId}/{partNumber}", [.get]),
            ("{uploadId}/complete", [.get, .post]), ("{uploadId}/{partNumber}/**", []), ("{uploadId}/complete/**", []),
        ] {
            sign.on([RouterPath(path)], methods: all.filter { !routed.contains($0) }, use: notFound)
        }
    }

    /// How long writes to the SQLite catalog may wait for another process's lock before the node is unhealthy.
    static let lockedCatalogWait: Duration = .seconds(2)

    /// A route that refuses every request with `error`, which the group's dialect renders.
    private func refusing(_ error: some Error) -> @Sendable (Request, FerryRequestContext) async throws -> Response {
        { _, _ in throw error }
    }

    /// The health check's answer within two seconds: a catalog that does not answer (a PostgreSQL pool waiting for a
    /// connection) is a 503 at once, not a request held open that also holds up the node's shutdown; so is a SQLite
    /// catalog whose writes have waited two seconds for a lock another process holds (its reads still answer).
    private func healthAnswer(_ lastCheck: NIOLockedValueBox<(at: ContinuousClock.Instant, problem: String?)?>) async
        -> Response
    {
        let (store, media) = (self.store, self.mediaCatalog)
        var problem: String?
        if let wait = catalog.lockWait, wait >= Self.lockedCatalogWait {
            problem = "catalog locked by another process"
        } else if let last = lastCheck.withLockedValue({ $0 }), ContinuousClock.now - last.at < .seconds(1) {
            problem = last.problem
        } else {
            // The catalogs answer (the node's own and the media catalog, PostgreSQL's when it is set) and the blob
            // storage passes its probe: a node that can take no upload is out.
            async let catalog = withTimeLimit(.seconds(2)) {
                guard (try? await store.listBuckets()) != nil else { return false }
                do {
                    _ = try await media.video("")
                    return true
                } catch {
                    return false
                }
            } ?? false
            async let blobs = withTimeLimit(.seconds(2)) { (try? await store.probeBlobStorage()) != nil } ?? false
            let (catalogAnswers, blobsAnswer) = await (catalog, blobs)
            problem = !catalogAnswers ? "catalog unavailable" : !blobsAnswer ? "object store unavailable" : nil
            lastCheck.withLockedValue { $0 = (ContinuousClock.now, problem) }
        }
        return Response(
            status: problem == nil ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
            body: .init(byteBuffer: ByteBuffer(string: (problem ?? "ok") + "\n")))
    }
}

extension RouterMethods where Context == FerryRequestContext {
    /// Routes each of `paths` to `handler` for each of `methods`.
    @discardableResult
    func on(
        _ paths: [RouterPath], methods: [HTTPRequest.Method],
        use handler: @escaping @Sendable (Request, FerryRequestContext) async throws -> some ResponseGenerator
    ) -> Self {
        for path in paths {
            for method in methods { on(path, method: method, use: handler) }
        }
        return self
    }
}

extension Router where Context == FerryRequestContext {
    /// A route group at `path` speaking `dialect`: `outer` middleware first (headers every answer carries, refusals
    /// included), then the dialect's envelope, the Host check, and `100 Continue` at once for groups that read their
    /// bodies before deciding anything (JSON bodies unless `smallBodies` is false).
    func group(
        _ path: RouterPath, _ dialect: some Dialect, outer: [any MiddlewareProtocol<Request, Response, FerryRequestContext>] = [],
        checksHost: Bool = true, continues: Bool = true, smallBodies: Bool = true
    ) -> RouterGroup<FerryRequestContext> {
        let group = self.group(path)
        group.add(middleware: RouteGroupMiddleware(name: dialect.name))
        for middleware in outer { group.add(middleware: middleware) }
        group.add(middleware: ErrorEnvelopeMiddleware(dialect: dialect))
        if checksHost { group.add(middleware: AuthorityMiddleware()) }
        if continues { group.add(middleware: ContinueMiddleware(smallBodies: smallBodies)) }
        return group
    }
}

extension AnswerMiddleware {
    /// The CORS configuration of the addressed bucket (PutBucketCors) on the object API's answers to cross-origin
    /// requests, refusals included; origins the server-wide policy allows override it.
    static func bucketCrossOrigin(_ objects: ObjectAPI) -> AnswerMiddleware {
        AnswerMiddleware { response, request in
            if request.method != .options, request.headers[.origin] != nil,
                let bucket = try? ObjectAPI.splitPath(request.uri.path).bucket, !bucket.isEmpty,
                let cors = await objects.corsHeaders(for: request, bucket: bucket)
            {
                for field in cors { response.headers[field.name] = field.value }
            }
        }
    }
}
