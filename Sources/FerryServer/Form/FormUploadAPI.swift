import AsyncHTTPClient
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Qiniu-style form upload: one `multipart/form-data` POST to ``path`` carrying an upload token, a key, optional
/// fields and the file, which is streamed into the store (nothing is visible until it is complete and verified).
///
/// Fields, in order: `token`, `key`, `crc32`, `x:<name>` custom variables, `x-qn-meta-<name>` metadata, then `file`
/// (which must be last; its `Content-Type` is the object's MIME type). The token's access key must be the root key or
/// an active stored access key allowed `s3:PutObject` on the object; its secret verifies the token.
///
/// Without a callback the answer is `200 {"key": …, "hash": …}` (or the policy's `returnBody`), where `hash` is the
/// hex MD5 of the bytes — the object's S3 ETag. With a `callbackUrl` the server POSTs the callback body to it after
/// storing, signed `Authorization: QBox <AK>:<sign>` (``FormCallbackSignature``), and answers 200 with the callback's
/// response body; when the callback fails the answer is 579 and the file stays stored.
///
/// Errors are JSON `{"error": message, "code": FormUploadErrorCode, "requestId": …}` with the status documented on
/// each ``FormUploadErrorCode``.
public struct FormUploadAPI: Sendable {
    /// The endpoint's path.
    public static let path = FormUploadFields.path

    let store: any ObjectStore
    let credentials: CredentialStore
    let configuration: FerryServerConfiguration
    /// Where callbacks may go (public addresses, and what `callbackAllow` adds).
    let callbackTargets: CallbackTargets
    /// Called after an object is stored (the media catalog follows stored objects).
    var objectStored: @Sendable (ObjectInfo) async -> Void = { _ in }
    /// Asked before an object is written: throws to refuse it, or names the stored file of a video or image, which
    /// only the same bytes may write again (``ObjectAPI/writeAllowed``).
    var writeAllowed: @Sendable (_ bucket: String, _ key: String) async throws -> MediaLibrary.StoredFile? = { _, _ in nil }
    /// Takes a turn of the token's access key once the token verifies (``RequestRateMiddleware/take(_:from:)``):
    /// throws `requestRateExceeded` past its `RequestsPerSecond`, before the file is read.
    var takeRequestTurn: @Sendable (Principal) throws -> Void = { _ in }

    /// Largest total of metadata names and values (S3's limit).
    static let maxMetadataBytes = 2048
    /// Characters of an HTTP header name (RFC 9110 `tchar`), which metadata names become.
    static let tokenCharacters = CharacterSet(
        charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

    /// Largest callback answer passed back to the uploader.
    static let maxCallbackResponse = 1024 * 1024

    /// The upload token `text` once it parses, its access key is active and its signature and deadline hold; the
    /// request takes its turn of that key's request rate.
    private func verifiedToken(_ text: String) async throws -> (token: UploadToken, signer: CredentialStore.Resolved) {
        guard !text.isEmpty else {
            throw FormUploadError(.missingField, "The form has no token field (it must come before the file).")
        }
        let token: UploadToken
        do throws(UploadTokenError) {
            token = try UploadToken.parse(text)
        } catch {
            throw FormUploadError(.badToken, error.message)
        }
        guard let resolved = try await credentials.longTermKey(token.accessKey) else {
            throw FormUploadError(.unknownAccessKey, "The upload token's access key is unknown or disabled.")
        }
        do throws(UploadTokenError) {
            try token.verify(secretKey: resolved.secretAccessKey, now: credentials.now())
        } catch {
            throw FormUploadError(error.code == .expired ? .expiredToken : .badToken, error.message)
        }
        try takeRequestTurn(resolved.principal)
        return (token, resolved)
    }

    /// The fields read before the file part.
    struct Fields {
        /// The upload token, verified as soon as its field was read, and the key that signed it.
        var token: (token: UploadToken, signer: CredentialStore.Resolved)?
        var key: String?
        var crc32: String?
        var variables: [(name: String, value: String)] = []
        /// Bytes of the names and values in ``variables``.
        var variableBytes = 0
        var metadata: [String: String] = [:]
    }

    /// Most bytes of `x:` variables a form holds before its token has been read and verified (then
    /// ``maxVariableBytes``): a request with no valid token holds no more than this and its token field.
    static let maxVariableBytesBeforeToken = 16 * 1024
    /// Most bytes of `x:` variables a form with a valid token holds.
    static let maxVariableBytes = 1024 * 1024

    /// Answers `POST /_ferry/form`, the one method routed here (refusals are thrown for the group's ``FormDialect``).
    func upload(_ request: Request, requestId: String, logger: Logger) async throws -> Response {
        guard let contentType = request.headers[.contentType],
            let boundary = MultipartFormParser.boundary(fromContentType: contentType)
        else {
            throw FormUploadError(.malformedForm, "The body must be multipart/form-data with a boundary.")
        }
        let reader = FormBodyReader(body: request.body, boundary: boundary)
        var fields = Fields()
        let fileHeaders: MultipartFormParser.PartHeaders
        readFields: while true {
            switch try await reader.nextPart() {
            case .field(let name, let value):
                switch name {
                case FormUploadFields.token:
                    guard fields.token == nil else {
                        throw FormUploadError(.invalidArgument, "The form has two token fields.")
                    }
                    // Verified before anything more is read: a form without a valid token is answered at once.
                    fields.token = try await verifiedToken(value)
                case FormUploadFields.key: fields.key = value
                case FormUploadFields.crc32: fields.crc32 = value
                default:
                    if name.hasPrefix(FormUploadFields.customVariablePrefix) {
                        fields.variables.append((name, value))
                        fields.variableBytes += name.utf8.count + value.utf8.count
                        let limit = fields.token == nil ? Self.maxVariableBytesBeforeToken : Self.maxVariableBytes
                        guard fields.variableBytes <= limit else {
                            throw FormUploadError(
                                .invalidArgument,
                                fields.token == nil
                                    ? "The form's x: variables before its token field are larger than 16 KiB."
                                    : "The form's x: variables are larger than 1 MiB.")
                        }
                    } else if name.lowercased().hasPrefix(FormUploadFields.metadataPrefix) {
                        let metaName = String(name.dropFirst(FormUploadFields.metadataPrefix.count)).lowercased()
                        guard !metaName.isEmpty, metaName.unicodeScalars.allSatisfy(Self.tokenCharacters.contains),
                            !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F })
                        else {
                            throw FormUploadError(
                                .invalidArgument,
                                "Metadata fields are x-qn-meta-<name> with a header-token name and a single-line value."
                            )
                        }
                        fields.metadata[metaName] = value
                        let total = fields.metadata.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
                        guard total <= Self.maxMetadataBytes else {
                            throw FormUploadError(.invalidArgument, "The metadata is larger than 2 KiB.")
                        }
                    }
                // Other fields (Qiniu's `accept`, `fname`, …) are ignored.
                }
            case .file(let headers):
                fileHeaders = headers
                break readFields
            case .end:
                throw FormUploadError(.missingField, "The form has no file part.")
            }
        }
        guard let (token, resolved) = fields.token else {
            throw FormUploadError(.missingField, "The form has no token field (it must come before the file).")
        }
        let policy = token.policy
        if let problem = policy.problem { throw FormUploadError(.invalidArgument, problem) }

        // Where the file goes.
        let bucket = policy.bucket
        let key: String
        switch (fields.key, policy.key) {
        case (let given?, let scoped?):
            guard given.isByteEqual(to: scoped) else {
                throw FormUploadError(.keyNotAllowed, "The key differs from the one the upload token's scope names.")
            }
            key = given
        case (let given?, nil): key = given
        case (nil, let scoped?): key = scoped
        case (nil, nil): throw FormUploadError(.missingField, "The form has no key and the token's scope names none.")
        }
        try ObjectAPI.validateUploadKey(key) { FormUploadError(.invalidArgument, $0) }
        guard resolved.principal.allows(action: "s3:PutObject", bucket: bucket, key: key) else {
            throw FormUploadError(.accessDenied, "The upload token's access key may not write this object.")
        }
        do {
            _ = try await store.bucket(bucket)
        } catch let error as FerryDomainError where error.code == .bucketNotFound {
            throw FormUploadError(.noSuchBucket, "The bucket \(bucket.prefix(64)) does not exist.")
        }
        // A type that cannot be stored (control characters, past 256 bytes) is taken as none, as tus takes it.
        let declared = fileHeaders.contentType?.trimmingCharacters(in: .whitespaces).nilIfEmpty
            .flatMap { ContentSniffer.isUsableType($0) ? $0 : nil }
        var mimeType = declared ?? "application/octet-stream"
        if policy.mimeLimit?.trimmingCharacters(in: .whitespaces).isEmpty == false {
            // Matched against what the content shows (and the declared type): a first look at the file's bytes.
            let head = try await reader.peekFile(upTo: ContentSniffer.headLength)
            if let refused = policy.refusedType(declared: declared, head: head) {
                throw FormUploadError(
                    .mimeTypeNotAllowed, "The file's MIME type \(refused.prefix(128)) is not allowed by the upload token.")
            }
            if ContentSniffer.essence(mimeType) == "application/octet-stream" {
                mimeType = ContentSniffer.type(of: head, declared: nil)
            }
        }
        if policy.insertOnly, try await store.storedObject(bucket: bucket, key: key) != nil {
            throw FormUploadError(.fileExists, "An object with this key exists and the token is insertOnly.")
        }
        let expectedCRC: UInt32?
        if let text = fields.crc32 {
            let digits = text.trimmingCharacters(in: .whitespaces)
            guard digits.first?.isASCII == true, digits.first?.isNumber == true, let value = UInt32(digits) else {
                throw FormUploadError(.invalidArgument, "crc32 must be a decimal number from 0 to 4294967295.")
            }
            expectedCRC = value
        } else {
            expectedCRC = nil
        }

        // The file, streamed into the store.
        let stored = try await writeAllowed(bucket, key)
        let object: ObjectInfo
        do {
            object = try await store.putObject(
                bucket: bucket, key: key,
                attributes: ObjectAttributes(contentType: mimeType, userMetadata: fields.metadata), tags: [],
                body: reader.fileContent(limit: policy.fsizeLimit), checksums: expectedCRC == nil ? [] : [.crc32],
                condition: (policy.insertOnly ? ObjectWriteCondition.absent : .none).forFile(stored),
                verify: { digests in
                    if let stored, !stored.accepts(etag: Hex.encode(digests.md5)) { throw stored.refusal }
                    guard let expectedCRC else { return }
                    let bytes = digests.checksums[ChecksumAlgorithm.crc32.s3Name] ?? []
                    let actual = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                    guard bytes.count == 4, actual == expectedCRC else {
                        throw FormUploadError(
                            .crc32Mismatch, "The file's CRC32 is \(actual), not \(expectedCRC) as the form says.")
                    }
                }, charge: StorageCharge(principal: resolved.principal))
        } catch let error as FerryDomainError where error.code == .bucketNotFound {
            throw FormUploadError(.noSuchBucket, "The bucket \(bucket.prefix(64)) does not exist.")
        }
        await objectStored(object)
        logger.debug("form upload stored", metadata: ["ferry.bucket": .string(bucket), "ferry.size": "\(object.size)"])

        // The stored file's: a video's or image's file written again with its bytes is kept with its own type.
        let values = MagicVariables(
            bucket: bucket, key: key, hash: object.etag, size: object.size,
            mimeType: object.attributes.contentType ?? mimeType,
            fileName: fileHeaders.filename, variables: fields.variables)
        let callbackURLs = policy.callbackURLs
        guard !callbackURLs.isEmpty else {
            let body: String
            if let template = policy.returnBody, !template.isEmpty {
                body = values.substitute(in: template, style: .json)
            } else {
                body = values.substitute(in: #"{"hash":$(etag),"key":$(key)}"#, style: .json)
            }
            return Response(
                status: .ok,
                headers: [.contentType: "application/json", .amzRequestId: requestId, .eTag: "\"\(object.etag)\""],
                body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        // Qiniu's fallbacks: each URL in turn until one answers 2xx.
        for (index, url) in callbackURLs.enumerated() {
            do {
                var response = try await callback(
                    url: url, policy: policy, values: values, accessKey: token.accessKey,
                    secretKey: resolved.secretAccessKey, requestId: requestId, logger: logger)
                response.headers[.eTag] = "\"\(object.etag)\""
                return response
            } catch let error as FormUploadError where error.code == .callbackFailed && index + 1 < callbackURLs.count {
                logger.debug("form upload callback failed; trying the next URL")
            }
        }
        throw FormUploadError(.callbackFailed, "The file was stored, but the callback to the app server failed.")
    }

    // MARK: Callback

    /// The callback's body and content type.
    static func callbackBody(policy: PutPolicy, values: MagicVariables) -> (body: String, contentType: String) {
        if policy.callbackBodyType?.lowercased().hasPrefix("application/json") == true {
            let template =
                policy.callbackBody?.nilIfEmpty ?? #"{"bucket":"$(bucket)","key":"$(key)","hash":"$(etag)","fsize":$(fsize)}"#
            return (values.substitute(in: template, style: .json), "application/json")
        }
        let template =
            policy.callbackBody?.nilIfEmpty
            ?? "bucket=$(bucket)&key=$(key)&hash=$(etag)&fsize=$(fsize)&mimeType=$(mimeType)"
        var body = values.substitute(in: template, style: .formComponent)
        // The uploader's callback parameters the template does not place are appended.
        for variable in values.variables where !template.contains("$(\(variable.name))") {
            if !body.isEmpty { body += "&" }
            body += MagicVariables.formEncode(variable.name) + "=" + MagicVariables.formEncode(variable.value)
        }
        return (body, "application/x-www-form-urlencoded")
    }

    private func callback(
        url: String, policy: PutPolicy, values: MagicVariables, accessKey: String, secretKey: String,
        requestId: String, logger: Logger
    ) async throws -> Response {
        let failed = FormUploadError(.callbackFailed, "The file was stored, but the callback to the app server failed.")
        guard let components = HTTPTarget.components(url), let host = components.host else { throw failed }
        // Checked once resolved, and connected to the very address checked. The uploader learns nothing of why.
        guard let address = await callbackTargets.address(for: host) else {
            logger.debug("form upload callback target refused")
            throw failed
        }
        let (body, contentType) = Self.callbackBody(policy: policy, values: values)
        let bodyBytes = Array(body.utf8)
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: contentType)
        request.headers.add(name: "User-Agent", value: "Ferry-Callback")
        // The upload's trace continues at the app server (the client makes no spans of its own).
        if let traceParent = TraceContext.current() { request.headers.add(name: "traceparent", value: traceParent) }
        request.headers.add(
            name: "Authorization",
            value: FormCallbackSignature.authorization(
                accessKey: accessKey, secretKey: secretKey, path: path, query: components.percentEncodedQuery,
                body: bodyBytes))
        request.body = .bytes(ByteBuffer(bytes: bodyBytes))

        let timeout = TimeAmount(configuration.formCallbackTimeout)
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.redirectConfiguration = .disallow
        clientConfiguration.dnsOverride = [host: address]
        clientConfiguration.timeout = .init(connect: timeout, read: timeout)
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        // No spans of the client's own: they would carry the URL whole.
        clientConfiguration.tracing.tracer = nil
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: clientConfiguration)
        // One limit for the answer's head and its body: a receiver that trickles its body is as late as one that
        // does not answer.
        let outcome = await withTimeLimit(configuration.formCallbackTimeout) {
            [request] () async -> (status: UInt, contentType: String?, body: ByteBuffer)? in
            do {
                let response = try await client.execute(request, timeout: timeout)
                let answer = try await response.body.collect(upTo: Self.maxCallbackResponse)
                return (response.status.code, response.headers.first(name: "Content-Type"), answer)
            } catch {
                return nil
            }
        } ?? nil
        if outcome == nil {
            // The URL may carry a secret of the app server: neither it nor the error text (which may quote it) is
            // logged.
            logger.debug("form upload callback unreachable or too slow")
        }
        // Closed apart from the answer: a receiver still trickling when the limit ended the request can hold its
        // connection's close for as long as it trickles, and the uploader has waited its limit already. The request's
        // own task, left by the time limit, ends with it.
        Task { try? await client.shutdown() }
        guard let outcome, (200..<300).contains(outcome.status) else {
            if let outcome {
                logger.debug("form upload callback refused", metadata: ["ferry.status": "\(outcome.status)"])
            }
            throw failed
        }
        return Response(
            status: .ok,
            headers: [.contentType: outcome.contentType ?? "application/json", .amzRequestId: requestId],
            body: .init(byteBuffer: outcome.body))
    }
}

/// A refused form upload: its code, status and message (never the token or a signature).
struct FormUploadError: Error {
    var code: FormUploadErrorCode
    var message: String
    /// The `Retry-After` of a ``FormUploadErrorCode/tooManyRequests``, in whole seconds.
    var retryAfterSeconds: Int?

    init(_ code: FormUploadErrorCode, _ message: String, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The HTTP status: Qiniu's where it has one.
    var status: Int {
        switch code {
        case .badToken, .unknownAccessKey, .expiredToken: 401
        case .keyNotAllowed, .mimeTypeNotAllowed, .accessDenied, .quotaExceeded: 403
        case .methodNotAllowed: 405
        case .crc32Mismatch: 406
        case .fileTooLarge: 413
        case .tooManyRequests: 573
        case .callbackFailed: 579
        case .fileExists: 614
        case .noSuchBucket: 631
        case .internalError: 500
        case .serviceUnavailable: 503
        case .storageFull: 507
        default: 400
        }
    }
}

/// Values of the magic variables of `callbackBody` and `returnBody`: `$(bucket)`, `$(key)`, `$(etag)` and `$(hash)`
/// (hex MD5), `$(fsize)`, `$(mimeType)`, `$(fname)` and `$(x:<name>)`. Unknown variables become empty (null as a
/// JSON value).
struct MagicVariables {
    var bucket: String
    var key: String
    var hash: String
    var size: Int64
    var mimeType: String
    var fileName: String?
    var variables: [(name: String, value: String)]

    /// How a value is written into the template.
    enum Style {
        /// Percent-encoded for `application/x-www-form-urlencoded`.
        case formComponent
        /// JSON, as Qiniu's templates write it both ways: inside one of the template's strings (`"$(key)"`) a value
        /// is escaped for it; elsewhere (`$(key)`) it is a JSON value: strings quoted, numbers bare, unknown null.
        case json
    }

    func value(of name: String) -> (text: String, isNumber: Bool)? {
        switch name {
        case "bucket": return (bucket, false)
        case "key": return (key, false)
        case "etag", "hash": return (hash, false)
        case "fsize": return (String(size), true)
        case "mimeType": return (mimeType, false)
        case "fname": return fileName.map { ($0, false) }
        default:
            if name.hasPrefix(FormUploadFields.customVariablePrefix) {
                return variables.last { $0.name == name }.map { ($0.value, false) }
            }
            return nil
        }
    }

    func substitute(in template: String, style: Style) -> String {
        var output = ""
        var rest = Substring(template)
        // Whether the template's text so far ends inside a JSON string, and after a backslash there.
        var inString = false
        var escaped = false
        func follow(_ text: Substring) {
            for character in text {
                if escaped {
                    escaped = false
                } else if character == "\"" {
                    inString.toggle()
                } else if character == "\\" && inString {
                    escaped = true
                }
            }
        }
        while let start = rest.range(of: "$(") {
            output += rest[..<start.lowerBound]
            follow(rest[..<start.lowerBound])
            guard let end = rest[start.upperBound...].firstIndex(of: ")") else {
                rest = rest[start.lowerBound...]
                break
            }
            let name = String(rest[start.upperBound..<end])
            let found = value(of: name)
            switch style {
            case .formComponent: output += Self.formEncode(found?.text ?? "")
            case .json where inString: output += Self.jsonEscape(found?.text ?? "")
            case .json:
                if let found {
                    output += found.isNumber ? found.text : "\"" + Self.jsonEscape(found.text) + "\""
                } else {
                    output += "null"
                }
            }
            rest = rest[rest.index(after: end)...]
        }
        return output + rest
    }

    /// RFC 3986 unreserved characters stay; everything else is percent-encoded (UTF-8).
    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func formEncode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    static func jsonEscape(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let literal = String(decoding: (try? encoder.encode(text)) ?? Data("\"\"".utf8), as: UTF8.self)  // "…"
        return String(literal.dropFirst().dropLast())
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
