import FerryCore
import Foundation

extension UploadQueue {
    /// The queue as a value: the list of files and each one's state (ready, uploading, paused, cancelled, succeeded,
    /// failed), whether the queue runs, which run of a file is current, which files have an engine upload and which
    /// wait for a credential. No I/O and no waiting: ``UploadQueue`` feeds it events and performs the actions it
    /// returns (start a run, resume, pause or cancel an engine upload, end a wait for credentials).
    ///
    /// - `ready` —start, resume, resumeFile, or a file before it ending (while the queue runs)→ `uploading`;
    ///   —cancelFile→ `cancelled`
    /// - `uploading` —pause→ `paused`; —stop, cancelFile→ `cancelled`; its engine upload ending→ `succeeded`,
    ///   `failed` or `cancelled`; its run failing→ `failed`
    /// - `paused` —resume, resumeFile→ `ready`; —cancelFile→ `cancelled`
    /// - `cancelled`, `failed` —resumeFile→ `ready`
    /// - any —delete→ gone
    ///
    /// Each time a file starts a new run its generation goes up; a run that finds its generation stale (the file was
    /// stopped, removed or started again meanwhile) stops at its next step. A file stopped while its engine upload
    /// exists keeps that upload, and starting it again resumes it.
    ///
    /// `Upload` is the engine upload a file runs on (``ResumableUploadTask`` in the queue; anything in tests).
    struct StateMachine<Upload: AnyObject> {
        /// The files, in order.
        private(set) var items: [Item] = []
        /// Whether the queue starts files that are ready.
        private(set) var isRunning = false
        /// Files uploaded at once.
        let maxConcurrentUploads: Int
        private var nextId = 1
        /// Which run of a file is current.
        private var generations: [Item.ID: Int] = [:]
        /// Each file's engine upload, once its run made one.
        private var uploads: [Item.ID: Upload] = [:]
        /// Files whose engine upload paused because its credential expired, waiting for `resume(with…)`, in the order
        /// their credentials expired.
        private var expired: [Item.ID] = []
        /// For each file whose credential was renewed: its stored bytes then, and how many renewals in a row found
        /// them unchanged.
        private var renewals: [Item.ID: (stored: Int64, count: Int)] = [:]
        /// Each listed file's place in ``items``: a file is looked up at once, however long the list.
        private var positions: [Item.ID: Int] = [:]
        /// Files uploading now.
        private var uploading = 0
        /// No file before this place in ``items`` is ready: ``schedule()`` looks on from here, so a long list is not
        /// walked again each time a file ends.
        private var readyFloor = 0

        /// An empty, stopped queue.
        init(maxConcurrentUploads: Int) {
            self.maxConcurrentUploads = maxConcurrentUploads
        }

        // MARK: Actions

        /// A file to set going.
        enum Start {
            /// Its engine upload stopped earlier: resume it.
            case resume(Item.ID, Upload)
            /// Start a run (ticket, engine upload, events) with this generation.
            case run(Item.ID, generation: Int)
        }

        /// How an uploading file is stopped.
        enum Halt {
            /// Pause its engine upload (its checkpoint stays).
            case pauseUpload(Item.ID, Upload)
            /// It has no engine upload yet: end its wait for credentials (its run is stale now).
            case endWaits(Item.ID)
        }

        /// What ``cancelFile(_:)`` asks for.
        enum CancelFileAction {
            /// It was waiting (ready or paused) and is cancelled now; set these going.
            case cancelled(starts: [Start])
            /// It was uploading and is cancelled now: stop it, then ``schedule()``.
            case halt(Halt)
            /// No such file, or it has ended (cancelled, succeeded, failed).
            case none
        }

        /// What ``delete(_:)`` removed.
        struct Deletion {
            /// The file, as it was.
            var item: Item
            /// Its engine upload, to cancel (the server's upload aborted, the checkpoint deleted); then ``schedule()``.
            var upload: Upload?
        }

        /// What taking over a run's new engine upload asks for.
        enum AttachAction {
            /// The queue holds it now; when `pause`, the file stopped meanwhile: pause it.
            case attached(pause: Bool)
            /// The run is stale: cancel the upload when the file was removed (`removed`), else pause it and drop it
            /// (its checkpoint serves the newer run).
            case stale(removed: Bool)
        }

        /// What the end of an engine upload asks for.
        enum FinishAction {
            /// The file is stored; report it (when it is still listed) and set `starts` going.
            case succeeded(Item?, starts: [Start])
            /// The upload was cancelled (the file was stopped); set `starts` going.
            case cancelled(starts: [Start])
            /// The file failed; report it (when it is still listed) and set `starts` going.
            case failed(Item?, starts: [Start])
        }

        // MARK: The list

        /// Looks up a file.
        func item(_ id: Item.ID) -> Item? { index(id).map { items[$0] } }

        /// Adds a file at the end of the list, ready; returns its id and what starts now.
        mutating func add(
            _ fileURL: URL, info: MediaInfo, kind: MediaKind, imageType: String = "default"
        ) -> (id: Item.ID, starts: [Start]) {
            let id = Item.ID(value: nextId)
            nextId += 1
            var item = Item(id: id, fileURL: fileURL.standardizedFileURL, kind: kind, info: info)
            item.imageType = imageType
            items.append(item)
            positions[id] = items.count - 1
            readyFloor = min(readyFloor, items.count - 1)
            return (id, schedule())
        }

        /// Removes a file, whatever its state: a run under way becomes stale, a wait for a credential ends. Nil when
        /// there is no such file.
        mutating func delete(_ id: Item.ID) -> Deletion? {
            guard let index = index(id) else { return nil }
            let item = items.remove(at: index)
            positions[id] = nil
            for later in index..<items.count { positions[items[later].id] = later }
            if item.state == .uploading { uploading -= 1 }
            if index < readyFloor { readyFloor -= 1 }
            generations[id, default: 0] += 1
            expired.removeAll { $0 == id }
            return Deletion(item: item, upload: uploads.removeValue(forKey: id))
        }

        /// Cancels a file that waits or uploads; a file that has ended stays as it is.
        mutating func cancelFile(_ id: Item.ID) -> CancelFileAction {
            guard let index = index(id) else { return .none }
            switch items[index].state {
            case .uploading:
                return .halt(halt(index, to: .cancelled))
            case .ready, .paused:
                set(index, .cancelled)
                return .cancelled(starts: schedule())
            case .cancelled, .succeeded, .failed:
                return .none
            }
        }

        /// Puts a cancelled, paused or failed file back in line and runs the queue. Nil (and nothing changes) for a
        /// file that is ready, uploading or stored, or not listed.
        mutating func resumeFile(_ id: Item.ID) -> [Start]? {
            guard let index = index(id), [.cancelled, .paused, .failed].contains(items[index].state) else { return nil }
            set(index, .ready)
            items[index].failureCode = nil
            items[index].failureMessage = nil
            isRunning = true
            return schedule()
        }

        // MARK: The queue

        /// Runs the queue: files that are ready start, up to ``maxConcurrentUploads`` at a time.
        mutating func start() -> [Start] {
            isRunning = true
            return schedule()
        }

        /// Stops the queue: uploading files are cancelled (their engine uploads paused, checkpoints kept); nothing
        /// more starts.
        mutating func stop() -> [Halt] {
            isRunning = false
            return items.indices.filter { items[$0].state == .uploading }.map { halt($0, to: .cancelled) }
        }

        /// Pauses the queue and the files uploading now.
        mutating func pause() -> [Halt] {
            isRunning = false
            return items.indices.filter { items[$0].state == .uploading }.map { halt($0, to: .paused) }
        }

        /// Runs a paused queue again: paused files are ready again, and start.
        mutating func resume() -> [Start] {
            for index in items.indices where items[index].state == .paused { set(index, .ready) }
            isRunning = true
            return schedule()
        }

        /// Starts files that are ready while fewer than ``maxConcurrentUploads`` upload; nothing when the queue does
        /// not run.
        mutating func schedule() -> [Start] {
            guard isRunning else { return [] }
            var starts: [Start] = []
            var index = readyFloor
            while index < items.count, uploading < maxConcurrentUploads {
                defer { index += 1 }
                guard items[index].state == .ready else { continue }
                set(index, .uploading)
                let id = items[index].id
                if let upload = uploads[id] {
                    starts.append(.resume(id, upload))
                } else {
                    generations[id, default: 0] += 1
                    starts.append(.run(id, generation: generations[id]!))
                }
            }
            // Every file before `index` was looked at and is not ready now.
            readyFloor = index
            return starts
        }

        // MARK: A file's run

        /// Whether run `generation` of a file is the current one and the file still uploads.
        func isCurrent(_ id: Item.ID, _ generation: Int) -> Bool {
            generations[id] == generation && item(id)?.state == .uploading
        }

        /// The run got the file's upload address: it is recorded on the item. Nil when the run is no longer current.
        mutating func record(_ ticket: MediaServiceClient.UploadTicket, for id: Item.ID, generation: Int) -> Item? {
            guard isCurrent(id, generation), let index = index(id) else { return nil }
            items[index].endpoint = ticket.address.endpoint
            items[index].bucket = ticket.address.bucket
            items[index].object = ticket.address.fileName
            if !ticket.id.isEmpty, items[index].kind == .video { items[index].videoId = ticket.id }
            if !ticket.id.isEmpty, items[index].kind == .image { items[index].imageId = ticket.id }
            if let url = ticket.imageURL { items[index].imageURL = url }
            return items[index]
        }

        /// The run found the file stored by an earlier one, whose last answer was lost, as video `videoId` (or image
        /// `imageId` at `imageURL`) at `object` (bucket, key): the file succeeds without an upload. Nil when the run is
        /// no longer current.
        mutating func storedEarlier(
            _ id: Item.ID, generation: Int, videoId: String?, imageId: String?, imageURL: String?,
            at object: (bucket: String, key: String), size: Int64
        ) -> (item: Item, starts: [Start])? {
            guard isCurrent(id, generation), let index = index(id) else { return nil }
            if let videoId { items[index].videoId = videoId }
            if let imageId { items[index].imageId = imageId }
            if let imageURL { items[index].imageURL = imageURL }
            items[index].bucket = object.bucket
            items[index].object = object.key
            succeed(index, size: size)
            return (items[index], schedule())
        }

        /// The item at `index` is stored whole, `size` bytes.
        private mutating func succeed(_ index: Int, size: Int64) {
            set(index, .succeeded)
            items[index].uploadedSize = size
            items[index].storedSize = size
            items[index].totalSize = size
        }

        /// The run made its engine upload: the queue takes it over, unless the run is no longer current.
        mutating func attach(_ upload: Upload, to id: Item.ID, generation: Int) -> AttachAction {
            guard generations[id] == generation, let item = item(id) else { return .stale(removed: item(id) == nil) }
            uploads[id] = upload
            return .attached(pause: item.state != .uploading)
        }

        /// The engine upload reported progress; returns the updated file, nil when it is not listed. The bytes sent
        /// never go back for the same file: a run resumed after a failure starts at what was stored, below what the
        /// failed run had sent, and counts on from the larger.
        mutating func progressed(_ id: Item.ID, sent: Int64, stored: Int64, of total: Int64) -> Item? {
            guard let index = index(id) else { return nil }
            let was = items[index]
            let before = was.totalSize == total ? was.uploadedSize : 0
            items[index].uploadedSize = min(max(before, sent), total)
            items[index].storedSize = stored
            items[index].totalSize = total
            let now = items[index]
            // Nothing to tell when nothing changed (a resumed run's bytes sent again, up to what was sent before).
            guard (now.uploadedSize, now.storedSize, now.totalSize) != (was.uploadedSize, was.storedSize, was.totalSize)
            else { return nil }
            return now
        }

        /// The engine upload began, with this multipart upload id.
        mutating func uploadStarted(_ id: Item.ID, uploadId: String?) {
            guard let index = index(id) else { return }
            items[index].uploadId = uploadId
        }

        /// A run failed before its engine upload existed: the file fails, unless the run is no longer current.
        mutating func runFailed(_ id: Item.ID, generation: Int, _ error: FerryError) -> (item: Item?, starts: [Start])? {
            guard isCurrent(id, generation) else { return nil }
            return fail(id, error)
        }

        /// The file's engine upload ended. Nil when `upload` is not the file's upload any more (the file was removed,
        /// or its run replaced).
        mutating func finish(_ id: Item.ID, upload: Upload, _ outcome: Result<UploadResult, FerryError>) -> FinishAction? {
            guard let current = uploads[id], current === upload else { return nil }
            uploads[id] = nil
            switch outcome {
            case .success(let result):
                var stored: Item?
                if let index = index(id) {
                    succeed(index, size: result.size)
                    stored = items[index]
                }
                return .succeeded(stored, starts: schedule())
            case .failure(let error) where error.code == .cancelled:
                if let index = index(id), items[index].state == .uploading { set(index, .cancelled) }
                return .cancelled(starts: schedule())
            case .failure(let error):
                let (item, starts) = fail(id, error)
                return .failed(item, starts: starts)
            }
        }

        /// The file fails with `error`'s server code (or its code's name) and message; returns it (nil when it is not
        /// listed) and what starts now.
        mutating func fail(_ id: Item.ID, _ error: FerryError) -> (item: Item?, starts: [Start]) {
            var failed: Item?
            if let index = index(id) {
                set(index, .failed)
                items[index].failureCode = error.serverCode ?? error.code.description
                items[index].failureMessage = error.message
                failed = items[index]
            }
            return (failed, schedule())
        }

        // MARK: Expired credentials

        /// The file's engine upload, when the file uploads and has one (only then can its credential be renewed or
        /// handed over).
        func uploadingUpload(_ id: Item.ID) -> Upload? {
            guard item(id)?.state == .uploading else { return nil }
            return uploads[id]
        }

        /// The file's engine upload paused on an expired credential that could not be renewed: it waits for
        /// `resume(with…)`. Returns the file, nil when it does not upload or has no engine upload.
        mutating func credentialExpired(_ id: Item.ID) -> Item? {
            guard uploadingUpload(id) != nil, let item = item(id) else { return nil }
            if !expired.contains(id) { expired.append(id) }
            return item
        }

        /// The file's credential cannot be renewed for good (its video or image is gone, or its upload expired):
        /// it fails with `error`, and its engine upload is taken from it (to cancel: a new run starts afresh). Nil when
        /// it does not upload or has no engine upload.
        mutating func renewalRefused(
            _ id: Item.ID, _ error: FerryError
        ) -> (item: Item?, upload: Upload, starts: [Start])? {
            guard let upload = uploadingUpload(id) else { return nil }
            uploads[id] = nil
            expired.removeAll { $0 == id }
            let (item, starts) = fail(id, error)
            return (item, upload, starts)
        }

        /// One file waiting for a credential of its own (a media upload's `UploadAuth`), which waits no more (its
        /// renewals are counted afresh): `id`, or without one the file that has waited longest; nil when it does not
        /// wait.
        mutating func takeExpired(_ id: Item.ID?) -> Item.ID? {
            let named = id.map { expired.contains($0) ? $0 : nil }
            guard let taken = named ?? expired.first else { return nil }
            expired.removeAll { $0 == taken }
            renewals[taken] = nil
            return taken
        }

        /// The files waiting for a credential, which wait no more (their renewals are counted afresh).
        mutating func takeExpired() -> [Item.ID] {
            defer { expired = [] }
            let taken = items.map(\.id).filter { expired.contains($0) }
            for id in taken { renewals[id] = nil }
            return taken
        }

        /// The file's engine upload paused on an expired credential: whether the queue may renew it once more. False
        /// once `limit` renewed credentials in a row were refused with no byte stored in between: the service refuses
        /// fresh ones too, and renewing again would go on for ever. The count starts afresh when bytes are stored, and
        /// after the app's own credential (``takeExpired()``).
        mutating func mayRenew(_ id: Item.ID, limit: Int) -> Bool {
            guard let item = item(id) else { return false }
            let count = renewals[id].map { $0.stored == item.storedSize ? $0.count + 1 : 1 } ?? 1
            renewals[id] = (item.storedSize, count)
            return count <= limit
        }

        /// Every engine upload the queue holds.
        var allUploads: [Upload] { Array(uploads.values) }

        // MARK: Inside

        private func index(_ id: Item.ID) -> Int? { positions[id] }

        /// Moves the file at `index` to `state`, keeping count of the files uploading and of where a ready one may be.
        private mutating func set(_ index: Int, _ state: Item.State) {
            if items[index].state == .uploading { uploading -= 1 }
            if state == .uploading { uploading += 1 }
            if state == .ready { readyFloor = min(readyFloor, index) }
            items[index].state = state
        }

        /// Moves an uploading file to `state` and says how to stop it.
        private mutating func halt(_ index: Int, to state: Item.State) -> Halt {
            let id = items[index].id
            set(index, state)
            expired.removeAll { $0 == id }
            if let upload = uploads[id] { return .pauseUpload(id, upload) }
            generations[id, default: 0] += 1
            return .endWaits(id)
        }
    }
}

extension UploadQueue.StateMachine: Sendable where Upload: Sendable {}
