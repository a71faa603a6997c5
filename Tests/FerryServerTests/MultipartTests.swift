import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite("Multipart uploads", .timeLimit(.minutes(10)))
struct MultipartTests {
    static let minPart: Int64 = 1024

    func bytes(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) } }

    @Test("complete assembles parts in order with the multipart ETag, and ListParts pages")
    func completeAndListParts() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("mpu")
            let id = try await s3.createMultipartUpload("mpu", "movie.mp4", headers: [("Content-Type", "video/mp4")])
            let parts = [bytes(1500, seed: 1), bytes(1200, seed: 2), bytes(300, seed: 3)]
            var etags: [String] = []
            for (index, part) in parts.enumerated() {
                let reply = try await s3.uploadPart("mpu", "movie.mp4", uploadId: id, number: index + 1, part)
                #expect(reply.status == 200)
                etags.append(reply.header("ETag")!)
            }
            let page1 = try S3XML.decode(
                ListPartsResult.self,
                from: Data(try await s3.send("GET", S3TestClient.path("mpu", "movie.mp4"), query: [("uploadId", id), ("max-parts", "2")]).body))
            #expect(page1.parts.map(\.partNumber) == [1, 2])
            #expect(page1.isTruncated)
            #expect(page1.nextPartNumberMarker == 2)
            let page2 = try S3XML.decode(
                ListPartsResult.self,
                from: Data(try await s3.send("GET", S3TestClient.path("mpu", "movie.mp4"), query: [("uploadId", id), ("part-number-marker", "2")]).body))
            #expect(page2.parts.map(\.partNumber) == [3])
            #expect(!page2.isTruncated)
            #expect(page2.parts[0].size == 300)

            let done = try await s3.complete("mpu", "movie.mp4", uploadId: id, xml: S3TestClient.completeXML(Array(zip(1...3, etags))))
            #expect(done.status == 200)
            let result = try S3XML.decode(CompleteMultipartUploadResult.self, from: Data(done.body))
            let md5s = parts.map { part -> [UInt8] in
                var h = Checksummer(.md5)
                h.update(part)
                return h.finalize()
            }
            #expect(result.eTag == "\"\(Checksum.multipartETag(partMD5s: md5s))\"")
            let get = try await s3.get("mpu", "movie.mp4")
            #expect(get.body == parts.flatMap { $0 })
            #expect(get.header("Content-Type") == "video/mp4")
            let ranged = try await s3.get("mpu", "movie.mp4", headers: [("Range", "bytes=1400-2800")])
            #expect(ranged.body == Array(parts.flatMap { $0 }[1400...2800]))
            // The upload is gone.
            let again = try await s3.send("GET", S3TestClient.path("mpu", "movie.mp4"), query: [("uploadId", id)])
            #expect(again.errorCode == "NoSuchUpload")
        }
    }

    @Test("the same Complete sent three times at once (a client that timed out and retried) answers each with the object")
    func concurrentIdenticalCompletes() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("retried")
            for round in 0..<20 {
                let key = "clip-\(round).mp4"
                let id = try await s3.createMultipartUpload("retried", key)
                var etags: [String] = []
                for (number, part) in [bytes(1500, seed: 1), bytes(10, seed: 2)].enumerated() {
                    etags.append(try #require(try await s3.uploadPart("retried", key, uploadId: id, number: number + 1, part).header("ETag")))
                }
                let xml = S3TestClient.completeXML(Array(zip(1...2, etags)))
                async let a = s3.complete("retried", key, uploadId: id, xml: xml)
                async let b = s3.complete("retried", key, uploadId: id, xml: xml)
                async let c = s3.complete("retried", key, uploadId: id, xml: xml)
                let answers = try await [a, b, c]
                #expect(answers.allSatisfy { $0.status == 200 }, "\(answers.map { "\($0.status) \($0.errorCode ?? "")" })")
                let resultETags = Set(answers.compactMap { try? S3XML.decode(CompleteMultipartUploadResult.self, from: Data($0.body)).eTag })
                #expect(resultETags.count == 1)
            }
        }
    }

    @Test("a Complete racing DeleteBucket either makes the object (and the bucket is not empty) or answers NoSuchBucket, never InvalidPart or NoSuchUpload")
    func completeRacingDeleteBucket() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            for round in 0..<20 {
                let bucket = "raced-\(round)"
                try await s3.createBucket(bucket)
                let id = try await s3.createMultipartUpload(bucket, "clip.mp4")
                var etags: [String] = []
                for (number, part) in [bytes(1500, seed: 1), bytes(10, seed: 2)].enumerated() {
                    etags.append(try #require(try await s3.uploadPart(bucket, "clip.mp4", uploadId: id, number: number + 1, part).header("ETag")))
                }
                async let completed = s3.complete(bucket, "clip.mp4", uploadId: id, xml: S3TestClient.completeXML(Array(zip(1...2, etags))))
                async let deleted = s3.send("DELETE", "/\(bucket)")
                let (complete, delete) = try await (completed, deleted)
                if complete.status == 200 {
                    #expect(delete.status == 409 && delete.errorCode == "BucketNotEmpty", "round \(round): \(delete.status) \(delete.errorCode ?? "")")
                    #expect(try await s3.get(bucket, "clip.mp4").status == 200)
                } else {
                    #expect(complete.status == 404 && complete.errorCode == "NoSuchBucket", "round \(round): \(complete.status) \(complete.errorCode ?? "")")
                    #expect(delete.status == 204)
                }
            }
        }
    }

    @Test("bad completions: wrong ETag, out of order, too small, malformed XML, unknown upload")
    func badCompletions() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("bad")
            let id = try await s3.createMultipartUpload("bad", "k")
            let e1 = try await s3.uploadPart("bad", "k", uploadId: id, number: 1, bytes(1100, seed: 1)).header("ETag")!
            let e2 = try await s3.uploadPart("bad", "k", uploadId: id, number: 2, bytes(10, seed: 2)).header("ETag")!
            let e3 = try await s3.uploadPart("bad", "k", uploadId: id, number: 3, bytes(10, seed: 3)).header("ETag")!

            let wrong = try await s3.complete("bad", "k", uploadId: id, xml: S3TestClient.completeXML([(1, "\"0123\"")]))
            #expect(wrong.errorCode == "InvalidPart")
            let order = try await s3.complete("bad", "k", uploadId: id, xml: S3TestClient.completeXML([(2, e2), (1, e1)]))
            #expect(order.errorCode == "InvalidPartOrder")
            let small = try await s3.complete("bad", "k", uploadId: id, xml: S3TestClient.completeXML([(1, e1), (2, e2), (3, e3)]))
            #expect(small.errorCode == "EntityTooSmall")
            let malformed = try await s3.complete("bad", "k", uploadId: id, xml: "<CompleteMultipartUpload><Part>")
            #expect(malformed.errorCode == "MalformedXML")
            let empty = try await s3.complete("bad", "k", uploadId: id, xml: "<CompleteMultipartUpload></CompleteMultipartUpload>")
            #expect(empty.errorCode == "MalformedXML")
            let unknown = try await s3.complete("bad", "k", uploadId: "nope", xml: S3TestClient.completeXML([(1, e1)]))
            #expect(unknown.status == 404)
            #expect(unknown.errorCode == "NoSuchUpload")
            // A declared object size other than the parts' total, or a checksum type the upload was not created with.
            let both = S3TestClient.completeXML([(1, e1), (2, e2)])
            for (headers, code) in [
                ([("x-amz-mp-object-size", "1111")], "InvalidRequest"), ([("x-amz-mp-object-size", "+1110")], "InvalidArgument"),
                ([("x-amz-checksum-type", "FULL_OBJECT")], "BadDigest"),
            ] {
                let refused = try await s3.complete("bad", "k", uploadId: id, xml: both, headers: headers)
                #expect(refused.errorCode == code, "\(headers): \(refused.text)")
            }
            // None of that created the object, and the upload is still there to finish.
            #expect(try await s3.get("bad", "k").errorCode == "NoSuchKey")
            let ok = try await s3.complete("bad", "k", uploadId: id, xml: both, headers: [("x-amz-mp-object-size", "1110")])
            #expect(ok.status == 200)
            #expect(try await s3.get("bad", "k").body.count == 1110)
        }
    }

    @Test("part numbers outside 1–10000 are InvalidArgument")
    func partNumbers() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("parts")
            let id = try await s3.createMultipartUpload("parts", "k")
            for number in [0, 10_001] {
                let reply = try await s3.uploadPart("parts", "k", uploadId: id, number: number, [1, 2, 3])
                #expect(reply.status == 400)
                #expect(reply.errorCode == "InvalidArgument")
            }
            let list = try S3XML.decode(ListPartsResult.self, from: Data(try await s3.send("GET", S3TestClient.path("parts", "k"), query: [("uploadId", id)]).body))
            #expect(list.parts.isEmpty)
        }
    }

    @Test("abort removes the upload and deletes its part files; ListMultipartUploads shows what is open")
    func abort() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("abort")
            let id = try await s3.createMultipartUpload("abort", "k1")
            let other = try await s3.createMultipartUpload("abort", "k2")
            _ = try await s3.uploadPart("abort", "k1", uploadId: id, number: 1, bytes(2000, seed: 9))
            let listed = try S3XML.decode(ListMultipartUploadsResult.self, from: Data(try await s3.send("GET", "/abort", query: [("uploads", "")]).body))
            #expect(Set(listed.uploads.map(\.uploadId)) == [id, other])
            let filesBefore = blobFiles(server.dataDirectory)
            #expect(filesBefore.count == 1)
            #expect(try await s3.send("DELETE", S3TestClient.path("abort", "k1"), query: [("uploadId", id)]).status == 204)
            #expect(blobFiles(server.dataDirectory).isEmpty)
            let after = try S3XML.decode(ListMultipartUploadsResult.self, from: Data(try await s3.send("GET", "/abort", query: [("uploads", "")]).body))
            #expect(after.uploads.map(\.uploadId) == [other])
            // encoding-type=url encodes keys, prefixes, markers and the delimiter, and says so.
            let odd = try await s3.createMultipartUpload("abort", "k2/a b%")
            let encoded = try await s3.send(
                "GET", "/abort", query: [("uploads", ""), ("encoding-type", "url"), ("prefix", "k2"), ("max-uploads", "1")])
            let page = try S3XML.decode(ListMultipartUploadsResult.self, from: Data(encoded.body))
            #expect(page.encodingType == "url" && page.uploads.map(\.key) == ["k2"] && page.nextKeyMarker == "k2")
            // max-uploads=0 is an empty page that is not truncated (it has no marker to go on from).
            let none = try S3XML.decode(
                ListMultipartUploadsResult.self,
                from: Data(try await s3.send("GET", "/abort", query: [("uploads", ""), ("max-uploads", "0")]).body))
            #expect(none.uploads.isEmpty && !none.isTruncated && none.nextKeyMarker == nil)
            let next = try await s3.send(
                "GET", "/abort", query: [("uploads", ""), ("encoding-type", "url"), ("key-marker", "k2"), ("upload-id-marker", other)])
            let rest = try S3XML.decode(ListMultipartUploadsResult.self, from: Data(next.body))
            #expect(rest.uploads.map(\.key) == ["k2/a%20b%25"] && rest.uploads.map(\.uploadId) == [odd])
            let grouped = try await s3.send("GET", "/abort", query: [("uploads", ""), ("encoding-type", "url"), ("delimiter", " ")])
            #expect(try S3XML.decode(ListMultipartUploadsResult.self, from: Data(grouped.body)).commonPrefixes.map(\.prefix) == ["k2/a%20"])
            #expect(try await s3.send("GET", "/abort", query: [("uploads", ""), ("encoding-type", "base64")]).errorCode == "InvalidArgument")
            #expect(try await s3.uploadPart("abort", "k1", uploadId: id, number: 1, [1]).errorCode == "NoSuchUpload")
        }
    }

    @Test("idle uploads older than the maximum age are collected")
    func idleCollection() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("idle")
            let id = try await s3.createMultipartUpload("idle", "k")
            _ = try await s3.uploadPart("idle", "k", uploadId: id, number: 1, bytes(100, seed: 1))
            let young = try await server.server.store.abortMultipartUploads(initiatedBefore: Date().addingTimeInterval(-60))
            #expect(young == 0)
            let old = try await server.server.store.abortMultipartUploads(initiatedBefore: Date().addingTimeInterval(1))
            #expect(old == 1)
            #expect(blobFiles(server.dataDirectory).isEmpty)
        }
    }

    @Test("composite and full-object checksums of a multipart upload")
    func multipartChecksums() async throws {
        try await TestServer.inMemory(minPartSize: Self.minPart) { server in
            let s3 = server.client()
            try await s3.createBucket("checks")
            let parts = [bytes(1500, seed: 4), bytes(700, seed: 5)]
            for (algorithm, type) in [(ChecksumAlgorithm.crc32c, "COMPOSITE"), (.crc32, "FULL_OBJECT"), (.crc64nvme, "FULL_OBJECT"), (.sha256, "COMPOSITE")] {
                let key = "obj-\(algorithm.s3Name)-\(type)"
                let id = try await s3.createMultipartUpload(
                    "checks", key, headers: [("x-amz-checksum-algorithm", algorithm.s3Name), ("x-amz-checksum-type", type)])
                var etags: [(Int, String)] = []
                var values: [Int: (String, String)] = [:]
                var raw: [[UInt8]] = []
                for (index, part) in parts.enumerated() {
                    var h = Checksummer(algorithm)
                    h.update(part)
                    raw.append(h.finalize())
                    let value = h.finalizeBase64()
                    let reply = try await s3.uploadPart(
                        "checks", key, uploadId: id, number: index + 1, part, headers: [(algorithm.headerName, value)])
                    #expect(reply.status == 200)
                    etags.append((index + 1, reply.header("ETag")!))
                    values[index + 1] = (algorithm.s3Name, value)
                }
                let xml = S3TestClient.completeXML(etags, checksums: values)
                let otherType = type == "COMPOSITE" ? "FULL_OBJECT" : "COMPOSITE"
                #expect(try await s3.complete("checks", key, uploadId: id, xml: xml, headers: [("x-amz-checksum-type", otherType)]).errorCode == "BadDigest")
                let done = try await s3.complete("checks", key, uploadId: id, xml: xml, headers: [("x-amz-checksum-type", type.lowercased())])
                #expect(done.status == 200, "\(key): \(done.text)")
                let result = try S3XML.decode(CompleteMultipartUploadResult.self, from: Data(done.body))
                var whole = Checksummer(algorithm)
                whole.update(parts.flatMap { $0 })
                let expected = type == "FULL_OBJECT" ? whole.finalizeBase64() : Checksum.composite(algorithm, partChecksums: raw)
                #expect(result.checksums[algorithm.s3Name] == expected)
                #expect(result.checksumType == type)
                let head = try await s3.send("HEAD", S3TestClient.path("checks", key), headers: [("x-amz-checksum-mode", "ENABLED")])
                #expect(head.header(algorithm.headerName) == expected)
            }
            // A part whose declared checksum is wrong is rejected and not stored.
            let id = try await s3.createMultipartUpload("checks", "bad", headers: [("x-amz-checksum-algorithm", "CRC32")])
            let bad = try await s3.uploadPart("checks", "bad", uploadId: id, number: 1, parts[0], headers: [("x-amz-checksum-crc32", "AAAAAA==")])
            #expect(bad.errorCode == "BadDigest")
            // A part's checksum of another algorithm than the upload's is refused, as S3 does; one without is taken.
            var sha256 = Checksummer(.sha256)
            sha256.update(parts[0])
            let other = try await s3.uploadPart(
                "checks", "bad", uploadId: id, number: 1, parts[0], headers: [("x-amz-checksum-sha256", sha256.finalizeBase64())])
            #expect(other.status == 400 && other.errorCode == "InvalidRequest")
            #expect(other.text.contains("expected checksum Type: crc32, actual checksum Type: sha256"))
            let list = try S3XML.decode(ListPartsResult.self, from: Data(try await s3.send("GET", S3TestClient.path("checks", "bad"), query: [("uploadId", id)]).body))
            #expect(list.parts.isEmpty)
            #expect(try await s3.uploadPart("checks", "bad", uploadId: id, number: 1, parts[0]).status == 200)
        }
    }
}

/// Blob files currently visible in a data directory.
func blobFiles(_ dataDirectory: String) -> [String] {
    let root = dataDirectory + "/objects/blobs"
    let fm = FileManager.default
    return ((try? fm.contentsOfDirectory(atPath: root)) ?? []).flatMap { dir in
        ((try? fm.contentsOfDirectory(atPath: root + "/" + dir)) ?? []).map { dir + "/" + $0 }
    }
}
