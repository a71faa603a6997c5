import ArgumentParser
import FerryCore
import Foundation

/// The `ferry` command line.
@main
struct FerryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Resumable media uploads and the S3-compatible service they go to.",
        version: FerryCoreVersion.string,
        subcommands: [
            UploadCommand.self, ServeCommand.self, ConsoleCommand.self, VideosCommand.self, ImagesCommand.self,
            KeysCommand.self, SigningKeysCommand.self, PresignCommand.self, BackupCommand.self, RestoreCommand.self,
            StatusCommand.self,
        ])

    /// Runs the command; one whose output could not all be written (``StandardOutput/lost``) ends with
    /// ``ExitCodes/outputLost`` rather than success.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
        if StandardOutput.lost { exit(withError: ExitCode(ExitCodes.outputLost)) }
    }
}
