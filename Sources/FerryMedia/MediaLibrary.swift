import FerryCore
import FerryStorage
import Foundation
import Logging

/// The media layer's library of videos and images: how they advance as their files arrive in storage, expire when the
/// files never arrive, and go away with their files. The edge's routes (media, publish, form, object, part signing)
/// tell it what storage did; it knows nothing of HTTP and throws ``FerryDomainError`` for storage failures.
public struct MediaLibrary: Sendable {
    /// What the library is told of the server's configuration.
    package struct Configuration: Sendable {
        /// The bucket media files live in.
        package var bucket: String
        /// How long a video or image may stay `Uploading` before ``expireUnfinishedUploads(now:pageSize:)`` makes it
        /// `UploadFail`.
        package var uploadingVideoMaxAge: TimeInterval
        /// Attempts of each media job before it fails for good.
        package var maxAttempts: Int
        /// Where failures to advance a video or image are logged.
        package var logger: Logger

        package init(bucket: String, uploadingVideoMaxAge: TimeInterval, maxAttempts: Int, logger: Logger) {
            self.bucket = bucket
            self.uploadingVideoMaxAge = uploadingVideoMaxAge
            self.maxAttempts = maxAttempts
            self.logger = logger
        }
    }

    package let catalog: any MediaCatalog
    package let store: any ObjectStore
    package let webhooks: WebhookOutbox
    let configuration: Configuration
    /// Media jobs running in this process (a deletion stops them).
    let running: RunningJobs

    package init(
        catalog: any MediaCatalog, store: any ObjectStore, webhooks: WebhookOutbox, configuration: Configuration,
        running: RunningJobs
    ) {
        self.catalog = catalog
        self.store = store
        self.webhooks = webhooks
        self.configuration = configuration
        self.running = running
    }

    /// The bucket media files live in.
    package var bucket: String { configuration.bucket }

    /// Creates the media bucket when it is missing.
    package func ensureBucket() async throws {
        do {
            try await store.createBucket(bucket)
        } catch let error as FerryDomainError where error.code == .bucketExists {}
    }

    // MARK: Storage events

    /// The file of a video or image. Past `Uploading` it is stored: rewriting it would leave the catalog (probe,
    /// renditions, size) describing other bytes, so nothing replaces it but the same bytes. While it is uploading, the
    /// first write to finish makes it, and the same bytes alone may follow (``ObjectWriteCondition/forFile(_:)``).
    package struct StoredFile: Sendable {
        /// `Video <id>` or `Image <id>`.
        package var owner: String
        /// The stored object's ETag; nil when it is not in storage.
        package var etag: String?
        /// Whether the video or image is still `Uploading`: no file was taken for it yet.
        package var uploading = false

        /// The refusal of a write that is not the same bytes.
        package var refusal: FerryDomainError { .fileStored(owner: owner) }

        /// Whether an object with `etag` may be written: any while the video or image is uploading, the stored file's
        /// after.
        package func accepts(etag: String) -> Bool { uploading || etag == self.etag }

        /// Refuses completing a multipart upload from parts with `partETags` unless they make the stored file (the
        /// same parts again) or the video or image is still uploading.
        package func checkCompletion(partETags: [String]) throws {
            let md5s = partETags.map { Hex.decode($0.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) ?? [] }
            guard accepts(etag: Checksum.multipartETag(partMD5s: md5s)) else { throw refusal }
        }

        /// The stored file an upload completing now must match, asked of `check` (``checkWritable(bucket:key:)``); nil
        /// also for the file of a video or image that is gone: an upload begun before completes, and
        /// ``objectStored(_:)`` removes what it made.
        package static func forCompletion(
            bucket: String, key: String, check: (String, String) async throws -> StoredFile?
        ) async throws -> StoredFile? {
            do {
                return try await check(bucket, key)
            } catch let error as FerryDomainError where error.code == .accessDenied {
                return nil
            }
        }
    }

    /// Refuses a write under the directory of a video or to the file of an image that was deleted or whose upload
    /// expired: an upload credential issued before may still be valid, but nothing more is stored for them. A write
    /// to the file of a video or image is answered with that file (``StoredFile``): once stored (past `Uploading`),
    /// only the same bytes again (a retry whose first answer was lost) may be written; while uploading, the write makes
    /// it unless another made it first.
    package func checkWritable(bucket: String, key: String) async throws -> StoredFile? {
        guard bucket.isByteEqual(to: self.bucket) else { return nil }
        if let gone = try await goneOwner(of: key) {
            throw FerryDomainError(.accessDenied, "\(gone) was deleted or its upload expired; nothing more is stored for it.")
        }
        let owner: String
        let uploading: Bool
        if let video = try await catalog.video(bucket: bucket, key: key) {
            (owner, uploading) = ("Video \(video.videoId)", video.status == VideoStatus.uploading)
        } else if let image = try await catalog.image(bucket: bucket, key: key) {
            (owner, uploading) = ("Image \(image.imageId)", image.status == ImageStatus.uploading)
        } else {
            return nil
        }
        if uploading { return StoredFile(owner: owner, uploading: true) }
        return StoredFile(owner: owner, etag: try await store.storedObject(bucket: bucket, key: key)?.etag)
    }

    /// The video whose directory (`video/<id>/`) holds `key` when it was deleted or its upload expired, or the image
    /// whose file (`image/<type>/<id>.<ext>`) `key` is when it was deleted or its upload expired: `Video <id>` or
    /// `Image <id>`.
    private func goneOwner(of key: String) async throws -> String? {
        let parts = key.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        if parts[0] == "video", Hex.isRandomId(parts[1]), let video = try await catalog.video(String(parts[1])),
            [VideoStatus.deleted, VideoStatus.uploadFailed].contains(video.status)
        {
            return "Video \(video.videoId)"
        }
        if parts[0] == "image", let id = parts[2].split(separator: ".").first, Hex.isRandomId(id),
            let image = try await catalog.image(String(id)), image.key.isByteEqual(to: key),
            [ImageStatus.deleted, ImageStatus.uploadFailed].contains(image.status)
        {
            return "Image \(image.imageId)"
        }
        return nil
    }

    /// Called when the object service has stored an object: advances the video or image it belongs to. A file
    /// written for a video or image that is gone (with a credential issued before, past
    /// ``checkWritable(bucket:key:)``'s look) is nobody's: it is removed.
    package func objectStored(_ object: ObjectInfo) async {
        guard object.bucket == bucket else { return }
        do {
            if let gone = try await goneOwner(of: object.key) {
                try await store.deleteObject(
                    bucket: object.bucket, key: object.key, condition: ObjectWriteCondition(ifMatch: [object.etag]))
                configuration.logger.info(
                    "file of a video or image that is gone removed",
                    metadata: ["ferry.owner": .string(gone), "ferry.key": .string(object.key)])
            } else if let video = try await catalog.video(bucket: object.bucket, key: object.key) {
                try await videoStored(video.videoId, object: object)
            } else if let image = try await catalog.image(bucket: object.bucket, key: object.key) {
                try await imageStored(image.imageId, object: object)
            }
        } catch {
            configuration.logger.warning(
                "media status update failed",
                metadata: ["ferry.key": .string(object.key), "error": .string("\(error)")])
        }
    }

    /// A video's source is in storage: the first time, `Uploading → UploadSucc`, its probe job and
    /// `FileUploadComplete`, in one change. Later writes of the source only update its size (the catalog describes the
    /// bytes stored, whoever wrote them); the same source seen again (a repeated completion, the HEAD of a completed
    /// resumable upload) changes nothing.
    package func videoStored(_ videoId: String, object: ObjectInfo) async throws {
        let maxAttempts = configuration.maxAttempts
        try await catalog.updateVideo(videoId) { [webhooks] video in
            guard video.status != VideoStatus.deleted, video.key.isByteEqual(to: object.key),
                video.status == VideoStatus.uploading || video.size != object.size
            else { return .keep }
            video.size = object.size
            video.updatedAt = Date()
            guard video.status == VideoStatus.uploading else { return .save() }
            video.status = VideoStatus.uploadSucc
            return .save(
                enqueue: [MediaJob(videoId: video.videoId, kind: .probe, maxAttempts: maxAttempts)],
                notify: try webhooks.events(.fileUploadComplete(videoId: videoId, size: object.size)))
        }
    }

    /// An image's file is in storage: `Uploading → Uploaded` with its size and, the first time, `ImageUploadComplete`
    /// in the same change (once, however many writers and passes see the file arrive: the change is atomic); later
    /// writes only update its size, and the same file seen again changes nothing. An image whose upload expired, or
    /// that was deleted, is left as it is.
    package func imageStored(_ imageId: String, object: ObjectInfo) async throws {
        try await catalog.updateImage(imageId) { [webhooks] image in
            guard [ImageStatus.uploading, ImageStatus.uploaded].contains(image.status),
                image.key.isByteEqual(to: object.key),
                image.status == ImageStatus.uploading || image.size != object.size
            else { return .keep }
            let arrived = image.status == ImageStatus.uploading
            image.status = ImageStatus.uploaded
            image.size = object.size
            return .save(notify: arrived ? try webhooks.events(.imageUploadComplete(imageId: imageId, size: object.size)) : [])
        }
    }

    // MARK: Deletion and expiry

    /// Deletes a video: its status (and its snapshot cover's, whose file lives with it), the cancellation of its jobs
    /// and a ``MediaJobKind/removeFiles`` job in one change, a job running here stopped at once (its ffmpeg killed; one
    /// running on another node stops at its next heartbeat), its files removed, then `VideoDeleted`, then the removal
    /// recorded as done (the job then finds nothing to do). Stopped midway (a crash, a failing store), the removal job
    /// finishes it later on any node with media workers.
    package func delete(_ video: VideoRecord) async throws {
        var snapshot: ImageRecord?
        if let id = video.snapshotImageId { snapshot = try await catalog.image(id) }
        snapshot?.status = ImageStatus.deleted
        let cover = snapshot
        try await catalog.updateVideo(video.videoId) { video in
            video.status = VideoStatus.deleted
            video.updatedAt = Date()
            // The cover read above is the one the video names still (a newer snapshot replaces both together).
            let images = cover.map { $0.imageId == video.snapshotImageId ? [$0] : [] } ?? []
            return .save(enqueue: [Self.removalJob(video.videoId)], cancelJobs: true, images: images)
        }
        running.cancel(videoId: video.videoId)
        try await Self.removeFiles(of: video, in: store)
        try await webhooks.enqueue(.videoDeleted(videoId: video.videoId))
        await recordRemoval(video.videoId, status: VideoStatus.deleted)
    }

    /// Deletes an image: its status, `ImageDeleted` and a ``MediaJobKind/removeImageFile`` job in one change, then its
    /// file and any unfinished multipart upload of it. Stopped midway (a crash, a failing store), the image is
    /// `Deleted` and takes no more writes, and the removal job removes what is left later on any node with media
    /// workers; deleting it again removes it at once. The event is sent once.
    package func delete(_ image: ImageRecord) async throws {
        try await catalog.updateImage(image.imageId) { [webhooks] image in
            guard image.status != ImageStatus.deleted else { return .keep }
            image.status = ImageStatus.deleted
            return .save(
                enqueue: [Self.removalJob(image.imageId, kind: .removeImageFile)],
                notify: try webhooks.events(.imageDeleted(imageId: image.imageId)))
        }
        try await Self.removeFile(of: image, in: store)
    }

    /// Records that the files of `videoId` are removed and its event sent while it is `status`, so that its removal
    /// job has nothing left to do. Best effort: unrecorded, the job does both again (the event may come twice).
    private func recordRemoval(_ videoId: String, status: String) async {
        do {
            try await catalog.updateVideo(videoId) { video in
                guard video.status == status else { return .keep }
                video.removedWith = status
                return .save()
            }
        } catch {
            configuration.logger.warning(
                "could not record a removal; its job will do it again",
                metadata: ["ferry.video-id": .string(videoId), "ferry.error": .string("\(error)")])
        }
    }

    /// How long a ``MediaJobKind/removeFiles`` job waits before a worker may take it: the node that enqueued it has
    /// finished by then, unless it stopped.
    static let removalDelay: TimeInterval = 300

    /// The job that finishes a deletion or an expiry if the node making it stops before it has: the removal of a
    /// video's files (``MediaJobKind/removeFiles``, `id` the video's) or of an image's file
    /// (``MediaJobKind/removeImageFile``, `id` the image's).
    static func removalJob(_ id: String, kind: MediaJobKind = .removeFiles) -> MediaJob {
        MediaJob(videoId: id, kind: kind, maxAttempts: 10, runAt: Date().addingTimeInterval(removalDelay))
    }

    /// Videos and images whose upload did not complete within `uploadingVideoMaxAge` become `UploadFail`: what had
    /// arrived of their file (a video's objects, and unfinished multipart uploads) is removed and a
    /// `VideoUploadExpired` or `ImageUploadExpired` event is sent (an image's with its status change, then its removal;
    /// a removal job finishes either when the node stops midway). One whose file is stored after all (the server
    /// stopped between storing it and recording it) advances instead. Looks at every one, `pageSize` at a time; one
    /// that cannot be looked at now is logged and left for the next pass. Returns how many expired.
    @discardableResult
    func expireUnfinishedUploads(now: Date = Date(), pageSize: Int = 1000) async throws -> Int {
        let before = now.addingTimeInterval(-configuration.uploadingVideoMaxAge)
        let videos = try await walk(
            { after in try await catalog.uploadingVideos(createdBefore: before, after: after, limit: pageSize) },
            id: \.videoId, pageSize: pageSize
        ) { video in
            if try await advanceIfStored(video) { return false }
            let expired = try await catalog.updateVideo(video.videoId) { video in
                guard video.status == VideoStatus.uploading else { return .keep }
                video.status = VideoStatus.uploadFailed
                video.updatedAt = now
                return .save(enqueue: [Self.removalJob(video.videoId)], cancelJobs: true)
            }
            guard expired != nil else { return false }
            try await Self.removeFiles(of: video, in: store, expired: true)
            try await webhooks.enqueue(.videoUploadExpired(videoId: video.videoId))
            await recordRemoval(video.videoId, status: VideoStatus.uploadFailed)
            return true
        }
        let images = try await walk(
            { after in try await catalog.uploadingImages(createdBefore: before, after: after, limit: pageSize) },
            id: \.imageId, pageSize: pageSize
        ) { image in
            if try await advanceIfStored(image) { return false }
            let expired = try await catalog.updateImage(image.imageId) { [webhooks] image in
                guard image.status == ImageStatus.uploading else { return .keep }
                image.status = ImageStatus.uploadFailed
                return .save(
                    enqueue: [Self.removalJob(image.imageId, kind: .removeImageFile)],
                    notify: try webhooks.events(.imageUploadExpired(imageId: image.imageId)))
            }
            guard expired != nil else { return false }
            try await Self.removeFile(of: image, in: store, expired: true)
            return true
        }
        return videos + images
    }

    /// How long a video's upload may have gone before ``advanceStoredUploads(now:pageSize:)`` looks for its source:
    /// far longer than storing an object takes between its write and the library hearing of it.
    static let storedUploadGrace: TimeInterval = 300

    /// Advances the videos and images still `Uploading` whose file is in storage: the server stopped, or the catalog
    /// failed, between storing the file and advancing its record (``objectStored(_:)``); a video would otherwise wait
    /// for ``expireUnfinishedUploads(now:pageSize:)``, an image for ever. Looks at every one created before
    /// ``storedUploadGrace``, `pageSize` at a time; one that cannot be looked at or advanced now is logged and left for
    /// the next pass. Returns how many advanced.
    func advanceStoredUploads(now: Date = Date(), pageSize: Int = 1000) async throws -> Int {
        let before = now.addingTimeInterval(-Self.storedUploadGrace)
        let videos = try await walk(
            { after in try await catalog.uploadingVideos(createdBefore: before, after: after, limit: pageSize) },
            id: \.videoId, pageSize: pageSize
        ) { video in try await advanceIfStored(video) }
        let images = try await walk(
            { after in try await catalog.uploadingImages(createdBefore: before, after: after, limit: pageSize) },
            id: \.imageId, pageSize: pageSize
        ) { image in try await advanceIfStored(image) }
        return videos + images
    }

    /// Pages through records by id, advancing each (`advance` says whether it did); returns how many advanced.
    private func walk<Record>(
        _ page: (String) async throws -> [Record], id: KeyPath<Record, String>, pageSize: Int,
        advance: (Record) async throws -> Bool
    ) async throws -> Int {
        var advanced = 0
        var after = ""
        while !Task.isCancelled {
            let records = try await page(after)
            for record in records {
                do {
                    if try await advance(record) { advanced += 1 }
                } catch {
                    configuration.logger.warning(
                        "uploading record not looked at",
                        metadata: ["ferry.id": .string(record[keyPath: id]), "error": .string("\(error)")])
                }
            }
            guard records.count == pageSize, let last = records.last else { break }
            after = last[keyPath: id]
        }
        return advanced
    }


    /// Advances `video` when its source is stored; false when it is not. Also asked by a client's RefreshUploadVideo,
    /// which a video stranded `Uploading` by a stop between storing and advancing would otherwise answer with new
    /// credentials.
    package func advanceIfStored(_ video: VideoRecord) async throws -> Bool {
        guard let object = try await store.storedObject(bucket: video.bucket, key: video.key) else { return false }
        try await videoStored(video.videoId, object: object)
        return true
    }

    /// Advances `image` when its file is stored; false when it is not.
    package func advanceIfStored(_ image: ImageRecord) async throws -> Bool {
        guard let object = try await store.storedObject(bucket: image.bucket, key: image.key) else { return false }
        try await imageStored(image.imageId, object: object)
        return true
    }

    /// Deletes a video's files from `store`: its source, everything under its directory (`video/<id>/`: cover,
    /// renditions) and the unfinished multipart uploads of its source (counted as expired with `expired`).
    static func removeFiles(of video: VideoRecord, in store: any ObjectStore, expired: Bool = false) async throws {
        try await store.deleteObject(bucket: video.bucket, key: video.key, condition: .none)
        try await WorkFiles.deleteObjects(in: store, bucket: video.bucket, prefix: "video/\(video.videoId)/")
        try await abortMultipartUploads(bucket: video.bucket, key: video.key, in: store, expired: expired)
    }

    /// Deletes an image's file from `store`, and the unfinished multipart uploads of it (counted as expired with
    /// `expired`).
    static func removeFile(of image: ImageRecord, in store: any ObjectStore, expired: Bool = false) async throws {
        try await store.deleteObject(bucket: image.bucket, key: image.key, condition: .none)
        try await abortMultipartUploads(bucket: image.bucket, key: image.key, in: store, expired: expired)
    }

    /// Aborts the unfinished multipart uploads of `bucket`/`key`.
    private static func abortMultipartUploads(
        bucket: String, key: String, in store: any ObjectStore, expired: Bool
    ) async throws {
        for upload in try await store.listMultipartUploads(
            bucket: bucket, prefix: key, delimiter: nil, keyMarker: "", uploadIdMarker: "", maxUploads: 1000
        ).uploads where upload.key.isByteEqual(to: key) {
            do {
                try await store.abortMultipartUpload(upload, expired: expired)
            } catch let error as FerryDomainError where error.code == .uploadNotFound {
                // Completed or aborted meanwhile: nothing left to remove.
            }
        }
    }
}

extension ObjectWriteCondition {
    /// This condition (a request's own) with that of `file` when the write is to the file of a video or image: made
    /// where no object is, or over the same bytes.
    package func forFile(_ file: MediaLibrary.StoredFile?) -> ObjectWriteCondition {
        var condition = self
        condition.fileOwner = file?.owner
        return condition
    }
}
