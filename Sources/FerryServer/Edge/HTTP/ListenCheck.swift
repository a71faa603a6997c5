import Foundation
import NIOCore
import NIOPosix

extension FerryServer {
    /// Why `port` on `host` cannot be listened on now, in an operator's words; nil when it can, or when `port` is 0
    /// (the system picks a free one). `ferry serve` asks before it opens anything, so that a port another program
    /// holds is said plainly, before a root key is made or a service starts. (Another program can still take the port
    /// in between: the server's own bind then fails as before.)
    public static func listenProblem(host: String, port: Int) async -> String? {
        guard port != 0 else { return nil }
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port).get()
            try? await channel.close()
            return nil
        } catch let error as IOError {
            switch error.errnoCode {
            case EADDRINUSE: return "another program listens there (a ferry serve already running?)"
            case EACCES: return "permission denied (ports below 1024 need privileges)"
            case EADDRNOTAVAIL: return "no network interface of this machine has that address"
            default: return String(cString: strerror(error.errnoCode))
            }
        } catch is SocketAddressError {
            return "the host name cannot be resolved"
        } catch {
            return "\(error)"
        }
    }
}
