import FerryCore
import Foundation

/// What an interrupted publish needs to resume: the service's session key for the video, and the files as they were.
struct PublishRecord: Codable, Sendable, Hashable {
    /// Format version; a record of another version is ignored.
    static let currentVersion = 1
    /// This record's format version.
    var version = currentVersion
    /// The video file as it was when the publish started.
    var video: FileFingerprint
    /// The cover file as it was, when there is one.
    var cover: FileFingerprint?
    /// The service's `VodSessionKey`: names the video and its object keys.
    var vodSessionKey: String
    /// The storage endpoint the files went to (for the engine's checkpoints).
    var storageEndpoint: String
    /// Bucket of the files.
    var bucket: String
    /// Object key of the video.
    var videoKey: String
    /// Object key of the cover.
    var coverKey: String?
    /// When the publish first started; the record is valid for ``VideoPublisher/Configuration/resumeValidity`` from
    /// then.
    var createdAt: Date
    /// Whether the video is completely stored (only the cover and the commit remain).
    var videoUploaded: Bool?
}

/// Publish records as small JSON files in the record directory, written atomically (temporary file, fsync, rename).
struct PublishRecordStore: Sendable {
    let directory: URL

    /// The record's name: a hash of who publishes where, and which files (absolute paths). The files' fingerprints are
    /// inside, so a changed file is recognised and starts over.
    static func identifier(userID: String, endpoint: String, videoPath: String, coverPath: String?) -> String {
        String(SigV4.hexSHA256("publish\n\(userID)\n\(endpoint)\n\(videoPath)\n\(coverPath ?? "")").prefix(40))
    }

    var files: JSONRecordFiles { JSONRecordFiles(directory: directory) }

    static func name(_ identifier: String) -> String { "\(identifier).ferry-publish.json" }

    func url(for identifier: String) -> URL { files.url(Self.name(identifier)) }

    /// The record, or nil when there is none or it is unreadable or of another version.
    func load(_ identifier: String) -> PublishRecord? {
        guard let record = files.read(PublishRecord.self, name: Self.name(identifier)),
            record.version == PublishRecord.currentVersion
        else { return nil }
        return record
    }

    /// Writes a record atomically.
    func save(_ record: PublishRecord, as identifier: String) throws {
        try files.write(record, name: Self.name(identifier), what: "publish record")
    }

    /// Deletes a record.
    func delete(_ identifier: String) {
        files.remove(Self.name(identifier))
    }
}
