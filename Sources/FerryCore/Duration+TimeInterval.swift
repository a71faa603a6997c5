import Foundation

extension Duration {
    /// The duration in seconds, as a `TimeInterval`: the one conversion every module uses where Foundation or a
    /// display wants seconds (NIO's `TimeAmount(_:)` takes a `Duration` directly).
    public var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
