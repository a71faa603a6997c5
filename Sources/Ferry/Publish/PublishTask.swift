import FerryCore
import Foundation
import Logging

/// A running publish: its events, its result, and cancel.
///
/// The publish runs whether or not anyone reads ``events`` or waits for ``result``.
public final class PublishTask: Sendable {
    /// Progress, then one `completed`; the sequence finishes after it.
    public let events: AsyncStream<PublishEvent>
    private let run: PublishRun
    private let runner: Task<PublishResult, Never>

    init(job: PublishJob) {
        let (events, continuation) = AsyncStream.makeStream(of: PublishEvent.self, bufferingPolicy: .unbounded)
        let run = PublishRun(job: job, continuation: continuation)
        self.events = events
        self.run = run
        self.runner = Task { await run.execute() }
    }

    /// How the publish ended. Never throws: ``PublishResult/retCode`` carries failures, as in the seed.
    public var result: PublishResult {
        get async { await runner.value }
    }

    /// Stops the publish at once (the seed's `canclePublish`); the result's `retCode` is 1017 unless it had already
    /// ended. With `enableResume` the uploaded parts and the resume record stay, so publishing again with the same
    /// parameters continues from there.
    public func cancel() async {
        runner.cancel()
        await run.cancel()
    }
}

/// The mutable state of one publish: the step it is at, the upload running, progress so far.
actor PublishRun {
    private let job: PublishJob
    private let continuation: AsyncStream<PublishEvent>.Continuation
    private var cancelled = false
    private var upload: ResumableUploadTask?
    private var reported: Int64 = -1

    init(job: PublishJob, continuation: AsyncStream<PublishEvent>.Continuation) {
        self.job = job
        self.continuation = continuation
    }

    private var parameters: PublishParameters { job.parameters }
    private var records: PublishRecordStore? {
        parameters.enableResume ? PublishRecordStore(directory: job.configuration.recordDirectory) : nil
    }
    private var recordId: String {
        PublishRecordStore.identifier(
            userID: job.userID, endpoint: job.endpoint.absoluteString, videoPath: job.videoURL.path,
            coverPath: job.coverURL?.path)
    }

    func cancel() async {
        cancelled = true
        await upload?.cancel()
    }

    func execute() async -> PublishResult {
        let result: PublishResult
        do {
            result = try await publish()
            report(job.totalBytes)
        } catch {
            // `cancel()` cancels this task first, so a request it interrupted reads as a cancel, not a failure.
            let wasCancelled = cancelled || Task.isCancelled
            result = PublishResult(wasCancelled ? .publishCancelled() : error)
        }
        continuation.yield(.completed(result))
        continuation.finish()
        return result
    }

    /// Reports progress: never backwards, never above the total.
    private func report(_ bytes: Int64) {
        let value = min(max(bytes, reported), job.totalBytes)
        guard value > reported else { return }
        reported = value
        continuation.yield(.progress(uploadBytes: value, totalBytes: job.totalBytes))
    }

    private func checkCancelled() throws(FerryError) {
        if cancelled || Task.isCancelled { throw .publishCancelled() }
    }

    // MARK: Steps

    private func publish() async throws(FerryError) -> PublishResult {
        let service = PublishServiceCall(endpoint: job.endpoint, configuration: job.configuration.client)
        try checkCancelled()
        let fingerprints = try self.fingerprints()
        var ticket: PublishTicket?
        var createdAt = Date()
        var videoUploaded = false
        if let records, let record = records.load(recordId) {
            let valid = record.createdAt.addingTimeInterval(job.configuration.resumeValidity) > Date()
            if valid && record.video == fingerprints.video && record.cover == fingerprints.cover {
                do {
                    ticket = try await service.apply(parameters, job: job, vodSessionKey: record.vodSessionKey)
                    createdAt = record.createdAt
                    // The record says so, or the service does (a run stopped before it recorded the video's upload).
                    videoUploaded =
                        (record.videoUploaded == true || ticket?.videoStored == true)
                        && ticket?.videoKey == record.videoKey
                } catch  where error.serverCode == "InvalidVodSessionKey" || error.serverCode == "InvalidVideo.NotFound"
                {
                    // The service no longer knows the session (video deleted, key rotated): start over.
                    job.configuration.client.logger.debug("publish session not resumable")
                }
            }
            if ticket == nil { forget(record, records: records) }
        }
        try checkCancelled()
        if ticket == nil { ticket = try await service.apply(parameters, job: job, vodSessionKey: nil) }
        guard var ticket else { throw .publish(.server, .parseFailed, "The service did not answer the application.") }
        try checkCancelled()
        var record = PublishRecord(
            video: fingerprints.video, cover: fingerprints.cover, vodSessionKey: ticket.vodSessionKey,
            storageEndpoint: ticket.endpoint.absoluteString, bucket: ticket.bucket, videoKey: ticket.videoKey,
            coverKey: ticket.coverKey, createdAt: createdAt, videoUploaded: videoUploaded)
        try? records?.save(record, as: recordId)

        if videoUploaded {
            // An earlier run stored the video and stopped at the cover or the commit; the commit checks it is there.
            report(job.videoSize)
        } else {
            try await send(
                job.videoURL, key: ticket.videoKey, base: 0, failure: .videoUploadFailed, ticket: &ticket, service)
            record.videoUploaded = true
            try? records?.save(record, as: recordId)
        }
        if let cover = job.coverURL {
            guard let key = ticket.coverKey else {
                throw .publish(.server, .parseFailed, "The service gave no storage key for the cover.")
            }
            try await send(cover, key: key, base: job.videoSize, failure: .coverUploadFailed, ticket: &ticket, service)
        }
        try checkCancelled()
        let committed: PublishResult
        do {
            committed = try await service.commit(parameters, vodSessionKey: ticket.vodSessionKey)
        } catch  where error.serverCode == "InvalidVideo.NotUploaded" {
            // Storage does not have the video after all: the next run uploads it again.
            record.videoUploaded = false
            try? records?.save(record, as: recordId)
            throw error
        }
        records?.delete(recordId)
        return committed
    }

    private func fingerprints() throws(FerryError) -> (video: FileFingerprint, cover: FileFingerprint?) {
        do {
            return (
                try FileFingerprint.of(path: job.videoURL.path),
                try job.coverURL.map { try FileFingerprint.of(path: $0.path) }
            )
        } catch {
            throw .publish(
                .fileNotFound, .fileNotExist, "The video or cover file can no longer be read.",
                underlying: error)
        }
    }

    /// Deletes a stale record and the engine checkpoints it led to.
    private func forget(_ record: PublishRecord, records: PublishRecordStore) {
        let checkpoints = CheckpointStore(directory: partsDirectory)
        for (key, file) in [(record.videoKey, job.videoURL), (record.coverKey, job.coverURL)] {
            guard let key, let file else { continue }
            checkpoints.delete(
                CheckpointStore.identifier(
                    endpoint: record.storageEndpoint, bucket: record.bucket, key: key,
                    filePath: file.standardizedFileURL.path))
        }
        records.delete(recordId)
    }

    private var partsDirectory: URL {
        job.configuration.recordDirectory.appendingPathComponent("parts", isDirectory: true)
    }

    /// Uploads one file through the engine, renewing the credential from the service when it expires.
    private func send(
        _ file: URL, key: String, base: Int64, failure: PublishCode, ticket: inout PublishTicket,
        _ service: PublishServiceCall
    ) async throws(FerryError) {
        try checkCancelled()
        let client = ObjectStorageClient(
            endpoint: ticket.endpoint, region: ticket.auth.region, credentials: ticket.auth.ferryCredentials,
            configuration: job.configuration.client)
        var request = ResumableUploadRequest(bucket: ticket.bucket, key: key, fileURL: file)
        request.partSize = job.configuration.partSize
        request.concurrency = max(1, job.configuration.concurrency)
        request.onFileChange = .restart
        if parameters.enableResume {
            request.recordDirectory = partsDirectory
            // The parts' checkpoints last as long as the publish record that leads to them.
            request.checkpointExpiry = job.configuration.resumeValidity
            // Publishing again resumes: cancelling keeps the server's upload and the checkpoint.
            request.deleteUploadIdOnCancelling = false
        }
        let task: ResumableUploadTask
        do {
            task = try await client.upload(request)
        } catch {
            throw .publish(error, at: failure)
        }
        upload = task
        defer { upload = nil }
        if cancelled { await task.cancel() }
        for await event in task.events {
            switch event {
            case .progress(let progress):
                report(base + progress.totalBytesSent)
            case .credentialsExpired:
                // The upload credential ran out: the service renews it for the same session.
                do {
                    ticket = try await service.apply(parameters, job: job, vodSessionKey: ticket.vodSessionKey)
                    await task.resume(with: ticket.auth.ferryCredentials)
                } catch {
                    await task.cancel()
                    throw error
                }
            default:
                break
            }
        }
        do {
            _ = try await task.result
        } catch {
            let failed = FerryError(error, fallback: .server, "The upload")
            throw failed.code == .cancelled ? .publishCancelled() : .publish(failed, at: failure)
        }
    }
}
