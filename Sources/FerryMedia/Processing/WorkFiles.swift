import FerryCore
import FerryStorage
import Foundation
import NIOCore

/// Moves bytes between the object store and a job's working directory, streamed in bounded chunks.
package enum WorkFiles {
    /// Chunk size for files read into the store.
    static let chunkSize = 1 << 20

    /// Writes the bytes of the objects `lookups` find, one after another, to `path` (created, or replaced); each is
    /// looked up when its turn comes (`[{ object }]` for one object already looked up).
    static func download(
        _ lookups: [() async throws -> ObjectInfo], from store: some ObjectStore, to path: String
    ) async throws {
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw WorkFileError(path: path, action: "create") }
        defer { try? handle.close() }
        for lookup in lookups {
            for try await buffer in try await store.readObject(try await lookup(), range: nil) {
                try Task.checkCancellation()
                try buffer.withUnsafeReadableBytes { try handle.write(contentsOf: $0) }
            }
        }
    }

    /// Stores the file at `path` as bucket/key.
    @discardableResult
    static func upload(_ path: String, to store: some ObjectStore, bucket: String, key: String, contentType: String)
        async throws -> ObjectInfo
    {
        try await store.putObject(
            bucket: bucket, key: key, attributes: ObjectAttributes(contentType: contentType), tags: [],
            body: FileChunks(path: path, chunkSize: chunkSize), checksums: [], condition: .none, verify: { _ in })
    }

    /// Deletes every object under `prefix` in `bucket` except those under `keeping` (a prefix too), and with
    /// `storedBefore`, only those stored before then.
    static func deleteObjects(
        in store: some ObjectStore, bucket: String, prefix: String, keeping: String? = nil, storedBefore: Date? = nil
    ) async throws {
        var after: String?
        while true {
            let page = try await store.listObjects(
                bucket: bucket, prefix: prefix, delimiter: nil, startAfter: after, maxKeys: 1000)
            for object in page.objects
            where keeping.map({ !object.key.hasPrefix($0) }) ?? true && storedBefore.map({ object.lastModified < $0 }) ?? true {
                try await store.deleteObject(bucket: bucket, key: object.key, condition: .none)
            }
            guard page.isTruncated, let last = page.objects.last?.key else { return }
            after = last
        }
    }

    /// The size of a file, or of every file under a directory.
    static func size(of path: String) -> Int64 {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else { return 0 }
        if !isDirectory.boolValue {
            return ((try? manager.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
        }
        return (manager.subpaths(atPath: path) ?? []).reduce(0) { $0 + size(of: path + "/" + $1) }
    }

    /// Files under a directory, as paths relative to it, sorted.
    static func files(under directory: String) -> [String] {
        let manager = FileManager.default
        return (manager.subpaths(atPath: directory) ?? []).filter {
            var isDirectory: ObjCBool = false
            return manager.fileExists(atPath: directory + "/" + $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }.sorted()
    }

    /// `files` in the order they are stored: every file before the playlists, storyboard cues and manifests that name
    /// it, so that a player never finds a stored playlist naming a file not yet stored (a ladder is stored under the
    /// prefix its first stream plays from, before it is published). Media files first, then each rendition's
    /// playlist (`LD/index.m3u8`) and the storyboard's cues, then a definition's master playlist (`LD.m3u8`), then
    /// `master.m3u8` and `manifest.mpd`; by name within each.
    static func storeOrder(_ files: [String]) -> [String] {
        func rank(_ file: String) -> Int {
            if file == "master.m3u8" || file == DashManifest.fileName { return 3 }
            if file.hasSuffix(".m3u8") { return file.contains("/") ? 1 : 2 }
            return file.hasSuffix(".vtt") && !file.contains("/") ? 1 : 0
        }
        return files.sorted { (rank($0), $0) < (rank($1), $1) }
    }

    /// The Content-Type a published media file is served with.
    package static func contentType(forPath path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "m3u8": return "application/vnd.apple.mpegurl"
        case "mpd": return "application/dash+xml"
        case "m4s": return "video/iso.segment"
        case "mp4": return "video/mp4"
        case "m4a": return "audio/mp4"
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "webp": return "image/webp"
        case "gif": return "image/gif"
        case "vtt": return "text/vtt; charset=utf-8"
        default: return "application/octet-stream"
        }
    }
}

/// A file system operation on a job's files failed.
struct WorkFileError: Error, CustomStringConvertible {
    var path: String
    var action: String
    var description: String { "cannot \(action) \((path as NSString).lastPathComponent)" }
}

/// A file's bytes as a sequence of buffers, read as they are consumed.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let path: String
    let chunkSize: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle?
        let chunkSize: Int

        mutating func next() async throws -> ByteBuffer? {
            guard let handle else { throw WorkFileError(path: "", action: "read") }
            try Task.checkCancellation()
            guard let data = try handle.read(upToCount: chunkSize), !data.isEmpty else {
                try? handle.close()
                return nil
            }
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(handle: FileHandle(forReadingAtPath: path), chunkSize: chunkSize)
    }
}
