import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// `GET /metrics`: Ferry's Prometheus series, read by promtool and scraped by a real Prometheus.
@Suite("Metrics for Prometheus", .serialized, .timeLimit(.minutes(10)))
struct MetricsTests {
    static func promtoolCheck(_ text: String) async throws -> (status: Int32, said: String) {
        try await PrometheusText.promtoolCheck(text)
    }

    static func sample(_ text: String, _ name: String, _ labels: [String: String]) -> Double? {
        PrometheusText.sample(text, name, labels)
    }

    /// A scrape of `server` whose catalog series were refreshed (`ferry_catalog_up` 1): on a loaded machine the
    /// catalog may miss a scrape's two seconds, which leaves them as they were.
    static func catalogScrape(_ server: TestServer) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            if sample(text, "ferry_catalog_up", [:]) == 1 || ContinuousClock.now > deadline { return text }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test("requests, refusals and S3 operations are counted by group, method, status and operation; promtool accepts the text; no key or access key id is a label")
    func seriesAfterRequests() async throws {
        try await TestServer.with { server in
            let client = server.client()
            #expect(try await client.createBucket("photos").status == 200)
            #expect(try await client.put("photos", "secret-holiday-key.jpg", Array(repeating: 7, count: 1000)).status == 200)
            #expect(try await client.get("absent-bucket", "x").status == 404)
            // Two multipart uploads a DeleteBucket aborts: counted ended as they were counted started.
            #expect(try await client.createBucket("left").status == 200)
            for key in ["a", "b"] { #expect(try await !client.createMultipartUpload("left", key).isEmpty) }
            #expect(try await client.send("DELETE", "/left").status == 204)
            // Refused before it is authenticated: counted under its operation too.
            let forger = server.client(SigV4Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: "not-the-secret"))
            #expect(try await forger.put("photos", "forged.jpg", [1]).status == 403)
            let media = try await S3TestClient.fetch(server.endpoint + "/_ferry/v1/NoSuchAction", headers: [])
            #expect(media.status >= 400)
            // Methods no route answers are one label value, however many of them there are.
            for method in ["PROPFIND", "MKCOL", "LOCK"] { #expect(try await client.send(method, "/photos/x").status == 405) }
            // Declared lengths are not counted, only bytes read: a body-less request (twice, which would wrap the
            // counter) and a plain PUT that declares an aws-chunked length it does not have.
            for _ in 0..<2 {
                let health = try await S3TestClient.fetch(
                    server.endpoint + "/_ferry/health", headers: [("x-amz-decoded-content-length", String(Int64.max))])
                #expect(health.status == 200)
            }
            let forged = try await client.send(
                "PUT", "/photos/forged", headers: [("x-amz-decoded-content-length", "1000000000000")],
                body: Array(repeating: 1, count: 50))
            #expect(forged.status == 200)

            // Heads the HTTP parser refuses (a method in lower case) and one the server does not serve (CONNECT):
            // answered before any route group, counted as unrouted.
            for head in ["get /photos/x HTTP/1.1\r\nHost: a\r\n\r\n", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"] {
                let socket = try RawSocket.connect(port: server.port)
                defer { close(socket) }
                try RawSocket.write(socket, Array(head.utf8))
                let answer = String(decoding: await RawSocket.receive(socket, until: RawSocket.isCompleteResponse).bytes, as: UTF8.self)
                #expect(answer.hasPrefix("HTTP/1.1 400") || answer.hasPrefix("HTTP/1.1 501"), "\(answer)")
            }

            let reply = try await S3TestClient.fetch(server.endpoint + "/metrics")
            #expect(reply.status == 200)
            #expect(reply.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = String(decoding: reply.body, as: UTF8.self)
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "unrouted", "method": "other", "status": "400"]) == 1)
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "unrouted", "method": "other", "status": "501"]) == 1)
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "s3", "method": "PUT", "status": "200"]) == 4)
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "s3", "method": "GET", "status": "404"]) == 1)
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "s3", "method": "other", "status": "405"]) == 3)
            #expect(!text.contains("PROPFIND"))
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "media", "method": "GET"]) == 1)
            #expect(Self.sample(text, "ferry_s3_operations_total", ["operation": "PutObject", "status": "200"]) == 2)
            #expect(Self.sample(text, "ferry_s3_operations_total", ["operation": "CreateBucket", "status": "200"]) == 2)
            #expect(Self.sample(text, "ferry_s3_operations_total", ["operation": "GetObject", "status": "404"]) == 1)
            #expect(Self.sample(text, "ferry_s3_operations_total", ["operation": "PutObject", "status": "403"]) == 1)
            #expect(Self.sample(text, "ferry_multipart_uploads_total", ["event": "started"]) == 2)
            #expect(Self.sample(text, "ferry_multipart_uploads_total", ["event": "aborted"]) == 2)
            #expect(Self.sample(text, "ferry_http_request_body_bytes_total", ["group": "s3"]) == 1050)
            #expect((Self.sample(text, "ferry_http_request_body_bytes_total", ["group": "health"]) ?? 0) == 0)
            #expect(Self.sample(text, "ferry_http_request_duration_seconds_count", ["group": "s3", "method": "PUT"]) == 5)
            #expect(Self.sample(text, "ferry_http_requests_active", [:]) == 1, "the scrape itself is being answered")
            // Series without labels exist at zero before their first event.
            #expect(Self.sample(text, "ferry_upload_parts_replaced_total", [:]) == 0)
            #expect(Self.sample(text, "ferry_webhook_delivery_delay_seconds_count", [:]) == 0)
            #expect(Self.sample(text, "ferry_video_time_to_normal_seconds_count", [:]) == 0)
            #expect(!text.contains("secret-holiday-key"))
            #expect(!text.contains(server.root.accessKeyId))
            // Every series the server exports is one of the listed ones.
            let listed = Set(FerryMetrics.series.map(\.name))
            for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
                #expect(listed.contains(String(line.split(separator: " ")[2])), "\(line)")
            }
            let check = try await Self.promtoolCheck(text)
            #expect(check.status == 0, "\(check.said)")
            #expect(check.said.isEmpty, "promtool's complaints: \(check.said)")
        }
    }

    @Test("preflights the cross-origin policy answers count in their route group (s3, media), not as unrouted")
    func preflightsCountInTheirGroup() async throws {
        try await TestServer.with(configure: { $0.corsOrigins = ["https://app.example"] }) { server in
            for path in ["/photos/x", "/_ferry/v1/GetPlayInfo"] {
                let preflight = try await S3TestClient.fetchRaw(
                    "OPTIONS", server.endpoint + path,
                    headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "PUT")])
                #expect(preflight.status == 204, "\(path): \(preflight.status)")
            }
            let text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            for group in ["s3", "media"] {
                #expect(Self.sample(text, "ferry_http_requests_total", ["group": group, "method": "OPTIONS", "status": "204"]) == 1, "\(group)")
            }
            #expect(Self.sample(text, "ferry_http_requests_total", ["group": "unrouted", "method": "OPTIONS", "status": "204"]) == nil)
        }
    }

    @Test("answer bytes are counted as they are sent: a whole download counts its size, one whose client leaves counts what was sent; a download being sent is a request being answered")
    func answerBytesSent() async throws {
        try await TestServer.with { server in
            let client = server.client()
            #expect(try await client.createBucket("media").status == 200)
            let size = 48 << 20
            #expect(try await client.put("media", "big.bin", Array(repeating: 5, count: size)).status == 200)
            func scrape() async throws -> (sent: Double, active: Double?) {
                let text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
                return (
                    Self.sample(text, "ferry_http_response_body_bytes_total", ["group": "s3"]) ?? 0,
                    Self.sample(text, "ferry_http_requests_active", [:]))
            }
            /// The first scrape within 30 s that `done` accepts, or the last one.
            func scrape(until done: ((sent: Double, active: Double?)) -> Bool) async throws -> (sent: Double, active: Double?) {
                var last = try await scrape()
                let deadline = ContinuousClock.now + .seconds(30)
                while !done(last), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    last = try await scrape()
                }
                return last
            }
            let before = try await scrape().sent
            #expect(try await client.get("media", "big.bin").body.count == size)
            // The last buffer is counted once the server is done with it, which may be just after the client has it.
            let whole = try await scrape { $0.sent - before >= Double(size) }.sent
            #expect(whole - before == Double(size))
            // A client that takes 64 KiB of the answer and hangs up: counted is what left the server, not the
            // Content-Length its head declared.
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let head = signer.sign(
                method: "GET", path: "/media/big.bin", query: [], headers: [("host", "127.0.0.1:\(server.port)")],
                payloadHash: SigV4.emptyPayloadHash, date: Date()).headers
            let socket = try RawSocket.connect(port: server.port)
            try RawSocket.write(socket, Array(RawSocket.requestHead("GET", "/media/big.bin", head).utf8))
            _ = await RawSocket.receive(socket) { $0.count >= 64 << 10 }
            // Being sent, the download is a request being answered, as the scrape is.
            #expect(try await scrape().active == 2)
            close(socket)
            // Once the server has seen the connection go, the download is answered, and what it sent is counted.
            let after = try await scrape { $0.active == 1 }
            #expect(after.active == 1)
            #expect(after.sent > whole && after.sent - whole < Double(size / 2), "counted \(after.sent - whole) of \(size) bytes")
        }
    }

    @Test("a blob write that cannot open its file, a read and a link of blob files gone count as storage call errors of the blob storage")
    func blobWriteErrors() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("broken").status == 200)
            // The blob storage's temporary directory made a file: the next write cannot open its file.
            let temporary = server.dataDirectory + "/objects/tmp"
            try FileManager.default.removeItem(atPath: temporary)
            #expect(FileManager.default.createFile(atPath: temporary, contents: Data()))
            #expect(try await s3.put("broken", "c", [3]).status == 500)
            try FileManager.default.removeItem(atPath: temporary)
            try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
            // An object whose blob files went away: its read and a copy's link fail.
            #expect(try await s3.put("broken", "d", [4]).status == 200)
            let blobs = server.dataDirectory + "/objects/blobs"
            try FileManager.default.moveItem(atPath: blobs, toPath: blobs + ".moved")
            #expect(try await s3.get("broken", "d").status == 500)
            let copy = try await s3.send("PUT", "/broken/e", headers: [("x-amz-copy-source", "/broken/d")])
            #expect(copy.status == 500)
            try FileManager.default.moveItem(atPath: blobs + ".moved", toPath: blobs)
            let text = String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
            for operation in ["write", "read", "link"] {
                #expect(
                    Self.sample(text, "ferry_storage_call_errors_total", ["layer": "blobs", "operation": operation]) == 1,
                    "\(operation)")
            }
            #expect(Self.sample(text, "ferry_storage_call_errors_total", ["layer": "catalog"]) == nil)
            #expect(try await s3.get("broken", "d").body == [4])
        }
    }

    @Test("the catalog's queues at each scrape: a video uploaded where no worker runs leaves its probe job queued and waiting")
    func queueSeries() async throws {
        let directory = TemporaryDirectory.make("ferry-metrics-queue")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/clip.mp4"
        try Data(repeating: 3, count: 2048).write(to: URL(fileURLWithPath: file))
        try await TestServer.with(configure: { $0.mediaProcessing.workers = 0 }) { server in
            let before = try await Self.catalogScrape(server)
            #expect(Self.sample(before, "ferry_catalog_up", [:]) == 1)
            #expect(Self.sample(before, "ferry_media_jobs", ["state": "queued"]) == 0)
            #expect(Self.sample(before, "ferry_media_jobs", ["state": "scheduled"]) == 0)
            #expect(Self.sample(before, "ferry_media_job_queue_age_seconds", [:]) == 0)
            #expect(Self.sample(before, "ferry_webhook_events_pending", [:]) == 0)
            #expect(Self.sample(before, "ferry_multipart_uploads_in_progress", [:]) == 0)
            // Uploads in progress as the catalog counts them: two begun, one of them aborted.
            let s3 = server.client()
            #expect(try await s3.createBucket("open").status == 200)
            let first = try await s3.createMultipartUpload("open", "a")
            _ = try await s3.createMultipartUpload("open", "b")
            let two = try await Self.catalogScrape(server)
            #expect(Self.sample(two, "ferry_multipart_uploads_in_progress", [:]) == 2, "\(two)")
            #expect(try await s3.send("DELETE", S3TestClient.path("open", "a"), query: [("uploadId", first)]).status == 204)

            let media = server.media()
            let ticket = try await media.createUploadVideo(.init(title: "queued", fileName: "clip.mp4"))
            let upload = try await ticket.objectStorageClient().upload(
                file: URL(fileURLWithPath: file), bucket: ticket.address.bucket, key: ticket.address.fileName)
            _ = try await upload.result
            try await Task.sleep(for: .milliseconds(1100))
            let after = try await Self.catalogScrape(server)
            #expect(Self.sample(after, "ferry_media_jobs", ["state": "queued"]) == 1)
            #expect(Self.sample(after, "ferry_media_jobs", ["state": "running"]) == 0)
            #expect(Self.sample(after, "ferry_multipart_uploads_in_progress", [:]) == 1, "\(after)")
            let age = try #require(Self.sample(after, "ferry_media_job_queue_age_seconds", [:]))
            #expect(age >= 1 && age < 600, "\(age)")
            let check = try await Self.promtoolCheck(after)
            #expect(check.status == 0 && check.said.isEmpty, "\(check.said)")
        }
    }

    @Test("deploy/prometheus: promtool accepts the configuration and the alert rules, the rules' unit tests pass, and every Ferry series they name is exported")
    func deployedAlerts() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let promtool = try #require(
            ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "promtool is not installed (scripts/test installs Debian's prometheus)")
        for arguments in [
            ["check", "config", root.path + "/deploy/prometheus/prometheus.yml"],
            ["test", "rules", root.path + "/Tests/FerryTests/Scripts/ferry-alerts.test.yml"],
        ] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: promtool)
            process.arguments = arguments
            process.currentDirectoryURL = root
            let run = try await runBlocking { try process.runCapturing() }
            #expect(process.terminationStatus == 0, "promtool \(arguments.joined(separator: " ")): \(run.output)\(run.errorOutput)")
        }
        for file in ["deploy/prometheus/alerts.yml", "deploy/grafana/ferry-dashboard.json"] {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            let exported = Set(FerryMetrics.series.map(\.name))
            let named = text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
                .map(String.init).filter { $0.hasPrefix("ferry_") }
            #expect(!named.isEmpty)
            for name in Set(named) {
                let base = ["_bucket", "_count", "_sum"].reduce(name) { $0.hasSuffix($1) ? String($0.dropLast($1.count)) : $0 }
                #expect(exported.contains(base), "\(file) names \(name), which Ferry does not export")
            }
        }
    }

    /// The PromQL expressions of the Grafana dashboard's panels, with Grafana's rate interval made a plain one.
    static func dashboardExpressions() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let data = try Data(contentsOf: root.appendingPathComponent("deploy/grafana/ferry-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        return panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
            .map { $0.replacingOccurrences(of: "$__rate_interval", with: "1m") }
    }

    @Test("docs/operations.md lists exactly the series the code exports, with their types, labels and help")
    func documentedSeries() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let documented = text.split(separator: "\n").filter { $0.hasPrefix("| `ferry_") }.map(String.init)
        let expected = FerryMetrics.series.map { series in
            let labels = series.labels.isEmpty ? "—" : series.labels.joined(separator: ", ")
            return "| `\(series.name)` | \(series.type) | \(labels) | \(series.help) |"
        }
        #expect(documented == expected, "the table docs/operations.md should hold:\n\(expected.joined(separator: "\n"))")
    }

    @Test("with a metrics port of its own the series are served there only: the main port's /metrics is the S3 bucket")
    func metricsPort() async throws {
        let port = try LoopbackPort.unused()
        try await TestServer.with(configure: { $0.metricsPort = port }) { server in
            #expect(try await server.client().createBucket("seen").status == 200)
            var scrape = try await S3TestClient.fetch("http://127.0.0.1:\(port)/metrics")
            let deadline = ContinuousClock.now + .seconds(10)
            while scrape.status != 200, ContinuousClock.now < deadline {
                // The listener starts with the background services.
                try await Task.sleep(for: .milliseconds(100))
                scrape = try await S3TestClient.fetch("http://127.0.0.1:\(port)/metrics")
            }
            #expect(scrape.status == 200)
            #expect(Self.sample(scrape.text, "ferry_s3_operations_total", ["operation": "CreateBucket", "status": "200"]) == 1)
            #expect(try await S3TestClient.fetch("http://127.0.0.1:\(port)/").status == 404)
            let main = try await S3TestClient.fetch(server.endpoint + "/metrics")
            #expect(main.status == 403 && main.text.contains("<Code>AccessDenied</Code>"), "\(main.text)")
        }
    }

    @Test("with --metrics-token the series need the bearer token; GET /metrics signed for S3 is the bucket named metrics")
    func tokenAndBucket() async throws {
        try await TestServer.with(configure: { $0.metricsToken = "scrape-token-0123" }) { server in
            #expect(try await S3TestClient.fetch(server.endpoint + "/metrics").status == 401)
            let wrong = try await S3TestClient.fetch(
                server.endpoint + "/metrics", headers: [("Authorization", "Bearer scrape-token-9999")])
            #expect(wrong.status == 401)
            #expect(wrong.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect(!String(decoding: wrong.body, as: UTF8.self).contains("scrape-token-0123"))
            let right = try await S3TestClient.fetch(
                server.endpoint + "/metrics", headers: [("Authorization", "Bearer scrape-token-0123")])
            #expect(right.status == 200)
            #expect(String(decoding: right.body, as: UTF8.self).contains("ferry_http_requests_total"))
            // The scheme in any case, as HTTP compares schemes.
            let lower = try await S3TestClient.fetch(
                server.endpoint + "/metrics", headers: [("Authorization", "bearer scrape-token-0123")])
            #expect(lower.status == 200)

            let client = server.client()
            let missing = try await client.send("GET", "/metrics")
            #expect(missing.status == 404)
            #expect(String(decoding: missing.body, as: UTF8.self).contains("<Code>NoSuchBucket</Code>"))
            #expect(try await client.createBucket("metrics").status == 200)
            #expect(try await client.put("metrics", "a.txt", Array("hello".utf8)).status == 200)
            let listing = try await client.send("GET", "/metrics")
            #expect(listing.status == 200)
            #expect(String(decoding: listing.body, as: UTF8.self).contains("<Key>a.txt</Key>"))
        }
    }

    @Test("a real Prometheus scrapes two nodes with the bearer token and answers queries over what each served: an upload, a media job, a refusal")
    func prometheusScrapesTwoNodes() async throws {
        let prometheus = try #require(
            ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "prometheus is not installed (scripts/test installs Debian's prometheus)")
        let data = TemporaryDirectory.make("ferry-prometheus")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let root = SigV4Credentials(accessKeyId: "FKIAMETRICS000000", secretAccessKey: "metrics-secret-0123456789")
        let environment = [
            "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey,
            "FERRY_METRICS_TOKEN": "scrape-token-0123", "HOME": data,
        ]
        var nodes: [FerryExecutable.Server] = []
        for index in 1...2 {
            nodes.append(
                try await FerryExecutable.Server.start(
                    dataDirectory: data + "/node\(index)", environment: environment, logFile: data + "/node\(index).log"))
        }
        let port = try LoopbackPort.unused()
        let targets = nodes.map { "'127.0.0.1:\($0.port)'" }.joined(separator: ", ")
        try """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
            scrape_configs:
              - job_name: ferry
                authorization:
                  credentials: scrape-token-0123
                static_configs:
                  - targets: [\(targets)]
            """.write(toFile: data + "/prometheus.yml", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: prometheus)
        process.arguments = [
            "--config.file=\(data)/prometheus.yml", "--storage.tsdb.path=\(data)/tsdb",
            "--web.listen-address=127.0.0.1:\(port)",
        ]
        _ = FileManager.default.createFile(atPath: data + "/prometheus.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: data + "/prometheus.log"))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }

        // Node 1 stores an object; node 2 refuses a request for a bucket that does not exist.
        let one = S3TestClient(endpoint: nodes[0].endpoint, credentials: root)
        #expect(try await one.createBucket("scraped").status == 200)
        #expect(try await one.put("scraped", "a.bin", Array(repeating: 1, count: 4096)).status == 200)
        let two = S3TestClient(endpoint: nodes[1].endpoint, credentials: root)
        #expect(try await two.get("absent", "a.bin").status == 404)
        // Node 1 processes a video to Normal (its media jobs run there).
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (scripts/test installs Debian's ffmpeg)")
        let clip = URL(fileURLWithPath: try await MediaFixtures.make(.noAudio, seconds: 1, in: data))
        let media = MediaServiceClient(
            endpoint: URL(string: nodes[0].endpoint)!,
            credentials: Credentials(accessKeyId: root.accessKeyId, secretAccessKey: root.secretAccessKey))
        let ticket = try await media.createUploadVideo(.init(title: "scraped", fileName: "clip.mp4"))
        _ = try await ticket.objectStorageClient().upload(file: clip, bucket: ticket.address.bucket, key: ticket.address.fileName).result
        let processing = ContinuousClock.now + .seconds(120)
        while try await media.getVideoInfo(videoId: ticket.id).status != "Normal", ContinuousClock.now < processing {
            try await Task.sleep(for: .milliseconds(200))
        }

        // What Prometheus has, through its HTTP query API, until both nodes' samples are in (scrapes every second).
        func query(_ expression: String) async throws -> [String: Double] {
            var components = URLComponents(string: "http://127.0.0.1:\(port)/api/v1/query")!
            components.queryItems = [URLQueryItem(name: "query", value: expression)]
            let reply = try await S3TestClient.fetch(components.url!.absoluteString)
            guard reply.status == 200,
                let json = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any],
                let result = (json["data"] as? [String: Any])?["result"] as? [[String: Any]]
            else { return [:] }
            var values: [String: Double] = [:]
            for item in result {
                let instance = (item["metric"] as? [String: String])?["instance"] ?? ""
                if let pair = item["value"] as? [Any], let text = pair.last as? String { values[instance] = Double(text) }
            }
            return values
        }
        let first = "127.0.0.1:\(nodes[0].port)"
        let second = "127.0.0.1:\(nodes[1].port)"
        var puts: [String: Double] = [:]
        var refusals: [String: Double] = [:]
        var up: [String: Double] = [:]
        var jobs: [String: Double] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            up = (try? await query("up{job=\"ferry\"}")) ?? [:]
            puts = (try? await query("ferry_s3_operations_total{operation=\"PutObject\",status=\"200\"}")) ?? [:]
            refusals = (try? await query("ferry_http_requests_total{group=\"s3\",status=\"404\"}")) ?? [:]
            jobs = (try? await query("sum by (instance) (ferry_media_jobs_ended_total{outcome=\"done\"})")) ?? [:]
            if up[first] == 1, up[second] == 1, (puts[first] ?? 0) >= 1, refusals[second] == 1, (jobs[first] ?? 0) >= 2 {
                break
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(up[first] == 1 && up[second] == 1, "both nodes scraped with the token: \(up)")
        // The object and, depending on its size, the video's file.
        #expect((puts[first] ?? 0) >= 1, "\(puts)")
        #expect(puts[second] == nil, "node 2 stored nothing: \(puts)")
        #expect(refusals[second] == 1, "\(refusals)")
        #expect(refusals[first] == nil, "\(refusals)")
        #expect((jobs[first] ?? 0) >= 2, "the probe and transcode ran on node 1: \(jobs)")
        // Every panel of the Grafana dashboard is a query Prometheus takes, and those over what happened have data.
        let expressions = try Self.dashboardExpressions()
        #expect(expressions.count >= 20)
        // Rates need two scrapes of a series in their window: asked again until they have them (a loaded machine
        // can make a scrape time out).
        let watched = ["ferry_http_requests_total", "ferry_media_jobs_ended_total", "ferry_video_time_to_normal_seconds_bucket"]
        let panels = Dictionary(uniqueKeysWithValues: watched.map { series in
            (series, expressions.filter { $0.contains(series + "[") || $0.contains(series + "{") })
        })
        var answered: Set<String> = []
        let panelDeadline = ContinuousClock.now + .seconds(60)
        repeat {
            try await Task.sleep(for: .seconds(3))
            answered = []
            for expression in expressions {
                var components = URLComponents(string: "http://127.0.0.1:\(port)/api/v1/query")!
                components.queryItems = [URLQueryItem(name: "query", value: expression)]
                let reply = try await S3TestClient.fetch(components.url!.absoluteString)
                let json = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]
                #expect(reply.status == 200 && json?["status"] as? String == "success", "\(expression): \(reply.text)")
                if let result = (json?["data"] as? [String: Any])?["result"] as? [Any], !result.isEmpty { answered.insert(expression) }
            }
        } while !panels.values.joined().allSatisfy(answered.contains) && ContinuousClock.now < panelDeadline
        for series in watched {
            let over = panels[series] ?? []
            #expect(!over.isEmpty && over.allSatisfy(answered.contains), "panels over \(series) have no data: \(over)")
        }
        #expect(jobs[second] == nil, "node 2 ran no media job: \(jobs)")
        for node in nodes { await node.stop() }
    }
}
