import FerryCore
import Foundation
import Logging

/// Uploads a file in one `multipart/form-data` request with an upload token made by an app server — the Swift
/// counterpart of Qiniu's `QiniuSimpleUploader`.
///
/// The file is streamed into the request body in chunks (``Configuration/chunkSize``): a file of any size takes a
/// chunk of memory. The upload is not retried (the server may have run its callback); start another one to try again.
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
                let result = try await send(file: file, key: key, extraParams: extraParams) { fraction in
                    reported.last = fraction
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

    private func send(
        file: URL, key: String?, extraParams: ExtraParameters, progress: @escaping @Sendable (Double) -> Void
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
        let meter = FormProgress(total: form.body.length, report: progress)
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
    private var sent: Int64 = 0
    private var reported = 0.0
    /// The most reported while the body is sent.
    static let sending = 0.99

    init(total: Int64, report: @escaping @Sendable (Double) -> Void) {
        self.total = total
        self.report = report
    }

    /// The last fraction a meter reported, read once the upload has ended.
    ///
    /// `@unchecked Sendable`: `value` is only touched while holding `lock`.
    final class Reported: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0.0
        var last: Double {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    func add(_ bytes: Int) {
        let fraction: Double? = lock.withLock {
            sent += Int64(bytes)
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
