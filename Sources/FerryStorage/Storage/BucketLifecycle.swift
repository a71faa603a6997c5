import FerryCore
import Foundation

/// A bucket's lifecycle rules as the store applies them: when an object expires, and when a multipart upload left
/// unfinished is aborted.
///
/// Days count as S3 counts them: the rule's days are added to the object's creation (or the upload's initiation) and
/// the result is rounded up to the next midnight UTC. A ``dayLength`` replaces that with plain multiples of a shorter
/// day, so that tests see rules apply in seconds.
package struct BucketLifecycle: Sendable {
    /// The rules in force (disabled ones are left out).
    package let rules: [S3LifecycleConfiguration.Rule]
    /// Seconds per lifecycle day without rounding, or nil for S3's days.
    package let dayLength: TimeInterval?

    /// The rules of a configuration.
    package init(_ configuration: S3LifecycleConfiguration, dayLength: TimeInterval? = nil) {
        rules = configuration.rules.filter(\.isEnabled)
        self.dayLength = dayLength
    }

    /// The rules of a stored document; nil when it does not decode (a document stored by PutBucketLifecycle always
    /// does).
    package init?(document: String, dayLength: TimeInterval? = nil) {
        guard let configuration = try? S3XML.decode(S3LifecycleConfiguration.self, from: Data(document.utf8)) else {
            return nil
        }
        self.init(configuration, dayLength: dayLength)
    }

    /// Whether any rule expires objects.
    package var expiresObjects: Bool { rules.contains { $0.expiration?.days != nil || $0.expiration?.date != nil } }
    /// Whether any rule aborts unfinished uploads.
    package var abortsUploads: Bool { rules.contains { $0.abortIncompleteMultipartUpload?.daysAfterInitiation != nil } }

    /// When the object expires and under which rule (the earliest, when several apply); nil when no rule expires it.
    package func expiration(of object: ObjectInfo) -> (date: Date, ruleId: String)? {
        rules.compactMap { rule -> (date: Date, ruleId: String)? in
            guard let expiration = rule.expiration, Self.matches(rule, key: object.key, tags: object.tags, size: object.size)
            else { return nil }
            let date: Date?
            if let days = expiration.days {
                date = after(days, from: object.lastModified)
            } else {
                date = expiration.date.flatMap(Self.parseDate)
            }
            return date.map { ($0, rule.id ?? "") }
        }.min { $0.date < $1.date }
    }

    /// When a rule aborts the upload (the earliest, when several apply); nil when none does.
    package func abortDate(of upload: MultipartUploadInfo) -> Date? {
        rules.compactMap { rule -> Date? in
            guard let days = rule.abortIncompleteMultipartUpload?.daysAfterInitiation,
                rule.prefixes.allSatisfy({ upload.key.hasBytePrefix($0) })
            else { return nil }
            return after(days, from: upload.initiated)
        }.min()
    }

    /// Whether the rule's filter takes an object with this key, these tags and this size.
    static func matches(_ rule: S3LifecycleConfiguration.Rule, key: String, tags: [ObjectTag], size: Int64) -> Bool {
        guard rule.prefixes.allSatisfy({ key.hasBytePrefix($0) }) else { return false }
        for tag in rule.tags where !tags.contains(where: { $0.key == tag.key && $0.value == tag.value }) {
            return false
        }
        if let floor = rule.objectSizeGreaterThan, size <= floor { return false }
        if let ceiling = rule.objectSizeLessThan, size >= ceiling { return false }
        return true
    }

    /// `days` lifecycle days after `start`.
    func after(_ days: Int, from start: Date) -> Date {
        if let dayLength { return start.addingTimeInterval(Double(days) * dayLength) }
        let day = 86_400.0
        let end = start.timeIntervalSince1970 + Double(days) * day
        let midnight = (end / day).rounded(.up) * day
        return Date(timeIntervalSince1970: midnight)
    }

    /// A rule's `Date`: ISO 8601 (with or without fractional seconds) with a four-digit year, or nil; also nil for a
    /// day or a time the calendar does not have (`2020-02-30`, which the formatter reads as 1 March; `T24:00:00Z`).
    package static func parseDate(_ text: String) -> Date? {
        // The formatter also reads signed and shorter years ("-001-01-01"), which S3 refuses.
        guard text.utf8.count >= 10, text.utf8.prefix(4).allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        let formatter = ISO8601DateFormatter()
        var date = formatter.date(from: text)
        if date == nil {
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            date = formatter.date(from: text)
        }
        if date == nil {
            formatter.formatOptions = [.withFullDate]
            date = formatter.date(from: text)
        }
        // The formatter rolls over what it reads (30 February, hour 24, second 60); such a date is none.
        let day = text.prefix(10).split(separator: "-").compactMap { Int($0) }
        let time = text.dropFirst(11).prefix(8).split(separator: ":").compactMap { Int($0) }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        guard let date, day.count == 3,
            DateComponents(calendar: calendar, year: day[0], month: day[1], day: day[2]).isValidDate,
            text.count == 10 || time.count == 3 && time[0] < 24 && time[1] < 60 && time[2] < 60
        else { return nil }
        return date
    }
}
