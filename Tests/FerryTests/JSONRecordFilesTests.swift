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
