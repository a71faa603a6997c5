import ArgumentParser
import Ferry
import FerryCore
import Foundation

/// `ferry keys`: manage access keys (root key only).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys", abstract: "Create, list and disable access keys (with the root key).",
        subcommands: [Create.self, List.self, Disable.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an access key with a policy; prints its secret once.")
        @OptionGroup var service: ServiceOptions
        @Option(help: "Comma-separated actions, e.g. s3:PutObject,media:CreateUploadVideo (patterns like s3:* allowed).")
        var actions: String
        @Option(help: "Bucket the key may use; * for all. Default *.")
        var bucket: String = "*"
        @Option(help: "Key prefix the key may use. Default: every key.")
        var prefix: String = ""
        @Option(help: "What the key is for.")
        var description: String = ""

        func run() async throws {
            let policy = AccessPolicy(statements: [
                .init(actions: actions.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, bucket: bucket, keyPrefix: prefix)
            ])
            let key = try await service.with { connection in try await report { try await connection.media().createAccessKey(policy: policy, description: description) } }
            print("FERRY_ACCESS_KEY_ID=\(key.accessKeyId)")
            print("FERRY_SECRET_ACCESS_KEY=\(key.secretAccessKey)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List access keys.")
        @OptionGroup var service: ServiceOptions

        func run() async throws {
            for key in try await service.with({ connection in try await report { try await connection.media().listAccessKeys() } }) {
                print("\(key.accessKeyId)\t\(key.status)\t\(key.description)")
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an access key; its temporary credentials stop working too.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The access key id.")
        var accessKeyId: String

        func run() async throws {
            try await service.with { connection in try await report { try await connection.media().disableAccessKey(accessKeyId) } }
            print("Disabled \(accessKeyId).")
        }
    }
}

/// Runs a service call; a failure prints its message and exits 1.
func report<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as FerryError {
        FileHandle.standardError.write(Data("ferry: \(error)\n".utf8))
        throw ExitCode(ExitCodes.failed)
    }
}
