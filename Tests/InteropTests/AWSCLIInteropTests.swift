import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// awscli, a client no one here wrote, against `ferry serve` started on a free loopback port.
@Suite("awscli against ferry serve", .serialized, .timeLimit(.minutes(10)))
struct AWSCLIInteropTests {
    @Test(
        "aws s3 cp of 64 MiB in 5 MB parts and back, list-parts on an unfinished upload, aws s3 ls",
        arguments: ServeBackend.allCases)
    func awscli(backend: ServeBackend) async throws {
        let cli = try await AWSCLI.start("ferry-awscli", backend: backend)
        do {
            let data = cli.data
            func aws(_ arguments: String...) async throws -> String { try await cli.run(arguments) }

            _ = try await aws("s3", "mb", "s3://awscli")
            let file = data + "/big.bin"
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<(64 * 1024 * 1024 / 8)).map { _ in generator.next() as UInt64 }
            try bytes.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: file)) }
            _ = try await aws("s3", "cp", file, "s3://awscli/videos/big.bin")
            _ = try await aws("s3", "cp", "s3://awscli/videos/big.bin", data + "/back.bin")
            #expect(FileManager.default.contentsEqual(atPath: file, andPath: data + "/back.bin"))

            let head = try await aws("s3api", "head-object", "--bucket", "awscli", "--key", "videos/big.bin")
            #expect(head.contains("\"ContentLength\": 67108864"))
            #expect(head.contains("-13\\\""), "64 MiB in 5 MiB parts is 13 parts: \(head)")

            let created = try await aws("s3api", "create-multipart-upload", "--bucket", "awscli", "--key", "unfinished.bin")
            let uploadId = try #require(try JSONSerialization.jsonObject(with: Data(created.utf8)) as? [String: Any])["UploadId"] as? String
            let part = data + "/part.bin"
            try Data(repeating: 0x5A, count: 6 * 1024 * 1024).write(to: URL(fileURLWithPath: part))
            _ = try await aws("s3api", "upload-part", "--bucket", "awscli", "--key", "unfinished.bin", "--part-number", "1",
                        "--body", part, "--upload-id", try #require(uploadId))
            let listed = try await aws("s3api", "list-parts", "--bucket", "awscli", "--key", "unfinished.bin", "--upload-id", try #require(uploadId))
            let parts = try #require((try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [String: Any])?["Parts"] as? [[String: Any]])
            #expect(parts.count == 1)
            #expect(parts.first?["PartNumber"] as? Int == 1)
            #expect(parts.first?["Size"] as? Int == 6 * 1024 * 1024)

            let ls = try await aws("s3", "ls", "s3://awscli/videos/")
            #expect(ls.contains("67108864 big.bin"))
            let buckets = try await aws("s3", "ls")
            #expect(buckets.contains("awscli"))
            await cli.server.stop()
        } catch {
            await cli.remove()
            throw error
        }
        await cli.remove()
    }

    @Test(
        "aws s3 cp and mv between buckets (UploadPartCopy), sync --delete, rm --recursive (DeleteObjects), tagging",
        arguments: ServeBackend.allCases)
    func awscliServerSide(backend: ServeBackend) async throws {
        let cli = try await AWSCLI.start("ferry-awscli-copy", backend: backend)
        do {
            let data = cli.data
            func aws(_ arguments: String...) async throws -> String { try await cli.run(arguments) }
            _ = try await aws("s3", "mb", "s3://source")
            _ = try await aws("s3", "mb", "s3://dest")
            let file = data + "/big.bin"
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<(21 * 1024 * 1024 / 8)).map { _ in generator.next() as UInt64 }
            try bytes.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: file)) }
            _ = try await aws("s3", "cp", file, "s3://source/big.bin")
            // Over the multipart threshold, awscli copies with CreateMultipartUpload + UploadPartCopy ranges.
            _ = try await aws("s3", "cp", "s3://source/big.bin", "s3://dest/copy.bin")
            _ = try await aws("s3", "mv", "s3://source/big.bin", "s3://dest/moved.bin")
            for key in ["copy.bin", "moved.bin"] {
                _ = try await aws("s3", "cp", "s3://dest/\(key)", data + "/\(key)")
                #expect(FileManager.default.contentsEqual(atPath: file, andPath: data + "/\(key)"), "\(key)")
            }
            #expect(!(try await aws("s3", "ls", "s3://source/")).contains("big.bin"))

            _ = try await aws("s3api", "put-object-tagging", "--bucket", "dest", "--key", "copy.bin", "--tagging", "TagSet=[{Key=stage,Value=raw}]")
            let tags = try await aws("s3api", "get-object-tagging", "--bucket", "dest", "--key", "copy.bin")
            #expect(tags.contains("\"stage\"") && tags.contains("\"raw\""))
            #expect(FileManager.default.contentsEqual(atPath: file, andPath: data + "/copy.bin"))

            let tree = data + "/tree"
            for name in ["a", "b", "c/d", "c/e"] {
                try FileManager.default.createDirectory(atPath: (tree + "/" + name as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(name.utf8).write(to: URL(fileURLWithPath: tree + "/" + name))
            }
            _ = try await aws("s3", "sync", tree, "s3://source/tree")
            try FileManager.default.removeItem(atPath: tree + "/c")
            _ = try await aws("s3", "sync", "--delete", tree, "s3://source/tree")
            let synced = try await aws("s3", "ls", "--recursive", "s3://source/tree/")
            #expect(synced.contains("tree/a") && synced.contains("tree/b") && !synced.contains("tree/c/"))
            _ = try await aws("s3", "rm", "--recursive", "s3://dest/")
            #expect((try await aws("s3", "ls", "s3://dest/")).isEmpty)
            _ = try await aws("s3", "rb", "--force", "s3://source")
            #expect(!(try await aws("s3", "ls")).contains("source"))
            await cli.server.stop()
        } catch {
            await cli.remove()
            throw error
        }
        await cli.remove()
    }
}

/// A `ferry serve` on a free port with an awscli configuration for it (path-style, 8 MB multipart threshold, 5 MB
/// parts), in a temporary directory.
struct AWSCLI {
    let data: String
    let server: FerryExecutable.Server
    let environment: [String: String]
    let stopBackend: @Sendable () async -> Void

    static func start(_ name: String, backend: ServeBackend = .localDisk) async throws -> AWSCLI {
        let data = TemporaryDirectory.make(name)
        let credentials = ["FERRY_ACCESS_KEY_ID": "FKIAAWSCLITEST000", "FERRY_SECRET_ACCESS_KEY": "awscli-secret-0123456789"]
        let (arguments, backendEnvironment, stopBackend) = try await backend.start()
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server", arguments: arguments, environment: credentials.merging(backendEnvironment) { $1 })
        let config = data + "/aws-config"
        try """
            [default]
            region = us-east-1
            s3 =
                multipart_threshold = 8MB
                multipart_chunksize = 5MB
                addressing_style = path
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let environment = [
            "AWS_ACCESS_KEY_ID": credentials["FERRY_ACCESS_KEY_ID"]!,
            "AWS_SECRET_ACCESS_KEY": credentials["FERRY_SECRET_ACCESS_KEY"]!,
            "AWS_CONFIG_FILE": config, "AWS_SHARED_CREDENTIALS_FILE": data + "/none", "AWS_EC2_METADATA_DISABLED": "true",
        ]
        return AWSCLI(data: data, server: server, environment: environment, stopBackend: stopBackend)
    }

    /// Runs `aws --endpoint-url … arguments`, expecting success; returns its output.
    func run(_ arguments: [String]) async throws -> String {
        let endpoint = server.endpoint
        let environment = environment
        let result = try await runBlocking {
            try PeerProcess.run("aws", ["--endpoint-url", endpoint] + arguments, environment: environment)
        }
        #expect(result.status == 0, "aws \(arguments.joined(separator: " ")): \(result.errorOutput)")
        return result.output
    }

    func remove() async {
        await server.stop()
        await stopBackend()
        try? FileManager.default.removeItem(atPath: data)
    }
}

/// boto3 against `ferry serve`: the script asserts each behaviour and prints `PASS <name>` for it.
@Suite("boto3 against ferry serve", .serialized, .timeLimit(.minutes(10)))
struct Boto3InteropTests {
    @Test(
        "upload_file, presigned GET, every checksum algorithm, aws-chunked trailers, BadDigest, SignatureDoesNotMatch, expired URL",
        arguments: ServeBackend.allCases)
    func boto3(backend: ServeBackend) async throws {
        let data = TemporaryDirectory.make("ferry-boto3")
        let (arguments, backendEnvironment, stopBackend) = try await backend.start()
        do {
            let credentials = ["FERRY_ACCESS_KEY_ID": "FKIABOTO3TEST0000", "FERRY_SECRET_ACCESS_KEY": "boto3-secret-0123456789"]
            let server = try await FerryExecutable.Server.start(
                dataDirectory: data + "/server", arguments: arguments, environment: credentials.merging(backendEnvironment) { $1 })
            let endpoint = server.endpoint
            let result = try await runBlocking { try PeerProcess.run(
                "python3", [PeerProcess.scripts + "/boto3_interop.py"],
                environment: [
                    "FERRY_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": credentials["FERRY_ACCESS_KEY_ID"]!,
                    "AWS_SECRET_ACCESS_KEY": credentials["FERRY_SECRET_ACCESS_KEY"]!, "WORK_DIR": data,
                    "AWS_CONFIG_FILE": data + "/none", "AWS_SHARED_CREDENTIALS_FILE": data + "/none",
                ]) }
            #expect(result.status == 0, "\(result.output)\n\(result.errorOutput)")
            let passed = Set(result.output.split(separator: "\n").filter { $0.hasPrefix("PASS ") }.map { String($0.dropFirst(5)) })
            let expected: Set<String> = [
                "upload_file with TransferConfig, download_file, bytes equal", "presigned GET",
                "checksum CRC32", "checksum CRC32C", "checksum CRC64NVME", "checksum SHA1", "checksum SHA256",
                "multipart checksum CRC32", "multipart checksum CRC32C", "multipart checksum CRC64NVME", "multipart checksum SHA256",
                "aws-chunked trailer CRC32", "aws-chunked trailer CRC32C", "aws-chunked trailer CRC64NVME", "aws-chunked trailer SHA256",
                "wrong Content-MD5 is BadDigest", "tampered signature is SignatureDoesNotMatch",
                "expired presigned URL is AccessDenied", "paginated listing and delete", "presigned POST policy upload",
                "copy_object and delete_objects",
            ]
            #expect(passed == expected, "missing: \(expected.subtracting(passed))")
            await server.stop()
        } catch {
            await stopBackend()
            try? FileManager.default.removeItem(atPath: data)
            throw error
        }
        await stopBackend()
        try? FileManager.default.removeItem(atPath: data)
    }
}
