import FerryCore
import Foundation

/// What a backup of a data directory holds (`manifest.json`, the last file a backup writes): its format, the Ferry
/// version and time that made it, counts from its catalog, and the size and SHA-256 of every other file in it.
///
/// A restore reads every file of the backup against this list before anything reaches the target directory; a backup
/// without it (one that did not finish) is refused. It names no secret: the key files are listed by their digests only.
package struct BackupManifest: Codable, Sendable, Equatable {
    /// The format this version of Ferry writes and reads.
    package static let currentFormat = 1
    /// The manifest's file name in a backup.
    package static let fileName = "manifest.json"

    /// The backup's format (``currentFormat`` when this version made it).
    package var format = BackupManifest.currentFormat
    /// The version of Ferry that made it (``FerryCoreVersion/string``).
    package var ferryVersion = FerryCoreVersion.string
    /// When the backup finished copying.
    package var createdAt: Date
    /// What its catalog holds.
    package var counts: Counts
    /// Every file of the backup but the manifest, by path relative to the backup.
    package var files: [File]

    /// Rows of the backed-up catalog, and the blob files that back them.
    package struct Counts: Codable, Sendable, Equatable {
        /// Buckets.
        package var buckets = 0
        /// Objects.
        package var objects = 0
        /// Multipart uploads in progress.
        package var multipartUploads = 0
        /// Parts of the multipart uploads in progress.
        package var parts = 0
        /// Stored access keys (the root key is not one of them).
        package var accessKeys = 0
        /// Blob files (object and part bytes).
        package var blobs = 0
        /// Bytes of the blob files.
        package var blobBytes: Int64 = 0
    }

    /// One file of a backup.
    package struct File: Codable, Sendable, Equatable {
        /// Its path relative to the backup (`catalog.sqlite`, `objects/blobs/ab/ab12…`).
        package var path: String
        /// Its length in bytes.
        package var size: Int64
        /// SHA-256 of its bytes, 64 lowercase hex digits.
        package var sha256: String
    }

    // MARK: Layout

    /// The catalog's path in a backup and in a data directory.
    static let catalogPath = "catalog.sqlite"
    /// The files of a data directory, besides the catalog and the blobs, that a backup holds when they exist: the
    /// server key (it signs session tokens and seals the access keys' secrets in the catalog) and the root key.
    static let keyPaths = [serverKeyPath, "root-credentials.json"]
    /// The server key's path: every backup holds it.
    static let serverKeyPath = "token-key"
    /// The blob files' directory in a backup and in a data directory.
    static let blobsPath = "objects/blobs"

    /// The path of a blob's file relative to a backup or a data directory.
    static func path(ofBlob blob: String) -> String {
        blobsPath + "/" + BlobFiles.relativePath(of: blob)
    }

    /// The blob a file of the backup holds, or nil when it is not a blob file.
    static func blob(atPath path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "objects", parts[1] == "blobs" else { return nil }
        let name = String(parts[3])
        guard name.count >= 2, name.allSatisfy(\.isHexDigit), parts[2] == name.prefix(2) else { return nil }
        return name
    }

    /// The blobs the backup holds.
    var blobs: Set<String> { Set(files.compactMap { Self.blob(atPath: $0.path) }) }

    /// Checks that this manifest can be restored: a format this version reads, a catalog, and only paths a backup
    /// writes (never one outside the backup or the target directory).
    func validate() throws {
        guard format == Self.currentFormat else {
            throw DataDirectoryBackupError(
                .unsupportedFormat,
                "The backup has format \(format), made by Ferry \(ferryVersion); this Ferry (\(FerryCoreVersion.string)) restores format \(Self.currentFormat).")
        }
        var seen: Set<String> = []
        for file in files {
            guard file.path == Self.catalogPath || Self.keyPaths.contains(file.path) || Self.blob(atPath: file.path) != nil,
                file.size >= 0, file.sha256.count == 64, file.sha256.allSatisfy(\.isHexDigit)
            else {
                throw DataDirectoryBackupError(
                    .incomplete, "The backup's manifest lists a file a Ferry backup does not hold: \(file.path)")
            }
            guard seen.insert(file.path).inserted else {
                throw DataDirectoryBackupError(.incomplete, "The backup's manifest lists \(file.path) twice.")
            }
        }
        guard seen.contains(Self.catalogPath) else {
            throw DataDirectoryBackupError(.incomplete, "The backup's manifest lists no catalog (\(Self.catalogPath)).")
        }
        // Without the server key the catalog's sealed secrets would not open: a server restored so would fail.
        guard seen.contains(Self.serverKeyPath) else {
            throw DataDirectoryBackupError(
                .incomplete, "The backup's manifest lists no server key (\(Self.serverKeyPath)); it is incomplete.")
        }
    }

    /// The manifest as written to a backup: sorted keys, dates in ISO 8601.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// Reads the manifest of the backup at `directory`; throws ``DataDirectoryBackupError/Code/incomplete`` when it
    /// has none or it does not parse.
    static func read(backup directory: String) throws -> BackupManifest {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw DataDirectoryBackupError(.incomplete, "There is no backup directory at \(directory).")
        }
        guard let data = FileManager.default.contents(atPath: directory + "/" + fileName) else {
            throw DataDirectoryBackupError(
                .incomplete,
                "\(directory) holds no \(fileName): it is not a Ferry backup, or a backup that did not finish.")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(BackupManifest.self, from: data)
        } catch {
            throw DataDirectoryBackupError(.incomplete, "The backup's \(fileName) does not parse: \(error)")
        }
    }
}
