import FerryCore

/// A publish's `retCode`: the seed's `TVC_ERR_*` constants of `TVCCommon`, a view of a ``FerryError``
/// (``FerryError/publishCode``). New codes may be added; switch with a `default`.
public struct PublishCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric `retCode`.
    public let rawValue: Int
    /// Wraps a numeric `retCode`.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// 0, `TVC_OK`: published.
    public static let ok = PublishCode(rawValue: 0)
    /// 1001, `TVC_ERR_UGC_REQUEST_FAILED`: applying for the upload failed (network, or the service refused it, e.g.
    /// a signature that does not verify; the service's message is the error's ``FerryError/message``).
    public static let requestFailed = PublishCode(rawValue: 1001)
    /// 1002, `TVC_ERR_UGC_PARSE_FAILED`: the service's answer to the application could not be read.
    public static let parseFailed = PublishCode(rawValue: 1002)
    /// 1003, `TVC_ERR_VIDEO_UPLOAD_FAILED`: uploading the video to storage failed.
    public static let videoUploadFailed = PublishCode(rawValue: 1003)
    /// 1004, `TVC_ERR_COVER_UPLOAD_FAILED`: uploading the cover to storage failed.
    public static let coverUploadFailed = PublishCode(rawValue: 1004)
    /// 1005, `TVC_ERR_UGC_FINISH_REQ_FAILED`: the commit request failed (network, or the service refused it).
    public static let finishRequestFailed = PublishCode(rawValue: 1005)
    /// 1006, `TVC_ERR_UGC_FINISH_RSP_FAILED`: the service's answer to the commit could not be read.
    public static let finishResponseFailed = PublishCode(rawValue: 1006)
    /// 1008, `TVC_ERR_FILE_NOT_EXIST`: the video or cover file does not exist or cannot be read.
    public static let fileNotExist = PublishCode(rawValue: 1008)
    /// 1012, `TVC_ERR_INVALID_SIGNATURE`: the signature is empty.
    public static let invalidSignature = PublishCode(rawValue: 1012)
    /// 1013, `TVC_ERR_INVALID_VIDEOPATH`: the video path is empty.
    public static let invalidVideoPath = PublishCode(rawValue: 1013)
    /// 1017, `TVC_ERR_USER_CANCLE`: the publish was cancelled; publishing again with the same parameters resumes.
    public static let userCancelled = PublishCode(rawValue: 1017)
    /// 1020, `TVC_ERR_UPLOAD_SIGN_EXPIRED`: the service says the signature has expired; get a new one.
    public static let signatureExpired = PublishCode(rawValue: 1020)

    /// The number.
    public var description: String { String(rawValue) }
}

extension FerryError {
    /// This failure as a publish's `retCode`.
    ///
    /// A publish gives each failure the code of the step it failed at (``PublishCode/videoUploadFailed`` for the
    /// video's upload, ``PublishCode/finishRequestFailed`` for the commit, …). Any other error is read by its
    /// ``code``: `.cancelled` is ``PublishCode/userCancelled``, `.fileNotFound` ``PublishCode/fileNotExist``, anything
    /// else ``PublishCode/requestFailed``.
    public var publishCode: PublishCode {
        if let seedCode { return PublishCode(rawValue: seedCode) }
        switch code {
        case .cancelled: return .userCancelled
        case .fileNotFound: return .fileNotExist
        default: return .requestFailed
        }
    }

    /// A publish's failure: `code` says what kind, `publishCode` at which step.
    static func publish(
        _ code: Code, _ publishCode: PublishCode, _ message: String, httpStatus: Int? = nil, serverCode: String? = nil,
        requestId: String? = nil, underlying: (any Error & Sendable)? = nil
    ) -> FerryError {
        var error = FerryError(
            code, message, httpStatus: httpStatus, serverCode: serverCode, requestId: requestId,
            underlying: underlying)
        error.seedCode = publishCode.rawValue
        return error
    }

    /// A publish's cancellation (1017).
    static func publishCancelled() -> FerryError {
        .publish(.cancelled, .userCancelled, "The publish was cancelled.")
    }

    /// `error`, reported at a publish's step: its kind and words kept, its `retCode` the step's.
    static func publish(_ error: FerryError, at step: PublishCode) -> FerryError {
        var error = error
        error.seedCode = error.code == .cancelled ? PublishCode.userCancelled.rawValue : step.rawValue
        return error
    }

    /// This failure as a form upload's code (Qiniu's error answer): the server's `code` when the server answered
    /// with one, nil for failures on the device (network, file, cancellation: see ``code``).
    public var formUploadCode: FormUploadErrorCode? {
        guard httpStatus != nil, let serverCode else { return nil }
        return FormUploadErrorCode(rawValue: serverCode)
    }
}
