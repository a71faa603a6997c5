import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

@Suite("Media events through webhooks", .timeLimit(.minutes(10)))
struct MediaWebhookTests {
    @Test("a completed upload and a deletion reach the receiver as signed FileUploadComplete and VideoDeleted events")
    func uploadEvents() async throws {
        try await WebhookReceiver.with { receiver in
            try await TestServer.with(configure: { $0.webhook = WebhookTests.configuration(receiver.url) }) { server in
                let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
                let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
                let ticket = try await media.createUploadVideo(.init(title: "Clip", fileName: "clip.mp4"))
                let s3 = server.client(ticket.auth.credentials)
                #expect(try await s3.put(ticket.address.bucket, ticket.address.fileName, [UInt8](repeating: 7, count: 4096)).status == 200)
                try await media.deleteVideos([ticket.id])
                let deadline = ContinuousClock.now + .seconds(60)
                while await receiver.recorder.deliveries.count < 2, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let deliveries = await receiver.recorder.deliveries
                #expect(deliveries.map(\.type) == ["FileUploadComplete", "VideoDeleted"])
                for delivery in deliveries {
                    let signature = try #require(delivery.signature)
                    #expect(WebhookSignature.verify(header: signature, body: delivery.body, secret: WebhookTests.secret))
                    #expect(!WebhookSignature.verify(header: signature, body: delivery.body, secret: "other"))
                }
                let first = try #require(try JSONSerialization.jsonObject(with: Data(deliveries[0].body)) as? [String: Any])
                let payload = try #require(first["payload"] as? [String: Any])
                #expect(payload["VideoId"] as? String == ticket.id)
                #expect(payload["Size"] as? Int == 4096)
                #expect(payload["Status"] as? String == "UploadSucc")
            }
        }
    }
}
