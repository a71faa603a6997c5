import Crypto
import FerryCore
import Foundation

/// The secrets a server keeps in its data directory, readable by the owner only.
package enum ServerKeys {
    package struct StoredRoot: Codable {
        package var accessKeyId: String
        package var secretAccessKey: String

        /// Creates a root key.
        package init(accessKeyId: String, secretAccessKey: String) {
            self.accessKeyId = accessKeyId
            self.secretAccessKey = secretAccessKey
        }
    }

    /// The root pair from the environment, or from `root-credentials.json`, generated when absent.
    /// - Returns: the credentials and whether they were generated just now.
    package static func rootCredentials(directory: String, environment: [String: String]) throws
        -> (SigV4Credentials, Bool)
    {
        if let root = environmentRoot(environment) { return (root, false) }
        let path = directory + "/root-credentials.json"
        if let data = FileManager.default.contents(atPath: path) {
            guard let stored = try? JSONDecoder().decode(StoredRoot.self, from: data) else {
                throw RootCredentialsUnavailable(path: path)
            }
            return (SigV4Credentials(accessKeyId: stored.accessKeyId, secretAccessKey: stored.secretAccessKey), false)
        }
        let stored = generatedKey()
        try writePrivate(try JSONEncoder().encode(stored), to: path)
        return (SigV4Credentials(accessKeyId: stored.accessKeyId, secretAccessKey: stored.secretAccessKey), true)
    }

    /// A data directory's `root-credentials.json` that does not hold a root key. Its description quotes nothing of
    /// the file.
    package struct RootCredentialsUnavailable: Error, CustomStringConvertible {
        /// The file.
        package var path: String

        package var description: String {
            "\(path) is damaged (not the accessKeyId and secretAccessKey ferry serve writes), so it is not replaced: put it"
                + " back from a backup, or set FERRY_ACCESS_KEY_ID and FERRY_SECRET_ACCESS_KEY."
        }
    }

    /// The root pair `FERRY_ACCESS_KEY_ID` / `FERRY_SECRET_ACCESS_KEY` set in `environment`, when both are set.
    package static func environmentRoot(_ environment: [String: String]) -> SigV4Credentials? {
        guard let id = environment["FERRY_ACCESS_KEY_ID"], let secret = environment["FERRY_SECRET_ACCESS_KEY"],
            !id.isEmpty, !secret.isEmpty
        else { return nil }
        return SigV4Credentials(accessKeyId: id, secretAccessKey: secret)
    }

    /// A new key pair, a root's or a stored access key's: `FKIA` and 16 letters or digits, and a secret of 30 random
    /// bytes in base64url.
    package static func generatedKey() -> StoredRoot {
        StoredRoot(
            accessKeyId: "FKIA" + SessionTokenCodec.randomAlphanumeric(16),
            secretAccessKey: SessionTokenCodec.base64url(Data((0..<30).map { _ in UInt8.random(in: 0...255) })))
    }

    /// The key session tokens are signed and the catalog's secrets sealed with, from `token-key`; generated when
    /// absent from a new data directory or from one whose catalog holds no sealed secret (one written before its
    /// secrets were sealed, which are sealed with the new key). A key file that is missing while the catalog holds
    /// sealed secrets, or that is not 32 bytes, is never replaced: those secrets open with that key alone, so the
    /// server stops with ``TokenKeyUnavailable`` rather than answer every stored key's request with an error. So it
    /// does when the key does not open them (another data directory's or backup's key put in its place).
    package static func tokenKey(directory: String) throws -> SymmetricKey {
        let path = directory + "/token-key"
        let sealed = try SQLiteCatalog.sealedSecret(at: directory + "/" + BackupManifest.catalogPath)
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count == 32 else { throw TokenKeyUnavailable(path: path, size: data.count) }
            let key = SymmetricKey(data: data)
            if let sealed, (try? SecretBox(serverKey: key).open(sealed)) == nil {
                throw TokenKeyUnavailable(path: path, size: 32, opensSecrets: false)
            }
            return key
        }
        guard sealed == nil else { throw TokenKeyUnavailable(path: path, size: nil) }
        let key = SymmetricKey(size: .bits256)
        try writePrivate(key.withUnsafeBytes { Data($0) }, to: path)
        return key
    }

    /// A data directory's `token-key` that is damaged (not 32 bytes), or missing beside a catalog whose secrets it
    /// sealed.
    package struct TokenKeyUnavailable: Error, CustomStringConvertible {
        /// The key file.
        package var path: String
        /// Its size in bytes; nil when it is missing.
        package var size: Int?
        /// False when it is a key of 32 bytes that does not open the catalog's sealed secrets.
        package var opensSecrets = true

        package var description: String {
            let fault =
                !opensSecrets
                ? "\(path) does not open the catalog's sealed secrets (it is another data directory's or backup's key)"
                : size.map { "\(path) holds \($0) bytes, not the 32 of a server key" } ?? "\(path) is missing"
            return fault
                + ": the catalog's sealed secrets (the access keys') open with that key alone, so it is not replaced."
                + " Put the data directory's token-key back (a `ferry backup` holds it), or restore the whole backup."
        }
    }

    /// Writes a file with mode 0600, atomically and durably (the file, then its directory entry, reach the device).
    static func writePrivate(_ data: Data, to path: String) throws {
        let temp = path + ".tmp"
        unlink(temp)
        try BackupFiles.write(data, to: temp)
        try BackupFiles.rename(temp, to: path)
        try BackupFiles.syncParent(of: path)
    }
}
