/// Why a publish failed, with the seed's `retCode` (the `TVC_ERR_*` constants of `TVCCommon`).
///
/// ``VideoPublisher/publish(_:)`` throws it for bad parameters before any request is made (1008, 1012, 1013); every
/// later failure arrives as a ``PublishResult`` whose ``PublishResult/retCode`` is one of these codes. Messages never
/// contain the signature, a secret or a session token.
public struct PublishError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A `retCode`. New codes may be added; switch with a `default`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The numeric `retCode`.
        public let rawValue: Int
        /// Wraps a numeric `retCode`.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// 0, `TVC_OK`: published.
        public static let ok = Code(rawValue: 0)
        /// 1001, `TVC_ERR_UGC_REQUEST_FAILED`: applying for the upload failed (network, or the service refused it, e.g.
        /// a signature that does not verify; the service's message is in ``PublishError/message``).
        public static let requestFailed = Code(rawValue: 1001)
        /// 1002, `TVC_ERR_UGC_PARSE_FAILED`: the service's answer to the application could not be read.
        public static let parseFailed = Code(rawValue: 1002)
        /// 1003, `TVC_ERR_VIDEO_UPLOAD_FAILED`: uploading the video to storage failed.
        public static let videoUploadFailed = Code(rawValue: 1003)
        /// 1004, `TVC_ERR_COVER_UPLOAD_FAILED`: uploading the cover to storage failed.
        public static let coverUploadFailed = Code(rawValue: 1004)
        /// 1005, `TVC_ERR_UGC_FINISH_REQ_FAILED`: the commit request failed (network, or the service refused it).
        public static let finishRequestFailed = Code(rawValue: 1005)
        /// 1006, `TVC_ERR_UGC_FINISH_RSP_FAILED`: the service's answer to the commit could not be read.
        public static let finishResponseFailed = Code(rawValue: 1006)
        /// 1008, `TVC_ERR_FILE_NOT_EXIST`: the video or cover file does not exist or cannot be read.
        public static let fileNotExist = Code(rawValue: 1008)
        /// 1012, `TVC_ERR_INVALID_SIGNATURE`: the signature is empty.
        public static let invalidSignature = Code(rawValue: 1012)
        /// 1013, `TVC_ERR_INVALID_VIDEOPATH`: the video path is empty.
        public static let invalidVideoPath = Code(rawValue: 1013)
        /// 1017, `TVC_ERR_USER_CANCLE`: the publish was cancelled; publishing again with the same parameters resumes.
        public static let userCancelled = Code(rawValue: 1017)
        /// 1020, `TVC_ERR_UPLOAD_SIGN_EXPIRED`: the service says the signature has expired; get a new one.
        public static let signatureExpired = Code(rawValue: 1020)

        /// The number.
        public var description: String { String(rawValue) }
    }

    /// The `retCode`.
    public var code: Code
    /// What happened, for people (the seed's `descMsg`).
    public var message: String
    /// The service's error code (`InvalidSignature`, `SignatureExpired`, …), when it answered with one.
    public var serverCode: String?
    /// The HTTP status, when the service answered.
    public var httpStatus: Int?
    /// The service's request id, when it sent one.
    public var requestId: String?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, serverCode: String? = nil, httpStatus: Int? = nil, requestId: String? = nil
    ) {
        self.code = code
        self.message = message
        self.serverCode = serverCode
        self.httpStatus = httpStatus
        self.requestId = requestId
    }

    /// `retCode: message (server code)`.
    public var description: String {
        "\(code.rawValue): \(message)" + (serverCode.map { " (\($0))" } ?? "")
    }
}
