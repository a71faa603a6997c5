import Hummingbird
import NIOCore

/// The request context of Ferry's server: Hummingbird's core context and the connection the request came on (to send
/// a `100 Continue` once the request is allowed).
struct FerryRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
