import FerryCore
import Foundation

/// Where and how the server delivers webhooks.
public struct WebhookConfiguration: Sendable {
    /// The receiver's URL; events are POSTed to it. A user and password in it go as HTTP Basic credentials.
    public var url: URL
    /// The HMAC-SHA256 key the receiver verifies signatures with (never logged).
    public var secret: String
    /// Attempts per event before it is marked failed (it stays in the catalog). Default 50.
    public var maxAttempts: Int = 50
    /// Wait before the second attempt; doubles per attempt (with jitter) up to `maxBackoff`. Default 200 ms.
    public var initialBackoff: Duration = .milliseconds(200)
    /// Longest wait between attempts. Default 300 s.
    public var maxBackoff: Duration = .seconds(300)
    /// How often the delivery service looks for new events when it has nothing due. Default 100 ms.
    public var pollInterval: Duration = .milliseconds(100)
    /// Time an attempt has, from connecting to the end of the answer's body; past it the attempt failed. Default 10 s.
    public var attemptTimeout: Duration = .seconds(10)

    /// Creates a configuration for a receiver URL and signing secret.
    public init(url: URL, secret: String) {
        self.url = url
        self.secret = secret
    }
}

extension WebhookConfiguration: SecretRedacting {
    /// The receiver without the secret.
    public var description: String { "WebhookConfiguration(url: \(redactedURL), secret: <redacted>)" }
    /// The fields without the secret (services are described this way in debug logs).
    public var redactedFields: KeyValuePairs<String, Any> {
        [
            "url": redactedURL, "secret": "<redacted>", "maxAttempts": maxAttempts, "initialBackoff": initialBackoff,
            "maxBackoff": maxBackoff, "pollInterval": pollInterval,
            "attemptTimeout": attemptTimeout,
        ]
    }
}

extension WebhookConfiguration {
    /// The URL requests go to: ``url`` without its user and password, which go in ``basicAuthorization``.
    var requestURL: String {
        guard url.user != nil || url.password != nil,
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url.absoluteString }
        components.user = nil
        components.password = nil
        return components.string ?? url.absoluteString
    }

    /// HTTP Basic credentials (RFC 7617) from the user and password of ``url``, or nil when it has none.
    var basicAuthorization: String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            components.user != nil || components.password != nil
        else { return nil }
        let pair = (components.user ?? "") + ":" + (components.password ?? "")
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }

    /// The receiver's URL without what may be a credential: a user and password, the path (Slack's and Discord's
    /// hooks carry their secret there) and the query.
    package var redactedURL: String {
        var text = (url.scheme ?? "http") + "://"
        if url.user != nil || url.password != nil { text += "<redacted>@" }
        text += url.host ?? ""
        if let port = url.port { text += ":\(port)" }
        if !["", "/"].contains(url.path) { text += "/<redacted>" }
        if url.query != nil { text += "?<redacted>" }
        return text
    }
}
