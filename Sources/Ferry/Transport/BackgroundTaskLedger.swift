import FerryCore
import Foundation

/// The spool directory's record of a ``BackgroundURLSessionTransport``'s upload tasks, kept in `ledger.json` through
/// ``JSONRecordFiles`` (temporary file, fsync, rename): which spool file each started task uploads from, and the
/// answers of tasks that completed while no one in this process awaited them (the app was suspended or relaunched).
///
/// A task is known by its request key (method, a space, the URL), which is also its `taskDescription`. Nothing of the
/// request but that key is stored: no headers, so no `Authorization`, signature or session token; of an answer, the
/// status, the response headers and the (small) body.
///
/// `@unchecked Sendable`: `entries` is read and written only while holding `lock`, and the file is written while
/// holding it too, so the file always holds the latest state and writes never interleave.
final class BackgroundTaskLedger: @unchecked Sendable {
    /// A response header.
    struct Header: Codable, Sendable, Equatable {
        var name: String
        var value: String
    }

    /// What the server answered a task no one awaited.
    struct Answer: Codable, Sendable, Equatable {
        var status: Int
        var headers: [Header]
        var body: Data

        /// The answer as a transport response.
        var response: TransportResponse {
            TransportResponse(status: status, headers: headers.map { ($0.name, $0.value) }, body: [UInt8](body))
        }
    }

    /// One task: running (``spoolFile`` set, no ``answer``) or completed with an answer to hand out.
    struct Entry: Codable, Sendable, Equatable {
        /// The request key: method, a space, the URL.
        var key: String
        /// The name (in the spool directory) of the file the task uploads from, while it runs.
        var spoolFile: String?
        /// The answer, once the task completed with no one awaiting it.
        var answer: Answer?
        /// When the entry was written.
        var date: Date

        var isRunning: Bool { answer == nil }
    }

    /// The file's content.
    struct Record: Codable, Sendable {
        var version = 1
        var entries: [Entry]
    }

    /// The ledger's file name in the spool directory.
    static let fileName = "ledger.json"
    /// The suffix of spool files, the only files in the spool directory the transport deletes (with its own
    /// temporary ledger files).
    static let spoolSuffix = ".body"

    /// The spool directory.
    let directory: URL
    private let files: JSONRecordFiles
    private let lock = NSLock()
    private var entries: [Entry]

    /// Reads the ledger in `directory` (none, or one that does not decode, is an empty ledger).
    init(directory: URL) {
        self.directory = directory
        files = JSONRecordFiles(directory: directory)
        entries = files.read(Record.self, name: Self.fileName)?.entries ?? []
    }

    /// The entries, in the order they were written.
    var snapshot: [Entry] { lock.withLock { entries } }

    /// Records that a task for `key` is about to upload from `spoolFile`; durable before the task starts, so that a
    /// process relaunched while the task runs knows which file to delete when it completes.
    func begin(key: String, spoolFile: String) throws {
        try lock.withLock {
            entries.append(Entry(key: key, spoolFile: spoolFile, answer: nil, date: Date()))
            do {
                try save()
            } catch {
                entries.removeLast()
                throw error
            }
        }
    }

    /// A task completed: its running entry goes (the one for `spoolFile` when known, else the first for `key`), and
    /// `answer`, when given, is kept under `key` (replacing an older one). Returns the spool file to delete.
    ///
    /// Failing to write the ledger here is not an error: an answer that is not kept only means the part is sent again.
    func finish(key: String, spoolFile: String?, answer: Answer?) -> String? {
        lock.withLock {
            var file = spoolFile
            let index =
                if let spoolFile {
                    entries.firstIndex { $0.isRunning && $0.spoolFile == spoolFile }
                } else {
                    entries.firstIndex { $0.isRunning && $0.key == key }
                }
            if let index {
                file = file ?? entries[index].spoolFile
                entries.remove(at: index)
            }
            if let answer {
                entries.removeAll { !$0.isRunning && $0.key == key }
                entries.append(Entry(key: key, spoolFile: nil, answer: answer, date: Date()))
            }
            if index != nil || answer != nil { try? save() }
            return file
        }
    }

    /// Removes and returns the kept answer for `key`, if there is one.
    func takeAnswer(key: String) -> Answer? {
        lock.withLock {
            guard let index = entries.firstIndex(where: { !$0.isRunning && $0.key == key }) else { return nil }
            let answer = entries.remove(at: index).answer
            try? save()
            return answer
        }
    }

    /// The spool file of the running entry for `key`, if there is one.
    func spoolFile(forRunning key: String) -> String? {
        lock.withLock { entries.first { $0.isRunning && $0.key == key }?.spoolFile }
    }

    /// Removes the running entries whose key is not in `keys` (their tasks are gone) and returns their spool files.
    func removeRunning(except keys: Set<String>) -> [String] {
        lock.withLock {
            let stale = entries.filter { $0.isRunning && !keys.contains($0.key) }
            guard !stale.isEmpty else { return [] }
            entries.removeAll { $0.isRunning && !keys.contains($0.key) }
            try? save()
            return stale.compactMap(\.spoolFile)
        }
    }

    /// Removes answers written before `date` (their uploads were given up).
    func removeAnswers(before date: Date) {
        lock.withLock {
            let count = entries.count
            entries.removeAll { !$0.isRunning && $0.date < date }
            if entries.count != count { try? save() }
        }
    }

    /// Deletes the spool files and temporary ledger files in the directory that no entry names.
    func removeUnreferencedFiles() {
        let referenced = lock.withLock { Set(entries.compactMap(\.spoolFile)) }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names {
            let isSpool = name.hasSuffix(Self.spoolSuffix) && !referenced.contains(name)
            let isTemporary = name.hasPrefix(".\(Self.fileName).") && name.hasSuffix(".tmp")
            if isSpool || isTemporary { removeFile(name) }
        }
    }

    /// Deletes the spool file `name`, if it is there.
    func removeFile(_ name: String) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
    }

    /// Writes the entries (or removes the file when there are none). Called while holding `lock`.
    private func save() throws {
        if entries.isEmpty {
            files.remove(Self.fileName)
        } else {
            try files.write(Record(entries: entries), name: Self.fileName, what: "background upload ledger")
        }
    }
}
