import ArgumentParser
import Foundation

/// The `ferry` command line.
@main
struct FerryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Resumable media uploads and the S3-compatible service they go to.",
        subcommands: [
            UploadCommand.self, ServeCommand.self, ConsoleCommand.self, VideosCommand.self, ImagesCommand.self,
            KeysCommand.self, SigningKeysCommand.self, PresignCommand.self, BackupCommand.self, RestoreCommand.self,
            StatusCommand.self,
        ])
}
