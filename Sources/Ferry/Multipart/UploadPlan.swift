/// The pure state of a multipart upload: how the file is cut into parts, which parts are done, which are being
/// sent. No I/O; ``ResumableUploadTask`` runs it.
public struct UploadPlan: Sendable, Hashable {
    /// Plans are equal when they cut the same file the same way and have the same parts done and in flight.
    public static func == (a: UploadPlan, b: UploadPlan) -> Bool {
        a.fileSize == b.fileSize && a.partSize == b.partSize && a.completed == b.completed && a.inFlight == b.inFlight
    }

    /// Hashes what ``==`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fileSize)
        hasher.combine(partSize)
        hasher.combine(completed)
        hasher.combine(inFlight)
    }

    /// S3's largest number of parts.
    public static let maxParts = 10_000
    /// S3's largest object (5 TiB).
    public static let maxObjectSize: Int64 = 5 * 1024 * 1024 * 1024 * 1024
    /// The default part size, 5 MiB: the smallest S3 accepts. On a phone a part is what a dropped connection costs
    /// again, so small parts lose little on flaky networks (5 MiB is a few seconds at a mobile uplink's rate), while
    /// still keeping request overhead well under 1% of the bytes.
    public static let defaultPartSize: Int64 = 5 * 1024 * 1024
    /// The largest part size the engine takes: 4 GiB less one byte, as a part is held in one buffer while it is sent
    /// (S3 itself allows 5 GiB).
    public static let maxPartSize: Int64 = 4 * 1024 * 1024 * 1024 - 1

    /// Size of the file.
    public let fileSize: Int64
    /// Size of every part but the last.
    public let partSize: Int64
    /// Parts the server has, by number.
    public private(set) var completed: [Int: UploadedPart] = [:]
    /// Parts being sent now.
    public private(set) var inFlight: Set<Int> = []
    /// Every part below this number is done or being sent, so ``takeNextPart()`` looks from here: taking parts costs
    /// O(parts) over a whole upload, not O(parts²). A released part moves it back.
    private var firstCandidate = 1

    /// A plan for a file; the part size grows (in whole MiB) when the file would need more than 10,000 parts.
    public init(fileSize: Int64, partSize requested: Int64 = defaultPartSize) throws {
        guard fileSize >= 0, fileSize <= Self.maxObjectSize else {
            throw FerryError(.invalidArgument, "The file is larger than the 5 TiB an object may hold.")
        }
        guard requested > 0 else { throw FerryError(.invalidArgument, "The part size must be positive.") }
        guard requested <= Self.maxPartSize else {
            throw FerryError(.invalidArgument, "The part size must be less than 4 GiB (it is held in memory while sent).")
        }
        self.fileSize = fileSize
        self.partSize = Self.partSize(fileSize: fileSize, requested: requested)
    }

    /// The part size to use: `requested`, or the smallest whole number of MiB that keeps the file within 10,000
    /// parts.
    public static func partSize(fileSize: Int64, requested: Int64) -> Int64 {
        let needed = (fileSize + Int64(maxParts) - 1) / Int64(maxParts)
        guard needed > requested else { return requested }
        let mib: Int64 = 1024 * 1024
        return (needed + mib - 1) / mib * mib
    }

    /// Number of parts (at least one).
    public var partCount: Int { max(1, Int((fileSize + partSize - 1) / partSize)) }

    /// The byte range of a part (1-based).
    public func range(ofPart number: Int) -> Range<Int64> {
        let start = Int64(number - 1) * partSize
        return start..<min(start + partSize, fileSize)
    }

    /// Bytes of a part.
    public func size(ofPart number: Int) -> Int64 {
        let range = range(ofPart: number)
        return range.upperBound - range.lowerBound
    }

    /// Whether every part is done.
    public var isComplete: Bool { completed.count == partCount }

    /// Bytes in completed parts.
    public var completedBytes: Int64 { completed.values.reduce(0) { $0 + $1.size } }

    /// The lowest part neither done nor being sent, now marked as being sent.
    public mutating func takeNextPart() -> Int? {
        guard firstCandidate <= partCount,
            let next = (firstCandidate...partCount).first(where: { completed[$0] == nil && !inFlight.contains($0) })
        else {
            firstCandidate = partCount + 1
            return nil
        }
        inFlight.insert(next)
        firstCandidate = next + 1
        return next
    }

    /// Records a finished part.
    public mutating func complete(_ part: UploadedPart) {
        inFlight.remove(part.number)
        completed[part.number] = part
    }

    /// Puts a part back to be sent again (it failed, or the upload paused).
    public mutating func release(_ number: Int) {
        inFlight.remove(number)
        firstCandidate = min(firstCandidate, number)
    }

    /// Puts every part being sent back (a run stopped: paused, failed or killed).
    public mutating func releaseAll() {
        inFlight.removeAll()
        firstCandidate = 1
    }

    /// Accepts parts the server already has, when they match this plan's sizes.
    public mutating func adopt(_ parts: [UploadedPart]) {
        for part in parts where part.number >= 1 && part.number <= partCount && part.size == size(ofPart: part.number) {
            completed[part.number] = part
        }
    }

    /// Completed parts in order.
    public var orderedParts: [UploadedPart] { completed.keys.sorted().compactMap { completed[$0] } }
}
