import Foundation

/// The `Authorization` header on the server's callback to an app server, in Qiniu's form:
/// `QBox <AccessKey>:<urlsafe_base64(HMAC-SHA1(SecretKey, path[?query] + "\n" + body))>`.
///
/// The access key is the one the upload token was signed with, so the app server verifies the callback with the same
/// secret it makes tokens with:
///
/// ```swift
/// guard FormCallbackSignature.verify(authorization: header, secretKey: sk, path: "/uploaded", query: nil, body: body)
/// else { return .unauthorized }
/// ```
public enum FormCallbackSignature {
    /// The header's scheme word.
    public static let scheme = "QBox"

    /// The header value for a callback.
    ///
    /// - Parameters:
    ///   - accessKey: the access key id.
    ///   - secretKey: its secret.
    ///   - path: the callback URL's path (percent-encoded as sent).
    ///   - query: the callback URL's query without `?`, if any.
    ///   - body: the callback body.
    public static func authorization(
        accessKey: String, secretKey: String, path: String, query: String?, body: [UInt8]
    ) -> String {
        scheme + " " + accessKey + ":"
            + UploadToken.signature(secretKey: secretKey, data: signedData(path, query, body))
    }

    /// Whether `authorization` is a valid callback signature by `secretKey` for this request (constant-time compare).
    ///
    /// - Parameters:
    ///   - authorization: the `Authorization` header as received.
    ///   - secretKey: the secret of the access key the app server made the token with.
    ///   - path: the request path as received.
    ///   - query: the query without `?`, if any.
    ///   - body: the request body.
    public static func verify(authorization: String, secretKey: String, path: String, query: String?, body: [UInt8])
        -> Bool
    {
        guard authorization.hasPrefix(scheme + " "),
            let colon = authorization.lastIndex(of: ":"),
            let given = UploadToken.decodeURLSafeBase64(String(authorization[authorization.index(after: colon)...]))
        else { return false }
        let expected = UploadToken.rawSignature(secretKey: secretKey, data: signedData(path, query, body))
        return SigV4.constantTimeEquals(given, expected)
    }

    static func signedData(_ path: String, _ query: String?, _ body: [UInt8]) -> [UInt8] {
        var data = Array(path.utf8)
        if let query, !query.isEmpty { data += Array(("?" + query).utf8) }
        data.append(UInt8(ascii: "\n"))
        return data + body
    }
}
