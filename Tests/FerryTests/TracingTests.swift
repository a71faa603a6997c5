import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Traces exported over OTLP to a collector no one here wrote the message definitions of (the OpenTelemetry project's
/// own protobuf, from PyPI): one upload is one trace from the SDK through `ferry serve`'s requests, its media jobs and
/// their tools, into the webhook the app server receives.
@Suite("Tracing over OTLP", .serialized, .timeLimit(.minutes(10)))
struct TracingTests {
    struct ExportedSpan: Decodable {
        var service: String?
        var trace_id: String
        var span_id: String
        var parent_span_id: String
        var name: String
        var attributes: [String: String?]

        enum CodingKeys: String, CodingKey { case service, trace_id, span_id, parent_span_id, name, attributes }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            service = try c.decodeIfPresent(String.self, forKey: .service)
            trace_id = try c.decode(String.self, forKey: .trace_id)
            span_id = try c.decode(String.self, forKey: .span_id)
            parent_span_id = try c.decode(String.self, forKey: .parent_span_id)
            name = try c.decode(String.self, forKey: .name)
            // Attribute values are strings, numbers or booleans; only strings are compared here.
            let raw = try c.decode([String: AnyValue].self, forKey: .attributes)
            attributes = raw.mapValues(\.text)
        }

        struct AnyValue: Decodable {
            var text: String?
            init(from decoder: any Decoder) throws {
                let c = try decoder.singleValueContainer()
                text = (try? c.decode(String.self)) ?? (try? c.decode(Int.self)).map(String.init)
            }
        }
    }

    /// Whether `span` is one of the server's requests, whose parent is the SDK's (not exported here).
    static func isRequest(_ span: ExportedSpan) -> Bool {
        ["POST ", "PUT ", "GET "].contains { span.name.hasPrefix($0) }
    }

    static func spans(in file: String) -> [ExportedSpan] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(ExportedSpan.self, from: Data($0.utf8)) }
    }

    @Test("an SDK upload, its media jobs and its webhooks are one trace: the webhook's traceparent carries the SDK's trace id, and the collector holds the request, job, tool and delivery spans")
    func oneTraceFromDeviceToAppServer() async throws {
        try #require(MediaFixtures.available, "ffmpeg and ffprobe are needed (scripts/test installs Debian's ffmpeg)")
        let directory = TemporaryDirectory.make("ferry-tracing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

        // The collector.
        let port = try LoopbackPort.unused()
        let exported = directory + "/spans.jsonl"
        let collector = Process()
        collector.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        collector.arguments = ["python3", root + "/Scripts/otlp_collector.py", String(port), exported]
        collector.standardError = FileHandle.nullDevice
        try collector.run()
        defer {
            // SIGKILL: the test process may block SIGTERM, and its children inherit the mask.
            if collector.isRunning { kill(collector.processIdentifier, SIGKILL) }
            collector.waitUntilExit()
        }
        var listening = false
        for _ in 0..<100 where !listening {
            if let fd = try? RawSocket.connect(port: port) {
                close(fd)
                listening = true
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        try #require(listening, "the OTLP collector did not start (is opentelemetry-proto installed?)")

        try await HTTPReceiver.with { receiver in
            let credentials = SigV4Credentials(accessKeyId: "FKIATRACING00000000", secretAccessKey: "tracing-secret-0123456789")
            // The webhook URL carries the receiver's secret (as a Slack hook's does), and the collector's headers a
            // credential of its own: neither reaches a span or the log.
            let hookSecret = "HOOK-\(UUID().uuidString)"
            let collectorSecret = "COLLECTOR-\(UUID().uuidString)"
            let server = try await FerryExecutable.Server.start(
                dataDirectory: directory + "/data",
                arguments: [
                    "--otel-endpoint", "http://127.0.0.1:\(port)", "--webhook-url",
                    receiver.url("/hooks/\(hookSecret)?token=\(hookSecret)"),
                ],
                environment: [
                    "FERRY_ACCESS_KEY_ID": credentials.accessKeyId, "FERRY_SECRET_ACCESS_KEY": credentials.secretAccessKey,
                    "FERRY_WEBHOOK_SECRET": "tracing-webhook-secret", "HOME": directory,
                    "OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer \(collectorSecret)",
                ],
                logFile: directory + "/serve.log")
            let media = MediaServiceClient(
                endpoint: URL(string: server.endpoint)!,
                credentials: Credentials(accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey))
            let clip = URL(fileURLWithPath: try await MediaFixtures.make(.noAudio, seconds: 1, in: directory))

            // The app makes creating the video and uploading its file one trace.
            let trace = UploadTrace()
            let videoId = try await UploadTrace.$current.withValue(trace) {
                let ticket = try await media.createUploadVideo(.init(title: "traced", fileName: "clip.mp4"))
                let upload = try await ticket.objectStorageClient().upload(
                    file: clip, bucket: ticket.address.bucket, key: ticket.address.fileName)
                #expect(upload.trace == trace)
                _ = try await upload.result
                return ticket.id
            }
            let deadline = ContinuousClock.now + .seconds(120)
            while try await media.getVideoInfo(videoId: videoId).status != "Normal", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
            }

            // Every webhook of the video continues the upload's trace.
            var hooks: [HTTPReceiver.Received] = []
            var spans: [ExportedSpan] = []
            let names = ["media.job probe", "media.job transcode", "media.tool ffmpeg", "media.tool ffprobe", "webhook.deliver"]
            while ContinuousClock.now < deadline {
                hooks = await receiver.recorder.requests
                spans = Self.spans(in: exported).filter { $0.trace_id == trace.traceId }
                let seen = Set(spans.map(\.name))
                // A span is exported when it ends, its parent later: wait until every parent is there too.
                let exportedIds = Set(spans.map(\.span_id))
                if hooks.contains(where: { String(decoding: $0.body, as: UTF8.self).contains("TranscodeComplete") }),
                    names.allSatisfy(seen.contains), seen.contains(where: { $0.hasSuffix(" s3") }),
                    spans.allSatisfy({ Self.isRequest($0) || exportedIds.contains($0.parent_span_id) })
                {
                    break
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(!hooks.isEmpty)
            for hook in hooks {
                let parent = try #require(hook.headers["traceparent"], "a webhook without traceparent")
                #expect(!parent.contains(","), "traceparent sent more than once: \(parent)")
                #expect(parent.split(separator: "-").dropFirst().first.map(String.init) == trace.traceId, "\(parent)")
            }
            let seen = Set(spans.map(\.name))
            for name in names { #expect(seen.contains(name), "no \(name) span in the upload's trace: \(seen.sorted())") }
            #expect(seen.contains("POST media") && seen.contains(where: { $0.hasSuffix(" s3") }), "\(seen.sorted())")
            #expect(seen.contains("catalog.putObject") || seen.contains("catalog.completeUpload"), "\(seen.sorted())")
            #expect(spans.allSatisfy { $0.service == "ferry" })
            // Every span but the requests' hangs under another span of the trace; the requests' under the SDK's.
            let ids = Set(spans.map(\.span_id))
            for span in spans where !Self.isRequest(span) {
                #expect(ids.contains(span.parent_span_id), "\(span.name) has a parent outside the trace's exported spans")
            }
            // No credential reaches a span.
            let text = (try? String(contentsOfFile: exported, encoding: .utf8)) ?? ""
            #expect(!text.contains(credentials.secretAccessKey) && !text.contains("X-Amz-Signature=") && !text.contains("Signature="))
            #expect(!text.contains(hookSecret) && !text.contains(collectorSecret), "a webhook or collector secret reached a span")

            // Trace headers as an attacker writes them: a traceparent that cannot be read beside credentials (the tracer
            // logged every header of such a request), a tracestate of combined characters (the W3C parser trapped on
            // it, stopping the process), and a well-formed pair, which the request's span continues.
            let marker = "SECRET-\(UUID().uuidString)"
            let foreign = "0af7651916cd43dd8448eb211c80319c"
            let valid = "00-\(foreign)-b7ad6b7169203331-01"
            let hostile: [[(name: String, value: String)]] = [
                [("traceparent", "not-a-traceparent"), ("x-amz-security-token", marker), ("authorization", "Bearer " + marker)],
                [("traceparent", valid), ("tracestate", String(repeating: "a\u{0332}", count: 100) + "@x=y")],
                [("traceparent", valid), ("tracestate", String(repeating: "k=v,", count: 200))],
                [("traceparent", valid), ("traceparent", valid)],
                [("traceparent", valid), ("tracestate", "vendor=opaque,other@tenant=1")],
            ]
            for headers in hostile {
                let head = RawSocket.requestHead("GET", "/_ferry/health", [("host", "127.0.0.1:\(server.port)")] + headers)
                let outcome = await RawHTTPExchange.send(port: server.port, .init(head: Array(head.utf8), body: []))
                guard case .answered(let response) = outcome else {
                    Issue.record("no answer to \(headers.map(\.name)): \(outcome)")
                    continue
                }
                #expect(response.status == 200)
                #expect(server.process.isRunning)
            }
            var continued: [ExportedSpan] = []
            while continued.isEmpty, ContinuousClock.now < deadline + .seconds(30) {
                continued = Self.spans(in: exported).filter { $0.trace_id == foreign }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(!continued.isEmpty, "the well-formed traceparent was not continued")
            await server.stop()
            let log = (try? String(contentsOfFile: directory + "/serve.log", encoding: .utf8)) ?? ""
            #expect(!log.contains(marker), "a credential reached the log")
            // The exporter says which variable it read, not what it holds.
            #expect(log.contains("environment_key=OTEL_EXPORTER_OTLP_TRACES_HEADERS environment_value=<redacted>"), "\(log.prefix(2000))")
            #expect(!log.contains(collectorSecret) && !log.contains(hookSecret), "a collector or webhook secret reached the log")
        }
    }
}
