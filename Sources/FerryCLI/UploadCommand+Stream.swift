import ArgumentParser
import Crypto
import Ferry
import FerryCore
import Foundation

/// `ferry upload --protocol tus|ietf`: each file as one resumable stream to the server's upload resource
/// (``StreamUploader``) instead of parallel multipart parts. The upload's URL is kept in the checkpoint directory, so
/// running the same command again after Ctrl-C or a kill resumes from the server's offset; a video keeps its VideoId
/// (its CreateUploadVideo carries a ClientToken made from the file).
extension UploadCommand {
    /// What a stream upload keeps between runs.
    struct StreamRecord: Codable {
        /// The upload's path on the service (the embedded default listens on a new port each run).
        var uploadPath: String
        var size: Int64
        var modified: Double
        /// The file as it was when the upload began (``streamIdentity(of:size:modified:fileNumber:)``): a file that
        /// differs is uploaded afresh instead of continued.
        var identity: String?
        /// The image the upload is the file of (an image is created without a token that would find it again).
        var imageId: String?
        /// The video the upload is the file of.
        var videoId: String?
    }

    /// Bytes of each sample of a file's identity.
    static let identitySampleSize = 64 * 1024
    /// Samples of a file's identity, spread evenly from its first byte to its last.
    static let identitySamples: Int64 = 16

    /// What tells a file from another at the same path: its size, modification time and file number, and a SHA-256 of
    /// sixteen 64 KiB samples of its bytes from the first to the last. A file copied over another of the same size
    /// with its time kept (`cp -p`, `rsync -a`) differs in all but the most unlikely case.
    static func streamIdentity(of file: URL, size: Int64, modified: Double, fileNumber: UInt64) throws -> String {
        var hash = SHA256()
        hash.update(data: Data("\(size)\n\(modified)\n\(fileNumber)\n".utf8))
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let span = max(0, size - Int64(identitySampleSize))
        for index in 0..<identitySamples {
            try handle.seek(toOffset: UInt64(span * index / (identitySamples - 1)))
            hash.update(data: try handle.read(upToCount: identitySampleSize) ?? Data())
        }
        return Hex.encode(hash.finalize())
    }

    func uploadStreams(context: UploadContext, wire: StreamUploader.WireProtocol) async throws -> Int32 {
        var uploader = StreamUploader(protocol: wire, transport: context.configuration.transport)
        uploader.retryPolicy = context.configuration.retryPolicy
        if let partSize, let size = ByteSize.parse(partSize) { uploader.chunkSize = size }
        let (command, configured) = (self, uploader)
        let code = try await Self.batch(files, jobs: jobs, context: context) {
            try await command.uploadStream($0, uploader: configured, context: context)
        }
        // A run ending done leaves no stream record of what it made: one a kill left between a file's batch record
        // and the stream record's removal would have the same command's next run print that finished upload again
        // instead of sending the file. Only a record of the video or image the batch recorded for the file goes: one
        // of another upload (another command's, paused) or one another run holds the lock of is not this batch's.
        if code == ExitCodes.success {
            let records = JSONRecordFiles(directory: context.records.appendingPathComponent("streams"))
            for path in files {
                guard let made = context.batch.finished(path), let id = made["VideoId"] ?? made["ImageId"] else {
                    continue
                }
                let name = Self.streamRecordName(URL(fileURLWithPath: path), destination: streamDestination(uploader))
                guard let lock = try? CheckpointLock.acquire(records.url(".\(name).ferry-lock")) else { continue }
                if let record = records.read(StreamRecord.self, name: name), (record.videoId ?? record.imageId) == id {
                    records.remove(name)
                }
                lock.release()
            }
        }
        return code
    }

    /// Where this command sends a file by stream: the same file sent elsewhere (another bucket or key, a video, the
    /// other protocol) is another upload, never the continuation of this one.
    private func streamDestination(_ uploader: StreamUploader) -> String {
        [bucket ?? "", key ?? "", bucket == nil ? "media" : "object", wire(uploader)].joined(separator: "\n")
    }

    /// The name of the record of `file`'s stream upload to `destination`: one per path and destination.
    private static func streamRecordName(_ file: URL, destination: String) -> String {
        Hex.encode(SHA256.hash(data: Data((file.standardizedFileURL.path + "\n" + destination).utf8))) + ".json"
    }

    private func uploadStream(_ path: String, uploader configured: StreamUploader, context: UploadContext) async throws -> Int32 {
        let file = URL(fileURLWithPath: path).standardizedFileURL
        let name = file.lastPathComponent
        var telling = configured
        telling.onRetry = { [output = context.output] attempt, error, delay in
            output.retrying(file: name, attempt: attempt, error: error, delay: delay)
        }
        let uploader = telling
        // A cancel needs only the path, which names the record: the file may be gone.
        let attributes = cancel ? [:] : try FileManager.default.attributesOfItem(atPath: file.path)
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        let fingerprint = Hex.encode(SHA256.hash(data: Data("\(file.path)\n\(size)\n\(modified)".utf8)))
        let identity = cancel ? nil : try Self.streamIdentity(
            of: file, size: size, modified: modified,
            fileNumber: (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0)
        let destination = streamDestination(uploader)
        let recordName = Self.streamRecordName(file, destination: destination)
        // The ClientToken names the file, its destination and the record directory: a rerun of this command gets the
        // video or image it made back, a run sending the file elsewhere (the other protocol, another record
        // directory), perhaps at the same time, one of its own.
        let named = [fingerprint, destination, context.records.standardizedFileURL.path].joined(separator: "\n")
        let clientToken = String(Hex.encode(SHA256.hash(data: Data(named.utf8))).prefix(32))
        // The record names the upload's URL, which is its credential: kept 0600 in a 0700 directory.
        let records = JSONRecordFiles(directory: context.records.appendingPathComponent("streams"))
        // One run at a time per record (an advisory lock the kernel lets go of when this process ends): a second run
        // of the same file and destination stops here, having sent nothing and touched no record.
        let recordLock: CheckpointLock
        do {
            try records.createDirectory()
            guard let lock = try CheckpointLock.acquire(records.url(".\(recordName).ferry-lock")) else {
                let busy = FerryError(
                    .uploadInProgress, "Another upload of \(path) is running (checkpoint \(records.url(recordName).path))")
                context.output.failure(Self.failureText(path, busy), file: name, error: busy)
                return ExitCodes.of(busy)
            }
            recordLock = lock
        } catch {
            context.output.failure("ferry: \(path): \(error)", file: name, error: error)
            return ExitCodes.failed
        }
        defer { recordLock.release() }
        var previous = records.read(StreamRecord.self, name: recordName)
        let recorded = previous
        // What a cancel leaves on the server: a video or image no longer uploading is not deleted, nor is the object a
        // completed upload made.
        var kept: String?
        // An earlier upload this run does not continue (cancelled, started afresh, or of a file that has changed since)
        // is ended on the server, so that it holds neither bytes nor its key's quota until it expires.
        if let old = previous, cancel || noResume || old.identity != identity {
            if !cancel, !noResume {
                context.output.message("\(path) changed since its upload started; uploading it afresh.", file: name)
            }
            if let url = URL(string: context.connection.base + old.uploadPath) {
                if cancel, let bucket, (try? await uploader.isComplete(url)) == true {
                    kept = "it had completed, and the object \(bucket)/\(key ?? name) stays"
                }
                do {
                    try await uploader.terminate(url)
                } catch {
                    guard !cancel else {
                        context.output.failure("ferry: \(path): \(error). The record is kept: run --cancel again.", file: name, error: error)
                        return ExitCodes.of(error)
                    }
                }
            }
            // Its video or image, still Uploading, is deleted rather than left counting against the key's quota until
            // it expires (a new one is made for the file sent afresh).
            let media = context.connection.media(context.configuration)
            let stays = "is kept: it is no longer uploading (stored already), or the service could not be asked"
            if let videoId = old.videoId, !(await media.deleteAbandonedVideo(videoId)) { kept = "video \(videoId) \(stays)" }
            if let imageId = old.imageId, !(await media.deleteAbandonedImage(imageId)) { kept = "image \(imageId) \(stays)" }
            records.remove(recordName)
            previous = nil
        }
        if cancel {
            let text = switch (recorded, kept) {
            case (nil, _): "No interrupted upload of \(path) to cancel."
            case (_, nil): "Cancelled the stream upload of \(path): nothing is left of it on the server."
            case (_, let kept?): "Cancelled the stream upload of \(path); \(kept)."
            }
            context.output.message(text, file: name)
            return ExitCodes.success
        }

        // Where to create it: the object's signed creation URL, or the video's (or image's) upload URL.
        let creation: URL
        var signer: SigV4Signer?
        var fields: [String: String] = [:]
        if let bucket {
            do {
                let client = context.connection.objects(context.configuration)
                guard try await Self.untilInterrupted(context, {
                    try await Self.ensureBucket(bucket, client: client, output: context.output, file: name)
                }) != nil else {
                    context.output.paused(file: name)
                    return ExitCodes.interrupted
                }
            } catch {
                context.output.failure("ferry: \(path): \(error)", file: name, error: error)
                return ExitCodes.of(error)
            }
            let key = key ?? name
            let path = "/_ferry/uploads/s3/" + SigV4.uriEncode(bucket, encodeSlash: true) + "/"
                + SigV4.uriEncode(key, encodeSlash: false)
            guard let url = URL(string: context.connection.base + path) else {
                throw ValidationError("The key \(key) cannot be part of a URL.")
            }
            creation = url
            signer = SigV4Signer(credentials: context.connection.credentials.sigV4, region: context.connection.region)
        } else {
            let media = context.connection.media(context.configuration)
            let ticket: MediaServiceClient.UploadTicket
            var refreshedVideo: MediaServiceClient.UploadTicket?
            // A video or image stored already was completed by the run before, whose last answer was lost, when the
            // recorded upload is complete with this file: that is the result, and nothing is sent again. Holding
            // other bytes, it is not this file's: the file becomes a new one.
            let recordedUpload = previous.flatMap { URL(string: context.connection.base + $0.uploadPath) }
            func storedEarlier(_ fields: [String: String]) async throws(FerryError) -> Bool {
                guard let recordedUpload,
                    let done = try await Self.asked(context, { [uploader] () async throws(FerryError) in
                        try await uploader.completed(recordedUpload, file: file)
                    })
                else { return false }
                var fields = fields
                if let etag = done.etag { fields["ETag"] = etag }
                // Recorded before the stream record goes: a run killed in between finds it done either way.
                if context.recordFinished(path, fields) { records.remove(recordName) }
                context.output.streamResult(file: name, size: done.size, etag: done.etag, message: nil)
                context.output.mediaResult(fields, file: name)
                return true
            }
            if MediaKind(fileURL: file) == .video { Self.warnIfNotMedia(file) }
            do {
                if MediaKind(fileURL: file) == .image {
                    // A rerun continues the same image (a new one would name no bytes and wait until it expired),
                    // unless that image takes no more uploads; the network failing fails this run, resumably.
                    var refreshed: MediaServiceClient.UploadTicket?
                    if let imageId = previous?.imageId {
                        do {
                            refreshed = try await Self.asked(context) { () async throws(FerryError) in
                                try await media.refreshUploadImage(imageId: imageId)
                            }
                        } catch where error.serverCode == "InvalidImage.Uploaded" {
                            // The image's URL as CreateUploadImage gives it: GetImageInfo's, unsigned.
                            let url = (try? await media.getImageInfo(imageId: imageId))?.unsignedURL
                            if try await storedEarlier(["ImageId": imageId, "ImageURL": url].compactMapValues { $0 }) {
                                return ExitCodes.success
                            }
                        } catch where MediaUploadJournal.startsAfresh(after: error) {
                            // Gone or not this key's: a new image.
                        }
                    }
                    if let refreshed {
                        ticket = refreshed
                    } else {
                        let (ext, imageTitle) = (file.pathExtension.lowercased(), title ?? Self.defaultTitle(name))
                        ticket = try await Self.asked(context) { () async throws(FerryError) in
                            try await media.createUploadImage(ext: ext, title: imageTitle, clientToken: clientToken)
                        }
                    }
                    fields = ["ImageId": ticket.id, "ImageURL": ticket.imageURL ?? ""]
                } else {
                    // A rerun continues the video its record names (the ClientToken finds a video only while it is
                    // Uploading).
                    if let videoId = previous?.videoId {
                        do {
                            refreshedVideo = try await Self.asked(context) { () async throws(FerryError) in
                                try await media.refreshUploadVideo(videoId: videoId)
                            }
                        } catch where error.serverCode == "InvalidVideo.Uploaded" {
                            if try await storedEarlier(["VideoId": videoId]) { return ExitCodes.success }
                        } catch where MediaUploadJournal.startsAfresh(after: error) {
                            // Gone or not this key's: a new video.
                        }
                    }
                    var video = MediaServiceClient.VideoDescription(
                        title: title ?? Self.defaultTitle(file.deletingPathExtension().lastPathComponent), fileName: name)
                    video.fileSize = size
                    video.tags = tags
                    video.description = desc
                    video.cateId = cateId
                    video.transcode = transcode
                    video.clientToken = clientToken
                    if let refreshedVideo {
                        ticket = refreshedVideo
                    } else {
                        ticket = try await Self.asked(context) { [video] () async throws(FerryError) in
                            try await media.createUploadVideo(video)
                        }
                    }
                    fields = ["VideoId": ticket.id]
                }
            } catch {
                if error.code == .cancelled, context.interrupts.count > 0 {
                    context.output.paused(file: name)
                    return ExitCodes.interrupted
                }
                context.output.failure("ferry: \(path): \(error)", file: name, error: error)
                return ExitCodes.of(error)
            }
            guard let url = ticket.resumableUploadURL else {
                context.output.failure(
                    "ferry: \(path): the service gave no ResumableUploadURL; it does not speak tus or IETF uploads.", file: name)
                return ExitCodes.failed
            }
            creation = url
        }

        // The upload recorded belongs to another video or image than this run's (that one takes no more uploads): its
        // bytes would never reach this one, so it is ended and this one gets an upload of its own.
        if let old = previous, let recorded = old.imageId ?? old.videoId, recorded != fields["ImageId"] ?? fields["VideoId"] {
            if let url = URL(string: context.connection.base + old.uploadPath) { try? await uploader.terminate(url) }
            records.remove(recordName)
            previous = nil
        }
        let output = context.output
        let (imageId, videoId) = (fields["ImageId"], fields["VideoId"])
        let resuming = previous.flatMap { URL(string: context.connection.base + $0.uploadPath) }
        // As the multipart path's: `started` in --json (no upload id: the upload's URL is its credential).
        output.event(.started(uploadId: nil), file: name)
        let upload = Task { () async throws -> StreamUploader.Result in
            try await uploader.upload(
                file: file, creationURL: creation, signer: signer, resuming: resuming,
                onCreated: { url in
                    let record = StreamRecord(
                        uploadPath: url.path(percentEncoded: true), size: size, modified: modified, identity: identity,
                        imageId: imageId, videoId: videoId)
                    try? records.write(record, name: recordName, what: "stream upload record")
                },
                progress: { output.progress(file: name, $0) })
        }
        // Ctrl-C stops the stream; the record stays, and the same command resumes from the server's offset.
        let interrupts = context.interrupts
        // Every Ctrl-C of the run counts, also one while the upload was being begun.
        let seen = 0
        let watcher = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(50))
                if interrupts.count > seen {
                    upload.cancel()
                    return
                }
            }
        }
        defer { watcher.cancel() }
        do {
            let result = try await upload.value
            if let etag = result.etag { fields["ETag"] = etag }
            // Recorded before the stream record goes and before it is told: a run killed at any instant leaves one of
            // the two, by which the rerun finds the file done (not a second video or image).
            if fields["VideoId"] == nil && fields["ImageId"] == nil {
                var made = ["Bucket": bucket ?? "", "Key": key ?? name, "Size": String(result.size)]
                if let etag = result.etag { made["ETag"] = etag }
                if context.recordFinished(path, made) { records.remove(recordName) }
                output.streamResult(
                    file: name, size: result.size, etag: result.etag, message: "\(name): uploaded \(result.size) bytes (\(wire(uploader)), ETag \(result.etag ?? "unknown"))")
            } else {
                if context.recordFinished(path, fields) { records.remove(recordName) }
                output.streamResult(file: name, size: result.size, etag: result.etag, message: nil)
                output.mediaResult(fields, file: name)
            }
            return ExitCodes.success
        } catch {
            if (error as? FerryError)?.code == .cancelled || interrupts.count > seen {
                output.paused(file: name)
                return ExitCodes.interrupted
            }
            if (error as? FerryError)?.code == .checksumMismatch {
                // An IETF upload whose bytes were not the file's is ended uncompleted: nothing was stored, the video or
                // image waits for the next run. One that completed holds other bytes than the file (tus completes
                // with the append that reaches its length): the next run sends the file afresh (as a new video or
                // image), and the video or image that holds the damaged bytes is deleted here rather than left for
                // the user to find.
                let recorded = records.read(StreamRecord.self, name: recordName)
                    .flatMap { URL(string: context.connection.base + $0.uploadPath) }
                var completed = true
                if let recorded { completed = (try? await uploader.isComplete(recorded)) == true }
                records.remove(recordName)
                var media = ""
                if completed, let id = fields["VideoId"] ?? fields["ImageId"] {
                    let client = context.connection.media(context.configuration)
                    media = await Self.deleteDamaged(fields["VideoId"] == nil ? .image : .video, id, media: client)
                } else if completed, let bucket {
                    media = " The object \(bucket)/\(key ?? name) holds those bytes until then."
                }
                let text = "\(error)"
                output.failure(
                    "ferry: \(path): \(text)\(text.hasSuffix(".") ? "" : ".")\(media) Run the same command again to upload it afresh.",
                    file: name, error: error)
                return ExitCodes.failed
            }
            let code = ExitCodes.of(error)
            output.failure("ferry: \(path): \(ExitCodes.sentence(error))\(ExitCodes.advice(code, error))", file: name, error: error)
            return code
        }
    }

    private func wire(_ uploader: StreamUploader) -> String { uploader.wireProtocol.rawValue }

    /// Deletes the video or image `id` whose upload holds other bytes than its file (DeleteVideo or DeleteImage, with
    /// the client's retries) and says what became of it: deleted, or the id to delete by hand when the service refused
    /// or could not be reached.
    static func deleteDamaged(_ kind: MediaKind, _ id: String, media: MediaServiceClient) async -> String {
        let (name, command) = kind == .image ? ("Image", "images") : ("Video", "videos")
        do {
            if kind == .image { try await media.deleteImages([id]) } else { try await media.deleteVideos([id]) }
            return " \(name) \(id), which held the damaged bytes, was deleted."
        } catch {
            return " \(name) \(id) holds the damaged bytes and could not be deleted (\(error)); delete it by hand:"
                + " ferry \(command) delete \(id)."
        }
    }
}
