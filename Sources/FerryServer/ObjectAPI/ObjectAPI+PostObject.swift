import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    /// Form fields that no policy condition has to name.
    static let postFieldsWithoutConditions: Set<String> = ["policy", "x-amz-signature", "file"]

    /// A browser upload (`POST /bucket` with a `multipart/form-data` body): the form carries the key, the object's
    /// attributes and an S3 POST policy signed with SigV4, then the file; fields after the file are ignored, as S3
    /// ignores them (an HTML form's submit button).
    ///
    /// The signature over the base64 policy authenticates the signer's access key; the policy's conditions must hold
    /// for every field (no field may go unmentioned) and its `content-length-range` for the file, checked while the
    /// file streams. Nothing is stored unless every check passes.
    func postObject(_ request: Request, bucket: String, endpoint: PublicEndpoint) async throws -> Response {
        guard let contentType = request.headers[.contentType],
            contentType.lowercased().hasPrefix("multipart/form-data"),
            let boundary = MultipartFormParser.boundary(fromContentType: contentType)
        else {
            throw S3Error(.malformedPOSTRequest, "The body of your POST request is not well-formed multipart/form-data.")
        }
        try Self.validateBucketName(bucket)
        let reader = FormBodyReader(body: request.body, boundary: boundary)
        var fields: [String: String] = [:]
        var fileHeaders: MultipartFormParser.PartHeaders?
        do {
            reading: while true {
                switch try await reader.nextPart() {
                case .field(let name, let value):
                    let lowered = name.lowercased()
                    guard fields[lowered] == nil else {
                        throw S3Error(.invalidArgument, "The form field \(name.prefix(64)) is given twice.", details: ["ArgumentName": String(name.prefix(64))])
                    }
                    fields[lowered] = value
                case .file(let headers):
                    fileHeaders = headers
                    break reading
                case .end:
                    break reading
                }
            }
        } catch let error as FormUploadError {
            throw S3Error(.malformedPOSTRequest, error.message)
        }
        guard let fileHeaders else {
            throw S3Error(.incorrectNumberOfFilesInPostRequest, "POST requires exactly one file upload per request.")
        }
        if fields["awsaccesskeyid"] != nil || fields["signature"] != nil {
            throw Self.notImplemented("POST uploads signed with Signature Version 2")
        }
        guard let policyText = fields["policy"] else {
            throw S3Error(.accessDenied, "Anonymous POST uploads are not allowed: sign a policy with AWS Signature Version 4.")
        }
        let principal = try await verifyPostSignature(fields, policy: policyText)
        let policy = try PostPolicy(base64: policyText)
        guard policy.expiration > credentials.now() else {
            throw S3Error(.accessDenied, "Invalid according to Policy: Policy expired.")
        }
        guard var key = fields["key"], !key.isEmpty else {
            throw S3Error(.invalidArgument, "Bucket POST must contain a field named 'key'.", details: ["ArgumentName": "key"])
        }
        try policy.check(fields: fields, bucket: bucket, exempt: Self.postFieldsWithoutConditions)
        if let filename = fileHeaders.filename {
            key = key.replacingOccurrences(of: "${filename}", with: filename)
        }
        try Self.validateKey(key)
        // Tags set with the object need what setting them needs (``taggingActions(_:_:)``).
        guard principal.allows(action: "s3:PutObject", bucket: bucket, key: key),
            fields["tagging"] == nil || principal.allows(action: "s3:PutObjectTagging", bucket: bucket, key: key)
        else {
            throw S3Error(.accessDenied, "Access Denied")
        }
        try takeRequestTurn(principal)
        let stored = try await writeAllowed(bucket, key)
        if let acl = fields["acl"], !["private", "bucket-owner-full-control"].contains(acl) {
            throw Self.notImplemented("Access control lists (acl: \(acl.prefix(40)))")
        }
        var headers: HTTPFields = [:]
        for (name, value) in fields {
            if let field = HTTPField.Name(name), name.hasPrefix("x-amz-meta-") || Self.postAttributeFields.contains(name) {
                headers[field] = value
            }
        }
        var attributes = try Self.attributes(from: headers)
        if attributes.contentType == nil { attributes.contentType = "binary/octet-stream" }
        // A digest the form declares (Content-MD5, x-amz-checksum-*) is checked as a PUT's header would be.
        var declared: HTTPFields = [:]
        for (name, value) in fields where name == "content-md5" || name.hasPrefix("x-amz-checksum-") {
            if let field = HTTPField.Name(name) { declared[field] = value }
        }
        let expectation = try ChecksumExpectation(headers: declared)
        var tags: [ObjectTag] = []
        if let tagging = fields["tagging"] {
            guard let document = try? S3XML.decode(S3Tagging.self, from: Data(tagging.utf8), root: "Tagging") else {
                throw S3Error(.malformedXML, "The tagging field is not a Tagging document.")
            }
            tags = try ObjectTagging.validate(document.tagSet.tags.map { ObjectTag(key: $0.key, value: $0.value) })
        }
        let range = try policy.contentLengthRange()
        let object: ObjectInfo
        do {
            object = try await store.putObject(
                bucket: bucket, key: key, attributes: attributes, tags: tags,
                body: reader.fileContent(limit: range?.upperBound, ignoringLaterParts: true),
                checksums: expectation.algorithms,
                condition: ObjectWriteCondition.none.forFile(stored),
                verify: { digests in
                    try expectation.verify(digests, trailers: [])
                    if let stored, !stored.accepts(etag: Hex.encode(digests.md5)) { throw stored.refusal }
                    if let range, digests.size < range.lowerBound {
                        throw S3Error(
                            .entityTooSmall, "Your proposed upload is smaller than the minimum allowed size",
                            details: ["MinSizeAllowed": String(range.lowerBound), "ProposedSize": String(digests.size)])
                    }
                }, charge: StorageCharge(principal: principal))
        } catch let error as FormUploadError {
            switch error.code {
            case .fileTooLarge:
                throw S3Error(
                    .entityTooLarge, "Your proposed upload exceeds the maximum allowed size",
                    details: ["MaxSizeAllowed": String(range?.upperBound ?? 0)])
            default:
                throw S3Error(.malformedPOSTRequest, error.message)
            }
        }
        await objectStored(object)
        return try Self.postResponse(object, fields: fields, request: request, endpoint: endpoint)
    }

    /// Form fields that become the object's HTTP attributes.
    static let postAttributeFields: Set<String> = [
        "content-type", "cache-control", "content-disposition", "content-encoding", "content-language", "expires",
    ]

    /// Checks the SigV4 signature over the policy and resolves who signed it.
    private func verifyPostSignature(_ fields: [String: String], policy: String) async throws -> Principal {
        guard fields["x-amz-algorithm"] == SigV4.algorithm else {
            throw S3Error(.invalidArgument, "POST uploads must use x-amz-algorithm AWS4-HMAC-SHA256.", details: ["ArgumentName": "x-amz-algorithm"])
        }
        guard let credential = fields["x-amz-credential"], let signature = fields["x-amz-signature"],
            let timestamp = fields["x-amz-date"], SigV4.parseTimestamp(timestamp) != nil
        else {
            throw S3Error(
                .invalidArgument, "A POST upload signed with SigV4 needs x-amz-credential, x-amz-date and x-amz-signature.",
                details: ["ArgumentName": "x-amz-signature"])
        }
        let slash = credential.split(separator: "/", omittingEmptySubsequences: false)
        guard slash.count >= 5, let scope = SigV4Scope(parsing: slash.suffix(4).joined(separator: "/")),
            scope.service == "s3", timestamp.hasPrefix(scope.date)
        else {
            throw S3Error(.invalidArgument, "x-amz-credential is not access-key/date/region/s3/aws4_request for x-amz-date.", details: ["ArgumentName": "x-amz-credential"])
        }
        let accessKeyId = slash.dropLast(4).joined(separator: "/")
        let resolved = try await credentials.resolve(
            accessKeyId: accessKeyId, sessionToken: fields["x-amz-security-token"])
        let key = SigV4.signingKey(secretAccessKey: resolved.secretAccessKey, scope: scope)
        guard SigV4.constantTimeEquals(SigV4.signature(signingKey: key, stringToSign: policy), signature.lowercased()) else {
            throw S3Error(
                .signatureDoesNotMatch,
                "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
        }
        return resolved.principal
    }

    /// The answer S3 gives a POST upload: a redirect, or `success_action_status` 200, 201 (with a `PostResponse`
    /// document) or 204 (the default).
    private static func postResponse(
        _ object: ObjectInfo, fields: [String: String], request: Request, endpoint: PublicEndpoint
    ) throws -> Response {
        let location =
            "\(endpoint.base)/\(SigV4.uriEncode(object.bucket, encodeSlash: true))/\(SigV4.uriEncode(object.key, encodeSlash: false))"
        var headers: HTTPFields = [.eTag: "\"\(object.etag)\"", .location: location]
        if let redirect = fields["success_action_redirect"] ?? fields["redirect"], let url = URL(string: redirect),
            url.scheme == "http" || url.scheme == "https"
        {
            let query =
                "bucket=\(SigV4.uriEncode(object.bucket, encodeSlash: true))&key=\(SigV4.uriEncode(object.key, encodeSlash: true))&etag=\(SigV4.uriEncode("\"\(object.etag)\"", encodeSlash: true))"
            headers[.location] = redirect + (redirect.contains("?") ? "&" : "?") + query
            headers[.contentLength] = "0"
            return Response(status: .seeOther, headers: headers)
        }
        switch fields["success_action_status"] {
        case "200"?:
            headers[.contentLength] = "0"
            return Response(status: .ok, headers: headers)
        case "201"?:
            let xml =
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse><Location>\(S3XML.escape(location))</Location><Bucket>\(S3XML.escape(object.bucket))</Bucket><Key>\(S3XML.escape(object.key))</Key><ETag>\"\(object.etag)\"</ETag></PostResponse>"
            headers[.contentType] = "application/xml"
            return Response(status: .created, headers: headers, body: .init(byteBuffer: ByteBuffer(string: xml)))
        default:
            return Response(status: .noContent, headers: headers)
        }
    }
}

/// An S3 POST policy: an expiration and the conditions every field of the form must meet.
struct PostPolicy {
    enum Condition {
        /// The field must equal the value.
        case equals(field: String, value: String)
        /// The field must start with the prefix (an empty prefix allows any value).
        case startsWith(field: String, prefix: String)
        /// The file's size must lie in the range.
        case contentLengthRange(ClosedRange<Int64>)
    }

    var expiration: Date
    var conditions: [Condition]

    /// Decodes the base64 JSON document; anything malformed is `InvalidPolicyDocument`.
    init(base64: String) throws {
        let invalid = { (why: String) in S3Error(.invalidPolicyDocument, "Invalid Policy: \(why)") }
        guard let data = Data(base64Encoded: base64), let document = try? BoundedJSON.decode(Document.self, from: data)
        else { throw invalid("the policy is not base64-encoded JSON.") }
        guard let text = document.expiration, let expiration = S3Date.parseXML(text) else {
            throw invalid("Policy missing expiration.")
        }
        guard let list = document.conditions else { throw invalid("Policy missing conditions.") }
        self.expiration = expiration
        conditions = try list.map { item -> Condition in
            switch item {
            case .object(let fields):
                guard fields.count == 1, let (name, value) = fields.first, let text = value.text else {
                    throw invalid("a condition object must name one field and a string value.")
                }
                return .equals(field: String(name.lowercased().trimmingPrefix("$")), value: text)
            case .array(let elements):
                guard elements.count == 3, let operation = elements[0].string else {
                    throw invalid("a condition must be an object or a three-element array.")
                }
                switch operation.lowercased() {
                case "eq", "starts-with":
                    guard let field = elements[1].string, field.hasPrefix("$"), let value = elements[2].text else {
                        throw invalid("\(operation) takes a $field and a string.")
                    }
                    let name = String(field.dropFirst()).lowercased()
                    return operation.lowercased() == "eq"
                        ? .equals(field: name, value: value) : .startsWith(field: name, prefix: value)
                case "content-length-range":
                    guard let low = elements[1].size, let high = elements[2].size, low <= high else {
                        throw invalid("content-length-range takes two sizes, the first not above the second.")
                    }
                    return .contentLengthRange(low...high)
                default:
                    throw invalid("unknown condition \(operation.prefix(32)).")
                }
            case .other:
                throw invalid("a condition must be an object or a three-element array.")
            }
        }
    }

    /// The policy document as JSON has it.
    private struct Document: Decodable {
        var expiration: String?
        var conditions: [RawCondition]?
    }

    /// A condition as written: `{"field": "value"}` or `["operation", a, b]`.
    private enum RawCondition: Decodable {
        case object([String: Scalar])
        case array([Scalar])
        case other

        init(from decoder: any Decoder) throws {
            if let fields = try? decoder.singleValueContainer().decode([String: Scalar].self) {
                self = .object(fields)
            } else if let elements = try? decoder.singleValueContainer().decode([Scalar].self) {
                self = .array(elements)
            } else {
                self = .other
            }
        }
    }

    /// A value in a condition: a string, a number, or something a condition cannot use (every property nil).
    private struct Scalar: Decodable {
        /// The value when it is a string.
        var string: String?
        /// A string, or a number written as text.
        var text: String?
        /// A size: a non-negative integer, or one written as a string.
        var size: Int64?

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                (string, self.text, size) = (text, text, Int64(text).flatMap { $0 >= 0 ? $0 : nil })
            } else if let value = try? container.decode(Int64.self) {
                (text, size) = (String(value), value >= 0 ? value : nil)
            } else if let value = try? container.decode(Double.self) {
                text = String(value)
            }
        }
    }

    /// The file sizes the policy allows, when it sets them: every `content-length-range` holds. Throws
    /// `InvalidPolicyDocument` when no size meets them all.
    func contentLengthRange() throws -> ClosedRange<Int64>? {
        var allowed: ClosedRange<Int64>?
        for case .contentLengthRange(let range) in conditions {
            guard let previous = allowed else {
                allowed = range
                continue
            }
            let lower = max(previous.lowerBound, range.lowerBound)
            let upper = min(previous.upperBound, range.upperBound)
            guard lower <= upper else {
                throw S3Error(.invalidPolicyDocument, "The policy's content-length-range conditions allow no size.")
            }
            allowed = lower...upper
        }
        return allowed
    }

    /// Every condition holds for the fields, and every field but `exempt` ones and `x-ignore-*` is named by one.
    func check(fields: [String: String], bucket: String, exempt: Set<String>) throws {
        var named: Set<String> = []
        for condition in conditions {
            switch condition {
            case .equals(let field, let value):
                named.insert(field)
                let actual = field == "bucket" ? bucket : fields[field]
                // Bytes, as keys are compared: a canonically equivalent key is another object.
                guard actual?.isByteEqual(to: value) == true else {
                    throw Self.failed("[\"eq\", \"$\(field)\", \"\(value.prefix(64))\"]")
                }
            case .startsWith(let field, let prefix):
                named.insert(field)
                let actual = field == "bucket" ? bucket : fields[field]
                guard let actual else { throw Self.failed("[\"starts-with\", \"$\(field)\", \"\(prefix.prefix(64))\"]") }
                // content-type may list several types, each of which must start with the prefix.
                let values = field == "content-type" ? actual.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } : [actual]
                guard values.allSatisfy({ $0.hasBytePrefix(prefix) }) else {
                    throw Self.failed("[\"starts-with\", \"$\(field)\", \"\(prefix.prefix(64))\"]")
                }
            case .contentLengthRange:
                continue
            }
        }
        let extra = fields.keys.filter { !exempt.contains($0) && !$0.hasPrefix("x-ignore-") && !named.contains($0) }
        if let first = extra.sorted().first {
            throw S3Error(.accessDenied, "Invalid according to Policy: Extra input fields: \(first.prefix(64))")
        }
    }

    private static func failed(_ condition: String) -> S3Error {
        S3Error(.accessDenied, "Invalid according to Policy: Policy Condition failed: \(condition)")
    }
}
