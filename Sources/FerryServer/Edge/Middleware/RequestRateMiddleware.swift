import FerryCore
import Hummingbird

/// The access key's request-rate quota, after authentication: a key (or a temporary credential of it) past its
/// `RequestsPerSecond` on this node is refused with `requestRateExceeded` and a `Retry-After` — S3's `503 SlowDown`,
/// the media API's and the publish API's `503 Throttling` — before the route reads anything.
///
/// Routes whose principal is resolved inside the route take the same turn with ``take(_:from:)`` once it is: a browser
/// POST upload once its form's signature is checked, a form upload once its upload token verifies (Qiniu's `573`), a
/// resumable upload's creation once its credential is checked and every later request of the upload (its URL is the
/// credential) as its owner's. The console's routes take none: their caller is a person signed in with a session cookie
/// (usually as the root key, which has no quota), whose sign-ins are counted on their own, not a client to be
/// throttled.
struct RequestRateMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let limiter: RequestRateLimiter

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let principal = context.caller?.principal { try Self.take(principal, from: limiter) }
        return try await next(request, context)
    }

    /// Takes a turn of `principal`'s key; throws `requestRateExceeded` past its `RequestsPerSecond`. A request whose
    /// credential is in its body (a browser POST upload, a form upload's token) takes it once that credential is
    /// checked.
    static func take(_ principal: Principal, from limiter: RequestRateLimiter) throws {
        try take(key: principal.parentAccessKeyId, quota: principal.quota, from: limiter)
    }

    /// Takes a turn of the long-term key `key` with the quota `quota` (a resumable upload's owner, whose URL is the
    /// credential of the requests after its creation).
    static func take(key: String, quota: AccessKeyQuota, from limiter: RequestRateLimiter) throws {
        if let rate = quota.requestsPerSecond, let wait = limiter.take(key: key, rate: rate) {
            throw FerryDomainError.requestRateExceeded(retryAfter: wait)
        }
    }
}
