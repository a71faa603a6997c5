import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Crash safety", .serialized, .timeLimit(.minutes(10)))
struct CrashSafetyTests {
    /// Opens a connection and sends a signed PUT that announces `announcing` bytes but sends only `sending`: a body
    /// the server is still receiving. Returns the socket (close it when done).
    static func startPut(
        port: Int, credentials: SigV4Credentials, path: String, query: [(name: String, value: String)] = [],
        announcing length: Int, sending count: Int
    ) throws -> Int32 {
        let headers = SigV4Signer(credentials: credentials, region: "us-east-1").sign(
            method: "PUT", path: path, query: query,
            headers: [("host", "127.0.0.1:\(port)"), ("content-length", String(length))],
            payloadHash: SigV4.unsignedPayload, date: Date()).headers
        let target = query.isEmpty ? path : path + "?" + query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        var head = "PUT \(target) HTTP/1.1\r\n"
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        head += "\r\n"
        let socket = try RawSocket.connect(port: port)
        do {
            try RawSocket.write(socket, Array(head.utf8) + [UInt8](repeating: 2, count: count))
        } catch {
            close(socket)
            throw error
        }
        return socket
    }

    @Test("SIGTERM while a request body never finishes: the server still exits within its shutdown bound, losing nothing acknowledged")
    func boundedShutdown() async throws {
        let data = TemporaryDirectory.make("ferry-shutdown")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIASHUTDOWN00000", "FERRY_SECRET_ACCESS_KEY": "shutdown-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        // A body may stall for ten minutes before the connection is closed: only the shutdown bound can end this one.
        let arguments = ["--body-timeout", "600", "--idle-timeout", "600"]
        let server = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        var s3 = S3TestClient(endpoint: server.endpoint, credentials: root)
        try await s3.createBucket("stall")
        let kept = [UInt8](repeating: 9, count: 70_000)
        #expect(try await s3.put("stall", "kept.bin", kept).status == 200)

        let socket = try Self.startPut(
            port: server.port, credentials: root, path: "/stall/stalled.bin", announcing: 8 * 1024 * 1024,
            sending: 1024 * 1024)
        defer { close(socket) }
        try await Task.sleep(for: .milliseconds(500))
        // Graceful shutdown waits for the request in flight for 30 s, then cancels it.
        #expect(await server.stopGracefully(within: .seconds(60)), "the server did not exit on SIGTERM")

        let again = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        s3 = S3TestClient(endpoint: again.endpoint, credentials: root)
        #expect(try await s3.get("stall", "kept.bin").body == kept)
        #expect(try await s3.get("stall", "stalled.bin").status == 404)
        await again.stop()
    }

    @Test("SIGKILL while a part is being written: after a restart the part is absent and the upload completes")
    func killedMidPart() async throws {
        let data = TemporaryDirectory.make("ferry-crash")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let env = ["FERRY_ACCESS_KEY_ID": "FKIACRASHTEST0000", "FERRY_SECRET_ACCESS_KEY": "crash-secret-0123456789"]
        let root = SigV4Credentials(accessKeyId: env["FERRY_ACCESS_KEY_ID"]!, secretAccessKey: env["FERRY_SECRET_ACCESS_KEY"]!)
        let arguments = ["--min-part-size", "1024"]
        let first = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        var s3 = S3TestClient(endpoint: first.endpoint, credentials: root)
        try await s3.createBucket("crash")
        let id = try await s3.createMultipartUpload("crash", "video.mp4")
        let part1 = [UInt8](repeating: 1, count: 4096)
        let etag1 = try #require(try await s3.uploadPart("crash", "video.mp4", uploadId: id, number: 1, part1).header("ETag"))

        // Part 2 announces 8 MiB and sends 3 MiB, then the server is killed while it writes.
        let path = "/crash/video.mp4"
        let socket = try Self.startPut(
            port: first.port, credentials: root, path: path,
            query: [(name: "partNumber", value: "2"), (name: "uploadId", value: id)], announcing: 8 * 1024 * 1024,
            sending: 3 * 1024 * 1024)
        defer { close(socket) }
        let tmp = data + "/objects/tmp"
        var writing = false
        for _ in 0..<1200 {
            if let files = try? FileManager.default.contentsOfDirectory(atPath: tmp), !files.isEmpty {
                writing = true
                break
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(writing, "the part was not being written")
        await first.stop(signal: SIGKILL)

        let second = try await FerryExecutable.Server.start(dataDirectory: data, arguments: arguments, environment: env)
        s3 = S3TestClient(endpoint: second.endpoint, credentials: root)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
        let listed = try S3XML.decode(
            ListPartsResult.self,
            from: Data(try await s3.send("GET", path, query: [("uploadId", id)]).body))
        #expect(listed.parts.map(\.partNumber) == [1])
        let part2 = [UInt8](repeating: 2, count: 3000)
        let etag2 = try #require(try await s3.uploadPart("crash", "video.mp4", uploadId: id, number: 2, part2).header("ETag"))
        let done = try await s3.complete(
            "crash", "video.mp4", uploadId: id, xml: S3TestClient.completeXML([(1, etag1), (2, etag2)]))
        #expect(done.status == 200)
        #expect(try await s3.get("crash", "video.mp4").body == part1 + part2)
        await second.stop()
    }
}
