import FerryCore
import FerryTestSupport
import Foundation

extension FuzzRequest {
    /// What a request of a cell is made to probe.
    enum Plan {
        /// A random operation of the group with one to three random mutations (rarely none).
        case random
        /// Operation `operation` of the group with a Host that is not a valid authority, cleanly signed.
        case invalidHost(operation: Int)
        /// Operation `operation` with its XML or JSON body nested as deep as its size limit allows, cleanly signed
        /// (nil when the operation has no such body).
        case deepBody(operation: Int)
        /// Operation `operation` with its XML or JSON body a little larger than its size limit, cleanly signed (nil
        /// when the operation has no such body).
        case oversizedBody(operation: Int)
        /// Operation `operation` with a processing instruction without data (`<?ferry?>`) in its XML body or in a
        /// browser POST's tagging field, cleanly signed (nil when the operation has neither); for odd operations the
        /// instruction is hidden in UTF-7 (`+ADw-?ferry?+AD4-`) behind a declaration naming that encoding.
        case bareProcessingInstruction(operation: Int)
        /// Operation `operation` with an element whose name is not UTF-8 (`<F\xE9>`) in its XML body or in a browser
        /// POST's tagging field, cleanly signed (nil when the operation has neither).
        case invalidElementName(operation: Int)

        /// The kind of plan, without its operation.
        var kind: String {
            switch self {
            case .random: "random"
            case .invalidHost: "invalid Host"
            case .deepBody: "deep body"
            case .oversizedBody: "oversized body"
            case .bareProcessingInstruction: "bare processing instruction"
            case .invalidElementName: "invalid element name"
            }
        }
    }

    /// The well-formed operations of a group, by their index in its builder, each operation once (the builders weight
    /// some by listing them twice).
    static func operations(_ group: FuzzGroup) -> [Int] {
        switch group {
        case .objectAPI: Array(0...28)
        case .mediaAPI, .consoleAPI: [0, 1, 2, 3, 4, 5, 7, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21]
        case .publish: [0, 2, 3, 6]
        case .uppySigning: [0, 1, 2, 4, 5, 6]
        default: [0]
        }
    }

    /// The probes of every operation of a group (those that do not apply to an operation are skipped when made).
    static func probes(_ group: FuzzGroup) -> [Plan] {
        operations(group).flatMap { operation in
            [
                Plan.invalidHost(operation: operation), .deepBody(operation: operation),
                .oversizedBody(operation: operation), .bareProcessingInstruction(operation: operation),
                .invalidElementName(operation: operation),
            ]
        }
    }

    /// Authorities a URL cannot be made from, one per probe in turn.
    static let invalidAuthorities = ["[::1", "a b", "%", "{}", "\\evil", "127.0.0.1:80:80"]

    /// A request for `cell` as `plan` says: a well-formed operation of the group, the credential presented, the
    /// mutations, then the signature and what is done to it afterwards.
    static func make(
        _ cell: FuzzCell, _ f: FuzzFixtures, port: Int, _ r: inout SeededGenerator, plan: Plan = .random
    ) -> FuzzRequest? {
        var index: Int?
        switch plan {
        case .random: index = nil
        case .invalidHost(let operation), .deepBody(let operation), .oversizedBody(let operation),
            .bareProcessingInstruction(let operation), .invalidElementName(let operation):
            index = operation
        }
        var q: FuzzRequest
        switch cell.group {
        case .objectAPI: q = objectOperation(f, cell.credential, &r, index: index)
        case .mediaAPI: q = mediaOperation(prefix: "/_ferry/v1/", f, &r, index: index)
        case .consoleAPI: q = mediaOperation(prefix: "/_ferry/console/api/", f, &r, index: index)
        case .formUpload: q = formUpload(&r)
        case .publish: q = publishOperation(f, &r, index: index)
        case .playback: q = playback(f, &r)
        case .consoleSite: q = consoleSite(&r)
        case .consoleSession: q = consoleSession(&r)
        case .uppySigning: q = uppyOperation(f, &r, index: index)
        case .health:
            q = FuzzRequest(
                method: r.chance(0.8) ? "GET" : r.pick(["HEAD", "POST", "PUT", "DELETE"]), path: "/_ferry/health")
        }
        q.group = cell.group
        q.credential = cell.credential
        q.host = Array("127.0.0.1:\(port)".utf8)
        q.presentInBody(cell, f, &r)

        switch plan {
        case .random:
            // One mutation most of the time, so that each reaches as deep as it can; sometimes two or three; rarely
            // none.
            if !r.chance(0.04) {
                let count = r.chance(0.6) ? 1 : r.chance(0.6) ? 2 : 3
                for _ in 0..<count {
                    let hasBody = q.json != nil || q.xmlRoot != nil || q.form != nil
                    let label: String =
                        switch r.int(0...99) {
                        case 0..<25: mutateHost(&q, &r)
                        case 25..<50: mutateHeaders(&q, f, &r)
                        case 50..<65: mutateQuery(&q, &r)
                        case 65..<95: hasBody ? mutateBody(&q, f, &r) : mutateHeaders(&q, f, &r)
                        case 95..<97: mutateMethod(&q, &r)
                        default: mutatePath(&q, &r)
                        }
                    q.notes.append(label)
                }
            }
        case .invalidHost(let operation):
            let authority = invalidAuthorities[operation % invalidAuthorities.count]
            q.host = Array(authority.utf8)
            q.notes.append("probe: Host \(authority)")
        case .deepBody(let operation):
            if q.browserPost {
                q.setFormField(
                    "tagging", "<Tagging>" + repeated("<a>", 9000) + "x" + repeated("</a>", 9000) + "</Tagging>")
                q.notes.append("probe: the tagging field nested 9000 deep")
            } else if let root = q.xmlRoot {
                let depth = min(100_000, (q.xmlLimit - 200) / 7)
                q.body = Array(
                    ("<\(root)>" + repeated("<a>", depth) + "x" + repeated("</a>", depth) + "</\(root)>").utf8)
                q.notes.append("probe: XML nested \(depth) deep in <\(root)>")
            } else if q.json != nil, operation < 2 {
                q.json?.append(jsonRaw("Deep", repeated("[", 100_000) + repeated("]", 100_000)))
                q.notes.append("probe: JSON nested 100000 deep")
            } else {
                return nil
            }
        case .bareProcessingInstruction(let operation):
            let utf7 = operation % 2 == 1
            func hidingInstruction(_ document: String, root: String) -> String {
                utf7
                    ? "<?xml version='1.0' encoding='UTF-7'?>+ADw-?ferry?+AD4-" + document
                    : document.replacingOccurrences(of: "<\(root)>", with: "<\(root)><?ferry?>")
            }
            let probe = utf7 ? "<?ferry?> in UTF-7" : "<?ferry?>"
            if q.browserPost {
                q.setFormField("tagging", hidingInstruction(Self.taggingDocument, root: "Tagging"))
                q.notes.append("probe: \(probe) in the tagging field")
            } else if let root = q.xmlRoot {
                q.body = Array(hidingInstruction(String(decoding: q.body, as: UTF8.self), root: root).utf8)
                q.notes.append("probe: \(probe) in <\(root)>")
            } else {
                return nil
            }
        case .invalidElementName:
            // A Latin-1 é where UTF-8 is due, in an element's name.
            let element = Array("<F".utf8) + [0xE9] + Array(">1</F".utf8) + [0xE9] + Array(">".utf8)
            if q.browserPost {
                q.setFormField(
                    "tagging", Array("<Tagging>".utf8) + element + Array(Self.taggingDocument.utf8.dropFirst(9)))
                q.notes.append("probe: an element name that is not UTF-8 in the tagging field")
            } else if let root = q.xmlRoot {
                let start = Array("<\(root)>".utf8)
                guard q.body.starts(with: start) else { return nil }
                q.body = start + element + q.body.dropFirst(start.count)
                q.notes.append("probe: an element name that is not UTF-8 in <\(root)>")
            } else {
                return nil
            }
        case .oversizedBody(let operation):
            if let root = q.xmlRoot {
                q.body = Array(("<\(root)><x>" + repeated("p", q.xmlLimit) + "</x></\(root)>").utf8)
                q.notes.append("probe: XML body over the \(q.xmlLimit >> 10) KiB limit")
            } else if q.json != nil, operation < 2 {
                q.json?.append(jsonField("Padding", repeated("p", 1 << 20)))
                q.notes.append("probe: JSON body over 1 MiB")
            } else {
                return nil
            }
        }
        q.serializeBody()
        if case .random = plan {
            q.authenticate(cell, f, &r, spoil: true)
        } else {
            q.authenticate(cell, f, &r, spoil: false)
        }
        return q
    }

    /// Body-level credentials: the publish signature in the JSON, the upload token in the form, the key in the console
    /// sign-in. Credentials without key material are presented as they are.
    mutating func presentInBody(_ cell: FuzzCell, _ f: FuzzFixtures, _ r: inout SeededGenerator) {
        let keys = f.keys(cell.credential)
        let now = Int(Date().timeIntervalSince1970)
        switch cell.group {
        case .publish:
            let signature: String? =
                switch cell.credential {
                case .publishSignature: f.publishSignature
                case .formToken: f.formToken
                case .consoleSession, .anonymous: nil
                default:
                    keys.map {
                        PublishSignature(secretId: $0.accessKeyId, currentTimeStamp: now, expireTime: now + 3600)
                            .sign(secretKey: $0.secretAccessKey)
                    }
                }
            if let signature { json?.insert(jsonField("signature", signature), at: 0) }
        case .mediaAPI, .consoleAPI:
            if cell.credential == .publishSignature { json?.insert(jsonField("signature", f.publishSignature), at: 0) }
        case .formUpload:
            let token: String? =
                switch cell.credential {
                case .formToken: f.formToken
                case .publishSignature: f.publishSignature
                case .consoleSession, .anonymous: nil
                default:
                    keys.map {
                        UploadToken.make(
                            accessKey: $0.accessKeyId, secretKey: $0.secretAccessKey,
                            policy: PutPolicy(scope: f.bucket, deadline: Date().addingTimeInterval(3600)))
                    }
                }
            if let token { form?.parts.insert(FuzzForm.field("token", token), at: 0) }
        case .consoleSession where method == "POST":
            let pair: (String, String)? =
                switch cell.credential {
                case .publishSignature: (f.publisher.accessKeyId, f.publishSignature)
                case .formToken: (f.root.accessKeyId, f.formToken)
                case .consoleSession, .anonymous: nil
                default: keys.map { ($0.accessKeyId, $0.secretAccessKey) }
                }
            if let pair { json = [jsonField("AccessKeyId", pair.0), jsonField("SecretAccessKey", pair.1)] }
        case .objectAPI where form != nil:
            // A browser POST: the policy signed with the key (SigV4 POST), or an unsigned one.
            presentPostPolicy(keys, f, &r)
        default:
            break
        }
    }

    /// The fields of a SigV4-signed browser POST policy.
    mutating func presentPostPolicy(_ keys: SigV4Credentials?, _ f: FuzzFixtures, _ r: inout SeededGenerator) {
        let date = Date()
        let timestamp = SigV4.timestamp(date)
        let scope = SigV4Scope(date: date, region: "us-east-1", service: "s3")
        let credential = "\(keys?.accessKeyId ?? "FKIANOBODY000000")/\(scope.date)/us-east-1/s3/aws4_request"
        let expiration = ISO8601DateFormatter().string(from: date.addingTimeInterval(3600))
        var conditions = [
            #"{"bucket":"\#(path.dropFirst())"}"#, #"["starts-with","$key","fz/"]"#,
            #"{"x-amz-algorithm":"AWS4-HMAC-SHA256"}"#,
            #"{"x-amz-credential":"\#(credential)"}"#, #"{"x-amz-date":"\#(timestamp)"}"#,
            #"["content-length-range",0,1048576]"#, #"["starts-with","$tagging",""]"#,
        ]
        if let token = keys?.sessionToken { conditions.append(#"{"x-amz-security-token":"\#(token)"}"#) }
        let policy = Data(#"{"expiration":"\#(expiration)","conditions":[\#(conditions.joined(separator: ","))]}"#.utf8)
            .base64EncodedString()
        let signature =
            keys.map {
                SigV4.signature(
                    signingKey: SigV4.signingKey(secretAccessKey: $0.secretAccessKey, scope: scope),
                    stringToSign: policy)
            } ?? String(repeating: "0", count: 64)
        var fields = [
            FuzzForm.field("key", "fz/\(r.word(8))"), FuzzForm.field("tagging", Self.taggingDocument),
            FuzzForm.field("policy", policy),
            FuzzForm.field("x-amz-algorithm", "AWS4-HMAC-SHA256"), FuzzForm.field("x-amz-credential", credential),
            FuzzForm.field("x-amz-date", timestamp), FuzzForm.field("x-amz-signature", signature),
        ]
        if let token = keys?.sessionToken { fields.append(FuzzForm.field("x-amz-security-token", token)) }
        form?.parts.insert(contentsOf: fields, at: 0)
    }

    /// Header-level credentials: a SigV4 signature (sometimes presigned, sometimes spoilt), the session cookie, or a
    /// token where an Authorization header goes.
    mutating func authenticate(_ cell: FuzzCell, _ f: FuzzFixtures, _ r: inout SeededGenerator, spoil: Bool) {
        let bodyLevel: Set<FuzzGroup> = [.publish, .formUpload, .consoleSession]
        switch cell.credential {
        case .root, .scopedKey, .sts, .deviceUpload:
            guard var keys = f.keys(cell.credential), !bodyLevel.contains(cell.group) else { return }
            // A browser POST carries its signature in the form; one in five is signed in a header as well.
            if browserPost, !r.chance(0.2) { return }
            var service = group.signingService
            var region = "us-east-1"
            var date = Date()
            if spoil, cell.group == .objectAPI, !browserPost, r.chance(0.15) {
                presigned = true
                notes.append("presigned")
            }
            if spoil, r.chance(0.08) { payloadHash = SigV4.unsignedPayload }
            // Spoilt before signing: a skewed clock, another region or service, a wrong secret.
            if spoil, r.chance(0.06) {
                switch r.int(0...3) {
                case 0:
                    date = date.addingTimeInterval(r.chance(0.5) ? -1300 : 1300)
                    notes.append("signed with a clock 21 minutes off")
                case 1:
                    region = r.pick(["eu-west-1", "", "us-east-1/x", "ü"])
                    notes.append("signed for region \(region)")
                case 2:
                    service = service == "s3" ? "ferry" : "s3"
                    notes.append("signed for service \(service)")
                default:
                    keys.secretAccessKey += "x"
                    notes.append("signed with a wrong secret")
                }
            }
            sign(keys, service: service, region: region, date: date)
            // Spoilt after signing.
            if spoil, r.chance(0.08) {
                switch r.int(0...3) {
                case 0:
                    headers.removeAll { $0.name.lowercased() == "authorization" }
                    notes.append("Authorization removed after signing")
                case 1:
                    if let index = headers.firstIndex(where: { $0.name.lowercased() == "authorization" }) {
                        var value = headers[index].value
                        let last = value.removeLast()
                        headers[index].value = value + (last == "0" ? "1" : "0")
                        notes.append("signature altered")
                    }
                case 2:
                    lateHeaders.append(("Authorization", "AWS4-HMAC-SHA256 Credential=\(keys.accessKeyId)/x"))
                    notes.append("second Authorization after the signed one")
                default:
                    if let index = headers.firstIndex(where: { $0.name.lowercased() == "x-amz-security-token" }) {
                        headers[index].value = String(headers[index].value.reversed())
                        notes.append("security token reversed")
                    } else {
                        lateHeaders.append(("x-amz-security-token", "FST1." + repeated("A", 300)))
                        notes.append("unsigned security token added")
                    }
                }
            }
        case .publishSignature:
            if ![FuzzGroup.publish, .mediaAPI, .consoleAPI].contains(cell.group) {
                lateHeaders.append(("Authorization", f.publishSignature))
            }
        case .formToken:
            if cell.group != .formUpload { lateHeaders.append(("Authorization", "UpToken " + f.formToken)) }
        case .consoleSession:
            lateHeaders.append(("Cookie", f.consoleCookie))
            if cell.group == .uppySigning, r.chance(0.4) {
                lateHeaders.append(("Uppy-Versions", "@uppy/aws-s3=4.1.0"))
            } else if !spoil || !r.chance(0.1) {
                lateHeaders.append(("X-Ferry-CSRF", f.csrf))
            }
        case .anonymous:
            break
        }
    }
}

// MARK: - Well-formed operations of each group

extension FuzzRequest {
    static func xml(
        _ method: String, _ path: String, _ query: [(name: String, value: String)], root: String, _ document: String,
        limit: Int
    ) -> FuzzRequest {
        var q = FuzzRequest(method: method, path: path)
        q.query = query
        q.xmlRoot = root
        q.xmlLimit = limit
        q.body = Array(document.utf8)
        q.headers = [("content-type", "application/xml")]
        return q
    }

    static let completeDocument =
        #"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"0123456789abcdef0123456789abcdef"</ETag>"#
        + "</Part></CompleteMultipartUpload>"
    static let deleteDocument = "<Delete><Object><Key>fz/gone</Key></Object><Quiet>true</Quiet></Delete>"
    static let corsDocument =
        "<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
        + "<AllowedHeader>*</AllowedHeader><MaxAgeSeconds>60</MaxAgeSeconds></CORSRule></CORSConfiguration>"
    static let taggingDocument = "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>"
    static let bucketDocument =
        "<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>"

    /// An object API operation on the credential's own bucket and keys (the media bucket and its one key for the
    /// device upload credential); operations with XML bodies come up more often.
    static func objectOperation(
        _ f: FuzzFixtures, _ credential: FuzzCredential, _ r: inout SeededGenerator, index: Int? = nil
    ) -> FuzzRequest {
        let device = credential == .deviceUpload
        let bucket = "/" + (device ? f.mediaBucket : f.bucket)
        let object = bucket + "/" + SigV4.uriEncode(device ? f.uploadKey : f.object, encodeSlash: false)
        let multipart = bucket + "/" + SigV4.uriEncode(device ? f.uploadKey : f.multipartKey, encodeSlash: false)
        let multipartId = device ? f.uploadMultipartId : f.multipartId
        let fresh = device ? object : bucket + "/fz/" + r.word(10)
        let operation = index ?? (r.chance(0.35) ? r.pick([1, 7, 10, 18, 24]) : r.int(0...28))
        switch operation {
        case 0: return FuzzRequest(method: "GET", path: "/")
        case 1:
            if index == nil, r.chance(0.5) { return FuzzRequest(method: "PUT", path: "/fz-" + r.word(12)) }
            return xml(
                "PUT", "/fz-" + r.word(12), [], root: "CreateBucketConfiguration", bucketDocument, limit: 64 * 1024)
        case 2: return FuzzRequest(method: "HEAD", path: bucket)
        case 3:
            var q = FuzzRequest(method: "GET", path: bucket)
            q.query = [("list-type", "2"), ("prefix", device ? "video/" : "fz/"), ("max-keys", "10")]
            return q
        case 4:
            var q = FuzzRequest(method: "GET", path: bucket)
            q.query = [("prefix", ""), ("marker", ""), ("max-keys", "5"), ("delimiter", "/")]
            return q
        case 5:
            var q = FuzzRequest(method: "GET", path: bucket)
            q.query = [(r.pick(["versions", "location", "versioning", "cors", "uploads"]), "")]
            return q
        case 6:
            var q = FuzzRequest(method: "DELETE", path: bucket)
            q.query = [("cors", "")]
            return q
        case 7: return xml("PUT", bucket, [("cors", "")], root: "CORSConfiguration", corsDocument, limit: 64 * 1024)
        case 8:
            var q = FuzzRequest(method: "PUT", path: fresh)
            q.body = Torture.randomBytes(r.int(0...2048), using: &r)
            return q
        case 9:
            var q = FuzzRequest(method: "PUT", path: fresh)
            q.headers = [("x-amz-copy-source", String(object.dropFirst()))]
            return q
        case 10:
            var q = xml("POST", bucket, [("delete", "")], root: "Delete", deleteDocument, limit: 2 * 1024 * 1024)
            q.needsContentMD5 = true
            return q
        case 11: return FuzzRequest(method: "GET", path: object)
        case 12: return FuzzRequest(method: "HEAD", path: object)
        case 13: return FuzzRequest(method: "DELETE", path: bucket + "/fz/" + r.word(10))
        case 14:
            var q = FuzzRequest(method: "GET", path: object)
            q.query = [("attributes", "")]
            q.headers = [("x-amz-object-attributes", "ETag,ObjectSize,ObjectParts,Checksum,StorageClass")]
            return q
        case 15:
            var q = FuzzRequest(method: r.pick(["GET", "DELETE"]), path: object)
            q.query = [("tagging", "")]
            return q
        case 16:
            var q = FuzzRequest(method: "POST", path: fresh)
            q.query = [("uploads", "")]
            return q
        case 17:
            var q = FuzzRequest(method: "PUT", path: multipart)
            q.query = [("partNumber", "2"), ("uploadId", multipartId)]
            q.body = Torture.randomBytes(r.int(1...4096), using: &r)
            return q
        case 18: return xml("PUT", object, [("tagging", "")], root: "Tagging", taggingDocument, limit: 64 * 1024)
        case 19:
            var q = FuzzRequest(method: "PUT", path: multipart)
            q.query = [("partNumber", "3"), ("uploadId", multipartId)]
            q.headers = [("x-amz-copy-source", String(object.dropFirst())), ("x-amz-copy-source-range", "bytes=0-3")]
            return q
        case 20:
            var q = FuzzRequest(method: "GET", path: multipart)
            q.query = [("uploadId", multipartId), ("max-parts", "10")]
            return q
        case 21:
            var q = FuzzRequest(method: "DELETE", path: multipart)
            q.query = [("uploadId", r.word(20))]
            return q
        case 22:
            var q = FuzzRequest(method: "POST", path: bucket)
            var form = FuzzForm()
            form.parts = [
                FuzzForm.file("f.bin", type: "application/octet-stream", Torture.randomBytes(r.int(0...512), using: &r))
            ]
            q.form = form
            q.browserPost = true
            q.headers = [("content-type", form.contentType)]
            return q
        case 23:
            var q = FuzzRequest(method: "OPTIONS", path: object)
            q.headers = [
                ("origin", r.pick(["https://app.example", "https://other.example", "null"])),
                ("access-control-request-method", r.pick(["PUT", "GET", "DELETE"])),
                ("access-control-request-headers", "content-type,x-amz-date"),
            ]
            return q
        case 24:
            return xml(
                "POST", multipart, [("uploadId", multipartId)], root: "CompleteMultipartUpload", completeDocument,
                limit: 4 * 1024 * 1024)
        case 25:
            var q = FuzzRequest(method: r.pick(["GET", "PUT", "DELETE"]), path: bucket)
            q.query = [(r.pick(["policy", "acl", "lifecycle", "website", "replication", "tagging", "logging"]), "")]
            return q
        case 26:
            var q = FuzzRequest(method: r.pick(["GET", "PUT"]), path: object)
            q.query = [(r.pick(["acl", "torrent", "retention", "legal-hold", "select", "restore"]), "")]
            return q
        case 27:
            var q = FuzzRequest(method: "GET", path: object)
            q.query = [
                ("partNumber", "1"), ("response-content-type", "text/plain"), ("response-cache-control", "no-cache"),
            ]
            q.headers = [("range", "bytes=0-3")]
            return q
        default:
            var q = FuzzRequest(method: "GET", path: bucket)
            q.query = [("uploads", ""), ("prefix", device ? f.uploadKey : "fz/"), ("max-uploads", "5")]
            return q
        }
    }

    /// A media API operation (on the media API's path or the console's), its ids those of the fixtures (never a
    /// fixture a request would delete or disable).
    static func mediaOperation(prefix: String, _ f: FuzzFixtures, _ r: inout SeededGenerator, index: Int? = nil)
        -> FuzzRequest
    {
        let policy =
            #"{"statements":[{"actions":["s3:GetObject","media:ListVideos"],"bucket":"fuzz","keyPrefix":"fz/"}]}"#
        let (action, fields): (String, [(key: [UInt8], value: [UInt8])]) =
            switch index ?? r.int(0...21) {
            case 0:
                (
                    "CreateUploadVideo",
                    [
                        jsonField("Title", "fuzz \(r.word(5))"), jsonField("FileName", "f.mp4"),
                        jsonRaw("FileSize", "1234"),
                        jsonField("Tags", "a,b"), jsonRaw("CateId", "3"), jsonField("ClientToken", r.word(12)),
                    ]
                )
            case 1: ("RefreshUploadVideo", [jsonField("VideoId", f.pendingVideoId)])
            case 2:
                (
                    "CreateUploadImage",
                    [jsonField("ImageType", "default"), jsonField("ImageExt", "png"), jsonField("Title", "i")]
                )
            case 3: ("RefreshUploadImage", [jsonField("ImageId", f.imageId)])
            case 4: ("GetVideoInfo", [jsonField("VideoId", r.pick([f.storedVideoId, f.pendingVideoId]))])
            case 5, 6:
                (
                    "GetPlayInfo",
                    [
                        jsonField("VideoId", f.storedVideoId), jsonRaw("AuthTimeout", "3600"),
                        jsonField("Formats", "m3u8,mp4"),
                        jsonField("Definition", "HD"),
                    ]
                )
            case 7, 8: ("GetMezzanineInfo", [jsonField("VideoId", f.storedVideoId), jsonRaw("AuthTimeout", "600")])
            case 9:
                (
                    "ListVideos",
                    [
                        jsonRaw("PageNo", "1"), jsonRaw("PageSize", "10"), jsonField("Title", "s"),
                        jsonField("Status", "Uploading"),
                    ]
                )
            case 10:
                (
                    "UpdateVideoInfo",
                    [
                        jsonField("VideoId", f.storedVideoId), jsonField("Title", "t \(r.word(4))"),
                        jsonField("CoverURL", "http://example.com/c.jpg"),
                    ]
                )
            case 11: ("DeleteVideo", [jsonField("VideoIds", r.word(32))])
            case 12: ("GetImageInfo", [jsonField("ImageId", f.imageId), jsonRaw("AuthTimeout", "600")])
            case 13: ("DeleteImage", [jsonField("ImageIds", r.word(32))])
            case 14: ("AssumeRole", [jsonRaw("DurationSeconds", "900"), jsonRaw("Policy", policy)])
            case 15: ("CreateAccessKey", [jsonRaw("Policy", policy), jsonField("Description", "d")])
            case 16: ("ListAccessKeys", [])
            case 17: ("ListWebhookEvents", [jsonRaw("Limit", "10")])
            case 18: ("RetryWebhookEvent", [jsonField("EventId", r.word(16))])
            case 19: ("DisableAccessKey", [jsonField("AccessKeyId", "FKIA" + r.word(16).uppercased())])
            case 20:
                (r.pick(["", "Foo", "getvideoinfo", "GetVideoInfo/x", "..", repeated("A", 300), "Get%20Video"]), [])
            default:
                (
                    "GetVideoInfo",
                    [jsonField("VideoId", r.pick([f.imageId, "", "../" + f.storedVideoId, repeated("f", 5000)]))]
                )
            }
        var q = FuzzRequest(
            method: r.chance(0.95) ? "POST" : r.pick(["GET", "PUT", "DELETE", "OPTIONS"]), path: prefix + action)
        q.json = fields
        q.headers = [("content-type", "application/json")]
        return q
    }

    static func formUpload(_ r: inout SeededGenerator) -> FuzzRequest {
        var q = FuzzRequest(method: r.chance(0.95) ? "POST" : r.pick(["GET", "PUT"]), path: "/_ferry/form")
        var form = FuzzForm()
        form.parts = [FuzzForm.field("key", "fz/form-\(r.word(8))")]
        if r.chance(0.3) { form.parts.append(FuzzForm.field("x:note", "hello")) }
        if r.chance(0.3) { form.parts.append(FuzzForm.field("x-qn-meta-origin", "fuzz")) }
        form.parts.append(FuzzForm.file("f.txt", type: "text/plain", Torture.randomBytes(r.int(0...1024), using: &r)))
        q.form = form
        q.headers = [("content-type", form.contentType)]
        return q
    }

    /// Apply, resume or commit; the signature goes in first (presentInBody).
    static func publishOperation(_ f: FuzzFixtures, _ r: inout SeededGenerator, index: Int? = nil) -> FuzzRequest {
        let (action, fields): (String, [(key: [UInt8], value: [UInt8])]) =
            switch index ?? r.int(0...6) {
            case 0, 1:
                (
                    "ApplyUploadUGC",
                    [
                        jsonField("videoType", "mp4"), jsonField("videoName", "v \(r.word(4))"),
                        jsonRaw("videoSize", "1024"),
                        jsonField("coverType", r.pick(["jpg", "png"])),
                    ]
                )
            case 2: ("ApplyUploadUGC", [jsonField("vodSessionKey", f.vodSessionKey)])
            case 3, 4, 5: ("CommitUploadUGC", [jsonField("vodSessionKey", f.vodSessionKey)])
            default: (r.pick(["", "Apply", "CommitUploadUGC/x", repeated("B", 200)]), [])
            }
        var q = FuzzRequest(method: r.chance(0.95) ? "POST" : r.pick(["GET", "PUT"]), path: "/_ferry/ugc/" + action)
        q.json = fields
        q.headers = [("content-type", "application/json")]
        return q
    }

    static func playback(_ f: FuzzFixtures, _ r: inout SeededGenerator) -> FuzzRequest {
        let video =
            r.chance(0.5)
            ? f.storedVideoId : r.chance(0.6) ? f.pendingVideoId : r.pick([r.word(32), "", "..", repeated("v", 300)])
        let token =
            r.chance(0.6)
            ? (video == f.pendingVideoId ? f.pendingPlaybackToken : f.playbackToken)
            : r.pick([
                "0.AAAAAAAAAAAAAAAAAAAAAA", "99999999999999999999.x", "-1.x", "1.", ".", "", "a.b.c", "..",
                "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "eyJhbGciOiJIUzI1NiIsImtpZCI6ImZlcnJ5In0.e30.AAAA",
                repeated("9", 8000), "%zz", "\u{00FC}.\u{00FC}",
            ])
        let file = r.pick([
            "master.m3u8", "cover.jpg", "LD/index.m3u8", "LD/seg_00000.m4s", "LD.mp4", "../x", "a/b/c/d/e", "%2e%2e/x",
            "a//b",
            "\u{00FC}.m3u8", repeated("f", 300), "",
            // The files made on request or from the catalog: pictures, the storyboard, DASH, sound, subtitle tracks.
            "thumbnail.jpg", "thumbnail.png", "thumbnail.webp", "thumbnail.gif", "animated.gif", "animated.webp",
            "animated.jpg", "storyboard.jpg", "storyboard.vtt", "manifest.mpd", "SQ.m4a", "SQ/index.m3u8",
            "subtitles/" + r.word(12) + ".m3u8", "subtitles/" + r.word(12) + ".vtt", "subtitles/x/seg_00000.vtt",
            "subtitles/../master.m3u8", "subtitles/" + repeated("s", 300),
        ])
        var q = FuzzRequest(
            method: r.chance(0.6) ? "GET" : r.pick(["HEAD", "HEAD", "OPTIONS", "POST", "PUT", "DELETE"]),
            path: "/_ferry/play/"
                + [video, file].map { SigV4.uriEncode($0, encodeSlash: false) }.joined(separator: "/"))
        if r.chance(0.9) { q.query = [("token", token)] }
        // A picture's parameters: numbers out of range, not numbers, not finite, overflowing, repeated.
        if r.chance(0.5) {
            let hostile = [
                "", "-1", "0", "nan", "NaN", "inf", "-inf", "1e308", "1e300", "9300000000000000", "1e-320",
                "99999999999999999999", "0x10", "1,5",
                " 1", "+3", "1.5.5", "10", "100000", "\u{00FC}", repeated("9", 400), "-0", "3.000000000000000001",
            ]
            let names = ["time", "width", "height", "fit_mode", "start", "end", "fps"]
            for _ in 0..<r.int(1...4) {
                let name = r.pick(names)
                q.query.append((name, name == "fit_mode" ? r.pick(["crop", "pad", "stretch", "preserve", "x", ""]) : r.pick(hostile)))
            }
        }
        if r.chance(0.3) {
            q.headers = [("range", r.pick(["bytes=0-10", "bytes=-1", "bytes=5-1", "bytes=99999999999999999999-"]))]
        }
        return q
    }

    static func consoleSite(_ r: inout SeededGenerator) -> FuzzRequest {
        let path = r.pick([
            "/console", "/console/", "/console/index.html", "/console/app.js", "/console/nope",
            "/console/../_ferry/health",
            "/console/%00", "/console/" + repeated("c", 4000), "/console/a/b", "/console/%2e%2e/%2e%2e/etc/passwd",
        ])
        var q = FuzzRequest(
            method: r.chance(0.8) ? r.pick(["GET", "HEAD"]) : r.pick(["POST", "PUT", "DELETE", "OPTIONS"]), path: path)
        if r.chance(0.2) { q.headers = [("if-none-match", r.pick(["\"x\"", "*", repeated("\"", 100)]))] }
        return q
    }

    static func consoleSession(_ r: inout SeededGenerator) -> FuzzRequest {
        var q = FuzzRequest(
            method: r.chance(0.6) ? "POST" : r.pick(["GET", "DELETE", "PUT"]), path: "/_ferry/console/session")
        if q.method == "POST" {
            q.json = []
            q.headers = [("content-type", "application/json")]
        }
        return q
    }

    /// The Uppy endpoints on the fixture upload (aborts name another upload, so the fixture's stays).
    static func uppyOperation(_ f: FuzzFixtures, _ r: inout SeededGenerator, index: Int? = nil) -> FuzzRequest {
        var q: FuzzRequest
        switch index ?? r.int(0...6) {
        case 0:
            q = FuzzRequest(method: "POST", path: "/s3/multipart")
            let type = r.pick(["video/mp4", "image/png", ""])
            q.json = [
                jsonField("filename", type == "image/png" ? "i.png" : "u.mp4"), jsonField("type", type),
                jsonRaw("metadata", #"{"name":"uppy \#(r.word(4))","size":"2048"}"#),
            ]
        case 1:
            q = FuzzRequest(method: "GET", path: "/s3/multipart/" + f.uppyUploadId)
            q.query = [("key", f.uppyKey)]
        case 2, 3:
            q = FuzzRequest(method: "GET", path: "/s3/multipart/\(f.uppyUploadId)/\(r.pick(["1", "2", "10000"]))")
            q.query = [("key", f.uppyKey)]
        case 4:
            q = FuzzRequest(method: "POST", path: "/s3/multipart/\(f.uppyUploadId)/complete")
            q.query = [("key", f.uppyKey)]
            q.json = [jsonRaw("parts", #"[{"PartNumber":1,"ETag":"\"0123456789abcdef0123456789abcdef\""}]"#)]
        case 5:
            q = FuzzRequest(method: "DELETE", path: "/s3/multipart/" + r.word(24))
            q.query = [("key", f.uppyKey)]
        default:
            q = FuzzRequest(
                method: r.pick(["GET", "PUT", "PATCH", "POST"]),
                path: r.pick([
                    "/s3/multipart/a/b/c", "/s3/multipart//", "/s3/multipart/\(f.uppyUploadId)/0", "/s3/multipart/x/-1",
                ]))
            q.query = [("key", f.uppyKey)]
        }
        if q.json != nil { q.headers = [("content-type", "application/json")] }
        return q
    }
}
