import FerryCore

/// The rate at which a count (bytes sent) grows over about the last ``window``, from readings taken as it grows: a
/// link that stalled or sped up shows in the rate within a window, where an average since the start would hide it
/// for as long as the upload had run.
///
/// The rate is measured from the newest reading at least a window old (the first reading, while there is none), so
/// it spans between one and two windows once the count has run that long. Readings closer together than a twentieth
/// of the window are not kept, so a rate costs a bounded handful of readings however often it is asked for.
package struct RecentRate: Sendable {
    /// How far back the rate looks.
    package let window: Duration
    private var readings: [(time: ContinuousClock.Instant, count: Int64)]

    /// Starts with `count` at `start`.
    package init(start: ContinuousClock.Instant, count: Int64, window: Duration = .seconds(10)) {
        self.window = window
        readings = [(start, count)]
    }

    /// Takes the reading `count` at `time` (not before the last); returns the count's rate per second.
    package mutating func rate(at time: ContinuousClock.Instant, count: Int64) -> Double {
        if let last = readings.last, time - last.time >= window / 20 { readings.append((time, count)) }
        while readings.count > 1, time - readings[1].time >= window { readings.removeFirst() }
        let from = readings[0]
        let seconds = (time - from.time).timeInterval
        return seconds > 0 ? Double(count - from.count) / seconds : 0
    }
}
