/// A token bucket: it holds up to ``capacity`` tokens, refills at ``rate`` tokens a second, and a request takes one.
///
/// A pure value: the caller keeps it and passes the time, so every transition is testable without a clock.
struct TokenBucket: Sendable, Hashable {
    /// Tokens added per second.
    var rate: Double
    /// Most tokens held: the burst a quiet key may send at once.
    var capacity: Double
    /// Tokens held at ``updated``.
    var tokens: Double
    /// When ``tokens`` was last brought up to date, in seconds on the caller's monotonic clock.
    var updated: Double

    /// A full bucket for `rate` requests a second, holding one second's worth (at least one request).
    init(rate: Double, now: Double) {
        self.rate = rate
        capacity = max(1, rate)
        tokens = capacity
        updated = now
    }

    /// Takes a token at `now`: nil when there was one, else the seconds until there will be.
    mutating func take(now: Double) -> Double? {
        if now > updated {
            tokens = min(capacity, tokens + (now - updated) * rate)
            updated = now
        }
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return (1 - tokens) / rate
    }

    /// Follows a changed rate (an UpdateAccessKey), keeping the tokens held up to the new capacity.
    mutating func adopt(rate newRate: Double) {
        guard newRate != rate else { return }
        rate = newRate
        capacity = max(1, newRate)
        tokens = min(tokens, capacity)
    }
}
