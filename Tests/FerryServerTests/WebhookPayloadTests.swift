import FerryCore
import Foundation
import Testing

@testable import FerryMedia
@testable import FerryServer

@Suite("Webhook payloads: one typed payload per event, the same JSON receivers always got")
struct WebhookPayloadTests {
    /// The body exactly as the outbox built it while payloads were dictionaries of JSON values.
    static func formerBody(_ event: WebhookEvent, _ payload: [String: JSONValue]) throws -> String {
        struct Body: Encodable {
            var id: String
            var type: String
            var createdAt: String
            var payload: [String: JSONValue]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let createdAt = event.createdAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        let body = Body(id: event.id, type: event.type.rawValue, createdAt: createdAt, payload: payload)
        return String(decoding: try encoder.encode(body), as: UTF8.self)
    }

    /// A stream's fields as the pipeline wrote them before (`streamInfo` returned a dictionary).
    static func formerStreamInfo(_ rendition: Rendition) -> [String: JSONValue] {
        var info: [String: JSONValue] = [
            "Status": "success", "Definition": .string(rendition.definition), "Format": .string(rendition.format),
            "Size": JSONValue(rendition.size),
        ]
        if let value = rendition.width { info["Width"] = JSONValue(value) }
        if let value = rendition.height { info["Height"] = JSONValue(value) }
        if let value = rendition.bitrate { info["Bitrate"] = JSONValue(value / 1000) }
        if let value = rendition.duration { info["Duration"] = JSONValue(value) }
        if let value = rendition.fps { info["Fps"] = JSONValue(value) }
        return info
    }

    @Test("every event the server sends encodes byte for byte as before, and its stored payload reads back")
    func sameJSON() throws {
        var probed = MezzanineInfo(size: 1_234_567)
        probed.duration = 12.345
        probed.width = 854
        probed.height = 480
        probed.bitrate = 1_500_123
        probed.fps = 29.97
        var whole = MezzanineInfo(size: 10)
        whole.duration = 10
        whole.fps = 30
        let video = Rendition(
            definition: "LD", format: "mp4", path: "LD.mp4", width: 640, height: 360, bitrate: 812_345, duration: 3.033,
            fps: 30, size: 310_000, videoCodec: "h264", audioCodec: "aac")
        let audio = Rendition(
            definition: "SQ", format: "m3u8", path: "SQ/index.m3u8", width: nil, height: nil, bitrate: nil,
            duration: 3, fps: nil, size: 48_000, videoCodec: nil, audioCodec: "aac")
        let message = "moov atom not found / \u{e9}t\u{e9} \"quoted\" <tag> \\ \u{1F3AC}"
        let cases: [(WebhookNotification, [String: JSONValue])] = [
            (.fileUploadComplete(videoId: "v1", size: 4096), ["VideoId": "v1", "Size": JSONValue(Int64(4096)), "Status": "UploadSucc"]),
            (
                .videoAnalysisComplete(videoId: "v1", info: probed),
                [
                    "VideoId": "v1", "Status": "success", "Size": JSONValue(Int64(1_234_567)), "Duration": JSONValue(12.345),
                    "Width": JSONValue(854), "Height": JSONValue(480), "Bitrate": JSONValue(1_500_123 / 1000),
                    "Fps": JSONValue(29.97),
                ]
            ),
            (
                .videoAnalysisComplete(videoId: "v1", info: whole),
                ["VideoId": "v1", "Status": "success", "Size": JSONValue(Int64(10)), "Duration": JSONValue(10.0), "Fps": JSONValue(30.0)]
            ),
            (
                .videoAnalysisFailed(videoId: "v1", errorCode: "InvalidMedia", errorMessage: message),
                ["VideoId": "v1", "Status": "fail", "ErrorCode": "InvalidMedia", "ErrorMessage": .string(message)]
            ),
            (
                .snapshotComplete(videoId: "v1", imageId: "img1", size: 5120),
                ["VideoId": "v1", "Status": "success", "ImageId": "img1", "Size": JSONValue(Int64(5120))]
            ),
            (
                .snapshotFailed(videoId: "v1", errorCode: "SnapshotFailed", errorMessage: message),
                ["VideoId": "v1", "Status": "fail", "ErrorCode": "SnapshotFailed", "ErrorMessage": .string(message)]
            ),
            (
                .streamTranscodeComplete(videoId: "v1", stream: MediaPipeline.streamInfo(video)),
                Self.formerStreamInfo(video).merging(["VideoId": "v1"]) { $1 }
            ),
            (
                .streamTranscodeComplete(videoId: "v1", stream: MediaPipeline.streamInfo(audio)),
                Self.formerStreamInfo(audio).merging(["VideoId": "v1"]) { $1 }
            ),
            (
                .streamTranscodeFailed(
                    videoId: "v1", definition: "SD", format: "mp4", errorCode: "TranscodeError", errorMessage: message),
                [
                    "VideoId": "v1", "Status": "fail", "Definition": "SD", "Format": "mp4", "ErrorCode": "TranscodeError",
                    "ErrorMessage": .string(message),
                ]
            ),
            (
                .transcodeComplete(videoId: "v1", streams: [MediaPipeline.streamInfo(video), MediaPipeline.streamInfo(audio)]),
                [
                    "VideoId": "v1", "Status": "success",
                    "StreamInfos": .array([.object(Self.formerStreamInfo(video)), .object(Self.formerStreamInfo(audio))]),
                ]
            ),
            (
                .transcodeFailed(videoId: "v1", errorCode: "ProcessingFailed", errorMessage: message),
                [
                    "VideoId": "v1", "Status": "fail", "ErrorCode": "ProcessingFailed", "ErrorMessage": .string(message),
                    "StreamInfos": [],
                ]
            ),
            (
                .videoPlayable(videoId: "v1", definition: "OD", format: "m3u8"),
                ["VideoId": "v1", "Status": "success", "Definition": "OD", "Format": "m3u8"]
            ),
            (.imageUploadComplete(imageId: "img1", size: 77), ["ImageId": "img1", "Size": JSONValue(Int64(77))]),
            (.videoDeleted(videoId: "v1"), ["VideoId": "v1"]),
            (.videoUploadExpired(videoId: "v1"), ["VideoId": "v1"]),
            (.imageUploadExpired(imageId: "img1"), ["ImageId": "img1"]),
            (.imageDeleted(imageId: "img1"), ["ImageId": "img1"]),
        ]
        for (notification, former) in cases {
            let event = WebhookEvent(
                id: "evt_0123", type: notification.type, payload: notification.payload,
                createdAt: Date(timeIntervalSince1970: 1_800_000_000.25), attempts: 0, deliveredAt: nil, failedAt: nil)
            let body = String(decoding: try WebhookOutbox.body(of: event), as: UTF8.self)
            #expect(body == (try Self.formerBody(event, former)), "\(notification.type)")
            // What the catalogs store reads back as the same payload.
            let stored = try WebhookEvent.jsonEncoder.encode(notification.payload)
            #expect(try JSONDecoder().decode(WebhookPayload.self, from: stored) == notification.payload)
        }
        // The documented types.
        #expect(Set(cases.map(\.0.type.rawValue)) == [
            "FileUploadComplete", "VideoAnalysisComplete", "SnapshotComplete", "VideoPlayable", "StreamTranscodeComplete",
            "TranscodeComplete", "ImageUploadComplete", "ImageUploadExpired", "ImageDeleted", "VideoDeleted",
            "VideoUploadExpired",
        ])
    }

    @Test("a whole number goes without a fraction, any other in its shortest form")
    func numbers() throws {
        let payload = WebhookPayload(duration: 10, fps: 29.97)
        let text = String(decoding: try WebhookEvent.jsonEncoder.encode(payload), as: UTF8.self)
        #expect(text == #"{"Duration":10,"Fps":29.97}"#)
    }
}
