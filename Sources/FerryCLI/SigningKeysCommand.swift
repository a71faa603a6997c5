import ArgumentParser
import Ferry
import FerryCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `ferry signing-keys`: the key pairs an app server signs playback tokens with (CreateSigningKey, ListSigningKeys,
/// DeleteSigningKey).
struct SigningKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signing-keys", abstract: "Create, list and delete the keys that sign playback tokens.",
        subcommands: [Create.self, List.self, Delete.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a signing key; its private key (PEM) is shown this once.",
            discussion: """
                Prints SIGNING_KEY_ID= and ALGORITHM= lines, then the private key unless --private-key-file is given. \
                The server keeps only the public key: tokens signed with the private key carry the id as their kid.
                """)
        @OptionGroup var service: ServiceOptions
        @Option(help: "ES256 (the default) or RS256.")
        var algorithm: String?
        @Option(help: "Write the private key to this new file (mode 0600) instead of printing it.")
        var privateKeyFile: String?

        func validate() throws {
            if let privateKeyFile, FileManager.default.fileExists(atPath: privateKeyFile) {
                throw ValidationError("\(privateKeyFile) exists; the private key is written only to a new file.")
            }
        }

        func run() async throws {
            let key = try await service.with { connection in
                try await report { try await connection.media().createSigningKey(algorithm: algorithm) }
            }
            sayWhole("SIGNING_KEY_ID=\(key.keyId)")
            say("ALGORITHM=\(key.algorithm)")
            guard let privateKeyFile else {
                for line in key.privateKey.split(whereSeparator: \.isNewline) { sayWhole(String(line)) }
                return
            }
            do {
                try Self.writeNew(privateKeyFile, key.privateKey)
            } catch {
                // The key exists on the server; without its private half it signs nothing, so it is deleted again.
                complain("ferry: \(error)")
                try? await service.with { connection in try await connection.media().deleteSigningKey(key.keyId) }
                throw ExitCode(ExitCodes.failed)
            }
        }

        /// Writes `text` to a file that must not exist yet, readable by its owner only.
        static func writeNew(_ path: String, _ text: String) throws {
            let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw FileError(path: path, reason: String(cString: strerror(errno))) }
            defer { close(fd) }
            let bytes = Array(text.utf8)
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else {
                    let reason = String(cString: strerror(errno))
                    unlink(path)
                    throw FileError(path: path, reason: reason)
                }
                written += count
            }
            guard fsync(fd) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(path)
                throw FileError(path: path, reason: reason)
            }
        }

        struct FileError: Error, CustomStringConvertible {
            var path: String
            var reason: String
            var description: String { "cannot write the private key to \(path): \(reason)" }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List signing keys (the caller's; every key with the root key): id, algorithm, creation time.")
        @OptionGroup var service: ServiceOptions

        func run() async throws {
            let keys = try await service.with { connection in
                try await report { try await connection.media().signingKeys() }
            }
            for key in keys { say([key.keyId, key.algorithm, "\(key.creationTime)"].map(TerminalText.field).joined(separator: "\t")) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a signing key; tokens it signed are refused from now on.")
        @OptionGroup var service: ServiceOptions
        @Argument(help: "The signing key id.")
        var keyId: String

        func run() async throws {
            try await service.with { connection in
                try await report { try await connection.media().deleteSigningKey(keyId) }
            }
            say("Deleted \(keyId).")
        }
    }
}
