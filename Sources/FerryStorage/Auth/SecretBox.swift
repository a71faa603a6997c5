import Crypto
import Foundation

/// Seals the secrets the catalog keeps (access keys' secret keys) with AES-GCM under a key derived from the server's
/// key (`token-key` in the data directory), so that a copy of the catalog alone yields no usable secret.
package struct SecretBox: Sendable {
    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    /// What a sealed value starts with; anything else is a value stored before sealing (sealed on open).
    static let prefix = "sealed:v1:"

    /// A box whose key is derived from `serverKey` for this one purpose.
    package init(serverKey: SymmetricKey) {
        keyBytes = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: serverKey, info: Data("ferry catalog secrets v1".utf8), outputByteCount: 32
        ).withUnsafeBytes { Array($0) }
    }

    /// The sealed form of `secret`.
    package func seal(_ secret: String) throws -> String {
        guard let combined = try AES.GCM.seal(Data(secret.utf8), using: key).combined else {
            throw SecretBoxError()
        }
        return Self.prefix + combined.base64EncodedString()
    }

    /// The secret in `stored`: opened when sealed, as it is otherwise. A sealed value that does not open (another
    /// server's key, or tampering) throws.
    package func open(_ stored: String) throws -> String {
        guard stored.hasPrefix(Self.prefix) else { return stored }
        guard let data = Data(base64Encoded: String(stored.dropFirst(Self.prefix.count))),
            let box = try? AES.GCM.SealedBox(combined: data),
            let plain = try? AES.GCM.open(box, using: key)
        else { throw SecretBoxError() }
        return String(decoding: plain, as: UTF8.self)
    }

    static func isSealed(_ stored: String) -> Bool { stored.hasPrefix(prefix) }
}

/// A sealed secret did not open with this server's key. Its description names no secret.
struct SecretBoxError: Error, CustomStringConvertible {
    var description: String { "a sealed catalog secret does not open with this server's key" }
}
