import FerryCore
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import FerryServer
@testable import FerryStorage

@Suite("MD5 batcher", .timeLimit(.minutes(10)))
struct MD5BatcherTests {
    /// A copy of some bytes at a fixed address, freed when the last update holding it is done.
    final class Bytes: @unchecked Sendable {
        // Written once in init, only read afterwards.
        private let storage: UnsafeMutableRawBufferPointer
        init(_ bytes: some Collection<UInt8>) {
            storage = .allocate(byteCount: bytes.count, alignment: 64)
            storage.copyBytes(from: bytes)
        }
        deinit { storage.deallocate() }
        var raw: UnsafeRawBufferPointer { UnsafeRawBufferPointer(storage) }
    }

    @Test("Bodies hashed at the same time get the digests each would get alone")
    func concurrentBodies() async throws {
        let batcher = MD5Batcher()
        let bodies = (0..<12).map { index in
            (0..<(200_000 + index * 7_777)).map { UInt8(truncatingIfNeeded: $0 &* (index + 3) &+ $0 >> 11) }
        }
        let digests = await withTaskGroup(of: (Int, [UInt8]).self) { group in
            for (index, body) in bodies.enumerated() {
                group.addTask {
                    let digest = MD5Digest()
                    var offset = 0
                    // Pieces that are not whole blocks, so partial blocks are carried between batches.
                    for size in [65_536, 1_000, 64, 131_071].cycled() {
                        guard offset < body.count else { break }
                        let piece = Bytes(body[offset..<min(body.count, offset + size)])
                        await batcher.update(digest, with: piece.raw, owner: piece)
                        offset += size
                    }
                    return (index, digest.finalize())
                }
            }
            var found: [Int: [UInt8]] = [:]
            for await (index, digest) in group { found[index] = digest }
            return found
        }
        for (index, body) in bodies.enumerated() {
            var reference = Checksummer(.md5)
            reference.update(body)
            #expect(digests[index] == reference.finalize(), "body \(index)")
        }
    }

    @Test("Updates that wait while the hashing thread is busy are hashed together")
    func waitingUpdatesShareABatch() async throws {
        let batcher = MD5Batcher()
        let release = ConditionLock(value: false)
        // Keep the hashing thread busy until eight updates are waiting.
        batcher.thread.submit { _ in
            release.lock(whenValue: true)
            release.unlock()
        }
        let bytes = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let body = Bytes(bytes)
        var reference = Checksummer(.md5)
        reference.update(bytes)
        let expected = reference.finalize()
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let digest = MD5Digest()
                    await batcher.update(digest, with: body.raw, owner: body)
                    return digest.finalize()
                }
            }
            try await Self.waitUntil { batcher.waiting == 8 }
            release.lock()
            release.unlock(withValue: true)
            for try await digest in group { #expect(digest == expected) }
        }
        #expect(batcher.largestBatch == 8)
    }

    @Test("A block that arrives while a long one is being hashed joins it and is done first")
    func lateBlockJoinsARunningOne() async throws {
        // The first round of the long block is held until the short one waits: it arrives while the long one is
        // being hashed, however busy the machine is.
        let held = ConditionLock(value: false)
        let first = NIOLockedValueBox(true)
        let batcher = MD5Batcher(afterRound: {
            let isFirst = first.withLockedValue { value in
                defer { value = false }
                return value
            }
            guard isFirst else { return }
            held.lock(whenValue: true)
            held.unlock()
        })
        let longBytes = (0..<(16 << 20)).map { UInt8(truncatingIfNeeded: $0 >> 3) }
        let long = Bytes(longBytes)
        let short = Bytes([UInt8](repeating: 9, count: 1000))
        let longDigest = MD5Digest()
        let shortDigest = MD5Digest()
        let finished = NIOLockedValueBox<[String]>([])
        let longTask = Task {
            await batcher.update(longDigest, with: long.raw, owner: long)
            finished.withLockedValue { $0.append("long") }
        }
        // Once the hashing thread has taken the long block, send the short one, and let the round end once it waits.
        try await Self.waitUntil { batcher.largestBatch == 1 }
        let release = Task {
            try await Self.waitUntil { batcher.waiting == 1 }
            held.lock()
            held.unlock(withValue: true)
        }
        await batcher.update(shortDigest, with: short.raw, owner: short)
        finished.withLockedValue { $0.append("short") }
        try await release.value
        await longTask.value
        #expect(finished.withLockedValue { $0 } == ["short", "long"])
        #expect(batcher.largestBatch == 2)
        #expect(longDigest.finalize() == Self.md5(longBytes))
        #expect(shortDigest.finalize() == Self.md5([UInt8](repeating: 9, count: 1000)))
    }

    static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var reference = Checksummer(.md5)
        reference.update(bytes)
        return reference.finalize()
    }

    static func waitUntil(_ condition: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            try #require(ContinuousClock.now < deadline, "condition never became true")
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

extension Array {
    /// The elements over and over.
    fileprivate func cycled() -> some Sequence<Element> {
        sequence(state: 0) { index in
            defer { index = (index + 1) % count }
            return self[index]
        }
    }
}
