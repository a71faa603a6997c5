import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Testing

@Suite("Webhooks", .timeLimit(.minutes(10)))
struct WebhookTests {
    static let secret = "whsec-test-0123456789"

    // MARK: Signatures

    @Test("sign/verify round trip; tampered body, wrong secret, stale or malformed header rejected")
    func signatures() throws {
        let body = Array(#"{"id":"evt_1"}"#.utf8)
        let t = Date(timeIntervalSince1970: 1_700_000_000.75)
        let header = WebhookSignature.sign(body: body, secret: "whsec-test", timestamp: t)
        // HMAC-SHA256("whsec-test", "1700000000.{"id":"evt_1"}"), computed independently.
        #expect(header == "t=1700000000,v1=ab0f82fa9f9ae7a690c998696fb56441e102a1546c14f8c2077dd1c92a67f65c")
        #expect(WebhookSignature.verify(header: header, body: body, secret: "whsec-test", now: t))
        #expect(WebhookSignature.verify(header: header, body: body, secret: "whsec-test", now: t + 299))
        // Tampered body, wrong secret.
        #expect(!WebhookSignature.verify(header: header, body: Array(#"{"id":"evt_2"}"#.utf8), secret: "whsec-test", now: t))
        #expect(!WebhookSignature.verify(header: header, body: body + [0x20], secret: "whsec-test", now: t))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec-tesT", now: t))
        // Stale (and far-future) timestamps; a custom tolerance.
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec-test", now: t + 301))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec-test", now: t - 301))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec-test", now: t + 61, tolerance: 60))
        // A timestamp changed to look fresh invalidates the signature.
        let mac = String(header.split(separator: ",")[1])
        #expect(!WebhookSignature.verify(header: "t=1700000500,\(mac)", body: body, secret: "whsec-test", now: t + 500))
        // Malformed headers.
        for bad in ["", "t=1700000000", mac, "t=abc,\(mac)", "t=1700000000,v1=zz", "t=1700000000,v1=ab0f",
                    "t=1700000000,t=1700000000,\(mac)"] {
            #expect(!WebhookSignature.verify(header: bad, body: body, secret: "whsec-test", now: t), "\(bad)")
        }
        // Extra entries (another scheme, a rotated key's signature) do not stop a valid v1 from verifying.
        let rotated = "t=1700000000,v1=" + String(repeating: "00", count: 32) + ",v0=x," + mac
        #expect(WebhookSignature.verify(header: rotated, body: body, secret: "whsec-test", now: t))
        // Uppercase hex and spaces after commas are tolerated.
        #expect(WebhookSignature.verify(header: header.uppercased().replacingOccurrences(of: "T=", with: "t=")
            .replacingOccurrences(of: "V1=", with: "v1=").replacingOccurrences(of: ",", with: ", "),
            body: body, secret: "whsec-test", now: t))
    }

    // MARK: Delivery

    @Test("enqueued events arrive in order, signed, as the documented JSON; then none is pending")
    func deliversInOrder() async throws {
        try await WebhookReceiver.with { receiver async throws in
            try await withWebhookServer(webhook: Self.configuration(receiver.url)) { server async throws in
                var ids: [String] = []
                for index in 1...3 {
                    let id = try await server.webhooks.enqueue(
                        Self.test(WebhookPayload(videoId: "\(index)", errorMessage: "a/b c/\u{e9}")))
                    ids.append(try #require(id))
                }
                #expect(Set(ids).count == 3)
                #expect(try await eventually { await receiver.recorder.deliveries.count >= 3 })
                let deliveries = await receiver.recorder.deliveries
                #expect(deliveries.map(\.id) == ids)
                for (index, delivery) in deliveries.enumerated() {
                    let signature = try #require(delivery.signature)
                    #expect(WebhookSignature.verify(header: signature, body: delivery.body, secret: Self.secret))
                    #expect(!WebhookSignature.verify(header: signature, body: delivery.body, secret: "other"))
                    #expect(delivery.contentType == "application/json")
                    let json = try #require(
                        try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
                    #expect(Set(json.keys) == ["id", "type", "createdAt", "payload"])
                    #expect(json["id"] as? String == ids[index])
                    #expect(json["type"] as? String == "media.test")
                    #expect(json["payload"] as? [String: String] == ["VideoId": "\(index + 1)", "ErrorMessage": "a/b c/\u{e9}"])
                    // Slashes go as they are; the body is the payload's exact JSON.
                    #expect(String(decoding: delivery.body, as: UTF8.self).contains(#""ErrorMessage":"a/b c/\#u{e9}""#))
                    let createdAt = try #require(json["createdAt"] as? String)
                    let date = try Date(createdAt, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
                    #expect(abs(date.timeIntervalSinceNow) < 60)
                }
                #expect(try await eventually { try await server.webhooks.pending().isEmpty })
                // Delivered once each.
                #expect(await receiver.recorder.deliveries.count == 3)
            }
        }
    }

    @Test("a user and password in the receiver's URL go as HTTP Basic credentials, not in the request line")
    func basicCredentials() async throws {
        try await WebhookReceiver.with { receiver async throws in
            let url = try #require(URL(string: "http://hook%20user:p%40ss:w@127.0.0.1:\(receiver.port)/hooks"))
            try await withWebhookServer(webhook: Self.configuration(url)) { server async throws in
                _ = try await server.webhooks.enqueue(Self.test(WebhookPayload(videoId: "1")))
                #expect(try await eventually { await receiver.recorder.deliveries.count >= 1 })
                let delivery = try #require(await receiver.recorder.deliveries.first)
                #expect(delivery.authorization == "Basic " + Data("hook user:p@ss:w".utf8).base64EncodedString())
                #expect(delivery.signature != nil)
            }
        }
    }

    @Test("receiver down: delivery pauses as a whole, so an outage costs about one event's attempts, not one per video; once it listens every event arrives, each video's in order")
    func retriesUntilReceiverListens() async throws {
        let port = try await WebhookReceiver.freePort()
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/hooks"))
        try await withWebhookServer(webhook: Self.configuration(url)) { server async throws in
            // Two events for each of ten videos.
            var enqueued: [String: [String]] = [:]
            let started = ContinuousClock.now
            for _ in 0..<2 {
                for video in 0..<10 {
                    let id = try #require(try await server.webhooks.enqueue(Self.test(WebhookPayload(videoId: "v\(video)"))))
                    enqueued["v\(video)", default: []].append(id)
                }
            }
            let ids = enqueued
            // A receiver that refuses connections, with waits of 50 ms doubling up to 500 ms (the upper half drawn at
            // random): from three seconds on, at most about one attempt a quarter second in all (each video's head
            // retried on its own would make ten times as many).
            try await Task.sleep(for: .seconds(3))
            #expect(try await eventually { try await server.webhooks.pending().map(\.attempts).reduce(0, +) >= 2 }, "the events were retried")
            let pending = try await server.webhooks.pending()
            let elapsed = (ContinuousClock.now - started).timeInterval
            #expect(pending.count == 20 && pending.allSatisfy { $0.deliveredAt == nil && $0.failedAt == nil })
            let attempts = pending.map(\.attempts).reduce(0, +)
            #expect(attempts <= 5 + Int(elapsed / 0.25), "one attempt per pause, not one per video: \(attempts) in \(elapsed) s")

            try await WebhookReceiver.with(port: port) { receiver async throws in
                #expect(try await eventually { await receiver.recorder.deliveries.count >= 20 })
                let deliveries = await receiver.recorder.deliveries
                #expect(Set(deliveries.compactMap(\.id)) == Set(ids.values.joined()))
                for (video, expected) in ids {
                    #expect(deliveries.compactMap(\.id).filter { expected.contains($0) } == expected, "\(video)")
                }
                for delivery in deliveries {
                    #expect(WebhookSignature.verify(header: delivery.signature ?? "", body: delivery.body, secret: Self.secret))
                }
                #expect(try await eventually { try await server.webhooks.pending().isEmpty })
            }
        }
    }

    @Test("events enqueued while the receiver is down survive a restart and arrive after it")
    func survivesRestart() async throws {
        let directory = TemporaryDirectory.make("ferry-webhooks")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try await WebhookReceiver.freePort()
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/hooks"))
        let ids = try await withWebhookServer(directory: directory, webhook: Self.configuration(url)) { server async throws in
            var ids: [String] = []
            // One video's events: they arrive in the order they were made.
            for _ in 1...3 {
                ids.append(try #require(try await server.webhooks.enqueue(Self.test(WebhookPayload(videoId: "v")))))
            }
            #expect(try await eventually { try await server.webhooks.pending().first?.attempts ?? 0 >= 1 })
            return ids
        }
        try await WebhookReceiver.with(port: port) { receiver async throws in
            // Not delivered by anything but the restarted server.
            #expect(await receiver.recorder.deliveries.isEmpty)
            // Read before the restarted server's deliverer runs: it may deliver before the body below starts.
            let stored: @Sendable (FerryServer) async throws -> Void = { server in
                let pending = try await server.webhooks.pending()
                #expect(pending.map(\.id) == ids)
            }
            try await withWebhookServer(directory: directory, webhook: Self.configuration(url), beforeStart: stored) {
                server async throws in
                #expect(try await eventually { await receiver.recorder.deliveries.count >= 3 })
                let deliveries = await receiver.recorder.deliveries
                #expect(deliveries.map(\.id) == ids)
                for delivery in deliveries {
                    #expect(WebhookSignature.verify(header: delivery.signature ?? "", body: delivery.body, secret: Self.secret))
                }
                #expect(try await eventually { try await server.webhooks.pending().isEmpty })
            }
        }
    }

    @Test("a non-2xx answer is retried with the same body; after maxAttempts the event is kept as failed and the next goes")
    func givesUpAfterMaxAttempts() async throws {
        let recorder = WebhookRecorder(rejectedTypes: ["media.doomed"])
        try await WebhookReceiver.with(recorder: recorder) { receiver async throws in
            var configuration = Self.configuration(receiver.url)
            configuration.maxAttempts = 3
            try await withWebhookServer(webhook: configuration) { server async throws in
                let doomed = try #require(
                    try await server.webhooks.enqueue(
                        WebhookNotification(type: .init(rawValue: "media.doomed"), payload: .init(videoId: "v"))))
                let fine = try #require(
                    try await server.webhooks.enqueue(
                        WebhookNotification(type: .init(rawValue: "media.fine"), payload: .init(videoId: "v"))))
                #expect(try await eventually { await recorder.deliveries.contains { $0.id == fine } })
                let deliveries = await recorder.deliveries
                #expect(deliveries.map(\.id) == [doomed, doomed, doomed, fine])
                // Every attempt sends the same body, each validly signed.
                #expect(Set(deliveries.prefix(3).map(\.body)).count == 1)
                for delivery in deliveries {
                    #expect(WebhookSignature.verify(header: delivery.signature ?? "", body: delivery.body, secret: Self.secret))
                }
                #expect(try await eventually { try await server.webhooks.pending().map(\.id) == [doomed] })
                let failed = try #require(try await server.webhooks.pending().first)
                #expect(failed.attempts == 3)
                #expect(failed.failedAt != nil)
                #expect(failed.deliveredAt == nil)
            }
        }
    }

    @Test("an event the receiver keeps refusing holds back its own video's later events only: another video's arrive meanwhile, in order")
    func refusedEventHoldsBackItsVideoOnly() async throws {
        // The receiver refuses that one event (400), and answers every other.
        let recorder = WebhookRecorder(rejectedTypes: ["media.doomed"], rejection: .badRequest)
        try await WebhookReceiver.with(recorder: recorder) { receiver async throws in
            // The refused event is not given up while the test looks (50 attempts take about 25 s, which a loaded
            // machine can spend before the other video's events are seen): given up, it would let its video's next
            // event go.
            var configuration = Self.configuration(receiver.url)
            configuration.maxAttempts = 100_000
            try await withWebhookServer(webhook: configuration) { server async throws in
                func enqueue(_ type: String, _ videoId: String) async throws -> String {
                    try #require(
                        try await server.webhooks.enqueue(
                            WebhookNotification(type: .init(rawValue: type), payload: .init(videoId: videoId))))
                }
                let doomed = try await enqueue("media.doomed", "a")
                let later = try await enqueue("media.fine", "a")
                let others = [try await enqueue("media.fine", "b"), try await enqueue("media.fine", "b")]
                #expect(try await eventually { await recorder.deliveries.filter { $0.id != doomed }.count >= 2 })
                let deliveries = await recorder.deliveries
                #expect(deliveries.filter { $0.id != doomed }.map(\.id) == others)
                #expect(deliveries.contains { $0.id == doomed })
                // Video a's next event still waits behind the refused one. The receiver sees a delivery before the
                // server records it delivered, so video b's last may still be pending for a moment.
                #expect(try await eventually { try await server.webhooks.pending().map(\.id) == [doomed, later] })
                #expect(await !recorder.deliveries.contains { $0.id == later })
            }
        }
    }

    @Test("an answer whose body trickles past the attempt's limit is a failed attempt, not a wait for the receiver")
    func tricklingAnswerTimesOut() async throws {
        // 30 bytes at one per 200 ms: each answer takes 6 s to end.
        try await HTTPReceiver.with(answer: #"{"ok":true,"pad":"0123456789"}"#, trickle: .milliseconds(200)) { receiver in
            var configuration = Self.configuration(try #require(URL(string: receiver.url("/hook"))))
            configuration.maxAttempts = 2
            // Long enough for the receiver to have read each request on a loaded machine, far short of 6 s.
            configuration.attemptTimeout = .seconds(2)
            try await withWebhookServer(webhook: configuration) { server async throws in
                let id = try #require(try await server.webhooks.enqueue(Self.test(WebhookPayload(videoId: "slow"))))
                #expect(try await eventually { try await server.webhooks.pending().first?.failedAt != nil })
                // Both attempts ended (given up) while the receiver had finished none of its answers.
                #expect(await receiver.recorder.answered == 0)
                #expect(try await eventually { await receiver.recorder.requests.count == 2 })
                #expect(try await server.webhooks.pending().map(\.id) == [id])
            }
        }
    }

    @Test("without a webhook configured, enqueue is a no-op")
    func disabled() async throws {
        let directory = TemporaryDirectory.make("ferry-webhooks")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = FerryServerConfiguration(dataDirectory: directory)
        configuration.rootCredentials = SigV4Credentials(accessKeyId: "FKIATESTROOT0000", secretAccessKey: "test-root-secret")
        let server = try FerryServer(configuration: configuration, environment: [:])
        #expect(try await server.webhooks.enqueue(Self.test(WebhookPayload(videoId: "b"))) == nil)
        #expect(try await server.webhooks.pending().isEmpty)
    }

    // MARK: Helpers

    /// An event of a type no receiver knows (`media.test`), for tests of delivery itself.
    static func test(_ payload: WebhookPayload) -> WebhookNotification {
        WebhookNotification(type: WebhookEventType(rawValue: "media.test"), payload: payload)
    }

    /// Short backoffs so retries happen within a test.
    static func configuration(_ url: URL) -> WebhookConfiguration {
        var configuration = WebhookConfiguration(url: url, secret: secret)
        configuration.initialBackoff = .milliseconds(50)
        configuration.maxBackoff = .milliseconds(500)
        configuration.pollInterval = .milliseconds(20)
        return configuration
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
private func eventually(
    timeout: Duration = .seconds(60), _ condition: @Sendable () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Runs a FerryServer (with its delivery service) on port 0 over `directory` (a fresh one when nil), then shuts it
/// down gracefully.
private func withWebhookServer<T: Sendable>(
    directory: String? = nil, webhook: WebhookConfiguration?,
    beforeStart: @Sendable (FerryServer) async throws -> Void = { _ in },
    _ body: @Sendable (FerryServer) async throws -> T
) async throws -> T {
    let dataDirectory = directory ?? TemporaryDirectory.make("ferry-webhooks")
    defer { if directory == nil { try? FileManager.default.removeItem(atPath: dataDirectory) } }
    var configuration = FerryServerConfiguration(dataDirectory: dataDirectory)
    configuration.port = 0
    configuration.rootCredentials = SigV4Credentials(accessKeyId: "FKIATESTROOT0000", secretAccessKey: "test-root-secret")
    var logger = Logger(label: "ferry.test")
    logger.logLevel = .error
    configuration.logger = logger
    configuration.webhook = webhook
    let server = try await openReleased(configuration)
    try await beforeStart(server)
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    let app = server.makeApplication { port in continuation.yield(port) }
    return try await runServices(ServiceGroup(configuration: .init(services: [app], logger: logger)), ports: ports) { _ in
        try await body(server)
    }
}

/// Opens a FerryServer over `configuration`'s directory. A server this process ran there before lets go of the
/// directory when its last reference goes, which can be a moment after its services returned: that wait is allowed
/// (up to 60 s); a directory held by another process is not.
private func openReleased(_ configuration: FerryServerConfiguration) async throws -> FerryServer {
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
        do {
            return try FerryServer(configuration: configuration, environment: [:])
        } catch let busy as DataDirectoryInUse where busy.pid == getpid() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// What a receiver got.
actor WebhookRecorder {
    struct Delivery: Sendable {
        var id: String?
        var type: String?
        var signature: String?
        var contentType: String?
        var authorization: String?
        var body: [UInt8]
    }

    private(set) var deliveries: [Delivery] = []
    /// Event types answered with `rejection`.
    let rejectedTypes: Set<String>
    /// The status a rejected event is answered with: 500 (the receiver failing) unless told otherwise.
    let rejection: HTTPResponse.Status

    init(rejectedTypes: Set<String> = [], rejection: HTTPResponse.Status = .internalServerError) {
        self.rejectedTypes = rejectedTypes
        self.rejection = rejection
    }

    /// Records a delivery; returns whether to acknowledge it.
    func record(signature: String?, contentType: String?, authorization: String? = nil, body: [UInt8]) -> Bool {
        let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        let delivery = Delivery(
            id: json?["id"] as? String, type: json?["type"] as? String, signature: signature, contentType: contentType,
            authorization: authorization, body: body)
        deliveries.append(delivery)
        return !rejectedTypes.contains(delivery.type ?? "")
    }
}

/// A tiny Hummingbird application on 127.0.0.1 recording POSTs to /hooks.
struct WebhookReceiver: Sendable {
    let port: Int
    let recorder: WebhookRecorder
    var url: URL { URL(string: "http://127.0.0.1:\(port)/hooks")! }

    /// Runs a receiver on `port` (0: a free one) while `body` runs.
    static func with<T: Sendable>(
        port: Int = 0, recorder: WebhookRecorder = WebhookRecorder(),
        _ body: @Sendable (WebhookReceiver) async throws -> T
    ) async throws -> T {
        let router = Router()
        let signatureField = HTTPField.Name(WebhookSignature.headerName)!
        router.post("/hooks") { request, _ -> HTTPResponse.Status in
            let bytes = [UInt8](buffer: try await request.body.collect(upTo: 1 << 20))
            let acknowledged = await recorder.record(
                signature: request.headers[signatureField], contentType: request.headers[.contentType],
                authorization: request.headers[.authorization], body: bytes)
            return acknowledged ? .noContent : recorder.rejection
        }
        var logger = Logger(label: "ferry.test.webhook-receiver")
        logger.logLevel = .error
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        return try await runServices(ServiceGroup(configuration: .init(services: [app], logger: logger)), ports: ports) {
            try await body(WebhookReceiver(port: $0, recorder: recorder))
        }
    }

    /// A port nothing listens on, outside the range servers on port 0 are given (``LoopbackPort/unused()``).
    static func freePort() async throws -> Int {
        try LoopbackPort.unused()
    }
}
