import Hummingbird
import NIOCore

/// What Ferry's edge knows of a request as it passes through the middleware to its route: Hummingbird's core context,
/// the connection (to send `100 Continue` once the request is allowed), the request id every dialect reports, and
/// who made the request once an authentication middleware has said so.
struct FerryRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection the request came on.
    let channel: any Channel
    /// The client's address: the connection's peer, or with `--trusted-proxy`, the address the trusted proxy in front
    /// saw (set by ``ForwardedClientMiddleware``).
    var clientAddress: String?
    /// Whether a trusted proxy in front says the client reached it over https (`X-Forwarded-Proto: https`, set by
    /// ``ForwardedClientMiddleware``): the URLs built on the request's `Host` are then `https`.
    var forwardedHTTPS = false
    /// The id of this request, in every answer (`x-amz-request-id`, `RequestId`, `requestId`) and log record.
    let requestId: String
    /// Who made the request, set by the route group's authentication middleware; nil before it (and on routes that
    /// take no credential).
    var caller: Caller?
    /// The endpoint the request reached, from its `Host` once ``AuthorityMiddleware`` accepted it.
    var requestEndpoint: PublicEndpoint?
    /// What the route group that answers tells the metrics middleware (its name, the object API's operation).
    let observation = RequestObservation()

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
        clientAddress = source.channel.remoteAddress?.ipAddress
        requestId = Self.newRequestId()
    }

    /// 16 hex digits, as S3's request ids.
    static func newRequestId() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next() as UInt64
        let hex = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Lets a client that sent `Expect: 100-continue` send its body.
    func sendContinue() async {
        await channel.sendContinue()
    }

    /// The endpoint the request reached; a route group without ``AuthorityMiddleware`` has none, and is refused.
    func endpoint() throws -> PublicEndpoint {
        guard let requestEndpoint else { throw FerryDomainError(.invalidHost, "The request has no valid Host header.") }
        return requestEndpoint
    }

    /// The caller, or the refusal of a request that reached a route needing one without it (a route set up without
    /// its authentication middleware).
    func requireCaller() throws -> Caller {
        guard let caller else {
            throw FerryDomainError(.anonymous, "The request carries no credential this endpoint accepts.")
        }
        return caller
    }
}
