import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite("Media API against its OpenAPI document", .timeLimit(.minutes(10)))
struct MediaOpenAPITests {
    /// Sends a signed media request and returns the raw answer.
    func raw(_ server: TestServer, _ action: String, _ parameters: [String: Any]) async throws -> S3TestClient.Reply {
        let body = [UInt8](try JSONSerialization.data(withJSONObject: parameters))
        let signer = SigV4Signer(credentials: server.root, region: "us-east-1", service: "ferry")
        let path = "/_ferry/v1/" + action
        let headers = signer.sign(
            method: "POST", path: path, query: [], headers: [("host", "127.0.0.1:\(server.port)"), ("content-type", "application/json")],
            payloadHash: SigV4.hexSHA256(body), date: Date()).headers
        return try await server.client().sendRaw("POST", path, headers: headers, body: body)
    }

    @Test("every operation's real answers, successes and errors, validate against docs/openapi.yaml")
    func responsesMatchTheDocument() async throws {
        let captures = TemporaryDirectory.make("ferry-openapi")
        defer { try? FileManager.default.removeItem(atPath: captures) }
        try await TestServer.with(configure: {
            $0.mediaProcessing.workers = 1
            $0.mediaProcessing.pollInterval = .milliseconds(50)
        }) { server in
            // One capture per action and status: <Action>.<status>.json.
            func capture(_ action: String, _ parameters: [String: Any]) async throws -> [String: Any] {
                let reply = try await raw(server, action, parameters)
                try Data(reply.body).write(to: URL(fileURLWithPath: "\(captures)/\(action).\(reply.status).json"))
                return (try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]) ?? [:]
            }
            let video = try await capture("CreateUploadVideo", ["Title": "Doc", "FileName": "doc.mp4", "Tags": "a,b", "CateId": 3])
            let videoId = try #require(video["VideoId"] as? String)
            _ = try await capture("RefreshUploadVideo", ["VideoId": videoId])
            _ = try await capture("GetVideoInfo", ["VideoId": videoId])
            let auth = try #require(UploadAuth(encoded: video["UploadAuth"] as? String ?? ""))
            let address = try #require(UploadAddress(encoded: video["UploadAddress"] as? String ?? ""))
            // A real video (the sample), processed to Normal, so GetPlayInfo lists renditions.
            let sample = [UInt8](try Data(contentsOf: URL(fileURLWithPath: CommandLineTests.sample)))
            #expect(try await server.client(auth.credentials).put(address.bucket, address.fileName, sample).status == 200)
            let deadline = ContinuousClock.now + .seconds(180)
            while try await server.media().getVideoInfo(videoId: videoId).status != "Normal", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            _ = try await capture("GetPlayInfo", ["VideoId": videoId, "AuthTimeout": 600])
            _ = try await capture("GetMezzanineInfo", ["VideoId": videoId])
            _ = try await capture("ListVideos", ["PageNo": 1, "PageSize": 10, "Title": "Do"])
            _ = try await capture(
                "UpdateVideoInfo", ["VideoId": videoId, "Title": "Doc 2", "Tags": "c", "CoverURL": "", "PlaybackPolicy": "public"])
            let signingKey = try await capture("CreateSigningKey", ["Algorithm": "ES256"])
            _ = try await capture("ListSigningKeys", [:])
            _ = try await capture("DeleteSigningKey", ["KeyId": signingKey["KeyId"] as? String ?? ""])
            _ = try await capture("ListWebhookEvents", ["Limit": 10])
            _ = try await capture("RetryWebhookEvent", ["EventId": "evt_missing"])
            let status = try await capture("GetServiceStatus", [:])
            #expect((status["Nodes"] as? [Any])?.count == 1)
            let image = try await capture("CreateUploadImage", ["ImageType": "cover", "ImageExt": "jpg"])
            _ = try await capture("RefreshUploadImage", ["ImageId": image["ImageId"] as? String ?? ""])
            _ = try await capture("GetImageInfo", ["ImageId": image["ImageId"] as? String ?? ""])
            _ = try await capture("DeleteImage", ["ImageIds": image["ImageId"] as? String ?? ""])
            _ = try await capture("AssumeRole", ["DurationSeconds": 900])
            let key = try await capture("CreateAccessKey", ["Policy": ["statements": [["actions": ["media:*"], "bucket": "*", "keyPrefix": ""]]]])
            _ = try await capture("ListAccessKeys", [:])
            _ = try await capture("DisableAccessKey", ["AccessKeyId": (key["AccessKey"] as? [String: Any])?["AccessKeyId"] as? String ?? ""])
            let subtitle = try await capture(
                "AddSubtitle", ["VideoId": videoId, "Language": "en", "Name": "English", "Default": true,
                                "Content": "1\n00:00:01,000 --> 00:00:02,000\nHello\n"])
            _ = try await capture("ListSubtitles", ["VideoId": videoId])
            _ = try await capture(
                "DeleteSubtitle", ["VideoId": videoId, "SubtitleId": (subtitle["Subtitle"] as? [String: Any])?["SubtitleId"] as? String ?? ""])
            _ = try await capture("DeleteVideo", ["VideoIds": videoId])
            // Errors.
            _ = try await capture("GetVideoInfo", ["VideoId": "missing"])
            _ = try await capture("CreateUploadVideo", ["Title": "x"])
            _ = try await capture("AssumeRole", ["DurationSeconds": 5])
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: captures)
        #expect(names.count == 28)
        #expect(names.contains { $0.hasSuffix(".404.json") })
        #expect(names.contains { $0.hasSuffix(".400.json") })
        let result = try await Self.validate(captures, with: "validate_openapi.py")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.split(separator: "\n").filter { $0.hasPrefix("VALID ") }.count == 29)
    }

    /// Runs one of the validators in Scripts/ on docs/openapi.yaml and a directory of captured JSON; its exit status
    /// and everything it printed.
    static func validate(_ captures: String, with script: String) async throws -> (status: Int32, output: String) {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let spec = tests.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", tests.appendingPathComponent("Scripts/" + script).path, spec.path, captures]
        let run = try await runBlocking { try process.runCapturing() }
        return (process.terminationStatus, run.output + run.errorOutput)
    }
}
