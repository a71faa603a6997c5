import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// awscli, a client no one here wrote, against `ferry serve` started on a free loopback port.
@Suite("awscli against ferry serve", .serialized)
struct AWSCLIInteropTests {
    @Test("aws s3 cp of 64 MiB in 5 MB parts and back, list-parts on an unfinished upload, aws s3 ls")
    func awscli() async throws {
        let data = TemporaryDirectory.make("ferry-awscli")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let credentials = ["FERRY_ACCESS_KEY_ID": "FKIAAWSCLITEST000", "FERRY_SECRET_ACCESS_KEY": "awscli-secret-0123456789"]
        let server = try await FerryExecutable.Server.start(dataDirectory: data + "/server", environment: credentials)
        let config = data + "/aws-config"
        try """
            [default]
            region = us-east-1
            s3 =
                multipart_threshold = 8MB
                multipart_chunksize = 5MB
                addressing_style = path
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let env = [
            "AWS_ACCESS_KEY_ID": credentials["FERRY_ACCESS_KEY_ID"]!,
            "AWS_SECRET_ACCESS_KEY": credentials["FERRY_SECRET_ACCESS_KEY"]!,
            "AWS_CONFIG_FILE": config, "AWS_SHARED_CREDENTIALS_FILE": data + "/none", "AWS_EC2_METADATA_DISABLED": "true",
        ]
        func aws(_ arguments: String...) async throws -> String {
            let endpoint = server.endpoint
            let result = try await runBlocking { try PeerProcess.run("aws", ["--endpoint-url", endpoint] + arguments, environment: env) }
            #expect(result.status == 0, "aws \(arguments.joined(separator: " ")): \(result.errorOutput)")
            return result.output
        }

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
        await server.stop()
    }
}

/// boto3 against `ferry serve`: the script asserts each behaviour and prints `PASS <name>` for it.
@Suite("boto3 against ferry serve", .serialized)
struct Boto3InteropTests {
    @Test("upload_file, presigned GET, every checksum algorithm, aws-chunked trailers, BadDigest, SignatureDoesNotMatch, expired URL")
    func boto3() async throws {
        let data = TemporaryDirectory.make("ferry-boto3")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let credentials = ["FERRY_ACCESS_KEY_ID": "FKIABOTO3TEST0000", "FERRY_SECRET_ACCESS_KEY": "boto3-secret-0123456789"]
        let server = try await FerryExecutable.Server.start(dataDirectory: data + "/server", environment: credentials)
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
            "expired presigned URL is AccessDenied", "paginated listing and delete",
        ]
        #expect(passed == expected, "missing: \(expected.subtracting(passed))")
        await server.stop()
    }
}
