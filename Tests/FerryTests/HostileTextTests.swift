import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Text a service controls (titles, ids, error codes and messages) reaches the user's terminal through `ferry`; a
/// hostile or broken service must not be able to send escapes that redraw the screen or forge lines, nor megabytes.
@Suite("ferry command line: text the service controls", .serialized, .timeLimit(.minutes(5)))
struct HostileTextTests {
    /// An OSC title change, a screen clear, a C1 CSI and a right-to-left override.
    static let escapes = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}4pm.exe"

    static let credentials = ["FERRY_ACCESS_KEY_ID": "AKIAHOSTILETEXT", "FERRY_SECRET_ACCESS_KEY": "hostile-text-secret-0123456789abcdefghij"]

    /// Scalars a terminal acts on: C0 controls but the newline and the tab, DEL, C1 controls and bidirectional
    /// formatting characters.
    static func actedOn(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { scalar in
            switch scalar.value {
            case 0x0A, 0x09: false
            case 0x00...0x1F, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
            default: false
            }
        }
    }

    static func answer(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    @Test("a video's title, id and error from the service are printed with their escapes made visible, one line each, and cut when huge")
    func videoInfo() async throws {
        let longId = String(repeating: "v", count: 100_000)
        let video: [String: Any] = [
            "VideoId": longId, "Title": Self.escapes + "\nUploaded ferry-media/forged (1 bytes)", "Status": "TranscodeFail",
            "ErrorCode": Self.escapes, "ErrorMessage": "bad input\r\nVideoId: forged",
        ]
        let body = try Self.answer(["RequestId": "r-1", "Video": video])
        try await HTTPReceiver.with(answer: body) { receiver in
            let run = try await FerryRun.run(
                ["videos", "info", "v-1", "--endpoint", receiver.url("")], environment: Self.credentials)
            #expect(run.status == 0, "\(run.error)")
            #expect(Self.actedOn(run.output).isEmpty)
            let lines = run.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            // Nothing the service sent starts a line of its own.
            #expect(!lines.contains { $0.hasPrefix("Uploaded ") || $0.hasPrefix("VideoId: forged") })
            #expect(lines.contains { $0.hasPrefix("Title: \\u{1B}]0;owned\\u{7}\\u{1B}[2J\\u{9B}31m\\u{202E}4pm.exe\\u{A}Uploaded") })
            #expect(lines.contains("Error: \(TerminalView.visible(Self.escapes)): bad input\\u{D}\\u{A}VideoId: forged"))
            // The 100,000-character id is cut and counted.
            let idLine = try #require(lines.first { $0.hasPrefix("VideoId: ") })
            #expect(idLine.count < 4_200)
            #expect(idLine.hasSuffix("… (\(100_000 + "VideoId: ".count - 4_096) more characters)"))
        }
    }

    @Test("with --json the same text arrives whole and unchanged for a JSON reader, with no raw escape in the line")
    func videoInfoJSON() async throws {
        let video: [String: Any] = ["VideoId": "v-1", "Title": Self.escapes, "Status": "Uploading"]
        let body = try Self.answer(["RequestId": "r-1", "Video": video])
        try await HTTPReceiver.with(answer: body) { receiver in
            let run = try await FerryRun.run(
                ["videos", "info", "v-1", "--endpoint", receiver.url(""), "--json"], environment: Self.credentials)
            #expect(run.status == 0, "\(run.error)")
            #expect(Self.actedOn(run.output).isEmpty)
            let object = try #require(run.jsonLines.first)
            #expect((object["Video"] as? [String: Any])?["Title"] as? String == Self.escapes)
        }
    }

    @Test("a service's error code and message are shown on standard error with their escapes made visible")
    func errorAnswer() async throws {
        let body = try Self.answer(["requestId": "r-1", "code": "Forbidden" + Self.escapes, "message": "no\nferry: forged line"])
        try await HTTPReceiver.with(status: 403, answer: body) { receiver in
            let run = try await FerryRun.run(
                ["videos", "list", "--endpoint", receiver.url("")], environment: Self.credentials)
            #expect(run.status == 1, "\(run.output) \(run.error)")
            #expect(Self.actedOn(run.error).isEmpty && Self.actedOn(run.output).isEmpty)
            #expect(!run.error.split(separator: "\n").contains { $0.hasPrefix("ferry: forged") })
            #expect(run.error.contains("no\\u{A}ferry: forged line"), "\(run.error)")
        }
    }

    @Test("a listed title cannot add a column or a row")
    func videoList() async throws {
        let video: [String: Any] = ["VideoId": "v-1", "Title": "a\tb\nv-2\tNormal", "Status": "Normal", "Size": 5]
        let body = try Self.answer(["RequestId": "r-1", "Total": 1, "PageNo": 1, "PageSize": 20, "VideoList": [video]])
        try await HTTPReceiver.with(answer: body) { receiver in
            let run = try await FerryRun.run(
                ["videos", "list", "--endpoint", receiver.url("")], environment: Self.credentials)
            #expect(run.status == 0, "\(run.error)")
            #expect(run.output.split(separator: "\n").map(String.init) == ["v-1\tNormal\t5\ta\\tb\\u{A}v-2\\tNormal", "1 video(s)"])
        }
    }
}

/// File names the command line is given.
@Suite("ferry upload: file names")
struct FileNameTests {
    @Test("a file whose name is not UTF-8 is refused with that reason, not as a missing file")
    func nameNotUTF8() async throws {
        let directory = TemporaryDirectory.make("ferry-name-bytes")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The shell makes the name's bytes (0xFF is never UTF-8); Process takes only strings.
        let script = #"cd "$1" && printf x > "$(printf 'bad\377.bin')" && exec "$2" upload "$(printf 'bad\377.bin')" --bucket b --endpoint http://127.0.0.1:9"#
        let run = try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", script, "sh", directory, FerryExecutable.path]
            process.environment = ["HOME": directory, "PATH": "/usr/bin:/bin"]
            return try process.runCapturing()
        }
        #expect(run.status == 1, "\(run.errorOutput)")
        #expect(run.errorOutput.contains("its name is not valid UTF-8"), "\(run.errorOutput)")
    }
}

/// A service that holds its answer: the command line says the upload is still waited for, rather than looking hung.
@Suite("ferry upload against a service that holds its answer", .timeLimit(.minutes(5)))
struct HeldAnswerTests {
    @Test(
        "an upload whose answer is held for 35 s is said to be waited for after 30 s (a stalled event with --json, a line without), then completes",
        arguments: [true, false])
    func silenceIsSaid(json: Bool) async throws {
        let directory = TemporaryDirectory.make("ferry-held-answer")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/held.bin"
        try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: file))
        do {
            try await HTTPReceiver.answering({ request in
                guard request.method == "PUT", request.path.hasSuffix("/held.bin") else { return .init(200) }
                // As a store's, the ETag is the MD5 of what it received (it reports no checksum).
                let etag = Hex.encode(Checksum.digest(.md5, of: request.body))
                return .init(200, [("ETag", "\"\(etag)\"")], delay: .seconds(35))
            }) { receiver in
                let run = try await FerryRun.run(
                    ["upload", file, "--endpoint", receiver.url(""), "--bucket", "b", "--record-dir", directory + "/records"]
                        + (json ? ["--json"] : []),
                    environment: HostileTextTests.credentials.merging(["HOME": directory]) { $1 })
                #expect(run.status == 0, "\(run.output) \(run.error)")
                if json {
                    let events = run.jsonLines.compactMap { $0["event"] as? String }
                    let stalled = run.jsonLines.filter { $0["event"] as? String == "stalled" }
                    #expect(stalled.count == 1 && stalled.first?["seconds"] as? Int == 30, "\(run.output)")
                    #expect(events.firstIndex(of: "stalled").map { $0 < (events.firstIndex(of: "completed") ?? 0) } == true, "\(events)")
                } else {
                    #expect(run.output.contains("held.bin: nothing sent or received for 30 s; still waiting for the service"), "\(run.output)")
                    #expect(run.output.contains("Uploaded b/held.bin"), "\(run.output)")
                }
            }
        }
    }

    @Test("a service that holds its answer to a file's first request (an object's bucket check, a video's creation) is said to be waited for after 30 s", arguments: ["object", "video"])
    func silenceOfTheFirstRequest(_ kind: String) async throws {
        let directory = TemporaryDirectory.make("ferry-held-first")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/clip.mp4"
        try Data(repeating: 7, count: 1024).write(to: URL(fileURLWithPath: file))
        try await HTTPReceiver.answering({ request in
            // The first request is held 35 s, then refused; any other is refused at once.
            let held = kind == "object" ? request.method == "HEAD" : request.path.contains("CreateUploadVideo")
            return kind == "object"
                ? .init(403, [("Content-Type", "application/xml")], body: "<Error><Code>AccessDenied</Code></Error>",
                    delay: .seconds(held ? 35 : 0))
                : .init(403, [("Content-Type", "application/json")], body: #"{"Code":"Forbidden","Message":"No."}"#,
                    delay: .seconds(held ? 35 : 0))
        }) { receiver in
            let run = try await FerryRun.run(
                ["upload", file, "--endpoint", receiver.url(""), "--json"] + (kind == "object" ? ["--bucket", "b"] : []),
                environment: HostileTextTests.credentials.merging(["HOME": directory]) { $1 })
            #expect(run.status != 0, "\(run.output) \(run.error)")
            let stalled = run.jsonLines.filter { $0["event"] as? String == "stalled" }
            #expect(stalled.count == 1 && stalled.first?["seconds"] as? Int == 30, "\(run.output)")
        }
    }

    @Test("a service that holds its answer to a multipart upload's first request (the lookup of an upload to resume, or its creation) is said to be waited for after 30 s too, before the upload's first event")
    func silenceBeforeTheFirstPart() async throws {
        let directory = TemporaryDirectory.make("ferry-held-creation")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/large.bin"
        try Data(repeating: 7, count: 6 * 1024 * 1024).write(to: URL(fileURLWithPath: file))
        try await HTTPReceiver.answering({ _ in
            let refusal = "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            return .init(403, [("Content-Type", "application/xml")], body: refusal, delay: .seconds(35))
        }) { receiver in
            let run = try await FerryRun.run(
                ["upload", file, "--endpoint", receiver.url(""), "--bucket", "b", "--part-size", "5MiB", "--json"],
                environment: HostileTextTests.credentials.merging(["HOME": directory]) { $1 })
            #expect(run.status != 0, "\(run.output) \(run.error)")
            let events = run.jsonLines.compactMap { $0["event"] as? String }
            let stalled = run.jsonLines.filter { $0["event"] as? String == "stalled" }
            #expect(stalled.first?["seconds"] as? Int == 30, "\(run.output)")
            #expect(events.first == "stalled" && events.last == "failed", "\(events)")
        }
    }
}

/// How the command line shows a control character: `\u{HEX}`.
enum TerminalView {
    static func visible(_ text: String) -> String {
        text.unicodeScalars.map { scalar in
            HostileTextTests.actedOn(String(scalar)).isEmpty && scalar != "\n"
                ? String(scalar) : "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        }.joined()
    }
}
