import Ferry
import Testing

@Suite("Upload plan")
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
