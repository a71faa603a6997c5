import FerryCore
import Foundation

/// What an interrupted upload needs to continue, in another process too.
public struct UploadCheckpoint: Codable, Sendable, Hashable {
    /// Format version; a checkpoint of another version is ignored.
    public static let currentVersion = 1
    /// This checkpoint's format version.
    public var version = currentVersion
    /// Service endpoint the upload goes to.
    public var endpoint: String
    /// Bucket.
    public var bucket: String
    /// Key.
    public var key: String
    /// Local file path.
    public var filePath: String
    /// The multipart upload id.
    public var uploadId: String
    /// Part size the upload was started with.
    public var partSize: Int64
    /// The file as it was when the upload started.
    public var fingerprint: FileFingerprint
    /// S3 name of the checksum algorithm, when one is used.
    public var checksumAlgorithm: String?
    /// Parts known to be on the server.
    public var parts: [UploadedPart]
    /// When the upload started.
    public var createdAt: Date
}

/// Checkpoints as JSON files in a record directory, written atomically (temporary file, fsync, rename).
struct CheckpointStore: Sendable {
    let directory: URL

    /// The file name for an upload: a hash of endpoint, bucket, key and local path.
    static func identifier(endpoint: String, bucket: String, key: String, filePath: String) -> String {
        String(SigV4.hexSHA256("\(endpoint)\n\(bucket)\n\(key)\n\(filePath)").prefix(40))
    }

    func url(for identifier: String) -> URL { directory.appendingPathComponent("\(identifier).ferry-checkpoint.json") }

    /// The checkpoint, or nil when there is none or it is unreadable or of another version.
    func load(_ identifier: String) -> UploadCheckpoint? {
        guard let data = FileManager.default.contents(atPath: url(for: identifier).path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let checkpoint = try? decoder.decode(UploadCheckpoint.self, from: data),
            checkpoint.version == UploadCheckpoint.currentVersion
        else { return nil }
        return checkpoint
    }

    /// Writes a checkpoint atomically.
    func save(_ checkpoint: UploadCheckpoint, as identifier: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let data = try encoder.encode(checkpoint)
        let final = url(for: identifier)
        let temp = directory.appendingPathComponent(".\(identifier).\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: temp.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw FerryError(.invalidArgument, "The record directory \(directory.path) is not writable.")
        }
        let handle = try FileHandle(forWritingTo: temp)
        try handle.write(contentsOf: data)
        try handle.synchronize()
        try handle.close()
        if rename(temp.path, final.path) != 0 {
            try? FileManager.default.removeItem(at: temp)
            throw FerryError(.invalidArgument, "The checkpoint could not be written in \(directory.path).")
        }
    }

    /// Deletes a checkpoint.
    func delete(_ identifier: String) {
        try? FileManager.default.removeItem(at: url(for: identifier))
    }
}
