import ArgumentParser
import FerryServer
import Foundation

/// `ferry backup`: copies a data directory of the embedded default into a new backup directory, while a server may run
/// on it.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up a data directory (catalog, object bytes, server keys) into a new directory.",
        discussion: """
            Consistent while `ferry serve` runs on the directory: the catalog as of one moment and every object \
            and part it references. OUT appears only once the backup is complete (a manifest lists every file's \
            SHA-256); it holds the server's keys, so keep it as private as the data directory. Covers the embedded \
            default (SQLite and files); with --catalog or --store see docs/operations.md.
            """)

    @Option(name: .customLong("data-dir"), help: "Data directory (or FERRY_DATA_DIR). Default ~/.ferry.")
    var dataDirectory: String?

    @Argument(help: ArgumentHelp("The backup directory to create; it must not exist.", valueName: "OUT"))
    var output: String

    func run() async throws {
        let directory = resolvedDataDirectory(dataDirectory)
        let manifest = try await failing {
            try await DataDirectoryBackup(dataDirectory: directory).create(at: output)
        }
        let counts = manifest.counts
        say(
            "Backed up \(directory) to \(output): \(counted(counts.buckets, "bucket")), "
                + "\(counted(counts.objects, "object")), \(counted(counts.multipartUploads, "multipart upload")) in "
                + "progress, \(counted(counts.blobs, "blob file")) (\(counted(counts.blobBytes, "byte"))).")
    }
}

/// `ferry restore`: restores a backup into an empty or new data directory.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup made by `ferry backup` into a new or empty data directory.",
        discussion: """
            Every file is checked against the backup's manifest before anything is put in place; a damaged or \
            incomplete backup, a directory that is not empty and one a server holds are refused, and the directory \
            is then left as it was. Start `ferry serve --data-dir DIR` on it afterwards.
            """)

    @Option(name: .customLong("data-dir"), help: "Data directory to restore into (or FERRY_DATA_DIR). Default ~/.ferry.")
    var dataDirectory: String?

    @Argument(help: ArgumentHelp("The backup directory, made by `ferry backup`.", valueName: "IN"))
    var input: String

    func run() async throws {
        let directory = resolvedDataDirectory(dataDirectory)
        let manifest = try await failing {
            try await DataDirectoryBackup(dataDirectory: directory).restore(from: input)
        }
        let counts = manifest.counts
        say(
            "Restored \(input) (made \(manifest.createdAt.ISO8601Format()) by Ferry \(manifest.ferryVersion)) into "
                + "\(directory): \(counted(counts.buckets, "bucket")), \(counted(counts.objects, "object")), "
                + "\(counted(counts.blobs, "blob file")).")
    }
}

/// The data directory named by `--data-dir`, else `FERRY_DATA_DIR`, else the default.
private func resolvedDataDirectory(_ option: String?) -> String {
    let env = ProcessInfo.processInfo.environment
    return option ?? env["FERRY_DATA_DIR"] ?? defaultDataDirectory(env)
}

/// `count` and `noun`, made plural unless the count is one ("1 bucket", "2 buckets").
private func counted(_ count: some BinaryInteger, _ noun: String) -> String {
    "\(count) \(noun)\(count == 1 ? "" : "s")"
}

/// Runs a backup or restore; a failure prints its message (never a secret) and exits 1.
private func failing<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let busy as DataDirectoryInUse {
        let owner = busy.pid.map { " (pid \($0))" } ?? ""
        complain("ferry: \(busy.directory) is in use by a running Ferry process\(owner); stop it before restoring into it.")
        throw ExitCode(ExitCodes.failed)
    } catch let error as CancellationError {
        throw error
    } catch {
        complain("ferry: \(error)")
        throw ExitCode(ExitCodes.failed)
    }
}
