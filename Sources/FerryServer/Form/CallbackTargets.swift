#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NIOPosix

/// Which addresses the server may call back (a form upload's `callbackUrl`): by default only public ones, so that an
/// upload token cannot point the server at itself, its host's loopback, a private network or a cloud metadata
/// address. The operator can allow hosts or networks explicitly.
///
/// The host is resolved once; every address it resolves to must be allowed, and the connection then goes to the
/// address that was checked (the name is kept for TLS), so a name that changes its answer between the check and the
/// connection gains nothing.
struct CallbackTargets: Sendable {
    /// Host names (case-insensitive) and networks (`10.1.0.0/16`, `fd00::/8`, or a single address) the operator
    /// allows even though they are not public.
    let allowedHosts: Set<String>
    let allowedNetworks: [Network]

    /// Reads `--callback-allow` entries: host names, addresses, or CIDR networks; throws for a malformed network.
    init(allow entries: [String]) throws {
        var hosts: Set<String> = []
        var networks: [Network] = []
        for entry in entries.map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            if let network = Network(entry) {
                networks.append(network)
            } else if entry.contains("/") {
                throw CallbackTargetsError(message: "--callback-allow '\(entry.prefix(64))' is not a network such as 10.0.0.0/8.")
            } else {
                hosts.insert(entry.lowercased())
            }
        }
        allowedHosts = hosts
        allowedNetworks = networks
    }

    /// The address to connect to for `host`, or nil when the target is refused (unresolvable, or resolving to an
    /// address that is neither public nor allowed).
    func address(for host: String) async -> String? {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let addresses: [[UInt8]]
        if let literal = Network.bytes(of: bare) {
            addresses = [literal]
        } else {
            guard let resolved = try? await NIOThreadPool.singleton.runIfActive({ Self.resolve(bare) }), !resolved.isEmpty
            else { return nil }
            addresses = resolved
        }
        let hostAllowed = allowedHosts.contains(bare.lowercased())
        let own = Self.ownAddresses()
        for address in addresses {
            let explicitlyAllowed = hostAllowed || allowedNetworks.contains { $0.contains(address) }
            if !explicitlyAllowed && (!Network.isPublic(address) || own.contains(address)) { return nil }
        }
        return Network.string(addresses[0])
    }

    /// Every address a host name resolves to, as bytes (4 or 16).
    static func resolve(_ host: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        return sequence(first: first) { $0.pointee.ai_next }
            .compactMap { $0.pointee.ai_addr.flatMap { Network.bytes(of: $0) } }
    }

    /// The addresses of this host's interfaces (the service's own addresses, whatever it is bound to).
    static func ownAddresses() -> Set<[UInt8]> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(first) }
        return Set(
            sequence(first: first) { $0.pointee.ifa_next }
                .compactMap { $0.pointee.ifa_addr.flatMap { Network.bytes(of: $0) } })
    }

    /// An IPv4 or IPv6 network: a prefix of an address's bytes.
    struct Network: Sendable, Hashable {
        var bytes: [UInt8]
        var prefixLength: Int

        /// Parses `address` or `address/length`.
        init?(_ text: String) {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.bytes(of: String(parts[0])) else { return nil }
            let length = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let length, (0...(bytes.count * 8)).contains(length) else { return nil }
            self.bytes = bytes
            self.prefixLength = length
        }

        init(_ bytes: [UInt8], _ prefixLength: Int) {
            self.bytes = bytes
            self.prefixLength = prefixLength
        }

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else {
                // An IPv4-mapped IPv6 address is its IPv4 address.
                if address.count == 16, let v4 = Network.mappedIPv4(address) { return contains(v4) }
                return false
            }
            var remaining = prefixLength
            for (a, b) in zip(address, bytes) where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if a & mask != b & mask { return false }
                remaining -= bits
            }
            return true
        }

        /// Networks no callback may reach unless allowed: unspecified, loopback, private, shared (CGNAT),
        /// link-local (with cloud metadata), benchmarking, documentation, multicast and reserved ranges, and the IPv6
        /// ranges that carry an IPv4 address a relay or tunnel may deliver to (IPv4-compatible `::a.b.c.d`,
        /// IPv4-translated `::ffff:0:a.b.c.d`, NAT64, 6to4, Teredo), whatever IPv4 address they carry.
        static let nonPublic: [Network] = [
            "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
            "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
            "224.0.0.0/4", "240.0.0.0/4", "::/96", "::1/128", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
            "2001::/32", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
        ].compactMap(Network.init)

        static func isPublic(_ address: [UInt8]) -> Bool {
            if address.count == 16, let v4 = mappedIPv4(address) { return isPublic(v4) }
            return !nonPublic.contains { $0.contains(address) }
        }

        /// The IPv4 address inside `::ffff:a.b.c.d`.
        static func mappedIPv4(_ address: [UInt8]) -> [UInt8]? {
            guard address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF
            else { return nil }
            return Array(address[12...])
        }

        /// The bytes of a textual IPv4 or IPv6 address.
        static func bytes(of text: String) -> [UInt8]? {
            var v4 = in_addr()
            if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
            var v6 = in6_addr()
            if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
            return nil
        }

        static func bytes(of address: UnsafePointer<sockaddr>) -> [UInt8]? {
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    var value = pointer.pointee.sin_addr
                    return withUnsafeBytes(of: &value) { Array($0) }
                }
            case AF_INET6:
                return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    var value = pointer.pointee.sin6_addr
                    return withUnsafeBytes(of: &value) { Array($0) }
                }
            default:
                return nil
            }
        }

        static func string(_ bytes: [UInt8]) -> String {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let family = bytes.count == 4 ? AF_INET : AF_INET6
            _ = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

/// A `--callback-allow` entry that cannot be read.
struct CallbackTargetsError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
