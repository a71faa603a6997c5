import FerryCore
import NIOConcurrencyHelpers
import NIOPosix

/// Hashes the MD5s of the bodies the server receives at the same time side by side, on one thread of its own.
///
/// Every body's MD5 (its S3 ETag) is a separate chain of dependent additions that keeps a core busy for a fraction
/// of what it can do. Blocks that are waiting when the hashing thread turns to them are hashed together by the
/// multi-message kernels (``MD5State/update(_:with:kernel:)``): two in the time of one, eight in the time of two.
/// Blocks are hashed in slices, so a block that arrives while others are being hashed joins them within a slice. A
/// block that arrives alone is hashed alone, and no block waits for company.
final class MD5Batcher: Sendable {
    /// The one batcher of the process, so blocks of every body can meet.
    static let shared = MD5Batcher()

    // @unchecked: `bytes` stays valid as long as `owner` lives, and only the hashing thread reads it.
    private struct Job: @unchecked Sendable {
        let digest: MD5Digest
        let bytes: UnsafeRawBufferPointer
        /// Keeps `bytes` alive until the job is done.
        let owner: AnyObject & Sendable
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct Queue {
        var pending: [Job] = []
        var draining = false
        var largestBatch = 0
    }

    private let queue = NIOLockedValueBox(Queue())
    /// The hashing thread.
    let thread: NIOThreadPool

    /// Updates waiting for the hashing thread.
    var waiting: Int { queue.withLockedValue { $0.pending.count } }
    /// The most updates hashed together so far.
    var largestBatch: Int { queue.withLockedValue { $0.largestBatch } }

    /// Called on the hashing thread after each round (tests hold a round to let a job arrive during it).
    let afterRound: (@Sendable () -> Void)?

    init(afterRound: (@Sendable () -> Void)? = nil) {
        self.afterRound = afterRound
        thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
    }

    /// Adds `bytes` to `digest`, hashed together with whatever other bodies' blocks are waiting. `owner` keeps the
    /// bytes valid until this returns. Updates of one digest must not overlap: each awaits the one before it.
    func update(_ digest: MD5Digest, with bytes: UnsafeRawBufferPointer, owner: AnyObject & Sendable) async {
        await withCheckedContinuation { continuation in
            let start = queue.withLockedValue { queue in
                queue.pending.append(Job(digest: digest, bytes: bytes, owner: owner, continuation: continuation))
                defer { queue.draining = true }
                return !queue.draining
            }
            if start { thread.submit { _ in self.drain() } }
        }
    }

    /// Hashes waiting jobs in rounds of at most ``slice`` bytes each, until none is left. Jobs that arrive while
    /// others are being hashed join them at the next round instead of waiting for them to finish.
    private func drain() {
        var active: [(job: Job, rest: UnsafeRawBufferPointer)] = []
        while true {
            let arrived = queue.withLockedValue { queue in
                defer { queue.pending = [] }
                if queue.pending.isEmpty && active.isEmpty { queue.draining = false }
                queue.largestBatch = max(queue.largestBatch, active.count + queue.pending.count)
                return queue.pending
            }
            active += arrived.map { ($0, $0.bytes) }
            if active.isEmpty { return }
            var states = active.map(\.job.digest.state)
            let pieces = active.map { UnsafeRawBufferPointer(rebasing: $0.rest.prefix(Self.slice)) }
            MD5State.update(&states, with: pieces)
            for index in active.indices {
                active[index].job.digest.state = states[index]
                active[index].rest = UnsafeRawBufferPointer(rebasing: active[index].rest.dropFirst(pieces[index].count))
            }
            for finished in active where finished.rest.isEmpty { finished.job.continuation.resume() }
            active.removeAll { $0.rest.isEmpty }
            afterRound?()
        }
    }

    /// Bytes of each job hashed per round: small enough that a job arriving during a round starts soon (64 KiB take
    /// about 0.1 ms), large enough that a round's bookkeeping does not count.
    static let slice = 64 << 10
}

/// The MD5 of one body, advanced by ``MD5Batcher``.
final class MD5Digest: @unchecked Sendable {
    // Only the batcher's thread touches `state` while an update is in flight, and the owner only between updates
    // (each update is awaited before the next starts or the digest is finished).
    fileprivate var state = MD5State()

    /// The 16-byte digest of the bytes so far.
    func finalize() -> [UInt8] { state.finalize() }
}
