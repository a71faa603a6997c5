import Foundation
import NIOConcurrencyHelpers

/// SQLite's busy handler for the catalog's connections, which also tells how long a wait for a lock has lasted.
///
/// The pool's one writing connection waits here when another connection holds the write lock: in WAL mode with one
/// writer no connection of the catalog's own process does (readers take no lock writers wait for, and the writer's
/// automatic checkpoints never wait), so a wait is another process's write (an operator's `sqlite3` shell holding a
/// transaction). Each wait sleeps
/// between tries as SQLite's own timeout does (1 ms rising to 100 ms) and gives up after ``limit``: the statement
/// then fails busy, which requests answer as an outage clients retry. Reads of the catalog keep answering meanwhile,
/// so the health check asks ``currentWait`` whether writes are stuck.
final class SQLiteLockWatch: Sendable {
    /// Longest wait before a statement fails busy.
    let limit: Duration
    /// The wait under way: when it began (counted from its own tries: the one writer waits once at a time) and when it
    /// last tried again.
    private let wait = NIOLockedValueBox<(since: ContinuousClock.Instant, tried: ContinuousClock.Instant)?>(nil)

    init(limit: Duration) {
        self.limit = limit
    }

    /// The sleep before each try, in milliseconds (SQLite's own schedule): 100 ms from the twelfth try on.
    private static let delays = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50]

    /// How long the `tries` tries so far have slept.
    static func waited(_ tries: Int) -> Duration {
        let early = delays.prefix(max(0, tries)).reduce(0, +)
        return .milliseconds(early + max(0, tries - delays.count) * 100)
    }

    /// The busy handler: sleeps before the next try and says whether to make it (false once the wait passed
    /// ``limit``).
    func retry(_ tries: Int) -> Bool {
        let waited = Self.waited(tries)
        guard waited < limit else { return false }
        let now = ContinuousClock.now
        wait.withLockedValue { $0 = (now - waited, now) }
        let delay = tries < Self.delays.count ? Self.delays[tries] : 100
        usleep(UInt32(delay * 1000))
        return true
    }

    /// How long the wait under way has lasted; nil when no connection waits (none tried again in the last half
    /// second).
    var currentWait: Duration? {
        let now = ContinuousClock.now
        return wait.withLockedValue { wait in
            guard let wait, now - wait.tried < .milliseconds(500) else { return nil }
            return now - wait.since
        }
    }
}
