import FerryCore
import Foundation
import FerryTestSupport
import Testing

@testable import Ferry

/// A renewal the test holds until it releases it, and that says when it began.
final class HeldRenewal: @unchecked Sendable {
    // Every access to the mutable state holds `lock`.
    private let lock = NSLock()
    private var count = 0
    /// What held and later calls end with; nil while they are held.
    private var outcome: Result<Credentials, any Error>?
    private var held: [CheckedContinuation<Result<Credentials, any Error>, Never>] = []
    private let beginnings = Signals()
    /// Beginnings ``began()`` waited for so far.
    private var awaited = 0

    static func credentials(_ id: String, expiresIn seconds: TimeInterval, from start: Date = Date()) -> Credentials {
        Credentials(
            accessKeyId: id, secretAccessKey: "secret-\(id)", sessionToken: "token-\(id)",
            expiration: start.addingTimeInterval(seconds))
    }

    /// How many renewals began.
    var calls: Int { lock.withLock { count } }

    /// The renewal: counts itself, says it began, and waits for ``release(_:)`` (or ends at once after one).
    func renew() async throws -> Credentials {
        let result = await withCheckedContinuation { continuation in
            let ready = lock.withLock { () -> Result<Credentials, any Error>? in
                count += 1
                if outcome == nil { held.append(continuation) }
                return outcome
            }
            beginnings.signal()
            if let ready { continuation.resume(returning: ready) }
        }
        return try result.get()
    }

    /// Waits until a renewal has begun (one more each time it is called).
    func began() async {
        let count = lock.withLock { () -> Int in
            awaited += 1
            return awaited
        }
        #expect(await beginnings.wait(for: count), "no renewal began")
    }

    /// Ends the held renewals with `outcome`, and any that begin later at once.
    func release(_ outcome: Result<Credentials, any Error>) {
        let waiting = lock.withLock { () -> [CheckedContinuation<Result<Credentials, any Error>, Never>] in
            self.outcome = outcome
            defer { held = [] }
            return held
        }
        for continuation in waiting { continuation.resume(returning: outcome) }
    }

    /// Holds the renewals that begin from now on until the next ``release(_:)``.
    func hold() { lock.withLock { outcome = nil } }
}

/// Counts calls, for providers under test.
actor CallCounter {
    private(set) var count = 0
    func increment() { count += 1 }
}

@Suite("Credential refresh is single-flight", .timeLimit(.minutes(10)))
struct CredentialRefreshTests {
    static func auth(expiresIn seconds: TimeInterval, id: String) -> UploadAuth {
        UploadAuth(
            accessKeyId: id, accessKeySecret: "secret-\(id)", securityToken: "token-\(id)",
            expiration: Date().addingTimeInterval(seconds), region: "us-east-1")
    }

    @Test("parts in flight that find the upload credential about to expire share one RefreshUploadVideo")
    func uploadAuthProvider() async throws {
        let held = HeldRenewal()
        let provider = UploadAuthProvider(auth: Self.auth(expiresIn: 10, id: "old"), margin: 60) {
            let fresh = try await held.renew()
            return UploadAuth(
                accessKeyId: fresh.accessKeyId, accessKeySecret: fresh.secretAccessKey,
                securityToken: fresh.sessionToken ?? "", expiration: fresh.expiration ?? Date(), region: "us-east-1")
        }
        let results = try await withThrowingTaskGroup(of: Credentials.self) { group in
            for _ in 0..<4 { group.addTask { try await provider.credentials() } }
            // The refresh runs until the test lets it end; the other parts ask meanwhile or after.
            await held.began()
            held.release(.success(HeldRenewal.credentials("new", expiresIn: 3600)))
            return try await group.reduce(into: [Credentials]()) { $0.append($1) }
        }
        #expect(results.count == 4 && results.allSatisfy { $0.accessKeyId == "new" })
        #expect(held.calls == 1)
        // Fresh now: no more refreshes.
        #expect(try await provider.credentials().accessKeyId == "new")
        #expect(held.calls == 1)
    }

    @Test("requests refused together as expired share one call of the provider; later ones get its answer")
    func credentialSource() async throws {
        let held = HeldRenewal()
        let stale = Credentials(accessKeyId: "old", secretAccessKey: "s", sessionToken: "t", expiration: Date().addingTimeInterval(-1))
        let fresh = HeldRenewal.credentials("new", expiresIn: 3600)
        let source = CredentialSource(provider: ClosureCredentialProvider { try await held.renew() })
        let results = try await withThrowingTaskGroup(of: Credentials?.self) { group in
            for _ in 0..<4 { group.addTask { try await source.refresh(after: stale) } }
            await held.began()
            held.release(.success(fresh))
            return try await group.reduce(into: [Credentials?]()) { $0.append($1) }
        }
        #expect(results == [fresh, fresh, fresh, fresh])
        #expect(held.calls == 1)
        #expect(try await source.refresh(after: stale) == fresh)
        #expect(held.calls == 1)
    }

    @Test("credentials handed over with resume(with:) are signed with until refused; then the provider's replace them, also after an earlier refresh")
    func credentialSourceOverride() async throws {
        let calls = CallCounter()
        let provided = HeldRenewal.credentials("provided", expiresIn: 3600)
        let source = CredentialSource(provider: ClosureCredentialProvider {
            await calls.increment()
            return provided
        })
        // An earlier refusal, answered by the provider.
        let first = Credentials(accessKeyId: "first", secretAccessKey: "s", sessionToken: "t", expiration: Date())
        #expect(try await source.refresh(after: first) == provided)
        #expect(await calls.count == 1)
        let handed = HeldRenewal.credentials("handed", expiresIn: 3600)
        await source.set(handed)
        #expect(try await source.current() == handed)
        // Refused with older credentials: the handed-over ones are the replacement, without asking the provider.
        #expect(try await source.refresh(after: provided) == handed)
        #expect(await calls.count == 1)
        // The handed-over ones refused: the provider's replace them, and are signed with from then on (not the
        // handed-over ones again, which would be refused again for ever).
        #expect(try await source.refresh(after: handed) == provided)
        #expect(await calls.count == 2)
        #expect(try await source.current() == provided)
    }

    @Test("an upload credential is renewed shortly before it expires, by the injected time of day, with no real wait")
    func refreshAheadByInjectedTime() async throws {
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        let time = ManualTime(start)
        let calls = CallCounter()
        let first = UploadAuth(
            accessKeyId: "old", accessKeySecret: "s", securityToken: "t", expiration: start.addingTimeInterval(120),
            region: "us-east-1")
        let provider = UploadAuthProvider(auth: first, margin: 60, now: time.now) {
            await calls.increment()
            return UploadAuth(
                accessKeyId: "new", accessKeySecret: "s", securityToken: "t", expiration: start.addingTimeInterval(3600),
                region: "us-east-1")
        }
        #expect(try await provider.credentials().accessKeyId == "old")
        time.advance(by: 59)  // 61 s left: more than the margin
        #expect(try await provider.credentials().accessKeyId == "old")
        #expect(await calls.count == 0)
        time.advance(by: 2)  // 59 s left: renewed now, before the service would refuse it
        #expect(try await provider.credentials().accessKeyId == "new")
        #expect(await calls.count == 1)
        #expect(try await provider.credentials().accessKeyId == "new")
        #expect(await calls.count == 1)
    }

    @Test("after a refusal, a provider's answer already past its expiry by the injected time is not used")
    func expiryJudgedByInjectedTime() async throws {
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        let time = ManualTime(start)
        let stale = Credentials(accessKeyId: "old", secretAccessKey: "s", sessionToken: "t", expiration: start)
        let offered = Credentials(
            accessKeyId: "new", secretAccessKey: "s", sessionToken: "t", expiration: start.addingTimeInterval(600))
        let source = CredentialSource(provider: StaticCredentialProvider(offered), now: time.now)
        time.advance(by: 601)
        #expect(try await source.refresh(after: stale) == nil)
        let early = CredentialSource(provider: StaticCredentialProvider(offered), now: ManualTime(start).now)
        #expect(try await early.refresh(after: stale) == offered)
    }

    @Test("a server that refuses every fresh credential as expired is believed after three refreshes: the call fails credentialsExpired")
    func refreshesAreBounded() async throws {
        let transport = ScriptedTransport([ScriptedTransport.s3Error(403, "ExpiredToken")])
        let calls = CallCounter()
        let provider = ClosureCredentialProvider {
            await calls.increment()
            let n = await calls.count
            return Credentials(
                accessKeyId: "AKID\(n)", secretAccessKey: "s", sessionToken: "t\(n)",
                expiration: Date().addingTimeInterval(3600))
        }
        let client = ObjectStorageClient(
            endpoint: RetryPipelineTests.endpoint, credentialProvider: provider,
            configuration: RetryPipelineTests.configuration(transport, RecordingClock()))
        do {
            _ = try await client.putObject([1], bucket: "b", key: "k", checksumAlgorithm: nil)
            Issue.record("answered as stored")
        } catch {
            #expect(error.code == .credentialsExpired)
        }
        #expect(transport.count == 1 + ObjectStorageClient.maxRefreshes, "one request, then one per fresh credential")
    }
}
