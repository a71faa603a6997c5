import FerryCore
import Foundation

/// The one way the SDK keeps small JSON records on disk — upload checkpoints, publish records, the media upload
/// journal: each write goes to a private temporary file (mode 0600) that is synced and then renamed over the record,
/// so a process killed at any instant leaves the old record or the new one, never half of one; a record that is
/// missing or cannot be read is no record.
package struct JSONRecordFiles: Sendable {
    /// How dates are written: the checkpoints' and publish records' seconds since 1970, or Foundation's default (the
    /// media journal's, kept so entries written by earlier versions still read).
    package enum Dates: Sendable {
        case secondsSince1970
        case foundationDefault
    }

    /// Where the records are.
    package let directory: URL
    /// How their dates are encoded.
    package var dates: Dates = .secondsSince1970

    /// Records kept in `directory` (created 0700 when first written).
    package init(directory: URL, dates: Dates = .secondsSince1970) {
        self.directory = directory
        self.dates = dates
    }

    package func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// The record called `name`, or nil when there is none or it does not decode as `T`.
    package func read<T: Decodable>(_ type: T.Type, name: String) -> T? {
        guard let data = FileManager.default.contents(atPath: url(name).path) else { return nil }
        let decoder = JSONDecoder()
        if dates == .secondsSince1970 { decoder.dateDecodingStrategy = .secondsSince1970 }
        return try? decoder.decode(type, from: data)
    }

    /// Writes the record called `name` atomically and durably; `what` names it in errors ("checkpoint").
    package func write<T: Encodable>(_ value: T, name: String, what: String) throws {
        let encoder = JSONEncoder()
        if dates == .secondsSince1970 { encoder.dateEncodingStrategy = .secondsSince1970 }
        encoder.outputFormatting = .sortedKeys
        try write(data: try encoder.encode(value), name: name, what: what)
    }

    /// Creates the directory (mode 0700) when it is missing.
    package func createDirectory() throws {
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // Records may name upload URLs and ids: their directory is the user's alone, whatever the umask made it.
        chmod(directory.path, 0o700)
    }

    /// Writes raw bytes as the record called `name`, atomically and durably.
    package func write(data: Data, name: String, what: String) throws {
        try createDirectory()
        let temp = directory.appendingPathComponent(".\(name).\(UUID().uuidString).tmp")
        guard FileManager.default.createFile(atPath: temp.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw FerryError(.invalidArgument, "The record directory \(directory.path) is not writable.")
        }
        do {
            let handle = try FileHandle(forWritingTo: temp)
            defer { try? handle.close() }
            try handle.write(contentsOf: data)
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(at: temp)
            throw FerryError(.invalidArgument, "The \(what) could not be written in \(directory.path): \(error)")
        }
        if rename(temp.path, url(name).path) != 0 {
            try? FileManager.default.removeItem(at: temp)
            throw FerryError(.invalidArgument, "The \(what) could not be written in \(directory.path).")
        }
        // The new name survives a power cut once the directory is synced; without it the previous record stays,
        // which a resumed upload checks against the service like any other.
        let folder = open(directory.path, O_RDONLY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
        removeTemporaries()
    }

    /// Deletes the record called `name`, if there is one, and what killed writes of it left, whatever their age: the
    /// record is done with, and its writer is the one removing it (a checkpoint's holds its lock).
    package func remove(_ name: String) {
        try? FileManager.default.removeItem(at: url(name))
        removeTemporaries(of: name)
    }

    /// Removes the temporary files that killed writes left (`.<name>.<uuid>.tmp`): those of `name` whatever their age,
    /// and those of every record once last modified a minute ago or more (a write under way takes milliseconds), so
    /// that one whose record is never written again does not stay for good.
    private func removeTemporaries(of name: String? = nil) {
        let files = FileManager.default
        guard let entries = try? files.contentsOfDirectory(atPath: directory.path) else { return }
        for entry in entries where entry.hasPrefix(".") && entry.hasSuffix(".tmp") {
            let path = url(entry).path
            if let name, entry.hasPrefix(".\(name).") {
                try? files.removeItem(atPath: path)
                continue
            }
            guard let modified = (try? files.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                Date().timeIntervalSince(modified) >= 60
            else { continue }
            try? files.removeItem(atPath: path)
        }
    }
}
