import Foundation

/// A time of day a test moves by hand: give ``now`` to a client or server configuration, then ``advance(by:)`` it
/// instead of waiting.
public final class ManualTime: @unchecked Sendable {
    // Every access to `date` holds `lock`.
    private let lock = NSLock()
    private var date: Date

    /// Starts at `date`.
    public init(_ date: Date = Date()) { self.date = date }

    /// Moves the time forward (or back, for a negative `seconds`).
    public func advance(by seconds: TimeInterval) { lock.withLock { date = date.addingTimeInterval(seconds) } }

    /// The time as a clock closure.
    public var now: @Sendable () -> Date { { self.lock.withLock { self.date } } }
}
