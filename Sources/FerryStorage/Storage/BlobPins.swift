#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Hard links a backup makes to the blob files of a data directory a server may be running on, so that their bytes
/// outlive the server deleting their names: a blob a catalog snapshot references stays readable until the backup has
/// copied it, whatever the server does meanwhile.
///
/// The links are `objects/tmp/backup-PID-RANDOM/<blob>`: the server never reads `objects/tmp/` but empties it when it
/// starts, so the links a killed backup left go then (or when the next backup finds their process gone).
struct BlobPins {
    /// The data directory's `objects/` directory.
    let objects: String
    /// This backup's directory of links.
    let directory: String
    /// The blobs linked so far.
    private(set) var pinned: Set<String> = []
    /// False once the file system refused a hard link: the blobs are then copied from their own names, and a blob
    /// deleted before its copy makes the backup start over.
    private(set) var linkable = true

    /// Makes the directory of links (after removing those of backups whose process is gone).
    init(objects: String) throws {
        self.objects = objects
        Self.removeAbandoned(in: objects + "/tmp")
        directory = objects + "/tmp/backup-\(getpid())-\(UUID().uuidString.prefix(8).lowercased())"
        try PrivateFiles.directory(directory)
    }

    /// Where `blob`'s bytes are read from: its link when it has one, else its own name.
    func path(of blob: String) -> String {
        pinned.contains(blob) ? directory + "/" + blob : objects + "/blobs/" + BlobFiles.relativePath(of: blob)
    }

    /// Links every blob file there is now. When the links made so far are gone (a server that started meanwhile
    /// emptied `objects/tmp/`), starts over.
    mutating func pinAll() throws {
        if !FileManager.default.fileExists(atPath: directory) {
            pinned = []
            try PrivateFiles.directory(directory)
        }
        let blobs = objects + "/blobs"
        let fm = FileManager.default
        for prefix in (try? fm.contentsOfDirectory(atPath: blobs)) ?? [] {
            for name in (try? fm.contentsOfDirectory(atPath: blobs + "/" + prefix)) ?? [] where !pinned.contains(name) {
                _ = try pin(name)
                if !linkable { return }
            }
        }
    }

    /// Links `blob`; returns false when it is gone (the server deleted it). Where the file system cannot link,
    /// ``linkable`` turns false and this returns whether the blob is there.
    mutating func pin(_ blob: String) throws -> Bool {
        if pinned.contains(blob) { return true }
        let source = objects + "/blobs/" + BlobFiles.relativePath(of: blob)
        if link(source, directory + "/" + blob) == 0 {
            pinned.insert(blob)
            return true
        }
        switch errno {
        case ENOENT: return false
        case EEXIST:
            pinned.insert(blob)
            return true
        case EXDEV, EPERM, EMLINK, ENOTSUP:
            linkable = false
            return access(source, F_OK) == 0
        case let code: throw POSIXFileError("link", code)
        }
    }

    /// Removes the links (the blobs' own names are untouched).
    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Removes the link directories in `tmp` of backups whose process is gone.
    private static func removeAbandoned(in tmp: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? [] where name.hasPrefix("backup-") {
            let fields = name.split(separator: "-")
            guard fields.count == 3, let pid = Int32(fields[1]) else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { try? FileManager.default.removeItem(atPath: tmp + "/" + name) }
        }
    }
}
