import Crypto
import Ferry
import FerryCore
import FerryServer
import FerryTestSupport
import Foundation
import Testing

/// The series of what happens as it happens: multipart uploads and their retries, refused checksums, media API
/// actions, media jobs and the time to `Normal`, webhook deliveries, and the store's calls.
@Suite("Metrics of events: uploads, retries, checksum mismatches, media actions and jobs, time to Normal, webhooks", .serialized, .timeLimit(.minutes(10)))
struct MetricsEventsTests {
    static func scrape(_ server: TestServer) async throws -> String {
        String(decoding: try await S3TestClient.fetch(server.endpoint + "/metrics").body, as: UTF8.self)
    }

    @Test("media actions are counted by action whether refused before they run or called from the console, never as object API operations")
    func mediaActionsCounted() async throws {
        try await TestServer.with { server in
            // Unsigned: refused by authentication, before the action runs; an action the API lacks is no label.
            #expect(try await S3TestClient.fetchRaw("POST", server.endpoint + "/_ferry/v1/ListVideos").status == 403)
            #expect(try await S3TestClient.fetchRaw("POST", server.endpoint + "/_ferry/v1/NoSuchThing").status >= 400)
            var browser = ConsoleBrowser(server)
            #expect(try await browser.signIn(server.root.accessKeyId, server.root.secretAccessKey).status == 200)
            #expect(try await browser.api("ListVideos").status == 200)
            let text = try await Self.scrape(server)
            #expect(PrometheusText.sample(text, "ferry_media_actions_total", ["action": "ListVideos", "status": "403"]) == 1)
            #expect(PrometheusText.sample(text, "ferry_media_actions_total", ["action": "ListVideos", "status": "200"]) == 1)
            #expect(!text.contains("NoSuchThing"))
            #expect(PrometheusText.sample(text, "ferry_s3_operations_total", ["operation": "ListVideos"]) == nil, "\(text)")
        }
    }

    @Test("a video reaching Normal, a refreshed credential, delivered webhooks, then a retried part, a resumed, a completed and an aborted upload and a refused digest: each counted once")
    func eventsAreCounted() async throws {
        try await HTTPReceiver.with { receiver in
            try await MediaHarness.with(webhook: URL(string: receiver.url("/hooks"))!) { harness in
                let server = harness.server
                let clip = URL(fileURLWithPath: try await harness.fixture(.landscape480, seconds: 2))
                let ticket = try await harness.media.createUploadVideo(.init(title: "counted", fileName: "clip.mp4"))
                // The credential refreshed before the upload, as an app does when the first one ran out.
                let refreshed = try await harness.media.refreshUploadVideo(videoId: ticket.id)
                let upload = try await refreshed.objectStorageClient().upload(
                    file: clip, bucket: refreshed.address.bucket, key: refreshed.address.fileName)
                _ = try await upload.result
                let videoId = ticket.id
                _ = try await harness.waitFor(videoId, ["Normal"])
                // Webhook events are delivered after the status changes, and the cover's snapshot job may still run
                // when the video is Normal: wait until the receiver has events and this node runs no job. A job is
                // counted as ended a moment after it stops being held: wait for the three counts too.
                let deadline = ContinuousClock.now + .seconds(60)
                var text = try await Self.scrape(server)
                func ended(_ text: String) -> Bool {
                    ["probe", "transcode", "snapshot"].allSatisfy {
                        PrometheusText.sample(text, "ferry_media_jobs_ended_total", ["kind": $0, "outcome": "done"]) != nil
                    }
                }
                while PrometheusText.sample(text, "ferry_webhook_deliveries_total", ["outcome": "delivered"]) == nil
                    || PrometheusText.sample(text, "ferry_media_job_leases_held") != 0 || !ended(text),
                    ContinuousClock.now < deadline
                {
                    try await Task.sleep(for: .milliseconds(100))
                    text = try await Self.scrape(server)
                }
                let delivered = try #require(PrometheusText.sample(text, "ferry_webhook_deliveries_total", ["outcome": "delivered"]))
                let received = await receiver.recorder.requests.count
                #expect(delivered >= 1 && delivered <= Double(received))
                #expect(PrometheusText.sample(text, "ferry_webhook_delivery_delay_seconds_count") == delivered)
                // This node delivers: it holds the delivery lease.
                #expect(PrometheusText.sample(text, "ferry_service_leases_held", ["lease": "webhook-delivery"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_actions_total", ["action": "CreateUploadVideo", "status": "200"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_actions_total", ["action": "RefreshUploadVideo", "status": "200"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_jobs_ended_total", ["kind": "probe", "outcome": "done"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_jobs_ended_total", ["kind": "transcode", "outcome": "done"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_jobs_ended_total", ["kind": "snapshot", "outcome": "done"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_media_job_duration_seconds_count", ["kind": "transcode"]) == 1)
                #expect(PrometheusText.sample(text, "ferry_video_time_to_normal_seconds_count") == 1)
                #expect((PrometheusText.sample(text, "ferry_storage_call_duration_seconds_count", ["layer": "catalog", "operation": "object"]) ?? 0) >= 1)
                #expect((PrometheusText.sample(text, "ferry_storage_call_duration_seconds_count", ["layer": "blobs", "operation": "commit"]) ?? 0) >= 1)
                #expect(PrometheusText.sample(text, "ferry_media_job_leases_held") == 0)

                // The object API's events, counted from here.
                let before = text
                func delta(_ name: String, _ labels: [String: String] = [:], in after: String) -> Double {
                    (PrometheusText.sample(after, name, labels) ?? 0) - (PrometheusText.sample(before, name, labels) ?? 0)
                }
                let s3 = server.client()
                try await s3.createBucket("events")
                let id = try await s3.createMultipartUpload("events", "big")
                _ = try await s3.uploadPart("events", "big", uploadId: id, number: 1, [1, 2, 3])
                let etag = try #require(try await s3.uploadPart("events", "big", uploadId: id, number: 1, [1, 2, 3]).header("ETag"))
                #expect(try await s3.send("GET", "/events/big", query: [("uploadId", id)]).status == 200)
                #expect(try await s3.complete("events", "big", uploadId: id, xml: S3TestClient.completeXML([(1, etag)])).status == 200)
                let abandoned = try await s3.createMultipartUpload("events", "gone")
                #expect(try await s3.send("DELETE", "/events/gone", query: [("uploadId", abandoned)]).status == 204)
                let otherDigest = Data(Insecure.MD5.hash(data: Data([1]))).base64EncodedString()
                #expect(try await s3.put("events", "bad", [9, 9, 9], headers: [("Content-MD5", otherDigest)]).errorCode == "BadDigest")
                #expect(try await s3.get("events", "bad").status == 404)
                // A tus append whose Upload-Checksum does not match: 460.
                let created = try await s3.send(
                    "POST", "/_ferry/uploads/s3/events/tus.bin",
                    headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "3")], payload: .unsigned)
                let location = try #require(created.header("Location"), "\(created.status) \(created.text)")
                let mismatch = try await S3TestClient.fetchRaw(
                    "PATCH", location,
                    headers: [
                        ("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream"),
                        ("Upload-Checksum", "md5 " + otherDigest),
                    ], body: [7, 7, 7])
                #expect(mismatch.status == 460)

                let after = try await Self.scrape(server)
                #expect(delta("ferry_multipart_uploads_total", ["event": "started"], in: after) == 3)
                #expect(delta("ferry_multipart_uploads_total", ["event": "completed"], in: after) == 1)
                #expect(delta("ferry_multipart_uploads_total", ["event": "aborted"], in: after) == 1)
                #expect(delta("ferry_multipart_uploads_total", ["event": "resumed"], in: after) == 1)
                #expect(delta("ferry_upload_parts_replaced_total", in: after) == 1)
                #expect(delta("ferry_checksum_mismatches_total", ["group": "s3"], in: after) == 1)
                #expect(delta("ferry_checksum_mismatches_total", ["group": "resumable"], in: after) == 1)
                #expect(delta("ferry_storage_call_duration_seconds_count", ["layer": "catalog", "operation": "completeUpload"], in: after) == 1)
                let check = try await PrometheusText.promtoolCheck(after)
                #expect(check.status == 0 && check.said.isEmpty, "\(check.said)")
                #expect(!after.contains(videoId) && !after.contains(server.root.accessKeyId))
            }
        }
    }
}
