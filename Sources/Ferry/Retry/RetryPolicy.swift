import FerryCore
import FerryTransport
import Foundation

/// When and how often a failed request is tried again; one policy serves every request of a client.
///
/// Delays grow exponentially from ``baseDelay`` up to ``maxDelay`` with full jitter (a random delay between zero and
/// the exponential bound), so many devices retrying at once do not retry in step.
public struct RetryPolicy: Sendable, Hashable {
    /// Retries after the first attempt. Default 8. The VOD SDKs' "retry forever" is `Int.max`.
    public var maxRetryCount: Int = 8
    /// Bound of the first retry's delay. Default 0.2 s.
    public var baseDelay: Duration = .milliseconds(200)
    /// Largest delay. Default 10 s.
    public var maxDelay: Duration = .seconds(10)
    /// Server codes that are retried besides 5xx, 429 and 408 statuses and network failures.
    public var retryableServerCodes: Set<String> = [
        "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed", "Throttling",
        "TooManyRequests",
    ]

    /// The defaults.
    public init() {}

    /// Creates a policy.
    public init(maxRetryCount: Int, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(10)) {
        self.maxRetryCount = maxRetryCount
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// Never retry.
    public static let none = RetryPolicy(maxRetryCount: 0)

    /// The delay before retry number `attempt` (1-based), with full jitter.
    public func delay(forAttempt attempt: Int) -> Duration {
        let exponent = min(attempt - 1, 30)
        let bound = min(Double(1 << exponent) * baseDelay.timeInterval, maxDelay.timeInterval)
        return .milliseconds(Int64(Double.random(in: 0...bound) * 1000))
    }

    /// Whether an error is worth another attempt.
    public func isRetryable(_ error: FerryError) -> Bool {
        switch error.code {
        case .network, .timeout: return true
        case .server:
            if let code = error.serverCode, retryableServerCodes.contains(code) { return true }
            // 429 and 408 come from the service or a gateway, CDN or carrier proxy before it, often with an empty
            // body: "later", not "never".
            let status = error.httpStatus ?? 0
            return status >= 500 || status == 429 || status == 408
        default: return false
        }
    }

    /// The longest `Retry-After` honoured; a server asking for more is retried after this.
    public static let maxRetryAfter: Duration = .seconds(300)

    /// The wait before retry number `attempt` after `error`: the backoff of ``delay(forAttempt:)``, or the server's
    /// `Retry-After` when it asked for longer (at most ``maxRetryAfter``).
    public func wait(forAttempt attempt: Int, after error: FerryError) -> Duration {
        let backoff = delay(forAttempt: attempt)
        guard let requested = error.retryAfter else { return backoff }
        return max(backoff, min(requested, Self.maxRetryAfter))
    }

    /// Runs `attempt` until it succeeds or fails for good. A ``FerryError`` that ``isRetryable(_:)`` accepts is tried
    /// again after ``wait(forAttempt:after:)``, at most ``maxRetryCount`` times; anything else is thrown at once. The
    /// retry loop of S3 requests, the media API and the publish API (a form upload is sent again only when it cannot
    /// have been stored: ``FormUploader/Configuration/retryPolicy``).
    ///
    /// Every attempt of one call carries the same client request id (``RequestAttempt/headers``), and a
    /// ``FerryError`` thrown at the end carries it as ``FerryError/clientRequestId``, so one failed call can be found in
    /// the server's log whichever attempt the server saw.
    ///
    /// - Parameters:
    ///   - clock: what the waits sleep on (tests pass a clock that does not wait).
    ///   - retrying: told about each retry, before its wait.
    ///   - attempt: one attempt, told which it is.
    public func run<T>(
        clock: any Clock<Duration>,
        retrying: (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void = { _, _, _ in },
        _ attempt: (RequestAttempt) async throws -> T
    ) async throws -> T {
        let clientRequestId = RequestAttempt.newClientRequestId()
        var retries = 0
        while true {
            try Task.checkCancellation()
            do {
                return try await attempt(
                    RequestAttempt(
                        clientRequestId: clientRequestId, number: retries + 1,
                        maximum: maxRetryCount == .max ? nil : maxRetryCount + 1))
            } catch var error as FerryError {
                guard isRetryable(error), retries < maxRetryCount else {
                    error.clientRequestId = clientRequestId
                    throw error
                }
                retries += 1
                let delay = wait(forAttempt: retries, after: error)
                retrying(retries, error, delay)
                try await clock.sleep(for: delay)
            }
        }
    }

    /// Runs `attempt` with the retry policy, as the `run` whose attempts are told which they are does, for attempts that
    /// need not know.
    public func run<T>(
        clock: any Clock<Duration>,
        retrying: (_ attempt: Int, _ error: FerryError, _ delay: Duration) -> Void = { _, _, _ in },
        _ attempt: () async throws -> T
    ) async throws -> T {
        try await run(clock: clock, retrying: retrying) { (_: RequestAttempt) in try await attempt() }
    }

    /// The wait a `Retry-After` header asks for: seconds, or an HTTP date; nil when absent or unreadable.
    ///
    /// An HTTP date is measured from the answer's own `Date` (`answeredAt`, the server's clock) when it has one, so
    /// a device whose clock is wrong waits what the server asked; from `now` otherwise.
    public static func retryAfter(_ value: String?, answeredAt: String? = nil, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int64(value) { return seconds >= 0 ? .seconds(seconds) : nil }
        guard let date = S3Date.parseHTTP(value) else { return nil }
        let now = answeredAt.flatMap(S3Date.parseHTTP) ?? now
        return .milliseconds(Int64(max(0, date.timeIntervalSince(now)) * 1000))
    }

    /// The wait an answer's `Retry-After` asks for, an HTTP date measured from the answer's `Date`.
    static func retryAfter(of response: TransportResponse) -> Duration? {
        retryAfter(response.header("Retry-After"), answeredAt: response.header("Date"))
    }
}

/// One attempt of a call that the retry policy runs: which attempt it is, and the id the client gave the call.
public struct RequestAttempt: Sendable, Hashable {
    /// The call's id, the same on every attempt: a UUID, sent as `amz-sdk-invocation-id`.
    public var clientRequestId: String
    /// 1 for the first attempt, 2 for the first retry, …
    public var number: Int
    /// The most attempts the policy allows; nil when it retries without end.
    public var maximum: Int?

    /// Creates an attempt.
    public init(clientRequestId: String, number: Int, maximum: Int?) {
        self.clientRequestId = clientRequestId
        self.number = number
        self.maximum = maximum
    }

    /// The headers that tell the server about the attempt, as AWS SDKs send them: `amz-sdk-invocation-id` (the
    /// call's id) and `amz-sdk-request` (`attempt=2; max=9`), and `traceparent` when a trace is current
    /// (``UploadTrace/current``). Ferry's server logs the id with its own request id.
    public var headers: [(name: String, value: String)] {
        var request = "attempt=\(number)"
        if let maximum { request += "; max=\(maximum)" }
        var headers = [(Self.invocationIdHeader, clientRequestId), ("amz-sdk-request", request)]
        if let trace = UploadTrace.current { headers.append(("traceparent", trace.traceparent())) }
        return headers
    }

    /// The header that carries ``clientRequestId``.
    public static let invocationIdHeader = "amz-sdk-invocation-id"

    /// A new call id.
    static func newClientRequestId() -> String { UUID().uuidString.lowercased() }
}
