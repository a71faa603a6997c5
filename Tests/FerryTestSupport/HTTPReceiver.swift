import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// A small HTTP server on 127.0.0.1 that records every request and answers each with a fixed status and body; for
/// callbacks and streamed-body checks.
public struct HTTPReceiver: Sendable {
    /// A request as received.
    public struct Received: Sendable {
        /// Method.
        public var method: String
        /// Path as received (percent-encoded).
        public var path: String
        /// Query without `?`, if any.
        public var query: String?
        /// Headers, names lowercased.
        public var headers: [String: String]
        /// The body.
        public var body: [UInt8]
    }

    /// Records requests.
    public actor Recorder {
        /// The requests, in arrival order.
        public private(set) var requests: [Received] = []
        /// How many answers the receiver has sent whole (after its delay, if any, and its trickled body's last byte).
        public private(set) var answered = 0
        func record(_ request: Received) { requests.append(request) }
        func recordAnswer() { answered += 1 }
        /// Creates an empty recorder.
        public init() {}
    }

    /// The bound port.
    public let port: Int
    /// What arrived.
    public let recorder: Recorder

    /// `http://127.0.0.1:PORT` + `path`.
    public func url(_ path: String = "/callback") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Runs a receiver that answers `status` with `answer` (as `contentType`), `delay` after reading each request,
    /// while `body` runs. With a `trickle`, the answer's head goes at once and its body a byte every `trickle`.
    public static func with<T: Sendable>(
        status: Int = 200, answer: String = "", contentType: String = "application/json", maxBody: Int = 64 << 20,
        delay: Duration = .zero, trickle: Duration = .zero,
        _ body: @Sendable (HTTPReceiver) async throws -> T
    ) async throws -> T {
        let recorder = Recorder()
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            var request = request
            let bytes = [UInt8](buffer: try await request.collectBody(upTo: maxBody))
            var headers: [String: String] = [:]
            // A field sent twice reads as HTTP combines it: the values joined with ", ".
            for field in request.headers {
                let name = field.name.canonicalName
                headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
            }
            await recorder.record(
                Received(
                    method: request.method.rawValue, path: request.uri.path, query: request.uri.query,
                    headers: headers, body: bytes))
            // A slow app server: the answer comes late (or never, when the client gives up first).
            if delay > .zero { try? await Task.sleep(for: delay) }
            guard trickle > .zero else {
                await recorder.recordAnswer()
                return Response(
                    status: .init(code: status), headers: [.contentType: contentType],
                    body: .init(byteBuffer: ByteBuffer(string: answer)))
            }
            return Response(
                status: .init(code: status), headers: [.contentType: contentType],
                body: ResponseBody(contentLength: answer.utf8.count) { writer in
                    for byte in answer.utf8 {
                        try await Task.sleep(for: trickle)
                        try await writer.write(ByteBuffer(bytes: [byte]))
                    }
                    await recorder.recordAnswer()
                    try await writer.finish(nil)
                })
        }
        return try await run(responder, recorder: recorder, body)
    }

    /// An answer ``answering(_:_:)`` gives.
    public struct Answer: Sendable {
        /// The status.
        public var status: Int
        /// Header fields.
        public var headers: [(name: String, value: String)]
        /// The body.
        public var body: String
        /// How long the receiver holds the answer after reading the request.
        public var delay: Duration

        /// An answer.
        public init(_ status: Int, _ headers: [(name: String, value: String)] = [], body: String = "", delay: Duration = .zero) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
        }
    }

    /// Runs a receiver that answers each request as `answer` says (a service misbehaving in a test's own way), while
    /// `body` runs.
    public static func answering<T: Sendable>(
        _ answer: @escaping @Sendable (Received) -> Answer, _ body: @Sendable (HTTPReceiver) async throws -> T
    ) async throws -> T {
        let recorder = Recorder()
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            var request = request
            let bytes = [UInt8](buffer: try await request.collectBody(upTo: 64 << 20))
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let received = Received(
                method: request.method.rawValue, path: request.uri.path, query: request.uri.query, headers: headers,
                body: bytes)
            await recorder.record(received)
            let reply = answer(received)
            if reply.delay > .zero { try? await Task.sleep(for: reply.delay) }
            var fields = HTTPFields()
            for (name, value) in reply.headers {
                if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
            }
            await recorder.recordAnswer()
            return Response(status: .init(code: reply.status), headers: fields, body: .init(byteBuffer: ByteBuffer(string: reply.body)))
        }
        return try await run(responder, recorder: recorder, body)
    }

    private static func run<T: Sendable>(
        _ responder: CallbackResponder<BasicRequestContext>, recorder: Recorder,
        _ body: @Sendable (HTTPReceiver) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "ferry.test.http-receiver")
        logger.logLevel = .error
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            responder: responder, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        return try await runServices(ServiceGroup(configuration: .init(services: [app], logger: logger)), ports: ports) {
            try await body(HTTPReceiver(port: $0, recorder: recorder))
        }
    }

    /// A loopback port nothing listens on (one a receiver bound and released).
    public static func closedPort() async throws -> Int {
        try await with { $0.port }
    }
}
