import FerryCore
import Foundation

/// What to upload and how: a local file to a bucket and key, resumable through a record directory.
public struct ResumableUploadRequest: Sendable {
    /// What to do when the file changed since its checkpoint was written.
    public enum FileChangePolicy: Sendable, Hashable {
        /// Fail with ``FerryError/Code/cannotResumeUpload``.
        case fail
        /// Abort the old upload and start again from the first byte.
        case restart
    }

    /// Destination bucket.
    public var bucket: String
    /// Destination key.
    public var key: String
    /// The local file.
    public var fileURL: URL
    /// How big parts are. By default they adapt to the connection: 5 MiB to start with (phones), then cut as parts
    /// complete so that one takes about two seconds, up to 16 MiB. Setting ``partSize`` makes every part that size.
    public var partSizing: PartSizing = .adaptive
    /// Size of every part but the last, `partSizing = .fixed(partSize)` (grown to fit 10,000 parts, raised to the
    /// client's ``ObjectStorageClient/Configuration/smallestPartSize``); reading it gives the size of the first parts
    /// (5 MiB by default).
    public var partSize: Int64 {
        get { partSizing.initial }
        set { partSizing = .fixed(newValue) }
    }
    /// Parts sent at once, 1 to ``maxConcurrency``. Default 4.
    public var concurrency: Int = 4
    /// The most parts sent at once.
    public static let maxConcurrency = 64
    /// Where checkpoints are kept; nil writes nothing to disk and resumes only within this process.
    public var recordDirectory: URL?
    /// Whether cancelling aborts the server's multipart upload and deletes the checkpoint (as the OSS SDK's
    /// `deleteUploadIdOnCancelling`). Default true.
    public var deleteUploadIdOnCancelling = true
    /// Checksum every part carries and the object is verified with. Default CRC32C; nil for none.
    public var checksumAlgorithm: ChecksumAlgorithm? = .crc32c
    /// `Content-Type` of the object.
    public var contentType: String?
    /// User metadata (`x-amz-meta-*`).
    public var metadata: [String: String] = [:]
    /// What to do when the file changed since its checkpoint. Default `.fail`.
    public var onFileChange: FileChangePolicy = .fail
    /// How long a checkpoint stays valid, from when its upload began: past it the upload starts over (its multipart
    /// upload aborted). Default ``defaultCheckpointExpiry``.
    public var checkpointExpiry: TimeInterval = Self.defaultCheckpointExpiry
    /// Six days: a day less than the seven a Ferry service keeps an unfinished multipart upload and a video waiting
    /// for its file, so a device off for a weekend continues where it stopped.
    public static let defaultCheckpointExpiry: TimeInterval = 6 * 24 * 3600
    /// Files smaller than this go in one PUT instead of a multipart upload. Default: the part size.
    public var multipartThreshold: Int64?
    /// Least time between two progress events while bytes are being sent. Default 100 ms. A progress event also
    /// comes whenever a part is stored and when the last byte is, so the final event is always the exact total;
    /// `.zero` reports every slice of a part as the connection takes it.
    public var progressInterval: Duration = .milliseconds(100)
    /// Whether a completed upload leaves its checkpoint for the caller to delete with
    /// ``ResumableUploadTask/discardCheckpoint()`` once it has recorded the result (the upload queue, whose journal
    /// names the video until then: a run killed in between finds the stored file by the checkpoint's parts).
    var keepsCheckpointOnCompletion = false

    /// How an upload cuts its file into parts.
    public enum PartSizing: Sendable, Hashable {
        /// Every part but the last has this size (grown in whole MiB when the file would need more than 10,000 parts).
        case fixed(Int64)
        /// Parts start at `minimum`; as parts complete, the parts not yet started are cut anew so that one takes
        /// about `target` to send at the rate the last part was sent, in whole MiB between `minimum` and `maximum`.
        /// A fast link then spends fewer requests, server commits and checkpoints per byte, while on a slow or
        /// flaky one a dropped connection still costs at most about `target` of sending again.
        case adaptive(minimum: Int64, maximum: Int64, target: Duration)

        /// 5 MiB parts to start with, growing up to 16 MiB so a part takes about two seconds: a phone's uplink
        /// (a few MB/s shared by the parts in flight) keeps 5 MiB parts; Wi-Fi, a LAN or loopback grow them.
        public static let adaptive = PartSizing.adaptive(
            minimum: UploadPlan.defaultPartSize, maximum: 16 * 1024 * 1024, target: .seconds(2))

        /// These sizes with no part smaller than `smallest` (a part size below it is raised to it).
        public func raised(to smallest: Int64) -> PartSizing {
            switch self {
            case .fixed(let size): .fixed(Swift.max(size, smallest))
            case .adaptive(let minimum, let maximum, let target):
                .adaptive(minimum: Swift.max(minimum, smallest), maximum: Swift.max(maximum, minimum, smallest), target: target)
            }
        }

        /// The size of the first parts.
        public var initial: Int64 {
            switch self {
            case .fixed(let size): size
            case .adaptive(let minimum, _, _): minimum
            }
        }
    }

    /// Creates a request.
    public init(bucket: String, key: String, fileURL: URL) {
        self.bucket = bucket
        self.key = key
        self.fileURL = fileURL
    }
}

/// Progress of an upload in bytes: never backwards (a retried part does not subtract), never above the total, and
/// exactly the total once the upload has completed.
///
/// Two counts: bytes *sent* (handed to the network, which moves smoothly while a part or append is on its way) and
/// bytes *stored* (parts or offsets the server has answered for). Sent runs ahead of stored by the parts in flight;
/// when the link fails, sent can hold bytes the server never received, while stored is what a resumed upload starts
/// from.
public struct UploadProgress: Sendable, Hashable {
    /// Bytes newly counted as sent by this report.
    public var bytesSent: Int64
    /// Bytes sent so far (including parts a resumed upload found on the server).
    public var totalBytesSent: Int64
    /// Bytes the server has confirmed storing (including parts a resumed upload found there): never more than
    /// ``totalBytesSent``.
    public var totalBytesStored: Int64
    /// Size of the file.
    public var totalBytesExpected: Int64
    /// Rate of sending over about the last 10 seconds (`RecentRate`; since the upload started or resumed, when that
    /// is more recent), bytes per second: a link that stalled or sped up shows within seconds.
    public var bytesPerSecond: Double
    /// Time left at that rate, when there is a rate.
    public var estimatedTimeRemaining: Duration?

    /// `totalBytesSent / totalBytesExpected`, 0…1.
    public var fraction: Double { totalBytesExpected == 0 ? 1 : Double(totalBytesSent) / Double(totalBytesExpected) }
    /// `totalBytesStored / totalBytesExpected`, 0…1.
    public var storedFraction: Double {
        totalBytesExpected == 0 ? 1 : Double(totalBytesStored) / Double(totalBytesExpected)
    }
}

/// The outcome of a completed upload.
public struct UploadResult: Sendable, Hashable {
    /// How the stored object was checked against the file.
    public enum Verification: Sendable, Hashable {
        /// The server's checksum of the object equals the one computed from the file.
        case checksum
        /// The object's ETag (the MD5 of its parts' MD5s, or of its bytes) and its parts' are the MD5s of the file's
        /// bytes: every part carried its MD5 (``ChecksumAlgorithm/md5``), or a store that reports no checksum was
        /// checked by its ETags after the upload.
        case etag
        /// No checksum was asked for.
        case none
    }
    /// Bucket.
    public var bucket: String
    /// Key.
    public var key: String
    /// The object's ETag, without quotes.
    public var etag: String
    /// Bytes uploaded in all.
    public var size: Int64
    /// The multipart upload id, nil for a single PUT.
    public var uploadId: String?
    /// The checksum algorithm used.
    public var checksumAlgorithm: ChecksumAlgorithm?
    /// The object's checksum as the server reported it and the client verified it.
    public var checksum: String?
    /// How the object was verified.
    public var verification: Verification
    /// Parts this run found already on the server (a resumed upload).
    public var partsResumed: Int
    /// Parts this run sent.
    public var partsSent: Int
}

/// What happens during an upload, in order; the sequence finishes after `completed`, `failed` or `cancelled`.
public enum UploadEvent: Sendable {
    /// The upload began; the upload id of a multipart upload (resumed or new).
    case started(uploadId: String?)
    /// Bytes were sent.
    case progress(UploadProgress)
    /// A request failed and is tried again after `delay`.
    case retrying(attempt: Int, error: FerryError, delay: Duration)
    /// A request succeeded again after retries.
    case retryResumed
    /// The credentials expired and none fresher could be had: the upload paused; call `resume(with:)`.
    case credentialsExpired
    /// The upload paused; the upload id and checkpoint stay.
    case paused
    /// The upload continues after a pause.
    case resumed
    /// The upload finished and was verified.
    case completed(UploadResult)
    /// The upload failed.
    case failed(FerryError)
    /// The upload was cancelled.
    case cancelled
}
