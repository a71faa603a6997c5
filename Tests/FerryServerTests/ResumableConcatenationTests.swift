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

    /// What a final upload of `partial` (4 bytes) whose request ended after its claim leaves at `r`/`key`: its
    /// record, fully received (a copy of the partial upload's bytes in its multipart upload), holding the claim; no
    /// object yet.
    static func finalLeftByACrash(
        of partial: ResumableUpload, key: String, store: CatalogObjectStore, charge: StorageCharge
    ) async throws -> ResumableUpload {
        let final = try await store.createResumableUpload(
            bucket: "r", key: key, charge: charge, length: 4, info: .init(kind: .final, partials: [partial.id]),
            attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(86_400))
        let letter = String(partial.key.suffix(1))
        let body = AsyncStream<ByteBuffer> {
            $0.yield(ByteBuffer(string: String(repeating: letter, count: 4)))
            $0.finish()
        }
        guard case .appended(let received) = try await store.appendResumable(
            final, at: 0, body: body, checksums: [], byteLimit: nil, verify: { _ in })
        else { throw NotAppended() }
        #expect(try await store.catalog.claimPartialUploads([partial.id], for: received.id))
        return received
    }

    /// The object the final upload of `partials` makes at `r`/`key`.
    static func final(_ partials: [ResumableUpload], key: String, store: CatalogObjectStore, charge: StorageCharge)
        async throws -> ObjectInfo
    {
        let made = try await store.concatenateResumable(
            partials, bucket: "r", key: key, charge: charge, info: .init(kind: .final, partials: partials.map(\.id)),
            attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(86_400))
        return try #require(made.object)
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
            #expect(object?.size == 8)
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

    @Test("final uploads of one partial upload made at the same time make one object: the others are uploadNotFound and leave no object, upload or claim behind", arguments: JobQueueImplementation.allCases)
    func concurrentFinalUploadsMakeOne(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            let charge = StorageCharge(owner: "k1", quota: .unlimited)
            for round in 0..<3 {
                let a = try await Self.partial("A", store: store, charge: charge)
                let outcomes = await withTaskGroup(of: (String, Result<ObjectInfo, any Error>).self) { group in
                    for index in 0..<6 {
                        let key = "race-\(round)-\(index)"
                        group.addTask {
                            do {
                                return (key, .success(try await Self.final([a], key: key, store: store, charge: charge)))
                            } catch {
                                return (key, .failure(error))
                            }
                        }
                    }
                    var outcomes: [(String, Result<ObjectInfo, any Error>)] = []
                    for await outcome in group { outcomes.append(outcome) }
                    return outcomes
                }
                let made = outcomes.filter { if case .success = $0.1 { true } else { false } }.map(\.0)
                #expect(made.count == 1, "round \(round): \(made)")
                for (key, outcome) in outcomes {
                    if case .failure(let error) = outcome {
                        #expect((error as? FerryDomainError)?.code == .uploadNotFound, "\(key): \(error)")
                        await #expect(throws: FerryDomainError.self) { _ = try await store.object(bucket: "r", key: key) }
                    }
                }
                let final = try #require(try await store.resumableUpload(a.id)?.info.concatenatedInto)
                let record = try #require(try await store.resumableUpload(final))
                #expect(record.key == made.first && record.etag != nil)
                // Completed, it lasts as long as asked (until then, ``unfinishedFinalLifetime``).
                #expect(record.expiresAt.timeIntervalSinceNow > 80_000)
            }
            // No multipart upload is left by the refused ones, and the bytes count once per object.
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 12, uploadsInProgress: 0))
            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(1)) == 0)
        }
    }

    @Test("a final upload that claimed its partial upload and did not complete (its request ended) is completed by a request naming the same partial upload; a refused one gives the claim back", arguments: JobQueueImplementation.allCases)
    func claimedFinalUploadIsCompletedAgain(_ implementation: JobQueueImplementation) async throws {
        try await implementation.withObjectStore { store in
            try await store.createBucket("r")
            let charge = StorageCharge(owner: "k1", quota: .unlimited)
            let a = try await Self.partial("A", store: store, charge: charge)
            // An insert-only final upload where an object is: refused, and the partial upload is free again.
            _ = try await store.putObject(
                bucket: "r", key: "taken", attributes: ObjectAttributes(), tags: [],
                body: AsyncStream<ByteBuffer> {
                    $0.yield(ByteBuffer(string: "x"))
                    $0.finish()
                }, checksums: [], condition: .none, verify: { _ in }, charge: charge)
            var insertOnly = ResumableUpload.Info(kind: .final, partials: [a.id])
            insertOnly.insertOnly = true
            await #expect { _ = try await store.concatenateResumable(
                [a], bucket: "r", key: "taken", charge: charge, info: insertOnly, attributes: ObjectAttributes(),
                expiresAt: Date().addingTimeInterval(86_400)) } throws: { ($0 as? FerryDomainError)?.code == .preconditionFailed }
            #expect(try await store.resumableUpload(a.id)?.info.concatenatedInto == nil)
            #expect(try await store.abortUnclaimedResumableUploads(initiatedBefore: Date().addingTimeInterval(1)) == 0)
            // What a request that ended after its claim leaves: the final upload's record, fully received, holding the
            // claim, and its multipart upload with the partial upload's bytes; no object yet.
            let received = try await Self.finalLeftByACrash(of: a, key: "whole", store: store, charge: charge)
            #expect(try await store.catalog.claimPartialUploads([a.id], for: "another") == false)
            await #expect(throws: FerryDomainError.self) { _ = try await store.object(bucket: "r", key: "whole") }
            let (completed, object) = try await store.completeConcatenation(received, partials: [a], expiresAt: Date().addingTimeInterval(86_400))
            #expect(object?.size == 4 && completed.etag == object?.etag)
            #expect(try await store.resumableUpload(a.id)?.info.concatenatedInto == received.id)
            // The partial upload's own multipart upload went: its bytes count once, as the object's.
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 5, uploadsInProgress: 0))
            // Again (the answer was lost): the same upload, nothing made twice.
            let again = try await store.completeConcatenation(received, partials: [a], expiresAt: Date().addingTimeInterval(86_400))
            #expect(again.object == nil && again.upload.etag == completed.etag)

            // A request that ended after the object was made, before the partial upload was released: the partial
            // upload's bytes and upload place count until the final upload is sent again, which releases it.
            let b = try await Self.partial("B", store: store, charge: charge)
            let secondReceived = try await Self.finalLeftByACrash(of: b, key: "second", store: store, charge: charge)
            #expect(try await store.completeResumable(secondReceived)?.size == 4)
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 13, uploadsInProgress: 1))
            // A final upload a crash left unfinished, expired: its claim goes back, and the partial upload makes
            // another final upload.
            let c = try await Self.partial("C", store: store, charge: charge)
            let stale = try await store.createResumableUpload(
                bucket: "r", key: "stale", charge: charge, length: 4, info: .init(kind: .final, partials: [c.id]),
                attributes: ObjectAttributes(), expiresAt: Date().addingTimeInterval(-1))
            #expect(try await store.catalog.claimPartialUploads([c.id], for: stale.id))
            #expect(try await store.expireResumableUploads(now: Date()) >= 1)
            #expect(try await store.resumableUpload(c.id)?.info.concatenatedInto == nil)
            #expect(try await Self.final([c], key: "fresh", store: store, charge: charge).size == 4)
            let retried = try await store.completeConcatenation(
                try #require(try await store.resumableUpload(secondReceived.id)), partials: [b],
                expiresAt: Date().addingTimeInterval(86_400))
            #expect(retried.object == nil && retried.upload.etag != nil)
            #expect(try await store.usage(owner: "k1") == StorageUsage(storedBytes: 13, uploadsInProgress: 0))
        }
    }

    struct NotAppended: Error {}
}
