import Foundation

/// An upload that a client sends in as many appends as it likes, over as many connections and nodes as it takes: the
/// resource behind `/_ferry/uploads/<id>`, which both tus 1.0 and the IETF resumable-upload protocol address.
///
/// Its bytes are the parts of a multipart upload in the object catalog (one part per append, numbered in order), so
/// they are referenced, collected and aborted exactly as an S3 upload's are; `offset` is how many bytes are durable,
/// and it only moves in the catalog transaction that records an append's part. When `offset` reaches `length` the
/// parts become the object at `bucket`/`key` (for a tus partial upload they wait for a final upload instead).
public struct ResumableUpload: Sendable, Hashable {
    /// How the id of every multipart upload that holds a resumable upload's bytes begins. A crash between creating
    /// such an upload and recording the resumable upload that owns it (or between removing the record and the upload)
    /// leaves one that nothing owns; the collector finds those by this prefix and aborts them.
    public static let multipartIdPrefix = "resumable-"

    /// How the upload takes part in tus concatenation.
    public enum Kind: String, Codable, Sendable {
        /// An upload of its own: it becomes its object when complete.
        case single
        /// A tus partial upload (`Upload-Concat: partial`): complete, it waits to be concatenated.
        case partial
        /// A tus final upload (`Upload-Concat: final;…`): the concatenation of partial uploads.
        case final
    }

    /// What the catalog keeps about the upload besides its counters, as one JSON document.
    public struct Info: Codable, Sendable, Hashable {
        /// How it takes part in concatenation.
        public var kind: Kind
        /// The tus `Upload-Metadata` pairs (values decoded), as sent.
        public var metadata: [String: String]
        /// The video the upload fills, for uploads created with a media upload URL.
        public var videoId: String?
        /// The partial uploads a final upload concatenates, in order.
        public var partials: [String]?
        /// Whether completion may only create the object, not replace one (an upload token's `insertOnly`).
        public var insertOnly: Bool?
        /// Whether the upload completes only when a request declares it complete (the IETF protocol's
        /// `Upload-Complete`), not when its offset reaches its length (tus).
        public var completesWhenDeclared: Bool?
        /// For a partial upload, the final upload made of it: its bytes are then the final upload's object's, and
        /// only the same final upload again (a client retrying one whose answer it lost) may name it.
        public var concatenatedInto: String?
        /// The upload token's `mimeLimit`, which the bytes are checked against when the upload completes.
        public var mimeLimit: String?

        /// Creates the document.
        public init(kind: Kind = .single, metadata: [String: String] = [:], videoId: String? = nil, partials: [String]? = nil) {
            self.kind = kind
            self.metadata = metadata
            self.videoId = videoId
            self.partials = partials
        }
    }

    /// The id in the upload's URL: 32 random hex digits, the capability its follow-up requests carry.
    public var id: String
    /// The multipart upload in the object catalog that holds the appended bytes.
    public var uploadId: String
    /// Where the object goes.
    public var bucket: String
    /// The object's key.
    public var key: String
    /// The long-term access key the upload counts against (its creator, or the parent of its creator's credential).
    public var owner: String
    /// The total length, once the client has said it; nil while deferred.
    public var length: Int64?
    /// The bytes stored durably so far.
    public var offset: Int64
    /// When the upload was created.
    public var createdAt: Date
    /// When an unfinished upload is abandoned: after this it answers as gone and the collector removes its bytes.
    public var expiresAt: Date
    /// Kind, metadata, video and partials.
    public var info: Info
    /// The ETag of the object it became; nil until complete.
    public var etag: String?

    /// Creates a record.
    public init(
        id: String, uploadId: String, bucket: String, key: String, owner: String, length: Int64?, offset: Int64 = 0,
        createdAt: Date, expiresAt: Date, info: Info, etag: String? = nil
    ) {
        self.id = id
        self.uploadId = uploadId
        self.bucket = bucket
        self.key = key
        self.owner = owner
        self.length = length
        self.offset = offset
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.info = info
        self.etag = etag
    }

    /// Whether every byte has arrived (the length is known and reached).
    public var isFullyReceived: Bool { length == offset }

    /// Whether the upload becomes its object as soon as every byte has arrived: a single upload not waiting for a
    /// declaration of completion.
    public var completesWhenReceived: Bool { info.kind == .single && info.completesWhenDeclared != true }
}

/// How recording an append ended.
enum ResumableAppendOutcome: Sendable {
    /// Recorded: the upload as it now stands.
    case appended(ResumableUpload)
    /// The upload's offset is not the one the append started at (another append got there first): the upload as it
    /// stands.
    case conflict(ResumableUpload)
    /// The append would pass the upload's declared length.
    case beyondLength(ResumableUpload)
    /// No such upload (terminated, expired and collected, or never created).
    case missing
}

/// The resumable uploads of a catalog (see ``ResumableUpload``); every change is one transaction, so that appends from
/// several nodes to one upload serialize, and only one of two appends at the same offset is recorded.
protocol ResumableUploadCatalog: Sendable {
    /// Records a new upload.
    func insertResumableUpload(_ upload: ResumableUpload) async throws
    /// The upload, or nil.
    func resumableUpload(_ id: String) async throws -> ResumableUpload?
    /// Records `part` (its number is chosen here: the next in the upload) as the bytes from `offset`, when the
    /// upload's offset is still `offset` and the part stays within its length; with a `byteLimit`, throws
    /// `quotaExceeded` (recording nothing) when the part takes the upload's owner past it.
    func appendResumablePart(_ part: PartInfo, to id: String, at offset: Int64, byteLimit: Int64?) async throws
        -> ResumableAppendOutcome
    /// Sets a deferred length (no change when one is set); the upload as it stands, nil when missing.
    func setResumableLength(_ id: String, length: Int64) async throws -> ResumableUpload?
    /// Moves the upload's expiry to `date` (``ResumableUpload/expiresAt``); no change when it is missing.
    func setResumableExpiry(_ id: String, to date: Date) async throws
    /// Records that the upload became the object with `etag`.
    func markResumableCompleted(_ id: String, etag: String) async throws
    /// Claims the partial uploads `ids` for the final upload `final` (``ResumableUpload/Info/concatenatedInto``), all
    /// or none, in one transaction: false, changing nothing, when one is missing, made into an object, or claimed by
    /// another final upload.
    func claimPartialUploads(_ ids: [String], for final: String) async throws -> Bool
    /// Gives back the claims of the final upload `final` on the partial uploads `ids` (a refused final upload).
    func releasePartialUploads(_ ids: [String], from final: String) async throws
    /// Records that the partial upload `id` is part of the final upload `final`
    /// (``ResumableUpload/Info/concatenatedInto``) and removes its multipart upload, keeping its record, in one
    /// transaction; the blobs of the parts removed, nil when the upload is missing, part of another final upload, or
    /// concluded already.
    func concludePartialUpload(_ id: String, into final: String) async throws -> [String]?
    /// Removes the upload's record (not its bytes); the record removed, nil when there was none.
    func deleteResumableUpload(_ id: String) async throws -> ResumableUpload?
    /// Uploads that expired before `date`, oldest first, up to `limit`.
    func expiredResumableUploads(before date: Date, limit: Int) async throws -> [ResumableUpload]
    /// Multipart uploads whose id begins with ``ResumableUpload/multipartIdPrefix``, initiated before `date`, that no
    /// resumable upload's record names, oldest first, up to `limit`.
    func unclaimedResumableMultipartUploads(initiatedBefore date: Date, limit: Int) async throws -> [MultipartUploadInfo]
}
