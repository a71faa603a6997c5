import FerryCore
import Foundation
import NIOCore

/// How an append to a resumable upload ended, besides the errors it throws.
package enum ResumableAppendResult: Sendable {
    /// The bytes are durable and counted: the upload as it now stands.
    case appended(ResumableUpload)
    /// The upload's offset was not where the append started (another append was recorded first); nothing was stored.
    case conflict(ResumableUpload)
    /// The bytes would pass the upload's length; nothing was stored.
    case beyondLength(ResumableUpload)
}

/// Resumable uploads (``ResumableUpload``) on the object store: each append is streamed to a blob, verified, and
/// recorded as the upload's next part in one catalog transaction that also moves its offset, so an offset is never
/// acknowledged before its bytes are durable, and of two appends at one offset only one is recorded. Completion
/// assembles the parts without copying them, as CompleteMultipartUpload does; every append carries a CRC64NVME, so
/// the object has a full-object CRC64NVME checksum as well as its multipart ETag.
extension CatalogObjectStore {
    /// The checksum every append is hashed with, combined into the object's full-object checksum.
    static let resumableChecksum = ChecksumAlgorithm.crc64nvme

    /// Starts a resumable upload to `bucket`/`key` counted against `charge`'s owner (refused, with nothing stored,
    /// when its declared length would pass the owner's byte quota or the owner has its uploads' worth in progress);
    /// `NoSuchBucket` when the bucket is absent.
    package func createResumableUpload(
        bucket: String, key: String, charge: StorageCharge, length: Int64?, info: ResumableUpload.Info,
        attributes: ObjectAttributes, expiresAt: Date
    ) async throws -> ResumableUpload {
        var charge = charge
        charge.declaredBytes = length
        try await precheck(charge) { _ in 0 }
        let owner = charge.owner
        let multipart = try await createMultipartUpload(
            idPrefix: ResumableUpload.multipartIdPrefix, bucket: bucket, key: key, attributes: attributes, tags: [],
            checksumAlgorithm: Self.resumableChecksum, checksumType: "FULL_OBJECT", charge: charge)
        let upload = ResumableUpload(
            id: Hex.randomId(), uploadId: multipart.uploadId, bucket: bucket, key: key, owner: owner,
            length: length, createdAt: Date(), expiresAt: expiresAt, info: info)
        do {
            try await events.timed("catalog", "insertResumableUpload") { try await catalog.insertResumableUpload(upload) }
        } catch {
            await discardRefused(multipart)
            throw error
        }
        return upload
    }

    /// The resumable upload with that id, or nil.
    package func resumableUpload(_ id: String) async throws -> ResumableUpload? {
        try await events.timed("catalog", "resumableUpload") { try await catalog.resumableUpload(id) }
    }

    /// Appends `body` at `offset`: streamed to a blob with MD5, CRC64NVME and `checksums`, checked by `verify`, then
    /// recorded, unless that takes the upload's owner past `byteLimit` (`quotaExceeded`, the bytes deleted). A body
    /// that brings no bytes records nothing (the answer is the upload as it stands).
    package func appendResumable<Body: AsyncSequence & Sendable>(
        _ upload: ResumableUpload, at offset: Int64, body: Body, checksums: [ChecksumAlgorithm], byteLimit: Int64?,
        verify: BodyVerifier
    ) async throws -> ResumableAppendResult where Body.Element == ByteBuffer {
        let remaining = upload.length.map { $0 - offset } ?? CatalogObjectStore.Limits.maxObjectSize - offset
        let algorithms = [Self.resumableChecksum] + checksums.filter { $0 != Self.resumableChecksum }
        // A body of any size stops where the owner's quota would refuse it, not at the end of the upload.
        let room = try await self.room(
            StorageCharge(owner: upload.owner, quota: .init(storageBytes: byteLimit)), freed: { _ in 0 })
        let bounded = QuotaBoundBody(base: body, room: room, limit: byteLimit ?? 0)
        let blob: String
        let digests: BodyDigests
        do {
            (blob, digests) = try await writeVerified(bounded, checksums: algorithms, maxSize: max(0, remaining)) {
                try verify($0)
                // An empty append stores nothing: the upload as it stands answers it.
                guard $0.size > 0 else { throw EmptyAppend() }
            }
        } catch is EmptyAppend {
            guard let current = try await catalog.resumableUpload(upload.id) else { throw Self.noSuchUpload }
            return current.offset == offset ? .appended(current) : .conflict(current)
        }
        let part = PartInfo(number: 0, digests: digests, segments: [BlobSegment(blob: blob, size: digests.size)])
        let outcome: ResumableAppendOutcome
        do {
            outcome = try await events.timed("catalog", "appendResumablePart") {
                try await catalog.appendResumablePart(part, to: upload.id, at: offset, byteLimit: byteLimit)
            }
        } catch {
            await discardUnlessRecorded([blob], after: error)
            throw error
        }
        switch outcome {
        case .appended(let upload):
            return .appended(upload)
        case .conflict(let upload):
            await discardUnreferenced([blob])
            return .conflict(upload)
        case .beyondLength(let upload):
            await discardUnreferenced([blob])
            return .beyondLength(upload)
        case .missing:
            await discardUnreferenced([blob])
            // The upload's bytes became its object meanwhile (another append completed it): a conflict, not a
            // missing upload, so the client learns the offset instead of starting over. An aborted one (a client's
            // AbortMultipartUpload, a lifecycle rule) took its record with it: no such upload.
            guard let current = try await catalog.resumableUpload(upload.id) else { throw Self.noSuchUpload }
            return .conflict(current)
        }
    }

    /// The CRC64NVME (base64) of the bytes `upload` holds so far, combined from its appends' without reading them; nil
    /// when an append has none.
    package func receivedChecksum(_ upload: ResumableUpload) async throws -> String? {
        let name = Self.resumableChecksum.s3Name
        var parts: [(checksum: [UInt8], length: UInt64)] = []
        for part in try await catalog.parts(uploadId: upload.uploadId, after: 0, limit: nil) {
            guard let value = part.checksums[name], let data = Data(base64Encoded: value) else { return nil }
            parts.append(([UInt8](data), UInt64(part.size)))
        }
        return Checksum.combine(Self.resumableChecksum, parts: parts).map { Data($0).base64EncodedString() }
    }

    /// Sets a deferred length; the upload as it stands (its length unchanged when it had one already).
    package func setResumableLength(_ upload: ResumableUpload, length: Int64) async throws -> ResumableUpload {
        guard let updated = try await catalog.setResumableLength(upload.id, length: length) else { throw Self.noSuchUpload }
        return updated
    }

    /// Moves the upload's expiry to `date`; the upload with it.
    package func setResumableExpiry(_ upload: ResumableUpload, to date: Date) async throws -> ResumableUpload {
        try await events.timed("catalog", "setResumableExpiry") { try await catalog.setResumableExpiry(upload.id, to: date) }
        var upload = upload
        upload.expiresAt = date
        return upload
    }

    /// The first `count` bytes of the uploads' bytes one after the other (fewer when they hold fewer), and the
    /// content type the first upload was created with: what a type check looks at before the uploads become an object.
    /// `uploadNotFound` when an upload's bytes went (it was completed or ended meanwhile).
    package func resumableHead(_ uploads: [ResumableUpload], count: Int) async throws -> (
        head: [UInt8], declaredType: String?
    ) {
        var head: [UInt8] = []
        var declaredType: String?
        for (index, upload) in uploads.enumerated() {
            guard let multipart = try await catalog.upload(upload.uploadId) else { throw Self.noSuchUpload }
            if index == 0 { declaredType = multipart.attributes.contentType }
            let parts = try await catalog.parts(uploadId: upload.uploadId, after: 0, limit: nil)
            let lease = files.lease(parts.flatMap { $0.segments.map(\.blob) })
            defer { lease.release() }
            for segment in parts.flatMap(\.segments) where head.count < count {
                let length = min(segment.size, Int64(count - head.count))
                for try await piece in files.bytes(of: segment.blob, offset: segment.offset ?? 0, length: length) {
                    head += piece.readableBytesView.prefix(count - head.count)
                }
            }
            if head.count >= count { break }
        }
        return (head, declaredType)
    }

    /// Makes a fully received upload its object, once: the object, or nil when it was made before (by another
    /// request completing it at the same time on any node, or by one that did not live to record it).
    ///
    /// `verify` is given the ETag the object will have before it is made; it throws to refuse it. The file of a video
    /// or image (`fileOwner`) is written only where no object is or the same bytes are, so that of uploads completing
    /// at once only one makes the file; other bytes are refused (``FerryDomainError/fileStored(owner:)``).
    package func completeResumable(
        _ upload: ResumableUpload, fileOwner: String? = nil, verify: @Sendable (String) throws -> Void = { _ in }
    ) async throws -> ObjectInfo? {
        guard upload.etag == nil else { return nil }
        do {
            guard let multipart = try await catalog.upload(upload.uploadId) else {
                return try await recordCompletion(upload)
            }
            var parts = try await catalog.parts(uploadId: upload.uploadId, after: 0, limit: nil)
            if parts.isEmpty { parts = [try await emptyPart(multipart)] }
            let etag = Checksum.multipartETag(partMD5s: parts.map { Hex.decode($0.etag) ?? [] })
            try verify(etag)
            let made = try await assemble(
                multipart, parts: parts, fullObjectChecksums: [:],
                condition: Self.resumableCondition(insertOnly: upload.info.insertOnly, fileOwner: fileOwner))
            try await catalog.markResumableCompleted(upload.id, etag: made.etag)
            return made
        } catch let error as FerryDomainError where error.code == .uploadNotFound {
            // Another request completed it first (its parts may have gone between the two reads above).
            return try await recordCompletion(upload)
        }
    }

    /// Whether the upload's object was made but its completion not recorded (a server stopped between the two steps of
    /// ``completeResumable(_:fileOwner:verify:)``): its multipart upload is completed. Completing it again only records
    /// that.
    package func resumableObjectMade(_ upload: ResumableUpload) async throws -> Bool {
        guard upload.etag == nil, try await catalog.upload(upload.uploadId) == nil else { return false }
        return try await catalog.completedUpload(upload.uploadId) != nil
    }

    /// The write condition of a resumable upload's object: only where none is for an insert-only one, and the file
    /// condition of a video's or image's.
    private static func resumableCondition(insertOnly: Bool?, fileOwner: String?) -> ObjectWriteCondition {
        var condition = insertOnly == true ? ObjectWriteCondition.absent : .none
        condition.fileOwner = fileOwner
        return condition
    }

    /// Records the completion of an upload whose multipart upload was completed by another request; nil.
    private func recordCompletion(_ upload: ResumableUpload) async throws -> ObjectInfo? {
        guard let completed = try await catalog.completedUpload(upload.uploadId) else { throw Self.noSuchUpload }
        try await catalog.markResumableCompleted(upload.id, etag: completed.etag)
        return nil
    }

    /// An empty part (the first, by default), for an upload of zero bytes or a copy of an empty object.
    func emptyPart(
        _ upload: MultipartUploadInfo, number: Int = 1, checksums: [ChecksumAlgorithm] = [resumableChecksum],
        byteLimit: Int64? = nil
    ) async throws -> PartInfo {
        let (temp, digests) = try await files.write(
            AsyncStream<ByteBuffer> { $0.finish() }, checksums: checksums, maxSize: 0)
        let blob = try await files.commit(tempPath: temp)
        return try await record(
            PartInfo(number: number, digests: digests, segments: [BlobSegment(blob: blob, size: 0)]), upload: upload,
            byteLimit: byteLimit)
    }

    /// A tus final upload: the fully received `partials`, in order, become one object at `bucket`/`key` whose parts
    /// share their bytes (nothing is copied). Their records then name the final upload
    /// (``ResumableUpload/Info/concatenatedInto``) until they expire or are terminated, and their multipart uploads go,
    /// so that their bytes count once, as the object's. Its check against `charge`'s quota does not count their bytes
    /// and upload places a second time. `verify`
    /// sees the object's ETag before it is made and may refuse it; with `info.insertOnly` the object is made only
    /// where none exists (else `preconditionFailed`), and the file of a video or image (`fileOwner`) only where none
    /// is or the same bytes are; a partial upload ended meanwhile, or claimed by another final upload made at the same
    /// time (on any node), makes it `uploadNotFound`: a partial upload makes one object. A refused final upload
    /// leaves nothing behind.
    ///
    /// The final upload's record is written, fully received, before it claims the partial uploads, so that one whose
    /// request ended after the claim (a crash) is completed by a request naming the same partial uploads again
    /// (``completeConcatenation(_:partials:expiresAt:fileOwner:verify:)``). The object is nil when such a request completed it
    /// first.
    package func concatenateResumable(
        _ partials: [ResumableUpload], bucket: String, key: String, charge: StorageCharge, info: ResumableUpload.Info,
        attributes: ObjectAttributes, expiresAt: Date, fileOwner: String? = nil,
        verify: @Sendable (String) throws -> Void = { _ in }
    ) async throws -> (upload: ResumableUpload, object: ObjectInfo?) {
        let owner = charge.owner
        // Its partial uploads hold its places among the owner's uploads in progress: it needs none beside them.
        var creation = charge
        creation.quota.concurrentUploads = charge.quota.concurrentUploads.map { $0 + Set(partials.map(\.uploadId)).count }
        let multipart = try await createMultipartUpload(
            idPrefix: ResumableUpload.multipartIdPrefix, bucket: bucket, key: key, attributes: attributes, tags: [],
            checksumAlgorithm: Self.resumableChecksum, checksumType: "FULL_OBJECT", charge: creation)
        var recorded: ResumableUpload?
        var claimed = false
        do {
            var parts: [PartInfo] = []
            // The partial uploads whose parts are copied so far: the copies' check does not count their bytes again.
            var copied: [String] = []
            for partial in partials {
                let partialParts = try await catalog.parts(uploadId: partial.uploadId, after: 0, limit: nil)
                let lease = files.lease(partialParts.flatMap { $0.segments.map(\.blob) })
                defer { lease.release() }
                // Confirmed under the lease: a partial upload ended meanwhile (its bytes going) is `uploadNotFound`.
                guard let current = try await catalog.resumableUpload(partial.id), current.offset == partial.offset,
                    current.info.concatenatedInto == nil, partialParts.reduce(0, { $0 + $1.size }) == partial.offset
                else { throw Self.noSuchUpload }
                copied.append(partial.uploadId)
                for part in partialParts {
                    var copy = part
                    copy.number = parts.count + 1
                    copy.segments = try await link(part.segments)
                    parts.append(
                        try await record(copy, upload: multipart, byteLimit: charge.quota.storageBytes, freeing: copied))
                }
            }
            if parts.isEmpty { parts = [try await emptyPart(multipart)] }
            // A partial upload terminated while later ones were copied makes the final upload fail whole, as one
            // terminated before.
            for partial in partials where try await catalog.resumableUpload(partial.id) == nil { throw Self.noSuchUpload }
            let total = parts.reduce(0) { $0 + $1.size }
            try verify(Checksum.multipartETag(partMD5s: parts.map { Hex.decode($0.etag) ?? [] }))
            // Until it is complete, the record lasts ``unfinishedFinalLifetime``: one a crash left (its multipart upload
            // holding the partial uploads' bytes) expires soon, and its expiry gives its claim back.
            let upload = ResumableUpload(
                id: Hex.randomId(), uploadId: multipart.uploadId, bucket: bucket, key: key, owner: owner,
                length: total, offset: total, createdAt: Date(),
                expiresAt: min(expiresAt, Date().addingTimeInterval(Self.unfinishedFinalLifetime)), info: info, etag: nil)
            try await catalog.insertResumableUpload(upload)
            recorded = upload
            // Of final uploads made of one partial upload at the same time, one claims it; the others make nothing.
            guard try await catalog.claimPartialUploads(partials.map(\.id), for: upload.id) else { throw Self.noSuchUpload }
            claimed = true
            let (completed, object) = try await completeConcatenation(
                upload, partials: partials, expiresAt: expiresAt, fileOwner: fileOwner, verify: verify)
            return (completed, object)
        } catch {
            // Refused (insert-only, the file's bytes) before its object was made: the partial uploads are free for
            // another final upload, and nothing is left. Once the object is made (or when that cannot be told), the
            // record and its claim stay for the same final upload sent again, or for its expiry, to settle.
            let objectMade: Bool
            do {
                objectMade = try await catalog.completedUpload(multipart.uploadId) != nil
            } catch {
                objectMade = true
            }
            if !objectMade {
                if let recorded {
                    if claimed { try? await catalog.releasePartialUploads(partials.map(\.id), from: recorded.id) }
                    _ = try? await catalog.deleteResumableUpload(recorded.id)
                }
                await discardRefused(multipart)
            }
            throw error
        }
    }

    /// Completes the final upload `final`, fully received and holding the claim on `partials` (made by
    /// ``concatenateResumable(_:bucket:key:charge:info:attributes:expiresAt:fileOwner:verify:)``, whose request may
    /// have ended before it completed), and releases the partial uploads' multipart uploads. The upload as completed,
    /// and its object, nil when another request completed it first.
    package func completeConcatenation(
        _ final: ResumableUpload, partials: [ResumableUpload], expiresAt: Date, fileOwner: String? = nil,
        verify: @Sendable (String) throws -> Void = { _ in }
    ) async throws -> (upload: ResumableUpload, object: ObjectInfo?) {
        let object = try await completeResumable(final, fileOwner: fileOwner, verify: verify)
        guard var completed = try await catalog.resumableUpload(final.id), completed.etag != nil else {
            throw Self.noSuchUpload
        }
        if completed.expiresAt < expiresAt { completed = try await setResumableExpiry(completed, to: expiresAt) }
        await release(partials, into: completed)
        return (completed, object)
    }

    /// How long the record of a final upload lasts until its object is made: a request that ended after writing it
    /// (a crash) leaves it that long, holding its claim on its partial uploads for the same final upload sent again.
    package static let unfinishedFinalLifetime: TimeInterval = 900

    /// Marks the partial uploads of the final upload `final` as its own and removes their multipart uploads (the
    /// object holds their bytes). What fails is logged and left: such a partial upload's bytes count until it
    /// expires, as before a final upload, and a final upload may be made of it again.
    private func release(_ partials: [ResumableUpload], into final: ResumableUpload) async {
        for partial in partials {
            do {
                guard let blobs = try await catalog.concludePartialUpload(partial.id, into: final.id) else { continue }
                events?.multipartUpload(.completed, count: 1)
                await retire(blobs)
            } catch {
                logger.warning(
                    "a partial upload of a final upload stays until it expires",
                    metadata: ["ferry.multipart-upload": "\(partial.uploadId)", "ferry.error": "\(error)"])
            }
        }
    }

    /// Removes the multipart upload of a creation or concatenation that was refused or failed (counted as aborted,
    /// as it was counted as started).
    private func discardRefused(_ multipart: MultipartUploadInfo) async {
        guard let blobs = try? await catalog.deleteUpload(multipart.uploadId) else { return }
        events?.multipartUpload(.aborted, count: 1)
        await retire(blobs)
    }

    /// Ends an upload (tus termination, IETF cancellation, expiry): its record goes, and the bytes of an unfinished
    /// one with it. An object it became stays.
    package func terminateResumable(_ upload: ResumableUpload, expired: Bool = false) async throws {
        if upload.info.kind == .final, upload.etag == nil, let partials = upload.info.partials {
            try await settleUnfinishedFinal(upload, partials: partials)
        }
        guard let removed = try await catalog.deleteResumableUpload(upload.id) else { throw Self.noSuchUpload }
        guard removed.etag == nil, let blobs = try await catalog.deleteUpload(removed.uploadId) else { return }
        events?.multipartUpload(expired ? .expired : .aborted, count: 1)
        await retire(blobs)
    }

    /// Before the record of a final upload that was never recorded complete goes: a final upload whose object was
    /// made (its request ended before recording it) is recorded complete and its partial uploads released into it; one
    /// whose object was not gives back its claim, so that its partial uploads can make another. A failure leaves the
    /// record for the next attempt.
    private func settleUnfinishedFinal(_ final: ResumableUpload, partials ids: [String]) async throws {
        guard let completed = try await catalog.completedUpload(final.uploadId) else {
            try await catalog.releasePartialUploads(ids, from: final.id)
            return
        }
        try await catalog.markResumableCompleted(final.id, etag: completed.etag)
        var made = final
        made.etag = completed.etag
        var partials: [ResumableUpload] = []
        for id in ids {
            if let partial = try await catalog.resumableUpload(id) { partials.append(partial) }
        }
        await release(partials, into: made)
    }

    /// Aborts the multipart uploads of resumable uploads that no record owns and that were initiated before `date`:
    /// left by a crash while a resumable upload was created, concatenated or ended, and never given to a client (or
    /// already ended for it). Returns how many.
    package func abortUnclaimedResumableUploads(initiatedBefore date: Date) async throws -> Int {
        try await abort(
            try await catalog.unclaimedResumableMultipartUploads(initiatedBefore: date, limit: 1000), as: .expired)
    }

    /// Ends the unfinished resumable uploads of `owner` that expired before `now` (among the first 1000 expired ones:
    /// the collector removes the rest), so that their `ConcurrentUploads` slots come back; returns how many. The
    /// records of completed uploads, and other keys' uploads, are left to the collector.
    func expireUnfinishedResumableUploads(of owner: String, now: Date) async throws -> Int {
        try await end(
            try await catalog.expiredResumableUploads(before: now, limit: 1000).filter {
                $0.owner == owner && $0.etag == nil
            })
    }

    /// Removes the uploads that expired before `now` (see ``terminateResumable(_:expired:)``); returns how many.
    package func expireResumableUploads(now: Date) async throws -> Int {
        var count = 0
        while true {
            let expired = try await catalog.expiredResumableUploads(before: now, limit: 100)
            count += try await end(expired)
            if expired.count < 100 { return count }
        }
    }

    /// Ends `uploads` as expired; returns how many were still there to end.
    private func end(_ uploads: [ResumableUpload]) async throws -> Int {
        var count = 0
        for upload in uploads {
            do {
                try await terminateResumable(upload, expired: true)
                count += 1
            } catch let error as FerryDomainError where error.code == .uploadNotFound {
                // Removed by another request or node meanwhile.
            }
        }
        return count
    }
}

/// An append without bytes: nothing is written, committed or recorded.
private struct EmptyAppend: Error {}
