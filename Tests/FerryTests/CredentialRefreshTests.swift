import FerryCore
import Foundation
import FerryTestSupport
import Testing

@testable import Ferry

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
        let calls = CallCounter()
        let provider = UploadAuthProvider(auth: Self.auth(expiresIn: 10, id: "old"), margin: 60) {
            await calls.increment()
            try await Task.sleep(for: .milliseconds(100))
            return Self.auth(expiresIn: 3600, id: "new")
        }
        let results = try await withThrowingTaskGroup(of: Credentials.self) { group in
            for _ in 0..<4 { group.addTask { try await provider.credentials() } }
            return try await group.reduce(into: [Credentials]()) { $0.append($1) }
        }
        #expect(results.count == 4 && results.allSatisfy { $0.accessKeyId == "new" })
        #expect(await calls.count == 1)
        // Fresh now: no more refreshes.
        #expect(try await provider.credentials().accessKeyId == "new")
        #expect(await calls.count == 1)
    }

    @Test("requests refused together as expired share one call of the provider; later ones get its answer")
    func credentialSource() async throws {
        let calls = CallCounter()
        let stale = Credentials(accessKeyId: "old", secretAccessKey: "s", sessionToken: "t", expiration: Date().addingTimeInterval(-1))
        let fresh = Credentials(accessKeyId: "new", secretAccessKey: "s", sessionToken: "t", expiration: Date().addingTimeInterval(3600))
        let source = CredentialSource(provider: ClosureCredentialProvider {
            await calls.increment()
            try await Task.sleep(for: .milliseconds(100))
            return fresh
        })
        let results = try await withThrowingTaskGroup(of: Credentials?.self) { group in
            for _ in 0..<4 { group.addTask { try await source.refresh(after: stale) } }
            return try await group.reduce(into: [Credentials?]()) { $0.append($1) }
        }
        #expect(results == [fresh, fresh, fresh, fresh])
        #expect(await calls.count == 1)
        #expect(try await source.refresh(after: stale) == fresh)
        #expect(await calls.count == 1)
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
}
