import FerryTransport
import Foundation

/// The services' time as this device knows it: its own clock, corrected by the difference the services' `Date`
/// headers showed when that difference is past ``tolerance``.
///
/// Phones' clocks are often off by minutes, hours or days. A request signed with such a clock is refused
/// (`RequestTimeTooSkewed`), and a credential whose expiry is the service's time looks expired, or valid, by it. So
/// the SDK signs its requests and judges expiry by ``now()``, and learns the difference from every answer's `Date`
/// (an answer refusing a request for its time included, so that its retry is signed right), as AWS's SDKs do.
public enum ServiceClock {
    /// Differences up to this are left alone: a `Date` header has whole seconds and arrives after a network's delay,
    /// and services accept requests within minutes of their time.
    public static let tolerance: TimeInterval = 60

    private static let state = Offset()

    /// Seconds the services' clock is ahead of this device's (negative: behind); 0 while within ``tolerance``.
    public static var offset: TimeInterval { state.value }

    /// Whether a service's answer has told its time yet.
    public static var hasObserved: Bool { state.observed }

    /// Asks `endpoint` for its time when no service has told it yet: one unsigned `GET /` whose answer (a refusal
    /// will do) carries `Date`. For a credential that looks expired before any request was made: on a device whose
    /// clock is wrong, a fresh one does, and the service, not the device, says whether it has expired.
    public static func calibrate(against endpoint: URL, transport: any HTTPTransport) async {
        guard !hasObserved, let scheme = endpoint.scheme, let authority = HTTPTarget.authority(of: endpoint) else {
            return
        }
        let request = TransportRequest(
            method: "GET", url: scheme + "://" + authority + "/", headers: [], timeout: .seconds(30))
        guard let response = try? await transport.send(request, bodyProgress: { _ in }, responseSink: nil) else {
            return
        }
        observe(dateHeader: response.header("Date"))
    }

    /// The services' time now, as well as this device knows it.
    public static func now() -> Date { Date().addingTimeInterval(state.value) }

    /// Learns from an answer's `Date` header (an HTTP date such as `Mon, 07 Dec 2026 00:44:58 GMT`), received at
    /// `receivedAt` by this device's clock. A header that is not such a date is ignored.
    public static func observe(dateHeader: String?, receivedAt: Date = Date()) {
        guard let dateHeader, let served = httpDate(dateHeader) else { return }
        let difference = served.timeIntervalSince(receivedAt)
        state.observed = true
        state.update { current in
            // A difference the tolerance covers keeps no correction; one that moved by more than it is taken.
            if abs(difference) <= tolerance { return 0 }
            return abs(difference - current) > tolerance ? difference : current
        }
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110), the form services send; nil for anything else.
    static func httpDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
                .firstIndex(of: String(parts[2])).map({ $0 + 1 }),
            (1...31).contains(day), (1970...9999).contains(year)
        else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3, (0...23).contains(time[0]), (0...59).contains(time[1]), (0...60).contains(time[2])
        else { return nil }
        // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]))
    }

    private final class Offset: @unchecked Sendable {
        // `lock` guards `current`.
        private let lock = NSLock()
        private var current: TimeInterval = 0
        private var seen = false
        var value: TimeInterval { lock.withLock { current } }
        var observed: Bool {
            get { lock.withLock { seen } }
            set { lock.withLock { seen = newValue } }
        }
        func update(_ change: (TimeInterval) -> TimeInterval) { lock.withLock { current = change(current) } }
    }
}
