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
    /// How many objects or uploads a lifecycle pass judges due between two readings of the bucket's rules.
    static let lifecycleRecheck = 100

    /// Applies every bucket's lifecycle rules as of `now`: deletes the objects they expire and aborts the unfinished
    /// uploads they abort (their parts' bytes are queued for deletion as an abort's are).
    ///
    /// An object rewritten or retagged since it was listed is left alone (the delete is conditional on its ETag, time,
    /// size and tags), so a pass never removes a version it did not judge. The rules of the buckets in `skipping` are
    /// not applied (the media bucket's, which takes none, set before it refused them).
    ///
    /// With `settledOnly`, a bucket's configuration is applied from the second pass that reads it unchanged (on the
    /// same bucket: not one deleted and made again in between), as S3
    /// takes a while to put a new one in force: right after PutBucketLifecycleConfiguration is answered, its bucket
    /// still holds what the rules are about to expire, and a mistaken rule can be replaced before it removes anything.
    package func applyLifecycle(
        now: Date, dayLength: TimeInterval? = nil, skipping: Set<String> = [], settledOnly: Bool = false
    ) async throws -> LifecycleOutcome {
        var outcome = LifecycleOutcome()
        let page = 1000
        let configurations = try await catalog.bucketConfigurations(.lifecycle)
        // A reading is the configuration with its bucket's creation: a bucket deleted and made again with the same
        // rules (through another node, which this node does not hear of) has rules that are new to it.
        var readings: [String: String] = [:]
        for (bucket, document) in configurations where !skipping.contains(bucket) {
            guard let created = try await catalog.bucket(bucket)?.createdAt else { continue }
            readings[bucket] = "\(created.timeIntervalSince1970)\n\(document)"
        }
        let seen = lifecycleSeen.withLockedValue { seen in
            defer { seen = readings }
            return seen
        }
        buckets: for (bucket, document) in configurations where !skipping.contains(bucket) {
            guard !settledOnly || (readings[bucket] != nil && seen[bucket] == readings[bucket]) else { continue }
            guard var lifecycle = BucketLifecycle(document: document, dayLength: dayLength) else { continue }
            // The rules are read again before every `recheck` deletions: once a DeleteBucketLifecycle or a replacement
            // has been answered, a pass under way removes at most that many objects by the old rules.
            var judged = 0
            func stillInForce() async throws -> Bool {
                judged += 1
                guard judged % Self.lifecycleRecheck == 0 else { return true }
                guard let reread = try await catalog.bucketConfiguration(bucket, .lifecycle),
                    let current = BucketLifecycle(document: reread, dayLength: dayLength),
                    !settledOnly || reread == document
                else { return false }
                lifecycle = current
                return true
            }
            var after: String?
            while lifecycle.expiresObjects && !Task.isCancelled {
                let objects = try await catalog.objects(bucket: bucket, after: after, from: "", limit: page)
                for object in objects where lifecycle.expiration(of: object).map({ $0.date <= now }) == true {
                    guard try await stillInForce() else { continue buckets }
                    guard let due = lifecycle.expiration(of: object)?.date, due <= now else { continue }
                    // Its tags too: a rule's filter may take them, and a tagging answered since the page was read
                    // may have taken the object out of every rule.
                    let unchanged = ObjectWriteCondition(
                        ifMatch: [object.etag], ifMatchLastModified: object.lastModified, ifMatchSize: object.size,
                        ifMatchTags: object.tags)
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
                for upload in uploads where lifecycle.abortDate(of: upload).map({ $0 <= now }) == true {
                    guard try await stillInForce() else { continue buckets }
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

    /// Forgets the configurations the last lifecycle pass read: the next pass with `settledOnly` applies none.
    package func forgetLifecycleReadings() {
        lifecycleSeen.withLockedValue { $0 = [:] }
    }
}
