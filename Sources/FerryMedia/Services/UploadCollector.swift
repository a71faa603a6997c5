import FerryStorage
import Foundation
import Logging
import ServiceLifecycle

/// Aborts multipart uploads idle longer than the configured age and deletes files nothing references, periodically,
/// until the service group shuts down: the catalog's queue of blobs to delete every ``deletionInterval``, the
/// buckets' lifecycle rules every ``lifecycleInterval``, what is past its age also every ``expiryInterval`` when set,
/// the rest every `interval`.
package struct UploadCollector: Service {
    let store: any CollectableObjectStore
    let maxAge: TimeInterval
    let interval: TimeInterval
    let logger: Logger
    /// Expires videos whose upload never completed, and advances videos and images whose file was stored unheard.
    var media: MediaLibrary?
    /// Nodes sharing a catalog collect one at a time: the one holding this lease for the pass.
    var leases: (any ServiceLeaseStore)?
    /// This node's name in leases.
    var node = "local"
    /// How often the queue of blobs to delete (``CatalogObjectStore/retire(_:)``) is looked at. Default 30 s.
    var deletionInterval: Duration = .seconds(30)
    /// How often the buckets' lifecycle rules are applied. Default 10 minutes.
    var lifecycleInterval: Duration = .seconds(600)
    /// Seconds per lifecycle day, to see rules apply in seconds; nil (the default) counts days as S3 does.
    var lifecycleDayLength: TimeInterval?
    /// How often what is past its age (multipart and resumable uploads, videos and images still uploading) is also
    /// looked for on its own (``expireOnce(now:)``), when a short age wants that more often than `interval`; nil: only
    /// with the rest. The rest (orphaned files above all, whose grace a shared store counts in passes an `interval`
    /// apart) keeps `interval`.
    var expiryInterval: Duration?

    /// Creates the collector.
    package init(
        store: any CollectableObjectStore, maxAge: TimeInterval, interval: TimeInterval, logger: Logger,
        media: MediaLibrary? = nil, leases: (any ServiceLeaseStore)? = nil, node: String = "local",
        deletionInterval: Duration = .seconds(30), lifecycleInterval: Duration = .seconds(600),
        lifecycleDayLength: TimeInterval? = nil, expiryInterval: Duration? = nil
    ) {
        self.store = store
        self.maxAge = maxAge
        self.interval = interval
        self.logger = logger
        self.media = media
        self.leases = leases
        self.node = node
        self.deletionInterval = deletionInterval
        self.lifecycleInterval = lifecycleInterval
        self.lifecycleDayLength = lifecycleDayLength
        self.expiryInterval = expiryInterval
    }

    /// How long a completed upload is remembered, so a retried CompleteMultipartUpload gets the same answer.
    static let completedUploadMemory: TimeInterval = 24 * 3600

    package func run() async throws {
        var passes: [(Duration, @Sendable () async -> Void)] = [
            (.seconds(interval), { await collectOnce() }),
            (deletionInterval, { await deleteQueuedBlobs() }),
            // A pass of its own: a long or stuck deletion pass does not hold it up.
            (deletionInterval, { await holdReadBlobs() }),
            (lifecycleInterval, { await applyLifecycle(settledOnly: true) }),
        ]
        if let expiryInterval { passes.append((expiryInterval, { await expireOnce() })) }
        await withDiscardingTaskGroup { group in
            for (wait, pass) in passes {
                group.addTask {
                    while !Task.isCancelled && !Task.isShuttingDownGracefully {
                        await pass()
                        // Graceful shutdown ends the wait at once.
                        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
                    }
                }
            }
        }
        await releaseLifecycleLease()
    }

    /// Gives the lifecycle lease back when the collector ends (the passes have ended: none is under way), so that
    /// another node applies the rules from its next pass instead of after two intervals (the collector's other leases
    /// are given back after each pass). A process killed keeps it until it runs out.
    private func releaseLifecycleLease() async {
        guard let leases else { return }
        let (name, node) = (Self.lifecycleLeaseName, self.node)
        do {
            try await whileIgnoringCancellation { try await leases.releaseLease(name, owner: node) }
        } catch {
            logger.warning("lifecycle lease not released", metadata: ["error": .string(String(describing: error))])
        }
    }

    /// Keeps the queued blobs this node's downloads still stream from other nodes' deletion passes for another grace
    /// period from `now`.
    func holdReadBlobs(now: Date = Date()) async {
        do {
            try await store.holdReadBlobs(now: now)
        } catch {
            logger.warning("queued blobs read here not held", metadata: ["error": .string(String(describing: error))])
        }
    }

    /// Deletes the queued blobs that are due, a batch at a time; returns how many went.
    @discardableResult
    func deleteQueuedBlobs(now: Date = Date()) async -> Int {
        let batch = 1000
        var deleted = 0
        do {
            while !Task.isCancelled {
                let count = try await store.deleteQueuedBlobs(now: now, limit: batch)
                deleted += count
                if count < batch { break }
            }
        } catch {
            logger.warning("queued blob deletions failed", metadata: ["error": .string(String(describing: error))])
        }
        if deleted > 0 { logger.debug("deleted queued blobs", metadata: ["ferry.files-deleted": "\(deleted)"]) }
        return deleted
    }

    /// Applies the buckets' lifecycle rules once, on the node holding the lifecycle lease (every node whose store is
    /// its own). With `settledOnly` (the periodic passes), a configuration takes effect from the second pass that
    /// reads it; a node that does not hold the lease forgets what it read, as it no longer follows the changes.
    @discardableResult
    func applyLifecycle(now: Date = Date(), settledOnly: Bool = false) async -> LifecycleOutcome {
        do {
            // Two intervals: the next pass renews it before it runs out, so the lease (and what this node read) stays
            // here while the node passes.
            let held = try await holdLease(Self.lifecycleLeaseName, now, for: lifecycleInterval * 2)
            guard held || !store.isShared else {
                store.forgetLifecycleReadings()
                return LifecycleOutcome()
            }
            let outcome = try await store.applyLifecycle(
                now: now, dayLength: lifecycleDayLength, skipping: Set([media?.bucket].compactMap { $0 }),
                settledOnly: settledOnly)
            if outcome != LifecycleOutcome() {
                logger.debug(
                    "lifecycle rules applied",
                    metadata: [
                        "ferry.objects-expired": "\(outcome.expiredObjects)",
                        "ferry.uploads-aborted": "\(outcome.abortedUploads)",
                    ])
            }
            // The lease runs out by itself when a pass is quicker than the next node's look.
            return outcome
        } catch {
            logger.warning("lifecycle pass failed", metadata: ["error": .string(String(describing: error))])
            store.forgetLifecycleReadings()
            return LifecycleOutcome()
        }
    }

    /// One pass; returns the number of uploads aborted.
    @discardableResult
    func collectOnce(now: Date = Date()) async -> Int {
        // Nodes sharing a catalog take turns: the one holding the lease expires videos and, when the objects are
        // shared too, collects them. The store on this node's own disk is this node's to collect every time.
        await leased(Self.leaseName, now: now) { leased in await collect(now: now, leased: leased) }
    }

    /// Expires what is past its age once, on the node holding the expiry lease (every node whose store is its own):
    /// the steps of a pass that a short age wants more often than the rest (``expiryInterval``). Returns the number
    /// of uploads aborted.
    @discardableResult
    func expireOnce(now: Date = Date()) async -> Int {
        await leased(Self.expiryLeaseName, now: now) { leased in
            do {
                return try await expire(now: now, leased: leased)
            } catch {
                logger.warning("expiry failed", metadata: ["error": .string(String(describing: error))])
                return 0
            }
        }
    }

    /// Runs `pass` with whether this node holds the lease `name` (taken for it, and given back after); 0 when the
    /// lease cannot be read.
    private func leased(_ name: String, now: Date, _ pass: (Bool) async -> Int) async -> Int {
        let leased: Bool
        do {
            leased = try await holdLease(name, now)
        } catch {
            logger.warning("collection failed", metadata: ["error": .string(String(describing: error))])
            return 0
        }
        let result = await pass(leased)
        if leased, let leases {
            do {
                try await leases.releaseLease(name, owner: node)
            } catch {
                // It runs out by itself; another node collects then.
                logger.warning("collector lease not released", metadata: ["error": .string(String(describing: error))])
            }
        }
        return result
    }

    /// Aborts the multipart and resumable uploads past their age and expires the videos and images still uploading
    /// past theirs; returns the number of uploads aborted.
    private func expire(now: Date, leased: Bool) async throws -> Int {
        var aborted = 0
        if leased || !store.isShared {
            let expired = try await store.expireResumableUploads(now: now)
            if expired > 0 { logger.debug("expired resumable uploads", metadata: ["ferry.uploads": "\(expired)"]) }
            aborted = try await store.abortMultipartUploads(initiatedBefore: now.addingTimeInterval(-maxAge))
            if aborted > 0 {
                logger.debug("aborted idle multipart uploads", metadata: ["ferry.uploads-aborted": "\(aborted)"])
            }
        }
        if let media, leased {
            let expired = try await media.expireUnfinishedUploads(now: now)
            if expired > 0 {
                logger.debug("expired unfinished media uploads", metadata: ["ferry.uploads": "\(expired)"])
            }
        }
        return aborted
    }

    private func collect(now: Date, leased: Bool) async -> Int {
        do {
            var aborted = try await expire(now: now, leased: leased)
            if leased || !store.isShared {
                // An hour is far longer than a resumable upload's creation or concatenation takes.
                aborted += try await store.abortUnclaimedResumableUploads(initiatedBefore: now.addingTimeInterval(-3600))
                let orphans = try await store.collectOrphanBlobs(olderThan: 3600)
                _ = try await store.forgetCompletedUploads(before: now.addingTimeInterval(-Self.completedUploadMemory))
                if aborted > 0 || orphans > 0 {
                    logger.debug("collected", metadata: ["ferry.uploads-aborted": "\(aborted)", "ferry.files-deleted": "\(orphans)"])
                }
            }
            if let media, leased {
                let advanced = try await media.advanceStoredUploads(now: now)
                if advanced > 0 {
                    logger.info("advanced uploads whose stored file was not recorded", metadata: ["ferry.uploads": "\(advanced)"])
                }
            }
            return aborted
        } catch {
            logger.warning("collection failed", metadata: ["error": .string(String(describing: error))])
            return 0
        }
    }

    /// The lease that lets one node collect.
    static let leaseName = "collector"
    /// The lease that lets one node expire what is past its age between passes (``expiryInterval``).
    static let expiryLeaseName = "collector-expiry"
    /// The lease that lets one node apply lifecycle rules.
    static let lifecycleLeaseName = "lifecycle"

    /// Takes or renews the lease `name` for `duration` from `now`; whether this node holds it.
    private func holdLease(_ name: String, _ now: Date, for duration: Duration = .seconds(600)) async throws -> Bool {
        guard let leases else { return true }
        return try await leases.acquireLease(name, owner: node, duration: duration, now: now)
    }
}
