import FerryCore
import Foundation
import Testing

/// The media API's request types against the wire: each encodes to exactly the keys its operation's request schema in
/// docs/openapi.yaml lists, leaves out what is nil, and decodes a wire request back into its fields.
@Suite("Media API requests as shared Codable types", .timeLimit(.minutes(10)))
struct MediaContractRequestTests {
    /// The property names and required names of a request body schema.
    struct RequestSchema: Equatable {
        var properties: Set<String>
        var required: Set<String>
    }

    /// One request type's check: an operation, a request on the wire (every documented field set), the value it is,
    /// and a value with nothing set.
    struct Case: Sendable {
        var operation: String
        var wire: String
        /// Decodes `wire` and says whether it gives the value back.
        var decodesToValue: @Sendable () throws -> Bool
        /// The value encoded.
        var encoded: @Sendable () throws -> Data
        /// The value with every optional field nil, encoded.
        var encodedEmpty: @Sendable () throws -> Data
    }

    static func check<T: Codable & Equatable & Sendable>(_ operation: String, _ wire: String, _ value: T, empty: T)
        -> Case
    {
        Case(
            operation: operation, wire: wire,
            decodesToValue: { try MediaContract.decode(T.self, from: Data(wire.utf8)) == value },
            encoded: { try MediaContract.encode(value) }, encodedEmpty: { try MediaContract.encode(empty) })
    }

    static let policy = AccessPolicy(statements: [.init(actions: ["media:*"], bucket: "media", keyPrefix: "video/")])
    static let policyJSON = #"{"statements": [{"actions": ["media:*"], "bucket": "media", "keyPrefix": "video/"}]}"#

    /// Every operation of the media API with a request on the wire that sets every documented field.
    static let cases: [Case] = [
        check(
            "CreateUploadVideo",
            #"""
            {"Title": "Holiday", "FileName": "holiday.mp4", "FileSize": 5000000000, "Description": "d",
             "CoverURL": "https://c/x.jpg", "CateId": 7, "Tags": "a,b", "Transcode": "NoTranscode",
             "TemplateGroupId": "default", "UserData": "u", "ClientToken": "tok", "PlaybackPolicy": "public",
             "Downloads": "capped-1080p"}
            """#,
            MediaContract.CreateUploadVideoRequest(
                title: "Holiday", fileName: "holiday.mp4", fileSize: 5_000_000_000, description: "d",
                coverURL: "https://c/x.jpg", cateId: 7, tags: "a,b", transcode: "NoTranscode",
                templateGroupId: "default",
                userData: "u", clientToken: "tok", playbackPolicy: .public, downloads: .capped1080p),
            empty: .init(title: nil, fileName: nil)),
        check(
            "RefreshUploadVideo", #"{"VideoId": "v1"}"#, MediaContract.VideoIdRequest(videoId: "v1"),
            empty: .init(videoId: nil)),
        check(
            "GetVideoInfo", #"{"VideoId": "v2"}"#, MediaContract.VideoIdRequest(videoId: "v2"),
            empty: .init(videoId: nil)),
        check(
            "GetPlayInfo", #"{"VideoId": "v3", "AuthTimeout": 600, "Formats": "m3u8,mp4", "Definition": "LD,HD"}"#,
            MediaContract.PlayInfoRequest(videoId: "v3", authTimeout: 600, formats: "m3u8,mp4", definition: "LD,HD"),
            empty: .init(videoId: nil)),
        check(
            "GetMezzanineInfo", #"{"VideoId": "v4", "AuthTimeout": 60}"#,
            MediaContract.MezzanineInfoRequest(videoId: "v4", authTimeout: 60), empty: .init(videoId: nil)),
        check(
            "ListVideos", #"{"Status": "Normal", "CateId": 3, "Tag": "t", "Title": "Do", "PageNo": 2, "PageSize": 50}"#,
            MediaContract.ListVideosRequest(
                status: "Normal", cateId: 3, tag: "t", title: "Do", pageNo: 2, pageSize: 50),
            empty: .init()),
        check(
            "UpdateVideoInfo",
            #"{"VideoId": "v5", "Title": "T", "Description": "", "Tags": "x", "CateId": 1, "CoverURL": "http://c/y", "PlaybackPolicy": "signed", "Downloads": "none"}"#,
            MediaContract.UpdateVideoInfoRequest(
                videoId: "v5", title: "T", description: "", tags: "x", cateId: 1, coverURL: "http://c/y",
                playbackPolicy: .signed, downloads: DownloadPolicy.none),
            empty: .init(videoId: nil)),
        check(
            "DeleteVideo", #"{"VideoIds": "v6,v7"}"#, MediaContract.DeleteVideoRequest(videoIds: ["v6", "v7"]),
            empty: .init(videoIds: nil)),
        check(
            "CreateUploadImage",
            #"{"ImageType": "cover", "ImageExt": "jpg", "Title": "I", "Tags": "p", "CateId": 2, "Description": "e", "ClientToken": "t2"}"#,
            MediaContract.CreateUploadImageRequest(
                imageType: "cover", imageExt: "jpg", title: "I", tags: "p", cateId: 2, description: "e", clientToken: "t2"),
            empty: .init()),
        check(
            "RefreshUploadImage", #"{"ImageId": "i1"}"#, MediaContract.ImageIdRequest(imageId: "i1"),
            empty: .init(imageId: nil)),
        check(
            "GetImageInfo", #"{"ImageId": "i2", "AuthTimeout": 30}"#,
            MediaContract.ImageInfoRequest(imageId: "i2", authTimeout: 30), empty: .init(imageId: nil)),
        check(
            "DeleteImage", #"{"ImageIds": "i3,i4"}"#, MediaContract.DeleteImageRequest(imageIds: ["i3", "i4"]),
            empty: .init(imageIds: nil)),
        check(
            "AssumeRole", #"{"DurationSeconds": 900, "Policy": \#(policyJSON)}"#,
            MediaContract.AssumeRoleRequest(durationSeconds: 900, policy: policy), empty: .init()),
        check(
            "CreateAccessKey",
            #"{"Policy": \#(policyJSON), "Description": "app server", "Quota": {"StorageBytes": 1000, "Videos": 5, "ConcurrentUploads": 2, "RequestsPerSecond": 2.5}}"#,
            MediaContract.CreateAccessKeyRequest(
                policy: policy, description: "app server",
                quota: AccessKeyQuota(storageBytes: 1000, videos: 5, concurrentUploads: 2, requestsPerSecond: 2.5)),
            empty: .init(policy: nil)),
        check(
            "UpdateAccessKey", #"{"AccessKeyId": "FKIA1", "Quota": {"StorageBytes": 10}}"#,
            MediaContract.UpdateAccessKeyRequest(accessKeyId: "FKIA1", quota: AccessKeyQuota(storageBytes: 10)),
            empty: .init(accessKeyId: nil, quota: nil)),
        check(
            "GetUsage", #"{"AccessKeyId": "FKIA1"}"#, MediaContract.GetUsageRequest(accessKeyId: "FKIA1"),
            empty: .init()),
        check("ListAccessKeys", "{}", MediaContract.ListAccessKeysRequest(), empty: .init()),
        check(
            "DisableAccessKey", #"{"AccessKeyId": "FKIA1"}"#, MediaContract.AccessKeyIdRequest(accessKeyId: "FKIA1"),
            empty: .init(accessKeyId: nil)),
        check(
            "ListWebhookEvents", #"{"Limit": 10}"#, MediaContract.ListWebhookEventsRequest(limit: 10), empty: .init()),
        check(
            "RetryWebhookEvent", #"{"EventId": "evt_1"}"#, MediaContract.WebhookEventIdRequest(eventId: "evt_1"),
            empty: .init(eventId: nil)),
        check("GetServiceStatus", "{}", MediaContract.ServiceStatusRequest(), empty: .init()),
        check(
            "CreateSigningKey", #"{"Algorithm": "RS256"}"#, MediaContract.CreateSigningKeyRequest(algorithm: "RS256"),
            empty: .init()),
        check("ListSigningKeys", "{}", MediaContract.ListSigningKeysRequest(), empty: .init()),
        check(
            "DeleteSigningKey", #"{"KeyId": "fsk_1"}"#, MediaContract.SigningKeyIdRequest(keyId: "fsk_1"),
            empty: .init(keyId: nil)),
        check(
            "AddSubtitle", #"{"VideoId": "v1", "Language": "en", "Name": "English", "Default": true, "Content": "WEBVTT\n"}"#,
            MediaContract.AddSubtitleRequest(videoId: "v1", language: "en", name: "English", isDefault: true, content: "WEBVTT\n"),
            empty: .init(videoId: nil, language: nil, content: nil)),
        check("ListSubtitles", #"{"VideoId": "v1"}"#, MediaContract.VideoIdRequest(videoId: "v1"), empty: .init(videoId: nil)),
        check(
            "DeleteSubtitle", #"{"VideoId": "v1", "SubtitleId": "st1"}"#,
            MediaContract.DeleteSubtitleRequest(videoId: "v1", subtitleId: "st1"), empty: .init(videoId: nil, subtitleId: nil)),
    ]

    static var openAPIPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("docs/openapi.yaml").path
    }

    /// The request body schema of every `/_ferry/v1/<Operation>` in the document, read line by line: the document is
    /// block-style YAML with two-space indents, and a schema used twice is an anchor (`&id002`) and aliases (`*id002`).
    static func requestSchemas(_ yaml: String) -> [String: RequestSchema] {
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        func trimmed(_ i: Int) -> String { lines[i].trimmingCharacters(in: .whitespaces) }
        var anchors: [String: Int] = [:]
        for (i, line) in lines.enumerated() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("schema: &") { anchors[String(text.dropFirst("schema: &".count))] = i }
        }
        /// The properties and required names of the schema whose key is on line `start`.
        func schema(at start: Int) -> RequestSchema {
            let base = indent(lines[start])
            var result = RequestSchema(properties: [], required: [])
            var i = start + 1
            while i < lines.count, trimmed(i).isEmpty || indent(lines[i]) > base {
                let text = trimmed(i)
                if indent(lines[i]) == base + 2, text == "properties:" {
                    var j = i + 1
                    while j < lines.count, indent(lines[j]) > base + 2 {
                        if indent(lines[j]) == base + 4, trimmed(j).hasSuffix(":") {
                            result.properties.insert(String(trimmed(j).dropLast()))
                        }
                        j += 1
                    }
                    i = j
                    continue
                }
                if indent(lines[i]) == base + 2, text == "required:" {
                    var j = i + 1
                    while j < lines.count, trimmed(j).hasPrefix("- ") {
                        result.required.insert(String(trimmed(j).dropFirst(2)))
                        j += 1
                    }
                    i = j
                    continue
                }
                i += 1
            }
            return result
        }
        var schemas: [String: RequestSchema] = [:]
        for (i, line) in lines.enumerated() where indent(line) == 2 && line.hasSuffix(":") {
            let path = line.trimmingCharacters(in: .whitespaces).dropLast()
            guard path.hasPrefix("/_ferry/v1/") else { continue }
            let operation = String(path.dropFirst("/_ferry/v1/".count))
            var j = i + 1
            while j < lines.count, indent(lines[j]) > 2, trimmed(j) != "requestBody:" { j += 1 }
            while j < lines.count, indent(lines[j]) > 2, !trimmed(j).hasPrefix("schema:") { j += 1 }
            guard j < lines.count, indent(lines[j]) > 2 else { continue }
            let text = trimmed(j)
            if text.hasPrefix("schema: *"), let anchor = anchors[String(text.dropFirst("schema: *".count))] {
                schemas[operation] = schema(at: anchor)
            } else {
                schemas[operation] = schema(at: j)
            }
        }
        return schemas
    }

    static func keys(_ data: Data) throws -> Set<String> {
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Set(object.keys)
    }

    @Test("the document's request schemas are read as written")
    func readsTheDocument() throws {
        let schemas = Self.requestSchemas(try String(contentsOfFile: Self.openAPIPath, encoding: .utf8))
        #expect(
            schemas["CreateUploadVideo"]?.required == ["Title", "FileName"]
                && schemas["CreateUploadVideo"]?.properties.contains("ClientToken") == true)
        // GetVideoInfo's schema is an alias of RefreshUploadVideo's.
        #expect(schemas["GetVideoInfo"] == RequestSchema(properties: ["VideoId"], required: ["VideoId"]))
        #expect(schemas["ListAccessKeys"] == RequestSchema(properties: [], required: []))
        #expect(schemas["AssumeRole"]?.properties == ["DurationSeconds", "Policy"])
        // Every operation the document lists has a request type here, and no request type names an unknown one.
        #expect(Set(schemas.keys) == Set(Self.cases.map(\.operation)))
        #expect(schemas.count == 27)
    }

    @Test("each request type encodes to exactly its operation's documented keys, with the values on the wire")
    func encodesTheWireKeys() throws {
        let schemas = Self.requestSchemas(try String(contentsOfFile: Self.openAPIPath, encoding: .utf8))
        for check in Self.cases {
            let schema = try #require(schemas[check.operation], "\(check.operation) is not in docs/openapi.yaml")
            let wire = Data(check.wire.utf8)
            // The wire request sets every documented field, and only those.
            #expect(try Self.keys(wire) == schema.properties, "\(check.operation)")
            #expect(schema.required.isSubset(of: schema.properties), "\(check.operation)")
            let encoded = try check.encoded()
            #expect(try Self.keys(encoded) == schema.properties, "\(check.operation)")
            // The same values, not only the same keys.
            let object = try JSONSerialization.jsonObject(with: encoded) as? NSDictionary
            let expected = try JSONSerialization.jsonObject(with: wire) as? NSDictionary
            #expect(
                object != nil && object == expected, "\(check.operation): \(String(decoding: encoded, as: UTF8.self))")
        }
    }

    @Test("nil fields are left out of the encoded request")
    func omitsNilFields() throws {
        for check in Self.cases {
            #expect(try Self.keys(check.encodedEmpty()).isEmpty, "\(check.operation)")
        }
        let partial = MediaContract.CreateUploadVideoRequest(title: "t", fileName: nil, cateId: 4)
        #expect(try Self.keys(MediaContract.encode(partial)) == ["Title", "CateId"])
        let play = MediaContract.PlayInfoRequest(videoId: "v", authTimeout: nil, formats: "mp4")
        #expect(try Self.keys(MediaContract.encode(play)) == ["VideoId", "Formats"])
    }

    @Test("decoding a request from the wire gives its fields back")
    func decodesTheWire() throws {
        for check in Self.cases {
            #expect(try check.decodesToValue(), "\(check.operation)")
        }
        // What the server reads: a missing field is nil (so it can answer MissingParameter), not a decoding failure.
        let missing = try MediaContract.decode(
            MediaContract.CreateUploadVideoRequest.self, from: Data(#"{"FileName": "a.mp4"}"#.utf8))
        #expect(missing.title == nil && missing.fileName == "a.mp4")
        let null = try MediaContract.decode(MediaContract.VideoIdRequest.self, from: Data(#"{"VideoId": null}"#.utf8))
        #expect(null.videoId == nil)
    }

    @Test("a field of the wrong type fails to decode with the wire name in its coding path")
    func wrongTypeNamesTheWireKey() throws {
        do {
            _ = try MediaContract.decode(MediaContract.CreateUploadVideoRequest.self, from: Data(#"{"Title": 5}"#.utf8))
            Issue.record("a number decoded as a title")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["Title"])
        }
        do {
            _ = try MediaContract.decode(
                MediaContract.AssumeRoleRequest.self, from: Data(#"{"DurationSeconds": "long"}"#.utf8))
            Issue.record("a string decoded as seconds")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["DurationSeconds"])
        }
    }

    @Test("answers that carry a secret print, debug-print and dump without it")
    func secretsNeverPrinted() {
        let credentials = MediaContract.TemporaryCredentials(
            accessKeyId: "STSKEY", accessKeySecret: "sts-secret-value", securityToken: "token-value",
            expiration: "2030-01-01T00:00:00Z")
        let key = MediaContract.NewAccessKey(accessKeyId: "FKIANEW", accessKeySecret: "key-secret-value", status: "active")
        let ticket = MediaContract.UploadTicketAnswer(
            videoId: "v1", uploadAddress: "YWRkcmVzcw==", uploadAuth: "upload-auth-value",
            resumableUploadURL: "http://127.0.0.1/_ferry/uploads/grant/grant-value")
        for (value, secrets) in [
            (credentials as Any, ["sts-secret-value", "token-value"]), (key as Any, ["key-secret-value"]),
            (ticket as Any, ["upload-auth-value", "grant-value"]),
            (
                PublishContract.ApplyAnswer(
                    vodSessionKey: "session-value", videoId: "v1", storageEndpoint: "http://127.0.0.1", storageBucket: "b",
                    storageRegion: nil, videoKey: "k", coverKey: nil, uploadAuth: "apply-auth-value") as Any,
                ["session-value", "apply-auth-value"]
            ),
            (MediaContract.AssumeRoleAnswer(credentials: credentials) as Any, ["sts-secret-value", "token-value"]),
            (MediaContract.CreateAccessKeyAnswer(accessKey: key) as Any, ["key-secret-value"]),
        ] {
            var dumped = ""
            dump(value, to: &dumped)
            for text in ["\(value)", String(reflecting: value), dumped] {
                #expect(!secrets.contains { text.contains($0) }, "\(text)")
            }
        }
        #expect("\(credentials)".contains("STSKEY") && "\(key)".contains("FKIANEW"))
    }
}
