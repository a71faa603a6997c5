import FerryCore
import Foundation
import Logging

/// Uploads a file in one `multipart/form-data` request with an upload token made by an app server — the Swift
/// counterpart of Qiniu's `QiniuSimpleUploader`.
///
/// The file is streamed into the request body in chunks (``Configuration/chunkSize``): a file of any size takes a
/// chunk of memory. An upload that cannot have been stored is sent again (``Configuration/retryPolicy``): one whose
/// connection failed before its whole body was sent, or that the server turned away for the rate with a `Retry-After`.
/// One the server may have stored, and run its callback for, is not: start another one to try again.
///
/// ```swift
/// let uploader = FormUploader(endpoint: URL(string: "https://ferry.example.com")!, token: tokenFromAppServer)
/// var extra = FormUploader.ExtraParameters()
/// extra.mimeType = "image/png"
/// extra.crc32 = try await FormUploader.crc32(of: photo)
/// extra.callbackParams = ["uid": "42"]
/// let upload = uploader.upload(file: photo, key: "avatars/42.png", extraParams: extra)
/// let result = try await upload.result     // result.key, result.hash (hex MD5 = S3 ETag)
/// ```
public final class FormUploader: Sendable {
    /// How uploads are sent.
    public struct Configuration: Sendable {
        /// The transport. Default: `AsyncHTTPClientTransport` on Linux, ``URLSessionTransport`` on Apple platforms.
        public var transport: any HTTPTransport
        /// Time the whole request (sending the file, storing it, the callback) may take. Default 1 hour.
        public var timeoutIntervalForRequest: Duration = .seconds(3600)
        /// Bytes of the file read at once. Default 256 KiB.
        public var chunkSize = 256 * 1024
        /// Where the library logs (at debug only; never the token). Default: a logger that discards everything.
        public var logger = Logger(label: "ferry.form-uploader", factory: { _ in SwiftLogNoOpLogHandler() })
        /// How often, and after what wait, an upload that cannot have been stored is sent again: one whose connection
        /// failed (refused, reset, timed out) before its whole body was sent, or that the server answered 503 or 573
        /// with a `Retry-After` (its rate; nothing stored). The file is sent again from its start; progress does not go
        /// back meanwhile. Default 3 retries (Qiniu's `retryMax`); ``RetryPolicy/none`` sends once.
        public var retryPolicy = RetryPolicy(maxRetryCount: 3)

        /// The defaults.
        public init() {
            transport = platformDefaultTransport()
        }
    }

    /// Optional parameters of an upload — QiniuSimpleUploader's `extraParams` keys.
    public struct ExtraParameters: Sendable {
        /// The object's MIME type (`kMimeTypeKey`), sent as the file part's `Content-Type`. Default: the type of the
        /// file's extension for videos and images (`image/png` for `.png`), else `application/octet-stream`.
        public var mimeType: String?
        /// Custom metadata stored with the object (`kCustomMetaKey`), sent as `x-qn-meta-<name>` fields and served
        /// as `x-amz-meta-<name>` headers. Names are lowercased.
        public var customMeta: [String: String] = [:]
        /// The file's CRC32 (IEEE, as zlib's `crc32`) (`kCrc32Key`); the server refuses the upload with 406 and
        /// stores nothing when the bytes differ. See ``FormUploader/crc32(of:chunkSize:)``.
        public var crc32: UInt32?
        /// Parameters for the app server's callback (`kCallbackParamsKey`), sent as `x:<name>` fields: `$(x:<name>)`
        /// in the policy's `callbackBody`, and appended to a form-encoded callback body that does not place them.
        public var callbackParams: [String: String] = [:]

        /// No extra parameters.
        public init() {}
    }

    /// The server's base URL.
    public let endpoint: URL
    /// The upload token (never logged).
    public let token: String
    /// The configuration.
    public let configuration: Configuration

    /// Creates an uploader.
    ///
    /// - Parameters:
    ///   - endpoint: the server's base URL; uploads go to `<endpoint>/_ferry/form`.
    ///   - token: an upload token (`UploadToken` in FerryCore) from the app server.
    ///   - configuration: transport and limits.
    public init(endpoint: URL, token: String, configuration: Configuration = .init()) {
        self.endpoint = endpoint
        self.token = token
        self.configuration = configuration
    }

    /// Starts uploading a file.
    ///
    /// - Parameters:
    ///   - file: a local file URL.
    ///   - key: the object key; nil uses the key the token's scope names (the server refuses a missing key otherwise).
    ///   - extraParams: MIME type, metadata, CRC32 and callback parameters.
    /// - Returns: the running upload; its events report progress and the outcome.
    public func upload(file: URL, key: String?, extraParams: ExtraParameters = .init()) -> FormUpload {
        let (events, continuation) = AsyncStream<FormUploadEvent>.makeStream()
        let task = Task { [self] () async throws -> FormUploadResult in
            do {
                let reported = FormProgress.Reported()
                let result = try await sendRetrying(file: file, key: key, extraParams: extraParams) { fraction in
                    // A retry sends the file from its start: its fractions show once they pass what was shown.
                    guard reported.raise(to: fraction) else { return }
                    continuation.yield(.progress(fraction: fraction))
                }
                // Once, with the server's answer: the meter stops short of it.
                if reported.last < 1 { continuation.yield(.progress(fraction: 1)) }
                continuation.yield(.succeeded(result))
                continuation.finish()
                return result
            } catch {
                let failure = Self.ferryError(error)
                continuation.yield(.failed(failure))
                continuation.finish()
                throw failure
            }
        }
        return FormUpload(events: events, task: task)
    }

    /// The CRC32 (IEEE, zlib's `crc32`) of a file, read in chunks: the value for ``ExtraParameters/crc32``.
    ///
    /// - Throws: ``FerryError`` `.fileNotFound` when the file cannot be read.
    public static func crc32(of file: URL, chunkSize: Int = 256 * 1024) async throws(FerryError) -> UInt32 {
        try await FerryError.catching(.fileNotFound, "Reading \(file.path)") {
            let (size, _) = try FileRanges.attributes(of: file.path)
            var checksummer = Checksummer(.crc32)
            for try await chunk in StreamedBody([.file(path: file.path, length: size)], chunkSize: chunkSize).chunks {
                chunk.withUnsafeBytes { checksummer.update($0) }
            }
            return checksummer.finalize().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
    }

    // MARK: Sending

    /// Sends the upload, again while it fails in a way that cannot have stored it (``Configuration/retryPolicy``).
    private func sendRetrying(
        file: URL, key: String?, extraParams: ExtraParameters, progress: @escaping @Sendable (Double) -> Void
    ) async throws -> FormUploadResult {
        let policy = configuration.retryPolicy
        var retries = 0
        while true {
            let whole = FormProgress.Whole()
            do {
                return try await send(file: file, key: key, extraParams: extraParams, whole: whole, progress: progress)
            } catch {
                let failure = Self.ferryError(error)
                guard retries < policy.maxRetryCount, Self.cannotHaveStored(failure, bodySent: whole.sent) else {
                    throw failure
                }
                retries += 1
                let wait = policy.wait(forAttempt: retries, after: failure)
                configuration.logger.debug(
                    "form upload sent again",
                    metadata: ["ferry.attempt": "\(retries + 1)", "ferry.code": "\(failure.code)"])
                try await Task.sleep(for: wait)
            }
        }
    }

    /// Whether a failed upload cannot have been stored: its connection failed before the whole body was sent (the
    /// server never had the file), or the server turned it away for its rate, saying when to come back.
    static func cannotHaveStored(_ failure: FerryError, bodySent: Bool) -> Bool {
        switch failure.code {
        case .network, .timeout: !bodySent
        case .server: failure.retryAfter != nil && [503, 573].contains(failure.httpStatus ?? 0)
        default: false
        }
    }

    private func send(
        file: URL, key: String?, extraParams: ExtraParameters, whole: FormProgress.Whole,
        progress: @escaping @Sendable (Double) -> Void
    ) async throws -> FormUploadResult {
        let (size, _) = try FileRanges.attributes(of: file.path)
        let form = FormBody(
            token: token, key: key, file: file, size: size, extraParams: extraParams, chunkSize: configuration.chunkSize
        )
        var base = endpoint.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        let request = TransportRequest(
            method: "POST", url: base + FormUploadFields.path,
            headers: [("Content-Type", "multipart/form-data; boundary=\(form.boundary)")], streamedBody: form.body,
            timeout: configuration.timeoutIntervalForRequest)
        let meter = FormProgress(total: form.body.length, whole: whole, report: progress)
        configuration.logger.debug("form upload starting", metadata: ["ferry.size": "\(size)"])
        let response = try await configuration.transport.send(
            request, bodyProgress: { meter.add($0) }, responseSink: nil)
        try Task.checkCancellation()
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            var error = FerryError(
                .server, json?["error"] as? String ?? "The server answered HTTP \(response.status).",
                httpStatus: response.status, serverCode: json?["code"] as? String,
                requestId: json?["requestId"] as? String ?? response.header("x-amz-request-id"))
            // A 573 (the token's key past its request rate) or a 503 says when to try again.
            error.retryAfter = RetryPolicy.retryAfter(of: response)
            throw error
        }
        let policy = try? UploadToken.parse(token).policy
        let etag = response.header("ETag").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        guard let storedKey = key ?? policy?.key ?? json?["key"] as? String,
            let hash = etag ?? json?["hash"] as? String
        else {
            throw FerryError(.server, "The server's answer names no key or hash.", httpStatus: response.status)
        }
        let hasCallback = policy?.callbackUrl.map { !$0.isEmpty } ?? false
        return FormUploadResult(
            key: storedKey, hash: hash,
            callbackBody: hasCallback ? String(decoding: response.body, as: UTF8.self) : nil,
            responseBody: response.body)
    }

    static func ferryError(_ error: any Error) -> FerryError {
        switch error {
        case let error as FerryError: return error
        case is CancellationError: return .cancelledError()
        case let error as TransportError:
            return FerryError(error.isTimeout ? .timeout : .network, error.message, underlying: error)
        default:
            return FerryError(.network, "The upload failed: \(error)")
        }
    }
}

/// Turns bytes sent into fractions, reporting each 1 % step.
///
/// `@unchecked Sendable`: `sent` and `reported` are only touched while holding `lock`; transports call `add` from
/// their own threads.
private final class FormProgress: @unchecked Sendable {
    private let lock = NSLock()
    private let total: Int64
    private let report: @Sendable (Double) -> Void
    private let whole: Whole
    private var sent: Int64 = 0
    private var reported = 0.0
    /// The most reported while the body is sent.
    static let sending = 0.99

    init(total: Int64, whole: Whole, report: @escaping @Sendable (Double) -> Void) {
        self.total = total
        self.whole = whole
        self.report = report
    }

    /// The most an upload's meters reported, across its attempts.
    ///
    /// `@unchecked Sendable`: `value` is only touched while holding `lock`.
    final class Reported: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0.0
        /// The most reported so far.
        var last: Double { lock.withLock { value } }
        /// Takes `fraction` when it passes the most reported so far; whether it did.
        func raise(to fraction: Double) -> Bool {
            lock.withLock {
                guard fraction > value else { return false }
                value = fraction
                return true
            }
        }
    }

    /// Whether an attempt's whole body was handed to the connection.
    ///
    /// `@unchecked Sendable`: `value` is only touched while holding `lock`.
    final class Whole: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        var sent: Bool {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    func add(_ bytes: Int) {
        let fraction: Double? = lock.withLock {
            sent += Int64(bytes)
            if sent >= total { whole.sent = true }
            // At most 99 % while the body goes: 100 % is the server's answer that the file is stored.
            let fraction = total > 0 ? min(Self.sending, Double(sent) / Double(total)) : Self.sending
            let last = fraction == Self.sending && reported < Self.sending
            guard fraction - reported >= 0.01 || last else { return nil }
            reported = fraction
            return fraction
        }
        if let fraction { report(fraction) }
    }
}

extension FormUploader: SecretRedacting {
    /// The endpoint, without the token (a credential until its deadline).
    public var description: String { "FormUploader(\(endpoint.absoluteString))" }

    /// The endpoint and the configuration, the token as `<redacted>`.
    public var redactedFields: KeyValuePairs<String, Any> {
        ["endpoint": endpoint, "token": "<redacted>", "configuration": configuration]
    }
}
