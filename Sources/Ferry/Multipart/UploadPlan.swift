/// The pure state of a multipart upload: how the file is cut into parts, which parts are done, which are being
/// sent. No I/O; ``ResumableUploadTask`` runs it.
///
/// The file is cut into ``segments``: runs of consecutive parts of one size. A plan starts with one segment; an
/// upload whose parts adapt to the connection cuts the parts not yet started anew (``resizeUntakenParts(to:)``), so
/// a part's number and range never change once it has been sent.
public struct UploadPlan: Sendable, Hashable {
    /// Plans are equal when they cut the same file the same way and have the same parts done and in flight.
    public static func == (a: UploadPlan, b: UploadPlan) -> Bool {
        a.fileSize == b.fileSize && a.segments == b.segments && a.completed == b.completed && a.inFlight == b.inFlight
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fileSize)
        hasher.combine(segments)
        hasher.combine(completed)
        hasher.combine(inFlight)
    }

    /// Consecutive parts of one size, from part ``firstPart`` at byte ``offset`` of the file to the next segment or
    /// the end of the file.
    public struct Segment: Codable, Sendable, Hashable {
        /// Number of the segment's first part.
        public var firstPart: Int
        /// Where that part starts in the file.
        public var offset: Int64
        /// Size of each of the segment's parts (the file's last part may be shorter).
        public var partSize: Int64

        /// Creates a segment.
        public init(firstPart: Int, offset: Int64, partSize: Int64) {
            self.firstPart = firstPart
            self.offset = offset
            self.partSize = partSize
        }
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
    static let mib: Int64 = 1024 * 1024

    /// Size of the file.
    public let fileSize: Int64
    /// How the file is cut, in order; the first starts at part 1, byte 0.
    public private(set) var segments: [Segment]
    /// Size of the first parts (of every part but the last, unless parts were resized).
    public var partSize: Int64 { segments[0].partSize }
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
        try Self.validate(partSize: requested)
        self.fileSize = fileSize
        self.segments = [Segment(firstPart: 1, offset: 0, partSize: Self.partSize(fileSize: fileSize, requested: requested))]
    }

    /// A plan cut as recorded (by a checkpoint); throws `invalidArgument` when the segments do not cut this file into
    /// at most 10,000 parts of allowed sizes.
    public init(fileSize: Int64, segments: [Segment]) throws {
        try self.init(fileSize: fileSize, partSize: segments.first?.partSize ?? Self.defaultPartSize)
        let invalid = FerryError(.invalidArgument, "The recorded part sizes do not fit this file.")
        guard let first = segments.first, first.firstPart == 1, first.offset == 0, first.partSize == partSize else {
            throw invalid
        }
        self.segments = [first]
        for segment in segments.dropFirst() {
            try Self.validate(partSize: segment.partSize)
            guard segment.firstPart > self.segments[self.segments.count - 1].firstPart,
                segment.firstPart <= partCount, segment.offset == range(ofPart: segment.firstPart).lowerBound,
                segment.offset < fileSize
            else { throw invalid }
            self.segments.append(segment)
        }
        guard partCount <= Self.maxParts else { throw invalid }
    }

    private static func validate(partSize: Int64) throws {
        guard partSize > 0 else { throw FerryError(.invalidArgument, "The part size must be positive.") }
        guard partSize <= maxPartSize else {
            throw FerryError(.invalidArgument, "The part size must be less than 4 GiB (it is held in memory while sent).")
        }
    }

    /// The part size to use: `requested`, or the smallest whole number of MiB that keeps the file within 10,000
    /// parts.
    public static func partSize(fileSize: Int64, requested: Int64) -> Int64 {
        partSize(bytes: fileSize, parts: maxParts, requested: requested)
    }

    /// `requested`, or the smallest whole number of MiB that cuts `bytes` into at most `parts` parts.
    static func partSize(bytes: Int64, parts: Int, requested: Int64) -> Int64 {
        let needed = (bytes + Int64(parts) - 1) / Int64(max(1, parts))
        guard needed > requested else { return requested }
        return (needed + mib - 1) / mib * mib
    }

    /// Number of parts (at least one).
    public var partCount: Int {
        let last = segments[segments.count - 1]
        return last.firstPart - 1 + max(1, Int((fileSize - last.offset + last.partSize - 1) / last.partSize))
    }

    /// The byte range of a part (1-based).
    public func range(ofPart number: Int) -> Range<Int64> {
        let segment = segments.last { $0.firstPart <= number } ?? segments[0]
        let start = segment.offset + Int64(number - segment.firstPart) * segment.partSize
        return start..<min(start + segment.partSize, fileSize)
    }

    /// Cuts the parts that were never taken (those above every part done or being sent) into parts of `size`,
    /// grown to whole MiB when the rest of the file would otherwise need more than the parts left under 10,000.
    /// Parts already sent keep their numbers and ranges. Returns whether the cut changed.
    @discardableResult
    public mutating func resizeUntakenParts(to size: Int64) -> Bool {
        guard size > 0, size <= Self.maxPartSize else { return false }
        let next = max(completed.keys.max() ?? 0, inFlight.max() ?? 0) + 1
        guard next <= partCount else { return false }
        let offset = range(ofPart: next).lowerBound
        let size = Self.partSize(bytes: fileSize - offset, parts: Self.maxParts - (next - 1), requested: size)
        let current = segments.last { $0.firstPart <= next } ?? segments[0]
        guard size != current.partSize else { return false }
        segments.removeAll { $0.firstPart >= next }
        segments.append(Segment(firstPart: next, offset: offset, partSize: size))
        firstCandidate = min(firstCandidate, next)
        return true
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
