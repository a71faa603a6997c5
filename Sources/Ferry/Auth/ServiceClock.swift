import FerryCore
import FerryTransport
import Foundation

/// The services' time as this device knows it: its own clock, corrected per service by the difference that service's
/// `Date` showed when it refused a request for its time, or when it was asked its time.
///
/// Phones' clocks are often off by minutes, hours or days. A request signed with such a clock is refused
/// (`RequestTimeTooSkewed`), and a credential whose expiry is the service's time looks expired, or valid, by it. So
/// the SDK signs each request by its service's time (``now(for:)``) and judges expiry by the time of the service last
/// heard from (``now()``). Only two answers teach it: a refusal of a request for its time (its retry is then signed
/// right), and the answer to ``calibrate(against:transport:)``. Any other answer's `Date` is left alone: it may be
/// old (an answer kept for a background session, a body that took minutes to arrive), so a device whose clock is
/// right is never moved by one.
public enum ServiceClock {
    /// Differences up to this are taken as none: a `Date` header has whole seconds and arrives after a network's delay.
    public static let tolerance: TimeInterval = 60
    /// How often one service is asked its time at most.
    static let calibrationInterval: TimeInterval = 60

    private static let state = Offsets()

    /// The time of the service last heard from (a refusal for a request's time, or a calibration): what a credential's
    /// expiry is judged by.
    public static func now() -> Date { Date().addingTimeInterval(state.latest) }

    /// The time of the service at `authority` (`host[:port]`), as it last told it; the device's own before it has.
    public static func now(for authority: String) -> Date {
        Date().addingTimeInterval(state.offset(of: authority) ?? 0)
    }

    /// Seconds the service at `authority` is ahead of this device (negative: behind), once it told its time.
    public static func offset(of authority: String) -> TimeInterval? { state.offset(of: authority) }

    /// Learns the service's time from an answer that refused a request for its time (its body names
    /// `RequestTimeTooSkewed`, or says S3's message for it, as a plain-text refusal of the resumable protocols does):
    /// its `Date` (an HTTP date), received at `receivedAt` by this device's clock. Anything else is ignored.
    public static func observe(
        status: Int, body: [UInt8], dateHeader: String?, from authority: String, receivedAt: Date = Date()
    ) {
        guard status == 403 || status == 400, body.count < 64 << 10,
            contains(body, "RequestTimeTooSkewed") || contains(body, "the request time and the current time")
        else { return }
        learn(dateHeader: dateHeader, from: authority, receivedAt: receivedAt)
    }

    private static func contains(_ body: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard body.count >= needle.count else { return false }
        return (0...(body.count - needle.count)).contains { body[$0..<$0 + needle.count].elementsEqual(needle) }
    }

    /// Asks `endpoint` its time: one unsigned `GET /` whose answer (a refusal will do) carries `Date`. For a credential
    /// that looks expired when the app has just given it: on a device whose clock is wrong, a fresh one does, and the
    /// service, not the device, says whether it has expired. A service asked within the last minute is not asked again.
    public static func calibrate(against endpoint: URL, transport: any HTTPTransport) async {
        guard let scheme = endpoint.scheme, let authority = HTTPTarget.authority(of: endpoint),
            state.beginCalibration(of: authority, now: Date(), interval: calibrationInterval)
        else { return }
        let request = TransportRequest(
            method: "GET", url: scheme + "://" + authority + "/", headers: [], timeout: .seconds(10))
        let sentAt = Date()
        guard let response = try? await transport.send(request, bodyProgress: { _ in }, responseSink: nil) else {
            return
        }
        // An answer that took long says little of when it was made.
        guard Date().timeIntervalSince(sentAt) < 10 else { return }
        learn(dateHeader: response.header("Date"), from: authority, receivedAt: Date())
    }

    private static func learn(dateHeader: String?, from authority: String, receivedAt: Date) {
        guard let dateHeader, let served = httpDate(dateHeader) else { return }
        let difference = served.timeIntervalSince(receivedAt)
        state.set(abs(difference) <= tolerance ? 0 : difference, for: authority)
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

    /// What the services told, under one lock.
    private final class Offsets: @unchecked Sendable {
        // `lock` guards the three below.
        private let lock = NSLock()
        private var offsets: [String: TimeInterval] = [:]
        private var last: TimeInterval = 0
        private var asked: [String: Date] = [:]

        var latest: TimeInterval { lock.withLock { last } }

        func offset(of authority: String) -> TimeInterval? { lock.withLock { offsets[authority.lowercased()] } }

        func set(_ offset: TimeInterval, for authority: String) {
            lock.withLock {
                // Bounded: a process talks to a few services.
                if offsets.count >= 64 { offsets.removeAll() }
                offsets[authority.lowercased()] = offset
                last = offset
            }
        }

        /// Whether `authority` may be asked its time now (not within `interval` of the last time); records it.
        func beginCalibration(of authority: String, now: Date, interval: TimeInterval) -> Bool {
            lock.withLock {
                if let previous = asked[authority.lowercased()], now.timeIntervalSince(previous) < interval {
                    return false
                }
                if asked.count >= 64 { asked.removeAll() }
                asked[authority.lowercased()] = now
                return true
            }
        }
    }
}
