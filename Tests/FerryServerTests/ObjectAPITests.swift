import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite("Object API", .timeLimit(.minutes(10)))
struct ObjectAPITests {
    @Test("put, get, head and delete keep bytes, metadata and headers")
    func objectRoundTrip() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            #expect(try await s3.createBucket("media").status == 200)
            let body = Array("hello ferry".utf8)
            let put = try await s3.put(
                "media", "videos/a b+c.mp4", body,
                headers: [
                    ("Content-Type", "video/mp4"), ("x-amz-meta-title", "Holiday"), ("x-amz-meta-", "no name"),
                    ("Content-Disposition", "attachment"), ("Cache-Control", "max-age=60"),
                ])
            #expect(put.status == 200)
            #expect(put.header("ETag") == "\"\(Insecure_md5Hex(body))\"")
            let get = try await s3.get("media", "videos/a b+c.mp4")
            #expect(get.status == 200)
            #expect(get.body == body)
            #expect(get.header("Content-Type") == "video/mp4")
            #expect(get.header("x-amz-meta-title") == "Holiday")
            // A metadata field with no name is not stored.
            #expect(get.header("x-amz-meta-") == nil)
            #expect(get.header("Content-Disposition") == "attachment")
            #expect(get.header("Cache-Control") == "max-age=60")
            // Stored bytes never act as a page of this origin (the console's): opened in a browser, they render
            // without script in an opaque origin, and their type is not guessed.
            #expect(get.header("Content-Security-Policy") == "sandbox")
            #expect(get.header("X-Content-Type-Options") == "nosniff")
            let head = try await s3.send("HEAD", S3TestClient.path("media", "videos/a b+c.mp4"))
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == String(body.count))
            #expect(head.body.isEmpty)
            #expect(try await s3.send("DELETE", S3TestClient.path("media", "videos/a b+c.mp4")).status == 204)
            let missing = try await s3.get("media", "videos/a b+c.mp4")
            #expect(missing.status == 404)
            #expect(missing.errorCode == "NoSuchKey")
            #expect(try await s3.get("nobucket", "x").errorCode == "NoSuchBucket")
        }
    }

    @Test("ranges answer 206 with Content-Range, unsatisfiable ones 416 with the size")
    func ranges() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("ranges")
            let body = (0..<1000).map { UInt8($0 % 251) }
            try await s3.put("ranges", "k", body)
            let partial = try await s3.get("ranges", "k", headers: [("Range", "bytes=10-19")])
            #expect(partial.status == 206)
            #expect(partial.body == Array(body[10...19]))
            #expect(partial.header("Content-Range") == "bytes 10-19/1000")
            let suffix = try await s3.get("ranges", "k", headers: [("Range", "bytes=-5")])
            #expect(suffix.body == Array(body[995...]))
            let open = try await s3.get("ranges", "k", headers: [("Range", "bytes=990-")])
            #expect(open.body == Array(body[990...]))
            let bad = try await s3.get("ranges", "k", headers: [("Range", "bytes=1000-2000")])
            #expect(bad.status == 416)
            #expect(bad.errorCode == "InvalidRange")
            #expect(bad.header("Content-Range") == "bytes */1000")
            // Positions past Int64 are past the object: an end is its last byte, a start unsatisfiable.
            let huge = try await s3.get("ranges", "k", headers: [("Range", "bytes=990-99999999999999999999")])
            #expect(huge.status == 206 && huge.header("Content-Range") == "bytes 990-999/1000" && huge.body == Array(body[990...]))
            #expect(try await s3.get("ranges", "k", headers: [("Range", "bytes=99999999999999999999-")]).status == 416)
            #expect(try await s3.get("ranges", "k", headers: [("Range", "bytes=-99999999999999999999")]).body == body)
        }
    }

    @Test("If-None-Match answers 304, a failed If-Match 412")
    func conditionals() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("cond")
            let first = try await s3.put("cond", "k", [1, 2, 3])
            let etag = try #require(first.header("ETag"), "\(first.status) \(first.text)")
            #expect(try await s3.get("cond", "k", headers: [("If-None-Match", etag)]).status == 304)
            #expect(try await s3.get("cond", "k", headers: [("If-Match", etag)]).status == 200)
            let failed = try await s3.get("cond", "k", headers: [("If-Match", "\"0000\"")])
            #expect(failed.status == 412)
            #expect(failed.errorCode == "PreconditionFailed")
            // If-Match compares strongly (a weak ETag never matches), If-None-Match weakly (RFC 9110).
            #expect(try await s3.get("cond", "k", headers: [("If-Match", "W/" + etag)]).status == 412)
            #expect(try await s3.get("cond", "k", headers: [("If-None-Match", "W/" + etag)]).status == 304)
            let exists = try await s3.put("cond", "k", [4], headers: [("If-None-Match", "*")])
            #expect(exists.status == 412)
            #expect(try await s3.get("cond", "k").body == [1, 2, 3])
        }
    }

    @Test("ListObjectsV2 pages, rolls up common prefixes and honours start-after")
    func listing() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("list")
            for key in ["a/1", "a/2", "b/1", "c", "d", "e/x/y"] { try await s3.put("list", key, [0]) }
            let rolled = try await s3.send("GET", "/list", query: [("list-type", "2"), ("delimiter", "/")])
            let result = try S3XML.decode(ListBucketResult.self, from: Data(rolled.body))
            #expect(result.contents.map(\.key) == ["c", "d"])
            #expect(result.commonPrefixes.map(\.prefix) == ["a/", "b/", "e/"])

            var keys: [String] = []
            var token: String?
            var pages = 0
            repeat {
                var query = [("list-type", "2"), ("max-keys", "2")]
                if let token { query.append(("continuation-token", token)) }
                let page = try S3XML.decode(
                    ListBucketResult.self, from: Data(try await s3.send("GET", "/list", query: query).body))
                keys += page.contents.map(\.key)
                token = page.nextContinuationToken
                pages += 1
                #expect(page.isTruncated == (token != nil))
            } while token != nil
            #expect(keys == ["a/1", "a/2", "b/1", "c", "d", "e/x/y"])
            #expect(pages == 3)

            let prefixed = try S3XML.decode(
                ListBucketResult.self,
                from: Data(try await s3.send("GET", "/list", query: [("list-type", "2"), ("prefix", "a/"), ("start-after", "a/1")]).body))
            #expect(prefixed.contents.map(\.key) == ["a/2"])

            // Paging through common prefixes does not repeat them.
            var prefixes: [String] = []
            token = nil
            repeat {
                var query = [("list-type", "2"), ("max-keys", "1"), ("delimiter", "/")]
                if let token { query.append(("continuation-token", token)) }
                let page = try S3XML.decode(
                    ListBucketResult.self, from: Data(try await s3.send("GET", "/list", query: query).body))
                prefixes += page.commonPrefixes.map(\.prefix) + page.contents.map(\.key)
                token = page.nextContinuationToken
            } while token != nil
            #expect(prefixes == ["a/", "b/", "c", "d", "e/"])
        }
    }

    @Test("buckets: list, head, BucketNotEmpty, delete, invalid names")
    func buckets() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("one")
            try await s3.createBucket("two")
            #expect(try await s3.createBucket("one").status == 200, "us-east-1 answers its owner's repeated CreateBucket with 200")
            #expect(try await s3.createBucket("Bad_Name").errorCode == "InvalidBucketName")
            let list = try S3XML.decode(ListAllMyBucketsResult.self, from: Data(try await s3.send("GET", "/").body))
            #expect(list.buckets.bucket.map(\.name) == ["one", "two"])
            #expect(try await s3.send("HEAD", "/one").status == 200)
            #expect(try await s3.send("HEAD", "/three").status == 404)
            try await s3.put("one", "k", [1])
            let notEmpty = try await s3.send("DELETE", "/one")
            #expect(notEmpty.status == 409)
            #expect(notEmpty.errorCode == "BucketNotEmpty")
            #expect(try await s3.send("DELETE", "/two").status == 204)
            #expect(try await s3.send("HEAD", "/two").status == 404)
        }
    }

    @Test("keys with '..' segments, over 1024 bytes, or distinct encodings are handled safely")
    func keys() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("keys")
            let traversal = try await s3.put("keys", "a/../../etc/passwd", [1])
            #expect(traversal.status == 400)
            #expect(traversal.errorCode == "InvalidArgument")
            let long = try await s3.put("keys", String(repeating: "k", count: 2048), [1])
            #expect(long.status == 400)
            #expect(long.errorCode == "KeyTooLongError")
            try await s3.put("keys", "a/b", [1])
            try await s3.put("keys", "a%2Fb", [2])
            #expect(try await s3.get("keys", "a/b").body == [1])
            #expect(try await s3.get("keys", "a%2Fb").body == [2])
            let listing = try S3XML.decode(ListBucketResult.self, from: Data(try await s3.send("GET", "/keys", query: [("list-type", "2")]).body))
            #expect(listing.contents.map(\.key) == ["a%2Fb", "a/b"])
            // Escapes of bytes that are not UTF-8 name no key (repaired, two of them would be one).
            for path in ["/keys/u8%FF", "/keys/u8%FE", "/ke%FFys/k"] {
                let invalid = try await s3.send("PUT", path, body: [1])
                #expect(invalid.status == 400 && invalid.errorCode == "InvalidURI", "\(path): \(invalid.text)")
            }
            // A character XML cannot carry, in a listing's parameters, names no key and could not be written back.
            for (name, value) in [("prefix", "a\u{0}"), ("start-after", "\u{1}"), ("delimiter", "\u{B}")] {
                let refused = try await s3.send("GET", "/keys", query: [("list-type", "2"), (name, value)])
                #expect(refused.status == 400 && refused.errorCode == "InvalidArgument", "\(name): \(refused.text)")
            }
        }
    }
}

/// Hex MD5, as an ETag.
func Insecure_md5Hex(_ bytes: [UInt8]) -> String {
    var hasher = Checksummer(.md5)
    hasher.update(bytes)
    return hasher.finalize().map { String(format: "%02x", $0) }.joined()
}
