import Hummingbird
import HTTPTypes

/// The proxies whose `X-Forwarded-For` the server believes (`--trusted-proxy`), and how a request's client address is
/// found: behind a load balancer every connection comes from the balancer, so the sign-in throttle and the access log
/// need the address the balancer saw.
struct TrustedProxies: Sendable {
    let networks: [CallbackTargets.Network]

    /// Reads `--trusted-proxy` entries: addresses or CIDR networks (`10.0.0.0/8`, `fd00::/8`); throws for anything
    /// else. An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is its IPv4 network, as peers are compared.
    init(_ entries: [String]) throws {
        networks = try entries.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { entry in
            guard let network = CallbackTargets.Network(entry) else {
                throw CallbackTargetsError(
                    message: "--trusted-proxy '\(entry.prefix(64))' is not an address or a network such as 10.0.0.0/8.")
            }
            if network.prefixLength >= 96, let v4 = CallbackTargets.Network.mappedIPv4(network.bytes) {
                return CallbackTargets.Network(v4, network.prefixLength - 96)
            }
            return network
        }
    }

    /// Entries of `X-Forwarded-For` looked at, nearest first; a chain longer than this ends at the last one looked at.
    static let maxHops = 16

    /// The client of a request that came from `peer`: the peer itself unless it is a trusted proxy; then, walking
    /// `X-Forwarded-For` from its end (the entry the nearest proxy added), the first address that is not a trusted
    /// proxy. An entry that is not an address ends the walk at the hop before it (what a client wrote there is not
    /// believed); a chain of trusted proxies only ends at its first address.
    func client(peer: String?, forwardedFor values: [String]) -> String? {
        guard let peer, isTrusted(peer) else { return peer }
        let hops = values.flatMap { $0.split(separator: ",") }.suffix(Self.maxHops).reversed()
        var client = peer
        for hop in hops {
            var address = hop.trimmingCharacters(in: .whitespaces)
            if address.hasPrefix("["), address.hasSuffix("]") { address = String(address.dropFirst().dropLast()) }
            guard let bytes = CallbackTargets.Network.bytes(of: address) else { break }
            client = CallbackTargets.Network.string(bytes)
            guard networks.contains(where: { $0.contains(bytes) }) else { break }
        }
        return client
    }

    /// Whether `address` is one of the trusted proxies.
    func isTrusted(_ address: String) -> Bool {
        guard let bytes = CallbackTargets.Network.bytes(of: address) else { return false }
        return networks.contains { $0.contains(bytes) }
    }
}

/// How limits per client address count an address.
enum ClientAddress {
    /// What limits per client address count `address` as: an IPv4 address itself (an IPv4-mapped IPv6 address as its
    /// IPv4 address), an IPv6 address by its /64, the network one subscriber is given, so that one client cannot pass
    /// a limit by taking new addresses from its own network.
    static func limitGroup(of address: String?) -> String? {
        guard let address, let bytes = CallbackTargets.Network.bytes(of: address) else { return address }
        if bytes.count == 4 { return address }
        if let v4 = CallbackTargets.Network.mappedIPv4(bytes) { return CallbackTargets.Network.string(v4) }
        return CallbackTargets.Network.string(Array(bytes[..<8]) + Array(repeating: 0, count: 8)) + "/64"
    }
}

/// Sets the request's client address (``FerryRequestContext/clientAddress``) from `X-Forwarded-For`, and whether the
/// client reached the proxy over https (``FerryRequestContext/forwardedHTTPS``) from `X-Forwarded-Proto`, when the
/// connection comes from a trusted proxy; in the stack only when `--trusted-proxy` names one.
struct ForwardedClientMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let proxies: TrustedProxies

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        if let peer = context.clientAddress, proxies.isTrusted(peer) {
            // The nearest proxy's word: the last value when several proxies appended theirs.
            let proto = request.headers[values: .xForwardedProto].flatMap { $0.split(separator: ",") }.last
            context.forwardedHTTPS = proto?.trimmingCharacters(in: .whitespaces).lowercased() == "https"
        }
        context.clientAddress = proxies.client(
            peer: context.clientAddress, forwardedFor: request.headers[values: .xForwardedFor])
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}
