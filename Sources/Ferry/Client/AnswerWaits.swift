import FerryTransport
import Foundation

/// How long one upload's parts waited for their answers once their bodies were handed to the network, and so how long
/// the next part waits before it takes its answer as lost.
///
/// A part whose body has gone out waits for the server to receive it and answer. On a slow link the network's buffers
/// may still hold some of a part when its last byte is handed over (the AsyncHTTPClient transport keeps that to about
/// 1.75 MiB, and to a few seconds of a slow link), so the first answers set the measure: a later part waits the longer
/// of the upload's shortest wait (at first `shortest`) and four times the longest wait seen, never more than
/// ``longest`` (the AsyncHTTPClient transport's own answer limit). Each wait that runs out doubles the shortest wait
/// for the rest of the upload (a server or link that slowed down is not cut off again and again). Before any part was
/// answered there is no measure, and the transport's own limits hold.
///
/// The waits also set how many parts are sent at once. Parts share the link: on one too slow for all of them, what
/// each part leaves in the network's buffers takes longer than any wait, and every part would time out and be sent
/// again whole, again and again. So a wait that runs out (ours or the transport's) halves the parts sent at once,
/// down to one, which then has the whole link; parts that ran out together halve them once (only a part sent since
/// the last halving halves them again). Once twice as many parts as are sent at once have been stored in time in a
/// row, one more is sent at once, up to the upload's own number (a link that recovered is used whole again).
///
/// `@unchecked Sendable`: `longestSeen`, `floor`, `lanes`, `narrowings`, `inTime`, `sending` and `queued` are only
/// read and written while holding `lock`.
final class AnswerWaits: @unchecked Sendable {
    /// The longest a part waits: 300 s.
    static let longest: Duration = .seconds(300)

    private let lock = NSLock()
    private var longestSeen: Duration?
    private var floor: Duration
    /// Parts that may be sent at once.
    private var lanes: Int
    /// Parts the upload sends at once on a link that keeps up.
    private let widest: Int
    /// Parts answered in time in a row since `lanes` last changed.
    private var inTime = 0
    /// How many times `lanes` was halved.
    private var narrowings = 0
    /// Parts being sent.
    private var sending = 0
    /// Parts waiting for a lane, first come first served.
    private var queued: [CheckedContinuation<Int, Never>] = []

    /// Waits of at least `shortest`, for an upload sending up to `lanes` parts at once.
    init(shortest: Duration, lanes: Int = .max) {
        floor = min(shortest, Self.longest)
        self.lanes = max(1, lanes)
        widest = self.lanes
    }

    /// Parts that may be sent at once now.
    var parallelParts: Int { lock.withLock { lanes } }

    /// Records that the answer of a part sent after `entered` halvings did not come in time: half as many parts are
    /// sent at once from now on, unless another part sent with it halved them already.
    private func narrow(entered: Int) {
        lock.withLock {
            guard narrowings == entered else { return }
            lanes = max(1, lanes / 2)
            narrowings += 1
            inTime = 0
        }
    }

    /// Records that a part was stored in time: after twice as many in a row as parts are sent at once, one more part
    /// is sent at once, up to ``widest`` (the lane taken when this part's lane is given back).
    private func widen() {
        lock.withLock {
            guard lanes < widest else { return }
            inTime += 1
            if inTime >= 2 * lanes {
                lanes += 1
                inTime = 0
            }
        }
    }

    /// Returns once a lane is free, and holds it; gives the halvings there had been when it was granted.
    private func enter() async -> Int {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            let granted: Int? = lock.withLock {
                guard sending < lanes, queued.isEmpty else {
                    queued.append(continuation)
                    return nil
                }
                sending += 1
                return narrowings
            }
            if let granted { continuation.resume(returning: granted) }
        }
    }

    /// Gives a lane back, letting the parts queued for lanes free now go on.
    private func leave() {
        let (next, granted): ([CheckedContinuation<Int, Never>], Int) = lock.withLock {
            sending -= 1
            var next: [CheckedContinuation<Int, Never>] = []
            while sending < lanes, !queued.isEmpty {
                sending += 1
                next.append(queued.removeFirst())
            }
            return (next, narrowings)
        }
        for continuation in next { continuation.resume(returning: granted) }
    }

    /// How long an answer may take once the body is handed over, or nil when no part was answered yet.
    var deadline: Duration? {
        lock.withLock { longestSeen.map { min(Self.longest, max(floor, $0 * 4)) } }
    }

    /// Records an answer that came `wait` after its body was handed over.
    func answered(after wait: Duration) {
        lock.withLock { longestSeen = max(longestSeen ?? .zero, wait) }
    }

    /// Records that a wait of `deadline` ran out: the upload's later waits are at least twice as long.
    func ranOut(_ deadline: Duration) {
        lock.withLock { floor = min(Self.longest, max(floor, deadline) * 2) }
    }

    /// Sends through `send` (which reports body bytes to the closure it is given) once a lane is free and, once all
    /// `bodyCount` bytes are handed over, waits at most ``deadline`` for the answer; past it the request is abandoned
    /// and a timeout ``TransportError`` thrown (the caller's retry policy sends the part again), and fewer parts are
    /// sent at once; answers in time let more be sent at once again.
    func watch(
        bodyCount: Int, progress: @escaping @Sendable (Int) -> Void,
        _ send: @escaping @Sendable (@escaping @Sendable (Int) -> Void) async throws -> TransportResponse
    ) async throws -> TransportResponse {
        let entered = await enter()
        defer { leave() }
        do {
            let response = try await watchAnswer(bodyCount: bodyCount, progress: progress, send)
            // A refusal (503 SlowDown among them) asks for less, not more.
            if (200..<300).contains(response.status) { widen() }
            return response
        } catch let error as TransportError where error.isTimeout {
            narrow(entered: entered)
            throw error
        }
    }

    private func watchAnswer(
        bodyCount: Int, progress: @escaping @Sendable (Int) -> Void,
        _ send: @escaping @Sendable (@escaping @Sendable (Int) -> Void) async throws -> TransportResponse
    ) async throws -> TransportResponse {
        let handover = Handover(total: bodyCount)
        let counting: @Sendable (Int) -> Void = { count in
            handover.add(count)
            progress(count)
        }
        let response: TransportResponse
        if let deadline {
            response = try await withThrowingTaskGroup(of: TransportResponse?.self) { group in
                group.addTask { try await send(counting) }
                group.addTask {
                    while handover.at == nil { try await Task.sleep(for: .milliseconds(100)) }
                    try await Task.sleep(until: (handover.at ?? .now) + deadline, clock: .continuous)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { throw CancellationError() }
                if let first { return first }
                ranOut(deadline)
                throw TransportError(
                    isTimeout: true, "No answer came within \(deadline.components.seconds) s of the part's body being sent.")
            }
        } else {
            response = try await send(counting)
        }
        if let at = handover.at { answered(after: .now - at) }
        return response
    }

    /// When a request's body was all handed over.
    private final class Handover: @unchecked Sendable {
        private let lock = NSLock()
        private let total: Int
        private var sent = 0
        private var handedOver: ContinuousClock.Instant?

        init(total: Int) {
            self.total = total
        }

        func add(_ count: Int) {
            lock.withLock {
                sent += count
                if sent >= total, handedOver == nil { handedOver = .now }
            }
        }

        var at: ContinuousClock.Instant? { lock.withLock { handedOver } }
    }
}
