import Foundation

/// What one pass of the buckets' lifecycle rules did.
package struct LifecycleOutcome: Sendable, Hashable {
    /// Objects deleted because a rule expired them.
    package var expiredObjects = 0
    /// Multipart uploads aborted by an `AbortIncompleteMultipartUpload` rule.
    package var abortedUploads = 0

    /// Nothing done.
    package init(expiredObjects: Int = 0, abortedUploads: Int = 0) {
        self.expiredObjects = expiredObjects
        self.abortedUploads = abortedUploads
    }
}

extension CatalogObjectStore {
    /// Applies every bucket's lifecycle rules as of `now`: deletes the objects they expire and aborts the unfinished
    /// uploads they abort (their parts' bytes are queued for deletion as an abort's are).
    ///
    /// An object rewritten since it was listed is left alone (the delete is conditional on its ETag and time), so a
    /// pass never removes a version it did not judge. The rules of the buckets in `skipping` are not applied (the media
    /// bucket's, which takes none, set before it refused them).
    package func applyLifecycle(now: Date, dayLength: TimeInterval? = nil, skipping: Set<String> = []) async throws
        -> LifecycleOutcome
    {
        var outcome = LifecycleOutcome()
        let page = 1000
        for (bucket, document) in try await catalog.bucketConfigurations(.lifecycle) where !skipping.contains(bucket) {
            guard let lifecycle = BucketLifecycle(document: document, dayLength: dayLength) else { continue }
            var after: String?
            while lifecycle.expiresObjects && !Task.isCancelled {
                let objects = try await catalog.objects(bucket: bucket, after: after, from: "", limit: page)
                for object in objects {
                    guard let due = lifecycle.expiration(of: object)?.date, due <= now else { continue }
                    let unchanged = ObjectWriteCondition(
                        ifMatch: [object.etag], ifMatchLastModified: object.lastModified, ifMatchSize: object.size)
                    if case .stored(let replaced) = try await catalog.deleteObject(
                        bucket: bucket, key: object.key, condition: unchanged)
                    {
                        await retire(replaced.map(\.blob))
                        outcome.expiredObjects += 1
                    }
                }
                guard objects.count == page, let last = objects.last else { break }
                after = last.key
            }
            var marker = (key: "", uploadId: "")
            while lifecycle.abortsUploads && !Task.isCancelled {
                let uploads = try await catalog.uploads(
                    bucket: bucket, prefix: "", keyMarker: marker.key, uploadIdMarker: marker.uploadId, limit: page)
                for upload in uploads {
                    guard let due = lifecycle.abortDate(of: upload), due <= now,
                        let blobs = try await catalog.deleteUpload(upload.uploadId)
                    else { continue }
                    await retire(blobs)
                    outcome.abortedUploads += 1
                }
                guard uploads.count == page, let last = uploads.last else { break }
                marker = (last.key, last.uploadId)
            }
        }
        if outcome.abortedUploads > 0 { events?.multipartUpload(.expired, count: outcome.abortedUploads) }
        return outcome
    }
}
