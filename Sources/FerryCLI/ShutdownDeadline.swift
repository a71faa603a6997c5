import Dispatch
import FerryServer
import Foundation

/// Ends `ferry serve` when its graceful shutdown overruns: once SIGTERM or SIGINT has arrived and `limit` has passed,
/// it writes one line to standard error, naming the services still running, and exits with status 1. ``signalled``
/// tells when a signal came.
///
/// It runs on a dispatch queue of its own, outside Swift's cooperative thread pool, so the bound holds whatever state
/// the services are in (a task that ignores cancellation, or every cooperative thread blocked); the service group's own
/// cancellation bound is a `fatalError` whose crash report can itself take longer than a supervisor waits. Nothing
/// acknowledged depends on a graceful end: every acknowledged byte and catalog row is already durable.
final class ShutdownDeadline: @unchecked Sendable {
    // Only touched on `queue` (and in init, before any source is resumed).
    private let queue = DispatchQueue(label: "ferry.shutdown-deadline")
    private var sources: [DispatchSourceSignal] = []
    private var armed: ContinuousClock.Instant?

    /// When the first SIGTERM or SIGINT arrived; nil before.
    var signalled: ContinuousClock.Instant? { queue.sync { armed } }

    /// Starts watching for the signals; `limit` counts from the first of them, which also calls `first` with its
    /// number.
    init(
        limit: Duration, running: RunningServices, signals: [Int32] = [SIGTERM, SIGINT],
        first: @escaping @Sendable (Int32) -> Void = { _ in }
    ) {
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        for number in signals {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            // Held strongly: the deadline lives as long as the process (a signal after `ferry serve` returned from
            // its services finds it still there).
            source.setEventHandler { [self] in
                guard armed == nil else { return }
                armed = .now
                first(number)
                queue.asyncAfter(deadline: .now() + seconds) {
                    let line =
                        "ferry serve: shutdown did not finish within \(String(format: "%g", seconds)) s of the signal "
                        + "(still running: " + running.names.joined(separator: ", ") + "); exiting.\n"
                    write(line, to: .standardError)
                    _exit(1)
                }
            }
            sources.append(source)
        }
        // The service group sets the same dispositions; the signal is delivered to every source watching it.
        for number in signals { signal(number, SIG_IGN) }
        for source in sources { source.resume() }
    }
}
