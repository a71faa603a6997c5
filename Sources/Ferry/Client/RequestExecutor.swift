import FerryCore
import Foundation
import Logging

/// What happens to one request's retries, reported to whoever runs it (an upload turns these into events).
public struct RequestObserver: Sendable {
    /// A request failed and will be tried again after `delay`.
    public var retrying: @Sendable (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void = { _, _, _ in }
    /// A request succeeded after one or more retries.
    public var retryResumed: @Sendable () -> Void = {}
    /// Body bytes handed to the network.
    public var bytesSent: @Sendable (Int) -> Void = { _ in }
    /// The server said the credentials expired and the provider had none fresher.
    public var credentialsExpired: @Sendable () -> Void = {}

    /// An observer that ignores everything.
    public init() {}
}

/// The credentials an upload signs with: its provider's, or ones the app handed over with `resume(with:)`.
///
/// When the server refuses expired credentials, the requests in flight that were refused together share one call of
/// the provider (``refresh(after:)`` renews through one ``CredentialCache``), and those refused with credentials already
/// replaced get the replacement without asking again.
actor CredentialSource {
    let provider: any CredentialProvider
    /// The time expiry is judged by.
    let now: @Sendable () -> Date
    /// Credentials the app handed over, signed with instead of the provider's until a refresh replaces them.
    private var override: Credentials?
    /// The credentials that last replaced refused ones (the override, or the provider's answer to a refusal).
    private let replacement: CredentialCache

    init(provider: any CredentialProvider, now: @escaping @Sendable () -> Date = { ServiceClock.now() }) {
        self.provider = provider
        self.now = now
        replacement = CredentialCache(now: now) { try await provider.credentials() }
    }

    func current() async throws -> Credentials {
        if let override { return override }
        return try await provider.credentials()
    }

    func set(_ credentials: Credentials) {
        override = credentials
        replacement.replace(with: credentials)
    }

    /// Fresh credentials after `stale` was refused as expired, or nil when there are none fresher.
    func refresh(after stale: Credentials) async throws -> Credentials? {
        let fresh = try await replacement.renew(after: stale)
        guard fresh != stale, !fresh.isExpired(at: now()) else { return nil }
        if fresh != override { override = nil }
        return fresh
    }
}

/// A signed S3 request before it is sent.
struct S3Request: Sendable {
    var method: String
    var bucket: String?
    var key: String?
    var query: [(name: String, value: String)] = []
    var headers: [(name: String, value: String)] = []
    var body: (any BodyBuffer)?
    /// Receives a 2xx response body instead of collecting it.
    var responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    /// The longest the request and its whole answer may take; nil: the client's `timeoutIntervalForRequest`.
    var timeout: Duration?
    /// How long the answer may take once the body is handed over (an upload's parts), measured by the upload's
    /// earlier answers; nil: only the transport's limits.
    var answerWaits: AnswerWaits?
}

extension ObjectStorageClient {
    /// How many fresh credentials one request asks for when the server refuses each as expired.
    static let maxRefreshes = 3

    /// Sends a request with the client's retry policy: signs each attempt afresh, retries what is retryable with
    /// full-jitter backoff, refreshes credentials the server calls expired, and maps S3 error documents to
    /// ``FerryError``.
    func execute(
        _ request: S3Request, credentials source: CredentialSource, observer: RequestObserver = .init()
    ) async throws -> TransportResponse {
        var retried = false
        let logger = configuration.logger
        let told = configuration.onRetry
        let response = try await configuration.retryPolicy.run(
            clock: configuration.clock,
            retrying: { attempt, error, delay in
                retried = true
                told?(attempt, error, delay)
                logger.debug(
                    "retrying request",
                    metadata: ["ferry.attempt": "\(attempt)", "ferry.error": "\(error.code)", "ferry.server-code": "\(error.serverCode ?? "")"])
                observer.retrying(attempt, error, delay)
            }
        ) { attempt in
            // Credentials the server calls expired are refreshed (once for all requests refused together) and the
            // request sent again at once: that is not a retry. A server that refuses fresh ones too is believed after
            // `maxRefreshes` of them.
            var refreshes = 0
            while true {
                let credentials = try await source.current()
                do {
                    return try await send(request, credentials: credentials, observer: observer, attempt: attempt)
                } catch let error as FerryError
                    where error.serverCode == "ExpiredToken"
                    || (error.serverCode == "InvalidAccessKeyId" && credentials.sessionToken != nil
                        && credentials.isExpired(at: configuration.now()))
                {
                    if refreshes < Self.maxRefreshes, let _ = try await source.refresh(after: credentials) {
                        refreshes += 1
                        continue
                    }
                    observer.credentialsExpired()
                    throw FerryError(
                        .credentialsExpired, "The credentials expired; resume with fresh ones.",
                        httpStatus: error.httpStatus, serverCode: error.serverCode, requestId: error.requestId)
                }
            }
        }
        if retried { observer.retryResumed() }
        return response
    }

    /// One attempt: sign, send, and turn an error status into a ``FerryError``.
    func send(
        _ request: S3Request, credentials: Credentials, observer: RequestObserver, attempt: RequestAttempt
    ) async throws -> TransportResponse {
        let path: String
        if let bucket = request.bucket {
            path = self.path(bucket: bucket, key: request.key)
        } else {
            path = endpoint.path.isEmpty ? "/" : endpoint.path
        }
        let bodyCount = request.body?.count ?? 0
        let payloadHash = configuration.signPayload || bodyCount == 0 && request.method != "PUT"
            ? (request.body?.withUnsafeBytes { SigV4.hexSHA256($0) } ?? SigV4.hexSHA256([UInt8]()))
            : SigV4.unsignedPayload
        let signer = SigV4Signer(credentials: credentials.sigV4, region: region)
        let headers = signer.sign(
            method: request.method, path: path, query: request.query, headers: [("host", hostHeader)] + request.headers,
            payloadHash: payloadHash, date: ServiceClock.now(for: hostHeader)
        ).headers
        var url = (endpoint.scheme ?? "http") + "://" + hostHeader + path
        if !request.query.isEmpty {
            let items: [String] = request.query.map { item in
                let name = SigV4.uriEncode(item.name, encodeSlash: true)
                if item.value.isEmpty && Self.valuelessQueryNames.contains(item.name) { return name }
                return name + "=" + SigV4.uriEncode(item.value, encodeSlash: true)
            }
            url += "?" + items.joined(separator: "&")
        }
        let transportRequest = TransportRequest(
            method: request.method, url: url, headers: headers + attempt.headers, bodyBuffer: request.body,
            timeout: request.timeout ?? configuration.timeoutIntervalForRequest)
        let transport = configuration.transport
        let host = hostHeader
        let sendRequest: @Sendable (@escaping @Sendable (Int) -> Void) async throws -> TransportResponse = { progress in
            let response = try await transport.send(
                transportRequest, bodyProgress: progress, responseSink: request.responseSink)
            ServiceClock.observe(
                status: response.status, body: response.body, dateHeader: response.header("Date"), from: host)
            return response
        }
        let response: TransportResponse
        do {
            if let waits = request.answerWaits, bodyCount > 0 {
                response = try await waits.watch(bodyCount: bodyCount, progress: observer.bytesSent, sendRequest)
            } else {
                response = try await sendRequest(observer.bytesSent)
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as TransportError {
            if Task.isCancelled { throw CancellationError() }
            throw FerryError(error.isTimeout ? .timeout : .network, error.message, underlying: error)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw FerryError(.network, "The request failed: \(error)", underlying: nil)
        }
        guard (200..<300).contains(response.status) else {
            throw Self.serverError(response, method: request.method)
        }
        return response
    }

    /// Sub-resources sent without `=` (`?uploads`), as S3 clients do.
    static let valuelessQueryNames: Set<String> = ["uploads", "location"]

    /// A ``FerryError`` from an S3 error response.
    static func serverError(_ response: TransportResponse, method: String) -> FerryError {
        let requestId = response.header("x-amz-request-id")
        let retryAfter = RetryPolicy.retryAfter(of: response)
        if let document = try? S3XML.decode(S3ErrorDocument.self, from: Data(response.body)) {
            let message =
                document.message.isEmpty
                ? "The server answered HTTP \(response.status) \(document.code.prefix(64))." : document.message
            var error = FerryError(
                .server, message, httpStatus: response.status, serverCode: document.code,
                requestId: document.requestId ?? requestId)
            error.retryAfter = retryAfter
            return error
        }
        let code: String? =
            switch response.status {
            case 404: method == "HEAD" ? "NotFound" : nil
            case 403: "AccessDenied"
            case 503: "ServiceUnavailable"
            default: nil
            }
        var error = FerryError(
            .server, "The server answered HTTP \(response.status).", httpStatus: response.status, serverCode: code,
            requestId: requestId)
        error.retryAfter = retryAfter
        return error
    }
}
