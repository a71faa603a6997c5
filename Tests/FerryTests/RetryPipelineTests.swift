import FerryCore
import Foundation
import Testing

@testable import Ferry

/// A clock that records the waits asked of it and returns at once.
final class RecordingClock: Clock, @unchecked Sendable {
    typealias Instant = ContinuousClock.Instant
    private let lock = NSLock()
    private var recorded: [Duration] = []

    var now: Instant { ContinuousClock.now }
    var minimumResolution: Duration { .zero }
    var waits: [Duration] { lock.withLock { recorded } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let wait = deadline - ContinuousClock.now
        lock.withLock { recorded.append(wait) }
        try Task.checkCancellation()
    }
}

/// A transport answering from a script, one response per request, and counting requests.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var script: [TransportResponse]
    private(set) var requests: [TransportRequest] = []

    init(_ script: [TransportResponse]) { self.script = script }

    var count: Int { lock.withLock { requests.count } }

    func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        lock.withLock {
            requests.append(request)
            return script.count > 1 ? script.removeFirst() : script[0]
        }
    }

    static func json(_ status: Int, _ object: [String: Any], headers: [(name: String, value: String)] = []) -> TransportResponse {
        TransportResponse(
            status: status, headers: [("content-type", "application/json")] + headers,
            body: [UInt8](try! JSONSerialization.data(withJSONObject: object)))
    }

    static func s3Error(_ status: Int, _ code: String, headers: [(name: String, value: String)] = []) -> TransportResponse {
        TransportResponse(
            status: status, headers: [("content-type", "application/xml")] + headers,
            body: Array("<Error><Code>\(code)</Code><Message>m</Message></Error>".utf8))
    }
}

@Suite("One retry loop for S3 requests, the media API and the publish API", .timeLimit(.minutes(10)))
struct RetryPipelineTests {
    static func configuration(_ transport: ScriptedTransport, _ clock: RecordingClock, retries: Int = 3)
        -> ObjectStorageClient.Configuration
    {
        var configuration = ObjectStorageClient.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.retryPolicy = RetryPolicy(maxRetryCount: retries, baseDelay: .milliseconds(100), maxDelay: .milliseconds(400))
        return configuration
    }

    static let endpoint = URL(string: "http://127.0.0.1:1")!
    static let credentials = Credentials(accessKeyId: "AKID", secretAccessKey: "secret")

    @Test("Retry-After is read as seconds or as an HTTP date; anything else is ignored")
    func parsesRetryAfter() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(RetryPolicy.retryAfter("7", now: now) == .seconds(7))
        #expect(RetryPolicy.retryAfter(" 0 ", now: now) == .zero)
        #expect(RetryPolicy.retryAfter("Thu, 01 Jan 1970 00:00:10 GMT", now: Date(timeIntervalSince1970: 4)) == .seconds(6))
        #expect(RetryPolicy.retryAfter("Thu, 01 Jan 1970 00:00:10 GMT", now: Date(timeIntervalSince1970: 40)) == .zero)
        // Measured from the answer's own Date when it has one: a device clock hours off does not change the wait.
        let answered = "Thu, 01 Jan 1970 00:00:07 GMT"
        #expect(RetryPolicy.retryAfter("Thu, 01 Jan 1970 00:00:10 GMT", answeredAt: answered, now: Date(timeIntervalSince1970: 7200)) == .seconds(3))
        #expect(RetryPolicy.retryAfter("Thu, 01 Jan 1970 00:00:10 GMT", answeredAt: answered, now: Date(timeIntervalSince1970: -7200)) == .seconds(3))
        #expect(RetryPolicy.retryAfter("Thu, 01 Jan 1970 00:00:10 GMT", answeredAt: "yesterday", now: Date(timeIntervalSince1970: 4)) == .seconds(6))
        #expect(RetryPolicy.retryAfter("-3", now: now) == nil)
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
        #expect(RetryPolicy.retryAfter(nil, now: now) == nil)
        var error = FerryError(.server, "busy", httpStatus: 503)
        error.retryAfter = .seconds(3600)
        #expect(RetryPolicy().wait(forAttempt: 1, after: error) == RetryPolicy.maxRetryAfter)
        error.retryAfter = .seconds(30)
        #expect(RetryPolicy().wait(forAttempt: 1, after: error) == .seconds(30))
    }

    @Test("a form upload refused with Retry-After (573, the token's key past its request rate) is sent again after the wait; without retries it fails once, carrying the wait")
    func formUploadCarriesRetryAfter() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-form-\(UUID().uuidString)")
        try Data([1, 2, 3]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let refused = ScriptedTransport.json(
            573, ["error": "too many requests", "code": "TooManyRequests"], headers: [("Retry-After", "7")])
        var configuration = FormUploader.Configuration()
        configuration.retryPolicy = .none
        let once = ScriptedTransport([refused])
        configuration.transport = once
        do {
            _ = try await FormUploader(endpoint: Self.endpoint, token: "ak:sign:policy", configuration: configuration)
                .upload(file: file, key: "k").result
            Issue.record("the refused form upload succeeded")
        } catch let error as FerryError {
            #expect(error.httpStatus == 573 && error.serverCode == "TooManyRequests", "\(error)")
            #expect(error.retryAfter == .seconds(7), "\(error)")
        }
        #expect(once.count == 1)

        // With retries (the default), the same refusal asking for no wait is sent again, and then stored.
        let again = ScriptedTransport([
            ScriptedTransport.json(
                573, ["error": "too many requests", "code": "TooManyRequests"], headers: [("Retry-After", "0")]),
            ScriptedTransport.json(200, ["key": "k", "hash": "5289df737df57326fcdd22597afb1fac"]),
        ])
        configuration.retryPolicy = FormUploader.Configuration().retryPolicy
        configuration.transport = again
        let result = try await FormUploader(endpoint: Self.endpoint, token: "ak:sign:policy", configuration: configuration)
            .upload(file: file, key: "k").result
        #expect(result.key == "k" && result.hash == "5289df737df57326fcdd22597afb1fac")
        #expect(again.count == 2)
    }

    @Test("an S3 request answered 503 with Retry-After waits that long on the injected clock, then succeeds")
    func s3RequestHonoursRetryAfter() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.s3Error(503, "SlowDown", headers: [("Retry-After", "7")]),
            TransportResponse(status: 200, headers: [("ETag", "\"abc\"")], body: []),
        ])
        let client = ObjectStorageClient(endpoint: Self.endpoint, credentials: Self.credentials, configuration: Self.configuration(transport, clock))
        _ = try await client.putObject([1, 2, 3], bucket: "b", key: "k", checksumAlgorithm: nil)
        #expect(transport.count == 2)
        #expect(clock.waits.count == 1)
        #expect(clock.waits.first.map { $0 > .milliseconds(6900) && $0 <= .seconds(7) } == true, "\(clock.waits)")
    }

    @Test("an S3 error document without a Message keeps its code (a 503 SlowDown is SlowDown, not ServiceUnavailable)")
    func errorWithoutMessage() {
        let bare = TransportResponse(status: 503, headers: [], body: Array("<Error><Code>SlowDown</Code></Error>".utf8))
        let error = ObjectStorageClient.serverError(bare, method: "PUT")
        #expect(error.serverCode == "SlowDown" && error.httpStatus == 503, "\(error)")
        #expect(error.message == "The server answered HTTP 503 SlowDown.", "\(error)")
        let full = ObjectStorageClient.serverError(ScriptedTransport.s3Error(400, "InvalidArgument"), method: "PUT")
        #expect(full.serverCode == "InvalidArgument" && full.message == "m", "\(full)")
    }

    @Test("the media API retries 5xx and network failures through the same policy, and not a 4xx refusal")
    func mediaAPIRetries() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.json(500, ["code": "InternalError", "message": "try again"]),
            ScriptedTransport.json(503, ["code": "ServiceUnavailable", "message": "busy"], headers: [("Retry-After", "2")]),
            ScriptedTransport.json(200, ["VideoList": [], "Total": 0]),
        ])
        let media = MediaServiceClient(endpoint: Self.endpoint, credentials: Self.credentials, configuration: Self.configuration(transport, clock))
        let answer = try await media.callJSON("ListVideos", body: Data("{}".utf8))
        #expect((try JSONSerialization.jsonObject(with: answer) as? [String: Any])?["Total"] as? Int == 0)
        #expect(transport.count == 3 && clock.waits.count == 2)
        #expect(clock.waits.last.map { $0 > .milliseconds(1900) } == true, "\(clock.waits)")

        let refusing = ScriptedTransport([ScriptedTransport.json(400, ["code": "InvalidParameter", "message": "no", "requestId": "R1"])])
        let strict = MediaServiceClient(endpoint: Self.endpoint, credentials: Self.credentials, configuration: Self.configuration(refusing, clock))
        await #expect(throws: FerryError.self) { _ = try await strict.callJSON("ListVideos", body: Data("{}".utf8)) }
        #expect(refusing.count == 1)
        do {
            _ = try await strict.callJSON("ListVideos", body: Data("{}".utf8))
        } catch {
            #expect(error.serverCode == "InvalidParameter" && error.requestId == "R1" && error.httpStatus == 400)
        }
    }

    @Test("the publish API retries 5xx through the same policy and reports the last refusal when retries run out")
    func publishAPIRetries() async throws {
        let clock = RecordingClock()
        let transport = ScriptedTransport([
            ScriptedTransport.json(502, ["code": "BadGateway"]),
            ScriptedTransport.json(200, ["VideoId": "v1"]),
        ])
        let call = PublishServiceCall(endpoint: Self.endpoint, configuration: Self.configuration(transport, clock))
        let answer = try await call.post("ApplyUploadUGC", ["signature": "s"])
        #expect(answer.status == 200 && answer.object["VideoId"] as? String == "v1")
        #expect(transport.count == 2 && clock.waits.count == 1)

        let down = ScriptedTransport([ScriptedTransport.json(503, ["code": "ServiceUnavailable", "message": "down"])])
        let failing = PublishServiceCall(endpoint: Self.endpoint, configuration: Self.configuration(down, clock, retries: 2))
        let refused = try await failing.post("CommitUploadUGC", ["signature": "s"])
        #expect(refused.status == 503 && refused.object["code"] as? String == "ServiceUnavailable")
        #expect(down.count == 3)
    }
}
