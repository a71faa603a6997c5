import FerryCore
import Foundation
import Testing

@Suite("S3 dates: HTTP headers and XML")
struct S3DateTests {
    /// What Foundation's formatter writes for an IMF-fixdate.
    static func reference(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    @Test("an HTTP date is the IMF-fixdate Foundation's formatter writes, for 10,000 seeded times from 1601 to 2400")
    func httpMatchesFormatter() {
        var random = SplitMix64(state: 0x5EED_DA7E)
        // 1601-01-01 to 2400-12-31: four Gregorian cycles, every leap rule (100 and 400 years) crossed.
        let range: ClosedRange<Double> = -11_644_473_600...13_569_465_599
        var dates = (0..<10_000).map { _ in Date(timeIntervalSince1970: Double.random(in: range, using: &random)) }
        dates += [0, -1, 86_399, 86_400, 951_782_400, 951_868_800, 4_107_542_399, 4_107_542_400, 1_798_761_599.999]
            .map { Date(timeIntervalSince1970: $0) }
        for date in dates {
            #expect(S3Date.http(date) == Self.reference(date), "\(date.timeIntervalSince1970)")
        }
        #expect(S3Date.http(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(S3Date.http(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
    }

    @Test("an HTTP date reads back as the same whole second")
    func httpRoundTrip() throws {
        let date = Date(timeIntervalSince1970: 1_798_761_599.75)
        let parsed = try #require(S3Date.parseHTTP(S3Date.http(date)))
        #expect(parsed.timeIntervalSince1970 == 1_798_761_599)
    }
}
