import Crypto
import FerryCore
import Foundation

/// Signatures of webhook deliveries: HMAC-SHA256 over `"<unix seconds>.<body>"`, sent as
/// `X-Ferry-Signature: t=<unix seconds>,v1=<hex HMAC>`.
///
/// Receivers verify with `verify(header:body:secret:)` over the raw request body (before any JSON parsing), and
/// dedupe deliveries by the event id. Depends only on Crypto and Foundation.
public enum WebhookSignature {
    /// Header the signature travels in.
    public static let headerName = "X-Ferry-Signature"

    /// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>"
    public static func sign(body: [UInt8], secret: String, timestamp: Date) -> String {
        let t = Int64(timestamp.timeIntervalSince1970.rounded(.down))
        let mac = HMAC<SHA256>.authenticationCode(for: signedBytes(t, body), using: SymmetricKey(data: Array(secret.utf8)))
        return "t=\(t),v1=" + Hex.encode(mac)
    }

    /// Verifies a header for a body: constant-time compare, rejects timestamps older than `tolerance` (default
    /// 300 s) — and as far in the future, against clock skew. Several `v1=` entries are accepted (any may match).
    public static func verify(
        header: String, body: [UInt8], secret: String, now: Date = Date(), tolerance: TimeInterval = 300
    ) -> Bool {
        var timestamp: Int64?
        var signatures: [[UInt8]] = []
        for element in header.split(separator: ",") {
            let pair = element.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            switch pair[0] {
            case "t":
                guard timestamp == nil, let value = Int64(pair[1]) else { return false }
                timestamp = value
            case "v1":
                if let bytes = Hex.decode(pair[1]), bytes.count == SHA256.byteCount { signatures.append(bytes) }
            default:
                continue
            }
        }
        guard let timestamp, !signatures.isEmpty else { return false }
        guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { return false }
        let key = SymmetricKey(data: Array(secret.utf8))
        let signed = signedBytes(timestamp, body)
        // Every signature is checked, each with a constant-time comparison.
        return signatures.map { HMAC<SHA256>.isValidAuthenticationCode($0, authenticating: signed, using: key) }
            .contains(true)
    }

    private static func signedBytes(_ timestamp: Int64, _ body: [UInt8]) -> [UInt8] {
        Array("\(timestamp).".utf8) + body
    }

}
