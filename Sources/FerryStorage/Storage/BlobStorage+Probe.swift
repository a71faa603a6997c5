import AsyncHTTPClient
import Foundation
import NIOHTTP1

extension BlobFiles {
    /// The blob directory exists and this process may write in it.
    func probe() async throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: blobDirectory, isDirectory: &isDirectory), isDirectory.boolValue,
            FileManager.default.isWritableFile(atPath: blobDirectory)
        else { throw StoreProbeFailure(description: "the data directory's blob files cannot be written") }
    }
}

extension S3BlobStorage {
    /// The bucket answers a HEAD request with 200.
    func probe() async throws {
        let response = try await send("HEAD", key: nil)
        _ = try await Self.collect(response.body, limit: 64 * 1024)
        guard response.status == .ok else {
            throw StoreError(status: Int(response.status.code), code: nil, operation: "HeadBucket")
        }
    }
}

extension CatalogObjectStore {
    /// Checks cheaply that the blob storage answers: the blob directory is writable, or the S3-compatible store's
    /// bucket answers; throws what it met.
    package func probeBlobStorage() async throws {
        try await files.probe()
    }
}

/// The blob storage did not pass its probe.
struct StoreProbeFailure: Error, CustomStringConvertible {
    /// What was wrong.
    var description: String
}
