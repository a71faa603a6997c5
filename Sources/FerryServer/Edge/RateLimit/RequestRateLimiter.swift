import FerryCore
import Foundation
import NIOConcurrencyHelpers

/// The request-rate quota of access keys on this node: one ``TokenBucket`` per long-term key (a temporary credential
/// draws on its parent's), refilled at the key's `RequestsPerSecond`.
///
/// Each node counts on its own: N nodes behind a load balancer let a key send up to N times its rate in all.
final class RequestRateLimiter: Sendable {
    private let buckets = NIOLockedValueBox<[String: TokenBucket]>([:])
    /// Seconds on a monotonic clock.
    private let now: @Sendable () -> Double
    /// The longest `Retry-After` given, in seconds (a day).
    static let longestWait = 86_400.0

    /// Creates a limiter reading time from `now` (seconds on a monotonic clock; the system's uptime by default).
    init(now: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.now = now
    }

    /// Takes a request of `key` at `rate` requests a second: nil when allowed, else the whole seconds (at least one)
    /// after which to try again.
    func take(key: String, rate: Double) -> Int? {
        let time = now()
        let wait = buckets.withLockedValue { buckets -> Double? in
            var bucket = buckets[key] ?? TokenBucket(rate: rate, now: time)
            bucket.adopt(rate: rate)
            let wait = bucket.take(now: time)
            buckets[key] = bucket
            return wait
        }
        // Bounded before it becomes an Int: a rate stored before rates had a floor can ask for a wait past Int.max.
        return wait.map { max(1, Int(min($0, Self.longestWait).rounded(.up))) }
    }
}
