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

    /// Starts with `auth` and gets the next one from `refresh`.
    public init(auth: UploadAuth, margin: TimeInterval = 60, refresh: @escaping @Sendable () async throws -> UploadAuth) {
        current = auth.ferryCredentials
        self.refresh = refresh
        self.margin = margin
    }

    /// The current credential, refreshed first when it is about to expire.
    public func credentials() async throws -> Credentials {
        guard current.isExpired(margin: margin) else { return current }
        if let refreshing { return try await refreshing.value }
        let refresh = self.refresh
        let task = Task { try await refresh().ferryCredentials }
        refreshing = task
        defer { refreshing = nil }
        current = try await task.value
        return current
    }
}
