import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plain TCP connection to 127.0.0.1, for sending bytes no HTTP client would (a body cut short).
public enum RawSocket {
    /// Connects, sends `bytes`, and closes the connection.
    public static func sendAndClose(port: Int, _ bytes: [UInt8]) throws {
        let fd = try connect(port: port)
        defer { close(fd) }
        try write(fd, bytes)
    }

    /// Opens a connection, from `source` (another loopback address, as 127.0.0.2) when given.
    public static func connect(port: Int, from source: String? = nil) throws -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                close(fd)
                throw POSIXError(.init(rawValue: errno) ?? .EADDRNOTAVAIL)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .ECONNREFUSED)
        }
        return fd
    }

    /// Writes all bytes.
    public static func write(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            sent += n
        }
    }

    /// An HTTP/1.1 request head.
    public static func requestHead(_ method: String, _ target: String, _ headers: [(name: String, value: String)]) -> String {
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        return text + "\r\n"
    }

    /// Whether `bytes` hold a whole response head and its Content-Length body.
    public static func isCompleteResponse(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return false }
        let head = text[..<end.lowerBound].lowercased()
        let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        return text.utf8.distance(from: end.upperBound, to: text.endIndex) >= length
    }

    /// Reads until `done` says so, EOF (error nil), a socket error (its errno) or `timeout` passes (ETIMEDOUT). Polls
    /// without blocking, so that servers in the same process keep running on the cooperative pool meanwhile.
    public static func receive(
        _ socket: Int32, timeout: Duration = .seconds(10), until done: ([UInt8]) -> Bool
    ) async -> (bytes: [UInt8], error: Int32?) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let n = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                bytes += buffer[..<n]
                if done(bytes) { return (bytes, nil) }
            } else if n == 0 {
                return (bytes, nil)
            } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try? await Task.sleep(for: .milliseconds(5))
            } else {
                return (bytes, errno)
            }
        }
        return (bytes, ETIMEDOUT)
    }
}
