import FerryCore
import Foundation
import Testing

@testable import Ferry

@Suite("JSON records on disk: checkpoints, publish records and the media journal share one writer", .timeLimit(.minutes(10)))
struct JSONRecordFilesTests {
    struct Record: Codable, Equatable {
        var name: String
        var at: Date
    }

    @Test("the media upload journal keeps the time an upload began when the upload is recorded again (continued), so its age counts from that time; another video's entry starts afresh")
    func journalKeepsItsStart() throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("ferry-journal-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("clip.mp4")
        try Data(repeating: 1, count: 1000).write(to: file)
        let journal = MediaUploadJournal(directory: directory.appendingPathComponent("records"), maxAge: 3600)
        try journal.record(file, id: "v1", bucket: "b", key: "k")
        // The entry is two hours old by now: past the journal's hour, it is no longer continued.
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: journal.directory.path).first { $0.hasSuffix(".json") })
        let url = journal.directory.appendingPathComponent(name)
        var entry = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        entry["createdAt"] = try #require(entry["createdAt"] as? Double) - 7200
        try JSONSerialization.data(withJSONObject: entry).write(to: url)
        #expect(journal.lookup(file) == nil)
        // Recorded again for the same video (a run that continued it): still two hours old.
        try journal.record(file, id: "v1", bucket: "b", key: "k")
        #expect(journal.lookup(file) == nil && journal.abandoned(file)?.id == "v1")
        // Another video for the file starts afresh.
        try journal.record(file, id: "v2", bucket: "b", key: "k")
        #expect(journal.lookup(file)?.id == "v2")
    }

    @Test("a record round-trips, is private to the user, leaves no temporary file, and an unreadable one is no record")
    func roundTrip() throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("ferry-records-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = JSONRecordFiles(directory: directory.appendingPathComponent("nested"))
        let record = Record(name: "first", at: Date(timeIntervalSince1970: 1_800_000_000))
        try files.write(record, name: "a.json", what: "record")
        #expect(files.read(Record.self, name: "a.json") == record)
        let attributes = try FileManager.default.attributesOfItem(atPath: files.url("a.json").path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // Dates are seconds since 1970 in the file.
        #expect(String(decoding: try Data(contentsOf: files.url("a.json")), as: UTF8.self).contains("1800000000"))
        try files.write(Record(name: "second", at: record.at), name: "a.json", what: "record")
        #expect(files.read(Record.self, name: "a.json")?.name == "second")
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.directory.path) == ["a.json"])

        try Data("{not json".utf8).write(to: files.url("b.json"))
        #expect(files.read(Record.self, name: "b.json") == nil)
        #expect(files.read(Record.self, name: "missing.json") == nil)
        files.remove("a.json")
        #expect(files.read(Record.self, name: "a.json") == nil)

        // Temporary files a killed process left go with the next write of any record once a minute old (a write
        // under way takes milliseconds), and with the removal of their own record whatever their age.
        func leftover(_ name: String, age: TimeInterval) throws -> String {
            let path = files.url(".\(name).\(UUID().uuidString).tmp").path
            try Data("{".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: path)
            return (path as NSString).lastPathComponent
        }
        let stale = try leftover("c.json", age: 3600)
        let fresh = try leftover("c.json", age: 0)
        let other = try leftover("d.json", age: 3600)
        let otherFresh = try leftover("d.json", age: 0)
        try files.write(record, name: "c.json", what: "record")
        var names = Set(try FileManager.default.contentsOfDirectory(atPath: files.directory.path))
        #expect(!names.contains(stale) && names.contains(fresh), "\(names)")
        #expect(!names.contains(other) && names.contains(otherFresh), "another record's old temporary was kept: \(names)")
        files.remove("c.json")
        names = Set(try FileManager.default.contentsOfDirectory(atPath: files.directory.path))
        #expect(!names.contains(fresh) && !names.contains("c.json") && names.contains(otherFresh), "\(names)")

        // A directory that cannot be written is a clear error, not a crash.
        let blocked = JSONRecordFiles(directory: files.url("b.json").appendingPathComponent("below"))
        #expect(throws: (any Error).self) { try blocked.write(record, name: "c.json", what: "record") }
    }
}
