import Crypto
import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite("S3 sub-resources", .timeLimit(.minutes(10)))
struct S3SubresourceTests {
    static let body = Array("the object's own bytes".utf8)
    static let xmlBody = Array("<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>".utf8)

    @Test("object sub-resources Ferry lacks answer 501 NotImplemented, name the operation and leave the object alone")
    func objectSubresourcesChangeNothing() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("keep")
            try await s3.put("keep", "k", Self.body)
            let cases: [(String, String, String)] = [
                ("PUT", "acl", "PutObjectAcl"), ("GET", "acl", "GetObjectAcl"),
                ("PUT", "legal-hold", "PutObjectLegalHold"), ("GET", "legal-hold", "GetObjectLegalHold"),
                ("PUT", "retention", "PutObjectRetention"), ("GET", "retention", "GetObjectRetention"),
                ("GET", "torrent", "GetObjectTorrent"), ("POST", "restore", "RestoreObject"),
                ("POST", "select", "SelectObjectContent"), ("DELETE", "acl", "DeleteObjectAcl"),
                ("PUT", "renameObject", "RenameObject"),
            ]
            for (method, subresource, operation) in cases {
                let reply = try await s3.send(method, "/keep/k", query: [(subresource, "")], body: Self.xmlBody)
                #expect(reply.status == 501, "\(method) ?\(subresource)")
                #expect(reply.errorCode == "NotImplemented", "\(method) ?\(subresource)")
                #expect(reply.text.contains(operation), "\(method) ?\(subresource): \(reply.text)")
                let after = try await s3.get("keep", "k")
                #expect(after.body == Self.body, "\(method) ?\(subresource) changed the object")
            }
            // A bucket's sub-resource on an object's path is no operation on the object: it neither overwrites,
            // deletes nor reads it. On a bucket's path, an object's sub-resource lists nothing.
            for subresource in ["policy", "versioning", "encryption", "cors", "lifecycle", "location", "delete", "website"] {
                for method in ["PUT", "DELETE", "GET", "POST"] {
                    let reply = try await s3.send(method, "/keep/k", query: [(subresource, "")], body: Self.xmlBody)
                    #expect([501, 405].contains(reply.status), "\(method) /keep/k?\(subresource): \(reply.status)")
                    #expect(!reply.body.starts(with: Self.body), "\(method) /keep/k?\(subresource) read the object")
                    let after = try await s3.get("keep", "k")
                    #expect(after.body == Self.body, "\(method) /keep/k?\(subresource) changed the object")
                }
            }
            // An object's sub-resource without its key is no operation on the bucket: an abort sent without a key does
            // not delete an empty bucket, nor does a part create one.
            try await s3.createBucket("empty")
            for (method, path, subresource) in [
                ("DELETE", "/empty", "uploadId"), ("PUT", "/absent", "partNumber"), ("GET", "/empty", "attributes"),
            ] {
                let reply = try await s3.send(method, path, query: [(subresource, "1")])
                #expect(reply.status == 405, "\(method) \(path)?\(subresource): \(reply.status)")
            }
            #expect(try await s3.send("HEAD", "/empty").status == 200)
            #expect(try await s3.send("HEAD", "/absent").status == 404)
            for subresource in ["legal-hold", "retention", "torrent", "select"] {
                let reply = try await s3.send("GET", "/keep", query: [(subresource, "")])
                #expect(reply.status == 501 && !reply.text.contains("ListBucketResult"), "GET /keep?\(subresource)")
            }
        }
    }

    @Test("bucket sub-resources Ferry lacks answer 501: no bucket is deleted, created or listed in their place")
    func bucketSubresourcesChangeNothing() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("empty")
            let subresources = [
                "policy", "encryption", "tagging", "acl", "website", "logging", "replication",
                "notification", "object-lock", "ownershipControls", "publicAccessBlock", "requestPayment", "accelerate",
                "analytics", "metrics", "inventory", "intelligent-tiering", "policyStatus",
            ]
            for subresource in subresources {
                let delete = try await s3.send("DELETE", "/empty", query: [(subresource, "")])
                #expect(delete.status == 501, "DELETE ?\(subresource)")
                #expect(try await s3.send("HEAD", "/empty").status == 200, "DELETE ?\(subresource) deleted the bucket")
                let put = try await s3.send("PUT", "/absent", query: [(subresource, "")], body: Self.xmlBody)
                #expect(put.status == 501, "PUT ?\(subresource)")
                #expect(try await s3.send("HEAD", "/absent").status == 404, "PUT ?\(subresource) created a bucket")
                let get = try await s3.send("GET", "/empty", query: [(subresource, "")])
                #expect(get.status == 501, "GET ?\(subresource)")
                #expect(!get.text.contains("ListBucketResult"), "GET ?\(subresource) listed the bucket")
            }
            let versioning = try await s3.send("PUT", "/absent", query: [("versioning", "")], body: Array("<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>".utf8))
            #expect(versioning.status == 501)
            #expect(versioning.text.contains("PutBucketVersioning"))
            #expect(try await s3.send("HEAD", "/absent").status == 404)
        }
    }

    @Test("headers asking for encryption, object lock, ACL grants or other storage classes store nothing")
    func unimplementedHeadersStoreNothing() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("plain")
            let refused: [(String, String)] = [
                ("x-amz-server-side-encryption", "AES256"), ("x-amz-server-side-encryption", "aws:kms"),
                ("x-amz-object-lock-mode", "GOVERNANCE"), ("x-amz-grant-read", "id=someone"),
                ("x-amz-acl", "public-read"), ("x-amz-storage-class", "GLACIER"),
                ("x-amz-website-redirect-location", "/elsewhere"),
            ]
            for header in refused {
                let reply = try await s3.put("plain", "k", Self.body, headers: [header])
                #expect(reply.status == 501, "\(header)")
                #expect(try await s3.get("plain", "k").status == 404, "\(header) stored the object")
                let create = try await s3.send("POST", "/plain/k", query: [("uploads", "")], headers: [header])
                #expect(create.status == 501, "\(header) on CreateMultipartUpload")
            }
            #expect(try await s3.put("plain", "k", Self.body, headers: [("x-amz-storage-class", "NOPE")]).errorCode == "InvalidStorageClass")
            // A customer's encryption key (SSE-C) on a part, a part copy or a read: refused, the part not stored, the
            // plain object not served as if it were decrypted.
            let customerKey = [UInt8](repeating: 7, count: 32)
            let sseC: [(name: String, value: String)] = [
                ("x-amz-server-side-encryption-customer-algorithm", "AES256"),
                ("x-amz-server-side-encryption-customer-key", Data(customerKey).base64EncodedString()),
                ("x-amz-server-side-encryption-customer-key-MD5", Data(Insecure.MD5.hash(data: customerKey)).base64EncodedString()),
            ]
            #expect(try await s3.put("plain", "source", Self.body).status == 200)
            let uploadId = try await s3.createMultipartUpload("plain", "parts")
            let part = try await s3.send(
                "PUT", "/plain/parts", query: [("partNumber", "1"), ("uploadId", uploadId)], headers: sseC, body: Self.body)
            #expect(part.status == 501, "UploadPart with SSE-C: \(part.status)")
            let copy = try await s3.send(
                "PUT", "/plain/parts", query: [("partNumber", "1"), ("uploadId", uploadId)],
                headers: sseC + [("x-amz-copy-source", "/plain/source")])
            #expect(copy.status == 501, "UploadPartCopy with SSE-C: \(copy.status)")
            let parts = try await s3.send("GET", "/plain/parts", query: [("uploadId", uploadId)])
            #expect(!parts.text.contains("<Part>"), "\(parts.text)")
            for method in ["GET", "HEAD"] {
                let read = try await s3.send(method, "/plain/source", headers: sseC)
                #expect(read.status == 501 && read.body != Self.body, "\(method) with SSE-C: \(read.status)")
            }
            #expect(try await s3.send("DELETE", "/plain/parts", query: [("uploadId", uploadId)]).status == 204)
            // What Ferry does anyway is accepted.
            #expect(try await s3.put("plain", "k", Self.body, headers: [("x-amz-acl", "private"), ("x-amz-storage-class", "STANDARD")]).status == 200)
            let uploads = try await s3.send("GET", "/plain", query: [("uploads", "")])
            #expect(!uploads.text.contains("<Upload>"))
        }
    }

    @Test("implemented sub-resources run their own operation, never the plain one")
    func implementedSubresources() async throws {
        try await TestServer.inMemory { server in
            let s3 = server.client()
            try await s3.createBucket("tags")
            try await s3.put("tags", "k", Self.body)
            let put = try await s3.send("PUT", "/tags/k", query: [("tagging", "")], body: Self.xmlBody)
            #expect(put.status == 200)
            #expect(try await s3.get("tags", "k").body == Self.body)
            let get = try await s3.send("GET", "/tags/k", query: [("tagging", "")])
            #expect(get.text.contains("<Key>a</Key>"))
            #expect(get.body != Self.body)
            #expect(try await s3.send("DELETE", "/tags/k", query: [("tagging", "")]).status == 204)
            let kept = try await s3.get("tags", "k")
            #expect(kept.body == Self.body)
            #expect(kept.header("x-amz-tagging-count") == nil)
            let attributes = try await s3.send(
                "GET", "/tags/k", query: [("attributes", "")], headers: [("x-amz-object-attributes", "ObjectSize")])
            #expect(attributes.text.contains("<ObjectSize>\(Self.body.count)</ObjectSize>"))
            let versioning = try await s3.send("GET", "/tags", query: [("versioning", "")])
            #expect(versioning.status == 200)
            #expect(versioning.text.contains("VersioningConfiguration"))
            #expect(!versioning.text.contains("Status"))
            let versions = try await s3.send("GET", "/tags", query: [("versions", "")])
            #expect(versions.text.contains("<VersionId>null</VersionId>"))
            #expect(versions.text.contains("<IsLatest>true</IsLatest>"))
            // Query parameters that are not sub-resources (the SDKs' x-id) do not change the operation.
            #expect(try await s3.send("GET", "/tags/k", query: [("x-id", "GetObject")]).body == Self.body)
            // A version other than null does not exist in a bucket without versioning.
            #expect(try await s3.send("DELETE", "/tags/k", query: [("versionId", "abc")]).errorCode == "InvalidArgument")
            #expect(try await s3.get("tags", "k").body == Self.body)
            #expect(try await s3.send("DELETE", "/tags/k", query: [("versionId", "null")]).status == 204)
            #expect(try await s3.get("tags", "k").status == 404)
        }
    }
}
