import Foundation
import NIOCore
import NIOPosix

extension FerryServer {
    /// Why `port` on `host` cannot be listened on now, in an operator's words; nil when it can, or when `port` is 0
    /// (the system picks a free one). `ferry serve` asks before it opens anything, so that a port another program
    /// holds is said plainly, before a root key is made or a service starts. (Another program can still take the port
    /// in between: the server's own bind then fails as before.)
    ///
    /// The check binds a socket as the server does (with `SO_REUSEADDR`, which still refuses an address a socket
    /// listens on) and never listens: a client connecting meanwhile (a readiness probe of a restarting server) is
    /// refused, not accepted and then reset when the check closes.
    public static func listenProblem(host: String, port: Int) async -> String? {
        guard port != 0 else { return nil }
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            return "the host name cannot be resolved"
        }
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = SOCK_STREAM
        #endif
        let descriptor = socket(Int32(address.protocol.rawValue), stream, 0)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        defer { close(descriptor) }
        var reuse: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        let bound = address.withSockAddr { pointer, length in bind(descriptor, pointer, socklen_t(length)) }
        guard bound != 0 else { return nil }
        switch errno {
        case EADDRINUSE: return "another program listens there (a ferry serve already running?)"
        case EACCES: return "permission denied (ports below 1024 need privileges)"
        case EADDRNOTAVAIL: return "no network interface of this machine has that address"
        case let code: return String(cString: strerror(code))
        }
    }
}
