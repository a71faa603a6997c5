import Crypto
import FerryCore
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Integrity", .timeLimit(.minutes(10)))
struct IntegrityTests {
    @Test("every XML body's Content-MD5 and x-amz-checksum are checked: a mismatch is BadDigest and stores nothing")
    func xmlBodyDigests() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("conf")
            #expect(try await s3.put("conf", "k", [1]).status == 200)
            let lifecycle = Array(
                "<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix>a/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>".utf8)
            let cors = Array(
                "<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>".utf8)
            let tagging = Array("<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>".utf8)
            let configuration = Array("<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>".utf8)
            let cases: [(String, String, [(name: String, value: String)], [UInt8])] = [
                ("/conf", "lifecycle", [("lifecycle", "")], lifecycle), ("/conf", "cors", [("cors", "")], cors),
                ("/conf/k", "tagging", [("tagging", "")], tagging), ("/made", "CreateBucket", [], configuration),
            ]
            for (path, name, query, body) in cases {
                let wrongMD5 = try await s3.send(
                    "PUT", path, query: query, headers: [("Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA==")], body: body)
                #expect(wrongMD5.errorCode == "BadDigest", "\(name): \(wrongMD5.text)")
                var other = Checksummer(.crc32)
                other.update(Array("something else".utf8))
                let wrongCRC = try await s3.send(
                    "PUT", path, query: query, headers: [("x-amz-checksum-crc32", other.finalizeBase64())], body: body)
                #expect(wrongCRC.errorCode == "BadDigest", "\(name): \(wrongCRC.text)")
            }
            // Nothing was set or made.
            #expect(try await s3.send("GET", "/conf", query: [("lifecycle", "")]).errorCode == "NoSuchLifecycleConfiguration")
            #expect(try await s3.send("GET", "/conf", query: [("cors", "")]).errorCode == "NoSuchCORSConfiguration")
            #expect(!(try await s3.send("GET", "/conf/k", query: [("tagging", "")]).text.contains("<Key>a</Key>")))
            #expect(try await s3.send("HEAD", "/made").status == 404)
            // The right digests are taken.
            for (path, name, query, body) in cases {
                var md5 = Checksummer(.md5)
                md5.update(body)
                var crc = Checksummer(.crc32)
                crc.update(body)
                let put = try await s3.send(
                    "PUT", path, query: query,
                    headers: [("Content-MD5", md5.finalizeBase64()), ("x-amz-checksum-crc32", crc.finalizeBase64())], body: body)
                #expect(put.status == 200 || put.status == 204, "\(name): \(put.text)")
            }
        }
    }

    @Test("Content-MD5 and each x-amz-checksum are checked; a mismatch stores nothing")
    func checksums() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("sum")
            let body = Array("integrity matters".utf8)
            var md5 = Checksummer(.md5)
            md5.update(body)
            #expect(try await s3.put("sum", "md5", body, headers: [("Content-MD5", md5.finalizeBase64())]).status == 200)
            let wrongMD5 = try await s3.put("sum", "bad-md5", body, headers: [("Content-MD5", "AAAAAAAAAAAAAAAAAAAAAA==")])
            #expect(wrongMD5.errorCode == "BadDigest")
            #expect(try await s3.put("sum", "bad-md5", body, headers: [("Content-MD5", "nope")]).errorCode == "InvalidDigest")
            #expect(try await s3.get("sum", "bad-md5").errorCode == "NoSuchKey")
            for algorithm in ChecksumAlgorithm.s3Algorithms {
                var hasher = Checksummer(algorithm)
                hasher.update(body)
                let value = hasher.finalizeBase64()
                let key = "obj-\(algorithm.s3Name)"
                let put = try await s3.put("sum", key, body, headers: [(algorithm.headerName, value)])
                #expect(put.status == 200, "\(algorithm): \(put.text)")
                #expect(put.header(algorithm.headerName) == value)
                let head = try await s3.send("HEAD", S3TestClient.path("sum", key), headers: [("x-amz-checksum-mode", "ENABLED")])
                #expect(head.header(algorithm.headerName) == value)
                let plain = try await s3.send("HEAD", S3TestClient.path("sum", key))
                #expect(plain.header(algorithm.headerName) == nil)
                var other = Checksummer(algorithm)
                other.update(Array("something else".utf8))
                let wrong = try await s3.put("sum", key + "-bad", body, headers: [(algorithm.headerName, other.finalizeBase64())])
                #expect(wrong.errorCode == "BadDigest")
                #expect(try await s3.get("sum", key + "-bad").errorCode == "NoSuchKey")
            }
            #expect(try await s3.put("sum", "x", body, headers: [("x-amz-checksum-crc32", "!!")]).errorCode == "BadDigest")
            // x-amz-sdk-checksum-algorithm names the checksum sent: another algorithm's checksum is refused, the same
            // one is taken, and the name alone asks for the checksum to be computed.
            var crc32 = Checksummer(.crc32)
            crc32.update(body)
            let mismatched = try await s3.put(
                "sum", "y", body, headers: [("x-amz-checksum-crc32", crc32.finalizeBase64()), ("x-amz-sdk-checksum-algorithm", "SHA256")])
            #expect(mismatched.status == 400)
            #expect(mismatched.errorCode == "InvalidRequest")
            #expect(mismatched.text.contains("x-amz-sdk-checksum-algorithm"))
            #expect(try await s3.get("sum", "y").errorCode == "NoSuchKey")
            let named = try await s3.put(
                "sum", "named", body, headers: [("x-amz-checksum-crc32", crc32.finalizeBase64()), ("x-amz-sdk-checksum-algorithm", "crc32")])
            #expect(named.status == 200, "\(named.text)")
            let asked = try await s3.put("sum", "asked", body, headers: [("x-amz-sdk-checksum-algorithm", "SHA1")])
            #expect(asked.header("x-amz-checksum-sha1") != nil, "\(asked.text)")
            #expect(blobFiles(server.dataDirectory).count == 3 + ChecksumAlgorithm.s3Algorithms.count)
        }
    }

    @Test("a checksum of an algorithm the service does not compute is refused on PUT, UploadPart and Complete, and stores nothing")
    func unsupportedChecksums() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("sum")
            let body = Array("integrity matters".utf8)
            let unsupported = [
                ("x-amz-checksum-sha512", Data(SHA512.hash(data: body)).base64EncodedString()),
                ("x-amz-checksum-md5", Data(Insecure.MD5.hash(data: body)).base64EncodedString()),
                ("x-amz-checksum-xxhash64", "AAAAAAAAAAA="), ("x-amz-checksum-xxhash3", "AAAAAAAAAAA="),
                ("X-Amz-Checksum-XXHASH128", "AAAAAAAAAAAAAAAAAAAAAA=="),
            ]
            for header in unsupported {
                let put = try await s3.put("sum", "put", body, headers: [header])
                #expect(put.status == 400 && put.errorCode == "InvalidRequest", "\(header.0): \(put.status) \(put.text)")
                #expect(put.text.contains(header.0.lowercased()) && put.text.contains("CRC64NVME"), "\(put.text)")
                #expect(try await s3.get("sum", "put").errorCode == "NoSuchKey")
            }
            let uploadId = try await s3.createMultipartUpload("sum", "parts")
            let part = try await s3.uploadPart(
                "sum", "parts", uploadId: uploadId, number: 1, body, headers: [("x-amz-checksum-xxhash64", "AAAAAAAAAAA=")])
            #expect(part.errorCode == "InvalidRequest", "\(part.text)")
            let stored = try await s3.uploadPart("sum", "parts", uploadId: uploadId, number: 1, body)
            let etag = try #require(stored.header("ETag"))
            let xml = S3TestClient.completeXML([(1, etag)])
            let complete = try await s3.complete(
                "sum", "parts", uploadId: uploadId, xml: xml, headers: [("x-amz-checksum-sha512", "AAAA")])
            #expect(complete.errorCode == "InvalidRequest", "\(complete.text)")
            // Nor a part's checksum element of such an algorithm in the body.
            let elementXML = S3TestClient.completeXML([(1, etag)], checksums: [1: ("SHA512", "AAAA")])
            let element = try await s3.complete("sum", "parts", uploadId: uploadId, xml: elementXML)
            #expect(element.errorCode == "InvalidRequest" && element.text.contains("ChecksumSHA512"), "\(element.text)")
            #expect(try await s3.get("sum", "parts").errorCode == "NoSuchKey")
            // The upload is still open, and completes without the header.
            #expect(try await s3.complete("sum", "parts", uploadId: uploadId, xml: xml).status == 200)
            #expect(try await s3.get("sum", "parts").body == body)
            // The headers that name no checksum are not refused.
            let head = try await s3.send("HEAD", S3TestClient.path("sum", "parts"), headers: [("x-amz-checksum-mode", "ENABLED")])
            #expect(head.status == 200)
        }
    }

    @Test("a signed payload must match x-amz-content-sha256")
    func payloadHash() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("sha")
            let reply = try await s3.send(
                "PUT", S3TestClient.path("sha", "k"), body: [1, 2, 3], payload: .hash(SigV4.hexSHA256([9, 9, 9])))
            #expect(reply.errorCode == "XAmzContentSHA256Mismatch")
            #expect(try await s3.get("sha", "k").errorCode == "NoSuchKey")
            #expect(try await s3.send("PUT", S3TestClient.path("sha", "k"), body: [1], payload: .unsigned).status == 200)
            #expect(try await s3.send("PUT", S3TestClient.path("sha", "k"), body: [1], payload: .hash("abc")).errorCode == "InvalidArgument")
        }
    }

    /// Signs and frames an aws-chunked PUT.
    func chunkedPut(
        _ server: TestServer, key: String, body: [UInt8], signed: Bool, trailer: (String, String)? = nil,
        announced: Bool = true, tamper: Bool = false
    ) async throws -> S3TestClient.Reply {
        let host = "127.0.0.1:\(server.port)"
        let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
        let path = S3TestClient.path("chunk", key)
        var headers: [(name: String, value: String)] = [
            ("host", host), ("content-encoding", "aws-chunked"), ("x-amz-decoded-content-length", String(body.count)),
        ]
        if let trailer, announced { headers.append(("x-amz-trailer", trailer.0)) }
        let signedRequest = signer.sign(
            method: "PUT", path: path, query: [], headers: headers,
            payloadHash: signed ? SigV4.streamingSignedPayload : SigV4.streamingUnsignedPayloadTrailer, date: Date())
        var encoder = AWSChunkedEncoder(mode: signed ? signedRequest.chunkedSigningMode : .unsigned)
        var framed: [UInt8] = []
        var offset = 0
        while offset < body.count {
            let end = min(offset + 8192, body.count)
            framed += encoder.encodeChunk(body[offset..<end])
            offset = end
        }
        framed += encoder.finalChunk(trailers: trailer.map { [(name: $0.0, value: $0.1)] } ?? [])
        if tamper { framed[framed.count / 2] ^= 0xFF }
        return try await server.client().sendRaw("PUT", path, headers: signedRequest.headers, body: framed)
    }

    @Test("aws-chunked bodies: signed chunks verified, unsigned with a trailing checksum verified")
    func awsChunked() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("chunk")
            let body = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 * 31) }
            let signed = try await chunkedPut(server, key: "signed", body: body, signed: true)
            #expect(signed.status == 200, "\(signed.text)")
            #expect(try await s3.get("chunk", "signed").body == body)
            let tampered = try await chunkedPut(server, key: "tampered", body: body, signed: true, tamper: true)
            #expect(tampered.errorCode == "SignatureDoesNotMatch")
            #expect(try await s3.get("chunk", "tampered").errorCode == "NoSuchKey")

            var crc = Checksummer(.crc32)
            crc.update(body)
            let good = try await chunkedPut(
                server, key: "trailer", body: body, signed: false, trailer: ("x-amz-checksum-crc32", crc.finalizeBase64()))
            #expect(good.status == 200, "\(good.text)")
            #expect(try await s3.get("chunk", "trailer").body == body)
            let head = try await s3.send("HEAD", S3TestClient.path("chunk", "trailer"), headers: [("x-amz-checksum-mode", "ENABLED")])
            #expect(head.header("x-amz-checksum-crc32") == crc.finalizeBase64())
            let bad = try await chunkedPut(
                server, key: "bad-trailer", body: body, signed: false, trailer: ("x-amz-checksum-crc32", "AAAAAA=="))
            #expect(bad.errorCode == "BadDigest")
            #expect(try await s3.get("chunk", "bad-trailer").errorCode == "NoSuchKey")
            // A checksum trailer x-amz-trailer did not announce is refused, not left unchecked.
            let unannounced = try await chunkedPut(
                server, key: "unannounced", body: body, signed: false, trailer: ("x-amz-checksum-crc32", "AAAAAA=="),
                announced: false)
            #expect(unannounced.errorCode == "MalformedTrailerError", "\(unannounced.text)")
            #expect(try await s3.get("chunk", "unannounced").errorCode == "NoSuchKey")
        }
    }

    @Test("a body shorter than its Content-Length stores nothing")
    func truncatedBody() async throws {
        try await TestServer.with { server in
            let s3 = server.client()
            try await s3.createBucket("cut")
            let host = "127.0.0.1:\(server.port)"
            let signer = SigV4Signer(credentials: server.root, region: "us-east-1")
            let headers = signer.sign(
                method: "PUT", path: "/cut/k", query: [], headers: [("host", host), ("content-length", "100000")],
                payloadHash: SigV4.unsignedPayload, date: Date()).headers
            var request = "PUT /cut/k HTTP/1.1\r\n"
            for header in headers { request += "\(header.name): \(header.value)\r\n" }
            request += "\r\n"
            try RawSocket.sendAndClose(port: server.port, Array(request.utf8) + [UInt8](repeating: 7, count: 40_000))
            // The server notices the cut connection; poll until the temporary file is gone.
            for _ in 0..<1200 where !(try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/objects/tmp")).isEmpty {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: server.dataDirectory + "/objects/tmp").isEmpty)
            #expect(try await s3.get("cut", "k").errorCode == "NoSuchKey")
            #expect(blobFiles(server.dataDirectory).isEmpty)
        }
    }
}
