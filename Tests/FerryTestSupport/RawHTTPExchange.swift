import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One HTTP/1.1 request and its answer on a connection of its own, with bytes exactly as a test wrote them (a Host no
/// client would send, a body that does not match its headers), read back without trusting the server to behave.
///
/// The socket never blocks: the request is written while the answer is read, so a server that answers before it has
/// read the whole body (and stops reading) is seen answering instead of leaving the writer stuck.
public enum RawHTTPExchange {
    /// What a test sends.
    public struct Request: Sendable {
        /// The request line and header lines, ending with the empty line.
        public var head: [UInt8]
        /// The body bytes, sent after the head (after `100 Continue` when ``waitsForContinue``).
        public var body: [UInt8]
        /// Whether the head asked `Expect: 100-continue`: the body then waits for `100 Continue`, or a second.
        public var waitsForContinue: Bool
        /// Whether the method is HEAD (the answer has no body whatever its headers say).
        public var isHead: Bool

        /// Creates a request.
        public init(head: [UInt8], body: [UInt8], waitsForContinue: Bool = false, isHead: Bool = false) {
            self.head = head
            self.body = body
            self.waitsForContinue = waitsForContinue
            self.isHead = isHead
        }
    }

    /// An answer as read from the wire.
    public struct Response: Sendable {
        /// The final status.
        public var status: Int
        /// Header fields in order, names as sent.
        public var headers: [(name: String, value: String)]
        /// The body, de-chunked.
        public var body: [UInt8]
        /// Interim (1xx) statuses before the final one.
        public var interim: [Int]
        /// Bytes after the end of the answer before the server closed the connection (for a HEAD request, a body
        /// the answer should not have had).
        public var trailingBytes: Int

        /// The first value of a header (case-insensitive name).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        /// The body as UTF-8 text (invalid bytes replaced).
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// How an exchange ended.
    public enum Outcome: Sendable {
        /// A complete answer.
        case answered(Response)
        /// The server closed (or reset) the connection before a complete answer: what arrived, and the socket error
        /// (nil for an orderly close).
        case closedWithoutAnswer(received: [UInt8], error: Int32?)
        /// No complete answer within the time limit.
        case timedOut(received: [UInt8])
        /// The connection could not be opened.
        case notConnected(error: Int32)
        /// The caller's `abandon` condition held before the answer was complete.
        case abandoned(received: [UInt8])
    }

    /// Sends `request` to 127.0.0.1:`port` and reads the answer.
    ///
    /// - Parameters:
    ///   - timeout: the longest wait for a complete answer.
    ///   - closeGrace: after a complete answer, how long to wait for the server to close the connection (to count
    ///     bytes it sent past the answer); zero returns at once.
    ///   - abandon: asked every 50 ms; true gives up (say, the server process died meanwhile).
    public static func send(
        port: Int, _ request: Request, timeout: Duration = .seconds(20), closeGrace: Duration = .zero,
        abandon: () -> Bool = { false }
    ) async -> Outcome {
        let fd: Int32
        do {
            fd = try RawSocket.connect(port: port)
        } catch let error as POSIXError {
            return .notConnected(error: error.code.rawValue)
        } catch {
            return .notConnected(error: ECONNREFUSED)
        }
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)

        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var outgoing = request.head + (request.waitsForContinue ? [] : request.body)
        var heldBody = request.waitsForContinue ? request.body : []
        let continueDeadline = clock.now + .seconds(1)
        var sent = 0
        var canSend = true
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var nextAbandonCheck = clock.now
        var completeSince: ContinuousClock.Instant?
        var answer: (response: Response, consumed: Int)?

        while clock.now < deadline {
            if clock.now >= nextAbandonCheck {
                if abandon() { return .abandoned(received: received) }
                nextAbandonCheck = clock.now + .milliseconds(50)
            }
            var progressed = false
            if canSend, sent < outgoing.count {
                let n = outgoing.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress! + sent, outgoing.count - sent, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if n > 0 {
                    sent += n
                    progressed = true
                } else if n < 0, errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
                    // The server stopped reading (reset or shut down): what it answered may still be readable.
                    canSend = false
                }
            }
            var closed = false
            var socketError: Int32?
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received += buffer[..<n]
                progressed = true
            } else if n == 0 {
                closed = true
            } else if errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
                closed = true
                socketError = errno
            }
            if !heldBody.isEmpty, sent == outgoing.count,
                startsWithContinue(received) || clock.now >= continueDeadline
            {
                outgoing += heldBody
                heldBody = []
            }
            if answer == nil, progressed || closed, let parsed = parse(received, isHead: request.isHead, atEnd: closed)
            {
                answer = parsed
                completeSince = clock.now
            }
            if let answer {
                var response = answer.response
                response.trailingBytes = received.count - answer.consumed
                if closed || closeGrace == .zero { return .answered(response) }
                if let since = completeSince, clock.now - since >= closeGrace { return .answered(response) }
            } else if closed {
                return .closedWithoutAnswer(received: received, error: socketError)
            }
            if !progressed { try? await Task.sleep(for: .milliseconds(1)) }
        }
        if let answer {
            var response = answer.response
            response.trailingBytes = received.count - answer.consumed
            return .answered(response)
        }
        return .timedOut(received: received)
    }

    /// Whether the bytes begin with an interim `100 Continue`.
    static func startsWithContinue(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 12 && String(decoding: bytes[9..<12], as: UTF8.self) == "100"
    }

    /// The first complete final answer in `bytes` and how many bytes it took, nil while incomplete.
    ///
    /// - Parameter atEnd: the connection is closed, so a body without a length ends here.
    public static func parse(_ bytes: [UInt8], isHead: Bool, atEnd: Bool) -> (response: Response, consumed: Int)? {
        var offset = 0
        var interim: [Int] = []
        while true {
            guard let headEnd = find([13, 10, 13, 10], in: bytes, from: offset) else { return nil }
            let lines = String(decoding: bytes[offset..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
            let statusLine = lines.first ?? ""
            guard statusLine.hasPrefix("HTTP/1."), statusLine.count >= 12,
                let status = Int(statusLine.dropFirst(9).prefix(3))
            else {
                // Not HTTP: counts as an answer only when the connection has closed, with status 0.
                return atEnd
                    ? (Response(status: 0, headers: [], body: bytes, interim: interim, trailingBytes: 0), bytes.count)
                    : nil
            }
            var headers: [(name: String, value: String)] = []
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append(
                    (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            let bodyStart = headEnd + 4
            if (100..<200).contains(status), status != 101 {
                interim.append(status)
                offset = bodyStart
                continue
            }
            var response = Response(status: status, headers: headers, body: [], interim: interim, trailingBytes: 0)
            if isHead || status == 204 || status == 304 || status == 101 { return (response, bodyStart) }
            if response.header("transfer-encoding")?.lowercased().contains("chunked") == true {
                guard let (body, end) = dechunk(bytes, from: bodyStart) else { return nil }
                response.body = body
                return (response, end)
            }
            if let lengthText = response.header("content-length") {
                guard let length = Int(lengthText), length >= 0 else { return nil }
                guard bytes.count - bodyStart >= length else { return nil }
                response.body = Array(bytes[bodyStart..<(bodyStart + length)])
                return (response, bodyStart + length)
            }
            guard atEnd else { return nil }
            response.body = Array(bytes[bodyStart...])
            return (response, bytes.count)
        }
    }

    /// A chunked body starting at `start`: its bytes and where it ends, nil while incomplete.
    static func dechunk(_ bytes: [UInt8], from start: Int) -> ([UInt8], Int)? {
        var body: [UInt8] = []
        var offset = start
        while true {
            guard let lineEnd = find([13, 10], in: bytes, from: offset) else { return nil }
            let sizeText = String(decoding: bytes[offset..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                return nil
            }
            offset = lineEnd + 2
            if size == 0 {
                // Trailers, then an empty line.
                guard let end = find([13, 10], in: bytes, from: offset) else { return nil }
                if end == offset { return (body, end + 2) }
                guard let trailersEnd = find([13, 10, 13, 10], in: bytes, from: offset) else { return nil }
                return (body, trailersEnd + 4)
            }
            guard bytes.count >= offset + size + 2 else { return nil }
            body += bytes[offset..<(offset + size)]
            offset += size + 2
        }
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0], Array(bytes[index..<(index + needle.count)]) == needle { return index }
            index += 1
        }
        return nil
    }
}
