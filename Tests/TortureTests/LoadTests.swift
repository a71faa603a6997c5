import AsyncHTTPClient
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Torture: many clients, slow clients, idle connections", .serialized, .timeLimit(.minutes(20)))
struct LoadTests {
    /// Counts what the load clients saw.
    actor Tally {
        var requests = 0
        var failures: [String] = []
        func ok() { requests += 1 }
        func failed(_ what: String) {
            requests += 1
            if failures.count < 20 { failures.append(what) }
        }
    }

    /// One client's loop of small PUT, GET, HEAD and LIST until `deadline`.
    static func client(_ s3: S3TestClient, id: Int, until deadline: ContinuousClock.Instant, tally: Tally) async {
        var n = 0
        while ContinuousClock.now < deadline {
            n += 1
            let key = "c\(id)/\(n % 8)"
            let body = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: 512 + (n % 7) * 1000)
            do {
                let put = try await s3.put("load", key, body)
                guard put.status == 200 else { await tally.failed("PUT \(put.status)"); continue }
                let get = try await s3.get("load", key)
                guard get.status == 200, get.body == body else { await tally.failed("GET \(get.status)"); continue }
                let head = try await s3.send("HEAD", S3TestClient.path("load", key))
                guard head.status == 200 else { await tally.failed("HEAD \(head.status)"); continue }
                let list = try await s3.send("GET", "/load", query: [("list-type", "2"), ("prefix", "c\(id)/")])
                guard list.status == 200 else { await tally.failed("LIST \(list.status)"); continue }
                await tally.ok()
            } catch {
                await tally.failed("\(error)")
            }
        }
    }

    /// 64 clients, each on its own connection, for `seconds`: how many rounds they made and what failed.
    static func load(_ s3: S3TestClient, seconds: Int) async throws -> (requests: Int, failures: [String]) {
        let http = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(connectionPool: .init(idleTimeout: .seconds(1), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)))
        var clients = s3
        clients.httpClient = http
        let tally = Tally()
        let deadline = ContinuousClock.now + .seconds(seconds)
        let loaded = clients
        await withTaskGroup(of: Void.self) { group in
            for id in 0..<64 { group.addTask { await Self.client(loaded, id: id, until: deadline, tally: tally) } }
        }
        try await http.shutdown()
        return (await tally.requests, await tally.failures)
    }

    @Test("64 clients of small PUT/GET/HEAD/LIST with 200 idle connections and 10 trickling uploads: zero errors, the idle and slow ones are cut off, descriptors come back to their baseline, nothing is left on disk")
    func manyClientsWithSlowAndIdle() async throws {
        let data = TemporaryDirectory.make("ferry-torture-load")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data, arguments: ["--idle-timeout", "4", "--body-timeout", "4"], environment: Torture.environment)
        let pid = server.process.processIdentifier
        let s3 = S3TestClient(endpoint: server.endpoint, credentials: Torture.root)
        #expect(try await s3.createBucket("load").status == 200)
        // Warm up first: the catalog opens its reader connections (files held for good) under the first load.
        _ = try await Self.load(s3, seconds: 3)
        try await Task.sleep(for: .seconds(1))
        let baseline = try #require(Torture.openDescriptors(of: pid))

        // Idle connections (nothing sent, or half a request head) and uploads that announce 1 MiB and trickle.
        var sockets: [Int32] = []
        // They come from 20 loopback addresses of their own, as such clients come from many places: one address
        // holds at most 256 connections (--max-connections-per-address), and the 64 clients use 127.0.0.1.
        for index in 0..<200 {
            let socket = try RawSocket.connect(port: server.port, from: "127.0.0.\(2 + index % 20)")
            if index % 2 == 1 { try RawSocket.write(socket, Array("GET /load HTTP/1.1\r\nHost: x\r\n".utf8)) }
            sockets.append(socket)
        }
        var tricklers: [Int32] = []
        for index in 0..<10 {
            let signer = SigV4Signer(credentials: Torture.root, region: "us-east-1")
            let path = "/load/slow-\(index)"
            let headers = signer.sign(
                method: "PUT", path: path, query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("content-length", String(1 << 20))],
                payloadHash: SigV4.unsignedPayload, date: Date()).headers
            let socket = try RawSocket.connect(port: server.port, from: "127.0.0.\(30 + index)")
            try RawSocket.write(socket, Array(RawSocket.requestHead("PUT", path, headers).utf8) + [UInt8](repeating: 1, count: 100))
            tricklers.append(socket)
        }
        let trickling = Task {
            // One byte every 200 ms: far below the minimum of 1 KiB per body window.
            for _ in 0..<40 {
                for socket in tricklers { try? RawSocket.write(socket, [1]) }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }

        let (requests, failures) = try await Self.load(s3, seconds: 20)
        trickling.cancel()
        print("LoadTests: \(requests) rounds of PUT+GET+HEAD+LIST by 64 clients in 20 s, \(failures.count) failed")
        #expect(failures.isEmpty, "\(failures)")
        #expect(requests > 64)

        // The idle connections and the trickling uploads were closed by the server.
        for socket in sockets + tricklers {
            let (_, error) = await RawSocket.receive(socket, timeout: .seconds(5)) { _ in false }
            #expect(error == nil || error == ECONNRESET, "a connection was left open (\(String(describing: error)))")
            close(socket)
        }
        // Descriptors come back to the baseline, and no trickled upload left a file.
        var descriptors = Torture.openDescriptors(of: pid) ?? 0
        for _ in 0..<100 where descriptors > baseline + 2 {
            try await Task.sleep(for: .milliseconds(100))
            descriptors = Torture.openDescriptors(of: pid) ?? 0
        }
        #expect(descriptors <= baseline + 2, "descriptors \(descriptors), baseline \(baseline)")
        #expect(Torture.files(under: data + "/objects/tmp").isEmpty)
        let listed = try await Torture.listAll(S3TestClient(endpoint: server.endpoint, credentials: Torture.root), bucket: "load")
        #expect(!listed.keys.contains { $0.hasPrefix("slow-") })
        await server.stop()
    }
}
