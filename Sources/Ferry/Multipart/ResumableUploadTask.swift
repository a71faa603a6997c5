import FerryCore
import Foundation
import Logging

/// A running upload: pause, resume, cancel, its events and its result.
///
/// ```swift
/// let upload = try await client.upload(request)
/// Task { for await event in upload.events { … } }
/// let result = try await upload.result
/// ```
public actor ResumableUploadTask {
    /// What happens, in order; finishes after `completed`, `failed` or `cancelled`.
    public nonisolated let events: AsyncStream<UploadEvent>
    /// The trace the upload's requests carry (`traceparent`): the one current when it started, else a new one.
    public nonisolated let trace: UploadTrace
    private let continuation: AsyncStream<UploadEvent>.Continuation

    private let client: ObjectStorageClient
    private let request: ResumableUploadRequest
    private let credentials: CredentialSource
    private let checkpoints: CheckpointStore?
    /// Writes this upload's checkpoints in the background (nil without a record directory).
    private let checkpointWriter: CheckpointWriter?
    private let checkpointId: String
    private let reader: FileRanges
    /// Part buffers reused from part to part (at most one more than parts in flight), emptied when the upload stops
    /// or ends.
    private let partBuffers: PartBufferPool
    /// How long the parts' answers took once their bodies were sent, so a lost answer is found out in time.
    private let answerWaits: AnswerWaits

    /// Where the upload is and who waits for its result; the actor performs what it says.
    private var machine = Machine()
    private typealias Machine = StateMachine<CheckedContinuation<UploadResult, any Error>>
    /// Sends the upload while it runs; nil before the first start.
    private var runner: Task<Void, Never>?
    /// Aborts the server's upload and deletes the checkpoint after a cancel.
    private var cleanup: Task<Void, Never>?

    // The upload as far as it got; kept across pauses.
    private var plan: UploadPlan?
    private var uploadId: String?
    private var fingerprint: FileFingerprint?
    /// The file's state (``FileRanges/State``) before this process read its first part of the upload.
    private var fileState: FileRanges.State?
    private var createdAt = Date()
    private var meter: ProgressMeter?
    private var partsResumed = 0
    /// The upload's object, found complete while preparing (a run stopped before it deleted its checkpoint).
    private var completedEarlier: UploadResult?
    /// The lock of the checkpoint, held while this upload sends (not while it is paused), so that no other run sends
    /// the same upload meanwhile.
    private var checkpointLock: CheckpointLock?
    private var partsSent = 0

    init(client: ObjectStorageClient, request: ResumableUploadRequest) {
        (events, continuation) = AsyncStream.makeStream(of: UploadEvent.self, bufferingPolicy: .unbounded)
        trace = UploadTrace.current ?? UploadTrace()
        self.client = client
        // S3 refuses parts but the last below 5 MiB only when the upload completes, after every byte went: a smaller
        // size (the seeds' SDKs default to 1 MiB) is raised to the client's smallest part size before anything is sent.
        var request = request
        request.partSizing = request.partSizing.raised(to: client.configuration.smallestPartSize)
        self.request = request
        self.credentials = CredentialSource(provider: client.credentialProvider, now: client.configuration.now)
        let checkpoints = request.recordDirectory.map { CheckpointStore(directory: $0) }
        let checkpointId = CheckpointStore.identifier(
            endpoint: client.checkpointServiceIdentity, bucket: request.bucket, key: request.key,
            filePath: request.fileURL.standardizedFileURL.path)
        self.checkpoints = checkpoints
        self.checkpointId = checkpointId
        self.checkpointWriter = checkpoints.map {
            CheckpointWriter(store: $0, identifier: checkpointId, beforeWrite: client.configuration.beforeCheckpointWrite)
        }
        self.reader = FileRanges(path: request.fileURL.path)
        self.answerWaits = AnswerWaits(
            shortest: client.configuration.shortestAnswerWait, lanes: max(1, request.concurrency))
        // At most one buffer more than parts in flight: without a bound, buffers the HTTP client had not yet let go of
        // were replaced by new ones and a 4 GiB upload with parts grown to 16 MiB peaked at 130–146 MiB; with two
        // spare buffers a 1 GiB upload still reached 143 MiB when the sixth was allocated, with one 127 MiB, as fast.
        let transport = client.configuration.transport
        self.partBuffers = PartBufferPool(
            limit: max(1, request.concurrency) + 1, maximum: max(1, request.concurrency) + 1,
            allocate: { transport.makeBodyBuffer(capacity: $0) })
    }

    func start() {
        guard case .run = machine.start() else { return }
        runner = Task { [trace] in await UploadTrace.$current.withValue(trace) { await self.run() } }
    }

    // MARK: Control

    /// What an upload takes in from outside, as ``ObjectStorageClient/Configuration`` reports it to tests.
    enum Control: Sendable {
        case pause, cancel, resultAwaited
    }

    /// The result once the upload completes; throws its ``FerryError`` if it fails or is cancelled.
    ///
    /// Cancelling the task that awaits it (a SwiftUI `.task` that goes away) throws `CancellationError` there and,
    /// when no one else awaits the result, pauses the upload: nothing more is sent, and the upload id and checkpoint
    /// stay, so ``resume()`` — or a later run with the same request — continues from the parts done. A task already
    /// cancelled when it asks for the result is treated the same way.
    public var result: UploadResult {
        get async throws {
            let number: Int
            switch machine.resultRequested() {
            case .finished(let outcome): return try outcome.get()
            case .wait(let assigned): number = assigned
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    switch machine.waiterArrived(number, continuation, callerCancelled: Task.isCancelled) {
                    case .wait:
                        client.configuration.controlTaken?(.resultAwaited)
                    case .answer(let waiter, let outcome):
                        waiter.resume(with: outcome.mapError { $0 as any Error })
                    case .cancel(let waiter):
                        waiter.resume(throwing: CancellationError())
                        Task { await self.callerCancelled(nil) }
                    }
                }
            } onCancel: {
                Task { await self.callerCancelled(number) }
            }
        }
    }

    /// A caller awaiting the result (`number`), or one cancelled before it could wait (nil), was cancelled: a waiting
    /// one gets `CancellationError`; when no one is left waiting, the upload pauses.
    private func callerCancelled(_ number: Int?) async {
        let action = machine.callerCancelled(number)
        action.waiter?.resume(throwing: CancellationError())
        if action.pause { await pause() }
    }

    /// Stops sending at once; the upload id and checkpoint stay, and ``resume()`` continues from the parts done.
    public func pause() async {
        let action = machine.pause()
        client.configuration.controlTaken?(.pause)
        switch action {
        case .stopRunner:
            runner?.cancel()
            await runner?.value
        case .waitForRunner:
            await runner?.value
        case .none:
            break
        }
    }

    /// Continues a paused upload.
    public func resume() {
        guard case .run = machine.resume() else { return }
        continuation.yield(.resumed)
        runner = Task { [trace] in await UploadTrace.$current.withValue(trace) { await self.run() } }
    }

    /// Continues a paused upload (e.g. after `credentialsExpired`) with new credentials.
    public func resume(with credentials: Credentials) async {
        await self.credentials.set(credentials)
        resume()
    }

    /// Stops at once, in-flight requests included. With `deleteUploadIdOnCancelling` the server's upload is aborted
    /// and the checkpoint deleted; otherwise both stay for a later run to resume.
    public func cancel() async {
        let action = machine.cancel()
        client.configuration.controlTaken?(.cancel)
        switch action {
        case .stopRunner:
            runner?.cancel()
            await runner?.value  // its end starts the clean-up
        case .waitForRunner:
            await runner?.value
        case .cleanUp:
            startCleanup()
        case .waitForCleanup:
            break
        case .none:
            return
        }
        await cleanup?.value
    }

    /// Aborts the server's upload and deletes the checkpoint (with `deleteUploadIdOnCancelling`), then ends the upload
    /// as cancelled. Runs in a task of its own, so a cancelled runner or caller does not cut it short.
    private func startCleanup() {
        cleanup = Task {
            // Another run holding the checkpoint now sends this upload: it is left to that run.
            if request.deleteUploadIdOnCancelling, (try? takeCheckpointLock()) != nil {
                if let uploadId {
                    try? await client.abortMultipartUpload(
                        bucket: request.bucket, key: request.key, uploadId: uploadId, credentials: credentials)
                }
                await checkpointWriter?.delete()
            }
            if let finish = machine.cleanedUp() { self.finish(finish) }
        }
    }

    private func finish(_ finish: Machine.Finish) {
        partBuffers.removeAll()
        releaseCheckpointLock()
        for event in finish.events { continuation.yield(event) }
        continuation.finish()
        for waiter in finish.waiters { waiter.resume(with: finish.outcome.mapError { $0 as any Error }) }
    }

    private func perform(_ action: Machine.RunEndAction) {
        switch action {
        case .pause(let events):
            // A paused upload lets go of its checkpoint: another run may take it over; ``resume()`` locks again.
            releaseCheckpointLock()
            for event in events { continuation.yield(event) }
        case .cleanUp(let events):
            for event in events { continuation.yield(event) }
            startCleanup()
        case .finish(let finish):
            self.finish(finish)
        case .none:
            break
        }
    }

    // MARK: Running

    private func run() async {
        do {
            let result = try await upload()
            perform(machine.uploadSucceeded(result))
        } catch {
            // Why it stopped is decided now: a pause or cancel that arrives while the checkpoint is flushed below
            // finds an upload that already failed, and must not turn the failure into a pause.
            machine.uploadFailed(Self.ferryError(error))
            client.configuration.stopDecided?()
            // A stopped upload holds no part buffers while it waits, and its checkpoint is on disk before anyone hears
            // it stopped (a failed write already failed the upload).
            partBuffers.removeAll()
            try? await checkpointWriter?.flush()
            perform(machine.stopSettled())
        }
    }

    /// Deletes the checkpoint a completed upload left with ``ResumableUploadRequest/keepsCheckpointOnCompletion``.
    /// Left alone while another run holds its lock; nothing when the upload keeps no checkpoint.
    nonisolated func discardCheckpoint() {
        checkpoints?.discard(checkpointId, file: request.fileURL.path)
    }

    /// Takes the checkpoint's lock unless this upload holds it already (or keeps no checkpoint).
    ///
    /// - Throws: ``FerryError`` `uploadInProgress` when another run holds it.
    private func takeCheckpointLock() throws(FerryError) {
        guard checkpointLock == nil, let checkpoints else { return }
        checkpointLock = try checkpoints.lock(checkpointId, file: request.fileURL.path)
    }

    private func releaseCheckpointLock() {
        checkpointLock?.release()
        checkpointLock = nil
    }

    private static func ferryError(_ error: any Error) -> FerryError {
        if let error = error as? FerryError { return error }
        if error is CancellationError { return FerryError.cancelledError() }
        return FerryError(.network, "The upload failed: \(error)")
    }

    private nonisolated var observer: RequestObserver {
        var observer = RequestObserver()
        let continuation = continuation
        observer.retrying = { attempt, error, delay in continuation.yield(.retrying(attempt: attempt, error: error, delay: delay)) }
        observer.retryResumed = { continuation.yield(.retryResumed) }
        return observer
    }

    /// Creates the multipart upload. A pause or cancel that arrives meanwhile waits for the answer (up to the request
    /// timeout, at most 15 s) instead of abandoning it: otherwise the server could have an upload whose id the client
    /// never learned, which neither a resume nor `deleteUploadIdOnCancelling` could reach.
    private func createShielded(observer: RequestObserver) async throws -> String {
        let (client, request, credentials) = (self.client, self.request, self.credentials)
        let creating = Task {
            try await client.createMultipartUpload(
                bucket: request.bucket, key: request.key, contentType: request.contentType,
                metadata: request.metadata, checksumAlgorithm: request.checksumAlgorithm, credentials: credentials,
                observer: observer)
        }
        let grace = min(client.configuration.timeoutIntervalForRequest, .seconds(15))
        return try await withTaskCancellationHandler {
            try await creating.value
        } onCancel: {
            Task {
                try? await Task.sleep(for: grace)
                creating.cancel()
            }
        }
    }

    private func upload() async throws -> UploadResult {
        let path = request.fileURL.path
        let (size, _) = try FileRanges.attributes(of: path)
        let threshold = request.multipartThreshold ?? request.partSize
        if plan == nil && size < threshold {
            // A checkpoint (or an intent) of this upload names a multipart upload of the file as it was, larger: no
            // run continues it now. Under its lock, the file is stored and then that upload is aborted.
            let stale = checkpoints?.load(checkpointId)
            let intent = checkpoints?.intent(checkpointId)
            guard stale != nil || intent != nil else { return try await singlePut(size: size) }
            try takeCheckpointLock()
            if let stale, request.onFileChange == .fail, try FileFingerprint.of(path: path) != stale.fingerprint,
                stale.createdAt.addingTimeInterval(request.checkpointExpiry) >= Date()
            {
                throw FerryError(
                    .cannotResumeUpload, "The file \(path) changed since its upload started; its checkpoint no longer matches.")
            }
            let result = try await singlePut(size: size)
            if let stale, ObjectStorageClient.isPlausible(stale.uploadId) {
                try? await client.abortMultipartUpload(
                    bucket: request.bucket, key: request.key, uploadId: stale.uploadId, credentials: credentials)
            }
            if let intent { await abortLostUploads(createdAround: intent) }
            await checkpointWriter?.delete()
            checkpoints?.deleteIntent(checkpointId)
            return result
        }
        // Before the checkpoint is read: a second run of this upload stops here, having sent nothing.
        try takeCheckpointLock()
        // Before any part is read (those a resume reads again included): what a write to the file would change. A
        // run resumed in this process keeps the state from before its first parts were read.
        if fileState == nil || plan == nil { fileState = try FileRanges.state(of: path) }
        if plan == nil { try await prepare(size: size) }
        if let completedEarlier { return completedEarlier }
        plan?.releaseAll()
        guard let startPlan = plan, let uploadId else {
            throw FerryError(.invalidArgument, "The upload could not be prepared.")
        }

        // The file must still be the one the upload started with.
        if let fingerprint, try FileFingerprint.of(path: path) != fingerprint {
            throw FerryError(.cannotResumeUpload, "The file \(path) changed while it was being uploaded.")
        }
        // One meter for the whole upload, so progress never goes back across a pause; its rate starts again.
        self.meter?.restartRate()
        let meter = self.meter ?? ProgressMeter(
            alreadySent: startPlan.completedBytes, expected: startPlan.fileSize, interval: request.progressInterval
        ) {
            [continuation] progress in continuation.yield(.progress(progress))
        }
        self.meter = meter
        try await withThrowingTaskGroup(of: (UploadedPart, Duration).self) { group in
            var running = 0
            for _ in 0..<max(1, request.concurrency) {
                guard let (number, range) = takeNextPart() else { break }
                group.addTask { try await self.sendPart(number, range: range, uploadId: uploadId, meter: meter) }
                running += 1
            }
            while running > 0, let (part, elapsed) = try await group.next() {
                running -= 1
                plan?.complete(part)
                partsSent += 1
                adaptPartSize(sent: part.size, in: elapsed)
                // The next part starts before the checkpoint is handed over; it is written in the background.
                if let (number, range) = takeNextPart() {
                    group.addTask { try await self.sendPart(number, range: range, uploadId: uploadId, meter: meter) }
                    running += 1
                }
                try saveCheckpoint()
            }
        }
        guard let plan, plan.isComplete else {
            throw FerryError(.cannotResumeUpload, "The upload ended with parts missing.")
        }
        // Checked again once every part is sent: parts read from a file that changed meanwhile would make an object
        // that is neither the old file nor the new one (their checksums cover only what was read).
        if let fingerprint, try FileFingerprint.of(path: path) != fingerprint {
            throw FerryError(
                .cannotResumeUpload, "The file \(path) changed while it was being uploaded; it was not completed.")
        }
        // A write that put the size and modification time back, away from the fingerprint's samples, still moved the
        // inode's change time: every part is read again, and the upload is completed only if the file still holds
        // each one and was not written to while they were read.
        if try FileRanges.state(of: path) != fileState {
            let settled = try FileRanges.state(of: path)
            for part in plan.completed.values.sorted(by: { $0.number < $1.number }) {
                guard try await stillInFile(part, plan: plan) else {
                    throw FerryError(
                        .cannotResumeUpload,
                        "The file \(path) changed while it was being uploaded (part \(part.number) no longer matches); it was not completed.")
                }
            }
            guard try FileRanges.state(of: path) == settled else {
                throw FerryError(
                    .cannotResumeUpload, "The file \(path) is being written to; it was not completed.")
            }
        }
        // The checkpoint naming every part is on disk before the server is asked to complete: a run stopped after the
        // server completed finds the object by those parts (`objectCompleted`) instead of sending the file again.
        try await checkpointWriter?.flush()
        return try await complete(plan: plan, uploadId: uploadId, meter: meter)
    }

    /// With adaptive part sizes, cuts the parts not yet started so that one takes about the target time at the rate
    /// this part was sent (whole MiB, within the bounds). The cut changes only when the size moves by half or more,
    /// or reaches a bound, so a steady link keeps one size.
    private func adaptPartSize(sent bytes: Int64, in elapsed: Duration) {
        guard case .adaptive(let minimum, let maximum, let target) = request.partSizing, let current = plan?.segments.last
        else { return }
        let seconds = elapsed.timeInterval
        guard seconds > 0, bytes > 0 else { return }
        let mib: Int64 = 1024 * 1024
        let wanted = min(Double(bytes) / seconds * target.timeInterval, Double(maximum))
        let size = max(minimum, Int64(wanted) / mib * mib)
        let ratio = Double(size) / Double(current.partSize)
        let atBound = size == minimum || size == max(minimum, maximum / mib * mib)
        guard size != current.partSize, ratio >= 1.5 || ratio <= 1 / 1.5 || atBound else { return }
        plan?.resizeUntakenParts(to: size)
    }

    /// The largest part this upload's sizing asks for: a part buffer is allocated this large once, so it does not
    /// grow when parts do (only a file too large for 10,000 such parts needs larger ones).
    private nonisolated var largestPart: Int {
        switch request.partSizing {
        case .fixed(let size): Int(size)
        case .adaptive(_, let maximum, _): Int(maximum)
        }
    }

    /// Marks the next part as being sent and returns its number and range.
    private func takeNextPart() -> (Int, Range<Int64>)? {
        guard let number = plan?.takeNextPart(), let plan else { return nil }
        return (number, plan.range(ofPart: number))
    }

    /// Reads a part into a reused buffer, checksums it while it is in the cache, and sends slices of that buffer
    /// (the client retries within its policy). Runs off the actor, so parts are read and checksummed side by side.
    /// Returns the stored part and how long sending it took, retries included.
    private nonisolated func sendPart(_ number: Int, range: Range<Int64>, uploadId: String, meter: ProgressMeter)
        async throws -> (UploadedPart, Duration)
    {
        let capacity = max(largestPart, Int(range.upperBound - range.lowerBound))
        let body = await partBuffers.take(capacity: capacity, patience: .milliseconds(50))
        defer { partBuffers.give(body) }
        try reader.read(range, into: body)
        var header: (String, String)?
        if let algorithm = request.checksumAlgorithm {
            var hasher = Checksummer(algorithm)
            body.withUnsafeBytes { hasher.update($0) }
            header = (algorithm.headerName, hasher.finalizeBase64())
        }
        let size = Int64(body.count)
        var observer = self.observer
        let retrying = observer.retrying
        observer.retrying = { attempt, error, delay in
            meter.restart(part: number)
            retrying(attempt, error, delay)
        }
        observer.bytesSent = { meter.add($0, part: number, size: size) }
        meter.restart(part: number)
        let started = ContinuousClock.now
        let etag = try await client.uploadPart(
            bucket: request.bucket, key: request.key, uploadId: uploadId, number: number, body: body,
            checksumHeader: header, credentials: credentials, observer: observer, answerWaits: answerWaits)
        meter.finish(part: number, size: size)
        return (UploadedPart(number: number, size: size, etag: etag, checksum: header?.1), ContinuousClock.now - started)
    }

    /// Finds a checkpoint and reconciles it with the server, or starts a new multipart upload.
    private func prepare(size: Int64) async throws {
        let path = request.fileURL.path
        let fingerprint = try FileFingerprint.of(path: path)
        var plan = try UploadPlan(fileSize: size, partSize: request.partSize)
        var uploadId: String?
        if let checkpoints, let checkpoint = checkpoints.load(checkpointId) {
            let expired = checkpoint.createdAt.addingTimeInterval(request.checkpointExpiry) < Date()
            let changed = checkpoint.fingerprint != fingerprint
            if changed && !expired && request.onFileChange == .fail {
                throw FerryError(
                    .cannotResumeUpload,
                    "The file \(path) changed since its upload started; its checkpoint no longer matches.")
            }
            let recorded = try? UploadPlan(
                fileSize: size,
                segments: checkpoint.partSegments
                    ?? [UploadPlan.Segment(firstPart: 1, offset: 0, partSize: checkpoint.partSize)])
            // An upload id no service makes (written by an older client from a hostile answer) is not sent back.
            let plausible = ObjectStorageClient.isPlausible(checkpoint.uploadId)
            if expired || changed || recorded == nil || !plausible
                || checkpoint.checksumAlgorithm != request.checksumAlgorithm?.s3Name
            {
                if plausible {
                    try? await client.abortMultipartUpload(
                        bucket: request.bucket, key: request.key, uploadId: checkpoint.uploadId, credentials: credentials)
                }
                await checkpointWriter?.delete()
            } else {
                do {
                    let onServer = try await client.listParts(
                        bucket: request.bucket, key: request.key, uploadId: checkpoint.uploadId,
                        credentials: credentials, observer: observer)
                    if let recorded { plan = recorded }
                    plan.adopt(try await reconcile(checkpoint: checkpoint.parts, server: onServer, plan: plan))
                    uploadId = checkpoint.uploadId
                    createdAt = checkpoint.createdAt
                    partsResumed = plan.completed.count
                } catch let changed as PartChanged {
                    // Changed in place with its size, time and samples kept: what was stored is not this file.
                    if request.onFileChange == .fail {
                        throw FerryError(
                            .cannotResumeUpload,
                            "The file \(path) changed since its upload started: part \(changed.number) no longer matches what was stored.")
                    }
                    try? await client.abortMultipartUpload(
                        bucket: request.bucket, key: request.key, uploadId: checkpoint.uploadId, credentials: credentials)
                    await checkpointWriter?.delete()
                    plan = try UploadPlan(fileSize: size, partSize: request.partSize)
                } catch let error as FerryError where error.serverCode == "NoSuchUpload" {
                    if let recorded { completedEarlier = try await objectCompleted(by: checkpoint, plan: recorded) }
                    if completedEarlier != nil {
                        if !request.keepsCheckpointOnCompletion { await checkpointWriter?.delete() }
                        return
                    }
                    await checkpointWriter?.delete()
                }
            }
        }
        if uploadId == nil {
            let began = ServiceClock.now()
            if let checkpoints {
                if let earlier = checkpoints.intent(checkpointId) { await abortLostUploads(createdAround: earlier) }
                try checkpoints.saveIntent(checkpointId, at: began)
            }
            let retried = RetryMark()
            var creating = observer
            creating.retrying = { [retrying = observer.retrying] attempt, error, delay in
                // Only an attempt lost on the way (the server may have acted on it), not a refusal such as SlowDown.
                if error.code == .network || error.code == .timeout { retried.set() }
                retrying(attempt, error, delay)
            }
            let created: String
            do {
                created = try await createShielded(observer: creating)
            } catch {
                // Refused with no attempt lost on the way: no upload was made, so no later run has one to look for.
                let lost: Set<FerryError.Code> = [.network, .timeout, .cancelled]
                if !retried.isSet, let failure = error as? FerryError, !lost.contains(failure.code) {
                    checkpoints?.deleteIntent(checkpointId)
                }
                throw error
            }
            // A creation retried after a lost attempt may have made an upload whose answer never came: it is aborted
            // now, so that it neither lingers nor counts against the key's concurrent uploads.
            if retried.isSet { await abortLostUploads(createdAround: began, except: created) }
            uploadId = created
            createdAt = Date()
        }
        self.plan = plan
        self.uploadId = uploadId
        self.fingerprint = fingerprint
        // The first checkpoint is on disk before any part is sent, and an unwritable record directory fails here.
        try saveCheckpoint()
        try await checkpointWriter?.flush()
        checkpoints?.deleteIntent(checkpointId)
        continuation.yield(.started(uploadId: uploadId))
    }

    /// The object the checkpoint's upload became, when the last run was stopped after the server completed it and
    /// before the checkpoint was deleted: every part of the plan is recorded, and the object at the key has the size
    /// of the file and the ETag those parts make (the MD5 of their MD5s). Nil otherwise (the upload was aborted or
    /// expired, or the object is another): the upload starts again.
    ///
    /// The object is verified as a completion verifies it: a run stopped by a checksum mismatch at completion meets the
    /// same mismatch here, rather than a success.
    private func objectCompleted(by checkpoint: UploadCheckpoint, plan: UploadPlan) async throws -> UploadResult? {
        guard let expectedETag = checkpoint.completedETag(fileSize: plan.fileSize),
            let object = try? await client.headObject(bucket: request.bucket, key: request.key, credentials: credentials),
            object.size == plan.fileSize, ObjectStorageClient.unquote(object.etag) == expectedETag
        else { return nil }
        // A store that tells the checksum on completion only (not on HEAD), or none, is checked by its ETags here;
        // one that tells another is a mismatch, as at completion.
        let reported = request.checksumAlgorithm.flatMap { object.checksums[$0.s3Name] }
        var checksum: String?
        var verification = UploadResult.Verification.none
        if let algorithm = request.checksumAlgorithm, reported != nil || algorithm == .md5 {
            var parts = checkpoint.parts.sorted { $0.number < $1.number }
            // A part the checkpoint names without its checksum takes it from the file: the object is then checked
            // against the file's bytes.
            for index in parts.indices where parts[index].checksum.flatMap({ Data(base64Encoded: $0) }) == nil {
                parts[index].checksum = try await fileChecksum(algorithm, plan.range(ofPart: parts[index].number))
            }
            (checksum, verification) = try verify(
                etag: object.etag, reported: reported, parts: parts, expected: try expectedChecksum(of: parts).expected)
        } else if request.checksumAlgorithm != nil {
            let parts = checkpoint.parts.sorted { $0.number < $1.number }
            verification = try await verifyByETags(objectETag: object.etag, parts: parts, plan: plan)
        }
        partsResumed = checkpoint.parts.count
        return UploadResult(
            bucket: request.bucket, key: request.key, etag: ObjectStorageClient.unquote(object.etag), size: plan.fileSize,
            uploadId: checkpoint.uploadId, checksumAlgorithm: request.checksumAlgorithm, checksum: checksum,
            verification: verification, partsResumed: partsResumed, partsSent: 0)
    }

    /// Aborts the multipart uploads of this key that the last run created and lost, or that a retried creation of
    /// this run made and never heard of (all but `kept`): ``ObjectStorageClient/abortLostUploads(bucket:key:createdAround:except:credentials:)``.
    private func abortLostUploads(createdAround began: Date, except kept: String? = nil) async {
        await client.abortLostUploads(
            bucket: request.bucket, key: request.key, createdAround: began, except: kept, credentials: credentials)
    }

    /// The parts to keep: those the server has with the size and ETag the checkpoint recorded, and those the server
    /// has that the checkpoint missed (the process died before writing it) whose ETag is the MD5 of the local range.
    private func reconcile(checkpoint: [UploadedPart], server: [UploadedPart], plan: UploadPlan) async throws
        -> [UploadedPart]
    {
        let recorded = Dictionary(checkpoint.map { ($0.number, $0) }, uniquingKeysWith: { $1 })
        var keep: [UploadedPart] = []
        for part in server where part.number <= plan.partCount && part.size == plan.size(ofPart: part.number) {
            if let known = recorded[part.number] {
                guard known.etag == part.etag else { continue }
                // Read again: a file edited in place keeps its size, time and fingerprint samples.
                guard try await stillInFile(known, plan: plan) else { throw PartChanged(number: part.number) }
                var kept = known
                if let algorithm = request.checksumAlgorithm, kept.checksum.flatMap({ Data(base64Encoded: $0) }) == nil {
                    // A checkpoint without the part's checksum (damaged, or edited): the file's bytes, which the part
                    // was just found to hold, give it, rather than a failure once every other part has been sent.
                    kept.checksum = try await fileChecksum(algorithm, plan.range(ofPart: part.number))
                }
                keep.append(kept)
                continue
            }
            let range = plan.range(ofPart: part.number)
            if try await fileMD5(range) == part.etag.lowercased() {
                var adopted = part
                if let algorithm = request.checksumAlgorithm {
                    adopted.checksum = try await fileChecksum(algorithm, range)
                }
                keep.append(adopted)
            }
        }
        return keep
    }

    /// Whether the file's bytes of `part`, stored by an earlier run, are still those bytes: by the part's checksum,
    /// else by its ETag when that is an MD5 (true when there is neither to compare with). The file is read in pieces,
    /// never a whole part at once.
    private func stillInFile(_ part: UploadedPart, plan: UploadPlan) async throws -> Bool {
        let range = plan.range(ofPart: part.number)
        if let checksum = part.checksum, let algorithm = request.checksumAlgorithm {
            return try await fileChecksum(algorithm, range) == checksum
        }
        guard part.etag.count == 32, Hex.decode(part.etag) != nil else { return true }
        return try await fileMD5(range) == part.etag.lowercased()
    }

    /// The base64 `algorithm` checksum of the file's bytes in `range`, read in pieces.
    private func fileChecksum(_ algorithm: ChecksumAlgorithm, _ range: Range<Int64>) async throws -> String {
        try await StreamUploader.checksum(
            algorithm, of: request.fileURL, offset: range.lowerBound, length: range.upperBound - range.lowerBound)
    }

    /// The hex MD5 of the file's bytes in `range` (an S3 part's ETag), read in pieces.
    private func fileMD5(_ range: Range<Int64>) async throws -> String {
        Data(base64Encoded: try await fileChecksum(.md5, range)).map { Hex.encode($0) } ?? ""
    }

    /// A part an earlier run stored whose bytes the file no longer holds.
    private struct PartChanged: Error {
        var number: Int
    }

    /// Hands the upload's current state to the checkpoint writer; throws if an earlier write failed.
    private func saveCheckpoint() throws {
        guard let checkpointWriter, let plan, let uploadId, let fingerprint else { return }
        try checkpointWriter.submit(
            UploadCheckpoint(
                endpoint: client.checkpointServiceIdentity, bucket: request.bucket, key: request.key,
                filePath: request.fileURL.path, uploadId: uploadId, partSize: plan.partSize,
                partSegments: plan.segments.count > 1 ? plan.segments : nil, fingerprint: fingerprint,
                checksumAlgorithm: request.checksumAlgorithm?.s3Name, parts: plan.orderedParts, createdAt: createdAt))
    }

    /// Completes the upload and verifies what the server stored: its size (a store that keeps a key ending in `/` as an
    /// empty folder answers Complete all the same) and its checksum against the one computed here.
    private func complete(plan: UploadPlan, uploadId: String, meter: ProgressMeter) async throws -> UploadResult {
        let parts = plan.orderedParts
        let (expected, fullObject) = try expectedChecksum(of: parts)
        let result = try await client.completeMultipartUpload(
            bucket: request.bucket, key: request.key, uploadId: uploadId, parts: parts,
            checksumAlgorithm: request.checksumAlgorithm, fullObjectChecksum: fullObject, credentials: credentials,
            observer: observer)
        let stored = await client.storedObject(bucket: request.bucket, key: request.key, credentials: credentials)
        if let size = stored?.size, size != plan.fileSize {
            throw FerryError(
                .checksumMismatch,
                "The server answered the completion, but the object it stored is \(size) bytes, not the file's \(plan.fileSize).")
        }
        // Servers report the object's checksum on completion, or (moto, some gateways) only on HEAD.
        let reported = request.checksumAlgorithm.flatMap { result.checksums[$0.s3Name] ?? stored?.checksums[$0.s3Name] }
        let (verified, verification): (String?, UploadResult.Verification)
        if reported == nil, let algorithm = request.checksumAlgorithm, algorithm != .md5 {
            (verified, verification) = (nil, try await verifyByETags(objectETag: result.eTag, parts: parts, plan: plan))
        } else {
            (verified, verification) = try verify(
                etag: result.eTag, reported: reported, parts: parts, expected: expected)
        }
        if !request.keepsCheckpointOnCompletion { await checkpointWriter?.delete() }
        return UploadResult(
            bucket: request.bucket, key: request.key, etag: ObjectStorageClient.unquote(result.eTag), size: plan.fileSize,
            uploadId: uploadId, checksumAlgorithm: request.checksumAlgorithm, checksum: verified,
            verification: verification, partsResumed: partsResumed, partsSent: partsSent)
    }

    /// The checksum the object made of `parts` must have, and the full-object value a completion sends when the
    /// algorithm's part values combine into one (CRC); none for MD5 (the ETag is checked) or no checksum.
    private func expectedChecksum(of parts: [UploadedPart]) throws -> (expected: String?, fullObject: String?) {
        guard let algorithm = request.checksumAlgorithm, algorithm != .md5 else { return (nil, nil) }
        let raw = try parts.map { part -> [UInt8] in
            guard let value = part.checksum, let bytes = Data(base64Encoded: value) else {
                throw FerryError(.cannotResumeUpload, "Part \(part.number) has no checksum to verify the object with.")
            }
            return [UInt8](bytes)
        }
        if algorithm.supportsCombine {
            let combined = Checksum.combine(algorithm, parts: zip(raw, parts).map { ($0, UInt64($1.size)) })
                .map { Data($0).base64EncodedString() }
            return (combined, combined)
        }
        return (Checksum.composite(algorithm, partChecksums: raw), nil)
    }

    /// Checks the object the server made of `parts`: its `reported` checksum against `expected`, or with MD5 its
    /// `etag` against the MD5 of the parts' MD5s. Returns the checksum verified and how.
    private func verify(etag: String, reported: String?, parts: [UploadedPart], expected: String?) throws
        -> (checksum: String?, verification: UploadResult.Verification)
    {
        guard let algorithm = request.checksumAlgorithm else { return (nil, .none) }
        guard algorithm == .md5 else {
            guard let reported else {
                throw FerryError(
                    .checksumMismatch,
                    "The server stored the object without reporting its \(algorithm.s3Name) checksum, so it could not "
                        + "be verified.")
            }
            guard let expected, Self.sameChecksum(reported, expected) else {
                throw FerryError(
                    .checksumMismatch, "The server's \(algorithm.s3Name) of the object differs from the one computed here.")
            }
            return (reported, .checksum)
        }
        // Every part went with Content-MD5; the object's ETag must be the MD5 of those MD5s.
        let md5s = try parts.map { part -> [UInt8] in
            guard let value = part.checksum, let bytes = Data(base64Encoded: value) else {
                throw FerryError(.cannotResumeUpload, "Part \(part.number) has no MD5 to verify the object with.")
            }
            return [UInt8](bytes)
        }
        guard ObjectStorageClient.unquote(etag) == Checksum.multipartETag(partMD5s: md5s) else {
            throw FerryError(.checksumMismatch, "The server's ETag does not match the MD5s of the parts sent.")
        }
        return (nil, .etag)
    }

    /// Checks an object whose store reports no flexible checksum (OSS, older MinIO or Ceph) by its ETags: each part's
    /// must be the MD5 of the file's bytes it was sent (read again here, a piece at a time), and the object's the MD5
    /// of those MD5s. A store whose ETags are not MD5s leaves the object unverifiable: a `checksumMismatch`.
    private func verifyByETags(objectETag: String, parts: [UploadedPart], plan: UploadPlan) async throws
        -> UploadResult.Verification
    {
        let algorithm = request.checksumAlgorithm?.s3Name ?? "MD5"
        var md5s: [[UInt8]] = []
        for part in parts {
            let etag = ObjectStorageClient.unquote(part.etag).lowercased()
            guard etag.count == 32, let stored = Hex.decode(etag) else {
                throw FerryError(
                    .checksumMismatch,
                    "The server stored the object without reporting its \(algorithm) checksum, and its parts' ETags "
                        + "are not MD5s, so it could not be verified; use a server with checksum support, or no "
                        + "checksum.")
            }
            guard try await fileMD5(plan.range(ofPart: part.number)) == etag else {
                throw FerryError(
                    .checksumMismatch,
                    "The server's ETag of part \(part.number) is not the MD5 of the file's bytes it was sent: the part "
                        + "was damaged on its way, or the file changed while it was sent.")
            }
            md5s.append(stored)
        }
        guard ObjectStorageClient.unquote(objectETag).lowercased() == Checksum.multipartETag(partMD5s: md5s) else {
            throw FerryError(.checksumMismatch, "The server's ETag of the object is not the MD5 of its parts' MD5s.")
        }
        return .etag
    }

    /// Whether two checksum values agree; a composite value's `-N` suffix is not reported by every server.
    static func sameChecksum(_ a: String, _ b: String) -> Bool {
        func base(_ value: String) -> Substring { value.split(separator: "-").first ?? Substring(value) }
        return a == b || base(a) == base(b)
    }

    /// Below the multipart threshold: one PUT with the checksum header.
    private func singlePut(size: Int64) async throws -> UploadResult {
        continuation.yield(.started(uploadId: nil))
        let body = try reader.read(0..<size)
        let continuation = continuation
        let meter = ProgressMeter(alreadySent: 0, expected: size, interval: request.progressInterval) {
            continuation.yield(.progress($0))
        }
        var observer = self.observer
        let retrying = observer.retrying
        observer.retrying = { attempt, error, delay in
            meter.restart(part: 1)
            retrying(attempt, error, delay)
        }
        observer.bytesSent = { meter.add($0, part: 1, size: size) }
        let metadata = try await client.putObject(
            body, bucket: request.bucket, key: request.key, contentType: request.contentType,
            metadata: request.metadata, checksumAlgorithm: request.checksumAlgorithm, credentials: credentials,
            observer: observer)
        // A key ending in `/` is a folder to some stores (SeaweedFS keeps it empty, whatever was sent): its size is
        // read back.
        if request.key.hasSuffix("/"),
            let stored = await client.storedObject(bucket: request.bucket, key: request.key, credentials: credentials)?.size,
            stored != size
        {
            throw FerryError(
                .checksumMismatch,
                "The server answered the upload, but the object it stored at a key ending in / is \(stored) bytes, not the file's \(size).")
        }
        // The server's checksum was compared with the one sent when it reported it; a store that reports none (and
        // Content-MD5, which none echoes) is checked by its ETag, the MD5 of the body.
        var verification = UploadResult.Verification.none
        if let algorithm = request.checksumAlgorithm {
            if metadata.checksums[algorithm.s3Name] != nil {
                verification = .checksum
            } else if Hex.encode(Checksum.digest(.md5, of: body))
                == ObjectStorageClient.unquote(metadata.etag).lowercased()
            {
                verification = .etag
            } else {
                throw FerryError(
                    .checksumMismatch,
                    "The server stored the object without reporting its \(algorithm.s3Name) checksum, and its ETag is "
                        + "not the MD5 of the bytes sent, so it could not be verified.")
            }
        }
        meter.finish(part: 1, size: size)
        partsSent = 1
        return UploadResult(
            bucket: request.bucket, key: request.key, etag: metadata.etag, size: size, uploadId: nil,
            checksumAlgorithm: request.checksumAlgorithm, checksum: metadata.checksums.values.first,
            verification: verification, partsResumed: 0, partsSent: 1)
    }
}

extension ObjectStorageClient {
    /// Starts a resumable upload of a file; files below the multipart threshold go in one PUT.
    ///
    /// - Throws: ``FerryError``: `invalidArgument` for a concurrency outside 1 to 64 or adaptive part sizes that cannot
    ///   work,
    ///   `fileNotFound` when the file cannot be read.
    public func upload(_ request: ResumableUploadRequest) async throws(FerryError) -> ResumableUploadTask {
        guard (1...ResumableUploadRequest.maxConcurrency).contains(request.concurrency) else {
            throw FerryError(
                .invalidArgument, "Concurrency must be from 1 to \(ResumableUploadRequest.maxConcurrency).")
        }
        if case .adaptive(let minimum, let maximum, let target) = request.partSizing {
            guard minimum > 0, maximum >= minimum, maximum <= UploadPlan.maxPartSize, target > .zero else {
                throw FerryError(
                    .invalidArgument,
                    "Adaptive part sizes need 0 < minimum ≤ maximum < 4 GiB and a positive target duration.")
            }
        }
        _ = try FerryError.catching(.fileNotFound, "Reading \(request.fileURL.path)") {
            try FileRanges.attributes(of: request.fileURL.path)
        }
        let task = ResumableUploadTask(client: self, request: request)
        await task.start()
        return task
    }

    /// Forgets an interrupted upload of `request`'s file: aborts its multipart upload on the server and deletes its
    /// checkpoint. Returns whether there was one.
    ///
    /// - Throws: ``FerryError``: `uploadInProgress` when another run is sending the upload (it holds the checkpoint's
    ///   lock; nothing is aborted or deleted), or what aborting the upload failed with.
    @discardableResult
    public func discardCheckpoint(of request: ResumableUploadRequest) async throws(FerryError) -> Bool {
        try await cancelInterruptedUpload(of: request) != .none
    }

    /// What ``cancelInterruptedUpload(of:)`` found and did.
    public enum InterruptedUploadCancellation: Sendable, Equatable {
        /// There was no interrupted upload of the file.
        case none
        /// Its checkpoint is deleted, and its multipart upload aborted (or the service had none by its id).
        case aborted
        /// Its checkpoint is deleted, but the service refused to abort its multipart upload (`status`, a 4xx other
        /// than 404): the upload stays until the service ends it.
        case abortRefused(status: Int)
        /// It was stopped while its multipart upload was being created: its record is deleted, and `found` multipart
        /// uploads begun then and holding no part were aborted; nil when the service's uploads could not be listed.
        /// With none found, one the service made after the run stopped, if any, stays until the service ends it.
        case lostCreation(found: Int?)
    }

    /// Forgets an interrupted upload of `request`'s file, as ``discardCheckpoint(of:)``, and says what was found on
    /// the service.
    ///
    /// - Throws: ``FerryError``: `uploadInProgress` when another run is sending the upload, or what aborting the
    ///   upload failed with.
    public func cancelInterruptedUpload(of request: ResumableUploadRequest) async throws(FerryError)
        -> InterruptedUploadCancellation
    {
        guard let directory = request.recordDirectory else { return .none }
        let store = CheckpointStore(directory: directory)
        let id = CheckpointStore.identifier(
            endpoint: checkpointServiceIdentity, bucket: request.bucket, key: request.key,
            filePath: request.fileURL.standardizedFileURL.path)
        guard store.load(id) != nil || store.intent(id) != nil else { return .none }
        // Not while another run sends the upload.
        let lock = try store.lock(id, file: request.fileURL.path)
        defer { lock.release() }
        guard let checkpoint = store.load(id) else {
            // Stopped while its multipart upload was being created: the uploads begun then, and holding no part, are
            // the ones it lost.
            guard let began = store.intent(id) else { return .none }
            let found = await abortLostUploads(
                bucket: request.bucket, key: request.key, createdAround: began, except: nil,
                credentials: source())
            store.deleteIntent(id)
            return .lostCreation(found: found)
        }
        var outcome = InterruptedUploadCancellation.aborted
        if Self.isPlausible(checkpoint.uploadId) {
            do {
                try await abortMultipartUpload(bucket: request.bucket, key: request.key, uploadId: checkpoint.uploadId)
            } catch where error.serverCode == "NoSuchUpload" || error.httpStatus == 404 {
                // Gone, or one the service never made: nothing to abort.
            } catch where (400..<500).contains(error.httpStatus ?? 0) {
                // Refused (a key that may not abort): nothing to resume either, but the upload stays.
                outcome = .abortRefused(status: error.httpStatus ?? 400)
            }
        }
        store.delete(id)
        return outcome
    }

    /// Aborts the multipart uploads of `key` that a run created and lost (it was stopped before its first checkpoint
    /// named them), or that a retried creation made and never heard of (all but `kept`): begun within five minutes of
    /// `began`, the run's intent (clocks may differ), and holding no part, since parts are sent only after the
    /// checkpoint is written, so an upload with parts belongs to someone else. Best effort: a key that may not list
    /// uploads leaves them to the server's expiry.
    /// Returns how many it aborted; nil when the uploads could not be listed.
    @discardableResult
    func abortLostUploads(
        bucket: String, key: String, createdAround began: Date, except kept: String?, credentials: CredentialSource
    ) async -> Int? {
        guard let uploads = try? await multipartUploads(of: key, bucket: bucket, credentials: credentials) else { return nil }
        var aborted = 0
        for upload in uploads where upload.uploadId != kept {
            guard let initiated = upload.initiated, abs(initiated.timeIntervalSince(began)) < 300,
                let parts = try? await listParts(
                    bucket: bucket, key: key, uploadId: upload.uploadId, credentials: credentials, observer: .init()),
                parts.isEmpty
            else { continue }
            do {
                try await abortMultipartUpload(bucket: bucket, key: key, uploadId: upload.uploadId, credentials: credentials)
                aborted += 1
            } catch {
                continue
            }
        }
        return aborted
    }

    /// Uploads a file to `bucket`/`key` with default options and returns the running upload.
    public func upload(file: URL, bucket: String, key: String) async throws(FerryError) -> ResumableUploadTask {
        try await upload(ResumableUploadRequest(bucket: bucket, key: key, fileURL: file))
    }
}

/// Whether a request (or a media service call of an upload queue) was retried, set from its retry callback.
final class RetryMark: @unchecked Sendable {
    // `@unchecked Sendable`: the flag is read and written under `lock` only.
    private let lock = NSLock()
    private var seen = false

    func set() { lock.withLock { seen = true } }
    var isSet: Bool { lock.withLock { seen } }
}
