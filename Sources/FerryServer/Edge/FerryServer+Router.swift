import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The edge: one Hummingbird router whose groups are Ferry's dialects, each with its middleware.
///
/// ```
/// request ─► RequestId ─► AccessLog ─► (metrics, tracing: their place) ─► route group:
///   /_ferry/v1/{action}          CORS ─► Envelope(media JSON) ─► Authority ─► Continue ─► SigV4(ferry, body) ─► MediaAPI
///   /_ferry/ugc/{action}         CORS ─► Envelope(media JSON) ─► Authority ─► Continue ─► PublishSignature ─► PublishAPI
///   /_ferry/form                 CORS ─► Envelope(Qiniu)      ─► Authority ─► Continue ─► FormUploadAPI (token)
///   /_ferry/play/**              CORS * ─► Envelope(S3 XML)   ─► Authority ─► PlaybackAPI
///   /_ferry/console/session      Headers ─► Envelope(media JSON) ─► Authority ─► Continue ─► ConsoleAPI
///   /_ferry/console/api/{action} Headers ─► Envelope(media JSON) ─► Authority ─► Continue ─► Session+CSRF ─► MediaAPI
///   /s3/multipart/…              Headers ─► Envelope(Uppy JSON) ─► Authority ─► Continue ─► Session ─► MultipartSigningAPI
///   /console/**                  Headers ─► Envelope(text) ─► console files
///   /_ferry/health               Envelope(text) ─► health
///   everything else (S3)         CORS ─► bucket CORS ─► Envelope(S3 XML) ─► Authority ─► SigV4(s3) ─► ObjectAPI
/// ```
///
/// The S3 group is the catch-all: it is routed at `/` and `/**`, and also answers every request no route matched
/// (``UnroutedRequestMiddleware``), so any method and any path gets an answer in some dialect.
extension FerryServer {
    /// The methods the groups route; a request with any other method reaches the S3 catch-all, which refuses it.
    static let routedMethods: [HTTPRequest.Method] = [.get, .head, .put, .post, .delete, .options, .patch]

    func makeRouter() -> Router<FerryRequestContext> {
        let router = Router(context: FerryRequestContext.self)
        let media = mediaAPI
        let objects = objectAPI
        let sessions = ConsoleSessions(credentials: credentials)
        let console = ConsoleAPI(media: media, sessions: sessions, site: ConsoleSite.shared)
        let signing = MultipartSigningAPI(media: media)
        let crossOrigin = CrossOriginMiddleware(policy: CrossOriginPolicy(origins: configuration.corsOrigins))
        let authenticator = RequestAuthenticator(credentials: credentials, region: configuration.region)
        let all = Self.routedMethods
        let allButPost = all.filter { $0 != .post }

        // Every request: its id first, then its access log record. Metrics and tracing middleware go here, after
        // these two and before the groups, so that they see every answer, refusals included.
        router.add(middleware: RequestIdMiddleware())
        router.add(middleware: AccessLogMiddleware())

        // The object API: S3's catch-all.
        let s3 = MiddlewareChain(
            middleware: [
                crossOrigin, BucketCrossOriginMiddleware(objects: objects), ErrorEnvelopeMiddleware(dialect: S3Dialect()),
                AuthorityMiddleware(), S3AuthenticationMiddleware(authenticator: authenticator),
            ],
            responder: { request, context in try await objects.respond(to: request, context: context) })
        for path: RouterPath in ["/", "/**", "/s3", "/s3/**"] {
            for method in all { router.on(path, method: method, responder: s3) }
        }

        // The media API.
        let v1 = router.group("/_ferry/v1").add(middleware: crossOrigin)
            .add(middleware: ErrorEnvelopeMiddleware(dialect: MediaDialect(name: "media")))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
        let mediaPost = MediaError("MethodNotAllowed", "Media API operations are POST requests.", status: 405)
        v1.on("", methods: allButPost, use: refusing(mediaPost))
        v1.on("{action}", methods: allButPost, use: refusing(mediaPost))
        v1.on("{action}/**", methods: all) { request, _ -> Response in
            throw MediaAPI.invalidAction(request.uri.path.dropFirst(MediaAPI.pathPrefix.count))
        }
        v1.add(middleware: MediaAuthenticationMiddleware(authenticator: authenticator))
        v1.post("") { request, context in try await media.respond(action: "", request: request, context: context) }
        v1.post("{action}") { request, context in
            try await media.respond(action: try context.parameters.require("action"), request: request, context: context)
        }

        // The publish API.
        let publish = PublishAPI(media: media)
        let ugc = router.group("/_ferry/ugc").add(middleware: crossOrigin)
            .add(middleware: ErrorEnvelopeMiddleware(dialect: MediaDialect(name: "publish")))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
        let publishPost = MediaError("MethodNotAllowed", "Publish API operations are POST requests.", status: 405)
        for path: RouterPath in ["", "{action}", "ApplyUploadUGC", "CommitUploadUGC"] {
            ugc.on(path, methods: allButPost, use: refusing(publishPost))
        }
        ugc.on("{action}/**", methods: all) { request, _ -> Response in
            throw PublishAPI.invalidAction(request.uri.path.dropFirst(PublishAPI.pathPrefix.count))
        }
        ugc.post("", use: refusing(PublishAPI.invalidAction("")))
        ugc.post("{action}") { _, context -> Response in
            throw PublishAPI.invalidAction(try context.parameters.require("action"))
        }
        ugc.add(middleware: PublishSignatureMiddleware(credentials: credentials))
        for action in ["ApplyUploadUGC", "CommitUploadUGC"] {
            ugc.post(RouterPath(action)) { request, context in
                try await publish.respond(action: action, request: request, context: context)
            }
        }

        // Form uploads.
        let form = formUploadAPI
        let forms = router.group("/_ferry/form").add(middleware: crossOrigin)
            .add(middleware: ErrorEnvelopeMiddleware(dialect: FormDialect()))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
        forms.on(
            "", methods: allButPost, use: refusing(FormUploadError(.methodNotAllowed, "Form uploads are POST requests.")))
        forms.post("") { request, context in try await form.respond(to: request, context: context) }

        // Playback.
        let playback = PlaybackAPI(media: media)
        let play = router.group("/_ferry/play").add(middleware: PlaybackCrossOriginMiddleware())
            .add(middleware: ErrorEnvelopeMiddleware(dialect: S3Dialect(namesResource: false)))
            .add(middleware: AuthorityMiddleware())
        for path: RouterPath in ["", "**"] {
            play.on(path, methods: all) { request, context in try await playback.respond(to: request, context: context) }
        }

        // Health, for load balancers: 200 while this node serves and reaches its catalog, 503 otherwise.
        let health = router.group("/_ferry/health").add(middleware: ErrorEnvelopeMiddleware(dialect: TextDialect(name: "health")))
        health.on("", methods: [.get, .head]) { _, _ in await healthAnswer() }
        health.on("", methods: all.filter { $0 != .get && $0 != .head }) { _, _ in
            TextErrorResponse(status: .methodNotAllowed, message: "The health check answers GET and HEAD.")
        }

        // The console: its files, its session, the media API for the session, and the part-signing endpoints.
        let site = router.group("/console").add(middleware: ConsoleHeadersMiddleware(console: console, noStore: false))
            .add(middleware: ErrorEnvelopeMiddleware(dialect: TextDialect(name: "console")))
        for path: RouterPath in ["", "**"] {
            site.on(path, methods: all) { request, _ in console.file(request) }
        }
        let session = router.group("/_ferry/console/session").add(middleware: ConsoleHeadersMiddleware(console: console))
            .add(middleware: ErrorEnvelopeMiddleware(dialect: MediaDialect(name: "console")))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
        session.on("", methods: all) { request, context in try await console.session(request, context: context) }
        let consoleAPI = router.group("/_ferry/console/api").add(middleware: ConsoleHeadersMiddleware(console: console))
            .add(middleware: ErrorEnvelopeMiddleware(dialect: MediaDialect(name: "console")))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
        let consolePost = MediaError("MethodNotAllowed", "Console API operations are POST requests.", status: 405)
        consoleAPI.on("{action}", methods: allButPost, use: refusing(consolePost))
        consoleAPI.add(middleware: ConsoleSessionMiddleware(sessions: sessions))
        consoleAPI.post("{action}") { request, context in
            try await console.api(action: try context.parameters.require("action"), request: request, context: context)
        }
        let sign = router.group("/s3/multipart").add(middleware: ConsoleHeadersMiddleware(console: console))
            .add(middleware: ErrorEnvelopeMiddleware(dialect: SigningDialect()))
            .add(middleware: AuthorityMiddleware()).add(middleware: ContinueMiddleware())
            .add(middleware: ConsoleSessionMiddleware(sessions: sessions, csrfOnEveryRequest: false, acceptsUppy: true))
        let notFound = refusing(MultipartSigningAPI.notFound)
        sign.post("") { request, context in try await signing.create(request, context: context) }
        sign.on("", methods: allButPost, use: notFound)
        sign.get("{uploadId}") { request, context in try await signing.listParts(request, context: context) }
        sign.delete("{uploadId}") { request, context in try await signing.abort(request, context: context) }
        sign.on("{uploadId}", methods: all.filter { $0 != .get && $0 != .delete }, use: notFound)
        sign.get("{uploadId}/{partNumber}") { request, context in try await signing.signPart(request, context: context) }
        sign.on("{uploadId}/{partNumber}", methods: all.filter { $0 != .get }, use: notFound)
        sign.get("{uploadId}/complete") { request, context in try await signing.signPart(request, context: context) }
        sign.post("{uploadId}/complete") { request, context in try await signing.complete(request, context: context) }
        sign.on("{uploadId}/complete", methods: all.filter { $0 != .get && $0 != .post }, use: notFound)
        for path: RouterPath in ["{uploadId}/{partNumber}/**", "{uploadId}/complete/**"] {
            sign.on(path, methods: all, use: notFound)
        }

        // Any other path of Ferry's own.
        let ferry = router.group("/_ferry").add(middleware: ErrorEnvelopeMiddleware(dialect: MediaDialect(name: "ferry")))
        for path: RouterPath in ["", "**"] {
            ferry.on(path, methods: all, use: refusing(MediaError("NotFound", "No Ferry endpoint has this path.", status: 404)))
        }

        // Last, so that it stands only in front of the not-found responder.
        router.add(middleware: UnroutedRequestMiddleware(s3: s3))
        return router
    }

    /// A route that refuses every request with `error`, which the group's dialect renders.
    private func refusing(_ error: some Error) -> @Sendable (Request, FerryRequestContext) async throws -> Response {
        { _, _ in throw error }
    }

    /// The health check's answer within two seconds: a catalog that does not answer (a PostgreSQL pool waiting for a
    /// connection) is a 503 at once, not a request held open that also holds up the node's shutdown.
    private func healthAnswer() async -> Response {
        let store = self.store
        let healthy = await withTimeLimit(.seconds(2)) { (try? await store.listBuckets()) != nil } ?? false
        return Response(
            status: healthy ? .ok : .serviceUnavailable, headers: [.contentType: "text/plain"],
            body: .init(byteBuffer: ByteBuffer(string: healthy ? "ok\n" : "catalog unavailable\n")))
    }
}

extension RouterMethods where Context == FerryRequestContext {
    /// Routes `path` to `handler` for each of `methods`.
    @discardableResult
    func on(
        _ path: RouterPath, methods: [HTTPRequest.Method],
        use handler: @escaping @Sendable (Request, FerryRequestContext) async throws -> some ResponseGenerator
    ) -> Self {
        for method in methods { on(path, method: method, use: handler) }
        return self
    }
}

/// The CORS configuration of the addressed bucket (PutBucketCors) on the object API's answers to cross-origin
/// requests, refusals included; origins the server-wide policy allows override it.
struct BucketCrossOriginMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let objects: ObjectAPI

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        if request.method != .options, request.headers[.origin] != nil,
            let bucket = try? ObjectAPI.splitPath(request.uri.path).bucket, !bucket.isEmpty,
            let cors = await objects.corsHeaders(for: request, bucket: bucket)
        {
            for field in cors { response.headers[field.name] = field.value }
        }
        return response
    }
}
