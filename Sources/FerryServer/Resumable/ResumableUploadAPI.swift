import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// The upload resource at `/_ferry/uploads/`: one flow (create, append, offset, complete, terminate) over
/// ``CatalogObjectStore``'s resumable uploads, spoken in two protocols chosen by each request's headers: tus 1.0 (with
/// every extension) and the IETF resumable-upload draft at interop versions 3, 5 and 6 (what URLSession speaks).
///
/// Creation needs a credential: a SigV4 signature allowing `s3:PutObject` on the key
/// (`/_ferry/uploads/s3/<bucket>/<key>`), or a media upload URL's grant (`/_ferry/uploads/grant/<grant>`, see
/// ``UploadGrant``). What follows needs only the upload's URL, `/_ferry/uploads/<id>`, whose 128-bit random id is the
/// capability: URLSession and tus clients resume without signing anything.
struct ResumableUploadAPI: Sendable {
    let store: CatalogObjectStore
    let credentials: CredentialStore
    let authenticator: RequestAuthenticator
    /// How long an upload lives unfinished.
    let lifetime: TimeInterval
    /// How long a tus creation-with-upload lives past its last sign of life while its answer, the only carrier of
    /// its URL, is not sent (see ``answering(_:_:)``): a server stopped mid-body leaves an upload nobody can name,
    /// which then expires soon instead of holding its owner's `ConcurrentUploads` slot for ``lifetime``. Twice the
    /// window in which a body must progress (see ``ConnectionLimits/bodyWindow``).
    var unansweredLifetime: TimeInterval = 60
    /// Where what goes wrong out of a request's sight is told.
    var logger = Logger(label: "ferry.resumable")
    /// The configured public endpoint, for upload URLs; the request's own otherwise.
    let publicEndpoint: PublicEndpoint?
    /// Whether upload URLs follow each request's Host even with a public endpoint (as upload addresses do, see
    /// ``FerryServerConfiguration/uploadAddressesFollowRequests``).
    var followsRequests = false
    /// Called with each object an upload became (the media catalog advances its video).
    var objectStored: @Sendable (ObjectInfo) async -> Void = { _ in }
    /// Asked before an upload to `bucket`/`key` is created, and again when it completes; throws to refuse it (the
    /// media library refuses files of a video that is gone), or names the stored file of a video or image, which the
    /// upload may complete only as the same bytes.
    var writeAllowed: @Sendable (_ bucket: String, _ key: String) async throws -> MediaLibrary.StoredFile? = { _, _ in nil }
    /// Called with the `title` a tus client sent for the video an upload fills.
    var titleSent: @Sendable (_ videoId: String, _ title: String) async -> Void = { _, _ in }
    /// Takes a turn of the key an upload counts against, with its quota; throws past its `RequestsPerSecond`. Every
    /// request that creates or names an upload takes one (OPTIONS, which names none, does not).
    var takeRequestTurn: @Sendable (_ key: String, _ quota: AccessKeyQuota) throws -> Void = { _, _ in }
    /// The appends under way on this node.
    let appending = ActiveAppends()

    /// Path prefix of the resource.
    static let pathPrefix = "/_ferry/uploads/"
    /// The methods an upload's URL answers (`Allow` of its 405s); POST only with `X-HTTP-Method-Override`.
    static let uploadMethods = "DELETE, HEAD, OPTIONS, PATCH, POST"
    /// The methods a creation URL answers (POST for tus, POST or PUT for an IETF creation).
    static let creationMethods = "OPTIONS, POST, PUT"

    /// Who may create an upload, and of what.
    enum Creator: Sendable {
        /// A media upload URL's grant (its token).
        case grant(String)
        /// A SigV4-signed request for the key at the rest of the path (`<bucket>/<key>`).
        case signed(path: String)
        /// A Qiniu-style upload token (`Authorization: UpToken <token>`), for the key its scope names or, in tus, the
        /// `key` of `Upload-Metadata`.
        case uploadToken
    }

    /// Where a new upload goes and whom it counts against.
    struct Target: Sendable {
        var bucket: String
        var key: String
        var owner: String
        /// The owner's limits.
        var quota: AccessKeyQuota
        var mediaId: String?
        /// Whether the object may only be created, not replaced (an upload token's `insertOnly`).
        var insertOnly = false
        /// The largest upload the credential allows (an upload token's `fsizeLimit`).
        var maxLength: Int64?
        /// The content types the credential allows (an upload token's `mimeLimit`).
        var policy: PutPolicy?
        /// The SHA-256 of the body a signed creation's signature covers (its `x-amz-content-sha256`); nil when the
        /// signature covers no body (`UNSIGNED-PAYLOAD`, other credentials).
        var signedSHA256: [UInt8]?
    }

    // MARK: Discovery

    /// `OPTIONS`: tus's discovery (versions, extensions, checksum algorithms, largest upload), and for an IETF client
    /// the upload limits. A `Tus-Resumable` header is ignored here, as tus says: discovery is how a client learns the
    /// versions.
    func options(_ request: Request) throws -> Response {
        var fields = request.headers
        fields[.tusResumable] = nil
        let wire = try ResumableWire.of(fields)
        if case .ietf = wire {
            var headers = wire?.headers ?? [:]
            headers[.uploadLimit] = Self.uploadLimit(maxSize: nil)
            return Response(status: .ok, headers: headers)
        }
        return Response(
            status: .noContent,
            headers: [
                .tusResumable: ResumableWire.tusVersion, .tusVersion: ResumableWire.tusVersion,
                .tusExtension: ResumableWire.tusExtensions.joined(separator: ","),
                .tusMaxSize: String(CatalogObjectStore.Limits.maxObjectSize),
                .tusChecksumAlgorithm: ResumableWire.tusChecksums.map(\.name).joined(separator: ","),
            ])
    }

    /// The draft's `Upload-Limit` of an upload at most `maxSize` bytes long (an upload token's limit), and of any
    /// upload when nil: at most the largest object.
    private static func uploadLimit(maxSize: Int64?) -> String {
        "min-size=0, max-size=\(min(maxSize ?? .max, CatalogObjectStore.Limits.maxObjectSize))"
    }

    // MARK: Creation

    /// Creates an upload (tus `POST`, or an IETF upload-creation request of any method), appending the body it
    /// carries.
    func create(_ request: Request, context: FerryRequestContext, creator: Creator) async throws -> Response {
        // An interop version not served, for the whole file: taken as a plain upload, with no 104 (the draft's rule
        // for a version that does not match) and no upload to resume, rather than refused.
        let plain = ResumableWire.isPlainCreation(request.headers)
        let newest = ResumableWire.ietf(version: ResumableWire.ietfVersions.last ?? 6)
        guard let wire = plain ? newest : try ResumableWire.of(request.headers) else {
            throw ResumableRefusal(
                .badRequest,
                "Name the protocol: Tus-Resumable: 1.0.0, or Upload-Draft-Interop-Version with Upload-Complete.",
                wire: nil)
        }
        let target = try await authorize(creator, request: request, context: context, wire: wire)
        try takeRequestTurn(target.owner, target.quota)
        // A stored video's or image's file is checked when an upload completes: only the same bytes may.
        _ = try await writeAllowed(target.bucket, target.key)
        switch wire {
        case .tus: return try await createTus(request, context: context, target: target)
        case .ietf:
            var response = try await createIETF(
                request, context: context, target: target, wire: wire, resumable: !plain)
            if plain {
                for field in [HTTPField.Name.uploadDraftInteropVersion, .uploadComplete, .uploadLimit, .location] {
                    response.headers[field] = nil
                }
            }
            return response
        }
    }

    private func authorize(_ creator: Creator, request: Request, context: FerryRequestContext, wire: ResumableWire)
        async throws -> Target
    {
        switch creator {
        case .grant(let token):
            do {
                let grant = try UploadGrant.verify(token, now: credentials.now(), codec: credentials.tokens)
                return Target(
                    bucket: grant.bucket, key: grant.key, owner: grant.owner,
                    quota: try await ownerQuota(grant.owner, wire: wire), mediaId: grant.mediaId)
            } catch UploadGrant.Refusal.expired {
                throw ResumableRefusal(.forbidden, "The upload URL has expired; ask for a new one.", wire: wire)
            } catch is UploadGrant.Refusal {
                throw ResumableRefusal(.forbidden, "The upload URL is not valid.", wire: wire)
            }
        case .signed(let path):
            try S3AuthenticationMiddleware.refuseRepeatedAuthorization(request)
            let (bucket, key) = try ObjectAPI.splitPath(path)
            guard !bucket.isEmpty, !key.isEmpty else {
                throw ResumableRefusal(.badRequest, "The path names no bucket and key: /_ferry/uploads/s3/<bucket>/<key>.", wire: wire)
            }
            try ObjectAPI.validateUploadKey(key) { ResumableRefusal(.badRequest, $0, wire: wire) }
            let authenticated = try await authenticator.authenticate(
                .init(
                    method: request.method.rawValue, rawPath: request.uri.path,
                    query: SigV4.parseQueryString(request.uri.query ?? ""),
                    headers: S3AuthenticationMiddleware.headers(of: request)))
            let principal = authenticated.principal
            guard principal.allows(action: "s3:PutObject", bucket: bucket, key: key) else {
                throw FerryDomainError(.accessDenied, "Access Denied")
            }
            // The body is held to the hash the signature covers, as the object API holds a PUT's.
            let hash = authenticated.verified.payloadHash
            guard hash == SigV4.unsignedPayload || SigV4.isHex64(hash) else {
                throw ResumableRefusal(
                    .badRequest,
                    "An upload creation's body is not aws-chunked: sign it with its SHA-256 or as UNSIGNED-PAYLOAD.",
                    wire: wire)
            }
            return Target(
                bucket: bucket, key: key, owner: principal.parentAccessKeyId, quota: principal.quota,
                signedSHA256: hash == SigV4.unsignedPayload ? nil : Hex.decode(hash))
        case .uploadToken:
            return try await authorizeToken(request, wire: wire)
        }
    }

    /// An upload token's target: its scope's bucket, and its scope's key or the tus metadata's `key`; the token
    /// verified against its access key, which must allow writing that key.
    private func authorizeToken(_ request: Request, wire: ResumableWire) async throws -> Target {
        let header = request.headers[.authorization] ?? ""
        guard header.hasPrefix("UpToken ") else {
            throw ResumableRefusal(
                .unauthorized, "Create uploads here with Authorization: UpToken <upload token>, or at /_ferry/uploads/s3/<bucket>/<key> signed.",
                wire: wire)
        }
        try S3AuthenticationMiddleware.refuseRepeatedAuthorization(request)
        let token: UploadToken
        do throws(UploadTokenError) {
            token = try UploadToken.parse(String(header.dropFirst("UpToken ".count)).trimmingCharacters(in: .whitespaces))
        } catch {
            throw ResumableRefusal(.unauthorized, "The upload token cannot be read.", wire: wire)
        }
        guard let resolved = try await credentials.longTermKey(token.accessKey) else {
            throw ResumableRefusal(.unauthorized, "The upload token's access key is unknown or disabled.", wire: wire)
        }
        do throws(UploadTokenError) {
            try token.verify(secretKey: resolved.secretAccessKey, now: credentials.now())
        } catch {
            throw ResumableRefusal(
                .unauthorized, error.code == .expired ? "The upload token has expired." : "The upload token does not verify.",
                wire: wire)
        }
        let policy = token.policy
        let named = try TusMetadata.parse(request.headers[.uploadMetadata], wire: wire)["key"]
        let key: String
        switch (named, policy.key) {
        case (let given?, let scoped?) where !given.isByteEqual(to: scoped):
            throw ResumableRefusal(.forbidden, "The key differs from the one the upload token's scope names.", wire: wire)
        case (_, let scoped?): key = scoped
        case (let given?, nil): key = given
        case (nil, nil):
            let how = if case .tus = wire { "send one as the tus metadata key" } else { "an IETF upload takes it from a scope bucket:key" }
            throw ResumableRefusal(.badRequest, "The upload token's scope names no key; \(how).", wire: wire)
        }
        try ObjectAPI.validateUploadKey(key) { ResumableRefusal(.badRequest, $0, wire: wire) }
        guard resolved.principal.allows(action: "s3:PutObject", bucket: policy.bucket, key: key) else {
            throw ResumableRefusal(.forbidden, "The upload token's access key may not write this object.", wire: wire)
        }
        return Target(
            bucket: policy.bucket, key: key, owner: resolved.principal.parentAccessKeyId, quota: resolved.principal.quota,
            insertOnly: policy.insertOnly, maxLength: policy.fsizeLimit, policy: policy)
    }

    /// The limits of the long-term key an upload counts against, as they are now; a key that is gone or disabled
    /// takes no more bytes.
    private func ownerQuota(_ owner: String, wire: ResumableWire) async throws -> AccessKeyQuota {
        do {
            return try await credentials.ownerQuota(owner)
        } catch let error as FerryDomainError {
            throw ResumableRefusal(.forbidden, error.message, wire: wire)
        }
    }

    /// Refuses what the creation's credential does not allow: a declared length past its limit, a declared content
    /// type it does not list, an object that exists when it may only be created.
    private func checkLimits(_ target: Target, length: Int64?, contentType: String?, wire: ResumableWire) async throws {
        if let maxLength = target.maxLength {
            guard let length else {
                throw ResumableRefusal(.badRequest, "The upload token limits the size: declare the upload's length.", wire: wire)
            }
            guard length <= maxLength else {
                throw ResumableRefusal(.contentTooLarge, "The upload is larger than the upload token allows.", wire: wire)
            }
        }
        // A declared type is checked now; what the bytes show, when the upload completes.
        if let policy = target.policy, let contentType, ContentSniffer.essence(contentType) != "application/octet-stream",
            !policy.allowsMimeType(contentType)
        {
            throw ResumableRefusal(.forbidden, "The upload token does not allow this content type.", wire: wire)
        }
        if target.insertOnly, try await store.storedObject(bucket: target.bucket, key: target.key) != nil {
            throw ResumableRefusal(.conflict, "An object with this key exists and the upload token is insertOnly.", wire: wire)
        }
    }

    private func createTus(_ request: Request, context: FerryRequestContext, target: Target) async throws -> Response {
        let wire = ResumableWire.tus
        guard request.method == .post else {
            throw ResumableRefusal(
                .methodNotAllowed, "tus creates uploads with POST.", wire: wire,
                headers: [.allow: Self.creationMethods])
        }
        let length = try wire.integer(.uploadLength, in: request.headers)
        let deferred = request.headers[.uploadDeferLength]
        if let deferred, deferred.trimmingCharacters(in: .whitespaces) != "1" {
            throw ResumableRefusal(.badRequest, "Upload-Defer-Length must be 1.", wire: wire)
        }
        let metadata = try TusMetadata.parse(request.headers[.uploadMetadata], wire: wire)
        // A media upload's title becomes its video's Title: refused as the media API refuses one.
        let title = target.mediaId == nil ? nil : metadata["title"]
        do { try MediaAPI.checkText(title, "The metadata's title", max: 128) } catch let error as MediaError {
            throw ResumableRefusal(.badRequest, error.message, wire: wire)
        }
        let concat = try TusConcat.parse(request.headers[.uploadConcat], wire: wire)
        var attributes = ObjectAttributes()
        attributes.contentType = metadata["filetype"].flatMap { ContentSniffer.isUsableType($0) ? $0 : nil }
        if case .final(let urls) = concat {
            guard length == nil, deferred == nil else {
                throw ResumableRefusal(.badRequest, "A final upload takes its length from its partial uploads.", wire: wire)
            }
            return try await concatenate(urls, request: request, context: context, target: target, metadata: metadata, attributes: attributes)
        }
        guard (length == nil) != (deferred == nil) else {
            throw ResumableRefusal(.badRequest, "Send exactly one of Upload-Length and Upload-Defer-Length: 1.", wire: wire)
        }
        try await checkLimits(target, length: length, contentType: attributes.contentType, wire: wire)
        let withUpload = TusWire.isAppend(request.headers[.contentType])
        let checksum = withUpload ? try TusChecksum.parse(request.headers) : nil
        if !withUpload, let signed = target.signedSHA256, signed != Self.emptySHA256 {
            throw ResumableRefusal(
                .badRequest,
                "The creation is signed with a body's SHA-256 but carries none (a tus creation's body is "
                    + "Content-Type: application/offset+octet-stream).",
                wire: wire)
        }
        let info = ResumableUpload.Info(
            kind: concat == .partial ? .partial : .single, metadata: metadata, videoId: target.mediaId)
        var upload = try await createUpload(
            target, length: length, info: info, attributes: attributes,
            lifetime: withUpload ? min(unansweredLifetime, lifetime) : lifetime)
        if let videoId = target.mediaId, let title, !title.isEmpty {
            await titleSent(videoId, title)
        }
        var headers = wire.headers
        headers[.location] = try location(upload, context: context)
        // creation-with-upload: the body is the first append. Refused, it ends the upload the client has no URL of.
        // Cut short, it ends it too: a body ends early only with its connection, so the answer carrying the URL never
        // arrives, and the upload would hold its owner's ConcurrentUploads slot until it expired, for nobody.
        if withUpload {
            let interrupted: Bool
            (upload, interrupted) = try await answering(upload) {
                try await endingOnRefusal(upload, wire: wire) {
                    try await appendTus(
                        upload, at: 0, checksum: checksum, request: request, signedSHA256: target.signedSHA256,
                        beforeBody: { await context.sendContinue() })
                }
            }
            if interrupted {
                await end(upload)
                throw ResumableRefusal(.badRequest, "The body ended early; the upload is ended.", wire: wire)
            }
            headers[.uploadOffset] = String(upload.offset)
            do {
                upload = try await store.setResumableExpiry(upload, to: credentials.now().addingTimeInterval(lifetime))
            } catch {
                await end(upload)
                throw error
            }
        } else if upload.length == 0, info.kind == .single {
            // An empty partial upload waits, as any partial does, for a final upload that names it.
            upload = try await finish(upload, wire: wire)
        }
        headers[.uploadExpires] = S3Date.http(upload.expiresAt)
        return Response(status: .created, headers: headers)
    }

    /// An IETF creation; without `resumable` (a plain creation at a version not served), no 104 names the upload.
    private func createIETF(
        _ request: Request, context: FerryRequestContext, target: Target, wire: ResumableWire, resumable: Bool = true
    ) async throws -> Response {
        guard let complete = try wire.declaredComplete(request.headers) else {
            throw ResumableRefusal(.badRequest, "An upload creation request says whether it is complete.", wire: wire)
        }
        if let offset = try wire.integer(.uploadOffset, in: request.headers), offset != 0 {
            throw ResumableRefusal(.badRequest, "An upload creation request starts at offset 0.", wire: wire)
        }
        let declared = try wire.integer(.uploadLength, in: request.headers)
        let contentLength = try wire.integer(.contentLength, in: request.headers)
        if complete, let declared, let contentLength, declared != contentLength {
            throw ResumableRefusal(
                .badRequest, "Upload-Length and Content-Length disagree on a complete upload.", wire: wire,
                problem: .inconsistentLength)
        }
        if let declared, let contentLength, contentLength > declared {
            // Refused before an upload is made and named in a 104 only to be ended.
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        }
        var attributes = ObjectAttributes()
        if let type = request.headers[.contentType], !IETFWire.isAppend(type), ContentSniffer.isUsableType(type) {
            attributes.contentType = type
        }
        let length = declared ?? (complete ? contentLength : nil)
        try await checkLimits(target, length: length, contentType: attributes.contentType, wire: wire)
        var info = ResumableUpload.Info(videoId: target.mediaId)
        info.completesWhenDeclared = true
        let upload = try await createUpload(target, length: length, info: info, attributes: attributes)
        let channel = context.channel
        let active = appending.begin(upload.id) { channel.close(promise: nil) }
        defer { active.end() }
        let location = try location(upload, context: context)
        // 104: the client knows where to resume before it sends a byte.
        var interim = HTTPResponse(status: .uploadResumptionSupported)
        interim.headerFields = wire.headers
        interim.headerFields[.location] = location
        interim.headerFields[.uploadLimit] = Self.uploadLimit(maxSize: target.maxLength)
        if resumable { await context.channel.sendInformational(interim) }
        var response: Response
        do {
            response = try await endingOnRefusal(upload, wire: wire, announced: resumable) {
                try await appendIETF(
                    upload, at: 0, complete: complete, request: request, signedSHA256: target.signedSHA256,
                    active: active, wire: wire, beforeBody: { await context.sendContinue() })
            }
        } catch var refusal as ResumableRefusal {
            if resumable {
                refusal.headers[.location] = location
            } else if refusal.keepsUpload {
                // A body cut short: no client can resume an upload no 104 named.
                await end(upload)
            }
            throw refusal
        } catch where resumable && Self.isPassing(error) {
            // Kept (a full disk, a store outage): the answer names the upload as the 104 did, for a client that saw
            // no 1xx.
            let error = FerryDomainError(machineFailure: error) ?? error
            if (error as? FerryDomainError)?.code == .storageFull {
                context.logger.error("storage full", metadata: ["ferry.api": "resumable", "error": .string("\(error)")])
            }
            guard var refusal = ResumableDialect().wireError(for: error, request: request, context: context) as? ResumableRefusal
            else { throw error }
            refusal.headers[.location] = location
            throw refusal
        }
        response.headers[.location] = location
        response.headers[.uploadLimit] = Self.uploadLimit(maxSize: target.maxLength)
        if response.status == .noContent { response.status = .created }
        return response
    }

    /// A new upload to `target` (insert-only when its credential says so), expiring after `lifetime` (by default
    /// ``lifetime``).
    private func createUpload(
        _ target: Target, length: Int64?, info: ResumableUpload.Info, attributes: ObjectAttributes,
        lifetime: TimeInterval? = nil
    ) async throws -> ResumableUpload {
        var info = info
        info.insertOnly = target.insertOnly ? true : nil
        info.mimeLimit = target.policy?.mimeLimit
        return try await store.createResumableUpload(
            bucket: target.bucket, key: target.key, charge: StorageCharge(owner: target.owner, quota: target.quota),
            length: length, info: info, attributes: attributes,
            expiresAt: credentials.now().addingTimeInterval(lifetime ?? self.lifetime))
    }

    /// Runs `body`, the first append of a tus creation-with-upload, while moving `upload`'s expiry
    /// ``unansweredLifetime`` ahead every quarter of it: alive while its body streams, the upload expires soon after
    /// a server stopped under it (its client never learnt its URL). The caller gives it its ``lifetime`` once
    /// answered; no move lands after `body` returns.
    private func answering<T>(_ upload: ResumableUpload, _ body: () async throws -> T) async throws -> T {
        let (store, credentials, logger, horizon) = (store, credentials, logger, min(unansweredLifetime, lifetime))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    do { try await Task.sleep(for: .seconds(horizon / 4)) } catch { return }
                    do {
                        _ = try await store.setResumableExpiry(upload, to: credentials.now().addingTimeInterval(horizon))
                    } catch {
                        logger.warning(
                            "expiry of an upload being created not moved",
                            metadata: ["ferry.upload-id": "\(upload.uploadId)", "error": "\(error)"])
                    }
                }
            }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    /// A tus final upload of the partial uploads at `urls`.
    private func concatenate(
        _ urls: [String], request: Request, context: FerryRequestContext, target: Target, metadata: [String: String],
        attributes: ObjectAttributes
    ) async throws -> Response {
        let wire = ResumableWire.tus
        var partials: [ResumableUpload] = []
        for url in urls {
            let id = url.split(separator: "/").last.map(String.init) ?? ""
            // Only the target's owner's partial uploads to its bucket, not yet made into objects: an upload URL lets its
            // holder write, never read what another key stored.
            guard Hex.isRandomId(id), let partial = try await store.resumableUpload(id),
                partial.info.kind == .partial, partial.etag == nil, partial.owner == target.owner,
                partial.bucket.isByteEqual(to: target.bucket)
            else {
                throw ResumableRefusal(.badRequest, "Upload-Concat names an upload that is not a partial upload here.", wire: wire)
            }
            guard partial.isFullyReceived else {
                throw ResumableRefusal(.badRequest, "Every partial upload must be complete before the final upload.", wire: wire)
            }
            guard partial.expiresAt > credentials.now() else {
                throw ResumableRefusal(.badRequest, "Upload-Concat names a partial upload that has expired.", wire: wire)
            }
            guard !partials.contains(where: { $0.id == partial.id }) else {
                throw ResumableRefusal(.badRequest, "Upload-Concat names a partial upload twice.", wire: wire)
            }
            partials.append(partial)
        }
        if let again = try await sentAgain(partials, target: target, context: context) { return again }
        // The final upload is checked as any upload of its length and type, and completes as one.
        let (total, overflow) = partials.reduce((Int64(0), false)) { sum, partial in
            let (next, overflow) = sum.0.addingReportingOverflow(partial.offset)
            return (next, sum.1 || overflow)
        }
        guard !overflow, total <= CatalogObjectStore.Limits.maxObjectSize else {
            throw ResumableRefusal(.contentTooLarge, "The partial uploads together pass the largest object.", wire: wire)
        }
        try await checkLimits(target, length: total, contentType: attributes.contentType, wire: wire)
        if let mimeLimit = target.policy?.mimeLimit {
            try await checkContent(partials, mimeLimit: mimeLimit, declared: attributes.contentType, wire: wire)
        }
        var info = ResumableUpload.Info(kind: .final, metadata: metadata, videoId: target.mediaId, partials: partials.map(\.id))
        info.insertOnly = target.insertOnly ? true : nil
        let stored = try await MediaLibrary.StoredFile.forCompletion(bucket: target.bucket, key: target.key, check: writeAllowed)
        let (upload, object): (ResumableUpload, ObjectInfo?)
        do {
            (upload, object) = try await refusingConcatenation(target) {
                try await store.concatenateResumable(
                    partials, bucket: target.bucket, key: target.key,
                    charge: StorageCharge(owner: target.owner, quota: target.quota), info: info, attributes: attributes,
                    expiresAt: credentials.now().addingTimeInterval(lifetime), fileOwner: stored?.owner,
                    verify: { etag in if let stored, !stored.accepts(etag: etag) { throw stored.refusal } })
            }
        } catch {
            // The same final upload sent while the first was making it (a client that timed out and sent it again,
            // to this node or another) found its partial uploads claimed by that one, or the quota taken by its
            // copies: answered as that one.
            var claimed: [ResumableUpload] = []
            for partial in partials {
                guard let current = try await store.resumableUpload(partial.id) else { throw error }
                claimed.append(current)
            }
            guard let again = try await sentAgain(claimed, target: target, context: context) else { throw error }
            return again
        }
        if let object { await objectStored(object) }
        return try created(upload, etag: upload.etag ?? object?.etag ?? "", context: context)
    }

    /// The answer to a final upload whose partial uploads a final upload was made of: only that final upload again (a
    /// client that lost its answer), the same upload and object, nothing made twice; nil when none claimed them.
    private func sentAgain(_ partials: [ResumableUpload], target: Target, context: FerryRequestContext) async throws
        -> Response?
    {
        guard partials.contains(where: { $0.info.concatenatedInto != nil }) else { return nil }
        guard let id = partials[0].info.concatenatedInto, let made = try await store.resumableUpload(id),
            made.info.partials == partials.map(\.id), made.bucket.isByteEqual(to: target.bucket),
            made.key.isByteEqual(to: target.key), made.owner == target.owner
        else {
            throw ResumableRefusal(
                .badRequest, "Upload-Concat names a partial upload that another final upload was made of.", wire: .tus)
        }
        // Claimed by a final upload whose request ended before its object was made (or is making it now): made
        // here. One made already is answered again, once the partial uploads it left unreleased (a request that
        // ended while it released them) are.
        let stored = made.etag != nil
            ? nil
            : try await MediaLibrary.StoredFile.forCompletion(
                bucket: target.bucket, key: target.key, check: writeAllowed)
        let (completed, object) = try await completeConcatenation(
            made, partials: partials, target: target, stored: stored)
        return try created(completed, etag: completed.etag ?? object?.etag ?? "", context: context)
    }

    /// Completes the final upload `made`, which holds the claim on `partials` and is fully received.
    private func completeConcatenation(
        _ made: ResumableUpload, partials: [ResumableUpload], target: Target, stored: MediaLibrary.StoredFile?
    ) async throws -> (upload: ResumableUpload, object: ObjectInfo?) {
        let (upload, object) = try await refusingConcatenation(target) {
            try await store.completeConcatenation(
                made, partials: partials, expiresAt: credentials.now().addingTimeInterval(lifetime), fileOwner: stored?.owner,
                verify: { etag in if let stored, !stored.accepts(etag: etag) { throw stored.refusal } })
        }
        if let object {
            await objectStored(object)
        } else {
            // Made by the request that ended (or one at the same time): the media library hears of it again.
            _ = await objectChecksum(upload, seenAgain: true)
        }
        return (upload, object)
    }

    /// `body`, with the store's refusals of a final upload as tus answers.
    private func refusingConcatenation<Result>(_ target: Target, _ body: () async throws -> Result) async throws -> Result {
        do {
            return try await body()
        } catch let error as FerryDomainError where error.code == .preconditionFailed && target.insertOnly {
            throw ResumableRefusal(
                .conflict, "An object with this key exists and the upload token is insertOnly.", wire: .tus)
        } catch let error as FerryDomainError where error.code == .uploadNotFound {
            throw ResumableRefusal(
                .badRequest, "A partial upload Upload-Concat names was ended, or made into another final upload, meanwhile.",
                wire: .tus)
        }
    }

    /// The answer to a final upload: 201, its URL and its object's ETag.
    private func created(_ upload: ResumableUpload, etag: String, context: FerryRequestContext) throws -> Response {
        var headers = ResumableWire.tus.headers
        headers[.location] = try location(upload, context: context)
        headers[.eTag] = "\"\(etag)\""
        return Response(status: .created, headers: headers)
    }

    // MARK: An upload

    /// `HEAD`: the offset (and in tus the length, metadata, concatenation and expiry), and once the upload is an
    /// object its ETag, so a client that lost the answer of the append that completed it learns what it became.
    func head(_ request: Request, context: FerryRequestContext, id: String) async throws -> Response {
        let wire = try Self.requireWire(request)
        if case .ietf = wire { await appending.stop(id) } else { await appending.settle(id) }
        let upload = try await live(id, wire: wire)
        var headers = wire.headers
        headers[.cacheControl] = "no-store"
        headers[.uploadOffset] = String(upload.offset)
        if let etag = upload.etag { headers[.eTag] = "\"\(etag)\"" }
        // A client whose completion answer was lost compares this with its file's, as it would the answer's.
        if let checksum = await objectChecksum(upload, seenAgain: true), let field = ChecksumAlgorithm.crc64nvme.headerField {
            headers[field] = checksum
        }
        // A client resuming checks that what is stored is still its file's.
        if upload.etag == nil, upload.offset > 0, let received = try await store.receivedChecksum(upload) {
            headers[.ferryReceivedCRC64NVME] = received
        }
        switch wire {
        case .tus:
            if let length = upload.length { headers[.uploadLength] = String(length) } else { headers[.uploadDeferLength] = "1" }
            if !upload.info.metadata.isEmpty { headers[.uploadMetadata] = TusMetadata.encode(upload.info.metadata) }
            switch upload.info.kind {
            case .single: break
            case .partial: headers[.uploadConcat] = "partial"
            case .final:
                let base = try base(context) + Self.pathPrefix
                headers[.uploadConcat] = "final;" + (upload.info.partials ?? []).map { base + $0 }.joined(separator: " ")
            }
            if upload.etag == nil { headers[.uploadExpires] = S3Date.http(upload.expiresAt) }
            headers[.contentLength] = "0"
            return Response(status: .ok, headers: headers)
        case .ietf(let version):
            wire.setComplete(upload.etag != nil, in: &headers)
            if version >= 6, let length = upload.length { headers[.uploadLength] = String(length) }
            return Response(status: .noContent, headers: headers)
        }
    }

    /// `PATCH`: an append at `Upload-Offset`.
    func patch(_ request: Request, context: FerryRequestContext, id: String) async throws -> Response {
        let wire = try Self.requireWire(request)
        guard let offset = try wire.integer(.uploadOffset, in: request.headers) else {
            throw ResumableRefusal(.badRequest, "An append carries Upload-Offset.", wire: wire)
        }
        if case .ietf(let version) = wire {
            // What the request alone shows is checked before it stops the upload's appends under way.
            if version >= 6, !IETFWire.isAppend(request.headers[.contentType]) {
                throw ResumableRefusal(.badRequest, "An append is Content-Type: application/partial-upload.", wire: wire)
            }
            // Version 3 reads an append without `Upload-Incomplete` as the last; later versions require the flag on
            // appends as on creations (a client meaning more to come would otherwise complete the upload short).
            if try wire.declaredComplete(request.headers) == nil, version >= 5 {
                throw ResumableRefusal(
                    .badRequest, "An append says whether it completes the upload (Upload-Complete).", wire: wire)
            }
        }
        // An IETF append stops those under way before it (a tus one waits for those whose bodies ended), and counts as
        // under way itself from here on: a request for the upload that comes while this one is checked or read stops
        // it (IETF), or waits for its answer.
        let active = await beginAppend(id, request: request, wire: wire, connection: context.channel)
        defer { active.end() }
        let upload = try await live(id, wire: wire)
        switch wire {
        case .tus:
            guard TusWire.isAppend(request.headers[.contentType]) else {
                throw ResumableRefusal(
                    .unsupportedMediaType, "A tus PATCH is Content-Type: application/offset+octet-stream.", wire: wire)
            }
            guard upload.info.kind != .final else {
                throw ResumableRefusal(.forbidden, "A final upload takes no appends.", wire: wire)
            }
            let checksum = try TusChecksum.parse(request.headers)
            guard offset == upload.offset else { throw Self.conflict(upload, provided: offset, wire: wire) }
            // A deferred length declared here bounds this append and is recorded once the append is kept: a refused
            // append (460, 413, a quota) leaves the length deferred.
            let declared = try lengthToRecord(upload, request: request, wire: wire)
            var bounded = upload
            if let declared { bounded.length = declared }
            try Self.refuseBeyondLength(bounded, at: offset, request: request, wire: wire)
            var (appended, interrupted) = try await appendTus(
                bounded, at: offset, checksum: checksum, request: request, active: active,
                beforeBody: { await context.sendContinue() })
            appended = try await keep(declared, after: appended, interrupted: interrupted, wire: wire)
            if interrupted { throw Self.bodyEnded(appended, wire: wire) }
            if declared != nil, appended.etag == nil, appended.isFullyReceived, appended.info.kind == .single {
                appended = try await finish(appended, wire: wire)
            }
            var headers = wire.headers
            headers[.uploadOffset] = String(appended.offset)
            // A partial upload expires until a final upload is made of it, fully received or not.
            if appended.etag == nil { headers[.uploadExpires] = S3Date.http(appended.expiresAt) }
            if let etag = appended.etag { headers[.eTag] = "\"\(etag)\"" }
            // The object's CRC64NVME once the append completed it: tus checksums cover each chunk as it was sent, and
            // a client compares this with its whole file (one changed between chunks is not what was stored).
            if let checksum = await objectChecksum(appended), let field = ChecksumAlgorithm.crc64nvme.headerField {
                headers[field] = checksum
            }
            return Response(status: .noContent, headers: headers)
        case .ietf:
            // Without the flag (version 3 only: later versions were refused above), the append is the last.
            let complete = try wire.declaredComplete(request.headers) ?? true
            guard upload.info.kind == .single else {
                throw ResumableRefusal(
                    .badRequest, "A tus partial or final upload takes appends from tus only (Upload-Concat).", wire: wire)
            }
            guard upload.etag == nil else {
                // Completed meanwhile (by a tus append that reached its length): the empty completing append its
                // client sends next is answered as the completion it asked for.
                if complete, offset == upload.offset, request.headers[.transferEncoding] == nil,
                    try wire.integer(.contentLength, in: request.headers) ?? 0 == 0
                {
                    return await completed(upload, wire: wire)
                }
                var refusal = ResumableRefusal(
                    .badRequest, "The upload is complete; it takes no more appends.", wire: wire,
                    problem: .completedUpload)
                wire.setComplete(true, in: &refusal.headers)
                throw refusal
            }
            guard offset == upload.offset else { throw Self.conflict(upload, provided: offset, wire: wire) }
            let declared = try lengthToRecord(upload, request: request, wire: wire)
            var bounded = upload
            if let declared { bounded.length = declared }
            try Self.refuseBeyondLength(bounded, at: offset, request: request, wire: wire)
            return try await appendIETF(
                upload, at: offset, complete: complete, declared: declared, request: request, active: active,
                wire: wire, beforeBody: { await context.sendContinue() })
        }
    }

    /// Refuses (413) an append whose `Content-Length` already passes what the upload's length leaves from `offset`:
    /// before its body is read, or with `Expect: 100-continue` sent.
    private static func refuseBeyondLength(
        _ upload: ResumableUpload, at offset: Int64, request: Request, wire: ResumableWire
    ) throws {
        if let length = upload.length, let declared = try wire.integer(.contentLength, in: request.headers),
            declared > length - offset
        {
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        }
    }

    /// `DELETE`: tus termination, IETF cancellation; the bytes of an unfinished upload go with it.
    func delete(_ request: Request, context: FerryRequestContext, id: String) async throws -> Response {
        let wire = try Self.requireWire(request)
        let upload = try await live(id, wire: wire, completing: false)
        try await store.terminateResumable(upload)
        return Response(status: .noContent, headers: wire.headers)
    }

    /// `POST` with `X-HTTP-Method-Override` (tus, for clients behind proxies that pass only GET and POST).
    func overridden(_ request: Request, context: FerryRequestContext, id: String) async throws -> Response {
        switch request.headers[.httpMethodOverride]?.uppercased() {
        case "PATCH": return try await patch(request, context: context, id: id)
        case "DELETE": return try await delete(request, context: context, id: id)
        case "HEAD": return try await head(request, context: context, id: id)
        default:
            throw ResumableRefusal(
                .methodNotAllowed, "An upload answers HEAD, PATCH, DELETE and OPTIONS.",
                wire: try? ResumableWire.of(request.headers), headers: [.allow: Self.uploadMethods])
        }
    }

    // MARK: Appending

    /// A tus append: `checksum` verified (460 and nothing kept on a mismatch), the bytes recorded, and the upload
    /// completed when they reach its length; the upload as it then stands, and whether the body was cut short.
    private func appendTus(
        _ upload: ResumableUpload, at offset: Int64, checksum: TusChecksum?, request: Request,
        signedSHA256: [UInt8]? = nil, active: ActiveAppends.Append? = nil, beforeBody: () async -> Void
    ) async throws -> (ResumableUpload, interrupted: Bool) {
        let wire = ResumableWire.tus
        let (stored, interrupted) = try await append(
            upload, at: offset, request: request, active: active, checksums: checksum.map { [$0.algorithm] } ?? [],
            signedSHA256: signedSHA256, wire: wire, beforeBody: beforeBody
        ) { digests, interrupted in
            guard let checksum else { return }
            // A checksum covers the whole chunk: one cut short cannot be verified, and is not kept.
            guard !interrupted else { throw TusChecksum.cutShort }
            guard checksum.matches(digests) else { throw TusChecksum.mismatch }
        }
        if interrupted { return (stored, true) }
        // tus completes an upload when its offset reaches its length, an upload an IETF client created too.
        return (stored.isFullyReceived && stored.info.kind == .single ? try await finish(stored, wire: wire) : stored, false)
    }

    /// Runs the first append of an upload just created; a refusal (anything but a body cut short, which keeps what
    /// arrived) ends the upload, so nothing is left in progress that the client was refused. An upload whose URL the
    /// client already has (`announced`: an IETF 104) is kept through a full disk or a store outage too: the client
    /// asks its offset and resumes once they pass.
    private func endingOnRefusal<T>(
        _ upload: ResumableUpload, wire: ResumableWire, announced: Bool = false, _ append: () async throws -> T
    ) async throws -> T {
        do {
            return try await append()
        } catch let refusal as ResumableRefusal where refusal.keepsUpload {
            throw refusal
        } catch where announced && Self.isPassing(error) {
            throw error
        } catch {
            if (try? await store.resumableUpload(upload.id))?.etag == nil { await end(upload) }
            throw error
        }
    }

    /// Whether `error` is a condition that passes (a full disk, a store outage), not a refusal of the request.
    private static func isPassing(_ error: any Error) -> Bool {
        guard let error = FerryDomainError(machineFailure: error) ?? error as? FerryDomainError else { return false }
        return error.code == .storageFull || error.code == .storeUnavailable
    }

    /// The `Upload-Length` an append declares for an upload whose length is deferred, checked against what it
    /// received and what the request carries; nil when it declares none, or the one recorded already (tus and IETF
    /// alike: indicated lengths must agree).
    private func lengthToRecord(_ upload: ResumableUpload, request: Request, wire: ResumableWire) throws -> Int64? {
        guard let length = try wire.integer(.uploadLength, in: request.headers) else { return nil }
        if let recorded = upload.length {
            guard recorded == length else {
                throw ResumableRefusal(
                    .badRequest, "Upload-Length differs from the upload's length (\(recorded)).", wire: wire,
                    problem: .inconsistentLength)
            }
            return nil
        }
        guard length >= upload.offset else {
            throw ResumableRefusal(
                .badRequest, "Upload-Length is less than the bytes already received.", wire: wire,
                problem: .inconsistentLength)
        }
        if let declared = try wire.integer(.contentLength, in: request.headers), declared > length - upload.offset {
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        }
        return length
    }

    /// Records the length an append declared (``lengthToRecord(_:request:wire:)``) once the append was kept, so that a
    /// refused append (460, 413, a quota) leaves it deferred. Another request that recorded a different length first
    /// makes this one a 400; a body cut short is answered as such whatever became of the length.
    private func keep(_ declared: Int64?, after appended: ResumableUpload, interrupted: Bool, wire: ResumableWire)
        async throws -> ResumableUpload
    {
        guard let declared, appended.length != declared else { return appended }
        do {
            let updated = appended.length == nil ? try await store.setResumableLength(appended, length: declared) : appended
            guard updated.length == declared else {
                throw ResumableRefusal(
                    .badRequest, "Upload-Length differs from the upload's length.", wire: wire,
                    problem: .inconsistentLength)
            }
            return updated
        } catch where interrupted {
            throw Self.bodyEnded(appended, wire: wire)
        }
    }

    /// The append about to be made to upload `id` over `connection`, under way (``ActiveAppends``) once those before
    /// it have been stopped (IETF) or, of those, the ones whose bodies ended have been answered (tus).
    private func beginAppend(_ id: String, request: Request, wire: ResumableWire, connection: any Channel) async
        -> ActiveAppends.Append
    {
        if case .ietf = wire { await appending.stop(id) } else { await appending.settle(id) }
        // An empty body has arrived whole already.
        let empty = request.headers[.contentLength] == "0"
        return appending.begin(id, ended: empty, stoppable: wire != .tus) { connection.close(promise: nil) }
    }

    /// An IETF append, under way as `active`: the bytes recorded; with the completion flag, the upload's length is the
    /// offset reached, and the answer is the final response. Until it is answered, a later IETF request for the upload
    /// stops it (``ActiveAppends``) and waits for its record: its connection is closed, so that a body waiting for
    /// bytes that will not come (a link that went silent) ends at once and keeps what arrived; a body that arrived
    /// whole is not stopped, and the request waits for it to be recorded (and completed, when it completes the upload).
    private func appendIETF(
        _ upload: ResumableUpload, at offset: Int64, complete: Bool, declared: Int64? = nil, request: Request,
        signedSHA256: [UInt8]? = nil, active: ActiveAppends.Append?, wire: ResumableWire, beforeBody: () async -> Void
    ) async throws -> Response {
        var bounded = upload
        if let declared { bounded.length = declared }
        var (stored, interrupted) = try await append(
            bounded, at: offset, request: request, active: active, checksums: [], signedSHA256: signedSHA256,
            wire: wire, beforeBody: beforeBody
        ) { _, _ in }
        stored = try await keep(declared, after: stored, interrupted: interrupted, wire: wire)
        if interrupted { throw Self.bodyEnded(stored, wire: wire) }
        var headers = wire.headers
        guard complete else {
            wire.setComplete(false, in: &headers)
            headers[.uploadOffset] = String(stored.offset)
            return Response(status: .noContent, headers: headers)
        }
        if stored.length == nil { stored = try await store.setResumableLength(stored, length: stored.offset) }
        guard stored.length == stored.offset else {
            throw ResumableRefusal(
                .badRequest, "The upload was declared \(stored.length ?? 0) bytes long; \(stored.offset) arrived.",
                wire: wire, problem: .inconsistentLength)
        }
        return await completed(try await finishSaying(stored, wire: wire), wire: wire)
    }

    /// ``finish(_:wire:)``, whose refusal, when it ended the upload (its content's type, an insertOnly key taken, a
    /// stored file's other bytes), says in the IETF draft's flag that the upload is complete: the client knows its
    /// file was refused, not the upload. A refusal that keeps the upload (a full disk, a store outage, a store's
    /// refusal), which the client may complete again, does not.
    private func finishSaying(_ upload: ResumableUpload, wire: ResumableWire) async throws -> ResumableUpload {
        do {
            return try await finish(upload, wire: wire)
        } catch {
            guard case .ietf = wire, !Self.isPassing(error) else { throw error }
            let ended: Bool
            do { ended = try await store.resumableUpload(upload.id) == nil } catch { ended = false }
            guard ended, var refusal = ResumableDialect.refusal(for: error, wire: wire) else { throw error }
            wire.setComplete(true, in: &refusal.headers)
            throw refusal
        }
    }

    /// The answer to the IETF append that completed `upload`: its offset, ETag and a summary of the object, with the
    /// object's full CRC64NVME while it is the object the upload made, for the client to compare with its file's
    /// (the draft has no checksum of its own).
    private func completed(_ upload: ResumableUpload, wire: ResumableWire) async -> Response {
        var headers = wire.headers
        wire.setComplete(true, in: &headers)
        headers[.uploadOffset] = String(upload.offset)
        headers[.eTag] = "\"\(upload.etag ?? "")\""
        headers[.contentType] = "application/json"
        let checksum = await objectChecksum(upload, seenAgain: true)
        return Response(
            status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(data: Self.summary(upload, crc64nvme: checksum))))
    }

    /// The full CRC64NVME (base64) of the object a completed upload made, while the object is still that one; nil
    /// for an upload not completed, or whose object was replaced or deleted since. For an upload that completed before
    /// this request (`seenAgain`), the media library hears of the object again: a server stopped between completing
    /// the upload and telling it left its video or image `Uploading`.
    private func objectChecksum(_ upload: ResumableUpload, seenAgain: Bool = false) async -> String? {
        guard upload.etag != nil, let object = try? await store.object(bucket: upload.bucket, key: upload.key),
            object.etag == upload.etag
        else { return nil }
        if seenAgain { await objectStored(object) }
        return object.checksums[ChecksumAlgorithm.crc64nvme.s3Name]
    }

    /// Streams the request body into the upload at `offset`; the upload as it then stands, and whether the body was
    /// cut short (what arrived is kept unless `verify` refuses it: the client resumes from there), by its connection or
    /// by a later request that stopped the `active` append. `beforeBody` runs once the append is let in, before its
    /// body is read (it sends `100 Continue`). A body whose SHA-256 a signature covers (`signedSHA256`, a signed
    /// creation's) is kept only whole and matching it.
    private func append(
        _ upload: ResumableUpload, at offset: Int64, request: Request, active: ActiveAppends.Append? = nil,
        checksums: [ChecksumAlgorithm], signedSHA256: [UInt8]? = nil, wire: ResumableWire, beforeBody: () async -> Void,
        verify: @escaping @Sendable (BodyDigests, Bool) throws -> Void
    ) async throws -> (ResumableUpload, interrupted: Bool) {
        let declared = try wire.integer(.contentLength, in: request.headers)
        let byteLimit = try await ownerQuota(upload.owner, wire: wire).storageBytes
        if let byteLimit, let declared, declared > 0 {
            // Refused before a byte of the body is read (and without a 100) when the declared length already passes
            // the quota.
            try await store.precheck(
                StorageCharge(owner: upload.owner, quota: .init(storageBytes: byteLimit), declaredBytes: declared)
            ) { _ in 0 }
        }
        await beforeBody()
        let body = TolerantBody(base: request.body, declaredLength: declared) { active?.ended() }
        let result: ResumableAppendResult
        let store = self.store
        let checksums = signedSHA256 == nil || checksums.contains(.sha256) ? checksums : checksums + [.sha256]
        let checked: @Sendable (BodyDigests, Bool) throws -> Void = { digests, interrupted in
            if let signedSHA256 {
                guard !interrupted else {
                    throw ResumableRefusal(
                        .badRequest, "The signed body ended early and cannot be verified; nothing of it was kept.",
                        wire: wire)
                }
                guard digests.checksums[ChecksumAlgorithm.sha256.s3Name] == signedSHA256 else {
                    throw Self.signedBodyMismatch(wire)
                }
            }
            try verify(digests, interrupted)
        }
        do {
            // Not stopped by the request's cancellation: a connection reset (a mobile link, a middlebox) cancels the
            // request, and what arrived before it must still be recorded, as when the body ends early.
            result = try await whileIgnoringCancellation {
                try await store.appendResumable(
                    upload, at: offset, body: body, checksums: checksums, byteLimit: byteLimit,
                    verify: { digests in try checked(digests, body.interrupted.withLockedValue { $0 }) })
            }
        } catch let error as FerryDomainError where error.code == .tooLarge {
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        } catch let error as S3Error where error.code == .entityTooLarge {
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        }
        switch result {
        case .appended(let stored): return (stored, body.interrupted.withLockedValue { $0 })
        case .conflict(let current): throw Self.conflict(current, provided: offset, wire: wire)
        case .beyondLength:
            throw ResumableRefusal(.contentTooLarge, "The body passes the upload's length.", wire: wire)
        }
    }

    /// Makes a fully received upload its object (once, whichever node and request gets there) and tells the media
    /// catalog. An upload that may only create its object, when the object appeared meanwhile, is ended (its bytes
    /// can never become it): 409.
    private func finish(_ upload: ResumableUpload, wire: ResumableWire) async throws -> ResumableUpload {
        var upload = upload
        let completed: ObjectInfo?
        // The file of a stored video or image takes only the same bytes again (a creation retried after its answer
        // was lost); another upload is ended, its bytes can never become the file.
        let stored = try await MediaLibrary.StoredFile.forCompletion(bucket: upload.bucket, key: upload.key, check: writeAllowed)
        if let mimeLimit = upload.info.mimeLimit {
            try await checkContent([upload], mimeLimit: mimeLimit, wire: wire, ending: upload)
        }
        do {
            completed = try await store.completeResumable(
                upload, fileOwner: stored?.owner,
                verify: { etag in if let stored, !stored.accepts(etag: etag) { throw stored.refusal } })
        } catch let refusal as FerryDomainError where stored != nil && refusal == stored?.refusal {
            // Other bytes than the file's, stored before or made meanwhile by another upload.
            await end(upload)
            throw refusal
        } catch let error as FerryDomainError where error.code == .preconditionFailed && upload.info.insertOnly == true {
            await end(upload)
            throw ResumableRefusal(
                .conflict, "An object with this key exists and the upload token is insertOnly; the upload is ended.",
                wire: wire)
        }
        if let object = completed {
            upload.etag = object.etag
            await objectStored(object)
        } else if upload.etag == nil, let current = try await store.resumableUpload(upload.id) {
            upload = current
        }
        return upload
    }

    /// Refuses (403) uploads whose bytes, one after the other, are of a type `mimeLimit` does not allow
    /// (``ContentSniffer``), given the type declared at creation (by default the first upload's); a refused upload
    /// `ending` is ended: its bytes can never become its object. Uploads whose bytes went meanwhile (completed or
    /// ended by another request) are left to the completion, which knows what became of them.
    private func checkContent(
        _ uploads: [ResumableUpload], mimeLimit: String, declared: String? = nil, wire: ResumableWire,
        ending: ResumableUpload? = nil
    ) async throws {
        let head: [UInt8]
        let declaredType: String?
        do {
            (head, declaredType) = try await store.resumableHead(uploads, count: ContentSniffer.headLength)
        } catch let error as FerryDomainError where error.code == .uploadNotFound {
            return
        }
        guard let refused = PutPolicy.refusedType(mimeLimit: mimeLimit, declared: declared ?? declaredType, head: head)
        else { return }
        if let ending { await end(ending) }
        throw ResumableRefusal(
            .forbidden,
            "The upload's content is \(refused.prefix(128)), which the upload token does not allow"
                + (ending == nil ? "." : "; the upload is ended."), wire: wire)
    }

    // MARK: Helpers

    /// Ends an upload whose bytes can never become its object (`expired`: one past its expiry), even when the
    /// request's task is cancelled.
    private func end(_ upload: ResumableUpload, expired: Bool = false) async {
        let store = self.store
        await whileIgnoringCancellation { try? await store.terminateResumable(upload, expired: expired) }
    }

    /// The upload, unexpired; unless `completing` is false, a fully received upload whose completion a crash
    /// interrupted is completed now (an IETF upload only once its client declares it complete).
    private func live(_ id: String, wire: ResumableWire, completing: Bool = true) async throws -> ResumableUpload {
        guard Hex.isRandomId(id), let upload = try await store.resumableUpload(id) else {
            throw ResumableRefusal(.notFound, "No upload has this URL.", wire: wire)
        }
        // A key that is gone or disabled has no rate to keep; what it may still do is decided below as before.
        if let quota = try? await credentials.ownerQuota(upload.owner) { try takeRequestTurn(upload.owner, quota) }
        if upload.etag == nil, upload.expiresAt <= credentials.now() {
            // Its bytes and its ConcurrentUploads slot go now rather than at the collector's next pass.
            await end(upload, expired: true)
            throw ResumableRefusal(wire == .tus ? .gone : .notFound, "The upload expired.", wire: wire)
        }
        guard completing, upload.etag == nil, upload.isFullyReceived, upload.info.kind == .single else { return upload }
        // tus completes an upload whose offset reached its length, an upload an IETF client created too; and any
        // request one whose completion a stopped server left between making its object and recording it (an IETF
        // client that lost its answer does not see "incomplete" beside its stored file).
        if upload.completesWhenReceived || wire == .tus { return try await finishSaying(upload, wire: wire) }
        guard try await store.resumableObjectMade(upload) else { return upload }
        return try await finishSaying(upload, wire: wire)
    }

    private static func requireWire(_ request: Request) throws -> ResumableWire {
        guard let wire = try ResumableWire.of(request.headers) else {
            throw ResumableRefusal(
                .preconditionFailed, "Name the protocol: Tus-Resumable: 1.0.0, or Upload-Draft-Interop-Version.",
                wire: nil, headers: [.tusVersion: ResumableWire.tusVersion])
        }
        return wire
    }

    /// 409: the append did not start at the upload's offset (or another append was recorded first); the answer says
    /// where to resume.
    private static func conflict(_ upload: ResumableUpload, provided: Int64, wire: ResumableWire) -> ResumableRefusal {
        var headers: HTTPFields = [.uploadOffset: String(upload.offset)]
        wire.setComplete(upload.etag != nil, in: &headers)
        return ResumableRefusal(
            .conflict, "The upload's offset is \(upload.offset); resume from there.", wire: wire, headers: headers,
            problem: .mismatchingOffset(expected: upload.offset, provided: provided))
    }

    /// The SHA-256 of an empty body.
    private static let emptySHA256 = Hex.decode(SigV4.emptyPayloadHash)

    /// A signed creation whose body is not the one its signature covers.
    private static func signedBodyMismatch(_ wire: ResumableWire) -> ResumableRefusal {
        ResumableRefusal(
            .badRequest,
            "XAmzContentSHA256Mismatch: the body does not match the x-amz-content-sha256 it was signed with; "
                + "nothing of it was kept.",
            wire: wire)
    }

    private static func bodyEnded(_ upload: ResumableUpload, wire: ResumableWire) -> ResumableRefusal {
        var refusal = ResumableRefusal(
            .badRequest, "The body ended early; \(upload.offset) bytes are stored.", wire: wire,
            headers: [.uploadOffset: String(upload.offset)])
        refusal.keepsUpload = true
        return refusal
    }

    /// The upload's URL.
    private func location(_ upload: ResumableUpload, context: FerryRequestContext) throws -> String {
        try base(context) + Self.pathPrefix + upload.id
    }

    /// The base of upload URLs: the public endpoint, unless upload URLs follow each request's Host.
    private func base(_ context: FerryRequestContext) throws -> String {
        if !followsRequests, let publicEndpoint { return publicEndpoint.base }
        return try context.endpoint().base
    }

    /// What an upload became, as the final response's body says it.
    private static func summary(_ upload: ResumableUpload, crc64nvme: String?) -> Data {
        var fields: [String: String] = [
            "Bucket": upload.bucket, "Key": upload.key, "ETag": upload.etag ?? "", "Size": String(upload.offset),
        ]
        if let crc64nvme { fields["ChecksumCRC64NVME"] = crc64nvme }
        if let videoId = upload.info.videoId { fields["MediaId"] = videoId }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(fields)) ?? Data()
    }
}

/// A request body that ends, instead of failing, when the connection does: an append keeps what arrived. Whether it
/// was cut short (by an error, or before its declared length) is in ``interrupted``; once its declared length has
/// arrived (or, with none declared, its end) it is whole, and an error reading its end does not cut it short.
struct TolerantBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer

    let base: Base
    let declaredLength: Int64?
    /// Told once, when the body has ended: arrived whole, or cut short (nothing more of it will be read).
    let ended: @Sendable () -> Void
    /// Whether the body was cut short.
    let interrupted = NIOLockedValueBox(false)

    init(base: Base, declaredLength: Int64?, ended: @escaping @Sendable () -> Void = {}) {
        self.base = base
        self.declaredLength = declaredLength
        self.ended = ended
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let body: TolerantBody
        var count: Int64 = 0
        var whole = false
        var done = false

        mutating func next() async throws -> ByteBuffer? {
            guard !done else { return nil }
            noteLength()
            do {
                if let buffer = try await base.next() {
                    count += Int64(buffer.readableBytes)
                    noteLength()
                    return buffer
                }
                // The end reached: whole, unless short of its declared length.
                if let declared = body.declaredLength, count < declared {
                    body.interrupted.withLockedValue { $0 = true }
                    body.ended()
                } else if !whole {
                    whole = true
                    body.ended()
                }
            } catch is CancellationError where !whole {
                throw CancellationError()
            } catch {
                if !whole {
                    body.interrupted.withLockedValue { $0 = true }
                    body.ended()
                }
            }
            done = true
            return nil
        }

        /// Notes whether the declared length has arrived; the first time it has, the body tells `ended`.
        private mutating func noteLength() {
            guard !whole, let declared = body.declaredLength, count >= declared else { return }
            whole = true
            body.ended()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), body: self)
    }
}

/// The appends under way on this node, by upload. The IETF draft has a server stop an append when another request for
/// its upload comes (an IETF HEAD or append does so here): a client whose connection was reset (a mobile link, a
/// middlebox) asks for the offset at once, while its old append is still being read from the server's buffers. A HEAD
/// or append of the upload gives the old appends there a moment to end, closes the connections of those that have not
/// (they keep what the server read, as when a body is cut short) and waits for their record, a few seconds at most, so
/// the offset it learns counts what arrived rather than those bytes being sent again into a conflict. An append whose
/// body has ended (arrived whole, or cut short) is not stopped: the request waits for it to be answered.
///
/// tus keeps racing requests apart and stops no append (a HEAD may come from a client watching an upload another
/// sends), but a tus HEAD or append does wait, as the IETF ones do, for the appends whose bodies have ended to be
/// recorded (``settle(_:grace:upTo:)``): the offset a reset client asks for then counts what its old append brought.
final class ActiveAppends: Sendable {
    /// One append under way, as its request sees it.
    struct Append: Sendable {
        let appends: ActiveAppends
        let id: String
        let token: Int

        /// The append's body has ended (arrived whole, or cut short): a later request no longer stops it, only waits
        /// for it.
        func ended() {
            appends.change(id) { entries in
                if let index = entries.firstIndex(where: { $0.token == token }) { entries[index].ended = true }
            }
        }

        /// The append has been answered (or refused): the requests waiting for it go on.
        func end() {
            appends.change(id) { entries in entries.removeAll { $0.token == token } }
        }
    }

    private struct Entry {
        var token: Int
        var ended: Bool
        /// An IETF append, which a later request stops; a tus one is only waited for once its body ended.
        var stoppable: Bool
        /// Ends the append's connection.
        var close: @Sendable () -> Void
    }

    /// What a wait waits for, of the appends to one upload.
    private enum Until {
        /// Every body has ended (with `stoppableOnly`, every stoppable append's).
        case ended(stoppableOnly: Bool)
        /// No append is left unanswered whose body has ended (with `stoppable`, nor any stoppable one); those still
        /// receiving go on.
        case answered(stoppable: Bool)

        func holds(_ entries: [Entry]) -> Bool {
            switch self {
            case .ended(let only): entries.allSatisfy { $0.ended || only && !$0.stoppable }
            case .answered(let stoppable): !entries.contains { $0.ended || stoppable && $0.stoppable }
            }
        }
    }

    /// A request waiting in ``wait(_:until:upTo:)``.
    private struct Waiter {
        var until: Until
        /// Nil until the wait has begun.
        var continuation: CheckedContinuation<Void, Never>?
    }

    private struct State {
        var next = 0
        var byUpload: [String: [Entry]] = [:]
        var waiting: [String: [Int: Waiter]] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// An append to upload `id` begins (`ended` when its body has arrived already; `stoppable` for an IETF append);
    /// `close` ends its connection.
    func begin(
        _ id: String, ended: Bool = false, stoppable: Bool = true, close: @escaping @Sendable () -> Void
    ) -> Append {
        state.withLockedValue { state in
            state.next += 1
            state.byUpload[id, default: []].append(
                Entry(token: state.next, ended: ended, stoppable: stoppable, close: close))
            return Append(appends: self, id: id, token: state.next)
        }
    }

    /// Stops the IETF appends under way to upload `id`: those whose bodies have not ended within `grace` have their
    /// connections closed (each keeps what the server read of it; one waiting for bytes from a link gone silent ends
    /// too). Returns once every one of them, and every tus append whose body ended, has been answered, or after
    /// `limit` more; a tus append still receiving goes on.
    func stop(_ id: String, grace: Duration = .milliseconds(250), upTo limit: Duration = .seconds(5)) async {
        await wait(id, until: .ended(stoppableOnly: true), upTo: grace)
        let closing = state.withLockedValue { $0.byUpload[id]?.filter { $0.stoppable && !$0.ended }.map(\.close) ?? [] }
        for close in closing { close() }
        await wait(id, until: .answered(stoppable: true), upTo: limit)
    }

    /// Lets the appends to upload `id` whose bodies end within `grace` be answered (tus), stopping none: returns once
    /// no ended one is left unanswered, or after `limit` more. An append still receiving its body goes on.
    func settle(_ id: String, grace: Duration = .milliseconds(250), upTo limit: Duration = .seconds(5)) async {
        await wait(id, until: .ended(stoppableOnly: false), upTo: grace)
        await wait(id, until: .answered(stoppable: false), upTo: limit)
    }

    /// Changes the appends to upload `id`, and lets the waits that may go on go on.
    private func change(_ id: String, _ update: (inout [Entry]) -> Void) {
        let going = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            var entries = state.byUpload[id] ?? []
            update(&entries)
            state.byUpload[id] = entries.isEmpty ? nil : entries
            guard var waiting = state.waiting[id] else { return [] }
            var going: [CheckedContinuation<Void, Never>] = []
            for (number, waiter) in waiting where waiter.until.holds(entries) {
                // A wait not yet begun finds its place gone, and does not wait.
                waiting[number] = nil
                if let continuation = waiter.continuation { going.append(continuation) }
            }
            state.waiting[id] = waiting.isEmpty ? nil : waiting
            return going
        }
        for continuation in going { continuation.resume() }
    }

    /// Waits until the appends to upload `id` are as `until` says, or `limit` has passed.
    private func wait(_ id: String, until: Until, upTo limit: Duration) async {
        let number = state.withLockedValue { state -> Int? in
            guard !until.holds(state.byUpload[id] ?? []) else { return nil }
            state.next += 1
            state.waiting[id, default: [:]][state.next] = Waiter(until: until)
            return state.next
        }
        guard let number else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let waits = self.state.withLockedValue { state -> Bool in
                        guard state.waiting[id]?[number] != nil else { return false }
                        state.waiting[id]?[number]?.continuation = continuation
                        return true
                    }
                    if !waits { continuation.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
            // Past the limit this wait ends; other requests' waits keep theirs.
            let late = self.state.withLockedValue { state -> Waiter? in
                let late = state.waiting[id]?.removeValue(forKey: number)
                if state.waiting[id]?.isEmpty == true { state.waiting[id] = nil }
                return late
            }
            late?.continuation?.resume()
        }
    }
}
