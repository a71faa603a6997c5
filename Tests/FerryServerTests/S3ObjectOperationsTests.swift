import AsyncHTTPClient
import FerryCore
@testable import FerryServer
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Base64 MD5, as `Content-MD5`.
func contentMD5(_ bytes: [UInt8]) -> String {
    var hasher = Checksummer(.md5)
    hasher.update(bytes)
    return Data(hasher.finalize()).base64EncodedString()
}

@Suite("S3 object operations: DeleteObjects, copies, tagging, attributes, parts", .timeLimit(.minutes(10)))
struct S3ObjectOperationsTests {
    func bytes(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

    func deleteXML(_ keys: [String], quiet: Bool = false) -> [UInt8] {
        var xml = "<Delete>" + (quiet ? "<Quiet>true</Quiet>" : "")
        for key in keys { xml += "<Object><Key>\(S3XML.escape(key))</Key></Object>" }
        return Array((xml + "</Delete>").utf8)
    }

    @Test("DeleteObjects deletes up to 1000 keys, quiet or verbose, and requires Content-MD5 or a checksum")
    func deleteObjects() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("batch")
            let keys = ["a", " ", "_ ", "dir/b", "<&>"]
            for key in keys { try await s3.put("batch", key, [1]) }

            let body = deleteXML(keys + ["never-existed"])
            let noDigest = try await s3.send("POST", "/batch", query: [("delete", "")], body: body)
            #expect(noDigest.status == 400)
            #expect(noDigest.errorCode == "InvalidRequest")
            let badDigest = try await s3.send(
                "POST", "/batch", query: [("delete", "")], headers: [("Content-MD5", contentMD5([0]))], body: body)
            #expect(badDigest.errorCode == "BadDigest")
            #expect(try await s3.get("batch", "a").status == 200, "a refused request deleted something")

            let verbose = try await s3.send(
                "POST", "/batch", query: [("delete", "")], headers: [("Content-MD5", contentMD5(body))], body: body)
            #expect(verbose.status == 200)
            for key in keys + ["never-existed"] {
                #expect(verbose.text.contains("<Deleted><Key>\(S3XML.escape(key))</Key></Deleted>"), "\(key): \(verbose.text)")
                #expect(try await s3.get("batch", key).status == 404)
            }

            for key in ["x", "y"] { try await s3.put("batch", key, [2]) }
            let quietBody = deleteXML(["x", "y", "../escape", ""], quiet: true)
            let quiet = try await s3.send(
                "POST", "/batch", query: [("delete", "")],
                headers: [("x-amz-checksum-crc32", Checksum.base64(Checksum.digest(.crc32, of: quietBody)))], body: quietBody)
            #expect(quiet.status == 200)
            #expect(!quiet.text.contains("<Deleted>"))
            #expect(quiet.text.contains("<Error><Key>../escape</Key>"), "\(quiet.text)")
            #expect(quiet.text.contains("<Key></Key><Code>UserKeyMustBeSpecified</Code>"), "\(quiet.text)")
            #expect(try await s3.get("batch", "x").status == 404)

            // Quiet is an xs:boolean: `1` is true, `yes` is no boolean (and deletes nothing).
            try await s3.put("batch", "z", [3])
            for (spelling, status) in [("yes", 400), (" true\n", 200), ("1", 200)] {
                let odd = Array("<Delete><Quiet>\(spelling)</Quiet><Object><Key>z</Key></Object></Delete>".utf8)
                let answer = try await s3.send(
                    "POST", "/batch", query: [("delete", "")], headers: [("Content-MD5", contentMD5(odd))], body: odd)
                #expect(answer.status == status, "\(spelling): \(answer.text)")
                if status == 400 {
                    #expect(answer.errorCode == "MalformedXML")
                    #expect(try await s3.get("batch", "z").status == 200, "a malformed Delete deleted")
                } else {
                    #expect(!answer.text.contains("<Deleted>"))
                }
            }

            let tooMany = deleteXML((0...1000).map { "k\($0)" })
            let refused = try await s3.send(
                "POST", "/batch", query: [("delete", "")], headers: [("Content-MD5", contentMD5(tooMany))], body: tooMany)
            #expect(refused.errorCode == "MalformedXML")
        }
    }

    @Test("DeleteObjects checks s3:DeleteObject per key: a prefix-scoped key deletes only inside its prefix")
    func deleteObjectsPerKeyPolicy() async throws {
        try await TestServer.inMemory { server in
            let root = server.client()
            try await root.createBucket("scoped")
            try await root.put("scoped", "mine/1", [1])
            try await root.put("scoped", "theirs/1", [1])
            let key = try await server.server.credentials.createTestKey(
                catalog: server.server.catalog,
                policy: AccessPolicy(statements: [.init(actions: ["s3:*"], bucket: "scoped", keyPrefix: "mine/")]))
            let scoped = server.client(key)
            let body = deleteXML(["mine/1", "theirs/1"])
            let reply = try await scoped.send(
                "POST", "/scoped", query: [("delete", "")], headers: [("Content-MD5", contentMD5(body))], body: body)
            #expect(reply.text.contains("<Deleted><Key>mine/1</Key></Deleted>"))
            #expect(reply.text.contains("<Error><Key>theirs/1</Key><Code>AccessDenied</Code>"), "\(reply.text)")
            #expect(try await root.get("scoped", "theirs/1").status == 200)
        }
    }

    @Test("CopyObject copies or replaces metadata and tags, checks source conditions, and shares the bytes on disk")
    func copyObject() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("src")
            try await s3.createBucket("dst")
            let body = bytes(70_000, seed: 3)
            let put = try await s3.put(
                "src", "a b.bin", body,
                headers: [("Content-Type", "video/mp4"), ("x-amz-meta-title", "Holiday"), ("x-amz-tagging", "k=v")])
            let etag = try #require(put.header("ETag"))

            let copied = try await s3.send(
                "PUT", S3TestClient.path("dst", "copy.bin"), headers: [("x-amz-copy-source", "/src/a%20b.bin")])
            #expect(copied.status == 200, "\(copied.text)")
            #expect(copied.text.contains("<CopyObjectResult"))
            #expect(copied.text.contains("<ETag>\(etag.replacingOccurrences(of: "\"", with: "&quot;"))</ETag>") || copied.text.contains("<ETag>\(etag)</ETag>"))
            let get = try await s3.get("dst", "copy.bin")
            #expect(get.body == body)
            #expect(get.header("Content-Type") == "video/mp4")
            #expect(get.header("x-amz-meta-title") == "Holiday")
            #expect(get.header("x-amz-tagging-count") == "1")

            // The copy shares the source's file (a hard link), and outlives it.
            let source = try await server.server.store.object(bucket: "src", key: "a b.bin")
            let copy = try await server.server.store.object(bucket: "dst", key: "copy.bin")
            #expect(copy.manifest.map(\.blob) != source.manifest.map(\.blob))
            let files = try #require(server.server.store.files as? BlobFiles)
            let sourceInode = try FileManager.default.attributesOfItem(atPath: files.path(of: source.manifest[0].blob))[.systemFileNumber] as? Int
            let copyInode = try FileManager.default.attributesOfItem(atPath: files.path(of: copy.manifest[0].blob))[.systemFileNumber] as? Int
            #expect(sourceInode != nil && sourceInode == copyInode)
            #expect(try await s3.send("DELETE", S3TestClient.path("src", "a b.bin")).status == 204)
            #expect(try await s3.get("dst", "copy.bin").body == body)
            try await s3.put("src", "a b.bin", body, headers: [("x-amz-tagging", "k=v")])

            let replaced = try await s3.send(
                "PUT", S3TestClient.path("dst", "replaced.bin"),
                headers: [
                    ("x-amz-copy-source", "src/a%20b.bin"), ("x-amz-metadata-directive", "REPLACE"),
                    ("Content-Type", "text/plain"), ("x-amz-tagging-directive", "REPLACE"), ("x-amz-tagging", "new=1&other=2"),
                ])
            #expect(replaced.status == 200)
            let replacedGet = try await s3.get("dst", "replaced.bin")
            #expect(replacedGet.header("Content-Type") == "text/plain")
            #expect(replacedGet.header("x-amz-meta-title") == nil)
            #expect(replacedGet.header("x-amz-tagging-count") == "2")

            let toItself = try await s3.send(
                "PUT", S3TestClient.path("src", "a b.bin"), headers: [("x-amz-copy-source", "/src/a%20b.bin")])
            #expect(toItself.errorCode == "InvalidRequest")
            let failedCondition = try await s3.send(
                "PUT", S3TestClient.path("dst", "c.bin"),
                headers: [("x-amz-copy-source", "/src/a%20b.bin"), ("x-amz-copy-source-if-match", "\"0000\"")])
            #expect(failedCondition.status == 412)
            #expect(try await s3.get("dst", "c.bin").status == 404)
            let notModified = try await s3.send(
                "PUT", S3TestClient.path("dst", "c.bin"),
                headers: [("x-amz-copy-source", "/src/a%20b.bin"), ("x-amz-copy-source-if-none-match", etag)])
            #expect(notModified.status == 412)
            let missing = try await s3.send("PUT", S3TestClient.path("dst", "c.bin"), headers: [("x-amz-copy-source", "/src/nope")])
            #expect(missing.errorCode == "NoSuchKey")
            let malformed = try await s3.send("PUT", S3TestClient.path("dst", "c.bin"), headers: [("x-amz-copy-source", "src")])
            #expect(malformed.errorCode == "InvalidArgument")
            // The source must be URL-encoded: a stray `%`, or escapes that are not UTF-8 (`%FF` and `%FE` would both
            // name one key with U+FFFD in it), are refused, not looked up as some other key.
            for source in ["/src/a%ZZb.bin", "/src/100%", "/src/%FF.bin", "/src/a%2"] {
                let refused = try await s3.send("PUT", S3TestClient.path("dst", "d.bin"), headers: [("x-amz-copy-source", source)])
                #expect(refused.status == 400, "\(source)")
                #expect(refused.errorCode == "InvalidArgument", "\(source)")
                #expect(refused.text.contains("Invalid copy source encoding"), "\(source)")
            }
            #expect(try await s3.get("dst", "d.bin").errorCode == "NoSuchKey")
        }
    }

    @Test("a key allowed to write but not to read the source cannot copy it")
    func copyNeedsReadOnSource() async throws {
        try await TestServer.inMemory { server in
            let root = server.client()
            try await root.createBucket("copies")
            try await root.put("copies", "secret/k", [9])
            let key = try await server.server.credentials.createTestKey(
                catalog: server.server.catalog,
                policy: AccessPolicy(statements: [.init(actions: ["s3:PutObject", "s3:GetObject"], bucket: "copies", keyPrefix: "public/")]))
            let reply = try await server.client(key).send(
                "PUT", S3TestClient.path("copies", "public/stolen"), headers: [("x-amz-copy-source", "/copies/secret/k")])
            #expect(reply.errorCode == "AccessDenied")
            #expect(try await root.get("copies", "public/stolen").status == 404)
        }
    }

    @Test("a write that sets tags needs s3:PutObjectTagging beside s3:PutObject, and a copy that keeps its source's tags s3:GetObjectTagging on it; nothing is stored when refused")
    func taggingWritesNeedTaggingActions() async throws {
        try await TestServer.inMemory { server in
            let root = server.client()
            try await root.createBucket("tagged")
            try await root.put("tagged", "w/source", [1], headers: [("x-amz-tagging", "expire=yes")])
            try await root.put("tagged", "w/plain", [2])
            func key(_ actions: [String]) async throws -> S3TestClient {
                server.client(try await server.server.credentials.createTestKey(
                    catalog: server.server.catalog,
                    policy: AccessPolicy(statements: [.init(actions: actions, bucket: "tagged", keyPrefix: "w/")])))
            }
            let writer = try await key(["s3:PutObject", "s3:GetObject"])
            let tagger = try await key(["s3:PutObject", "s3:GetObject", "s3:PutObjectTagging", "s3:GetObjectTagging"])
            let tagging = [(name: "x-amz-tagging", value: "expire=yes")]
            let replace = [(name: "x-amz-tagging-directive", value: "REPLACE")]
            let attempts: [(String, @Sendable (S3TestClient) async throws -> S3TestClient.Reply)] = [
                ("w/put", { try await $0.put("tagged", "w/put", [3], headers: tagging) }),
                ("w/copy-replace", {
                    try await $0.send(
                        "PUT", S3TestClient.path("tagged", "w/copy-replace"),
                        headers: [("x-amz-copy-source", "/tagged/w/plain")] + replace + tagging)
                }),
                ("w/copy-kept", {
                    try await $0.send(
                        "PUT", S3TestClient.path("tagged", "w/copy-kept"), headers: [("x-amz-copy-source", "/tagged/w/source")])
                }),
                ("w/multipart", {
                    try await $0.send("POST", S3TestClient.path("tagged", "w/multipart"), query: [("uploads", "")], headers: tagging)
                }),
            ]
            for (key, attempt) in attempts {
                #expect(try await attempt(writer).errorCode == "AccessDenied", "\(key)")
                #expect(try await root.get("tagged", key).status == 404, "\(key) was stored")
                #expect(try await attempt(tagger).status == 200, "\(key)")
            }
            #expect(try await root.send("GET", S3TestClient.path("tagged", "w/copy-kept"), query: [("tagging", "")]).text.contains("<Key>expire</Key>"))
            // Without tags, s3:PutObject is enough: untagged writes and a copy of an untagged source.
            #expect(try await writer.put("tagged", "w/untagged", [4]).status == 200)
            let copied = try await writer.send(
                "PUT", S3TestClient.path("tagged", "w/plain-copy"), headers: [("x-amz-copy-source", "/tagged/w/plain")])
            #expect(copied.status == 200, "\(copied.text)")
        }
    }

    @Test("CopyObject and UploadPartCopy with a body of their own are InvalidRequest, not a copy that drops the body")
    func copyWithBody() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("copies")
            try await s3.put("copies", "source", [1, 2, 3])
            let copy = try await s3.send(
                "PUT", S3TestClient.path("copies", "copy"), headers: [("x-amz-copy-source", "/copies/source")],
                body: Array(repeating: 9, count: 1000))
            #expect(copy.errorCode == "InvalidRequest", "\(copy.status) \(copy.text)")
            #expect(try await s3.get("copies", "copy").status == 404)
            let upload = try await s3.createMultipartUpload("copies", "parts")
            let part = try await s3.send(
                "PUT", S3TestClient.path("copies", "parts"), query: [("partNumber", "1"), ("uploadId", upload)],
                headers: [("x-amz-copy-source", "/copies/source")], body: [9])
            #expect(part.errorCode == "InvalidRequest", "\(part.status) \(part.text)")
            let parts = try await s3.send("GET", S3TestClient.path("copies", "parts"), query: [("uploadId", upload)])
            #expect(!parts.text.contains("<Part>"), "\(parts.text)")
            // Without a body, as every SDK sends it, the copy is made; so it is with an empty aws-chunked body, whose
            // framing has a length of its own.
            let made = try await s3.send("PUT", S3TestClient.path("copies", "copy"), headers: [("x-amz-copy-source", "/copies/source")])
            #expect(made.status == 200, "\(made.text)")
            let framed = try await s3.send(
                "PUT", S3TestClient.path("copies", "framed"),
                headers: [("x-amz-copy-source", "/copies/source"), ("x-amz-decoded-content-length", "0")],
                body: Array("0\r\n\r\n".utf8))
            #expect(framed.status == 200, "\(framed.text)")
        }
    }

    @Test("UploadPartCopy makes parts from ranges of a multipart source with their own MD5s, sharing its files")
    func uploadPartCopy() async throws {
        try await TestServer.inMemory(minPartSize: 1024) { server in
            let s3 = server.client()
            try await s3.createBucket("pcopy")
            // A source made of three parts of different sizes.
            let sourceParts = [bytes(3000, seed: 1), bytes(2500, seed: 2), bytes(1000, seed: 3)]
            let sourceID = try await s3.createMultipartUpload("pcopy", "source")
            var etags: [String] = []
            for (index, part) in sourceParts.enumerated() {
                etags.append(try #require(try await s3.uploadPart("pcopy", "source", uploadId: sourceID, number: index + 1, part).header("ETag")))
            }
            #expect(try await s3.complete("pcopy", "source", uploadId: sourceID, xml: S3TestClient.completeXML(Array(zip(1...3, etags)))).status == 200)
            let whole = sourceParts.flatMap { $0 }

            // Copy it back in two parts whose boundaries do not match the source's.
            let id = try await s3.createMultipartUpload("pcopy", "copy")
            let ranges = [0...3999, 4000...(whole.count - 1)]
            var copyETags: [String] = []
            for (index, range) in ranges.enumerated() {
                let reply = try await s3.send(
                    "PUT", S3TestClient.path("pcopy", "copy"), query: [("partNumber", String(index + 1)), ("uploadId", id)],
                    headers: [("x-amz-copy-source", "/pcopy/source"), ("x-amz-copy-source-range", "bytes=\(range.lowerBound)-\(range.upperBound)")])
                #expect(reply.status == 200, "\(reply.text)")
                #expect(reply.text.contains("<CopyPartResult"))
                let md5 = Insecure_md5Hex(Array(whole[range]))
                #expect(reply.text.contains(md5))
                copyETags.append("\"\(md5)\"")
            }
            let bad = try await s3.send(
                "PUT", S3TestClient.path("pcopy", "copy"), query: [("partNumber", "3"), ("uploadId", id)],
                headers: [("x-amz-copy-source", "/pcopy/source"), ("x-amz-copy-source-range", "bytes=0-\(whole.count)")])
            #expect(bad.errorCode == "InvalidRange")
            let listed = try await s3.send("GET", S3TestClient.path("pcopy", "copy"), query: [("uploadId", id)])
            #expect(listed.text.contains("<Size>4000</Size>"))
            #expect(try await s3.complete("pcopy", "copy", uploadId: id, xml: S3TestClient.completeXML(Array(zip(1...2, copyETags)))).status == 200)
            #expect(try await s3.get("pcopy", "copy").body == whole)
            let copy = try await server.server.store.object(bucket: "pcopy", key: "copy")
            #expect(copy.manifest.count == 4)
            #expect(copy.manifest.contains { ($0.offset ?? 0) > 0 })
            // Deleting the source leaves the copy whole.
            #expect(try await s3.send("DELETE", S3TestClient.path("pcopy", "source")).status == 204)
            #expect(try await s3.get("pcopy", "copy").body == whole)
            #expect(try await s3.get("pcopy", "copy", headers: [("Range", "bytes=2990-4010")]).body == Array(whole[2990...4010]))

            // An empty source makes an empty part.
            try await s3.put("pcopy", "empty", [])
            let emptyID = try await s3.createMultipartUpload("pcopy", "from-empty")
            let emptyPart = try await s3.send(
                "PUT", S3TestClient.path("pcopy", "from-empty"), query: [("partNumber", "1"), ("uploadId", emptyID)],
                headers: [("x-amz-copy-source", "/pcopy/empty")])
            #expect(emptyPart.status == 200, "\(emptyPart.text)")
            #expect(emptyPart.text.contains(Insecure_md5Hex([])))
        }
    }

    @Test("tags: PUT x-amz-tagging, CreateMultipartUpload tags, tagging API limits, tag count on GET")
    func tagging() async throws {
        try await TestServer.inMemory(minPartSize: 1) { server in
            let s3 = server.client()
            try await s3.createBucket("tagged")
            try await s3.put("tagged", "k", [1], headers: [("x-amz-tagging", "b=2&a=1&empty=")])
            let tags = try await s3.send("GET", "/tagged/k", query: [("tagging", "")])
            #expect(tags.text.contains("<Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>2</Value></Tag><Tag><Key>empty</Key><Value></Value></Tag>"), "\(tags.text)")
            #expect(try await s3.get("tagged", "k").header("x-amz-tagging-count") == "3")

            let eleven = "<Tagging><TagSet>" + (0...10).map { "<Tag><Key>k\($0)</Key><Value>v</Value></Tag>" }.joined() + "</TagSet></Tagging>"
            let refused = try await s3.send("PUT", "/tagged/k", query: [("tagging", "")], body: Array(eleven.utf8))
            #expect(refused.errorCode == "InvalidTag")
            let longKey = "<Tagging><TagSet><Tag><Key>\(String(repeating: "k", count: 129))</Key><Value>v</Value></Tag></TagSet></Tagging>"
            #expect(try await s3.send("PUT", "/tagged/k", query: [("tagging", "")], body: Array(longKey.utf8)).errorCode == "InvalidTag")
            let duplicate = "<Tagging><TagSet><Tag><Key>d</Key><Value>1</Value></Tag><Tag><Key>d</Key><Value>2</Value></Tag></TagSet></Tagging>"
            #expect(try await s3.send("PUT", "/tagged/k", query: [("tagging", "")], body: Array(duplicate.utf8)).errorCode == "InvalidTag")
            #expect(try await s3.put("tagged", "bad", [1], headers: [("x-amz-tagging", "a=%3Cscript%3E")]).errorCode == "InvalidTag")
            // `aws:` keys are S3's own system tags, in either spelling.
            let system = "<Tagging><TagSet><Tag><Key>aws:cloudformation:stack-name</Key><Value>x</Value></Tag></TagSet></Tagging>"
            #expect(try await s3.send("PUT", "/tagged/k", query: [("tagging", "")], body: Array(system.utf8)).errorCode == "InvalidTag")
            #expect(try await s3.put("tagged", "bad", [1], headers: [("x-amz-tagging", "AWS%3Aowner=me")]).errorCode == "InvalidTag")
            #expect(try await s3.get("tagged", "bad").errorCode == "NoSuchKey")
            #expect(try await s3.get("tagged", "k").header("x-amz-tagging-count") == "3")
            #expect(try await s3.send("PUT", "/tagged/missing", query: [("tagging", "")], body: Array(duplicate.utf8)).status == 400)
            #expect(try await s3.send("GET", "/tagged/missing", query: [("tagging", "")]).errorCode == "NoSuchKey")

            let id = try await s3.createMultipartUpload("tagged", "mp", headers: [("x-amz-tagging", "from=upload")])
            let etag = try #require(try await s3.uploadPart("tagged", "mp", uploadId: id, number: 1, [7]).header("ETag"))
            #expect(try await s3.complete("tagged", "mp", uploadId: id, xml: S3TestClient.completeXML([(1, etag)])).status == 200)
            #expect(try await s3.send("GET", "/tagged/mp", query: [("tagging", "")]).text.contains("<Key>from</Key><Value>upload</Value>"))
        }
    }

    @Test("GetObjectAttributes and GET/HEAD ?partNumber describe and serve a multipart object part by part")
    func attributesAndParts() async throws {
        try await TestServer.inMemory(minPartSize: 1024) { server in
            let s3 = server.client()
            try await s3.createBucket("parts")
            let parts = [bytes(2000, seed: 4), bytes(1500, seed: 5), bytes(100, seed: 6)]
            let id = try await s3.createMultipartUpload("parts", "movie", headers: [("x-amz-checksum-algorithm", "SHA256")])
            var entries = ""
            for (index, part) in parts.enumerated() {
                let sha = Checksum.base64(Checksum.digest(.sha256, of: part))
                let reply = try await s3.uploadPart(
                    "parts", "movie", uploadId: id, number: index + 1, part, headers: [("x-amz-checksum-sha256", sha)])
                entries += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\(reply.header("ETag")!)</ETag><ChecksumSHA256>\(sha)</ChecksumSHA256></Part>"
            }
            let done = try await s3.complete("parts", "movie", uploadId: id, xml: "<CompleteMultipartUpload>\(entries)</CompleteMultipartUpload>")
            #expect(done.status == 200, "\(done.text)")
            let whole = parts.flatMap { $0 }

            let attributes = try await s3.send(
                "GET", "/parts/movie", query: [("attributes", "")],
                headers: [("x-amz-object-attributes", "ETag,ObjectSize,ObjectParts,Checksum,StorageClass"), ("x-amz-max-parts", "2")])
            #expect(attributes.status == 200, "\(attributes.text)")
            #expect(attributes.text.contains("<ObjectSize>\(whole.count)</ObjectSize>"))
            #expect(attributes.text.contains("<PartsCount>3</PartsCount>"))
            #expect(attributes.text.contains("<IsTruncated>true</IsTruncated>"))
            #expect(attributes.text.contains("<NextPartNumberMarker>2</NextPartNumberMarker>"))
            #expect(attributes.text.contains("<ChecksumSHA256>\(Checksum.base64(Checksum.digest(.sha256, of: parts[1])))</ChecksumSHA256>"))
            #expect(attributes.text.contains("<StorageClass>STANDARD</StorageClass>"))
            #expect(attributes.header("Last-Modified") != nil)
            let nothing = try await s3.send("GET", "/parts/movie", query: [("attributes", "")])
            #expect(nothing.errorCode == "InvalidArgument")

            var start = 0
            for (index, part) in parts.enumerated() {
                let get = try await s3.send(
                    "GET", "/parts/movie", query: [("partNumber", String(index + 1))], headers: [("x-amz-checksum-mode", "ENABLED")])
                #expect(get.status == 206)
                #expect(get.body == part)
                #expect(get.header("x-amz-mp-parts-count") == "3")
                #expect(get.header("Content-Range") == "bytes \(start)-\(start + part.count - 1)/\(whole.count)")
                #expect(get.header("x-amz-checksum-sha256") == Checksum.base64(Checksum.digest(.sha256, of: part)))
                let head = try await s3.send("HEAD", "/parts/movie", query: [("partNumber", String(index + 1))])
                #expect(head.header("Content-Length") == String(part.count))
                start += part.count
            }
            #expect(try await s3.send("GET", "/parts/movie", query: [("partNumber", "4")]).errorCode == "InvalidPart")
            #expect(try await s3.send("GET", "/parts/movie", query: [("partNumber", "0")]).errorCode == "InvalidArgument")
            #expect(try await s3.get("parts", "movie").header("x-amz-mp-parts-count") == nil)

            try await s3.put("parts", "single", [1, 2, 3])
            // Part 1 of a single-PUT object is the range of all its bytes, answered as S3 does: 206 with Content-Range.
            let single = try await s3.send("GET", "/parts/single", query: [("partNumber", "1")])
            #expect(single.status == 206)
            #expect(single.body == [1, 2, 3])
            #expect(single.header("Content-Range") == "bytes 0-2/3" && single.header("x-amz-mp-parts-count") == nil)
            let singleHead = try await s3.send("HEAD", "/parts/single", query: [("partNumber", "1")])
            #expect(singleHead.status == 206 && singleHead.header("Content-Length") == "3")
            try await s3.put("parts", "empty", [])
            #expect(try await s3.send("GET", "/parts/empty", query: [("partNumber", "1")]).status == 200)
            #expect(try await s3.send("GET", "/parts/single", query: [("partNumber", "2")]).errorCode == "InvalidPart")
        }
    }

    @Test("a download started before an overwrite or a delete gets the old object to its last byte")
    func readsSurviveOverwrite() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("stream")
            let old = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            try await s3.put("stream", "k", old)
            for change in ["overwrite", "delete"] {
                if change == "delete" { try await s3.put("stream", "k", old) }
                let url = try s3.presignedURL("GET", "/stream/k")
                var request = HTTPClientRequest(url: url)
                request.method = .GET
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                #expect(response.status == .ok)
                var received: [UInt8] = []
                var changed = false
                for try await chunk in response.body {
                    received += chunk.readableBytesView
                    if !changed, received.count >= 1 << 20 {
                        // The first megabyte is here; replace or delete the object under the download.
                        if change == "overwrite" {
                            #expect(try await s3.put("stream", "k", [1, 2, 3]).status == 200)
                        } else {
                            #expect(try await s3.send("DELETE", "/stream/k").status == 204)
                        }
                        changed = true
                    }
                }
                #expect(changed)
                #expect(received.count == old.count, "\(change): \(received.count) of \(old.count) bytes")
                #expect(received == old, "\(change)")
            }
            #expect(try await s3.get("stream", "k").status == 404)
            // Once the readers are done, the old files are gone.
            #expect(server.server.store.files.leases.leasedCount == 0)
        }
    }
}

extension CredentialStore {
    /// Creates an access key with a policy, as the media API's CreateAccessKey does.
    func createTestKey(catalog: SQLiteCatalog, policy: AccessPolicy) async throws -> SigV4Credentials {
        let id = "FKIATEST" + String(UUID().uuidString.prefix(8)).uppercased()
        let secret = "secret-" + UUID().uuidString
        try await catalog.insertAccessKey(
            StoredAccessKey(
                accessKeyId: id, secretAccessKey: secret, policy: policy, status: .active, description: "test",
                createdAt: Date()))
        return SigV4Credentials(accessKeyId: id, secretAccessKey: secret)
    }
}
