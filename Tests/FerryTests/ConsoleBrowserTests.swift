import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The web console in a real Chromium (Debian's `chromium` and `chromium-driver`, driven headless by Selenium from
/// Scripts/console_browser.py) against `ferry serve` with media processing: sign in, upload through the file input,
/// watch the status become Normal, play, preview the storyboard on the timeline, edit, resume after a reload, keep an upload across an ended session,
/// delete, keys, webhooks, the status page, a narrow window, a scoped key. Screenshots go to `.build/test-artifacts/console/`.
@Suite("Web console in Chromium", .serialized, .timeLimit(.minutes(10)))
struct ConsoleBrowserTests {
    static let artifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/test-artifacts/console").path

    @Test("sign in, stored pages without script, upload, Normal, play, edit, markup as text, resume after reload, ended session, pause/resume/cancel, dropped network, delete, keys, webhooks, status, narrow window, scoped key")
    func console() async throws {
        let data = TemporaryDirectory.make("ferry-console")
        defer { try? FileManager.default.removeItem(atPath: data) }
        try? FileManager.default.removeItem(atPath: Self.artifacts)
        try FileManager.default.createDirectory(atPath: Self.artifacts, withIntermediateDirectories: true)
        let root = SigV4Credentials(accessKeyId: "FKIACONSOLETEST00", secretAccessKey: "console-secret-0123456789")
        let clip = try await MediaFixtures.make(.landscape480, seconds: 3, in: data)
        // Long enough that its ladder takes a while after its first stream plays.
        try FileManager.default.createDirectory(atPath: data + "/long", withIntermediateDirectories: true)
        let longClip = data + "/long-take.mp4"
        try FileManager.default.moveItem(
            atPath: try await MediaFixtures.make(.landscape480, seconds: 60, in: data + "/long"), toPath: longClip)
        // Several 5 MiB parts, not a video: its processing fails at once and leaves the machine to the browser.
        let big = data + "/big.mp4"
        try FileManager.default.moveItem(at: try makeRandomFile(size: (21 << 20) + 12_345, in: data), to: URL(fileURLWithPath: big))
        let server = try await FerryExecutable.Server.start(
            dataDirectory: data + "/server", arguments: ["--media-workers", "1"],
            environment: [
                "FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey,
                // Nothing listens there: events stay pending with their last error, as the webhooks page shows.
                "FERRY_WEBHOOK_URL": "http://127.0.0.1:9/hooks", "FERRY_WEBHOOK_SECRET": "console-webhook-secret",
            ], logFile: data + "/server.log")
        let created = try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: FerryExecutable.path)
            process.arguments = ["keys", "create", "--endpoint", server.endpoint, "--actions", "media:*,s3:*", "--description", "scoped"]
            process.environment = ProcessInfo.processInfo.environment.merging(
                ["FERRY_ACCESS_KEY_ID": root.accessKeyId, "FERRY_SECRET_ACCESS_KEY": root.secretAccessKey]) { $1 }
            return try process.runCapturing()
        }
        let lines = created.output.split(separator: "\n")
        let scopedId = lines.first { $0.hasPrefix("FERRY_ACCESS_KEY_ID=") }.map { String($0.dropFirst(20)) } ?? ""
        let scopedSecret = lines.first { $0.hasPrefix("FERRY_SECRET_ACCESS_KEY=") }.map { String($0.dropFirst(24)) } ?? ""
        #expect(!scopedId.isEmpty && !scopedSecret.isEmpty, "\(created.output) \(created.errorOutput)")

        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/console_browser.py").path
        let home = data + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let result = try await runBlocking {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script]
            var environment = ProcessInfo.processInfo.environment
            environment.merge([
                "FERRY_ENDPOINT": server.endpoint, "ROOT_ID": root.accessKeyId, "ROOT_SECRET": root.secretAccessKey,
                "SCOPED_ID": scopedId, "SCOPED_SECRET": scopedSecret, "CLIP": clip, "LONG_CLIP": longClip, "BIG": big, "ARTIFACTS": Self.artifacts,
                "HOME": home, "SERVER_PID": String(server.process.processIdentifier),
            ]) { $1 }
            process.environment = environment
            return try process.runCapturing()
        }
        await server.stop()
        // What the script saw (its checks and timings), beside the screenshots.
        try? Data(result.output.utf8).write(to: URL(fileURLWithPath: Self.artifacts + "/console_browser.log"))
        let log = (try? String(contentsOfFile: data + "/server.log", encoding: .utf8)) ?? ""
        #expect(result.status == 0, "\(result.output)\n\(result.errorOutput)\nserver log:\n\(log.suffix(3000))")
        let passed = Set(result.output.split(separator: "\n").filter { $0.hasPrefix("PASS ") }.map { String($0.dropFirst(5)) })
        let expected: Set<String> = [
            "sign in", "a stored page runs no script as the console's origin", "upload reaches 100 %", "status becomes Normal", "library lists the video with its cover",
            "video plays", "HLS plays through Media Source Extensions", "a video plays while it is transcoded", "captions show as a track of the player", "storyboard previews on the timeline", "edit title",
            "title with markup renders as text", "a cover on another site is a link, not loaded",
            "reload mid-upload resumes without re-sending stored parts", "expired session keeps the upload",
            "pause, resume and a dropped network", "cancel", "delete",
            "keys page shows a secret once", "webhooks page lists deliveries", "status page lists this node",
            "narrow window",
            "another key's unfinished upload is not shown", "scoped key sees only its own videos",
            "bidirectional controls show as code points", "a session changed in another tab is this tab's too",
        ]
        #expect(passed == expected, "missing: \(expected.subtracting(passed))")
        for page in [
            "sign-in", "upload", "library", "video", "video-captions", "video-storyboard", "keys", "webhooks", "status",
            "library-narrow",
        ] {
            #expect(FileManager.default.fileExists(atPath: "\(Self.artifacts)/\(page).png"), "no screenshot of \(page)")
        }
        // No secret of either key reached the server's log.
        #expect(!log.contains(root.secretAccessKey) && !log.contains(scopedSecret))
    }
}
