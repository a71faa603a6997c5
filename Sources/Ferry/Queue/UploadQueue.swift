import FerryCore
import Foundation

/// A list of videos and images uploaded one after another (or a few at once), each resumable, to Ferry's media
/// service: the Swift form of `VODUploadClient`.
///
/// ```swift
/// let queue = UploadQueue(authorization: .sts(endpoint: serviceURL, credentials: stsToken))
/// await queue.addFile(movieURL, info: MediaInfo(title: "Holiday", tags: "beach"))
/// await queue.start()
/// for await event in queue.events {
///     if case .finished(_, let result) = event { print("video", result.videoId ?? "") }
///     if case .tokenExpired = event { await queue.resume(withToken: try await appServer.freshToken()) }
/// }
/// ```
///
/// Every file goes through the client engine: parallel parts with checksums, checkpoints in the record directory,
/// retries. With STS authorization the queue remembers which video a file became, so the same file added again after
/// the app was killed continues its checkpoint and keeps its VideoId (RefreshUploadVideo).
public actor UploadQueue {
    /// What happens to the files, in order. Consume it from one task; it finishes when the queue is released.
    public nonisolated let events: AsyncStream<UploadQueueEvent>
    private let continuation: AsyncStream<UploadQueueEvent>.Continuation
    /// The configuration.
    public nonisolated let configuration: Configuration
    /// Where upload credentials come from.
    public nonisolated let authorization: Authorization

    private nonisolated let journal: MediaUploadJournal?
    /// How the queue's own tasks reach it without keeping it alive: the queue lives as long as its owner holds it.
    private nonisolated let reference = QueueReference()
    /// The list, each file's state and its engine upload; the actor performs what it says.
    private var machine: StateMachine<ResumableUploadTask>
    /// Each uploading item's run (ticket, engine upload, events), cancelled when the queue is released.
    private var runs: [Item.ID: Task<Void, Never>] = [:]
    private var tickets: [Item.ID: MediaServiceClient.UploadTicket] = [:]
    /// Control operations on an item's engine upload, one after another.
    private var controls: [Item.ID: Task<Void, Never>] = [:]
    private var authWaiters: [Item.ID: CheckedContinuation<MediaServiceClient.UploadTicket, any Error>] = [:]
    private var pendingAuth: [Item.ID: MediaServiceClient.UploadTicket] = [:]
    private var tokenWaiters: [Item.ID: CheckedContinuation<Void, any Error>] = [:]
    /// The background deletions of what the queue made for files it removed, by file (``abandon(_:_:file:)``).
    private var abandoning: [URL: (token: Int, task: Task<Void, Never>)] = [:]
    private var abandonTokens = 0
    /// The STS credential (nil without STS authorization); only the app renews it, with `resume(withToken:)`.
    private nonisolated let stsToken: CredentialCache?

    /// Creates a queue; nothing uploads until ``start()``.
    public init(authorization: Authorization, configuration: Configuration = .init()) {
        (events, continuation) = AsyncStream.makeStream(of: UploadQueueEvent.self, bufferingPolicy: .unbounded)
        self.authorization = authorization
        self.configuration = configuration
        journal = configuration.effectiveRecordDirectory.map {
            MediaUploadJournal(directory: $0, maxAge: configuration.resumeValidity)
        }
        machine = StateMachine(maxConcurrentUploads: configuration.maxConcurrentUploads)
        if case .sts(_, let credentials) = authorization {
            stsToken = CredentialCache(credentials, now: configuration.objectStorage.now) {
                throw FerryError(.credentialsExpired, "The STS credential expired; resume with a new one.")
            }
        } else {
            stsToken = nil
        }
        reference.queue = self
    }

    /// Released by its owner: ``events`` finishes, waits for credentials end, and uploads under way pause (their
    /// checkpoints stay, so the same files added to a new queue continue where they stopped).
    deinit {
        continuation.finish()
        for waiter in authWaiters.values { waiter.resume(throwing: CancellationError()) }
        for waiter in tokenWaiters.values { waiter.resume(throwing: CancellationError()) }
        for run in runs.values { run.cancel() }
        for upload in machine.allUploads { Task { await upload.pause() } }
    }

    // MARK: The list

    /// Adds a video or image (kind from the extension unless given) at the end of the list.
    @discardableResult
    public func addFile(_ fileURL: URL, info: MediaInfo = MediaInfo(), kind: MediaKind? = nil) -> Item.ID {
        add(fileURL, info: info, kind: kind ?? MediaKind(fileURL: fileURL))
    }

    /// Adds an image to become a video's cover (CreateUploadImage with `ImageType` `cover`); its result's `imageURL` is
    /// what ``MediaInfo/coverURL`` of the videos takes.
    @discardableResult
    public func addCoverImage(_ fileURL: URL, info: MediaInfo = MediaInfo()) -> Item.ID {
        add(fileURL, info: info, kind: .image, imageType: "cover")
    }

    func add(_ fileURL: URL, info: MediaInfo, kind: MediaKind, imageType: String = "default", ticket: MediaServiceClient.UploadTicket? = nil) -> Item.ID {
        let (id, starts) = machine.add(fileURL, info: info, kind: kind, imageType: imageType)
        if let ticket { pendingAuth[id] = ticket }
        perform(starts)
        return id
    }

    /// The files in the list, in order, with their states.
    public func listFiles() -> [Item] { machine.items }

    /// One item, or nil when it is not in the list.
    public func item(_ id: Item.ID) -> Item? { machine.item(id) }

    /// Removes a file from the list. If it is uploading, its upload is cancelled (the server's multipart upload is
    /// aborted, its checkpoint deleted) and the next file starts. With an STS credential, the video or image the
    /// queue made for a file that has not finished is then deleted while it is still `Uploading` (it would wait for a
    /// file that never comes), in the background: an answer that does not come is left to the service, which expires
    /// the video. False when there is no such item.
    @discardableResult
    public func deleteFile(_ id: Item.ID) async -> Bool {
        guard await delete(id) else { return false }
        perform(machine.schedule())
        return true
    }

    /// Removes a file as ``deleteFile(_:)`` does, without starting the next.
    private func delete(_ id: Item.ID) async -> Bool {
        guard let deletion = machine.delete(id) else { return false }
        endWaits(id)
        let pending = pendingAuth.removeValue(forKey: id)
        tickets[id] = nil
        if let upload = deletion.upload { await control(id, upload) { await $0.cancel() } }
        controls[id] = nil
        if authorization.isSTS {
            journal?.remove(deletion.item.fileURL)
            let item = deletion.item
            let made = (item.kind == .video ? item.videoId : item.imageId) ?? pending?.id
            if item.state != .succeeded { abandon(made, item.kind, file: item.fileURL) }
        }
        return true
    }

    /// Deletes, in the background, the video or image the queue made (with STS) for `file`, which it no longer
    /// uploads, while it is still `Uploading`. The same file added again waits for the deletion before it asks for a
    /// video or image (``abandonment(of:)``): it would be given the one being deleted back (its client token is the
    /// file's).
    private func abandon(_ mediaId: String?, _ kind: MediaKind, file: URL) {
        guard authorization.isSTS, let mediaId, !mediaId.isEmpty, let media else { return }
        abandonTokens += 1
        let (token, previous, reference) = (abandonTokens, abandoning[file]?.task, reference)
        let task = Task {
            await previous?.value
            _ = await kind == .video ? media.deleteAbandonedVideo(mediaId) : media.deleteAbandonedImage(mediaId)
            await reference.queue?.abandoned(file, token)
        }
        abandoning[file] = (token, task)
    }

    /// The deletion `token` of what was made for `file` has ended.
    private func abandoned(_ file: URL, _ token: Int) {
        if abandoning[file]?.token == token { abandoning[file] = nil }
    }

    /// The background deletion of what the queue made for `file` before, while it runs.
    private func abandonment(of file: URL) -> Task<Void, Never>? { abandoning[file]?.task }

    /// ``deleteFile(_:)`` by position in ``listFiles()``.
    @discardableResult
    public func deleteFile(at index: Int) async -> Bool {
        let items = machine.items
        guard items.indices.contains(index) else { return false }
        return await deleteFile(items[index].id)
    }

    /// Removes every file, cancelling those that are uploading.
    public func clearFiles() async {
        // Uploading files first: removing another waits for its upload to stop, and one still uploading could finish
        // meanwhile. Then from the end: each removal leaves the files before it where they were.
        let items = machine.items
        for item in items where item.state == .uploading { _ = await delete(item.id) }
        for item in items.reversed() { _ = await delete(item.id) }
        perform(machine.schedule())
    }

    /// Marks a file cancelled without removing it. If it is uploading it stops at once (its multipart upload and
    /// checkpoint stay, so ``resumeFile(_:)`` continues it) and the next file starts.
    @discardableResult
    public func cancelFile(_ id: Item.ID) async -> Bool {
        switch machine.cancelFile(id) {
        case .none:
            return false
        case .cancelled(let starts):
            perform(starts)
        case .halt(let halt):
            await perform(halt)
            perform(machine.schedule())
        }
        return true
    }

    /// ``cancelFile(_:)`` by position.
    @discardableResult
    public func cancelFile(at index: Int) async -> Bool {
        let items = machine.items
        guard items.indices.contains(index) else { return false }
        return await cancelFile(items[index].id)
    }

    /// Puts a cancelled, paused or failed file back in line and starts the queue; it continues from its checkpoint.
    @discardableResult
    public func resumeFile(_ id: Item.ID) -> Bool {
        guard let starts = machine.resumeFile(id) else { return false }
        perform(starts)
        return true
    }

    /// ``resumeFile(_:)`` by position.
    @discardableResult
    public func resumeFile(at index: Int) -> Bool {
        let items = machine.items
        guard items.indices.contains(index) else { return false }
        return resumeFile(items[index].id)
    }

    // MARK: The queue

    /// Starts uploading the files that are ready, ``Configuration/maxConcurrentUploads`` at a time.
    public func start() {
        perform(machine.start())
    }

    /// Stops the queue: files uploading now are cancelled (their checkpoints stay; ``resumeFile(_:)`` continues
    /// them); nothing more starts until ``start()``.
    public func stop() async {
        for halt in machine.stop() { await perform(halt) }
    }

    /// Pauses the queue and the files uploading now.
    public func pause() async {
        for halt in machine.pause() { await perform(halt) }
    }

    /// Continues a paused queue: paused files are ready again and start. Like ``start()``, it also runs a queue that
    /// was stopped or never started (files a stop cancelled stay cancelled: ``resumeFile(_:)`` brings one back).
    public func resume() {
        perform(machine.resume())
    }

    // MARK: Credentials

    /// Hands over a file's upload address and credential (base64, as CreateUploadVideo, CreateUploadImage and
    /// RefreshUploadVideo return them), usually in answer to ``UploadQueueEvent/started(_:)``. Pass the video id
    /// when the app server told it, so the result carries it.
    ///
    /// - Throws: ``FerryError/Code/invalidArgument`` when either cannot be decoded or the item is not in the list.
    public func setUploadAuth(
        _ uploadAuth: String, address uploadAddress: String, videoId: String? = nil, for id: Item.ID
    ) throws(FerryError) {
        guard let item = item(id) else { throw FerryError(.invalidArgument, "No item \(id) is in the queue.") }
        var withURL = try MediaServiceClient.UploadTicket(id: videoId ?? "", address: uploadAddress, auth: uploadAuth)
        if item.kind == .image { withURL.imageURL = item.imageURL }
        if let waiter = authWaiters.removeValue(forKey: id) {
            waiter.resume(returning: withURL)
        } else {
            pendingAuth[id] = withURL
        }
    }

    /// Continues a file whose upload credential expired with a new one (base64 `UploadAuth`; the seed's
    /// `resumeWithAuth:`). A credential is for one file's upload: it goes to `item` (the file of the
    /// ``UploadQueueEvent/tokenExpired(_:)`` it answers), or without one to the file that has waited longest, so that
    /// files uploading at once (``UploadQueue/Configuration/maxConcurrentUploads``) each get their own when each event
    /// is answered in turn; every other file waits on for its own. False when that file was not waiting for one.
    ///
    /// - Throws: ``FerryError/Code/invalidArgument`` when the credential cannot be decoded,
    ///   ``FerryError/Code/credentialsExpired`` when it has expired already (the file goes on waiting).
    @discardableResult
    public func resume(withUploadAuth uploadAuth: String, for item: Item.ID? = nil) async throws(FerryError) -> Bool {
        guard let auth = UploadAuth(encoded: uploadAuth) else {
            throw FerryError(.invalidArgument, "The upload credential cannot be decoded.")
        }
        await calibrateClock(judging: auth.ferryCredentials, item: item)
        guard !auth.ferryCredentials.isExpired(at: configuration.objectStorage.now()) else {
            throw FerryError(.credentialsExpired, "The upload credential has expired already; ask for a new one.")
        }
        guard let id = machine.takeExpired(item) else { return false }
        await resumeUpload(id, with: auth.ferryCredentials)
        return true
    }

    /// Continues with a new STS credential after ``UploadQueueEvent/tokenExpired(_:)`` (the seed's
    /// `resumeWithToken:accessKeySecret:secretToken:expireTime:`). True when it was taken; false, and nothing changes,
    /// when it has expired already (its `expiration` is past): the files waiting for one go on waiting, and no new
    /// `tokenExpired` event is sent for them, so an app that answers every event at once does not go round in a loop.
    @discardableResult
    public func resume(withToken credentials: Credentials) async -> Bool {
        await calibrateClock(judging: credentials, item: nil)
        guard !credentials.isExpired(at: configuration.objectStorage.now()) else { return false }
        stsToken?.replace(with: credentials)
        for (_, waiter) in tokenWaiters { waiter.resume() }
        tokenWaiters = [:]
        for id in machine.takeExpired() { await renew(id) }
        return true
    }

    /// Before a credential the app just gave is judged expired, asks the service its time
    /// (``ServiceClock/calibrate(against:transport:)``): on a device whose clock is hours ahead every fresh credential
    /// looks expired by it.
    private func calibrateClock(judging credentials: Credentials, item: Item.ID?) async {
        guard credentials.isExpired(at: configuration.objectStorage.now()) else { return }
        var endpoint: URL?
        if case .sts(let serviceEndpoint, _) = authorization { endpoint = serviceEndpoint }
        if endpoint == nil, let item, let ticket = tickets[item] { endpoint = URL(string: ticket.address.endpoint) }
        guard let endpoint else { return }
        await ServiceClock.calibrate(against: endpoint, transport: configuration.objectStorage.transport)
    }

    /// Ends ``events`` (for an owner that is done with the queue).
    func finishEvents() { continuation.finish() }

    // MARK: Running

    private func emit(_ event: UploadQueueEvent) { continuation.yield(event) }

    /// Sets files going as the machine says.
    private func perform(_ starts: [StateMachine<ResumableUploadTask>.Start]) {
        for start in starts {
            switch start {
            case .resume(let id, let upload):
                // A paused or cancelled upload continues where it stopped.
                controlTask(id, upload) { await $0.resume() }
            case .run(let id, let generation):
                let reference = self.reference
                runs[id] = Task.detached { await UploadQueue.process(reference, id, generation: generation) }
            }
        }
    }

    /// Stops an uploading file as the machine says: its engine upload pauses (checkpoint kept), or its wait for
    /// credentials ends.
    private func perform(_ halt: StateMachine<ResumableUploadTask>.Halt) async {
        switch halt {
        case .pauseUpload(let id, let upload): await control(id, upload) { await $0.pause() }
        case .endWaits(let id): endWaits(id)
        }
    }

    /// Runs `operation` on the item's engine upload after the operations before it.
    @discardableResult
    private func controlTask(
        _ id: Item.ID, _ upload: ResumableUploadTask, _ operation: @escaping @Sendable (ResumableUploadTask) async -> Void
    ) -> Task<Void, Never> {
        let previous = controls[id]
        let task = Task {
            await previous?.value
            await operation(upload)
        }
        controls[id] = task
        return task
    }

    private func control(
        _ id: Item.ID, _ upload: ResumableUploadTask, _ operation: @escaping @Sendable (ResumableUploadTask) async -> Void
    ) async {
        await controlTask(id, upload, operation).value
    }

    private func endWaits(_ id: Item.ID) {
        authWaiters.removeValue(forKey: id)?.resume(throwing: CancellationError())
        tokenWaiters.removeValue(forKey: id)?.resume(throwing: CancellationError())
    }

    /// One run of an item: its ticket, its engine upload, the upload's events until it ends. It reaches the queue
    /// through `reference` only while it has something to tell it, so a released queue is not kept alive by its runs.
    private static func process(_ reference: QueueReference, _ id: Item.ID, generation: Int) async {
        guard let current = await reference.queue?.began(id) else { return }
        let upload: ResumableUploadTask
        do {
            let ticket = try await obtainTicket(reference, for: current, generation: generation)
            guard let (item, configuration) = await reference.queue?.record(ticket, for: id, generation: generation)
            else {
                // Removed while its ticket was being made: what was made for it goes too.
                await reference.queue?.abandonIfRemoved(id, ticket, current)
                return
            }
            let made = try await makeUpload(item, ticket: ticket, configuration: configuration)
            guard await reference.queue?.attach(made, to: id, generation: generation) == true else {
                // The queue is gone (or the run replaced): the upload stops, its checkpoint kept.
                await made.pause()
                return
            }
            upload = made
        } catch let stored as StoredEarlier {
            await reference.queue?.finishStoredEarlier(id, generation: generation, stored)
            return
        } catch {
            await reference.queue?.failRun(id, generation: generation, error)
            return
        }
        for await event in upload.events {
            guard let queue = reference.queue else { return }
            await queue.handle(event, id)
        }
        let outcome: Result<UploadResult, FerryError>
        do {
            outcome = .success(try await upload.result)
        } catch {
            outcome = .failure(error as? FerryError ?? FerryError(.network, "\(error)"))
        }
        await reference.queue?.finish(id, upload: upload, outcome)
    }

    /// A ticket made for `item`, removed meanwhile: what it made is abandoned (``abandon(_:_:file:)``).
    private func abandonIfRemoved(_ id: Item.ID, _ ticket: MediaServiceClient.UploadTicket, _ item: Item) {
        if self.item(id) == nil { abandon(ticket.id, item.kind, file: item.fileURL) }
    }

    /// A run starts: its `started` event; nil when the item is gone.
    private func began(_ id: Item.ID) -> Item? {
        guard let current = item(id) else { return nil }
        emit(.started(current))
        return current
    }

    /// Records the item's ticket (and, with STS, which video the file became); nil when the run is no longer current.
    private func record(_ ticket: MediaServiceClient.UploadTicket, for id: Item.ID, generation: Int) -> (Item, Configuration)? {
        guard let updated = machine.record(ticket, for: id, generation: generation) else { return nil }
        tickets[id] = ticket
        if authorization.isSTS, let journal {
            try? journal.record(
                updated.fileURL, id: ticket.id, bucket: ticket.address.bucket, key: ticket.address.fileName,
                imageType: updated.kind == .image ? updated.imageType : nil)
        }
        return (updated, configuration)
    }

    /// Takes over an engine upload the run made; false (and the upload stopped) when the run is no longer current.
    private func attach(_ upload: ResumableUploadTask, to id: Item.ID, generation: Int) async -> Bool {
        switch machine.attach(upload, to: id, generation: generation) {
        case .stale(let removed):
            // Removed while the upload was being created: abort it. Stopped and started again meanwhile: keep its
            // checkpoint for the newer run and drop this handle.
            if removed { await upload.cancel() } else { await upload.pause() }
            return false
        case .attached(let pause):
            if pause { await control(id, upload) { await $0.pause() } }
            return true
        }
    }

    /// A run failed before its upload started: the item fails, unless the run is no longer current.
    private func failRun(_ id: Item.ID, generation: Int, _ error: any Error) {
        guard let (item, starts) = machine.runFailed(id, generation: generation, Self.ferryError(error)) else { return }
        if let item { emitFailure(item) }
        perform(starts)
    }

    private func handle(_ event: UploadEvent, _ id: Item.ID) {
        switch event {
        case .progress(let progress):
            if let item = machine.progressed(
                id, sent: progress.totalBytesSent, stored: progress.totalBytesStored, of: progress.totalBytesExpected)
            {
                emit(.progress(item, uploadedSize: item.uploadedSize, totalSize: progress.totalBytesExpected))
            }
        case .retrying(let attempt, let error, _):
            if let item = item(id) { emit(.retry(item, attempt: attempt, error: error)) }
        case .retryResumed:
            if let item = item(id) { emit(.retryResumed(item)) }
        case .credentialsExpired:
            let reference = self.reference
            Task.detached { await reference.queue?.renew(id) }
        case .started(let uploadId):
            machine.uploadStarted(id, uploadId: uploadId)
        case .paused, .resumed, .completed, .failed, .cancelled:
            break
        }
    }

    private func finish(_ id: Item.ID, upload: ResumableUploadTask, _ outcome: Result<UploadResult, FerryError>) {
        guard let action = machine.finish(id, upload: upload, outcome) else {
            // A removed file's upload, cancelled by the removal (or completed as it was removed): its run has ended.
            if item(id) == nil { runs[id] = nil }
            if case .success = outcome { upload.discardCheckpoint() }
            return
        }
        runs[id] = nil
        controls[id] = nil
        tickets[id] = nil
        switch action {
        case .succeeded(let item, let starts):
            if let item, case .success(let result) = outcome {
                let stored = MediaUploadResult(
                    videoId: item.videoId, imageId: item.imageId, imageURL: item.imageURL, upload: result)
                // The checkpoint, which the engine kept for this, goes once the journal no longer names the file:
                // until then a run after a kill checks the stored file against its parts. Both stay when the app
                // could not record the file.
                if recordStored(item, stored) || !authorization.isSTS {
                    if authorization.isSTS { journal?.remove(item.fileURL) }
                    upload.discardCheckpoint()
                }
                emit(.finished(item, stored))
            } else {
                // A file removed as its upload completed.
                upload.discardCheckpoint()
            }
            perform(starts)
        case .cancelled(let starts):
            perform(starts)
        case .failed(let item, let starts):
            if let item { emitFailure(item) }
            perform(starts)
        }
    }

    /// Tells the app a file is stored (``Configuration/fileStored``); whether it recorded it (false when it threw).
    private func recordStored(_ item: Item, _ stored: MediaUploadResult) -> Bool {
        guard let fileStored = configuration.fileStored else { return true }
        do {
            try fileStored(item, stored)
            return true
        } catch {
            return false
        }
    }

    /// A run found the file stored by an earlier one whose last answer was lost: it succeeds as that video or image,
    /// with nothing sent again.
    private func finishStoredEarlier(_ id: Item.ID, generation: Int, _ stored: StoredEarlier) {
        guard
            let (item, starts) = machine.storedEarlier(
                id, generation: generation, videoId: stored.videoId, imageId: stored.imageId, imageURL: stored.imageURL,
                at: (stored.result.bucket, stored.result.key), size: stored.result.size)
        else { return }
        let result = MediaUploadResult(
            videoId: stored.videoId, imageId: stored.imageId, imageURL: stored.imageURL, upload: stored.result)
        if recordStored(item, result) {
            journal?.remove(item.fileURL)
            if let identifier = stored.checkpoint, let directory = configuration.effectiveRecordDirectory {
                CheckpointStore(directory: directory).discard(identifier, file: item.fileURL.path)
            }
        }
        emit(.finished(item, result))
        perform(starts)
    }

    /// Reports a file that failed, with the code and message the machine recorded.
    private func emitFailure(_ item: Item) {
        emit(.failed(item, code: item.failureCode ?? "", message: item.failureMessage ?? ""))
    }

    private static func ferryError(_ error: any Error) -> FerryError {
        error as? FerryError ?? FerryError(.network, "\(error)")
    }

    private func resumeUpload(_ id: Item.ID, with credentials: Credentials) async {
        guard let upload = machine.uploadingUpload(id) else { return }
        await control(id, upload) { await $0.resume(with: credentials) }
    }

    // MARK: Tickets

    /// The item's upload address and credential, from the app (per file) or the media service (STS). Waits (for
    /// `setUploadAuth`, or a new STS token) hold the queue only through `reference`.
    private static func obtainTicket(_ reference: QueueReference, for item: Item, generation: Int) async throws
        -> MediaServiceClient.UploadTicket
    {
        if let pending = await reference.queue?.takePendingAuth(item.id) { return pending }
        guard let authorization = reference.queue?.authorization else { throw CancellationError() }
        switch authorization {
        case .uploadAuth:
            return try await withCheckedThrowingContinuation { waiter in
                Task.detached {
                    guard let queue = reference.queue else { return waiter.resume(throwing: CancellationError()) }
                    await queue.waitForAuth(waiter, for: item.id, generation: generation)
                }
            }
        case .uploadAuthProvider(let provide):
            return try await provide(item)
        case .sts:
            while true {
                let used = reference.queue?.stsToken?.validCredentials
                let retries = RetryMark()
                do {
                    let ticket = try await stsTicket(reference, for: item, retries: retries)
                    if retries.isSet { reference.queue?.continuation.yield(.retryResumed(item)) }
                    return ticket
                } catch let error as FerryError where isExpiredToken(error) {
                    // Refused by the service though it looked valid here (no expiry given, or a device clock behind
                    // the service's): it is expired now, so the app is asked for a new one rather than the same
                    // token being sent again and again.
                    if let used, error.serverCode == "ExpiredToken" { reference.queue?.stsToken?.refuse(used) }
                    try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
                        Task.detached {
                            guard let queue = reference.queue else { return waiter.resume(throwing: CancellationError()) }
                            await queue.waitForToken(waiter, for: item, generation: generation)
                        }
                    }
                }
            }
        }
    }

    private func takePendingAuth(_ id: Item.ID) -> MediaServiceClient.UploadTicket? {
        pendingAuth.removeValue(forKey: id)
    }

    /// Holds `waiter` until `setUploadAuth` for the item; answers at once when the credential came first or the run
    /// is no longer current.
    private func waitForAuth(
        _ waiter: CheckedContinuation<MediaServiceClient.UploadTicket, any Error>, for id: Item.ID, generation: Int
    ) {
        if let pending = pendingAuth.removeValue(forKey: id) { return waiter.resume(returning: pending) }
        guard machine.isCurrent(id, generation) else { return waiter.resume(throwing: CancellationError()) }
        authWaiters[id] = waiter
    }

    /// Says the STS token expired and holds `waiter` until `resume(withToken:)`.
    private func waitForToken(_ waiter: CheckedContinuation<Void, any Error>, for item: Item, generation: Int) {
        guard machine.isCurrent(item.id, generation) else { return waiter.resume(throwing: CancellationError()) }
        if stsToken?.validCredentials != nil { return waiter.resume() }
        emit(.tokenExpired(item))
        tokenWaiters[item.id] = waiter
    }

    static func isExpiredToken(_ error: FerryError) -> Bool {
        error.code == .credentialsExpired || error.serverCode == "ExpiredToken"
    }

    /// A client of the media service signing with the queue's current STS credential, `credentialsExpired` once it
    /// has expired (it holds the credential, not the queue, so the client does not keep the queue alive).
    private nonisolated var media: MediaServiceClient? { media(for: nil) }

    /// The media client, whose retries are told as `item`'s (``UploadQueueEvent/retry(_:attempt:error:)``), as the
    /// seed's retry callback is for every network retry, its service calls' too.
    private nonisolated func media(for item: Item?, retried: RetryMark? = nil) -> MediaServiceClient? {
        guard case .sts(let endpoint, _) = authorization, let stsToken else { return nil }
        let reference = self.reference
        let continuation = self.continuation
        var onRetry: (@Sendable (Int, FerryError, Duration) -> Void)?
        if let item {
            onRetry = { attempt, error, _ in
                retried?.set()
                continuation.yield(.retry(item, attempt: attempt, error: error))
            }
        }
        return MediaServiceClient(
            endpoint: endpoint, region: configuration.region,
            credentialProvider: ClosureCredentialProvider {
                guard reference.queue != nil else { throw CancellationError() }
                return try await stsToken.credentials()
            },
            configuration: configuration.engine, onRetry: onRetry)
    }

    private static func stsTicket(_ reference: QueueReference, for item: Item, retries: RetryMark) async throws
        -> MediaServiceClient.UploadTicket
    {
        guard let (media, journal, configuration) = reference.queue.map({
            ($0.media(for: item, retried: retries), $0.journal, $0.configuration)
        })
        else { throw CancellationError() }
        guard let media else { throw FerryError(.invalidArgument, "The queue has no STS credential.") }
        // Added again while what was made for it before is being deleted: that ends first.
        if let deleting = await reference.queue?.abandonment(of: item.fileURL) { await deleting.value }
        let attributes = try FileRanges.attributes(of: item.fileURL.path)
        let ext = item.fileURL.pathExtension.lowercased()
        let title = item.info.title ?? item.fileURL.deletingPathExtension().lastPathComponent
        switch item.kind {
        case .image:
            // The same file continues the same image of the same type (and its checkpoint), as a video does.
            // (An entry written before images recorded their type is of a default image.)
            if let entry = journal?.lookup(item.fileURL), (entry.imageType ?? "default") == item.imageType {
                do {
                    return try await media.refreshUploadImage(imageId: entry.id)
                } catch {
                    guard MediaUploadJournal.startsAfresh(after: error) else { throw error }
                    // Stored already: by a run of this file whose last answer was lost, when the stored file is it.
                    if error.serverCode == "InvalidImage.Uploaded", let stored = try? await media.storedImage(imageId: entry.id),
                        let result = await storedEarlier(
                            entry, (stored.size, stored.etag), of: item, configuration: configuration)
                    {
                        throw StoredEarlier(
                            videoId: nil, imageId: entry.id, imageURL: stored.url, result: result.result,
                            checkpoint: result.checkpoint)
                    }
                    journal?.remove(item.fileURL)
                }
            } else if let abandoned = journal?.abandoned(item.fileURL) {
                // The file changed since it began uploading as that image: its checkpoint and multipart upload go.
                await discardAbandoned(abandoned, of: item, media: media, configuration: configuration)
                journal?.remove(item.fileURL)
            }
            // The same file asks for the same image, even after a kill before the journal recorded it.
            return try await media.createUploadImage(
                type: item.imageType, ext: ext.isEmpty ? "png" : ext, title: title, tags: item.info.tags,
                cateId: item.info.cateId, description: item.info.desc,
                clientToken: try? MediaUploadJournal.clientToken(
                    for: item.fileURL, scope: configuration.effectiveRecordDirectory?.standardizedFileURL.path ?? ""))
        case .video:
            if let entry = journal?.lookup(item.fileURL) {
                do {
                    return try await media.refreshUploadVideo(videoId: entry.id)
                } catch {
                    guard MediaUploadJournal.startsAfresh(after: error) else { throw error }
                    // Stored already: by a run of this file whose last answer was lost, when the stored file is it.
                    if error.serverCode == "InvalidVideo.Uploaded", let stored = try? await media.storedSource(videoId: entry.id),
                        let result = await storedEarlier(entry, stored, of: item, configuration: configuration)
                    {
                        throw StoredEarlier(
                            videoId: entry.id, imageId: nil, imageURL: nil, result: result.result,
                            checkpoint: result.checkpoint)
                    }
                    journal?.remove(item.fileURL)
                }
            } else if let abandoned = journal?.abandoned(item.fileURL) {
                // The file changed since it began uploading as that video, which would otherwise wait `Uploading`
                // for bytes that never come until the service expires it: deleted, with what arrived of it, and its
                // checkpoint with it.
                await discardAbandoned(abandoned, of: item, media: media, configuration: configuration)
                await media.deleteAbandonedVideo(abandoned.id)
                journal?.remove(item.fileURL)
            }
            var video = MediaServiceClient.VideoDescription(title: title, fileName: item.fileURL.lastPathComponent)
            video.fileSize = attributes.size
            video.description = item.info.desc
            video.tags = item.info.tags
            video.cateId = item.info.cateId
            video.coverURL = item.info.coverURL
            video.transcode = configuration.transcode ? configuration.templateGroupId : "NoTranscode"
            // The same file asks for the same video, even after a kill before the journal recorded it.
            video.clientToken = try? MediaUploadJournal.clientToken(
                for: item.fileURL, scope: configuration.effectiveRecordDirectory?.standardizedFileURL.path ?? "")
            return try await media.createUploadVideo(video)
        }
    }

    /// The upload of a video or image that an earlier run of this file finished on the service while its last answer
    /// was lost (the run was stopped then, or failed with its checkpoint kept): its stored file (`source`) has the
    /// file's size and the ETag the file made as that run sent it (its checkpoint's parts, or the MD5 of the file sent
    /// in one request), and the checkpoint it was checked against (deleted once the journal forgets the file). Nil
    /// when the stored file is another, or cannot be compared: the file then becomes a new video or image.
    private static func storedEarlier(
        _ entry: MediaUploadJournal.Entry, _ source: (size: Int64, etag: String), of item: Item, configuration: Configuration
    ) async -> (result: UploadResult, checkpoint: String?)? {
        guard let fingerprint = try? FileFingerprint.of(path: item.fileURL.path), source.size == fingerprint.size
        else { return nil }
        let store = configuration.effectiveRecordDirectory.map { CheckpointStore(directory: $0) }
        let found = store?.checkpoints(bucket: entry.bucket, key: entry.key, file: item.fileURL)
            .first { $0.checkpoint.fingerprint == fingerprint }
        var expected: String?
        if let found {
            expected = found.checkpoint.completedETag(fileSize: source.size)
        } else if !source.etag.contains("-"),
            let md5 = try? await StreamUploader.checksum(.md5, of: item.fileURL, offset: 0, length: source.size)
        {
            expected = Data(base64Encoded: md5).map { Hex.encode($0) }
        }
        guard let expected, expected == source.etag else { return nil }
        let result = UploadResult(
            bucket: entry.bucket, key: entry.key, etag: source.etag, size: source.size, uploadId: found?.checkpoint.uploadId,
            checksumAlgorithm: nil, checksum: nil, verification: .etag, partsResumed: found?.checkpoint.parts.count ?? 1,
            partsSent: 0)
        return (result, found?.identifier)
    }

    /// Ends the upload a journal entry names that no run will continue (its file changed since, or the entry
    /// expired), as a cancel does: its multipart upload is aborted with credentials the video or image is refreshed
    /// for, and its checkpoint is deleted, so that it is not left in the record directory for ever. Aborting is best
    /// effort (the service expires what it cannot reach); the checkpoint goes in any case.
    private static func discardAbandoned(
        _ entry: MediaUploadJournal.Entry, of item: Item, media: MediaServiceClient, configuration: Configuration
    ) async {
        guard let directory = configuration.effectiveRecordDirectory else { return }
        let store = CheckpointStore(directory: directory)
        // Those another run is sending (it holds their lock) are left to it.
        let stale = store.checkpoints(bucket: entry.bucket, key: entry.key, file: item.fileURL).compactMap { found in
            (try? store.lock(found.identifier, file: item.fileURL.path)).map { (found.identifier, found.checkpoint, $0) }
        }
        defer { for (_, _, lock) in stale { lock.release() } }
        guard !stale.isEmpty else { return }
        let ticket =
            item.kind == .video
            ? try? await media.refreshUploadVideo(videoId: entry.id)
            : try? await media.refreshUploadImage(imageId: entry.id)
        if let ticket, let endpoint = URL(string: ticket.address.endpoint), endpoint.host != nil {
            let client = ObjectStorageClient(
                endpoint: endpoint, region: ticket.auth.region, credentials: ticket.auth.ferryCredentials,
                configuration: configuration.engine)
            for (_, checkpoint, _) in stale {
                try? await client.abortMultipartUpload(bucket: entry.bucket, key: entry.key, uploadId: checkpoint.uploadId)
            }
        }
        for (identifier, _, _) in stale {
            store.delete(identifier)
            store.deleteIntent(identifier)
        }
    }

    /// How many renewed credentials in a row may be refused as expired, with no byte stored in between, before the
    /// file waits for the app's (``StateMachine/mayRenew(_:limit:)``).
    static let renewalsWithoutProgress = 3

    /// After the engine paused on an expired credential: a fresh one from wherever the item's came from, or a
    /// `tokenExpired` event and a wait for `resume(with…)`; that too when fresh ones were refused as expired
    /// ``renewalsWithoutProgress`` times in a row.
    private func renew(_ id: Item.ID) async {
        guard machine.uploadingUpload(id) != nil, let item = item(id) else { return }
        guard machine.mayRenew(id, limit: Self.renewalsWithoutProgress) else { return expire(id) }
        switch authorization {
        case .uploadAuth:
            expire(id)
        case .uploadAuthProvider(let provide):
            if let ticket = try? await provide(item), !ticket.auth.ferryCredentials.isExpired(at: configuration.objectStorage.now()) {
                await resumeUpload(id, with: ticket.auth.ferryCredentials)
            } else {
                expire(id)
            }
        case .sts:
            do {
                guard let media, let ticket = tickets[id] else { return }
                let fresh =
                    item.kind == .video
                    ? try await media.refreshUploadVideo(videoId: ticket.id)
                    : try await media.refreshUploadImage(imageId: ticket.id)
                await resumeUpload(id, with: fresh.auth.ferryCredentials)
            } catch where error.httpStatus == 404 || (error.serverCode ?? "").hasSuffix(".UploadExpired") {
                // The video or image is gone, or its upload expired: no credential helps, so the file fails with the
                // service's answer rather than ask the app for one again and again. Its upload is of no use: it is
                // cancelled after the machine moved on. (One stored already, `.Uploaded`, waits for the app as before:
                // a run after `resumeFile` finds it stored by its checkpoint.)
                guard let (item, upload, starts) = machine.renewalRefused(id, error) else { return }
                runs[id] = nil
                tickets[id] = nil
                if let item { emitFailure(item) }
                perform(starts)
                controlTask(id, upload) { await $0.cancel() }
            } catch {
                expire(id)
            }
        }
    }

    /// The file waits for `resume(with…)`: a `tokenExpired` event, unless it stopped uploading meanwhile.
    private func expire(_ id: Item.ID) {
        if let item = machine.credentialExpired(id) { emit(.tokenExpired(item)) }
    }

    private static func makeUpload(_ item: Item, ticket: MediaServiceClient.UploadTicket, configuration: Configuration)
        async throws -> ResumableUploadTask
    {
        guard let endpoint = URL(string: ticket.address.endpoint), endpoint.host != nil else {
            throw FerryError(.invalidArgument, "The upload address has no valid endpoint.")
        }
        let client = ObjectStorageClient(
            endpoint: endpoint, region: ticket.auth.region, credentials: ticket.auth.ferryCredentials,
            configuration: configuration.engine)
        var request = ResumableUploadRequest(bucket: ticket.address.bucket, key: ticket.address.fileName, fileURL: item.fileURL)
        request.partSizing = configuration.partSizing ?? .fixed(configuration.uploadPartSize)
        request.concurrency = configuration.partConcurrency
        request.recordDirectory = configuration.effectiveRecordDirectory
        request.checkpointExpiry = configuration.resumeValidity
        request.checksumAlgorithm = configuration.checksumAlgorithm
        request.contentType = MediaKind.contentType(forExtension: item.fileURL.pathExtension)
        request.keepsCheckpointOnCompletion = true
        return try await client.upload(request)
    }
}

extension UploadQueue.Authorization {
    var isSTS: Bool { if case .sts = self { true } else { false } }
}

/// What a run that finds its file stored by an earlier one (whose last answer was lost) ends with instead of an upload.
private struct StoredEarlier: Error {
    var videoId: String?
    var imageId: String?
    var imageURL: String?
    var result: UploadResult
    /// The checkpoint the stored file was checked against.
    var checkpoint: String?
}

/// A weak way to the queue for the tasks it starts, so that they do not keep it alive.
final class QueueReference: Sendable {
    // Set once, right after the queue is made; read from any task.
    nonisolated(unsafe) weak var queue: UploadQueue?
}
