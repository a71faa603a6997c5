import Foundation

/// What a form upload reports on ``FormUpload/events``, in order: progress, then exactly one of `succeeded` or
/// `failed`, after which the sequence finishes.
public enum FormUploadEvent: Sendable {
    /// The fraction of the request body sent (QiniuSimpleUploader's `percent`), from 0 to 0.99 while it is sent:
    /// reported when it grows by at least 1 %. 1 only when the server has answered that the file is stored, just
    /// before `succeeded`; an upload the server refuses (a CRC32 mismatch, a callback that failed) never shows 100 %.
    case progress(fraction: Double)
    /// The server stored the file (and its callback, if any, answered 2xx).
    case succeeded(FormUploadResult)
    /// The upload failed; the error carries the server's HTTP status and code when it answered.
    case failed(FerryError)
}

/// What the server answered to a successful form upload.
public struct FormUploadResult: Sendable, Hashable {
    /// The object key the file was stored under.
    public var key: String
    /// The hex MD5 of the stored bytes — the object's S3 ETag without quotes (not Qiniu's SHA-1 based `qetag`).
    public var hash: String
    /// The app server's answer to the callback, passed through by the server, when the token has a `callbackUrl`.
    public var callbackBody: String?
    /// The raw answer body: `{"key":…,"hash":…}`, the policy's `returnBody`, or the callback's answer.
    public var responseBody: [UInt8]

    /// Creates a result.
    public init(key: String, hash: String, callbackBody: String? = nil, responseBody: [UInt8] = []) {
        self.key = key
        self.hash = hash
        self.callbackBody = callbackBody
        self.responseBody = responseBody
    }
}

/// A running form upload: observe ``events``, await ``result``, or ``cancel()`` it.
///
/// ```swift
/// let upload = uploader.upload(file: photo, key: "photos/cat.jpg")
/// for await event in upload.events {
///     if case .progress(let fraction) = event { bar.progress = Float(fraction) }
/// }
/// let stored = try await upload.result   // key and hash
/// ```
public final class FormUpload: Sendable {
    /// Progress and the outcome; finishes after `succeeded` or `failed`.
    public let events: AsyncStream<FormUploadEvent>
    private let task: Task<FormUploadResult, any Error>

    init(events: AsyncStream<FormUploadEvent>, task: Task<FormUploadResult, any Error>) {
        self.events = events
        self.task = task
    }

    /// The outcome.
    ///
    /// - Throws: ``FerryError``: `.server` with ``FerryError/httpStatus`` and ``FerryError/serverCode`` when the
    ///   server refused the upload (e.g. 406 `CRC32Mismatch`, 579 `CallbackFailed`), `.fileNotFound`, `.network`,
    ///   `.timeout`, or `.cancelled`.
    public var result: FormUploadResult {
        get async throws { try await task.value }
    }

    /// Stops the upload: the request is abandoned, and the result and events report `cancelled`. The server stores
    /// nothing from an incomplete request.
    public func cancel() {
        task.cancel()
    }
}
