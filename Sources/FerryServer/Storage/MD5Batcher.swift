import FerryCore
import NIOConcurrencyHelpers
import NIOPosix

/// Hashes the MD5s of the bodies the server receives at the same time side by side, on one thread of its own.
///
/// Every body's MD5 (its S3 ETag) is a separate chain of dependent additions that keeps a core busy for a fraction
/// of what it can do. Blocks that are waiting when the hashing thread turns to them are hashed together by the
/// multi-message kernel (``MD5State/update(_:with:kernel:)``), eight for about the time of two: under parallel
/// part uploads the server's MD5 work shrinks to a third or less. A block that arrives alone is hashed alone, as
/// before, and no block waits for company.
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

    init() {
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

    /// Hashes batches of waiting jobs until none is left.
    private func drain() {
        while true {
            let jobs = queue.withLockedValue { queue in
                defer { queue.pending = [] }
                if queue.pending.isEmpty { queue.draining = false }
                queue.largestBatch = max(queue.largestBatch, queue.pending.count)
                return queue.pending
            }
            if jobs.isEmpty { return }
            var states = jobs.map(\.digest.state)
            MD5State.update(&states, with: jobs.map(\.bytes))
            for (job, state) in zip(jobs, states) {
                job.digest.state = state
                job.continuation.resume()
            }
        }
    }
}

/// The MD5 of one body, advanced by ``MD5Batcher``.
final class MD5Digest: @unchecked Sendable {
    // Only the batcher's thread touches `state` while an update is in flight, and the owner only between updates
    // (each update is awaited before the next starts or the digest is finished).
    fileprivate var state = MD5State()

    /// The 16-byte digest of the bytes so far.
    func finalize() -> [UInt8] { state.finalize() }
}
