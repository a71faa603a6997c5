import FerryCore
import FerryTestSupport
import Foundation
import NIOCore
import Testing

@testable import FerryServer
@testable import FerryStorage

/// A tus final upload on the object store: all of its partial uploads' bytes, or nothing.
@Suite("Resumable uploads: a final upload and its partial uploads")
struct ResumableConcatenationTests {
    /// A partial upload of `r`, fully received in two appends of `letter` (4 bytes), as the API checked it.
    static func partial(_ letter: String, store: CatalogObjectStore, charge: StorageCharge) async throws -> ResumableUpload {
        var upload = try await store.createResumableUpload(
            bucket: "r", key: "part-" + letter, charge: charge, length: 4, info: .init(kind: .partial),
            attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(86_400))
        for offset in [0, 2] as [Int64] {
            let body = AsyncStream<ByteBuffer> {
                $0.yield(ByteBuffer(string: letter + letter))
                $0.finish()
            }
            guard case .appended(let appended) = try await store.appendResumable(
                upload, at: offset, body: body, checksums: [], byteLimit: nil, verify: { _ in })
            else { throw NotAppended() }
            upload = appended
        }
        return upload
    }

    /// The object the final upload of `partials` makes at `r`/`key`.
    static func final(_ partials: [ResumableUpload], key: String, store: CatalogObjectStore, charge: StorageCharge)
        async throws -> ObjectInfo
    {
        try await store.concatenateResumable(
            partials, bucket: "r", key: key, charge: charge, info: .init(kind: .final, partials: partials.map(\.id)),
            attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(86_400)
        ).object
    }

    @Test("a final upload's bytes and upload slot are checked once against its owner's quota: partial uploads of 8 bytes filling 2 concurrent uploads make an 8-byte object under a quota of 10 bytes and 2 uploads; then the bytes count once, as the object's, the partial uploads' records name the final upload, and no second final upload is made of them", arguments: JobQueueImplementation.allCases)
    func finalUploadCountsOnce(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            // Two uploads in progress at most: the partial uploads fill it, and the final upload takes no place of its
            // own beside them.
            let charge = StorageCharge(owner: "k1", quota: AccessKeyQuota(storageBytes: 10, concurrentUploads: 2))
            let (a, b) = (try await Self.partial("A", store: store, charge: charge), try await Self.partial("B", store: store, charge: charge))
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 8, uploadsInProgress: 2))
            let (final, object) = try await store.concatenateResumable(
                [a, b], bucket: "r", key: "whole", charge: charge, info: .init(kind: .final, partials: [a.id, b.id]),
                attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(86_400))
            #expect(object.size == 8)
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 8, uploadsInProgress: 0))
            for partial in [a, b] {
                #expect(try await store.resumableUpload(partial.id)?.info.concatenatedInto == final.id)
            }
            // The object's bytes stay when the partial uploads' go.
            var text = ""
            for try await buffer in try await store.readObject(try await store.object(bucket: "r", key: "whole"), range: nil) {
                text += String(buffer: buffer)
            }
            #expect(text == "AAAABBBB")
            await #expect(throws: FerryDomainError.self) {
                try await Self.final([b], key: "again", store: store, charge: charge)
            }
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 8, uploadsInProgress: 0))
        }
    }

    @Test("a final upload whose partial upload was terminated after the API checked it makes nothing: uploadNotFound, no object, no multipart upload left; the other partials still make one", arguments: JobQueueImplementation.allCases)
    func finalUploadOfATerminatedPartialMakesNothing(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            let charge = StorageCharge(owner: "k1", quota: .unlimited)
            func partial(_ letter: String) async throws -> ResumableUpload {
                try await Self.partial(letter, store: store, charge: charge)
            }
            func final(_ partials: [ResumableUpload], key: String) async throws -> ObjectInfo {
                try await Self.final(partials, key: key, store: store, charge: charge)
            }
            let (a, b, c) = (try await partial("A"), try await partial("B"), try await partial("C"))
            try await store.terminateResumable(b)
            await #expect { _ = try await final([a, b, c], key: "final") } throws: {
                ($0 as? FerryDomainError)?.code == .uploadNotFound
            }
            await #expect(throws: FerryDomainError.self) { _ = try await store.object(bucket: "r", key: "final") }
            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(1)) == 0)
            _ = try await final([a, c], key: "rest")
            var body: [UInt8] = []
            for try await buffer in try await store.readObject(store.object(bucket: "r", key: "rest"), range: nil) {
                body += buffer.readableBytesView
            }
            #expect(String(decoding: body, as: UTF8.self) == "AAAACCCC")
        }
    }

    struct NotAppended: Error {}
}
