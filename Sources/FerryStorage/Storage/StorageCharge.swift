import FerryCore
import Foundation
import NIOCore

/// Whom a write counts against and the limits it stays within: the long-term access key behind the request (its own,
/// or the parent of its temporary credential) and that key's quota.
///
/// The store checks the byte quota twice: against ``declaredBytes`` before it reads a byte of the body, and, with
/// the bytes it actually received, inside the catalog transaction that records the object or part — where a write
/// that would take the key past its quota is refused and its bytes are deleted. On PostgreSQL that transaction holds
/// a lock per key, so nodes sharing the catalog check one after the other.
public struct StorageCharge: Sendable, Hashable {
    /// The long-term access key that owns what is written.
    public var owner: String
    /// Its limits.
    public var quota: AccessKeyQuota
    /// The size the request declares (its `Content-Length`, or `x-amz-decoded-content-length`), when it declares one.
    public var declaredBytes: Int64?

    /// Creates a charge.
    public init(owner: String, quota: AccessKeyQuota, declaredBytes: Int64? = nil) {
        self.owner = owner
        self.quota = quota
        self.declaredBytes = declaredBytes
    }

    /// The charge of a request made by `principal`.
    public init(principal: Principal, declaredBytes: Int64? = nil) {
        self.init(owner: principal.parentAccessKeyId, quota: principal.quota, declaredBytes: declaredBytes)
    }
}

/// What one access key holds: the stored bytes its quota counts and its multipart uploads in progress.
public struct StorageUsage: Sendable, Hashable {
    /// Bytes of its objects and of the parts of its uploads in progress.
    public var storedBytes: Int64
    /// Multipart uploads it has in progress.
    public var uploadsInProgress: Int

    /// Creates a usage.
    public init(storedBytes: Int64, uploadsInProgress: Int) {
        self.storedBytes = storedBytes
        self.uploadsInProgress = uploadsInProgress
    }
}

extension FerryDomainError {
    /// The refusal of a write that would take its key's stored bytes past `limit`.
    package static func storageQuotaExceeded(limit: Int64) -> FerryDomainError {
        FerryDomainError(
            .quotaExceeded, "The access key's storage quota (\(limit) bytes) does not leave room for this write.",
            details: ["QuotaName": "StorageBytes", "Limit": String(limit)])
    }

    /// The refusal of a multipart upload beyond the key's `limit` of uploads in progress.
    static func uploadQuotaExceeded(limit: Int) -> FerryDomainError {
        FerryDomainError(
            .quotaExceeded,
            "The access key has \(limit) multipart uploads in progress, as many as its quota allows; complete or abort one first.",
            details: ["QuotaName": "ConcurrentUploads", "Limit": String(limit)])
    }

    /// The refusal of a video beyond the key's `limit` of videos.
    package static func videoQuotaExceeded(limit: Int) -> FerryDomainError {
        FerryDomainError(
            .quotaExceeded, "The access key has \(limit) videos, as many as its quota allows; delete one first.",
            details: ["QuotaName": "Videos", "Limit": String(limit)])
    }

    /// The refusal of a request beyond the key's request rate, to be tried again after `retryAfter` seconds; it names
    /// the quota (``isKeyRateRefusal``), as a node's own overload refused with the same code does not.
    package static func requestRateExceeded(retryAfter: Int) -> FerryDomainError {
        FerryDomainError(
            .requestRateExceeded, "Please reduce your request rate: the access key's quota allows fewer requests per second.",
            details: ["QuotaName": "RequestsPerSecond"], retryAfterSeconds: retryAfter)
    }

    /// Whether this is the refusal of a request beyond its access key's `RequestsPerSecond`.
    package var isKeyRateRefusal: Bool { code == .requestRateExceeded && details["QuotaName"] == "RequestsPerSecond" }
}

/// The byte quota as the store and the catalogs check it.
package enum StorageQuotaCheck {
    /// Throws ``FerryDomainError/storageQuotaExceeded(limit:)`` when `stored` bytes, less the `freed` bytes the write
    /// replaces, plus the `added` bytes it stores, are more than `limit`.
    package static func check(stored: Int64, adding added: Int64, freeing freed: Int64, limit: Int64) throws {
        if exceeds(stored: stored - freed, adding: added, limit: limit) {
            throw FerryDomainError.storageQuotaExceeded(limit: limit)
        }
    }

    /// Whether `stored` plus `added` bytes is more than `limit` (a sum too large for 64 bits is).
    package static func exceeds(stored: Int64, adding added: Int64, limit: Int64) -> Bool {
        let (sum, overflow) = stored.addingReportingOverflow(added)
        return overflow || sum > limit
    }
}

/// A body of undeclared size held to what its owner's byte quota leaves: past `room` bytes it fails with
/// ``FerryDomainError/storageQuotaExceeded(limit:)``, so no more of it reaches the disk than the quota could take
/// (the catalog's check, with the bytes received, stays the one that decides). A nil `room` passes every byte.
struct QuotaBoundBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let room: Int64?
    let limit: Int64

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let room: Int64?
        let limit: Int64
        var received: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let buffer = try await base.next() else { return nil }
            received += Int64(buffer.readableBytes)
            if let room, received > room { throw FerryDomainError.storageQuotaExceeded(limit: limit) }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), room: room, limit: limit)
    }
}
