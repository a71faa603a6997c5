/// The form upload endpoint's wire names: its path, form fields and error codes, shared by the server and the client.
public enum FormUploadFields {
    /// The endpoint's path: `POST /_ferry/form` with a `multipart/form-data` body.
    public static let path = "/_ferry/form"
    /// The upload token.
    public static let token = "token"
    /// The object key (optional when the token's scope names one).
    public static let key = "key"
    /// The file's bytes; must be the last part. Its `Content-Type` is the object's MIME type.
    public static let file = "file"
    /// The file's CRC32 (IEEE) as a decimal number; a mismatch is refused with 406.
    public static let crc32 = "crc32"
    /// Prefix of custom variables (callback parameters): `x:uid` is `$(x:uid)` in the callback body.
    public static let customVariablePrefix = "x:"
    /// Prefix of custom metadata stored with the object: `x-qn-meta-note` is stored as user metadata `note`.
    public static let metadataPrefix = "x-qn-meta-"
}

/// The `code` of a form upload error answer, e.g. `{"error": "...", "code": "ExpiredToken", "requestId": "..."}`.
///
/// Where Qiniu uses an HTTP status for the condition, the answer has that status; it is given with each code.
public struct FormUploadErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code as sent.
    public let rawValue: String
    /// Creates a code from its wire form.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The code as sent.
    public var description: String { rawValue }

    /// 400: the body is not `multipart/form-data` or its framing is broken.
    public static let malformedForm = Self(rawValue: "MalformedForm")
    /// 400: a required field (`token`, `file`, or `key` when the scope has none) is missing.
    public static let missingField = Self(rawValue: "MissingField")
    /// 400: a field is malformed (key too long, `crc32` not a number, …).
    public static let invalidArgument = Self(rawValue: "InvalidArgument")
    /// 400: a part follows `file`; `file` must be the last part.
    public static let fileNotLast = Self(rawValue: "FileNotLast")
    /// 401: the token is malformed or its signature is wrong.
    public static let badToken = Self(rawValue: "BadToken")
    /// 401: the token's access key is unknown or disabled.
    public static let unknownAccessKey = Self(rawValue: "UnknownAccessKey")
    /// 401: the token's deadline has passed.
    public static let expiredToken = Self(rawValue: "ExpiredToken")
    /// 403: the key differs from the one the token's scope names.
    public static let keyNotAllowed = Self(rawValue: "KeyNotAllowed")
    /// 403: the file's MIME type is outside the policy's `mimeLimit`.
    public static let mimeTypeNotAllowed = Self(rawValue: "MimeTypeNotAllowed")
    /// 403: the token's access key may not write this object.
    public static let accessDenied = Self(rawValue: "AccessDenied")
    /// 403: the file would take the token's access key past its `StorageBytes` quota; nothing was stored.
    public static let quotaExceeded = Self(rawValue: "QuotaExceeded")
    /// 405: the request is not a POST.
    public static let methodNotAllowed = Self(rawValue: "MethodNotAllowed")
    /// 406: the stored bytes' CRC32 differs from the `crc32` field; nothing was stored.
    public static let crc32Mismatch = Self(rawValue: "CRC32Mismatch")
    /// 413: the file is larger than the policy's `fsizeLimit` (or the server's limit); nothing was stored.
    public static let fileTooLarge = Self(rawValue: "FileTooLarge")
    /// 579: the file was stored but the callback failed (error status, unreachable, or timed out).
    public static let callbackFailed = Self(rawValue: "CallbackFailed")
    /// 614: the policy is `insertOnly` and the key exists.
    public static let fileExists = Self(rawValue: "FileExists")
    /// 631: the scope's bucket does not exist.
    public static let noSuchBucket = Self(rawValue: "NoSuchBucket")
    /// 507: the server's disk or database is full; nothing was stored.
    public static let storageFull = Self(rawValue: "StorageFull")
    /// 500: the server failed; try again.
    public static let internalError = Self(rawValue: "InternalError")
    /// 503, with `Retry-After`: a store under the service (its catalog, its object store) is unavailable; nothing was
    /// stored, try again.
    public static let serviceUnavailable = Self(rawValue: "ServiceUnavailable")
}
