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
}
