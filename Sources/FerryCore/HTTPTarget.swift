import Foundation

/// URLs Ferry itself calls (form callbacks, webhooks, an object store): checked before any HTTP client sees them.
public enum HTTPTarget {
    /// The parts of `text` when it is an `http` or `https` URL with a host and, when it names a port, one from 1 to
    /// 65535 (a URL may spell any number, which an HTTP client cannot connect to); nil otherwise.
    public static func components(_ text: String) -> URLComponents? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            (1...65535).contains(components.port ?? 80)
        else { return nil }
        return components
    }

    /// `text` as an error may quote it back: whatever may be a user and password (all before the last `@` ahead of
    /// any `?` or `#`, after a `scheme://`) as `<redacted>`, whether or not the rest is a valid URL, then at most 200
    /// characters. A path holding an `@` is redacted up to it too: better too much than a password.
    public static func quoted(_ text: String) -> String {
        var text = Substring(text)
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        let region = text[start...].prefix { $0 != "?" && $0 != "#" }
        if let at = region.lastIndex(of: "@") { text.replaceSubrange(start..<at, with: "<redacted>") }
        return String(text.prefix(200))
    }

    /// `host` as a URL's authority spells it: an IPv6 address in brackets (`[::1]`), any other host as it is.
    public static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }

    /// `host[:port]` of `url` as its requests' `Host` header and a URL rebuilt from it spell it, an IPv6 address in
    /// brackets (Foundation gives `URL.host` without them on Linux); nil when the URL has no host.
    public static func authority(of url: URL) -> String? {
        guard let host = url.host, !host.isEmpty else { return nil }
        return url.port.map { "\(bracketed(host)):\($0)" } ?? bracketed(host)
    }

    /// `text` with every byte a URL cannot hold as it is (a space, a quote, a non-ASCII letter's UTF-8, a `%` that
    /// begins no escape) percent-escaped, and its escapes kept: `/a/%2F/ü?y=%2F z` is `/a/%2F/%C3%BC?y=%2F%20z`. An
    /// HTTP client given a URL with a raw `ü` escapes the whole of it, `%2F` becoming `%252F`: another URL than the
    /// one the app server named.
    public static func escaped(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=".utf8)
        for (index, byte) in bytes.enumerated() {
            let escape = byte == UInt8(ascii: "%") && index + 2 < bytes.count && Hex.value(bytes[index + 1]) != nil
                && Hex.value(bytes[index + 2]) != nil
            if kept.contains(byte) || escape {
                result.append(byte)
            } else {
                result += Array(String(format: "%%%02X", byte).utf8)
            }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
