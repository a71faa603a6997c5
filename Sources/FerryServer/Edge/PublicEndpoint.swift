import FerryCore
import Foundation

/// A base URL this service hands out (upload addresses, playback and download URLs): a scheme and an authority with
/// nothing after them, checked once when it is made so that URLs built on it never fail.
///
/// It comes from the configured `--public-endpoint`, or from a request's `Host` once ``Authority`` has accepted it.
public struct PublicEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// `host[:port]`, as a request to this endpoint signs its `Host` header (without the scheme's default port, which
    /// clients leave out of it).
    public let authority: String
    /// The base every URL starts with: `scheme://authority`, without a trailing slash.
    public let base: String

    /// The endpoint a request reached, from its validated `Host`; `https` when a trusted proxy says the client reached
    /// it so.
    init(requestAuthority authority: String, https: Bool = false) {
        scheme = https ? "https" : "http"
        self.authority = authority
        base = scheme + "://" + authority
    }

    /// Parses a configured endpoint such as `https://media.example.com` or `http://127.0.0.1:9000`, the scheme's
    /// default port (`:443`, `:80`) left out as clients leave it out of their `Host`; throws ``InvalidPublicEndpoint``
    /// for anything else (another scheme, no host, a path, a query, a fragment, user information, a host that is not
    /// an RFC 3986 authority). A path is refused: requests signed for the paths of an upload address under it would not
    /// verify where a proxy strips it, nor route where none does.
    public init(parsing text: String) throws {
        let invalid = InvalidPublicEndpoint(
            description:
                "The public endpoint '\(HTTPTarget.quoted(text))' must be http(s)://host[:port] with nothing else.")
        guard let schemeEnd = text.range(of: "://") else { throw invalid }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { throw invalid }
        var rest = text[schemeEnd.upperBound...]
        while rest.hasSuffix("/") { rest = rest.dropLast() }
        var authority = String(rest)
        guard Authority.isValid(authority) else {
            if let slash = rest.firstIndex(of: "/"), Authority.isValid(String(rest[..<slash])) {
                throw InvalidPublicEndpoint(
                    description: "The public endpoint '\(HTTPTarget.quoted(text))' has a path; Ferry is served at the "
                        + "root of its host: give http(s)://host[:port] (a proxy can give Ferry a host name of its "
                        + "own).")
            }
            throw invalid
        }
        let defaultPort = scheme == "https" ? ":443" : ":80"
        if authority.hasSuffix(defaultPort), Authority.isValid(String(authority.dropLast(defaultPort.count))) {
            authority.removeLast(defaultPort.count)
        }
        self.scheme = scheme
        self.authority = authority
        base = scheme + "://" + authority
    }

    /// The base URL.
    public var description: String { base }
}

/// A configured public endpoint that cannot be one.
public struct InvalidPublicEndpoint: Error, Sendable, CustomStringConvertible {
    /// What is wrong with it.
    public var description: String
}

/// The `Host` of a request, checked as RFC 3986 allows an authority in an `http` URI, before anything builds a URL or
/// a signature on it.
enum Authority {
    /// The longest authority accepted (a DNS name is at most 253 bytes, then a port).
    static let maxLength = 260

    /// Whether `value` is `host[:port]`: a DNS-style name (letters, digits, `-`, `.`, `_`, `~`; RFC 3986's other
    /// reg-name characters have no use in a host name and are refused), an IPv4 address, or an IPv6 address in
    /// brackets; the port 0–65535 in at most five digits. No user information, no spaces, nothing else.
    static func isValid(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        var hostEnd = bytes.count
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return false }
            let literal = bytes[1..<close]
            guard literal.allSatisfy({ Hex.value($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }),
                literal.contains(UInt8(ascii: ":"))
            else { return false }
            hostEnd = close + 1
            guard hostEnd == bytes.count || bytes[hostEnd] == UInt8(ascii: ":") else { return false }
        } else {
            if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) { hostEnd = colon }
            let host = bytes[..<hostEnd]
            guard !host.isEmpty,
                host.allSatisfy({
                    isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                        || $0 == UInt8(ascii: "~")
                })
            else { return false }
        }
        guard hostEnd < bytes.count else { return true }
        let port = bytes[(hostEnd + 1)...]
        guard !port.isEmpty, port.count <= 5, port.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return false }
        return Int(String(decoding: port, as: UTF8.self)).map { $0 <= 65_535 } ?? false
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }
}
