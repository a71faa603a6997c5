import FerryCore
import Foundation

/// Credentials for one media upload: the `UploadAuth` the service issued, refreshed (through a closure that calls
/// RefreshUploadVideo, typically) shortly before it expires or when the server says it has.
///
/// A refresh is single-flight: the parts in flight that need one at the same moment share one call of `refresh`.
public actor UploadAuthProvider: CredentialProvider {
    private var current: Credentials
    private let refresh: @Sendable () async throws -> UploadAuth
    /// The refresh under way, which every caller arriving meanwhile waits for.
    private var refreshing: Task<Credentials, any Error>?
    /// Refresh when the credential has less than this left. Default 60 s.
    public let margin: TimeInterval
    /// The time of day expiry is judged by.
    private let now: @Sendable () -> Date

    /// Starts with `auth` and gets the next one from `refresh`.
    ///
    /// - Parameters:
    ///   - auth: the credential the service issued with the upload address.
    ///   - margin: how long before its expiry a credential is renewed. Default 60 s.
    ///   - now: the time of day expiry is judged by. Default: the system's time (tests pass their own).
    ///   - refresh: gets the next credential, typically by calling RefreshUploadVideo.
    public init(
        auth: UploadAuth, margin: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() },
        refresh: @escaping @Sendable () async throws -> UploadAuth
    ) {
        current = auth.ferryCredentials
        self.refresh = refresh
        self.margin = margin
        self.now = now
    }

    /// The current credential, renewed first when it is within ``margin`` of its expiry (before the service refuses
    /// it, not after).
    public func credentials() async throws -> Credentials {
        guard current.isExpired(at: now(), margin: margin) else { return current }
        if let refreshing { return try await refreshing.value }
        let refresh = self.refresh
        let task = Task { try await refresh().ferryCredentials }
        refreshing = task
        defer { refreshing = nil }
        current = try await task.value
        return current
    }
}
