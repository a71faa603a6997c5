import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

@Suite("Credential cache: one renewal at a time, valid credentials served meanwhile", .timeLimit(.minutes(10)))
struct CredentialCacheTests {
    static let start = Date(timeIntervalSince1970: 1_900_000_000)

    static func credentials(_ id: String, expiresIn seconds: TimeInterval) -> Credentials {
        HeldRenewal.credentials(id, expiresIn: seconds, from: start)
    }

    struct Refused: Error, Equatable {
        var attempt: Int
    }

    @Test("callers that need a renewal at the same time share one call of renew")
    func concurrentCallersShareOneRenewal() async throws {
        let held = HeldRenewal()
        let waits = Signals()
        let cache = CredentialCache(
            Self.credentials("old", expiresIn: -1), now: ManualTime(Self.start).now, waiting: { waits.signal() },
            renew: { try await held.renew() })
        let results = try await withThrowingTaskGroup(of: Credentials.self) { group in
            for _ in 0..<4 { group.addTask { try await cache.credentials() } }
            // All four wait for the renewal before it may end.
            await waits.wait(for: 4)
            await held.began()
            held.release(.success(Self.credentials("new", expiresIn: 3600)))
            return try await group.reduce(into: [String]()) { $0.append($1.accessKeyId) }
        }
        #expect(results == ["new", "new", "new", "new"])
        #expect(held.calls == 1)
        #expect(try await cache.credentials().accessKeyId == "new")
        #expect(held.calls == 1)
    }

    @Test("a credential close to expiry is still handed out at once while its renewal runs; then the renewed one is")
    func validCredentialServedWhileRenewing() async throws {
        let time = ManualTime(Self.start)
        let held = HeldRenewal()
        let waits = Signals()
        let cache = CredentialCache(
            Self.credentials("old", expiresIn: 100), minimumValidity: 30, renewAhead: 120, now: time.now,
            waiting: { waits.signal() }, renew: { try await held.renew() })
        // 100 s left: more than the 30 s it needs, less than the 120 s from which it is renewed.
        #expect(try await cache.credentials().accessKeyId == "old")
        await held.began()
        // The renewal is held: callers still get the old credential, and no second renewal starts.
        time.advance(by: 60)  // 40 s left
        for _ in 0..<3 { #expect(try await cache.credentials().accessKeyId == "old") }
        #expect(cache.validCredentials?.accessKeyId == "old")
        #expect(held.calls == 1)
        // Below what it needs, a caller waits for the renewal under way.
        time.advance(by: 15)  // 25 s left
        let waiting = Task { try await cache.credentials() }
        await waits.wait(for: 1)
        #expect(cache.validCredentials == nil)
        held.release(.success(Self.credentials("new", expiresIn: 3600)))
        #expect(try await waiting.value.accessKeyId == "new")
        #expect(try await cache.credentials().accessKeyId == "new")
        #expect(held.calls == 1)
    }

    @Test("an expired credential is not handed out: the caller waits for the renewal")
    func expiredCredentialWaits() async throws {
        let held = HeldRenewal()
        let waits = Signals()
        let answered = Flag()
        let cache = CredentialCache(
            Self.credentials("old", expiresIn: 10), minimumValidity: 10, now: ManualTime(Self.start).now,
            waiting: { waits.signal() }, renew: { try await held.renew() })
        let caller = Task {
            let credentials = try await cache.credentials()
            answered.set()
            return credentials
        }
        await waits.wait(for: 1)
        await held.began()
        #expect(!answered.value, "the caller got an answer before the renewal ended")
        held.release(.success(Self.credentials("new", expiresIn: 3600)))
        #expect(try await caller.value.accessKeyId == "new")
    }

    @Test("a cache with nothing in it renews on first use")
    func emptyRenewsFirst() async throws {
        let calls = CallCounter()
        let cache = CredentialCache(now: ManualTime(Self.start).now) {
            await calls.increment()
            return Self.credentials("first", expiresIn: 3600)
        }
        #expect(cache.validCredentials == nil)
        #expect(try await cache.credentials().accessKeyId == "first")
        #expect(try await cache.credentials().accessKeyId == "first")
        #expect(await calls.count == 1)
        #expect(cache.validCredentials?.accessKeyId == "first")
    }

    @Test("a failed renewal throws its error to every caller waiting for it; the next caller tries again")
    func failedRenewalIsTriedAgain() async throws {
        let held = HeldRenewal()
        let waits = Signals()
        let cache = CredentialCache(
            Self.credentials("old", expiresIn: -1), now: ManualTime(Self.start).now, waiting: { waits.signal() },
            renew: { try await held.renew() })
        let outcomes = await withTaskGroup(of: Result<Credentials, any Error>.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    do { return .success(try await cache.credentials()) } catch { return .failure(error) }
                }
            }
            await waits.wait(for: 2)
            await held.began()
            held.release(.failure(Refused(attempt: 1)))
            return await group.reduce(into: [Result<Credentials, any Error>]()) { $0.append($1) }
        }
        #expect(outcomes.count == 2)
        for outcome in outcomes {
            #expect(throws: Refused(attempt: 1)) { try outcome.get() }
        }
        #expect(held.calls == 1)
        // Nothing was kept from the failure: the next caller starts a new renewal.
        held.release(.success(Self.credentials("new", expiresIn: 3600)))
        #expect(try await cache.credentials().accessKeyId == "new")
        #expect(held.calls == 2)
    }

    @Test("a background renewal that fails leaves the valid credential in use, and the next caller renews again")
    func failedBackgroundRenewal() async throws {
        let time = ManualTime(Self.start)
        let held = HeldRenewal()
        let waits = Signals()
        let old = Self.credentials("old", expiresIn: 100)
        let cache = CredentialCache(
            old, renewAhead: 120, now: time.now, waiting: { waits.signal() }, renew: { try await held.renew() })
        #expect(try await cache.credentials() == old)
        await held.began()
        // A caller that finds the credential expired meanwhile waits for the renewal and hears how it ended.
        time.advance(by: 200)
        let late = Task { try await cache.credentials() }
        await waits.wait(for: 1)
        held.release(.failure(Refused(attempt: 1)))
        await #expect(throws: Refused(attempt: 1)) { try await late.value }
        // The old credential was kept: valid again by the clock, it is handed out while a new renewal runs.
        time.advance(by: -200)
        held.hold()
        #expect(try await cache.credentials() == old)
        await held.began()
        #expect(held.calls == 2)
        held.release(.success(Self.credentials("new", expiresIn: 3600)))
        #expect(try await cache.renew(after: old).accessKeyId == "new")
    }

    @Test("renew(after:) hands out a credential other than the refused one without renewing, else renews once for all")
    func renewAfterRefusal() async throws {
        let held = HeldRenewal()
        let waits = Signals()
        let old = Self.credentials("old", expiresIn: 3600)
        let cache = CredentialCache(
            old, now: ManualTime(Self.start).now, waiting: { waits.signal() }, renew: { try await held.renew() })
        // Refused with something older than what is held: what is held is the answer.
        #expect(try await cache.renew(after: Self.credentials("older", expiresIn: 3600)) == old)
        #expect(held.calls == 0)
        // The held one refused, though its expiry says it is valid: renewed, once for all who ask meanwhile.
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<3 { group.addTask { try await cache.renew(after: old).accessKeyId } }
            await waits.wait(for: 3)
            await held.began()
            held.release(.success(Self.credentials("new", expiresIn: 3600)))
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(results == ["new", "new", "new"])
        #expect(held.calls == 1)
        #expect(try await cache.renew(after: old).accessKeyId == "new")
        #expect(held.calls == 1)
    }

    @Test("a credential refused while it is served during a background renewal is served no more")
    func refusedDuringBackgroundRenewal() async throws {
        let time = ManualTime(Self.start)
        let held = HeldRenewal()
        let waits = Signals()
        let old = Self.credentials("old", expiresIn: 100)
        let cache = CredentialCache(
            old, renewAhead: 120, now: time.now, waiting: { waits.signal() }, renew: { try await held.renew() })
        #expect(try await cache.credentials() == old)
        await held.began()
        let refused = Task { try await cache.renew(after: old) }
        await waits.wait(for: 1)
        #expect(cache.validCredentials == nil)
        let other = Task { try await cache.credentials() }
        await waits.wait(for: 2)
        held.release(.success(Self.credentials("new", expiresIn: 3600)))
        #expect(try await refused.value.accessKeyId == "new")
        #expect(try await other.value.accessKeyId == "new")
        #expect(held.calls == 1)
    }

    @Test("a credential handed over during a renewal is kept; the renewal only answers those waiting for it")
    func replaceDuringRenewal() async throws {
        let held = HeldRenewal()
        let waits = Signals()
        let cache = CredentialCache(
            Self.credentials("old", expiresIn: -1), now: ManualTime(Self.start).now, waiting: { waits.signal() },
            renew: { try await held.renew() })
        let waiting = Task { try await cache.credentials() }
        await waits.wait(for: 1)
        await held.began()
        cache.replace(with: Self.credentials("handed", expiresIn: 3600))
        #expect(cache.validCredentials?.accessKeyId == "handed")
        held.release(.success(Self.credentials("renewed", expiresIn: 3600)))
        #expect(try await waiting.value.accessKeyId == "renewed")
        #expect(try await cache.credentials().accessKeyId == "handed")
        #expect(held.calls == 1)
    }

    @Test("expiry is judged by the injected time: a credential without one never expires")
    func injectedTime() async throws {
        let time = ManualTime(Self.start)
        let calls = CallCounter()
        let cache = CredentialCache(Self.credentials("old", expiresIn: 60), minimumValidity: 10, now: time.now) {
            await calls.increment()
            return Credentials(accessKeyId: "long-term", secretAccessKey: "s")
        }
        time.advance(by: 49)  // 11 s left
        #expect(try await cache.credentials().accessKeyId == "old")
        time.advance(by: 1)  // 10 s left: not enough
        #expect(try await cache.credentials().accessKeyId == "long-term")
        time.advance(by: 1_000_000)
        #expect(try await cache.credentials().accessKeyId == "long-term")
        #expect(await calls.count == 1)
    }
}
