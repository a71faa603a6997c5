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
    /// Server codes that are retried besides 5xx statuses and network failures.
    public var retryableServerCodes: Set<String> = [
        "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed",
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
        let bound = min(Double(1 << exponent) * seconds(baseDelay), seconds(maxDelay))
        return .milliseconds(Int64(Double.random(in: 0...bound) * 1000))
    }

    /// Whether an error is worth another attempt.
    public func isRetryable(_ error: FerryError) -> Bool {
        switch error.code {
        case .network, .timeout: return true
        case .server:
            if let code = error.serverCode, retryableServerCodes.contains(code) { return true }
            return (error.httpStatus ?? 0) >= 500
        default: return false
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
