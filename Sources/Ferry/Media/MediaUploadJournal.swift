import FerryCore
import Foundation

/// Media uploads that have not finished, by local file, so that uploading the same file again continues the same
/// video or image (through RefreshUploadVideo or RefreshUploadImage) instead of creating a second one.
///
/// One small JSON file per local file in the record directory, written atomically; an entry counts only while the
/// file's size and modification time are unchanged and it is younger than `maxAge`.
public struct MediaUploadJournal: Sendable {
    /// What is known about an unfinished upload.
    public struct Entry: Codable, Sendable, Hashable {
        /// The file's size and modification time when the upload began.
        public var fingerprint: String
        /// The video (or image) id.
        public var id: String
        /// Bucket of the upload address.
        public var bucket: String
        /// Key of the upload address.
        public var key: String
        /// When the upload began.
        public var createdAt: Date
        /// An image's type (`default`, `cover`): the same file uploaded as another type is another image. Nil for a
        /// video (and in entries written before images recorded it).
        public var imageType: String?
    }

    /// The record directory.
    public let directory: URL
    /// How long an entry stays valid. Default six days, as checkpoints
    /// (``ResumableUploadRequest/defaultCheckpointExpiry``).
    public let maxAge: TimeInterval

    /// A journal in `directory`.
    public init(directory: URL, maxAge: TimeInterval = ResumableUploadRequest.defaultCheckpointExpiry) {
        self.directory = directory
        self.maxAge = maxAge
    }

    /// The size and modification time of a file, as entries record them.
    ///
    /// - Throws: ``FerryError`` `fileNotFound` when the file cannot be read.
    public static func fingerprint(of file: URL) throws(FerryError) -> String {
        let attributes = try FerryError.catching(.fileNotFound, "Reading \(file.path)") {
            try FileRanges.attributes(of: file.path)
        }
        return "\(attributes.size)-\(attributes.modified)"
    }

    /// A token for CreateUploadVideo's or CreateUploadImage's `ClientToken` that names this file as it is now (its
    /// path, size and modification time) and, when given, the `scope` of the upload (its record directory, its
    /// protocol): a run killed between creating the video or image and recording it gets the same one back when it
    /// asks again, while a run of the same file in another scope, perhaps at the same time, gets a video or image of
    /// its own rather than sending its bytes into the other's.
    ///
    /// - Throws: ``FerryError`` `fileNotFound` when the file cannot be read.
    public static func clientToken(for file: URL, scope: String = "") throws(FerryError) -> String {
        let named = file.standardizedFileURL.path + "\n" + (try fingerprint(of: file))
        return String(SigV4.hexSHA256(scope.isEmpty ? named : named + "\n" + scope).prefix(32))
    }

    private var files: JSONRecordFiles { JSONRecordFiles(directory: directory, dates: .foundationDefault) }

    private func entryName(_ file: URL) -> String {
        "media-\(SigV4.hexSHA256(file.standardizedFileURL.path).prefix(40)).json"
    }

    /// The unfinished upload of `file`, when the file is unchanged and the entry has not expired.
    public func lookup(_ file: URL) -> Entry? {
        guard let entry = files.read(Entry.self, name: entryName(file)),
            let fingerprint = try? Self.fingerprint(of: file), entry.fingerprint == fingerprint,
            Date().timeIntervalSince(entry.createdAt) < maxAge
        else { return nil }
        return entry
    }

    /// An upload of `file` that ``lookup(_:)`` no longer continues: the file changed since it began, or the entry
    /// expired. Its video will never receive the file as it is now.
    public func abandoned(_ file: URL) -> Entry? {
        guard lookup(file) == nil else { return nil }
        return files.read(Entry.self, name: entryName(file))
    }

    /// Records that `file` is being uploaded as `id` to `bucket`/`key` (an image of `imageType`). An entry of the
    /// same upload keeps the time it began: ``maxAge`` counts from it, however often the upload is continued.
    ///
    /// - Throws: ``FerryError`` when the file cannot be read or the entry cannot be written.
    public func record(_ file: URL, id: String, bucket: String, key: String, imageType: String? = nil) throws(FerryError) {
        let fingerprint = try Self.fingerprint(of: file)
        let earlier = files.read(Entry.self, name: entryName(file)).flatMap {
            $0.id == id && $0.fingerprint == fingerprint ? $0.createdAt : nil
        }
        let entry = Entry(
            fingerprint: fingerprint, id: id, bucket: bucket, key: key, createdAt: earlier ?? Date(),
            imageType: imageType)
        try FerryError.catching(.invalidArgument, "Writing the media upload journal") {
            try files.write(entry, name: entryName(file), what: "media upload journal entry")
        }
    }

    /// Whether a refused RefreshUploadVideo or RefreshUploadImage means a new video or image is to be made: the one
    /// recorded is gone (404), not the caller's (403), or takes no more uploads (409: stored, or expired). Anything
    /// else (the network, the service failing, throttling) is for a later try of the same one.
    public static func startsAfresh(after error: FerryError) -> Bool {
        [403, 404, 409].contains(error.httpStatus ?? 0)
    }

    /// Forgets the upload of `file` (it finished, or was cancelled).
    public func remove(_ file: URL) {
        files.remove(entryName(file))
    }
}
