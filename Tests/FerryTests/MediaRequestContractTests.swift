import FerryCore
import FerryTestSupport
import Foundation
import Testing

@testable import Ferry

/// The requests `MediaServiceClient` sends and the answers it reads, against docs/openapi.yaml and the server.
@Suite("Media API requests on the wire", .timeLimit(.minutes(10)))
struct MediaRequestContractTests {
    static func answer(_ value: some Encodable) throws -> TransportResponse {
        TransportResponse(
            status: 200, headers: [("content-type", "application/json")], body: [UInt8](try MediaContract.encode(value))
        )
    }

    static let ticket = MediaContract.UploadTicketAnswer(
        videoId: "v1", imageId: "i1", imageURL: "http://127.0.0.1/media/image/default/i1.png",
        uploadAddress: UploadAddress(
            endpoint: "http://127.0.0.1:9000", bucket: "media", fileName: "video/v1/source.mp4"
        ).encoded(),
        uploadAuth: UploadAuth(
            accessKeyId: "AK", accessKeySecret: "SK", securityToken: "ST",
            expiration: Date(timeIntervalSince1970: 2_000_000_000),
            region: "us-east-1"
        ).encoded())

    static let subtitle = MediaContract.Subtitle(
        subtitleId: "st1", language: "en", name: "English", isDefault: true, cueCount: 1, creationTime: "2026-01-01T00:00:00Z")

    @Test("every request the client sends validates against its operation's request schema, and it reads the answers")
    func clientRequestsMatchTheDocument() async throws {
        var mezzanine = MediaContract.Mezzanine(
            videoId: "v1", fileName: "a.mp4", size: 42, fileURL: "http://x/a.mp4", status: "Normal")
        mezzanine.creationTime = "2026-01-01T00:00:00Z"
        mezzanine.duration = 2.5
        var video = MediaContract.MezzanineStream(codecName: "h264")
        video.width = 640
        mezzanine.videoStreamList = [video]
        mezzanine.audioStreamList = [MediaContract.MezzanineStream(codecName: "aac")]
        let policy = AccessPolicy(statements: [.init(actions: ["media:GetVideoInfo"])])
        let transport = ScriptedTransport([
            try Self.answer(Self.ticket),
            try Self.answer(Self.ticket),
            try Self.answer(Self.ticket),
            try Self.answer(Self.ticket),
            try Self.answer(MediaContract.VideoInfoAnswer(video: .init(videoId: "v1", title: "T", status: "Normal"))),
            try Self.answer(
                MediaContract.PlayInfoAnswer(
                    videoBase: .init(videoId: "v1", title: "T", status: "Normal"), playInfoList: [])),
            try Self.answer(MediaContract.MezzanineInfoAnswer(mezzanine: mezzanine)),
            try Self.answer(MediaContract.VideoListAnswer(videoList: [], total: 0, pageNo: 1, pageSize: 20)),
            try Self.answer(MediaContract.DeleteVideoAnswer(deletedVideoIds: ["v1", "v2"])),
            try Self.answer(MediaContract.DeleteImageAnswer(deletedImageIds: ["i1"])),
            try Self.answer(
                MediaContract.AssumeRoleAnswer(
                    credentials: .init(
                        accessKeyId: "TMP", accessKeySecret: "S", securityToken: "T", expiration: "2033-05-18T03:33:20Z"
                    ))),
            try Self.answer(
                MediaContract.CreateAccessKeyAnswer(
                    accessKey: .init(accessKeyId: "FKIA1", accessKeySecret: "S1", status: "active"))),
            try Self.answer(
                MediaContract.ListAccessKeysAnswer(accessKeys: [
                    .init(
                        accessKeyId: "FKIA1", status: "active", description: "d", creationTime: "2026-01-01T00:00:00Z",
                        policy: policy)
                ])),
            ScriptedTransport.json(200, ["AccessKeyId": "FKIA1", "Status": "disabled"]),
            try Self.answer(MediaContract.SubtitleAnswer(subtitle: Self.subtitle)),
            try Self.answer(MediaContract.SubtitleListAnswer(subtitles: [Self.subtitle])),
            try Self.answer(MediaContract.EmptyAnswer()),
        ])
        let media = MediaServiceClient(
            endpoint: URL(string: "http://127.0.0.1:9000")!,
            credentials: Credentials(accessKeyId: "AK", secretAccessKey: "SK"),
            configuration: RetryPipelineTests.configuration(transport, RecordingClock()))

        var description = MediaServiceClient.VideoDescription(title: "Doc", fileName: "doc.mp4")
        description.fileSize = 10
        description.description = "d"
        description.coverURL = "https://c/x.jpg"
        description.cateId = 3
        description.tags = "a,b"
        description.transcode = "NoTranscode"
        description.userData = "u"
        description.clientToken = "token-1"
        #expect(try await media.createUploadVideo(description).id == "v1")
        #expect(try await media.refreshUploadVideo(videoId: "v1").address.bucket == "media")
        let image = try await media.createUploadImage(
            type: "cover", ext: "jpg", title: "I", tags: "t", cateId: 1, description: "e")
        #expect(image.id == "i1" && image.imageURL == Self.ticket.imageURL)
        #expect(try await media.refreshUploadImage(imageId: "i1").auth.securityToken == "ST")
        #expect(try await media.getVideoInfo(videoId: "v1").title == "T")
        #expect(
            try await media.getPlayInfo(videoId: "v1", authTimeout: 60, formats: ["mp4"], definitions: ["LD", "HD"])
                .streams.isEmpty)
        let source = try await media.getMezzanineInfo(videoId: "v1", authTimeout: 120)
        #expect(source == mezzanine && source.videoCodec == "h264" && source.audioCodec == "aac")
        #expect(try await media.listVideos(status: "Normal").total == 0)
        try await media.deleteVideos(["v1", "v2"])
        try await media.deleteImages(["i1"])
        let temporary = try await media.assumeRole(durationSeconds: 900, policy: policy)
        #expect(temporary.accessKeyId == "TMP" && temporary.sessionToken == "T")
        #expect(temporary.expiration == Date(timeIntervalSince1970: 2_000_000_000))
        let key = try await media.createAccessKey(policy: policy, description: "app")
        #expect(key.accessKeyId == "FKIA1" && key.secretAccessKey == "S1")
        let keys = try await media.listAccessKeys()
        #expect(
            keys.count == 1 && keys.first?.accessKeyId == "FKIA1" && keys.first?.status == "active"
                && keys.first?.description == "d")
        try await media.disableAccessKey("FKIA1")
        let track = try await media.addSubtitle(videoId: "v1", language: "en", name: "English", isDefault: true, content: "WEBVTT\n")
        #expect(track == Self.subtitle)
        #expect(try await media.listSubtitles(videoId: "v1") == [Self.subtitle])
        try await media.deleteSubtitle(videoId: "v1", subtitleId: "st1")

        let requests = transport.requests
        #expect(requests.count == 17)
        let captures = TemporaryDirectory.make("ferry-openapi-requests")
        defer { try? FileManager.default.removeItem(atPath: captures) }
        var sent: [String: [String: Any]] = [:]
        for request in requests {
            let action = try #require(request.url.split(separator: "/").last.map(String.init))
            try Data(request.body).write(to: URL(fileURLWithPath: "\(captures)/\(action).request.json"))
            sent[action] = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
        }
        // What the client put in, on the wire under the documented names.
        #expect(
            Set((sent["CreateUploadVideo"] ?? [:]).keys) == [
                "Title", "FileName", "FileSize", "Description", "CoverURL", "CateId", "Tags", "Transcode", "UserData",
                "ClientToken",
            ])
        #expect(sent["GetPlayInfo"]?["Definition"] as? String == "LD,HD")
        #expect(sent["DeleteVideo"]?["VideoIds"] as? String == "v1,v2")
        #expect(sent["DeleteImage"]?["ImageIds"] as? String == "i1")
        #expect(sent["ListAccessKeys"]?.isEmpty == true)
        #expect(Set((sent["AddSubtitle"] ?? [:]).keys) == ["VideoId", "Language", "Name", "Default", "Content"])
        #expect(Set((sent["DeleteSubtitle"] ?? [:]).keys) == ["VideoId", "SubtitleId"])

        let result = try await MediaOpenAPITests.validate(captures, with: "validate_openapi_requests.py")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.split(separator: "\n").filter { $0.hasPrefix("VALID ") }.count == 17, "\(result.output)")
    }

    @Test("the server's refusals of a bad request name the wire field")
    func refusalsNameTheWireField() async throws {
        try await TestServer.with { server in
            let media = server.media()
            func refusal(_ action: String, _ json: String) async -> FerryError? {
                do {
                    _ = try await media.callJSON(action, body: Data(json.utf8))
                    return nil
                } catch {
                    return error
                }
            }
            let wrongType = await refusal("CreateUploadVideo", #"{"Title": 5, "FileName": "a.mp4"}"#)
            #expect(wrongType?.serverCode == "InvalidParameter" && wrongType?.message == "Title has the wrong type.")
            let blank = await refusal("CreateUploadVideo", #"{"Title": " \t\n", "FileName": "a.mp4"}"#)
            #expect(blank?.serverCode == "InvalidParameter" && blank?.message == "Title must not be empty.")
            let missing = await refusal("CreateUploadVideo", #"{"FileName": "a.mp4"}"#)
            #expect(missing?.serverCode == "MissingParameter" && missing?.message == "Title is required.")
            let seconds = await refusal("AssumeRole", #"{"DurationSeconds": "long"}"#)
            #expect(
                seconds?.serverCode == "InvalidParameter" && seconds?.message == "DurationSeconds has the wrong type.")
            let limit = await refusal("ListWebhookEvents", #"{"Limit": "ten"}"#)
            #expect(limit?.serverCode == "InvalidParameter" && limit?.message.hasPrefix("Limit ") == true)
            // JSON numbers an integer field cannot hold: the field is named, as for any other wrong type.
            for number in ["1.5", "1e30", "-99999999999999999999"] {
                let fraction = await refusal("GetPlayInfo", #"{"VideoId": "v", "AuthTimeout": \#(number)}"#)
                #expect(
                    fraction?.serverCode == "InvalidParameter" && fraction?.message == "AuthTimeout has the wrong type.",
                    "\(number): \(String(describing: fraction))")
            }
            let cut = await refusal("GetPlayInfo", #"{"VideoId": "v", "AuthTimeout": 1.5"#)
            #expect(cut?.serverCode == "MalformedJSON", "\(String(describing: cut))")
            let videoId = await refusal("GetMezzanineInfo", #"{"AuthTimeout": 60}"#)
            #expect(videoId?.serverCode == "MissingParameter" && videoId?.message == "VideoId is required.")
            let policy = await refusal("CreateAccessKey", #"{"Description": "no policy"}"#)
            #expect(policy?.serverCode == "MissingParameter" && policy?.message == "Policy is required.")
            // A nested object without a field it needs is named too, not taken for a body that is not JSON.
            let empty = await refusal("CreateAccessKey", #"{"Policy": {}}"#)
            #expect(empty?.serverCode == "MissingParameter" && empty?.message == "Policy.statements is required.", "\(String(describing: empty))")
            let statement = await refusal("CreateAccessKey", #"{"Policy": {"statements": [{"bucket": "b"}]}}"#)
            #expect(
                statement?.serverCode == "MissingParameter" && statement?.message == "Policy.statements[0].actions is required.",
                "\(String(describing: statement))")
        }
    }
}
