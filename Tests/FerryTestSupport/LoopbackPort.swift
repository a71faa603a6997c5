import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Ports on 127.0.0.1 for peers that must be told a port before they start (moto, PostgreSQL, HAProxy, SeaweedFS).
public enum LoopbackPort {
    /// A port nothing listens on now, below the kernel's ephemeral range.
    ///
    /// A port taken by binding port 0 and released comes from the ephemeral range, where the kernel hands out ports to
    /// every server started on port 0 and every outgoing connection: with tests running side by side, another test's
    /// server could take it before the peer binds it, and the test would then talk to the wrong server. Ports below
    /// the range are never handed out that way; one is picked at random and checked free by binding it.
    ///
    /// A port is handed out once per test process: a peer binds its port some time after it is told it (SeaweedFS's
    /// volume server only once its master has elected itself), and in that time the port is still free to a check
    /// made for another peer starting side by side.
    public static func unused() throws -> Int {
        let ephemeralStart = ephemeralRange()?.lowerBound ?? 32768
        let candidates = 10_000..<max(10_001, ephemeralStart)
        for _ in 0..<200 {
            let port = Int.random(in: candidates)
            guard handedOut.withLockedValue({ $0.insert(port).inserted }) else { continue }
            if try isFree(port) { return port }
        }
        throw POSIXError(.EADDRINUSE)
    }

    /// Every port ``unused()`` has returned or found taken in this process.
    private static let handedOut = NIOLockedValueBox<Set<Int>>([])

    /// The kernel's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range), when it can be read.
    static func ephemeralRange() -> ClosedRange<Int>? {
        guard let handle = FileHandle(forReadingAtPath: "/proc/sys/net/ipv4/ip_local_port_range") else { return nil }
        defer { try? handle.close() }
        let numbers = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
            .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        guard numbers.count == 2, numbers[0] <= numbers[1] else { return nil }
        return numbers[0]...numbers[1]
    }

    /// Whether `port` can be bound on 127.0.0.1 now.
    static func isFree(_ port: Int) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
