import FerryCore
import Foundation

extension UploadQueue {
    /// How the queue uploads; every field has a default. The names are the seed's (`VODUploadClient`).
    public struct Configuration: Sendable {
        /// Whether the service should transcode videos after upload; false sends `NoTranscode` as CreateUploadVideo's
        /// `Transcode`. Default true.
        public var transcode = true
        /// The transcoding template group CreateUploadVideo asks for when ``transcode`` is true; nil (the default) leaves
        /// it to the service (its `default` group).
        public var templateGroupId: String?
        /// Retries of one request before the file fails. Default `Int.max`, as the seed: a phone keeps trying.
        public var maxRetryCount = Int.max
        /// Time one request may take before it is abandoned and retried. Default 120 s. A request that sends a body (a
        /// part, an object) is abandoned only when its body goes this long without moving (with the AsyncHTTPClient
        /// transport at most 60 s), or its answer 300 s once the body is sent: a slow link that keeps taking a part
        /// is not cut off, and the part sent again from its start, however long it takes.
        public var timeoutIntervalForRequest: Duration = .seconds(120)
        /// Where checkpoints and the record of unfinished videos are kept. Default: `Ferry/UploadRecords` in the
        /// caches directory (the temporary directory on Linux).
        public var recordDirectoryPath: URL?
        /// Whether progress is recorded so an upload continues after the app was killed. Default true.
        public var recordUploadProgress = true
        /// How long after a file's upload began it continues (after a kill, a failure, a pause) from its checkpoint
        /// and, with STS, as the same video or image; past it the file starts over as a new one (the unfinished one
        /// deleted). Default six days (``ResumableUploadRequest/defaultCheckpointExpiry``); keep it below the
        /// service's time for a video waiting for its file (seven days on a Ferry service).
        public var resumeValidity: TimeInterval = ResumableUploadRequest.defaultCheckpointExpiry
        /// Size of every part but the last. Default 5 MiB, the smallest part S3-compatible services accept (the
        /// seed's 1 MiB is below it, and is raised to ``ObjectStorageClient/Configuration/smallestPartSize``); grown
        /// for files that would need more than 10,000 parts.
        public var uploadPartSize: Int64 = UploadPlan.defaultPartSize
        /// How parts are cut; nil (the default) cuts every part at ``uploadPartSize``, as the seed does.
        /// `.adaptive` starts at 5 MiB and grows parts on a fast link (``ResumableUploadRequest/PartSizing``).
        public var partSizing: ResumableUploadRequest.PartSizing?
        /// Signing region of the media service. Default `us-east-1`.
        public var region = "us-east-1"
        /// Files uploaded at once. Default 1, as the seed.
        public var maxConcurrentUploads = 1
        /// Parts of one file sent at once. Default 4.
        public var partConcurrency = 4
        /// Checksum every part carries and the object is verified with. Default CRC32C.
        public var checksumAlgorithm: ChecksumAlgorithm? = .crc32c
        /// Transport, logger and retry delays; `maxRetryCount` and `timeoutIntervalForRequest` above override
        /// theirs.
        public var objectStorage = ObjectStorageClient.Configuration()
        /// Called as each file is stored, before its ``UploadQueueEvent/finished(_:_:)`` event and before the queue
        /// forgets its upload (with STS, the journal entry and checkpoint by which the same file added after the app
        /// was killed is found stored as the same video or image). An app that records what each file became records
        /// it here: a kill at any instant then leaves either that record or the queue's own. When it throws (the app's
        /// record could not be written), the queue keeps its own, by which the file added again is found stored as
        /// the same video or image rather than sent as a second one. Runs on the queue, so it should return quickly.
        /// Default nil.
        public var fileStored: (@Sendable (UploadQueue.Item, MediaUploadResult) throws -> Void)?

        /// The defaults.
        public init() {}

        /// The record directory in effect: nil when progress is not recorded.
        var effectiveRecordDirectory: URL? {
            guard recordUploadProgress else { return nil }
            if let recordDirectoryPath { return recordDirectoryPath }
            #if canImport(Darwin)
            let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first ?? FileManager.default.temporaryDirectory
            #else
            let base = FileManager.default.temporaryDirectory
            #endif
            return base.appendingPathComponent("Ferry/UploadRecords", isDirectory: true)
        }

        /// The engine's configuration with this one's retry count and timeout.
        var engine: ObjectStorageClient.Configuration {
            var engine = objectStorage
            engine.retryPolicy.maxRetryCount = maxRetryCount
            engine.timeoutIntervalForRequest = timeoutIntervalForRequest
            return engine
        }
    }

    /// Where each file's upload address and credential come from.
    public enum Authorization: Sendable {
        /// The seed's upload address + credential: when a file starts, the queue emits
        /// ``UploadQueueEvent/started(_:)`` and waits for ``UploadQueue/setUploadAuth(_:address:videoId:for:)``. When
        /// the credential expires it emits ``UploadQueueEvent/tokenExpired(_:)`` and waits for
        /// ``UploadQueue/resume(withUploadAuth:for:)``.
        case uploadAuth
        /// The same, pulled: the closure is called when a file starts and again when its credential expires
        /// (typically it asks the app server, which calls CreateUploadVideo, CreateUploadImage or
        /// RefreshUploadVideo). If it fails or returns an expired credential, the queue emits `tokenExpired` and
        /// waits for ``UploadQueue/resume(withUploadAuth:for:)``.
        case uploadAuthProvider(@Sendable (UploadQueue.Item) async throws -> MediaServiceClient.UploadTicket)
        /// An STS credential: the queue calls CreateUploadVideo / CreateUploadImage on the media service at
        /// `endpoint` itself, and renews a file's upload credential with RefreshUploadVideo / RefreshUploadImage.
        /// When the STS credential expires it emits `tokenExpired` and waits for ``UploadQueue/resume(withToken:)``.
        /// A renewal the service refuses for good (404: the video or image is gone; 409 `…UploadExpired`) fails the
        /// file with that answer.
        case sts(endpoint: URL, credentials: Credentials)
    }

    /// A file in the queue (the seed's `UploadFileInfo`).
    public struct Item: Sendable, Hashable, Identifiable {
        /// Identifies an item for as long as the queue lives.
        public struct ID: Hashable, Sendable, CustomStringConvertible {
            let value: Int
            /// `#n`.
            public var description: String { "#\(value)" }
        }
        /// Where an item is.
        public enum State: String, Sendable, Hashable {
            /// Waiting for its turn.
            case ready
            /// Being uploaded (or waiting for its credential).
            case uploading
            /// Paused with the queue; ``UploadQueue/resume()`` continues it.
            case paused
            /// Cancelled; it stays in the list and ``UploadQueue/resumeFile(_:)`` continues it from its checkpoint.
            case cancelled
            /// Uploaded and verified.
            case succeeded
            /// Failed; ``UploadQueue/resumeFile(_:)`` tries again.
            case failed
        }

        /// The item's id.
        public let id: ID
        /// The local file.
        public let fileURL: URL
        /// Video or image.
        public let kind: MediaKind
        /// Title, tags, description, category, cover.
        public let info: MediaInfo
        /// Where it is.
        public internal(set) var state: State = .ready
        /// The object service it uploads to, once known.
        public internal(set) var endpoint: String?
        /// The bucket, once known.
        public internal(set) var bucket: String?
        /// The object key, once known.
        public internal(set) var object: String?
        /// The video id, once known.
        public internal(set) var videoId: String?
        /// The multipart upload id, once the engine started (or resumed) the upload.
        public internal(set) var uploadId: String?
        /// The image URL, once known.
        public internal(set) var imageURL: String?
        /// Bytes uploaded (sent) so far.
        public internal(set) var uploadedSize: Int64 = 0
        /// Bytes the server has confirmed storing so far (``UploadProgress/totalBytesStored``): what a resumed upload
        /// starts from.
        public internal(set) var storedSize: Int64 = 0
        /// The file's size, once known.
        public internal(set) var totalSize: Int64 = 0
        /// The error code of the last failure (an S3 or media service code, or a ``FerryError/Code`` name).
        public internal(set) var failureCode: String?
        /// The message of the last failure.
        public internal(set) var failureMessage: String?
        /// Image type for images (`default` or `cover`).
        var imageType = "default"
        /// The image id, once known (images only): GetImageInfo
        /// (``MediaServiceClient/getImageInfo(imageId:authTimeout:)``) gives a URL that reads the image, which
        /// ``imageURL`` names but does not read without a signature.
        public internal(set) var imageId: String?
    }
}

/// What happens in an ``UploadQueue`` (the seed's `VODUploadListener` callbacks), each with the item it concerns.
public enum UploadQueueEvent: Sendable {
    /// A file started; with ``UploadQueue/Authorization/uploadAuth`` call
    /// ``UploadQueue/setUploadAuth(_:address:videoId:for:)`` now.
    case started(UploadQueue.Item)
    /// Bytes of a file were uploaded: never backwards, ending at `totalSize`. Also told when only the bytes the server
    /// has confirmed storing (the item's ``UploadQueue/Item/storedSize``) advance, as when the last part is confirmed;
    /// never when nothing changed.
    case progress(UploadQueue.Item, uploadedSize: Int64, totalSize: Int64)
    /// A file was uploaded and verified.
    case finished(UploadQueue.Item, MediaUploadResult)
    /// A file failed with a code and message.
    case failed(UploadQueue.Item, code: String, message: String)
    /// A file's credential (or the STS token) expired; resume with a new one.
    case tokenExpired(UploadQueue.Item)
    /// A request failed and is tried again.
    case retry(UploadQueue.Item, attempt: Int, error: FerryError)
    /// A request succeeded again after retries.
    case retryResumed(UploadQueue.Item)
}
