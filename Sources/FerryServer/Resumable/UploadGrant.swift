import FerryCore
import Foundation

/// The capability in a media upload URL (`ResumableUploadURL`): the right to create resumable uploads of one object,
/// counted against one owner, until a time, signed by the server. It is a path segment,
/// `/_ferry/uploads/grant/<grant>`, so that a tus client or a URLSession upload task needs nothing but the URL:
/// `<base64url JSON>.<base64url HMAC-SHA256, first 16 bytes>` under a key derived from the server's token key.
struct UploadGrant: Codable, Sendable, Hashable {
    /// The bucket.
    var bucket: String
    /// The object's key.
    var key: String
    /// The long-term access key the upload counts against.
    var owner: String
    /// The video (or image) the object is the source of, if any.
    var mediaId: String?
    /// Until when uploads may be created with it (unix seconds).
    var expiry: Int64

    private enum CodingKeys: String, CodingKey {
        case bucket = "b", key = "k", owner = "o", mediaId = "m", expiry = "e"
    }

    /// Path prefix of grant URLs.
    static let pathPrefix = "/_ferry/uploads/grant/"

    /// The signed token.
    func token(codec: SessionTokenCodec) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = SessionTokenCodec.base64url((try? encoder.encode(self)) ?? Data())
        return payload + "." + Self.mac(payload, codec: codec)
    }

    /// Why a token is refused.
    enum Refusal: Error, Equatable {
        case invalid
        case expired
    }

    /// The grant in `token` when it verifies and has not expired at `now`.
    static func verify(_ token: String, now: Date, codec: SessionTokenCodec) throws(Refusal) -> UploadGrant {
        guard token.utf8.count <= 4096 else { throw .invalid }
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 2, SigV4.constantTimeEquals(mac(String(pieces[0]), codec: codec), String(pieces[1])),
            let data = SessionTokenCodec.unbase64url(String(pieces[0])),
            let grant = try? JSONDecoder().decode(UploadGrant.self, from: data)
        else { throw .invalid }
        guard Double(grant.expiry) > now.timeIntervalSince1970 else { throw .expired }
        return grant
    }

    private static func mac(_ payload: String, codec: SessionTokenCodec) -> String {
        SessionTokenCodec.base64url(codec.authenticationCode(for: Data(payload.utf8), purpose: "upload-grant").prefix(16))
    }
}
