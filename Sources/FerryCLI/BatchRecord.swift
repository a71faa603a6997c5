import Crypto
import Ferry
import FerryCore
import Foundation

/// What a run of `ferry upload` has finished, so that running the same command again after Ctrl-C, a kill or a file
/// that failed sends only the files not yet done: a finished video or image is not made a second time, nor a finished
/// object sent again. A run of one file keeps its record too: killed once its file was stored but before it heard or
/// said so, the rerun prints what it made.
///
/// One record per finished file, in `<record dir>/batches/<batch>/`, where the batch is named by what the command
/// makes of its files (bucket and key, or the video's details; the protocol; the cover), not by the files: a rerun
/// that names more files than the run it follows (one added to the folder) still skips those finished. A run's
/// records go when it ends with every file done, and with `--no-resume` or `--cancel` (those of its files only);
/// records are removed after ``maxAge``. A file changed since it was sent (its identity: size, time, file number and
/// sampled bytes, as stream uploads take it) is sent again.
struct BatchRecord: Sendable {
    /// A finished file.
    struct Entry: Codable {
        /// The file as it was when its upload finished.
        var identity: String
        /// What the upload made, as the run printed it (VideoId, ImageURL, Bucket, Key, ETag…).
        var fields: [String: String]
        var finished: Date
    }

    /// How long a record is kept.
    static let maxAge: TimeInterval = 7 * 24 * 3600

    /// The batch's records.
    let files: JSONRecordFiles
    /// The files this run sends.
    let paths: [String]

    /// The records of the batch that makes `destination` (the options that decide what is made of its files) of
    /// `paths`, under `records`. Records older than ``maxAge`` are removed.
    init(records: URL, destination: [String], paths: [String]) {
        let batches = records.appendingPathComponent("batches", isDirectory: true)
        Self.prune(batches)
        let name = destination.joined(separator: "\n")
        files = JSONRecordFiles(directory: batches.appendingPathComponent(Hex.encode(SHA256.hash(data: Data(name.utf8)))))
        self.paths = paths
    }

    /// What the upload of `path` made, when an earlier run of this batch finished it and the file is still as it was.
    func finished(_ path: String) -> [String: String]? {
        guard let entry = files.read(Entry.self, name: Self.entryName(path)),
            Date().timeIntervalSince(entry.finished) < Self.maxAge, entry.identity == Self.identity(path)
        else { return nil }
        return entry.fields
    }

    /// Records that the upload of `path` finished, making `fields`. Throws when the record cannot be written (the
    /// record directory is not writable, the device is full): a rerun of the batch would send the file again.
    func record(_ path: String, _ fields: [String: String]) throws {
        guard let identity = Self.identity(path) else {
            throw FerryError(.fileNotFound, "\(path) could not be read to record it.")
        }
        try files.write(
            Entry(identity: identity, fields: fields, finished: Date()), name: Self.entryName(path), what: "batch record")
    }

    /// Forgets what the batch made of `path`: the next run sends it.
    func forget(_ path: String) {
        files.remove(Self.entryName(path))
    }

    /// Forgets this run's files: the next run sends each of them.
    func clear() {
        for path in paths { forget(path) }
        // The batch's directory, and `batches`, when nothing else is recorded there (rmdir takes only an empty one).
        _ = rmdir(files.directory.path)
        _ = rmdir(files.directory.deletingLastPathComponent().path)
    }

    private static func entryName(_ path: String) -> String {
        Hex.encode(SHA256.hash(data: Data(URL(fileURLWithPath: path).standardizedFileURL.path.utf8))) + ".json"
    }

    /// The file's identity now, or nil when it cannot be read.
    static func identity(_ path: String) -> String? {
        let file = URL(fileURLWithPath: path)
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else { return nil }
        return try? UploadCommand.streamIdentity(
            of: file, size: (attributes[.size] as? NSNumber)?.int64Value ?? 0,
            modified: (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0,
            fileNumber: (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0)
    }

    /// Removes the records (files in the batches under `batches`) not written for ``maxAge``, and the batches left
    /// empty.
    private static func prune(_ batches: URL) {
        let manager = FileManager.default
        func old(_ url: URL) -> Bool {
            guard let modified = (try? manager.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date else {
                return false
            }
            return Date().timeIntervalSince(modified) > maxAge
        }
        guard let names = try? manager.contentsOfDirectory(atPath: batches.path) else { return }
        for name in names {
            let batch = batches.appendingPathComponent(name)
            for entry in (try? manager.contentsOfDirectory(atPath: batch.path)) ?? [] {
                let url = batch.appendingPathComponent(entry)
                if old(url) { try? manager.removeItem(at: url) }
            }
            _ = rmdir(batch.path)
        }
    }
}
