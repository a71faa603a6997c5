import FerryCore

/// A refusal or failure of Ferry's domain (object storage, catalogs, authentication, media), in terms that no wire
/// format owns.
///
/// Storage, catalog, auth and media code throw this; only the HTTP edge knows envelopes. Each dialect maps it once to
/// its own: S3's XML `<Error>` (``S3Dialect``), the media API's JSON, Qiniu's form errors, the part-signing
/// endpoints' JSON. The message is for people and never carries a secret, signature or token; ``details`` are named
/// values a dialect may show beside it (S3 shows them as elements of its error document).
///
/// ```swift
/// guard let bucket = try await catalog.bucket(name) else {
///     throw FerryDomainError(.bucketNotFound, "The specified bucket does not exist.")
/// }
/// ```
public struct FerryDomainError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. A stable name, safe as a log or metric label (``description``).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case named(String)
            case signature(SigV4Error.Code)
        }

        private let kind: Kind

        private init(_ name: String) { kind = .named(name) }

        /// A signature that was checked and refused, with the verifier's own code.
        public static func signature(_ code: SigV4Error.Code) -> Code { Code(kind: .signature(code)) }

        private init(kind: Kind) { self.kind = kind }

        /// The verifier's code when this is a refused signature.
        public var signatureCode: SigV4Error.Code? {
            if case .signature(let code) = kind { return code }
            return nil
        }

        /// The code's name, e.g. `bucketNotFound` or `signature.signatureDoesNotMatch`.
        public var description: String {
            switch kind {
            case .named(let name): name
            case .signature(let code): "signature." + code.rawValue
            }
        }

        // MARK: Objects and buckets

        /// No bucket has the name.
        public static let bucketNotFound = Code("bucketNotFound")
        /// The bucket exists already (and belongs to this service's owner).
        public static let bucketExists = Code("bucketExists")
        /// A bucket that still holds objects or uploads cannot be deleted.
        public static let bucketNotEmpty = Code("bucketNotEmpty")
        /// No object has the key.
        public static let objectNotFound = Code("objectNotFound")
        /// No multipart upload has the id (never created, aborted or completed).
        public static let uploadNotFound = Code("uploadNotFound")
        /// A part named in a completion is not stored, or not with that ETag or checksum.
        public static let partNotFound = Code("partNotFound")
        /// A part was replaced while the upload was being completed.
        public static let partReplaced = Code("partReplaced")
        /// The parts of a completion are not in ascending order.
        public static let partsOutOfOrder = Code("partsOutOfOrder")
        /// A completion names no part.
        public static let noParts = Code("noParts")
        /// A part other than the last is smaller than the minimum part size.
        public static let partTooSmall = Code("partTooSmall")
        /// The body is larger than an object or part may be.
        public static let tooLarge = Code("tooLarge")
        /// A declared checksum or digest does not match the bytes.
        public static let checksumMismatch = Code("checksumMismatch")
        /// A declared size is not the size of the bytes.
        public static let sizeMismatch = Code("sizeMismatch")
        /// A checksum was asked for that this upload cannot give.
        public static let checksumNotApplicable = Code("checksumNotApplicable")
        /// A condition (`If-Match`, `If-None-Match`) did not hold.
        public static let preconditionFailed = Code("preconditionFailed")
        /// The store under the service (an S3-compatible store, a disk) is unavailable; the request may be retried.
        public static let storeUnavailable = Code("storeUnavailable")
        /// The store under the service refused a request it should have taken.
        public static let storeRefused = Code("storeRefused")
        /// The disk or database under the service is full; nothing of the request was stored.
        public static let storageFull = Code("storageFull")

        // MARK: Quotas

        /// The write would take the access key past its quota (bytes, videos, uploads in progress); nothing was stored.
        public static let quotaExceeded = Code("quotaExceeded")
        /// The access key sends requests faster than its quota allows; the request may be retried after
        /// ``FerryDomainError/retryAfterSeconds``.
        public static let requestRateExceeded = Code("requestRateExceeded")

        // MARK: Authentication and authorization

        /// The request carries no credential.
        public static let anonymous = Code("anonymous")
        /// The credential does not allow what was asked.
        public static let accessDenied = Code("accessDenied")
        /// No active key has the access key id.
        public static let unknownAccessKey = Code("unknownAccessKey")
        /// A session token that this service did not issue, or that was altered.
        public static let invalidSessionToken = Code("invalidSessionToken")
        /// A session token past its expiry.
        public static let expiredSessionToken = Code("expiredSessionToken")
        /// An authorization scheme other than AWS Signature Version 4, or more than one `Authorization` header.
        public static let unsupportedAuthorization = Code("unsupportedAuthorization")
        /// A signed request without the `x-amz-content-sha256` header S3 requires.
        public static let missingContentHash = Code("missingContentHash")
        /// An `x-amz-content-sha256` that is neither a digest nor a payload mode.
        public static let invalidContentHash = Code("invalidContentHash")
        /// A presigned URL that would live longer than seven days.
        public static let presignedExpiryTooLong = Code("presignedExpiryTooLong")

        // MARK: Requests

        /// A `Host` header that is not an RFC 3986 authority (or more than one of them).
        public static let invalidHost = Code("invalidHost")
        /// A body nested deeper, or with more elements, than the service reads.
        public static let bodyTooComplex = Code("bodyTooComplex")
        /// A body that is not the XML or JSON the operation takes.
        public static let malformedBody = Code("malformedBody")
        /// A request body larger than the operation reads.
        public static let bodyTooLarge = Code("bodyTooLarge")
        /// A parameter with a value the operation does not take.
        public static let invalidArgument = Code("invalidArgument")
        /// Something the service does not implement; nothing was changed.
        public static let notImplemented = Code("notImplemented")
    }

    /// What went wrong.
    public var code: Code
    /// A message for people: no secret, signature or token.
    public var message: String
    /// Named values the message is about (`BucketName`, `PartNumber`, `MinSizeAllowed`, `ArgumentName`).
    public var details: [String: String]
    /// Whole seconds after which the request may be tried again (each dialect's `Retry-After`), when that is known.
    public var retryAfterSeconds: Int?

    /// Creates an error.
    public init(_ code: Code, _ message: String, details: [String: String] = [:], retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The code and the message.
    public var description: String { "\(code): \(message)" }
}

extension FerryDomainError {
    /// The domain error for a refused signature; the message never carries a signature or secret.
    public init(_ error: SigV4Error) {
        let message =
            switch error.code {
            case .signatureDoesNotMatch:
                "The request signature we calculated does not match the signature you provided. Check your key and signing method."
            case .requestTimeTooSkewed: "The difference between the request time and the current time is too large."
            case .requestExpired: "Request has expired"
            case .requestNotYetValid: "Request is not valid yet"
            default: error.message.prefix(1).uppercased() + error.message.dropFirst()
            }
        self.init(.signature(error.code), message, details: error.details)
    }

    /// The refusal of a write of other bytes to the file of a video or image (`owner`, as `Video <id>`) that is stored.
    public static func fileStored(owner: String) -> FerryDomainError {
        FerryDomainError(.accessDenied, "\(owner) is stored already; its file is not replaced.")
    }

    /// `true` for the codes that mean "no such thing" (bucket, object, upload).
    public var isNotFound: Bool {
        code == .bucketNotFound || code == .objectNotFound || code == .uploadNotFound
    }
}
