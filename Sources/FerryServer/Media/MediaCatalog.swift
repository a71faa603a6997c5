import Foundation

/// Where the media API keeps videos, images and access keys: SQLite (``SQLiteCatalog``) in the embedded default; a PostgreSQL
/// implementation can take its place when several servers share one catalog.
public protocol MediaCatalog: Sendable {
    /// Stores or replaces a video.
    func saveVideo(_ video: VideoRecord) async throws
    /// The video, or nil.
    func video(_ id: String) async throws -> VideoRecord?
    /// The video whose source file is `bucket`/`key`, or nil.
    func video(bucket: String, key: String) async throws -> VideoRecord?
    /// A page of videos (not deleted), newest first, and how many match; with `owner`, only that key's videos.
    func videos(status: String?, cateId: Int?, tag: String?, owner: String?, offset: Int, limit: Int) async throws
        -> (videos: [VideoRecord], total: Int)
    /// The video still uploading that `owner` created with `clientToken`, or nil.
    func uploadingVideo(owner: String, clientToken: String) async throws -> VideoRecord?
    /// Stores a new video, unless it carries a client token its owner already created a video still uploading with:
    /// then that video, unchanged. Atomic: two requests with one token create one video.
    func createVideo(_ video: VideoRecord) async throws -> VideoRecord
    /// Videos still uploading that were created before `date`, oldest first, at most `limit`.
    func uploadingVideos(createdBefore date: Date, limit: Int) async throws -> [VideoRecord]
    /// Stores or replaces an image.
    func saveImage(_ image: ImageRecord) async throws
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
}
