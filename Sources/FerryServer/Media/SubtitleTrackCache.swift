import FerryMedia
import NIOConcurrencyHelpers

/// Subtitle tracks read and parsed for their segments, kept by stored object (its key and ETag), so that the players
/// of a video asking for its segments at once read and parse its track once rather than once per request (a track of
/// 20,000 cues takes a core for a while). Requests that come while a track is being read wait for that reading. At
/// most ``capacity`` tracks are kept, the least recently used going first; a track stored anew has another ETag and
/// is read again; a reading that fails is not kept.
final class SubtitleTrackCache: Sendable {
    /// Tracks kept at once.
    static let capacity = 32

    private struct Entry {
        var reading: Task<WebVTT, any Error>
        var used: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var clock: UInt64 = 0
    }

    private let state = NIOLockedValueBox(State())

    /// The track stored at `key` with `etag`: kept, being read, or read now with `read`.
    func track(key: String, etag: String, read: @escaping @Sendable () async throws -> WebVTT) async throws -> WebVTT {
        let name = key + "\n" + etag
        let reading = state.withLockedValue { state -> Task<WebVTT, any Error> in
            state.clock += 1
            if var entry = state.entries[name] {
                entry.used = state.clock
                state.entries[name] = entry
                return entry.reading
            }
            let reading = Task { try await read() }
            state.entries[name] = Entry(reading: reading, used: state.clock)
            if state.entries.count > Self.capacity,
                let oldest = state.entries.min(by: { $0.value.used < $1.value.used })?.key
            {
                state.entries[oldest] = nil
            }
            return reading
        }
        do {
            return try await reading.value
        } catch {
            state.withLockedValue { state in
                if state.entries[name]?.reading == reading { state.entries[name] = nil }
            }
            throw error
        }
    }
}
