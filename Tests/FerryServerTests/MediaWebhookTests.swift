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

    @Test("ListWebhookEvents names the receiver without its credentials: user, password, path and query are redacted")
    func listedURLIsRedacted() async throws {
        let url = try #require(URL(string: "http://hook:p4ss@127.0.0.1:9/hooks/T0KEN?sig=S3CRET"))
        try await TestServer.with(configure: { $0.webhook = WebhookTests.configuration(url) }) { server in
            let body = Array(#"{"Limit": 10}"#.utf8)
            let path = "/_ferry/v1/ListWebhookEvents"
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1", service: "ferry")
            let headers = signer.sign(
                method: "POST", path: path, query: [],
                headers: [("host", "127.0.0.1:\(server.port)"), ("content-type", "application/json")],
                payloadHash: SigV4.hexSHA256(body), date: Date()
            ).headers
            let reply = try await server.client().sendRaw("POST", path, headers: headers, body: body)
            #expect(reply.status == 200)
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])
            #expect(answer["WebhookURL"] as? String == "http://<redacted>@127.0.0.1:9/<redacted>?<redacted>")
            for secret in ["p4ss", "T0KEN", "S3CRET"] { #expect(!reply.text.contains(secret)) }
        }
    }
}
