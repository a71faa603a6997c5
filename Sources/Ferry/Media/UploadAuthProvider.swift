import FerryCore
import Foundation

/// Credentials for one media upload: the `UploadAuth` the service issued, refreshed (through a closure that calls
/// RefreshUploadVideo, typically) shortly before it expires or when the server says it has.
///
/// A refresh is single-flight: the parts in flight that need one at the same moment share one call of `refresh`.
public actor UploadAuthProvider: CredentialProvider {
    private let cache: CredentialCache
    /// Refresh when the credential has less than this left. Default 60 s.
    public let margin: TimeInterval
    /// From how long before its expiry a credential is refreshed in the background while it is still handed out.
    /// Never less than ``margin``; equal to it (no background refresh) unless given.
    public let renewAhead: TimeInterval

    /// Starts with `auth` and gets the next one from `refresh`.
    ///
    /// - Parameters:
    ///   - auth: the credential the service issued with the upload address.
    ///   - margin: how long before its expiry a credential is renewed. Default 60 s.
    ///   - renewAhead: how long before its expiry a renewal starts in the background while the credential is still
    ///     handed out, so parts do not wait for it. Default nil: the same as `margin` (parts wait for the renewal).
    ///   - now: the time of day expiry is judged by. Default: the services' time as the device knows it
    ///     (``ServiceClock``; tests pass their own).
    ///   - refresh: gets the next credential, typically by calling RefreshUploadVideo.
    public init(
        auth: UploadAuth, margin: TimeInterval = 60, renewAhead: TimeInterval? = nil,
        now: @escaping @Sendable () -> Date = { ServiceClock.now() },
        refresh: @escaping @Sendable () async throws -> UploadAuth
    ) {
        self.margin = margin
        self.renewAhead = max(renewAhead ?? margin, margin)
        cache = CredentialCache(
            auth.ferryCredentials, minimumValidity: margin, renewAhead: self.renewAhead, now: now,
            renew: { try await refresh().ferryCredentials })
    }

    /// The current credential, renewed first when it is within ``margin`` of its expiry (before the service refuses
    /// it, not after), and in the background once it is within ``renewAhead``.
    public func credentials() async throws -> Credentials {
        try await cache.credentials()
    }
}
