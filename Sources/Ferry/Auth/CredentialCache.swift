import Foundation

/// Credentials handed out while they are valid and renewed by one task at a time: the one place the client keeps a
/// credential that expires.
///
/// - A credential with more than ``minimumValidity`` left is handed out at once.
/// - One with less than ``renewAhead`` left (but more than ``minimumValidity``) is still handed out, and a renewal
///   starts in the background.
/// - One with less than ``minimumValidity`` left, or none at all, is renewed first: the caller waits for it.
/// - Callers that need a renewal while one runs wait for that one; `renew` is never called twice at once.
/// - A renewal that fails throws its error to the callers waiting for it and changes nothing: the next caller that
///   needs one starts another. A background renewal that fails is forgotten the same way.
///
/// Expiry is judged by the time of day `now` gives, so tests move time by hand. A class with a lock rather than an
/// actor, so that an actor that holds one can ask ``validCredentials`` without a suspension point (and so without
/// another task slipping in between the question and what the actor does with the answer).
///
/// `@unchecked Sendable`: `state` and `nextRenewal` are only read and written while holding `lock`, which is never held
/// across a suspension point or while calling out (`renew` runs in a task of its own, outside the lock).
final class CredentialCache: @unchecked Sendable {
    private enum State {
        /// Nothing to hand out and no renewal under way.
        case empty
        /// A credential and no renewal under way.
        case holding(Credentials)
        /// A renewal under way; `serving` is handed out meanwhile while it is still valid (nil when there was none,
        /// or the server refused it).
        case renewing(Renewal, serving: Credentials?)
    }

    private struct Renewal {
        let number: Int
        let task: Task<Credentials, any Error>
    }

    /// What a caller does once the lock is let go.
    private enum Step {
        case serve(Credentials)
        case wait(Task<Credentials, any Error>)
    }

    private let lock = NSLock()
    private var state: State
    private var nextRenewal = 0

    /// A credential with no more than this left is not handed out: callers wait for its renewal.
    let minimumValidity: TimeInterval
    /// A credential with no more than this left is renewed in the background while it is still handed out. Never less
    /// than ``minimumValidity``.
    let renewAhead: TimeInterval
    private let now: @Sendable () -> Date
    private let renew: @Sendable () async throws -> Credentials
    /// Called each time a caller starts waiting for a renewal (tests use it to know that callers are waiting).
    private let waiting: @Sendable () -> Void

    /// A cache that starts with `initial` (or nothing) and gets the next credential from `renew`.
    ///
    /// - Parameters:
    ///   - initial: the credential to hand out first; nil to renew on first use.
    ///   - minimumValidity: seconds a credential must have left to be handed out. Default 0: until it expires.
    ///   - renewAhead: seconds before expiry from which a renewal runs in the background. Default 0: no renewal
    ///     ahead of ``minimumValidity``.
    ///   - now: the time of day expiry is judged by.
    ///   - waiting: told each time a caller starts waiting for a renewal.
    ///   - renew: gets the next credential; only one call runs at a time.
    init(
        _ initial: Credentials? = nil, minimumValidity: TimeInterval = 0, renewAhead: TimeInterval = 0,
        now: @escaping @Sendable () -> Date = { ServiceClock.now() }, waiting: @escaping @Sendable () -> Void = {},
        renew: @escaping @Sendable () async throws -> Credentials
    ) {
        state = initial.map { .holding($0) } ?? .empty
        self.minimumValidity = minimumValidity
        self.renewAhead = max(renewAhead, minimumValidity)
        self.now = now
        self.waiting = waiting
        self.renew = renew
    }

    /// A credential to sign with: the one held while it has more than ``minimumValidity`` left (starting a background
    /// renewal when it has less than ``renewAhead`` left), else a renewed one.
    ///
    /// - Throws: the error of the renewal it waited for.
    func credentials() async throws -> Credentials {
        let step = lock.withLock { () -> Step in
            switch state {
            case .empty:
                return .wait(startRenewal(serving: nil))
            case .holding(let held):
                guard isUsable(held) else { return .wait(startRenewal(serving: nil)) }
                if isDue(held) { _ = startRenewal(serving: held) }
                return .serve(held)
            case .renewing(let renewal, let serving):
                if let serving, isUsable(serving) { return .serve(serving) }
                return .wait(renewal.task)
            }
        }
        return try await perform(step)
    }

    /// A credential to use instead of `stale`, which the server refused as expired: the one held when it is another
    /// and still valid (someone renewed it already), else a renewed one, shared with every caller that asks meanwhile.
    ///
    /// What the renewal returns is returned as it is, even when it is `stale` again or already expired: the caller
    /// decides what such an answer means.
    ///
    /// - Throws: the error of the renewal it waited for.
    func renew(after stale: Credentials) async throws -> Credentials {
        let step = lock.withLock { () -> Step in
            switch state {
            case .empty:
                return .wait(startRenewal(serving: nil))
            case .holding(let held):
                if held != stale && isUsable(held) { return .serve(held) }
                return .wait(startRenewal(serving: nil))
            case .renewing(let renewal, let serving):
                if let serving, serving != stale, isUsable(serving) { return .serve(serving) }
                // The credential handed out meanwhile was refused: no one gets it any more.
                state = .renewing(renewal, serving: nil)
                return .wait(renewal.task)
            }
        }
        return try await perform(step)
    }

    /// Stops handing out `stale`, which the server refused as expired though it looked valid here (a credential
    /// without an expiry, or a device clock behind the server's): until ``replace(with:)`` or a renewal, callers get
    /// a renewed one. A credential that replaced `stale` meanwhile is kept.
    func refuse(_ stale: Credentials) {
        lock.withLock {
            switch state {
            case .holding(let held) where held == stale: state = .empty
            case .renewing(let renewal, let serving) where serving == stale: state = .renewing(renewal, serving: nil)
            default: break
            }
        }
    }

    /// Holds `credentials` from now on. A renewal under way still answers the callers waiting for it, but what it gets
    /// does not replace these.
    func replace(with credentials: Credentials) {
        lock.withLock { state = .holding(credentials) }
    }

    /// The credential held, when it has more than ``minimumValidity`` left; nil otherwise. Starts nothing.
    var validCredentials: Credentials? {
        lock.withLock {
            switch state {
            case .empty: nil
            case .holding(let held): isUsable(held) ? held : nil
            case .renewing(_, let serving): serving.flatMap { isUsable($0) ? $0 : nil }
            }
        }
    }

    // MARK: Inside the lock

    private func isUsable(_ credentials: Credentials) -> Bool {
        !credentials.isExpired(at: now(), margin: minimumValidity)
    }

    private func isDue(_ credentials: Credentials) -> Bool {
        credentials.isExpired(at: now(), margin: renewAhead)
    }

    /// Starts the renewal (the caller holds the lock) and returns its task.
    private func startRenewal(serving: Credentials?) -> Task<Credentials, any Error> {
        let number = nextRenewal
        nextRenewal += 1
        let renew = self.renew
        let task = Task<Credentials, any Error> {
            let outcome: Result<Credentials, any Error>
            do {
                outcome = .success(try await renew())
            } catch {
                outcome = .failure(error)
            }
            self.renewalEnded(number, outcome)
            return try outcome.get()
        }
        state = .renewing(Renewal(number: number, task: task), serving: serving)
        return task
    }

    // MARK: Outside the lock

    private func perform(_ step: Step) async throws -> Credentials {
        switch step {
        case .serve(let credentials):
            return credentials
        case .wait(let task):
            waiting()
            return try await task.value
        }
    }

    /// A renewal ended: what it got is held (unless the credential was replaced meanwhile); a failure leaves what was
    /// there before.
    private func renewalEnded(_ number: Int, _ outcome: Result<Credentials, any Error>) {
        lock.withLock {
            guard case .renewing(let renewal, let serving) = state, renewal.number == number else { return }
            switch outcome {
            case .success(let fresh): state = .holding(fresh)
            case .failure: state = serving.map { .holding($0) } ?? .empty
            }
        }
    }
}
