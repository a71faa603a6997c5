import FerryCore
import Foundation

/// Where the media API keeps videos, images and access keys: SQLite (``SQLiteCatalog``) in the embedded default; a PostgreSQL
/// implementation can take its place when several servers share one catalog. It holds the media job queue too, so a
/// status change and the jobs it calls for are saved together (``updateVideo(_:_:)``).
public protocol MediaCatalog: JobQueue {
    /// Stores or replaces a video.
    func saveVideo(_ video: VideoRecord) async throws
    /// Changes a video atomically: `change` edits the current record and says what to do with it — save it, with jobs
    /// to enqueue, whether to cancel the video's unfinished jobs, the webhook events that tell of the change and the
    /// image records it makes (``RecordChange/images``), all in one transaction, or keep what is stored. Returns the
    /// saved record; nil when there is no such video or nothing was saved.
    @discardableResult
    func updateVideo(_ id: String, _ change: @escaping @Sendable (inout VideoRecord) throws -> RecordChange) async throws
        -> VideoRecord?
    /// The video, or nil.
    func video(_ id: String) async throws -> VideoRecord?
    /// The video whose source file is `bucket`/`key`, or nil.
    func video(bucket: String, key: String) async throws -> VideoRecord?
    /// A page of videos (not deleted), newest first, and how many match; with `owner`, only that key's videos; with
    /// `title`, only those whose title contains it (ignoring ASCII case; `%`, `_` and backslash match only themselves).
    func videos(status: String?, cateId: Int?, tag: String?, title: String?, owner: String?, offset: Int, limit: Int)
        async throws -> (videos: [VideoRecord], total: Int)
    /// The video still uploading that `owner` created with `clientToken`, or nil.
    func uploadingVideo(owner: String, clientToken: String) async throws -> VideoRecord?
    /// Stores a new video, unless it carries a client token its owner already created a video still uploading with:
    /// then that video, unchanged. Atomic: two requests with one token create one video. With a `videoLimit`, a new
    /// video is refused (`quotaExceeded`) when its owner has that many videos (not deleted) already — checked in the
    /// same transaction, on PostgreSQL under the owner's quota lock. With `tokenUsedOnce`, a video its owner ever
    /// created with the token (whatever its status since) is answered instead: the token makes one video, ever.
    func createVideo(_ video: VideoRecord, videoLimit: Int?, tokenUsedOnce: Bool) async throws -> VideoRecord
    /// Videos still uploading that were created before `date` and whose id sorts after `videoId` (bytewise), in id
    /// order, at most `limit`: a walk through them a page at a time.
    func uploadingVideos(createdBefore date: Date, after videoId: String, limit: Int) async throws -> [VideoRecord]
    /// Images still uploading that were created before `date` and whose id sorts after `imageId` (bytewise), in id
    /// order, at most `limit`: a walk through them a page at a time.
    func uploadingImages(createdBefore date: Date, after imageId: String, limit: Int) async throws -> [ImageRecord]
    /// Stores or replaces an image.
    func saveImage(_ image: ImageRecord) async throws
    /// Stores a new image, unless it carries a client token its owner already created an image of its type with that
    /// is still uploading: then that image, unchanged. Atomic: two requests with one token create one image.
    func createImage(_ image: ImageRecord) async throws -> ImageRecord
    /// Changes an image atomically, as ``updateVideo(_:_:)`` a video (jobs are keyed by the image's id). Returns the
    /// saved record; nil when there is no such image or nothing was saved.
    @discardableResult
    func updateImage(_ id: String, _ change: @escaping @Sendable (inout ImageRecord) throws -> RecordChange) async throws
        -> ImageRecord?
    /// The image, or nil.
    func image(_ id: String) async throws -> ImageRecord?
    /// The image whose file is `bucket`/`key`, or nil.
    func image(bucket: String, key: String) async throws -> ImageRecord?
    /// The stored access key, or nil.
    func accessKey(_ id: String) async throws -> StoredAccessKey?
    /// Every stored access key, oldest first.
    func accessKeys() async throws -> [StoredAccessKey]
    /// Stores a new access key.
    func insertAccessKey(_ key: StoredAccessKey) async throws
    /// Sets a key's status; false when there is no such key.
    func setAccessKeyStatus(_ id: String, _ status: StoredAccessKey.Status) async throws -> Bool
    /// Sets a key's quota; false when there is no such key.
    func setAccessKeyQuota(_ id: String, _ quota: AccessKeyQuota) async throws -> Bool
    /// How many videos (not deleted) `owner` has.
    func videoCount(owner: String) async throws -> Int
    /// Stores a new playback signing key unless its owner holds `limit` already (counted and inserted as one step,
    /// on every node); whether it was stored.
    func insertSigningKey(_ key: StoredSigningKey, limit: Int) async throws -> Bool
    /// The signing key, or nil.
    func signingKey(_ id: String) async throws -> StoredSigningKey?
    /// Signing keys, oldest first: `owner`'s, or every key when `owner` is nil.
    func signingKeys(owner: String?) async throws -> [StoredSigningKey]
    /// Deletes a signing key; false when there is no such key.
    func deleteSigningKey(_ id: String) async throws -> Bool
    /// Records that the console session whose temporary key id has the SHA-256 `digest` was ended before its
    /// `expiration`, and forgets the sessions ended earlier that have expired by `now` (refused as expired anyway).
    func revokeSession(_ digest: String, expiration: Date, now: Date) async throws
    /// Whether the console session whose temporary key id has the SHA-256 `digest` was ended.
    func isSessionRevoked(_ digest: String) async throws -> Bool
}

/// What ``MediaCatalog/updateVideo(_:_:)`` and ``MediaCatalog/updateImage(_:_:)`` do with the record their closure
/// edited. Everything in it is written in one transaction: a node that stops right after the change has enqueued its
/// jobs, its webhook events and its images too; a change that is kept writes none of them.
public struct RecordChange: Sendable {
    /// Whether to save the edited record.
    public var save: Bool
    /// Jobs to enqueue with it.
    public var enqueue: [MediaJob]
    /// Whether to cancel the record's unfinished jobs with it.
    public var cancelJobs: Bool
    /// Webhook events to store with it, in this order.
    public var notify: [StoredWebhookEvent]
    /// Images to store (or replace) with it: a record that names an image it made (a video's snapshot cover) is
    /// never saved without that image, and the image never without the record.
    public var images: [ImageRecord] = []

    /// Keep what is stored.
    public static let keep = RecordChange(save: false, enqueue: [], cancelJobs: false, notify: [])

    /// Save the edited record, enqueueing `jobs`, cancelling the record's unfinished jobs when `cancelJobs`, storing
    /// the webhook events `notify` and the image records `images`.
    public static func save(
        enqueue jobs: [MediaJob] = [], cancelJobs: Bool = false, notify: [StoredWebhookEvent] = [],
        images: [ImageRecord] = []
    ) -> RecordChange {
        RecordChange(save: true, enqueue: jobs, cancelJobs: cancelJobs, notify: notify, images: images)
    }
}

/// How every catalog stores an access key's quota: JSON in a nullable text column, NULL for no limit.
enum AccessKeyQuotaColumn {
    static func encode(_ quota: AccessKeyQuota) throws -> String? {
        quota.isUnlimited ? nil : try CatalogJSON.encode(quota)
    }

    static func decode(_ text: String?) throws -> AccessKeyQuota {
        try text.map { try CatalogJSON.decode(AccessKeyQuota.self, $0) } ?? .unlimited
    }
}

/// How both catalogs store what they keep as JSON (video and image records, manifests, attributes, tags): sorted keys,
/// dates as Unix seconds.
enum CatalogJSON {
    static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode(type, from: Data(text.utf8))
    }
}

extension MediaCatalog {
    /// Stores a new video (or answers the one its client token made) whatever its owner's quota.
    public func createVideo(_ video: VideoRecord) async throws -> VideoRecord {
        try await createVideo(video, videoLimit: nil, tokenUsedOnce: false)
    }

    /// Stores a new video, unless its client token names one its owner created that is still uploading.
    public func createVideo(_ video: VideoRecord, videoLimit: Int?) async throws -> VideoRecord {
        try await createVideo(video, videoLimit: videoLimit, tokenUsedOnce: false)
    }

    /// A page of videos (not deleted), newest first, whatever their title.
    public func videos(status: String?, cateId: Int?, tag: String?, owner: String?, offset: Int, limit: Int) async throws
        -> (videos: [VideoRecord], total: Int)
    {
        try await videos(status: status, cateId: cateId, tag: tag, title: nil, owner: owner, offset: offset, limit: limit)
    }

    /// `text` as a LIKE pattern that matches it anywhere, with a backslash as the escape character.
    static func containsPattern(_ text: String) -> String {
        // Scalar by scalar: a `%` followed by a combining mark is one Character, and still a wildcard to LIKE.
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "%" || scalar == "_" || scalar == "\\" { escaped.append("\\") }
            escaped.append(scalar)
        }
        return "%" + String(escaped) + "%"
    }
}
