import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

@Suite("Client request ids: one per call, on every attempt, in errors and in the server's log", .timeLimit(.minutes(10)))
struct ClientRequestIdTests {
    static func header(_ name: String, of request: TransportRequest) -> String? {
        request.headers.first { $0.name.lowercased() == name }?.value
    }

    /// The id and attempt header of each request a scripted transport saw.
    static func attempts(_ transport: ScriptedTransport) -> [(id: String?, attempt: String?)] {
        transport.requests.map { (header("amz-sdk-invocation-id", of: $0), header("amz-sdk-request", of: $0)) }
    }

    @Test("an S3 call sends one id on every attempt with the attempt's number; the next call has another; a failure carries it")
    func s3Calls() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.s3Error(503, "SlowDown"),
            TransportResponse(status: 200, headers: [("ETag", "\"abc\"")], body: []),
            ScriptedTransport.s3Error(403, "AccessDenied"),
        ])
        let client = ObjectStorageClient(
            endpoint: RetryPipelineTests.endpoint, credentials: RetryPipelineTests.credentials,
            configuration: RetryPipelineTests.configuration(transport, clock))
        _ = try await client.putObject([1, 2, 3], bucket: "b", key: "k", checksumAlgorithm: nil)
        var refused: FerryError?
        do {
            _ = try await client.putObject([4], bucket: "b", key: "k2", checksumAlgorithm: nil)
        } catch {
            refused = error
        }
        let seen = Self.attempts(transport)
        #expect(seen.count == 3)
        #expect(seen.map(\.attempt) == ["attempt=1; max=4", "attempt=2; max=4", "attempt=1; max=4"])
        let first = try #require(seen[0].id)
        #expect(UUID(uuidString: first) != nil)
        #expect(seen[1].id == first)
        #expect(seen[2].id != first && seen[2].id != nil)
        #expect(refused?.clientRequestId == seen[2].id)
        #expect(refused.map { "\($0)".contains("client request \(seen[2].id ?? "?")") } == true)
    }

    @Test("a media API call sends one id on every attempt")
    func mediaCalls() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.json(500, ["code": "InternalError", "message": "try again"]),
            ScriptedTransport.json(200, ["VideoList": [], "Total": 0, "PageNo": 1, "PageSize": 20]),
        ])
        let media = MediaServiceClient(
            endpoint: RetryPipelineTests.endpoint, credentials: RetryPipelineTests.credentials,
            configuration: RetryPipelineTests.configuration(transport, clock))
        _ = try await media.listVideos()
        let seen = Self.attempts(transport)
        #expect(seen.count == 2)
        #expect(seen[0].id != nil && seen[0].id == seen[1].id)
        #expect(seen.map(\.attempt) == ["attempt=1; max=4", "attempt=2; max=4"])
    }

    @Test("a publish call sends one id on every attempt")
    func publishCalls() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.json(502, ["code": "BadGateway"]),
            ScriptedTransport.json(200, ["VideoId": "v1"]),
        ])
        let call = PublishServiceCall(
            endpoint: RetryPipelineTests.endpoint, configuration: RetryPipelineTests.configuration(transport, clock))
        _ = try await call.post("ApplyUploadUGC", ["signature": "s"])
        let seen = Self.attempts(transport)
        #expect(seen.count == 2)
        #expect(seen[0].id != nil && seen[0].id == seen[1].id)
        #expect(seen.map(\.attempt) == ["attempt=1; max=4", "attempt=2; max=4"])
    }

    @Test("a policy that retries without end sends no maximum")
    func unboundedRetries() async throws {
        var seen: [RequestAttempt] = []
        var policy = RetryPolicy()
        policy.maxRetryCount = .max
        _ = try await policy.run(clock: RecordingClock()) { attempt in
            seen.append(attempt)
            if seen.count < 3 { throw FerryError(.network, "reset") }
            return 0
        }
        #expect(seen.map(\.number) == [1, 2, 3])
        #expect(seen.allSatisfy { $0.maximum == nil && $0.clientRequestId == seen[0].clientRequestId })
        #expect(seen[2].headers.last?.value == "attempt=3")
    }

    @Test("the server logs the client's id beside its own request id; an implausible id is not logged")
    func serverLogsTheClientId() async throws {
        let log = LogRecorder()
        try await TestServer.with(configure: { $0.logger = log.logger() }) { server in
            let client = server.engine()
            var missing: FerryError?
            do {
                _ = try await client.headObject(bucket: "no-such-bucket", key: "k")
            } catch let error as FerryError {
                missing = error
            }
            let error = try #require(missing)
            let clientId = try #require(error.clientRequestId)
            let serverId = try #require(error.requestId)
            let records = log.records.filter { $0.metadata["ferry.request-id"] == serverId }
            #expect(!records.isEmpty)
            #expect(records.allSatisfy { $0.metadata["ferry.client-request-id"] == clientId })

            // The media API logs it the same way.
            var notFound: FerryError?
            do {
                _ = try await server.media().getVideoInfo(videoId: "0000")
            } catch let error as FerryError {
                notFound = error
            }
            let mediaError = try #require(notFound)
            #expect(mediaError.httpStatus == 404)
            let mediaClientId = try #require(mediaError.clientRequestId)
            let mediaRecords = log.records.filter { $0.metadata["ferry.request-id"] == mediaError.requestId }
            #expect(!mediaRecords.isEmpty)
            #expect(mediaRecords.allSatisfy { $0.metadata["ferry.client-request-id"] == mediaClientId })

            // A header that is not a plausible id (too long, or with characters a log line must not carry) is ignored.
            for junk in [String(repeating: "a", count: 65), "id with spaces", "id;drop", "ünïcode"] {
                let reply = try await server.client().send(
                    "GET", "/no-such-bucket", headers: [("amz-sdk-invocation-id", junk)])
                let requestId = try #require(reply.header("x-amz-request-id"))
                let logged = log.records.filter { $0.metadata["ferry.request-id"] == requestId }
                #expect(!logged.isEmpty)
                #expect(logged.allSatisfy { $0.metadata["ferry.client-request-id"] == nil })
            }
        }
    }
}
