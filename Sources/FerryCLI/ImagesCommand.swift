import ArgumentParser
import Ferry
import Foundation

/// `ferry images`: the image catalog.
struct ImagesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "images", abstract: "Delete images.", subcommands: [Delete.self])

    /// `ferry images delete ID…`: DeleteImage.
    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete images and their files.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "ImageIds.") var imageIds: [String]

        func run() async throws {
            try await service.with { connection in
                try await report { try await connection.media().deleteImages(imageIds) }
            }
            say("Deleted \(imageIds.joined(separator: ", ")).")
        }
    }
}
