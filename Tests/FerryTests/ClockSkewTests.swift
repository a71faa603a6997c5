@testable import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Devices whose clocks are wrong: the SDK signs with the services' time as their answers' `Date` shows it.
@Suite("Clock skew: a device whose clock is off", .serialized, .timeLimit(.minutes(10)))
struct ClockSkewTests {
    @Test("ferry upload from a device whose clock is 20 minutes or 2 hours ahead, or 2 hours behind, stores the file (an object, by S3 and by tus, and a video): the refusal for its time (RequestTimeTooSkewed) tells the service's time, and the retry is signed with it")
    func uploadWithWrongClock() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("skew").status == 200)
            let directory = TemporaryDirectory.make("ferry-skew")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/small.bin"
            let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            for offset in [20 * 60, 2 * 3600, -2 * 3600] {
                let run = try await FerryRun.run(
                    ["upload", "--bucket", "skew", "--key", "file\(offset)", file],
                    environment: [
                        "FERRY_ENDPOINT": server.endpoint, "FERRY_ACCESS_KEY_ID": server.root.accessKeyId,
                        "FERRY_SECRET_ACCESS_KEY": server.root.secretAccessKey,
                    ], clockOffset: offset)
                #expect(run.status == 0, "\(offset): \(run.status) \(run.error)")
                #expect(try await s3.get("skew", "file\(offset)").body == bytes, "\(offset)")
            }
            // A signed tus creation: its plain-text refusal tells the time too.
            let tus = try await FerryRun.run(
                ["upload", "--bucket", "skew", "--key", "tus", "--protocol", "tus", file],
                environment: [
                    "FERRY_ENDPOINT": server.endpoint, "FERRY_ACCESS_KEY_ID": server.root.accessKeyId,
                    "FERRY_SECRET_ACCESS_KEY": server.root.secretAccessKey,
                ], clockOffset: 2 * 3600)
            #expect(tus.status == 0, "tus: \(tus.status) \(tus.error)")
            #expect(try await s3.get("skew", "tus").body == bytes)
            // A video: its upload credential (an UploadAuth, valid 50 minutes by the service's time) is not taken for
            // expired by a clock 2 hours ahead.
            let video = directory + "/clip.mp4"
            try Data(bytes).write(to: URL(fileURLWithPath: video))
            let run = try await FerryRun.run(
                ["upload", video],
                environment: [
                    "FERRY_ENDPOINT": server.endpoint, "FERRY_ACCESS_KEY_ID": server.root.accessKeyId,
                    "FERRY_SECRET_ACCESS_KEY": server.root.secretAccessKey,
                ], clockOffset: 2 * 3600)
            #expect(run.status == 0 && run.output.contains("VideoId: "), "\(run.status) \(run.error)")
        }
    }

    @Test("an HTTP date is read as RFC 9110's IMF-fixdate, and nothing else")
    func httpDates() {
        #expect(ServiceClock.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(ServiceClock.httpDate("Mon, 07 Dec 2026 00:44:58 GMT") == Date(timeIntervalSince1970: 1_796_604_298))
        #expect(ServiceClock.httpDate("Tue, 29 Feb 2028 23:59:59 GMT") == Date(timeIntervalSince1970: 1_835_481_599))
        for bad in [
            "", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            #expect(ServiceClock.httpDate(bad) == nil, "\(bad)")
        }
    }
}
