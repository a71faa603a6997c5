#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import FerryCore
import Foundation
import GRDB
import Logging
import NIOPosix

/// Backup and restore of a data directory of the embedded default (SQLite catalog, blobs as files), consistent while
/// a server runs on it.
///
/// A backup is a directory:
///
/// ```
/// OUT/manifest.json           format, Ferry version, time, counts, every other file's size and SHA-256
/// OUT/catalog.sqlite          the catalog as of one moment (SQLite's online backup)
/// OUT/token-key               the server key: it signs session tokens and seals access keys' secrets in the catalog
/// OUT/root-credentials.json   the root key, when the data directory holds it (not when it comes from the environment)
/// OUT/objects/blobs/xx/NAME   every blob file that catalog references, and no other; names that share their bytes
///                             (copies of an object) are hard links of one file, as in the data directory
/// ```
///
/// The catalog is copied first, in one step of SQLite's online backup (a read transaction: the server goes on
/// writing). Every blob it references is then copied. A server deletes a blob's file as soon as nothing references it
/// (the embedded store has no grace period), so before the snapshot every blob file is hard-linked under
/// `objects/tmp/` (``BlobPins``), and after it every referenced blob created in between: the links keep the bytes
/// whatever the server deletes meanwhile. A blob the snapshot references that was gone before it could be linked (a
/// blob written and replaced within that moment) makes the backup take a new snapshot, up to
/// ``Configuration/attempts`` times, then fail.
///
/// Everything is written to `OUT.partial-XXXXXXXX` next to `OUT`, fsynced, the manifest last, and renamed to `OUT` at
/// the end: a backup that is killed leaves no `OUT`, and its partial directory has no manifest, which a restore
/// refuses (unless it was killed between the manifest and the rename, when the partial directory is complete).
///
/// ```swift
/// let backup = DataDirectoryBackup(dataDirectory: "/var/lib/ferry")
/// let manifest = try await backup.create(at: "/backups/ferry-2026-11-26")
/// // … later, into a new directory:
/// try await DataDirectoryBackup(dataDirectory: "/var/lib/ferry-restored").restore(from: "/backups/ferry-2026-11-26")
/// ```
package struct DataDirectoryBackup: Sendable {
    /// How a backup behaves.
    package struct Configuration: Sendable {
        /// Catalog snapshots a backup takes at most while blobs a snapshot references are deleted before they can be
        /// kept. Default 5.
        package var attempts = 5
        /// Where retries are logged (at debug); nothing by default.
        package var logger = Logger(label: "ferry.backup", factory: { _ in SwiftLogNoOpLogHandler() })

        /// The defaults.
        package init() {}
    }

    /// The data directory backed up or restored into.
    package let dataDirectory: String
    /// How the backup behaves.
    package var configuration: Configuration

    /// A backup or restore of `dataDirectory`.
    package init(dataDirectory: String, configuration: Configuration = .init()) {
        self.dataDirectory = dataDirectory
        self.configuration = configuration
    }

    // MARK: Backup

    /// Backs the data directory up to a new directory `output`, whether or not a server runs on the data directory.
    ///
    /// - Returns: the backup's manifest.
    /// - Throws: ``DataDirectoryBackupError`` when the directory holds no catalog, its blobs are not files in it,
    ///   `output` exists or is inside the data directory, or blobs kept vanishing; a file-system or SQLite error
    ///   otherwise. Nothing is left at `output` then.
    package func create(at given: String) async throws -> BackupManifest {
        let catalog = dataDirectory + "/" + BackupManifest.catalogPath
        guard FileManager.default.fileExists(atPath: catalog) else {
            throw DataDirectoryBackupError(
                .notADataDirectory, "\(dataDirectory) holds no \(BackupManifest.catalogPath): it is not a Ferry data directory.")
        }
        // `OUT/` and `OUT/.` name the directory OUT, whose partial directory is its sibling.
        let output = URL(fileURLWithPath: given).standardizedFileURL.path
        guard !Self.exists(output) else {
            throw DataDirectoryBackupError(.outputExists, "\(output) exists already; name a new backup directory.")
        }
        guard FileManager.default.fileExists(atPath: dataDirectory + "/" + BackupManifest.serverKeyPath) else {
            throw Self.noServerKey
        }
        // A backup in the data directory shares its disk and its fate; under `objects/tmp` a server's start removes it.
        let root = Self.resolvingSymlinks(dataDirectory)
        let parent = Self.resolvingSymlinks(URL(fileURLWithPath: output).deletingLastPathComponent().path)
        guard parent != root, !parent.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
            throw DataDirectoryBackupError(
                .outputInsideDataDirectory,
                "\(output) is inside the data directory \(dataDirectory); name a backup directory outside it.")
        }
        let partial = output + ".partial-" + UUID().uuidString.prefix(8).lowercased()
        try PrivateFiles.directory(partial)
        var pins: BlobPins?
        do {
            let objects = dataDirectory + "/objects"
            // Blobs in the data directory: pinned under `objects/tmp`, made here when no server has run on the
            // directory since it was restored.
            if Self.exists(objects + "/blobs") || Self.exists(objects + "/tmp") {
                pins = try await blocking {
                    try PrivateFiles.directory(objects + "/tmp")
                    return try BlobPins(objects: objects)
                }
            }
            let manifest = try await copy(into: partial, catalog: catalog, pins: &pins)
            pins?.remove()
            try await blocking {
                try BackupFiles.write(try manifest.encoded(), to: partial + "/" + BackupManifest.fileName)
                try BackupFiles.syncDirectory(partial)
                guard !Self.exists(output) else {
                    throw DataDirectoryBackupError(.outputExists, "\(output) appeared during the backup; it is left as it is.")
                }
                try BackupFiles.rename(partial, to: output)
                try BackupFiles.syncParent(of: output)
            }
            return manifest
        } catch {
            pins?.remove()
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// Copies a catalog snapshot, the blobs it references and the keys into `partial`; returns the manifest (not
    /// written yet).
    private func copy(into partial: String, catalog: String, pins: inout BlobPins?) async throws -> BackupManifest {
        let snapshotPath = partial + "/" + BackupManifest.catalogPath
        var copied: [String: BackupManifest.File] = [:]
        // Blobs that share their bytes (copies of one object) stay shared in the backup.
        var shared = BackupFiles.SharedCopies()
        for attempt in 1...max(1, configuration.attempts) {
            try Task.checkCancellation()
            // Every blob there is now is kept, then the snapshot is taken: a blob it references is one of those, or
            // one written since, kept next unless it is gone already.
            let (kept, snapshot) = try await blocking { [pins] in
                var kept = pins
                try kept?.pinAll()
                return (kept, try Self.snapshot(catalog, to: snapshotPath))
            }
            pins = kept
            if !snapshot.referenced.isEmpty && kept == nil {
                throw DataDirectoryBackupError(
                    .blobsNotInDataDirectory,
                    "The catalog references blobs that are not files in \(dataDirectory)/objects (an S3-compatible store holds them): ferry backup covers the embedded default; back up PostgreSQL and the store as docs/operations.md says.")
            }
            let referenced = snapshot.referenced.sorted()
            let pinned = try await blocking { [pins] in
                var kept = pins
                for blob in referenced where try kept?.pin(blob) == false { return (kept, Optional(blob)) }
                return (kept, nil)
            }
            let sources = pinned.0
            var missing = pinned.1
            pins = sources
            for blob in referenced where missing == nil && copied[blob] == nil {
                try Task.checkCancellation()
                let path = BackupManifest.path(ofBlob: blob)
                let source = sources?.path(of: blob) ?? ""
                let (copy, copies) = try await blocking { [shared] in
                    var copies = shared
                    try PrivateFiles.directory((partial + "/" + path as NSString).deletingLastPathComponent)
                    return (try copies.copy(source, to: partial + "/" + path), copies)
                }
                shared = copies
                if let copy {
                    copied[blob] = BackupManifest.File(path: path, size: copy.size, sha256: copy.sha256)
                } else {
                    missing = blob
                }
            }
            guard missing != nil else {
                return try await finish(partial, snapshot: snapshot, copied: copied)
            }
            configuration.logger.debug(
                "a blob the catalog snapshot references was deleted before it was kept; taking a new snapshot",
                metadata: ["ferry.attempt": "\(attempt)"])
        }
        throw DataDirectoryBackupError(
            .dataDirectoryChanging,
            "Blobs the catalog referenced were deleted before they could be copied, \(configuration.attempts) times in a row; try the backup again when fewer objects are being overwritten.")
    }

    /// Drops blobs an earlier attempt copied that the final snapshot does not reference, copies the keys, and makes
    /// the manifest.
    private func finish(_ partial: String, snapshot: CatalogSnapshot, copied: [String: BackupManifest.File]) async throws
        -> BackupManifest
    {
        let dataDirectory = self.dataDirectory
        return try await blocking {
            var files: [BackupManifest.File] = []
            for (blob, file) in copied {
                if snapshot.referenced.contains(blob) { files.append(file) } else { unlink(partial + "/" + file.path) }
            }
            var counts = snapshot.counts
            counts.blobs = files.count
            counts.blobBytes = files.reduce(0) { $0 + $1.size }
            let catalog = try BackupFiles.digest(of: partial + "/" + BackupManifest.catalogPath)
            files.append(.init(path: BackupManifest.catalogPath, size: catalog.size, sha256: catalog.sha256))
            for key in BackupManifest.keyPaths {
                if let copy = try BackupFiles.copy(dataDirectory + "/" + key, to: partial + "/" + key) {
                    files.append(.init(path: key, size: copy.size, sha256: copy.sha256))
                } else if key == BackupManifest.serverKeyPath {
                    throw Self.noServerKey
                }
            }
            try Self.syncDirectories(below: partial)
            return BackupManifest(createdAt: Date(), counts: counts, files: files.sorted { $0.path < $1.path })
        }
    }

    /// The refusal of a data directory without its server key: a node on PostgreSQL keeps the key there (its
    /// directory is not one `ferry backup` covers), or the key was removed and no backup of it could be restored.
    static let noServerKey = DataDirectoryBackupError(
        .incomplete,
        "The data directory has no server key (\(BackupManifest.serverKeyPath)). A node on PostgreSQL (--catalog) "
            + "keeps its key in PostgreSQL, and ferry backup covers the embedded default only: back up PostgreSQL and "
            + "the objects as docs/operations.md says. Otherwise put the token-key back: a backup without it cannot be "
            + "restored.")

    /// What a catalog snapshot references and counts.
    struct CatalogSnapshot: Sendable {
        var referenced: Set<String>
        var counts: BackupManifest.Counts
    }

    /// Copies the catalog at `source` to a new self-contained file `target` (no WAL) with SQLite's online backup, in
    /// one step, and reads what it references.
    static func snapshot(_ source: String, to target: String) throws -> CatalogSnapshot {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(target + suffix) }
        var configuration = GRDB.Configuration()
        configuration.busyMode = .timeout(10)
        let from = try DatabaseQueue(path: source, configuration: configuration)
        defer { try? from.close() }
        try PrivateFiles.file(target)
        let to = try DatabaseQueue(path: target)
        do {
            try from.backup(to: to)
            try to.writeWithoutTransaction { db in
                // The nodes that served the original are not the restored service's: their heartbeats would list
                // them as stale nodes of it.
                if try db.tableExists("nodeHeartbeat") { try db.execute(sql: "DELETE FROM nodeHeartbeat") }
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
            }
            let snapshot = try to.read { db in
                CatalogSnapshot(referenced: try SQLiteCatalog.referencedBlobs(db), counts: try counts(db))
            }
            try to.close()
            return snapshot
        } catch {
            try? to.close()
            throw error
        }
    }

    /// Rows of the catalog in `db`.
    static func counts(_ db: Database) throws -> BackupManifest.Counts {
        func count(_ table: String) throws -> Int { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
        return BackupManifest.Counts(
            buckets: try count("bucket"), objects: try count("object"), multipartUploads: try count("upload"),
            parts: try count("part"), accessKeys: try count("accessKey"))
    }

    // MARK: Restore

    /// Restores the backup at `backup` into the data directory, which must be empty or not exist, and which no
    /// server may hold.
    ///
    /// Every file is copied into a staging directory inside the data directory and checked against the manifest as
    /// it is copied; the staged catalog must pass SQLite's integrity check and reference only blobs the backup holds.
    /// Only then are the files renamed into place, the catalog last.
    ///
    /// - Returns: the backup's manifest.
    /// - Throws: ``DataDirectoryInUse`` when a server holds the data directory; ``DataDirectoryBackupError`` when it
    ///   is not empty or the backup is incomplete, tampered with or of another format. The data directory is then as
    ///   it was (or absent, when it did not exist).
    package func restore(from backup: String) async throws -> BackupManifest {
        let manifest = try BackupManifest.read(backup: backup)
        try manifest.validate()
        let target = dataDirectory
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        let existed = fm.fileExists(atPath: target, isDirectory: &isDirectory)
        if existed {
            // Refused before anything in it changes.
            guard isDirectory.boolValue else {
                throw DataDirectoryBackupError(.targetNotEmpty, "\(target) is a file, not a data directory.")
            }
            if let owner = Self.owner(of: target) { throw owner }
            try Self.requireEmpty(target)
        } else {
            try PrivateFiles.directory(target)
        }
        let lockExisted = Self.exists(target + "/lock")
        let lock: DataDirectoryLock
        do {
            lock = try DataDirectoryLock(directory: target)
        } catch let inUse as DataDirectoryInUse {
            // Another process holds it: perhaps another restore that made the directory at the same moment (both
            // found it absent), which goes on in it. It is not this one's to remove.
            throw inUse
        } catch {
            if !existed { try? fm.removeItem(atPath: target) }
            throw error
        }
        let staging = target + "/" + Self.stagingPrefix + UUID().uuidString.prefix(8).lowercased()
        do {
            // Under the lock, no other restore runs: what a killed one left goes.
            for name in Self.killedRestoreLeftovers(try fm.contentsOfDirectory(atPath: target)) {
                try fm.removeItem(atPath: target + "/" + name)
            }
            // Again under the lock: nothing may have arrived meanwhile.
            try Self.requireEmpty(target)
            try await stage(manifest, from: backup, into: staging)
            try await blocking {
                try Self.verifyCatalog(staging + "/" + BackupManifest.catalogPath, manifest: manifest)
                try BackupFiles.rename(staging + "/objects", to: target + "/objects")
                for key in BackupManifest.keyPaths where Self.exists(staging + "/" + key) {
                    try BackupFiles.rename(staging + "/" + key, to: target + "/" + key)
                }
                try BackupFiles.rename(
                    staging + "/" + BackupManifest.catalogPath, to: target + "/" + BackupManifest.catalogPath)
                try FileManager.default.removeItem(atPath: staging)
                try PrivateFiles.directory(target)
                try BackupFiles.syncDirectory(target)
            }
            withExtendedLifetime(lock) {}
            return manifest
        } catch {
            try? fm.removeItem(atPath: staging)
            if !existed {
                try? fm.removeItem(atPath: target)
            } else if !lockExisted {
                unlink(target + "/lock")
            }
            withExtendedLifetime(lock) {}
            throw error
        }
    }

    /// Copies the files the manifest lists from `backup` to `staging`, each checked against its size and SHA-256.
    private func stage(_ manifest: BackupManifest, from backup: String, into staging: String) async throws {
        try await blocking { try PrivateFiles.directory(staging + "/" + BackupManifest.blobsPath) }
        // Blob files the backup holds as links of one file are restored as links of one file.
        var shared = BackupFiles.SharedCopies()
        for file in manifest.files {
            try Task.checkCancellation()
            shared = try await blocking { [shared] in
                var copies = shared
                let target = staging + "/" + file.path
                try PrivateFiles.directory((target as NSString).deletingLastPathComponent)
                guard let copy = try copies.copy(backup + "/" + file.path, to: target) else {
                    throw DataDirectoryBackupError(
                        .incomplete, "The backup lacks \(file.path), which its manifest lists; it is incomplete.")
                }
                guard copy.size == file.size, copy.sha256 == file.sha256 else {
                    let difference = copy.size != file.size
                        ? "\(copy.size) bytes, the manifest lists \(file.size)" : "its SHA-256 is not the one listed"
                    throw DataDirectoryBackupError(
                        .checksumMismatch,
                        "\(file.path) in the backup does not match its manifest (\(difference)): "
                            + "the backup is damaged; nothing was restored.")
                }
                return copies
            }
        }
        try await blocking { try Self.syncDirectories(below: staging) }
    }

    /// Checks a staged catalog: SQLite's integrity check, every blob it references in the backup, its counts the
    /// manifest's.
    static func verifyCatalog(_ path: String, manifest: BackupManifest) throws {
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        let (integrity, referenced, counts) = try queue.read { db in
            (
                try String.fetchAll(db, sql: "PRAGMA integrity_check"), try SQLiteCatalog.referencedBlobs(db),
                try Self.counts(db)
            )
        }
        guard integrity == ["ok"] else {
            throw DataDirectoryBackupError(
                .inconsistent, "The backup's catalog fails SQLite's integrity check: \(integrity.prefix(3).joined(separator: "; "))")
        }
        let absent = referenced.subtracting(manifest.blobs)
        guard absent.isEmpty else {
            throw DataDirectoryBackupError(
                .inconsistent, "The backup's catalog references \(absent.count) blobs the backup does not hold.")
        }
        var expected = manifest.counts
        expected.blobs = 0
        expected.blobBytes = 0
        guard counts == expected else {
            throw DataDirectoryBackupError(
                .inconsistent, "The backup's catalog does not hold what its manifest counts (\(counts.objects) objects, the manifest \(manifest.counts.objects)).")
        }
    }

    /// The name prefix of a restore's staging directory in the data directory.
    static let stagingPrefix = ".restore-"

    /// Throws ``DataDirectoryBackupError/Code/targetNotEmpty`` when `directory` holds anything but its lock file and
    /// what a killed restore left (its staging directory and, while there is no catalog, what it renamed into place).
    static func requireEmpty(_ directory: String) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        let left = Set(killedRestoreLeftovers(names))
        let present = names.filter { $0 != "lock" && !left.contains($0) }
        guard present.isEmpty else {
            throw DataDirectoryBackupError(
                .targetNotEmpty,
                "\(directory) is not empty; restore into a new or empty directory.")
        }
    }

    /// What a killed restore left among `names` (a data directory's entries): its staging directories and, while there
    /// is no catalog (renamed into place last), the blobs and keys it had renamed into place before it.
    static func killedRestoreLeftovers(_ names: [String]) -> [String] {
        let staging = names.filter { $0.hasPrefix(stagingPrefix) }
        guard !staging.isEmpty, !names.contains(BackupManifest.catalogPath) else { return staging }
        return staging + names.filter { (["objects"] + BackupManifest.keyPaths).contains($0) }
    }

    /// Throws ``DataDirectoryBackupError/Code/unfinishedRestore`` when `directory` holds what a killed restore left
    /// (its staging directory) and no catalog: a service opened there would start empty, with keys of its own, beside
    /// the staged copies, and the restore could no longer be run again to complete it (the directory would not be
    /// empty).
    package static func requireNoUnfinishedRestore(_ directory: String) throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        guard let staging = names.first(where: { $0.hasPrefix(stagingPrefix) }),
            !names.contains(BackupManifest.catalogPath)
        else { return }
        throw DataDirectoryBackupError(
            .unfinishedRestore,
            "\(directory) holds a restore that did not finish (\(staging)) and no catalog: run the same "
                + "`ferry restore --data-dir \(directory) BACKUP` again to complete it, or remove the directory to "
                + "start an empty service there.")
    }

    /// The process holding `directory`'s lock, found without taking or changing the lock; nil when none holds it.
    static func owner(of directory: String) -> DataDirectoryInUse? {
        let fd = open(directory + "/lock", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) != 0, errno == EWOULDBLOCK else { return nil }
        let owner = DataDirectoryLock.owner(of: directory)
        return DataDirectoryInUse(directory: directory, pid: owner.pid, endpoint: owner.endpoint)
    }

    // MARK: Helpers

    /// Fsyncs `root` and every directory below it.
    static func syncDirectories(below root: String) throws {
        var directories = [root]
        let walker = FileManager.default.enumerator(atPath: root)
        while let relative = walker?.nextObject() as? String {
            if (walker?.fileAttributes?[.type] as? FileAttributeType) == .typeDirectory {
                directories.append(root + "/" + relative)
            }
        }
        for directory in directories.reversed() { try BackupFiles.syncDirectory(directory) }
    }

    /// `path` with the symbolic links of its deepest existing ancestor resolved (those below it are not made yet).
    static func resolvingSymlinks(_ path: String) -> String {
        var ancestor = URL(fileURLWithPath: path).standardizedFileURL
        var below: [String] = []
        while !exists(ancestor.path), ancestor.path != "/" {
            below.insert(ancestor.lastPathComponent, at: 0)
            ancestor.deleteLastPathComponent()
        }
        return ([ancestor.resolvingSymlinksInPath().path] + below).joined(separator: "/")
            .replacingOccurrences(of: "//", with: "/")
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Runs blocking file and SQLite work on the thread pool.
    private func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }
}
