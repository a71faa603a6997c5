import ArgumentParser
import Ferry
import FerryCore
import Foundation

/// `ferry keys`: manage access keys (root key only).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys", abstract: "Create, list, limit and disable access keys (with the root key).",
        subcommands: [Create.self, List.self, Update.self, Usage.self, Disable.self])

    /// A key's quota as options; a limit left out is no limit.
    struct QuotaOptions: ParsableArguments {
        @Option(help: "Bytes the key may keep stored (objects and parts of uploads in progress).")
        var storageBytes: Int64?
        @Option(help: "Videos the key may have.")
        var videos: Int?
        @Option(help: "Multipart uploads the key may have in progress at once.")
        var concurrentUploads: Int?
        @Option(help: "Requests per second the key may send to each node.", transform: EnvironmentNumber.decimal)
        var requestsPerSecond: Double?

        var quota: AccessKeyQuota {
            AccessKeyQuota(
                storageBytes: storageBytes, videos: videos, concurrentUploads: concurrentUploads,
                requestsPerSecond: requestsPerSecond)
        }

        /// A limit the service would refuse (a negative number, a rate that is not a positive finite number) is a
        /// usage error here, before anything is sent.
        func validate() throws {
            if let problem = quota.problem { throw ValidationError(problem) }
        }
    }

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
        @OptionGroup var limits: QuotaOptions

        func run() async throws {
            let policy = AccessPolicy(statements: [
                .init(actions: actions.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }, bucket: bucket, keyPrefix: prefix)
            ])
            let key = try await service.with { connection in try await report { try await connection.media().createAccessKey(policy: policy, description: description, quota: limits.quota.isUnlimited ? nil : limits.quota) } }
            sayWhole("FERRY_ACCESS_KEY_ID=\(key.accessKeyId)")
            sayWhole("FERRY_SECRET_ACCESS_KEY=\(key.secretAccessKey)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List access keys: id, status, description and limits (tab-separated).")
        @OptionGroup var service: ServiceOptions

        func run() async throws {
            for key in try await service.with({ connection in try await report { try await connection.media().accessKeys() } }) {
                say(
                    [key.accessKeyId, key.status, key.description, KeysCommand.limits(key.quota ?? .unlimited)]
                        .map(TerminalText.field).joined(separator: "\t"))
            }
        }
    }

    /// A quota's limits as `ferry keys` names them (`storage-bytes 10, videos 5`), or `no limits`.
    static func limits(_ quota: AccessKeyQuota) -> String {
        let set = [
            quota.storageBytes.map { "storage-bytes \($0)" }, quota.videos.map { "videos \($0)" },
            quota.concurrentUploads.map { "concurrent-uploads \($0)" },
            quota.requestsPerSecond.map { "requests-per-second \($0)" },
        ].compactMap { $0 }
        return set.isEmpty ? "no limits" : set.joined(separator: ", ")
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an access key's quota (the limits given; none given removes every limit).")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The access key id.")
        var accessKeyId: String
        @OptionGroup var limits: QuotaOptions

        func run() async throws {
            _ = try await service.with { connection in
                try await report { try await connection.media().updateAccessKey(accessKeyId, quota: limits.quota) }
            }
            // Every limit the key now has, so that one left out (and so removed) does not go unnoticed.
            say("Updated \(accessKeyId): \(KeysCommand.limits(limits.quota)) (limits not named are removed).")
        }
    }

    struct Usage: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what an access key holds against its quota (the signing key's own without an id).")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The access key id.")
        var accessKeyId: String?

        func run() async throws {
            let answer = try await service.with { connection in
                try await report { try await connection.media().usage(accessKeyId: accessKeyId) }
            }
            let quota = answer.quota ?? .unlimited
            func line(_ name: String, _ value: String, _ limit: String?) {
                say("\(name)\t\(value)\t\(limit ?? "unlimited")")
            }
            say("access-key-id\t" + TerminalText.field(answer.accessKeyId))
            line("storage-bytes", String(answer.usage.storageBytes), quota.storageBytes.map(String.init))
            line("videos", String(answer.usage.videos), quota.videos.map(String.init))
            line("uploads-in-progress", String(answer.usage.uploadsInProgress), quota.concurrentUploads.map(String.init))
            if let rate = quota.requestsPerSecond { say("requests-per-second\t\(rate)") }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an access key; its temporary credentials stop working too.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The access key id.")
        var accessKeyId: String

        func run() async throws {
            try await service.with { connection in try await report { try await connection.media().disableAccessKey(accessKeyId) } }
            say("Disabled \(accessKeyId).")
        }
    }
}

/// Runs a service call; a failure prints its message and exits as ``ExitCodes/of(_:)`` says: 75 when the network or
/// the service failed past the retries (running the command again may succeed), 1 for a refusal.
func report<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as FerryError {
        complain("ferry: \(error)")
        throw ExitCode(ExitCodes.of(error))
    }
}
