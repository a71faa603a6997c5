import FerryCore
import Foundation

/// Credentials for one media upload: the `UploadAuth` the service issued, refreshed (through a closure that calls
/// RefreshUploadVideo, typically) shortly before it expires or when the server says it has.
public actor UploadAuthProvider: CredentialProvider {
    private var current: Credentials
    private let refresh: @Sendable () async throws -> UploadAuth
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
        if current.isExpired(margin: margin) {
            current = try await refresh().ferryCredentials
        }
        return current
    }
}
