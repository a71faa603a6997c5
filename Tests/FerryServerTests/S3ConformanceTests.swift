import FerryCore
import FerryTestSupport
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

@Suite("S3 conformance: conditional writes, completions, listings, names and headers", .timeLimit(.minutes(10)))
struct S3ConformanceTests {
    @Test("conditional PUT, CompleteMultipartUpload and DELETE: 412 or 404 as S3 answers, and nothing changes")
    func conditionalWrites() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("cond")
            let first = try await s3.put("cond", "k", [1], headers: [("If-None-Match", "*")])
            #expect(first.status == 200)
            let etag = try #require(first.header("ETag"))
            #expect(try await s3.put("cond", "k", [2], headers: [("If-None-Match", "*")]).status == 412)
            #expect(try await s3.put("cond", "k", [2], headers: [("If-None-Match", etag)]).status == 412)
            #expect(try await s3.put("cond", "k", [2], headers: [("If-Match", "\"0000\"")]).status == 412)
            #expect(try await s3.get("cond", "k").body == [1])
            #expect(try await s3.put("cond", "missing", [2], headers: [("If-Match", "*")]).errorCode == "NoSuchKey")
            #expect(try await s3.get("cond", "missing").status == 404)
            let replaced = try await s3.put("cond", "k", [3], headers: [("If-Match", etag)])
            #expect(replaced.status == 200)
            #expect(try await s3.get("cond", "k").body == [3])

            // CompleteMultipartUpload with If-None-Match on an existing key: refused, and the upload stays.
            let id = try await s3.createMultipartUpload("cond", "k")
            let part = try #require(try await s3.uploadPart("cond", "k", uploadId: id, number: 1, [4]).header("ETag"))
            let xml = S3TestClient.completeXML([(1, part)])
            let refused = try await s3.complete("cond", "k", uploadId: id, xml: xml, headers: [("If-None-Match", "*")])
            #expect(refused.status == 412)
            #expect(try await s3.get("cond", "k").body == [3])
            let retried = try await s3.complete("cond", "k", uploadId: id, xml: xml, headers: [("If-Match", replaced.header("ETag")!)])
            #expect(retried.status == 200, "\(retried.text)")
            #expect(try await s3.get("cond", "k").body == [4])

            // DELETE with a failing If-Match keeps the object; a missing key deletes fine whatever the condition.
            let current = try #require(try await s3.get("cond", "k").header("ETag"))
            #expect(try await s3.send("DELETE", "/cond/k", headers: [("If-Match", "\"0000\"")]).status == 412)
            #expect(try await s3.get("cond", "k").status == 200)
            #expect(try await s3.send("DELETE", "/cond/k", headers: [("x-amz-if-match-size", "99")]).status == 412)
            #expect(try await s3.send("DELETE", "/cond/k", headers: [("If-Match", current)]).status == 204)
            #expect(try await s3.send("DELETE", "/cond/k", headers: [("If-Match", "\"0000\"")]).status == 204)
        }
    }

    @Test("a retried CompleteMultipartUpload answers 200 with the same object, also once the key was overwritten; one of an aborted upload is NoSuchUpload")
    func completeIsIdempotent() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("retry")
            let id = try await s3.createMultipartUpload("retry", "k", headers: [("x-amz-checksum-algorithm", "CRC32C")])
            let body: [UInt8] = [1, 2, 3]
            let crc = Checksum.base64(Checksum.digest(.crc32c, of: body))
            let etag = try #require(try await s3.uploadPart("retry", "k", uploadId: id, number: 1, body, headers: [("x-amz-checksum-crc32c", crc)]).header("ETag"))
            let xml = S3TestClient.completeXML([(1, etag)], checksums: [1: ("CRC32C", crc)])
            let first = try await s3.complete("retry", "k", uploadId: id, xml: xml)
            #expect(first.status == 200)
            let again = try await s3.complete("retry", "k", uploadId: id, xml: xml)
            #expect(again.status == 200)
            let a = try S3XML.decode(CompleteMultipartUploadResult.self, from: Data(first.body))
            let b = try S3XML.decode(CompleteMultipartUploadResult.self, from: Data(again.body))
            #expect(a.eTag == b.eTag)
            #expect(a.checksums == b.checksums)
            // Other parts than those completed are not the same completion.
            #expect(try await s3.complete("retry", "k", uploadId: id, xml: S3TestClient.completeXML([(1, "\"0000\"")])).errorCode == "NoSuchUpload")
            // A key overwritten since: the retry (a client that lost the first answer) still hears that its upload
            // completed, and nothing is written again.
            try await s3.put("retry", "k", [9])
            let late = try await s3.complete("retry", "k", uploadId: id, xml: xml)
            #expect(late.status == 200, "\(late.text)")
            #expect(try S3XML.decode(CompleteMultipartUploadResult.self, from: Data(late.body)).eTag == a.eTag)
            #expect(try await s3.get("retry", "k").body == [9])
            // A Complete of an upload aborted meanwhile is NoSuchUpload, whatever it lists.
            let aborted = try await s3.createMultipartUpload("retry", "gone")
            let part = try #require(try await s3.uploadPart("retry", "gone", uploadId: aborted, number: 1, [4]).header("ETag"))
            #expect(try await s3.send("DELETE", S3TestClient.path("retry", "gone"), query: [("uploadId", aborted)]).status == 204)
            #expect(try await s3.complete("retry", "gone", uploadId: aborted, xml: S3TestClient.completeXML([(1, part)])).errorCode == "NoSuchUpload")
        }
    }

    @Test("a key overwritten without pause: GET, CopyObject, UploadPartCopy and PutObjectTagging of it answer 200 (or 503 SlowDown, which clients retry), never 500 or NoSuchKey")
    func readsOfAKeyUnderOverwrites() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("churn")
            #expect(try await s3.put("churn", "hot", [0]).status == 200)
            let upload = try await s3.createMultipartUpload("churn", "parts")
            let deadline = ContinuousClock.now + .seconds(3)
            let answers = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var round = 0
                        while ContinuousClock.now < deadline {
                            round += 1
                            _ = try await s3.put("churn", "hot", [UInt8](repeating: UInt8(writer), count: 1 + round % 1000))
                        }
                        return []
                    }
                }
                for reader in 0..<4 {
                    group.addTask {
                        var seen: [String] = []
                        let tagging = Array("<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>".utf8)
                        while ContinuousClock.now < deadline {
                            let reply: S3TestClient.Reply
                            switch reader {
                            case 0: reply = try await s3.get("churn", "hot")
                            case 1:
                                reply = try await s3.send(
                                    "PUT", S3TestClient.path("churn", "copy"), headers: [("x-amz-copy-source", "/churn/hot")])
                            case 2:
                                reply = try await s3.send(
                                    "PUT", S3TestClient.path("churn", "parts"),
                                    query: [("partNumber", "1"), ("uploadId", upload)], headers: [("x-amz-copy-source", "/churn/hot")])
                            default:
                                reply = try await s3.send("PUT", S3TestClient.path("churn", "hot"), query: [("tagging", "")], body: tagging)
                            }
                            seen.append(reply.status == 200 ? "200" : "\(reader): \(reply.status) \(reply.errorCode ?? "")")
                        }
                        return seen
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let refused = answers.filter { $0 != "200" && !$0.hasSuffix("503 SlowDown") }
            #expect(refused.isEmpty, "\(refused.count) of \(answers.count): \(Set(refused))")
            #expect(answers.count > 100)
        }
    }

    @Test("a Range with an If-Range that no longer names the object gets all of it (200); an aws-chunked length that is not a whole number is InvalidArgument, one past any object EntityTooLarge; an aws-chunked body not signed as STREAMING is InvalidRequest, nothing stored")
    func ifRangeAndDecodedLength() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("ranges")
            let path = S3TestClient.path("ranges", "ten")
            #expect(try await s3.put("ranges", "ten", Array("0123456789".utf8)).status == 200)
            let head = try await s3.send("HEAD", path)
            let etag = try #require(head.header("ETag"))
            let modified = try #require(head.header("Last-Modified"))
            for (condition, status) in [
                (etag, 206), (modified, 206), ("\"0123456789abcdef0123456789abcdef\"", 200),
                ("Thu, 01 Jan 1970 00:00:00 GMT", 200), ("W/\(etag)", 200),
            ] {
                let reply = try await s3.send("GET", path, headers: [("Range", "bytes=0-1"), ("If-Range", condition)])
                #expect(reply.status == status, "If-Range \(condition): \(reply.status)")
                #expect(reply.body.count == (status == 206 ? 2 : 10), "If-Range \(condition): \(reply.body.count) bytes")
            }
            for (value, code) in [("-1", "InvalidArgument"), ("1e3", "InvalidArgument"), ("99999999999999999999", "EntityTooLarge")] {
                let reply = try await s3.send(
                    "PUT", S3TestClient.path("ranges", "chunked"),
                    headers: [("content-encoding", "aws-chunked"), ("x-amz-decoded-content-length", value)],
                    body: Array("0\r\n\r\n".utf8), payload: .hash(SigV4.streamingUnsignedPayloadTrailer))
                #expect(reply.errorCode == code, "\(value): \(reply.status) \(reply.text)")
            }
            // Framed as aws-chunked but signed as a plain body (UNSIGNED-PAYLOAD, a body hash, presigned): refused, not
            // stored with its framing as its bytes; a part likewise.
            let framed = Array("5\r\nhello\r\n0\r\n\r\n".utf8)
            let framing: [(name: String, value: String)] = [
                ("content-encoding", "gzip, aws-chunked"), ("x-amz-decoded-content-length", "5"),
            ]
            for payload in [S3TestClient.Payload.unsigned, .signed] {
                let reply = try await s3.send(
                    "PUT", S3TestClient.path("ranges", "chunked"), headers: framing, body: framed, payload: payload)
                #expect(reply.errorCode == "InvalidRequest", "\(payload): \(reply.status) \(reply.text)")
            }
            // The encoding alone on a plain body is dropped, as S3 drops it (s3-tests'
            // test_object_content_encoding_aws_chunked).
            #expect(
                try await s3.send(
                    "PUT", S3TestClient.path("ranges", "plain"), headers: [("content-encoding", "aws-chunked")],
                    body: Array("plain".utf8)
                ).status == 200)
            #expect(try await s3.get("ranges", "plain").header("Content-Encoding") == nil)
            let uploadId = try await s3.createMultipartUpload("ranges", "parted")
            let part = try await s3.send(
                "PUT", S3TestClient.path("ranges", "parted"),
                query: [("partNumber", "1"), ("uploadId", uploadId)], headers: framing, body: framed, payload: .unsigned)
            #expect(part.errorCode == "InvalidRequest", "\(part.status) \(part.text)")
            #expect(try await s3.get("ranges", "chunked").status == 404)
        }
    }

    @Test("a wrong full-object checksum on CompleteMultipartUpload is BadDigest and the upload can still complete")
    func completeChecksIntegrity() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("sums")
            for type in ["COMPOSITE", "FULL_OBJECT"] {
                let algorithm = type == "COMPOSITE" ? ChecksumAlgorithm.sha256 : .crc32
                let id = try await s3.createMultipartUpload(
                    "sums", type, headers: [("x-amz-checksum-algorithm", algorithm.s3Name), ("x-amz-checksum-type", type)])
                let part: [UInt8] = Array("part one".utf8)
                let value = Checksum.base64(Checksum.digest(algorithm, of: part))
                let etag = try #require(try await s3.uploadPart("sums", type, uploadId: id, number: 1, part, headers: [(algorithm.headerName, value)]).header("ETag"))
                let xml = S3TestClient.completeXML([(1, etag)], checksums: [1: (algorithm.s3Name, value)])
                let wrong = Checksum.base64(Checksum.digest(algorithm, of: [0]))
                for bad in [wrong, "bad"] {
                    let reply = try await s3.complete("sums", type, uploadId: id, xml: xml, headers: [(algorithm.headerName, bad)])
                    #expect(reply.errorCode == "BadDigest", "\(type) \(bad): \(reply.text)")
                }
                #expect(try await s3.get("sums", type).status == 404)
                let other = try await s3.complete("sums", type, uploadId: id, xml: xml, headers: [("x-amz-checksum-sha1", Checksum.base64(Checksum.digest(.sha1, of: part)))])
                #expect(other.errorCode == "InvalidRequest")
                let declared = type == "COMPOSITE" ? Checksum.composite(algorithm, partChecksums: [Checksum.digest(algorithm, of: part)]) : value
                let good = try await s3.complete("sums", type, uploadId: id, xml: xml, headers: [(algorithm.headerName, declared)])
                #expect(good.status == 200, "\(type): \(good.text)")
                #expect(try await s3.get("sums", type).body == part)
            }
        }
    }

    @Test("ListObjects v1: marker, NextMarker, Marker element, encoding only when asked; max-keys=0 is not truncated")
    func listObjectsV1() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("list1")
            for key in ["asdf", "boo/bar", "boo/baz/xyzzy", "cquux/thud", "cquux/bla", "sp ace"] { try await s3.put("list1", key, [0]) }
            let first = try await s3.send("GET", "/list1", query: [("delimiter", "/"), ("max-keys", "2")])
            #expect(first.status == 200)
            #expect(first.text.contains("<Marker></Marker>"))
            #expect(first.text.contains("<IsTruncated>true</IsTruncated>"))
            #expect(first.text.contains("<NextMarker>boo/</NextMarker>"))
            #expect(first.text.contains("<Owner>"))
            // Without a delimiter S3 sends no NextMarker: the last key is the next page's marker.
            let plain = try await s3.send("GET", "/list1", query: [("max-keys", "2")])
            #expect(plain.text.contains("<IsTruncated>true</IsTruncated>") && !plain.text.contains("NextMarker"), "\(plain.text)")
            let second = try await s3.send("GET", "/list1", query: [("delimiter", "/"), ("marker", "boo/")])
            #expect(second.text.contains("<Prefix>cquux/</Prefix>"))
            #expect(!second.text.contains("<Key>boo/"), "a common-prefix marker skips the keys under it")
            #expect(second.text.contains("<Key>sp ace</Key>"), "keys are not URL-encoded unless asked")
            let encoded = try await s3.send("GET", "/list1", query: [("encoding-type", "url"), ("prefix", "sp")])
            #expect(encoded.text.contains("<Key>sp%20ace</Key>"))
            #expect(encoded.text.contains("<EncodingType>url</EncodingType>"))
            for query in [[("max-keys", "0")], [("max-keys", "0"), ("list-type", "2")]] {
                let none = try await s3.send("GET", "/list1", query: query)
                #expect(none.text.contains("<IsTruncated>false</IsTruncated>"))
                #expect(!none.text.contains("<Contents>"))
            }
            let owners = try await s3.send("GET", "/list1", query: [("list-type", "2"), ("fetch-owner", "true")])
            #expect(owners.text.contains("<Owner>"))
            #expect(!(try await s3.send("GET", "/list1", query: [("list-type", "2")])).text.contains("<Owner>"))
            #expect(try await s3.send("GET", "/list1", query: [("encoding-type", "base64")]).errorCode == "InvalidArgument")
        }
    }

    @Test("max-parts=0 (ListParts, GetObjectAttributes) is an untruncated page; a query whose escapes are not UTF-8 is InvalidURI; a copy source encoded whole, its leading slash too, is read; an expected bucket owner other than ferry is AccessDenied, with nothing written")
    func readingEdges() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("edges")
            let uploadId = try await s3.createMultipartUpload("edges", "parts")
            let part = [UInt8](repeating: 7, count: 5 * 1024 * 1024)
            let etag = try #require(try await s3.uploadPart("edges", "parts", uploadId: uploadId, number: 1, part).header("ETag"))
            #expect(try await s3.uploadPart("edges", "parts", uploadId: uploadId, number: 2, [1]).status == 200)
            let none = try await s3.send("GET", "/edges/parts", query: [("uploadId", uploadId), ("max-parts", "0")])
            #expect(none.status == 200 && none.text.contains("<IsTruncated>false</IsTruncated>"), "\(none.text)")
            let one = try await s3.send("GET", "/edges/parts", query: [("uploadId", uploadId), ("max-parts", "1")])
            #expect(one.text.contains("<IsTruncated>true</IsTruncated>"), "\(one.text)")
            let parts = try await s3.complete("edges", "parts", uploadId: uploadId, xml: S3TestClient.completeXML([(1, etag)]))
            #expect(parts.status == 200, "\(parts.text)")
            let attributes = try await s3.send(
                "GET", "/edges/parts", query: [("attributes", "")],
                headers: [("x-amz-object-attributes", "ObjectParts"), ("x-amz-max-parts", "0")])
            #expect(attributes.status == 200 && attributes.text.contains("<IsTruncated>false</IsTruncated>"), "\(attributes.text)")

            // A continuation token that decodes to what no key holds (NUL) is not a listing's.
            let nul = try await s3.send("GET", "/edges", query: [("list-type", "2"), ("continuation-token", "AAAA")])
            #expect(nul.status == 400 && nul.errorCode == "InvalidArgument", "\(nul.text)")
            for query in ["list-type=2&prefix=%FF", "prefix=%ED%A0%80", "%FE=1"] {
                let reply = try await s3.sendRaw("GET", "/edges?" + query, headers: [])
                #expect(reply.status == 400 && reply.errorCode == "InvalidURI", "\(query): \(reply.status) \(reply.text)")
            }

            try await s3.put("edges", "source", [1, 2, 3])
            for source in ["%2Fedges%2Fsource", "/edges/source", "edges%2Fsource"] {
                let copy = try await s3.send("PUT", "/edges/copy", headers: [("x-amz-copy-source", source)])
                #expect(copy.status == 200, "\(source): \(copy.text)")
            }

            let owner = [("x-amz-expected-bucket-owner", "111122223333")]
            #expect(try await s3.put("edges", "owned", [1], headers: owner).errorCode == "AccessDenied")
            #expect(try await s3.send("GET", "/edges", query: [("list-type", "2")], headers: owner).errorCode == "AccessDenied")
            let sourceOwner = [("x-amz-copy-source", "/edges/source"), ("x-amz-source-expected-bucket-owner", "other")]
            #expect(try await s3.send("PUT", "/edges/owned", headers: sourceOwner).errorCode == "AccessDenied")
            #expect(try await s3.get("edges", "owned").status == 404)
            #expect(try await s3.put("edges", "owned", [1], headers: [("x-amz-expected-bucket-owner", "ferry")]).status == 200)

            // A tag needs its Value element, which may be empty.
            func tagging(_ tag: String) async throws -> S3TestClient.Reply {
                try await s3.send(
                    "PUT", "/edges/owned", query: [("tagging", "")],
                    body: Array("<Tagging><TagSet><Tag>\(tag)</Tag></TagSet></Tagging>".utf8))
            }
            #expect(try await tagging("<Key>a</Key>").errorCode == "MalformedXML")
            #expect(try await tagging("<Key>a</Key><Value></Value>").status == 200)
            #expect(try await tagging("<Key>b</Key><Value/>").status == 200)
            let tags = try await s3.send("GET", "/edges/owned", query: [("tagging", "")])
            #expect(tags.text.contains("<Key>b</Key>") && !tags.text.contains("<Key>a</Key>"), "\(tags.text)")
        }
    }

    @Test("ListBuckets pages with max-buckets and continuation-token, and filters by prefix")
    func listBucketsPaging() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            for name in ["aaa", "bbb", "bbc", "ccc"] { try await s3.createBucket(name) }
            var names: [String] = []
            var token: String?
            repeat {
                var query = [("max-buckets", "1")]
                if let token { query.append(("continuation-token", token)) }
                let page = try S3XML.decode(ListAllMyBucketsResult.self, from: Data(try await s3.send("GET", "/", query: query).body))
                #expect(page.buckets.bucket.count == 1)
                names += page.buckets.bucket.map(\.name)
                token = page.continuationToken
            } while token != nil
            #expect(names == ["aaa", "bbb", "bbc", "ccc"])
            let prefixed = try S3XML.decode(ListAllMyBucketsResult.self, from: Data(try await s3.send("GET", "/", query: [("prefix", "bb")]).body))
            #expect(prefixed.buckets.bucket.map(\.name) == ["bbb", "bbc"])
            #expect(try await s3.send("GET", "/", query: [("max-buckets", "0")]).errorCode == "InvalidArgument")
        }
    }

    @Test("bucket names S3 refuses are refused; a repeated CreateBucket answers as the region does")
    func bucketNames() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            for name in ["192.168.5.4", "a.-b", "a-.b", "xn--abc", "sthree-abc", "amzn-s3-demo-x", "abc-s3alias", "abc--ol-s3", "abc.mrap", "abc--x-s3", "abc--table-s3", "ab", "a..b", "-ab", "ab-", "Abc"] {
                #expect(try await s3.createBucket(name).errorCode == "InvalidBucketName", "\(name)")
            }
            #expect(try await s3.createBucket("192.168.5.4x").status == 200)
            #expect(try await s3.createBucket("xn-abc").status == 200)
            try await s3.put("xn-abc", "k", [1])
            // us-east-1 answers 200 to its owner, as S3 does there, and keeps the objects.
            #expect(try await s3.createBucket("xn-abc").status == 200)
            #expect(try await s3.get("xn-abc", "k").body == [1])
        }
        try await TestServer.inMemory(configure: { $0.region = "eu-west-1" }) { server in
            // A signature scoped to another region is refused before anything happens, as S3 does.
            #expect(try await server.client().createBucket("mine").errorCode == "AuthorizationHeaderMalformed")
            var s3 = server.client()
            s3.region = "eu-west-1"
            try await s3.createBucket("mine")
            #expect(try await s3.createBucket("mine").errorCode == "BucketAlreadyOwnedByYou")
        }
    }

    @Test("a 304 carries ETag and Last-Modified; Content-Encoding is stored as sent; metadata over 2 KiB is refused")
    func headers() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("hdrs")
            let put = try await s3.put("hdrs", "k", [1], headers: [("Cache-Control", "max-age=5")])
            try await s3.put("hdrs", "enc", [1], headers: [("Content-Encoding", "deflate, gzip")])
            let etag = try #require(put.header("ETag"))
            let notModified = try await s3.get("hdrs", "k", headers: [("If-None-Match", etag)])
            #expect(notModified.status == 304)
            #expect(notModified.header("ETag") == etag)
            #expect(notModified.header("Last-Modified") != nil)
            #expect(notModified.header("Cache-Control") == "max-age=5")
            let since = try await s3.get("hdrs", "k", headers: [("If-Modified-Since", S3Date.http(Date().addingTimeInterval(60)))])
            #expect(since.status == 304)
            #expect(since.header("ETag") == etag)
            // Read from the store: the test client would try to decompress a body that is not really compressed.
            #expect(try await server.server.store.object(bucket: "hdrs", key: "enc").attributes.contentEncoding == "deflate, gzip")
            let big = try await s3.put("hdrs", "meta", [1], headers: [("x-amz-meta-big", String(repeating: "m", count: 2100))])
            #expect(big.errorCode == "MetadataTooLarge")
            #expect(try await s3.get("hdrs", "meta").status == 404)
            // Non-ASCII metadata is stored decoded and sent as an RFC 2047 word, as S3 does.
            try await s3.put("hdrs", "utf8", [1], headers: [("x-amz-meta-title", "=?UTF-8?B?\(Data("Café".utf8).base64EncodedString())?=")])
            #expect(try await server.server.store.object(bucket: "hdrs", key: "utf8").attributes.userMetadata["title"] == "Café")
            #expect(try await s3.get("hdrs", "utf8").header("x-amz-meta-title") == "=?UTF-8?B?Q2Fmw6k=?=")
            try await s3.put("hdrs", "q", [1], headers: [("x-amz-meta-title", "=?utf-8?Q?Caf=C3=A9_au_lait?=")])
            #expect(try await server.server.store.object(bucket: "hdrs", key: "q").attributes.userMetadata["title"] == "Café au lait")
            let missing = try await s3.send("HEAD", "/hdrs/nothing")
            #expect(missing.status == 404)
            #expect(missing.header("x-amz-delete-marker") == "false")
            // An unparsable Range is ignored (200 with the whole object), as S3 does.
            #expect(try await s3.get("hdrs", "k", headers: [("Range", "bytes=--1")]).status == 200)
            // A control character in a key is refused before anything happens, in a well-formed error document.
            #expect(try await s3.send("GET", "/hdrs/%C2%8A").errorCode == "InvalidURI")
            let control = try await s3.send("GET", "/hdrs/a%01b%0Dc")
            #expect(control.errorCode == "InvalidURI")
            #expect(control.text.contains("<Resource>/hdrs/a\u{FFFD}b&#13;c</Resource>"), "\(control.text)")
            #expect(XMLParser(data: Data(control.body)).parse(), "the error document is not well-formed XML")
            // What was not found is named as S3 names it; the request id is the host id too.
            let noKey = try await s3.get("hdrs", "no/such key")
            #expect(noKey.text.contains("<Key>no/such key</Key>") && noKey.text.contains("<Resource>/hdrs/no/such key</Resource>"))
            let requestId = try #require(noKey.header("x-amz-request-id"))
            #expect(noKey.text.contains("<HostId>\(requestId)</HostId>") && noKey.header("x-amz-id-2") == requestId)
            let noBucket = try await s3.get("no-such-bucket-here", "k")
            #expect(noBucket.errorCode == "NoSuchBucket" && noBucket.text.contains("<BucketName>no-such-bucket-here</BucketName>"))
            // What a copy did not find is its source, which the path does not name: S3 names the source.
            let copy = try await s3.send("PUT", "/hdrs/copy-target", headers: [("x-amz-copy-source", "/hdrs/no-such-source")])
            #expect(copy.errorCode == "NoSuchKey" && copy.text.contains("<Key>no-such-source</Key>"), "\(copy.text)")
            #expect(!copy.text.contains("<Key>copy-target</Key>"))
            let copyBucket = try await s3.send("PUT", "/hdrs/copy-target", headers: [("x-amz-copy-source", "/no-such-bucket-here/k")])
            #expect(copyBucket.errorCode == "NoSuchBucket" && copyBucket.text.contains("<BucketName>no-such-bucket-here</BucketName>"), "\(copyBucket.text)")
            let uploadId = try await s3.createMultipartUpload("hdrs", "copy-target")
            let partCopy = try await s3.send(
                "PUT", "/hdrs/copy-target", query: [("partNumber", "1"), ("uploadId", uploadId)],
                headers: [("x-amz-copy-source", "/hdrs/no-such-source")])
            #expect(partCopy.errorCode == "NoSuchKey" && partCopy.text.contains("<Key>no-such-source</Key>"), "\(partCopy.text)")
        }
    }

    @Test("a request signed with Date instead of X-Amz-Date is accepted; an unsigned Date is not")
    func dateHeaderSigning() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("dated")
            // A whole second, as a Date header carries: the header and the string to sign then name the same time.
            let date = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            let unsignedDate = try await s3.sendSignedWithDateHeader("PUT", "/dated/k", body: [1], date: date, signDate: false)
            #expect(unsignedDate.errorCode == "AuthorizationHeaderMalformed")
            #expect(try await s3.get("dated", "k").status == 404)
            let reply = try await s3.sendSignedWithDateHeader("PUT", "/dated/k", body: [2], date: date)
            #expect(reply.status == 200, "\(reply.text)")
            #expect(try await s3.get("dated", "k").body == [2])
        }
    }
}

extension S3TestClient {
    /// Signs a request whose time is carried by `Date` (RFC 9110 format) rather than `X-Amz-Date`, as botocore does
    /// when a Date header is present.
    func sendSignedWithDateHeader(_ method: String, _ path: String, body: [UInt8], date: Date, signDate: Bool = true)
        async throws -> Reply
    {
        let url = URL(string: endpoint)!
        let host = "\(url.host!):\(url.port!)"
        let hash = SigV4.hexSHA256(body)
        let headers: [(name: String, value: String)] = [
            ("host", host), ("date", S3Date.http(date)), ("x-amz-content-sha256", hash),
        ]
        let scope = SigV4Scope(date: date, region: region, service: "s3")
        let signedNames = headers.map(\.name).filter { signDate || $0 != "date" }.sorted()
        let canonical = SigV4.canonicalRequest(
            method: method, canonicalURI: SigV4.canonicalURI(fromRawPath: path), query: [], headers: headers,
            signedHeaders: signedNames, payloadHash: hash)
        let stringToSign = SigV4.stringToSign(timestamp: SigV4.timestamp(date), scope: scope, canonicalRequest: canonical)
        let signature = SigV4.signature(
            signingKey: SigV4.signingKey(secretAccessKey: credentials.secretAccessKey, scope: scope), stringToSign: stringToSign)
        let authorization = "\(SigV4.algorithm) Credential=\(credentials.accessKeyId)/\(scope.string),SignedHeaders=\(signedNames.joined(separator: ";")),Signature=\(signature)"
        return try await sendRaw(method, path, headers: headers + [("Authorization", authorization)], body: body)
    }
}
