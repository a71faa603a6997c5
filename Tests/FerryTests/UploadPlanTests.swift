import Ferry
import Testing

@Suite("Upload plan", .timeLimit(.minutes(10)))
struct UploadPlanTests {
    @Test("parts cover the file exactly; the last part is the remainder")
    func ranges() throws {
        let plan = try UploadPlan(fileSize: 12 * 1024 * 1024 + 5, partSize: 5 * 1024 * 1024)
        #expect(plan.partCount == 3)
        #expect(plan.range(ofPart: 1) == 0..<5_242_880)
        #expect(plan.range(ofPart: 3) == 10_485_760..<12_582_917)
        #expect((1...3).map { plan.size(ofPart: $0) }.reduce(0, +) == plan.fileSize)
    }

    @Test("the part size grows in whole MiB to stay within 10,000 parts, beyond 4 GB too")
    func growth() throws {
        let big = try UploadPlan(fileSize: 100 * 1024 * 1024 * 1024)  // 100 GiB
        #expect(big.partSize == 11 * 1024 * 1024)
        #expect(big.partCount <= 10_000)
        let small = try UploadPlan(fileSize: 10 * 1024 * 1024)
        #expect(small.partSize == UploadPlan.defaultPartSize)
        #expect(throws: FerryError.self) { try UploadPlan(fileSize: 6 * 1024 * 1024 * 1024 * 1024) }
        let largest = try UploadPlan(fileSize: UploadPlan.maxObjectSize)  // 5 TiB: 525 MiB parts
        #expect(largest.partCount <= 10_000 && largest.partSize < UploadPlan.maxPartSize)
        #expect(throws: FerryError.self) { try UploadPlan(fileSize: 1, partSize: 4 * 1024 * 1024 * 1024) }
    }

    @Test("parts are taken once, released parts come back, adopted parts count as done")
    func stateMachine() throws {
        var plan = try UploadPlan(fileSize: 30, partSize: 10)
        #expect(plan.takeNextPart() == 1)
        #expect(plan.takeNextPart() == 2)
        plan.release(1)
        #expect(plan.takeNextPart() == 1)
        #expect(plan.takeNextPart() == 3)
        #expect(plan.takeNextPart() == nil)
        plan.complete(UploadedPart(number: 2, size: 10, etag: "b"))
        plan.releaseAll()
        #expect(plan.takeNextPart() == 1)
        plan.adopt([UploadedPart(number: 3, size: 10, etag: "c"), UploadedPart(number: 1, size: 9, etag: "short")])
        #expect(plan.completed.keys.sorted() == [2, 3])
        #expect(plan.completedBytes == 20)
        plan.complete(UploadedPart(number: 1, size: 10, etag: "a"))
        #expect(plan.isComplete)
        #expect(plan.orderedParts.map(\.etag) == ["a", "b", "c"])
    }

    @Test("with 10,000 parts every part is taken once, lowest first, and released parts come back lowest first")
    func manyParts() throws {
        var plan = try UploadPlan(fileSize: 10_000 * 5 * 1024 * 1024, partSize: 5 * 1024 * 1024)
        var taken: [Int] = []
        while let number = plan.takeNextPart() { taken.append(number) }
        #expect(taken == Array(1...10_000))
        plan.release(5_000)
        plan.release(17)
        plan.complete(UploadedPart(number: 18, size: 5 * 1024 * 1024, etag: "e"))
        #expect(plan.takeNextPart() == 17)
        #expect(plan.takeNextPart() == 5_000)
        #expect(plan.takeNextPart() == nil)
        plan.releaseAll()
        #expect(plan.takeNextPart() == 1)
    }
}

@Suite("Upload plan: resized parts", .timeLimit(.minutes(10)))
struct UploadPlanSegmentTests {
    static let mib: Int64 = 1024 * 1024

    /// The parts' ranges follow one another from byte 0 to the end of the file.
    static func expectContiguous(_ plan: UploadPlan) {
        var next: Int64 = 0
        for number in 1...plan.partCount {
            let range = plan.range(ofPart: number)
            #expect(range.lowerBound == next, "part \(number) starts at \(range.lowerBound), not \(next)")
            #expect(!range.isEmpty || plan.fileSize == 0)
            next = range.upperBound
        }
        #expect(next == plan.fileSize)
    }

    @Test("parts not yet taken are cut anew; parts taken keep their numbers and ranges; a recorded cut is restored")
    func resize() throws {
        var plan = try UploadPlan(fileSize: 100 * Self.mib + 7, partSize: 5 * Self.mib)
        #expect(plan.partCount == 21)
        #expect(plan.takeNextPart() == 1)
        #expect(plan.takeNextPart() == 2)
        #expect(plan.takeNextPart() == 3)
        plan.complete(UploadedPart(number: 1, size: 5 * Self.mib, etag: "a"))
        plan.release(2)
        let before = (1...3).map { plan.range(ofPart: $0) }
        let grew = plan.resizeUntakenParts(to: 16 * Self.mib)
        #expect(grew)
        #expect((1...3).map { plan.range(ofPart: $0) } == before)
        #expect(plan.range(ofPart: 4) == 15 * Self.mib..<31 * Self.mib)
        #expect(plan.partCount == 3 + 6)  // 85 MiB + 7 bytes left: five 16 MiB parts and one of 5 MiB + 7
        Self.expectContiguous(plan)
        #expect(plan.takeNextPart() == 2)  // the released part comes back with its old range
        #expect(plan.range(ofPart: 2) == 5 * Self.mib..<10 * Self.mib)
        #expect(plan.takeNextPart() == 4)
        // Cut again, smaller: part 4 is taken, so the new cut starts at part 5 and replaces the 16 MiB tail.
        let shrank = plan.resizeUntakenParts(to: 8 * Self.mib)
        #expect(shrank)
        #expect(plan.segments.map(\.firstPart) == [1, 4, 5])
        #expect(plan.range(ofPart: 5) == 31 * Self.mib..<39 * Self.mib)
        Self.expectContiguous(plan)
        let again = plan.resizeUntakenParts(to: 8 * Self.mib)
        #expect(!again)  // unchanged
        let restored = try UploadPlan(fileSize: plan.fileSize, segments: plan.segments)
        #expect(restored.segments == plan.segments && restored.partCount == plan.partCount)
        #expect((1...plan.partCount).allSatisfy { restored.range(ofPart: $0) == plan.range(ofPart: $0) })
        var done = restored
        for number in 1...done.partCount {
            done.complete(UploadedPart(number: number, size: done.size(ofPart: number), etag: "\(number)"))
        }
        #expect(done.isComplete && done.completedBytes == done.fileSize)
    }

    @Test("a smaller cut still fits the rest of the file in the part numbers left under 10,000")
    func shrinkWithinPartLimit() throws {
        let fileSize = 200 * 1024 * Self.mib  // 200 GiB: 21 MiB parts to start with
        var plan = try UploadPlan(fileSize: fileSize, partSize: 64 * Self.mib)
        for _ in 1...100 { _ = plan.takeNextPart() }
        let shrank = plan.resizeUntakenParts(to: 5 * Self.mib)
        #expect(shrank)
        #expect(plan.partCount <= UploadPlan.maxParts)
        #expect(plan.segments.last!.partSize > 5 * Self.mib)
        #expect(plan.segments.last!.partSize % Self.mib == 0)
        Self.expectContiguous(plan)
    }

    @Test("recorded cuts that do not fit the file are refused")
    func invalidSegments() throws {
        let size = 40 * Self.mib
        typealias Segment = UploadPlan.Segment
        #expect(throws: FerryError.self) {
            try UploadPlan(fileSize: size, segments: [Segment(firstPart: 2, offset: 0, partSize: 5 * Self.mib)])
        }
        #expect(throws: FerryError.self) {
            try UploadPlan(fileSize: size, segments: [
                Segment(firstPart: 1, offset: 0, partSize: 5 * Self.mib),
                Segment(firstPart: 3, offset: 11 * Self.mib, partSize: 8 * Self.mib),  // part 3 starts at 10 MiB
            ])
        }
        #expect(throws: FerryError.self) {
            try UploadPlan(fileSize: size, segments: [
                Segment(firstPart: 1, offset: 0, partSize: 5 * Self.mib),
                Segment(firstPart: 9, offset: 40 * Self.mib, partSize: 8 * Self.mib),  // past the end
            ])
        }
        #expect(throws: FerryError.self) { try UploadPlan(fileSize: size, segments: []) }
        let valid = try UploadPlan(fileSize: size, segments: [
            Segment(firstPart: 1, offset: 0, partSize: 5 * Self.mib),
            Segment(firstPart: 3, offset: 10 * Self.mib, partSize: 8 * Self.mib),
        ])
        #expect(valid.partCount == 2 + 4)  // 30 MiB left: three parts of 8 MiB and one of 6
        Self.expectContiguous(valid)
    }
}
