import NIOConcurrencyHelpers

/// The blobs being read right now, so that an overwrite or delete does not cut a download off: S3 serves the version
/// a GET started with to its end. A deleted blob that is leased stays on disk until its last lease is released.
///
/// Readers take the lease before they confirm in the catalog that the object still uses those blobs; a writer
/// deletes the blobs it replaced only after its catalog change. So a blob a reader confirmed is either leased when
/// the writer deletes it (and deletion waits), or the reader saw the change and starts over.
final class BlobLeases: Sendable {
    private struct State {
        var readers: [String: Int] = [:]
        var deleted: Set<String> = []
    }
    private let state = NIOLockedValueBox(State())

    /// Counts a reader of each blob.
    func acquire(_ blobs: [String]) {
        state.withLockedValue { state in
            for blob in blobs { state.readers[blob, default: 0] += 1 }
        }
    }

    /// Drops a reader of each blob; returns the blobs whose deletion was waiting for it.
    func release(_ blobs: [String]) -> [String] {
        state.withLockedValue { state in
            var ready: [String] = []
            for blob in blobs {
                guard let count = state.readers[blob] else { continue }
                if count > 1 {
                    state.readers[blob] = count - 1
                } else {
                    state.readers[blob] = nil
                    if state.deleted.remove(blob) != nil { ready.append(blob) }
                }
            }
            return ready
        }
    }

    /// Marks blobs deleted; returns those no one reads (delete them now). The others go when released.
    func delete(_ blobs: [String]) -> [String] {
        state.withLockedValue { state in
            blobs.filter { blob in
                guard state.readers[blob] == nil else {
                    state.deleted.insert(blob)
                    return false
                }
                return true
            }
        }
    }

    /// Whether a blob has readers.
    func isLeased(_ blob: String) -> Bool { state.withLockedValue { $0.readers[blob] != nil } }

    /// The blobs that have readers.
    var leasedBlobs: [String] { state.withLockedValue { Array($0.readers.keys) } }

    /// How many blobs have readers (for tests).
    var leasedCount: Int { state.withLockedValue { $0.readers.count } }
}
