import Crypto
import FerryCore
import FerryTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Root credentials every torture server runs with.
enum Torture {
    static let environment = ["FERRY_ACCESS_KEY_ID": "FKIATORTURE00000", "FERRY_SECRET_ACCESS_KEY": "torture-secret-0123456789abcdef"]
    static let root = SigV4Credentials(
        accessKeyId: "FKIATORTURE00000", secretAccessKey: "torture-secret-0123456789abcdef")

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    static func randomBytes<G: RandomNumberGenerator>(_ count: Int, using generator: inout G) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = generator.next()
            for _ in 0..<8 where index < count {
                bytes[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        return bytes
    }

    /// Open file descriptors of a process (Linux), or nil where /proc is not available.
    static func openDescriptors(of pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Files (not directories) under `path`.
    static func files(under path: String) -> [String] {
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let item = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + item, isDirectory: &isDirectory), !isDirectory.boolValue {
                found.append(item)
            }
        }
        return found
    }

    /// Every key of a bucket with its size, following continuation tokens.
    static func listAll(_ s3: S3TestClient, bucket: String) async throws -> [String: Int64] {
        var keys: [String: Int64] = [:]
        var token: String?
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("max-keys", "1000")]
            if let token { query.append(("continuation-token", token)) }
            let reply = try await s3.send("GET", "/" + bucket, query: query)
            guard reply.status == 200 else { throw TortureError("ListObjectsV2 answered \(reply.status): \(reply.text)") }
            let page = try S3XML.decode(ListBucketResult.self, from: Data(reply.body))
            for object in page.contents { keys[object.key] = object.size }
            token = page.isTruncated ? page.nextContinuationToken : nil
        } while token != nil
        return keys
    }

    /// Open multipart uploads of a bucket as (key, upload id).
    static func openUploads(_ s3: S3TestClient, bucket: String) async throws -> [(key: String, uploadId: String)] {
        let reply = try await s3.send("GET", "/" + bucket, query: [("uploads", "")])
        guard reply.status == 200 else { throw TortureError("ListMultipartUploads answered \(reply.status)") }
        return try S3XML.decode(ListMultipartUploadsResult.self, from: Data(reply.body)).uploads.map { ($0.key, $0.uploadId) }
    }
}

struct TortureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The seed of a torture run: FERRY_TORTURE_SEED when set, otherwise a fresh one (printed by the test).
func tortureSeed() -> UInt64 {
    ProcessInfo.processInfo.environment["FERRY_TORTURE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64.max)
}
