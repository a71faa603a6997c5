import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOPosix

extension ObjectAPI {
    /// The decoded body of a PUT, with its framing and payload-hash checks.
    func body(of request: S3Request) throws -> (
        RequestBodyStream<RequestBody>, RequestBodyStream<RequestBody>.Trailers
    ) {
        let headers = request.request.headers
        let mode = request.verified.chunkedDecoderMode
        if mode == nil, headers[.transferEncoding]?.lowercased().contains("chunked") == true {
            // S3 needs every body's length up front: an HTTP-chunked body without one is not implemented there either.
            throw S3Error(
                .notImplemented, "A header you provided implies functionality that is not implemented",
                details: ["Header": "Transfer-Encoding"])
        }
        // A body its client framed as aws-chunked (the encoding and its decoded length said) is decoded only as its
        // signature's STREAMING payload says; signed otherwise (UNSIGNED-PAYLOAD, a body hash), its framing would be
        // stored as its bytes. The encoding alone, on a plain body, is dropped as S3 drops it.
        if mode == nil, headers[.amzDecodedContentLength] != nil, let encoding = headers[.contentEncoding],
            encoding.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces).lowercased() == "aws-chunked"
            })
        {
            throw S3Error(
                .invalidRequest,
                "An aws-chunked body is signed with a STREAMING x-amz-content-sha256 (in the signature's headers).")
        }
        let expectedLength: Int64?
        if mode != nil {
            guard let text = headers[.amzDecodedContentLength] else {
                throw S3Error(.missingContentLength, "You must provide the x-amz-decoded-content-length HTTP header.")
            }
            // Digits only: no sign, and a number past 64 bits is too large for any object, not a missing header.
            guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                throw S3Error(.invalidArgument, "x-amz-decoded-content-length must be a whole number of bytes.")
            }
            expectedLength = Int64(text) ?? Int64.max
        } else if let length = headers[.contentLength] {
            guard let value = Int64(length), value >= 0 else {
                throw S3Error(.invalidArgument, "Content-Length is not a valid number.")
            }
            expectedLength = value
        } else {
            throw S3Error(.missingContentLength, "You must provide the Content-Length HTTP header.")
        }
        // Refused before a byte of the body is read: a single PUT or a part is at most 5 GiB, as in S3.
        if let expectedLength, expectedLength > Self.maxBodyLength {
            throw S3Error(
                .entityTooLarge, "Your proposed upload exceeds the maximum allowed size.",
                details: ["ProposedSize": String(expectedLength), "MaxSizeAllowed": String(Self.maxBodyLength)])
        }
        let hash = request.verified.payloadHash
        let trailers = RequestBodyStream<RequestBody>.Trailers()
        let stream = RequestBodyStream(
            base: request.request.body, chunked: mode, expectedSHA256: SigV4.isHex64(hash) ? hash : nil,
            expectedLength: expectedLength, trailers: trailers)
        return (stream, trailers)
    }

    /// Whom a write counts against: the request's long-term key and its quota, with the body size its headers declare
    /// (checked against the byte quota before the body is read).
    static func charge(_ request: S3Request) -> StorageCharge {
        let headers = request.request.headers
        let declared = request.verified.chunkedDecoderMode != nil ? headers[.amzDecodedContentLength] : headers[.contentLength]
        return StorageCharge(principal: request.principal, declaredBytes: declared.flatMap { Int64($0) })
    }

    /// Most bytes one PutObject or UploadPart body may hold (S3's limit).
    static let maxBodyLength: Int64 = 5 * 1024 * 1024 * 1024

    /// Most bytes of user metadata (`x-amz-meta-*` names and values, UTF-8) an object may carry, as S3.
    static let maxUserMetadata = 2048

    /// The attributes and `x-amz-meta-*` metadata a PUT or CreateMultipartUpload carries (a bare `x-amz-meta-` is
    /// dropped); `MetadataTooLarge` past 2 KiB.
    static func attributes(from headers: HTTPFields) throws -> ObjectAttributes {
        var attributes = ObjectAttributes()
        attributes.contentType = headers[.contentType]
        attributes.contentDisposition = headers[.contentDisposition]
        attributes.cacheControl = headers[.cacheControl]
        attributes.contentLanguage = headers[.contentLanguage]
        attributes.expires = headers[.expires]
        if let encoding = headers[.contentEncoding] {
            // Only the aws-chunked framing is removed; the rest is stored exactly as sent.
            let codings = encoding.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if codings.contains(where: { $0.lowercased() == "aws-chunked" }) {
                let remaining = codings.filter { $0.lowercased() != "aws-chunked" && !$0.isEmpty }
                attributes.contentEncoding = remaining.isEmpty ? nil : remaining.joined(separator: ",")
            } else {
                attributes.contentEncoding = encoding
            }
        }
        var metadataSize = 0
        for field in headers where field.name.canonicalName.hasPrefix("x-amz-meta-") {
            let name = String(field.name.canonicalName.dropFirst("x-amz-meta-".count))
            // A field with no name after the prefix names no metadata: dropped, as S3 drops it.
            guard !name.isEmpty else { continue }
            // Values a client encoded for the header (RFC 2047) are stored decoded, as S3 does.
            let value = HeaderWords.decode(field.value)
            metadataSize += name.utf8.count + value.utf8.count
            attributes.userMetadata[name] = attributes.userMetadata[name].map { $0 + "," + value } ?? value
        }
        guard metadataSize <= maxUserMetadata else {
            throw S3Error(
                .metadataTooLarge, "Your metadata headers exceed the maximum allowed metadata size.",
                details: ["Size": String(metadataSize), "MaxSizeAllowed": String(maxUserMetadata)])
        }
        return attributes
    }

    /// The write condition of `If-Match` / `If-None-Match`.
    static func writeCondition(_ headers: HTTPFields) -> ObjectWriteCondition {
        ObjectWriteCondition(
            ifMatch: headers[.ifMatch].map { ObjectWriteCondition.etags($0) },
            ifNoneMatch: headers[.ifNoneMatch].map { ObjectWriteCondition.etags($0, weak: true) })
    }

    /// A `versionId` in the query: only `null`, the one version of an object in a bucket without versioning.
    static func checkVersionId(_ request: S3Request) throws {
        if let version = request.queryValue("versionId"), version != "null" {
            throw S3Error(
                .invalidArgument, "Invalid version id specified",
                details: ["ArgumentName": "versionId", "ArgumentValue": String(version.prefix(64))])
        }
    }

    func putObject(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        try Self.refuseUnimplementedHeaders(headers)
        let expectation = try ChecksumExpectation(headers: headers)
        let attributes = try Self.attributes(from: headers)
        let tags = try headers[.amzTagging].map(ObjectTagging.parse(header:)) ?? []
        let (body, trailers) = try body(of: request)
        let stored = try await writeAllowed(request.bucket, request.key)
        let object = try await store.putObject(
            bucket: request.bucket, key: request.key, attributes: attributes, tags: tags, body: body,
            checksums: expectation.algorithms, condition: Self.writeCondition(headers).forFile(stored),
            verify: { digests in
                try expectation.verify(digests, trailers: trailers.values)
                if let stored, !stored.accepts(etag: Hex.encode(digests.md5)) { throw stored.refusal }
            }, charge: Self.charge(request))
        await objectStored(object)
        var responseHeaders: HTTPFields = [.eTag: "\"\(object.etag)\"", .contentLength: "0"]
        Self.addChecksumHeaders(object.checksums, type: object.checksumType, to: &responseHeaders)
        responseHeaders[.amzExpiration] = await expirationHeader(for: object)
        return Response(status: .ok, headers: responseHeaders)
    }

    static func addChecksumHeaders(_ checksums: [String: String], type: String?, to headers: inout HTTPFields) {
        for (name, value) in checksums {
            if let field = ChecksumAlgorithm(name: name)?.headerField { headers[field] = value }
        }
        if let type, !checksums.isEmpty { headers[.amzChecksumType] = type }
    }

    /// The source of a copy (`x-amz-copy-source: /bucket/key?versionId=…`), authorized for reading and checked against
    /// the `x-amz-copy-source-if-*` conditions.
    func copySource(_ request: S3Request) async throws -> ObjectInfo {
        guard let header = request.header(.amzCopySource) else {
            throw S3Error(.invalidArgument, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey", details: ["ArgumentName": "x-amz-copy-source"])
        }
        var text = Substring(header)
        var version: String?
        if let question = text.firstIndex(of: "?") {
            let query = SigV4.parseQueryString(String(text[text.index(after: question)...]))
            version = query.first { $0.name == "versionId" }?.value
            text = text[..<question]
        }
        let slashed = text.hasPrefix("/")
        if slashed { text = text.dropFirst() }
        // The value must be URL-encoded: a stray `%` or escapes that are not UTF-8 would name some other key.
        guard var decoded = SigV4.percentDecodeStrict(String(text)) else {
            throw S3Error(.invalidArgument, "Invalid copy source encoding.", details: ["ArgumentName": "x-amz-copy-source"])
        }
        // The leading `/` may come encoded too (`%2Fbucket%2Fkey`, as some clients encode the whole value).
        if !slashed, decoded.hasPrefix("/") { decoded.removeFirst() }
        guard let slash = decoded.firstIndex(of: "/"), slash != decoded.startIndex,
            decoded.index(after: slash) != decoded.endIndex
        else {
            throw S3Error(.invalidArgument, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey", details: ["ArgumentName": "x-amz-copy-source"])
        }
        let bucket = String(decoded[..<slash])
        let key = String(decoded[decoded.index(after: slash)...])
        if let version, version != "null" {
            throw S3Error(.invalidArgument, "Invalid version id specified", details: ["ArgumentName": "x-amz-copy-source"])
        }
        // As the path's (``splitPath(_:)``): a NUL would let a catalog read another bucket than the one allowed.
        guard BucketName.isPlausible(bucket) else {
            throw S3Error(.invalidBucketName, "The specified bucket is not valid.")
        }
        try Self.validateKey(key)
        guard request.principal.allows(action: "s3:GetObject", bucket: bucket, key: key) else {
            throw S3Error(.accessDenied, "Access Denied")
        }
        let source: ObjectInfo
        do {
            source = try await store.object(bucket: bucket, key: key)
        } catch let error as FerryDomainError where error.code == .objectNotFound || error.code == .bucketNotFound {
            // S3 names the source that was not found, which the request's path does not.
            var missing = S3Dialect.s3Error(error)
            missing.details[error.code == .objectNotFound ? "Key" : "BucketName"] = error.code == .objectNotFound ? key : bucket
            throw missing
        }
        let headers = request.request.headers
        let ifMatch = headers[.amzCopySourceIfMatch]
        // If-Modified-Since counts only without If-Match; a source that does not qualify is 412, never 304.
        try Self.checkConditions(
            ifMatch: ifMatch, ifUnmodifiedSince: headers[.amzCopySourceIfUnmodifiedSince],
            ifNoneMatch: headers[.amzCopySourceIfNoneMatch],
            ifModifiedSince: ifMatch == nil ? headers[.amzCopySourceIfModifiedSince] : nil, object: source,
            notModified: Self.preconditionFailed)
        return source
    }

    /// CopyObject: a new object from a stored one, sharing its bytes; metadata and tags copied or replaced.
    func copyObject(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        try Self.refuseUnimplementedHeaders(headers)
        try Self.refuseCopyBody(headers)
        let metadataDirective = headers[.amzMetadataDirective]?.uppercased() ?? "COPY"
        let taggingDirective = headers[.amzTaggingDirective]?.uppercased() ?? "COPY"
        guard ["COPY", "REPLACE"].contains(metadataDirective) else {
            throw S3Error(.invalidArgument, "Unknown metadata directive.", details: ["ArgumentName": "x-amz-metadata-directive"])
        }
        guard ["COPY", "REPLACE"].contains(taggingDirective) else {
            throw S3Error(.invalidArgument, "Unknown tagging directive.", details: ["ArgumentName": "x-amz-tagging-directive"])
        }
        if headers[.amzChecksumAlgorithm] != nil {
            throw Self.notImplemented("CopyObject with a new checksum algorithm")
        }
        // A stored video's or image's file is not replaced by a copy either; one being uploaded is made by the first.
        let file = try await writeAllowed(request.bucket, request.key)
        if let file, !file.uploading { throw file.refusal }
        // The source may change between looking it up and sharing its bytes: then it is looked up again.
        return try await Self.retryingChanges {
            let source = try await copySource(request)
            if source.bucket.isByteEqual(to: request.bucket) && source.key.isByteEqual(to: request.key)
                && metadataDirective == "COPY" && taggingDirective == "COPY"
            {
                throw S3Error(
                    .invalidRequest,
                    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
            }
            guard source.size <= Self.maxCopySize else { throw Self.copySourceTooLarge }
            let attributes = metadataDirective == "REPLACE" ? try Self.attributes(from: headers) : source.attributes
            let tags = taggingDirective == "REPLACE" ? try headers[.amzTagging].map(ObjectTagging.parse(header:)) ?? [] : source.tags
            // Tags copied from the source are read there and written here, as GetObjectTagging and PutObjectTagging.
            if taggingDirective == "COPY", !source.tags.isEmpty {
                guard request.principal.allows(action: "s3:GetObjectTagging", bucket: source.bucket, key: source.key),
                    request.principal.allows(action: "s3:PutObjectTagging", bucket: request.bucket, key: request.key)
                else { throw S3Error(.accessDenied, "Access Denied") }
            }
            let object = try await store.copyObject(
                source, bucket: request.bucket, key: request.key, attributes: attributes, tags: tags,
                condition: Self.writeCondition(headers).forFile(file), charge: StorageCharge(principal: request.principal))
            await objectStored(object)
            let result = S3CopyResult(
                eTag: "\"\(object.etag)\"", lastModified: S3Date.xml(object.lastModified),
                checksums: S3ChecksumFields(object.checksums),
                checksumType: object.checksums.isEmpty ? nil : object.checksumType)
            var response = try Self.xmlResponse(result, root: "CopyObjectResult")
            response.headers[.amzCopySourceVersionId] = nil
            response.headers[.amzExpiration] = await expirationHeader(for: object)
            return response
        }
    }

    /// Largest object CopyObject copies (S3: 5 GiB; larger ones are copied part by part with UploadPartCopy).
    static let maxCopySize: Int64 = 5 * 1024 * 1024 * 1024

    /// The refusal of a copy (or a part copied) larger than ``maxCopySize``.
    static let copySourceTooLarge = S3Error(
        .invalidRequest,
        "The specified copy source is larger than the maximum allowable size for a copy source: 5368709120")

    func getObject(_ request: S3Request, head: Bool) async throws -> Response {
        try Self.checkVersionId(request)
        return try await Self.retryingChanges { try await getObjectOnce(request, head: head) }
    }

    /// Runs `operation` again, at most nine more times, while it throws ``ObjectChangedError``: the object it read
    /// was overwritten or deleted between its lookup and the read, so it answers for what is there now. A key
    /// overwritten faster than that is `storeUnavailable` (S3: 503 SlowDown with `Retry-After`), which clients retry.
    static func retryingChanges(_ operation: () async throws -> Response) async throws -> Response {
        for _ in 0..<9 {
            do {
                return try await operation()
            } catch is ObjectChangedError {
                await Task.yield()
            }
        }
        do {
            return try await operation()
        } catch is ObjectChangedError {
            throw FerryDomainError(
                .storeUnavailable, "The object was replaced while it was read, ten times in a row; please retry the request.",
                retryAfterSeconds: 1)
        }
    }

    private func getObjectOnce(_ request: S3Request, head: Bool) async throws -> Response {
        let object = try await store.object(bucket: request.bucket, key: request.key)
        let headers = request.request.headers
        try Self.checkConditions(headers, object: object)

        var response: HTTPFields = [
            .eTag: "\"\(object.etag)\"", .lastModified: S3Date.http(object.lastModified), .acceptRanges: "bytes",
            .contentType: object.attributes.contentType ?? "binary/octet-stream",
        ]
        let a = object.attributes
        if let v = a.contentDisposition { response[.contentDisposition] = v }
        if let v = a.cacheControl { response[.cacheControl] = v }
        if let v = a.contentEncoding { response[.contentEncoding] = v }
        if let v = a.contentLanguage { response[.contentLanguage] = v }
        if let v = a.expires { response[.expires] = v }
        for (name, value) in a.userMetadata.sorted(by: { $0.key < $1.key }) {
            // Non-ASCII values go out RFC 2047-encoded, as S3 sends them, so every HTTP stack reads them alike.
            if let field = HTTPField.Name("x-amz-meta-" + name) { response[field] = HeaderWords.encode(value) }
        }
        if !object.tags.isEmpty { response[.amzTaggingCount] = String(object.tags.count) }
        response[.amzExpiration] = await expirationHeader(for: object)
        // `response-content-type` and its kin override the stored attributes.
        let overridable: [HTTPField.Name] = [
            .contentType, .contentDisposition, .cacheControl, .contentEncoding, .contentLanguage, .expires,
        ]
        for field in overridable {
            if let value = request.queryValue("response-" + field.canonicalName) { response[field] = value }
        }
        let checksumMode = headers[.amzChecksumMode]?.uppercased() == "ENABLED"

        // A part of an object, or a Range, is partial content (206 with Content-Range), as S3 answers it: part 1 of a
        // single-PUT object too, as the range of all its bytes (an empty object has none, and is answered whole).
        let range: ClosedRange<Int64>?
        if request.hasQuery("partNumber") {
            if headers[.range] != nil {
                throw S3Error(.invalidRequest, "Cannot specify both Range header and partNumber query parameter")
            }
            let number = try Self.partNumber(request)
            let part = try Self.part(number, of: object)
            if let count = object.partCount { response[.amzMPPartsCount] = String(count) }
            range = part.range
            if checksumMode, let checksums = part.checksums, !checksums.isEmpty {
                Self.addChecksumHeaders(checksums, type: object.checksumType, to: &response)
            } else if checksumMode, object.partCount == nil {
                Self.addChecksumHeaders(object.checksums, type: object.checksumType, to: &response)
            }
        } else {
            range = try Self.requestedRange(headers, of: object)
            if range == nil, checksumMode {
                Self.addChecksumHeaders(object.checksums, type: object.checksumType, to: &response)
            }
        }
        return try await Self.objectAnswer(object, range: range, headers: response, head: head, store: store)
    }

    /// The bytes a `Range` asks for, nil for all of them: also when an `If-Range` no longer names the object (RFC
    /// 9110, 13.1.5), so that a download resumed after the object changed gets the new one whole, not two versions
    /// joined.
    static func requestedRange(_ headers: HTTPFields, of object: ObjectInfo) throws -> ClosedRange<Int64>? {
        guard let value = headers[.range] else { return nil }
        if let condition = headers[.ifRange], !holds(ifRange: condition, object) { return nil }
        return try parseRange(value, size: object.size)
    }

    /// Whether an `If-Range` names the object as it is: its strong ETag, or exactly its Last-Modified date.
    static func holds(ifRange value: String, _ object: ObjectInfo) -> Bool {
        let value = value.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("\"") { return value == "\"\(object.etag)\"" }
        guard let date = S3Date.parseHTTP(value) else { return false }
        return date.timeIntervalSince1970 == object.lastModified.timeIntervalSince1970.rounded(.down)
    }

    /// The answer that sends an object's bytes with `headers`: all of them (200), or `range` of them (206 with
    /// Content-Range), with their Content-Length; no body for a HEAD.
    static func objectAnswer(
        _ object: ObjectInfo, range: ClosedRange<Int64>?, headers: HTTPFields, head: Bool, store: any ObjectStore
    ) async throws -> Response {
        var headers = headers
        let status: HTTPResponse.Status = range == nil ? .ok : .partialContent
        let length = range.map { $0.upperBound - $0.lowerBound + 1 } ?? object.size
        if let range { headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(object.size)" }
        headers[.contentLength] = String(length)
        if head { return Response(status: status, headers: headers) }
        let bytes = try await store.readObject(object, range: range)
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(length)) { writer in
                for try await buffer in bytes { try await writer.write(buffer) }
                try await writer.finish(nil)
            })
    }

    /// The byte range and checksums of part `number` of an object; a single-PUT object is its own part 1.
    static func part(_ number: Int, of object: ObjectInfo) throws -> (range: ClosedRange<Int64>?, checksums: [String: String]?) {
        let invalid = S3Error(.invalidPart, "The requested partnumber is not satisfiable", details: ["PartNumber": String(number)])
        guard let count = object.partCount else {
            guard number == 1 else { throw invalid }
            return (object.size > 0 ? 0...(object.size - 1) : nil, nil)
        }
        let parts =
            object.parts
            ?? (object.manifest.count == count
                ? object.manifest.enumerated().map { ObjectPart(number: $0.offset + 1, size: $0.element.size) } : [])
        var start: Int64 = 0
        for part in parts {
            if part.number == number {
                return (part.size > 0 ? start...(start + part.size - 1) : nil, part.checksums)
            }
            start += part.size
        }
        throw invalid
    }

    /// `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`, evaluated as RFC 9110 orders them:
    /// If-Match (else If-Unmodified-Since) first, then If-None-Match (else If-Modified-Since). A 304 carries the
    /// object's ETag and Last-Modified.
    static func checkConditions(_ headers: HTTPFields, object: ObjectInfo, cacheControl: String? = nil) throws {
        var notModified = S3Error(.notModified, "Not Modified")
        notModified.headers = [
            "ETag": "\"\(object.etag)\"", "Last-Modified": S3Date.http(object.lastModified),
        ]
        if let value = cacheControl ?? object.attributes.cacheControl { notModified.headers["Cache-Control"] = value }
        if let value = object.attributes.expires { notModified.headers["Expires"] = value }
        try checkConditions(
            ifMatch: headers[.ifMatch], ifUnmodifiedSince: headers[.ifUnmodifiedSince],
            ifNoneMatch: headers[.ifNoneMatch], ifModifiedSince: headers[.ifModifiedSince], object: object,
            notModified: notModified)
    }

    /// The conditions' core, for an object's own headers and a copy's `x-amz-copy-source-if-*`: If-Match (else
    /// If-Unmodified-Since) throws ``preconditionFailed`` when it fails, then If-None-Match (else If-Modified-Since)
    /// throws `notModified`.
    static func checkConditions(
        ifMatch: String?, ifUnmodifiedSince: String?, ifNoneMatch: String?, ifModifiedSince: String?,
        object: ObjectInfo, notModified: S3Error
    ) throws {
        func matches(_ list: String, weak: Bool = false) -> Bool {
            let tags = ObjectWriteCondition.etags(list, weak: weak)
            return tags.contains("*") || tags.contains(object.etag)
        }
        let modified = object.lastModified.timeIntervalSince1970.rounded(.down)
        if let ifMatch {
            guard matches(ifMatch) else { throw preconditionFailed }
        } else if let since = ifUnmodifiedSince.flatMap(S3Date.parseHTTP), modified > since.timeIntervalSince1970 {
            throw preconditionFailed
        }
        if let ifNoneMatch {
            if matches(ifNoneMatch, weak: true) { throw notModified }
        } else if let since = ifModifiedSince.flatMap(S3Date.parseHTTP), modified <= since.timeIntervalSince1970 {
            throw notModified
        }
    }

    /// A condition that did not hold.
    static let preconditionFailed = S3Error(
        .preconditionFailed, "At least one of the pre-conditions you specified did not hold")

    /// A 416 for `range` of an object of `size` bytes, with the `Content-Range: bytes */size` RFC 9110 asks for.
    static func unsatisfiable(_ range: String, size: Int64) -> S3Error {
        var error = S3Error(
            .invalidRange, "The requested range is not satisfiable",
            details: ["RangeRequested": range, "ActualObjectSize": String(size)])
        error.headers["Content-Range"] = "bytes */\(size)"
        return error
    }

    /// Parses a single `bytes=` range; nil means "serve the whole object" (as S3 does for syntax it ignores).
    static func parseRange(_ header: String, size: Int64) throws -> ClosedRange<Int64>? {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return nil }
        let spec = value.dropFirst("bytes=".count)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        let digits = { (text: String) in !text.isEmpty && text.allSatisfy { $0.isASCII && $0.isNumber } }
        // A position past Int64 is past every object: it saturates (an end is then the object's last byte, a start
        // past it is unsatisfiable), as RFC 9110 reads positions past the representation.
        let position = { (text: String) -> Int64? in digits(text) ? Int64(text) ?? .max : nil }
        let unsatisfiable = Self.unsatisfiable(String(value.prefix(64)), size: size)
        if first.isEmpty {
            // `bytes=-N`; anything else after the dash (`bytes=--1`) is not a range at all.
            guard let suffix = position(last) else { return nil }
            guard suffix > 0, size > 0 else { throw unsatisfiable }
            return max(0, size - suffix)...(size - 1)
        }
        guard let start = position(first) else { return nil }
        let end: Int64
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = position(last), value >= start else { return nil }
            end = min(value, size - 1)
        }
        guard start < size else { throw unsatisfiable }
        return start...end
    }

    func deleteObject(_ request: S3Request) async throws -> Response {
        try Self.checkVersionId(request)
        let headers = request.request.headers
        var condition = ObjectWriteCondition(ifMatch: headers[.ifMatch].map { ObjectWriteCondition.etags($0) })
        if let text = headers[.amzIfMatchLastModifiedTime] {
            guard let date = S3Date.parseHTTP(text) ?? S3Date.parseXML(text) else {
                throw S3Error(.invalidArgument, "x-amz-if-match-last-modified-time is not a date.", details: ["ArgumentName": "x-amz-if-match-last-modified-time"])
            }
            condition.ifMatchLastModified = date
        }
        if let text = headers[.amzIfMatchSize] {
            guard let size = Int64(text), size >= 0 else {
                throw S3Error(.invalidArgument, "x-amz-if-match-size is not a size.", details: ["ArgumentName": "x-amz-if-match-size"])
            }
            condition.ifMatchSize = size
        }
        try await store.deleteObject(bucket: request.bucket, key: request.key, condition: condition)
        return Response(status: .noContent)
    }

    /// Largest number of keys one DeleteObjects request may name.
    static let maxDeleteKeys = 1000

    /// DeleteObjects: up to 1000 keys in one request, each authorized and deleted on its own; quiet mode reports only
    /// the failures. The body must carry Content-MD5 or an `x-amz-checksum-*` header, as S3 requires.
    func deleteObjects(_ request: S3Request) async throws -> Response {
        let expectation = try ChecksumExpectation(headers: request.request.headers)
        guard expectation.contentMD5 != nil || !expectation.expected.isEmpty else {
            throw S3Error(
                .invalidRequest,
                "Missing required header for this request: Content-MD5 or one of the x-amz-checksum-* headers")
        }
        let delete = try await Self.xmlBody(
            S3DeleteRequest.self, request, limit: 2 * 1024 * 1024, trimming: false, root: "Delete")
        guard !delete.objects.isEmpty, delete.objects.count <= Self.maxDeleteKeys else { throw Self.malformedXML }
        _ = try await store.bucket(request.bucket)
        var deleted: [S3DeleteResult.Deleted] = []
        var errors: [S3DeleteResult.Failure] = []
        for entry in delete.objects {
            do {
                guard !entry.key.isEmpty else { throw S3Error(.userKeyMustBeSpecified, "Each object to delete must name its key.") }
                try Self.validateKey(entry.key)
                if let version = entry.versionId, version != "null" {
                    throw S3Error(.noSuchVersion, "The specified version does not exist.")
                }
                guard request.principal.allows(action: "s3:DeleteObject", bucket: request.bucket, key: entry.key) else {
                    throw S3Error(.accessDenied, "Access Denied")
                }
                var condition = ObjectWriteCondition(ifMatch: entry.eTag.map { ObjectWriteCondition.etags($0) })
                condition.ifMatchSize = entry.size
                if let text = entry.lastModifiedTime {
                    guard let date = S3Date.parseXML(text) ?? S3Date.parseHTTP(text) else {
                        throw S3Error(.invalidArgument, "LastModifiedTime is not a date.")
                    }
                    condition.ifMatchLastModified = date
                }
                try await store.deleteObject(bucket: request.bucket, key: entry.key, condition: condition)
                if !delete.quiet { deleted.append(.init(key: entry.key, versionId: entry.versionId)) }
            } catch {
                guard let refusal = S3Dialect.s3Error(for: error) else { throw error }
                errors.append(
                    .init(key: entry.key, versionId: entry.versionId, code: refusal.code.rawValue, message: refusal.message))
            }
        }
        return try Self.xmlResponse(S3DeleteResult(deleted: deleted, errors: errors), root: "DeleteResult")
    }

    /// The refusal of an XML body that does not decode.
    static let malformedXML = S3Error(
        .malformedXML, "The XML you provided was not well-formed or did not validate against our published schema.")

    /// Reads a small XML request body as ``collectXMLBody(_:limit:checksumHeadersDescribeBody:)`` does and decodes it
    /// as `type` (with the root element `root`, and fitting `schema`), else ``malformedXML``.
    static func xmlBody<T: Decodable & Sendable>(
        _ type: T.Type, _ request: S3Request, limit: Int, trimming: Bool = true, root: String? = nil,
        schema: S3XMLSchema? = nil, checksumHeadersDescribeBody: Bool = true
    ) async throws -> T {
        let data = try await collectXMLBody(
            request, limit: limit, checksumHeadersDescribeBody: checksumHeadersDescribeBody)
        let decode: @Sendable () throws -> T = {
            let value = try? S3XML.decode(type, from: data, trimming: trimming, root: root)
            guard let value, schema?.mismatch(in: data) == nil else { throw malformedXML }
            return value
        }
        guard data.count > inlineDocumentSize else { return try decode() }
        let credential = request.principal.accessKeyId
        try waitingDocuments.admit(credential)
        defer { waitingDocuments.leave(credential) }
        // A request gone before its turn (its client disconnected) costs the thread nothing.
        let gone = NIOLockedValueBox(false)
        return try await withTaskCancellationHandler {
            try await documentThread.runIfActive {
                guard !gone.withLockedValue({ $0 }) else { throw CancellationError() }
                return try decode()
            }
        } onCancel: {
            gone.withLockedValue { $0 = true }
        }
    }

    /// The largest XML body decoded where its request runs; larger ones (a CompleteMultipartUpload of thousands of
    /// parts, a DeleteObjects of a thousand keys: up to a second of a core each) wait for ``documentThread``.
    static let inlineDocumentSize = 64 * 1024

    /// The one thread that decodes large XML bodies, one at a time: however many arrive at once, they take a core at
    /// the most, and never the threads every other request runs on.
    static let documentThread: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()

    /// The large XML bodies waiting for ``documentThread`` or on it: 32 at the most, 8 of one credential (a device's
    /// upload credential, an access key); one more is refused 503 `SlowDown` with `Retry-After`, to be sent again.
    static let waitingDocuments = AdmissionCount(limit: 32, perCredential: 8)

    /// Reads a small XML request body, checking its signed SHA-256, its `Content-MD5` and (unless they describe
    /// something else, as CompleteMultipartUpload's do) its `x-amz-checksum-*` header.
    static func collectXMLBody(_ request: S3Request, limit: Int, checksumHeadersDescribeBody: Bool = true) async throws
        -> Data
    {
        var httpRequest = request.request
        let buffer: ByteBuffer
        do {
            buffer = try await httpRequest.collectBody(upTo: limit)
        } catch {
            throw S3Error(.malformedXML, "The XML you provided was too large or could not be read.")
        }
        let data = Data(buffer: buffer)
        if SigV4.isHex64(request.verified.payloadHash),
            SigV4.hexSHA256(data) != request.verified.payloadHash.lowercased()
        {
            throw S3Error(.xAmzContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
        }
        // Content-MD5 and an x-amz-checksum-* header are checked as on an object's body (BadDigest).
        var headers = request.request.headers
        if !checksumHeadersDescribeBody { headers = HTTPFields(headers.filter { $0.name == .contentMD5 }) }
        let expectation = try ChecksumExpectation(headers: headers)
        // Most bodies declare no digest: nothing to hash.
        guard expectation.contentMD5 != nil || !expectation.algorithms.isEmpty else { return data }
        var digests = MultiChecksummer([.md5] + expectation.algorithms)
        digests.update(data)
        try expectation.verify(
            BodyDigests(
                size: Int64(data.count), md5: digests.finalize(.md5) ?? [],
                checksums: Dictionary(uniqueKeysWithValues: expectation.algorithms.map { ($0.s3Name, digests.finalize($0) ?? []) })),
            trailers: [])
        return data
    }

    // MARK: Tagging

    func getObjectTagging(_ request: S3Request) async throws -> Response {
        try Self.checkVersionId(request)
        let object = try await store.object(bucket: request.bucket, key: request.key)
        return try Self.xmlResponse(
            S3Tagging(tags: object.tags.map { .init(key: $0.key, value: $0.value) }), root: "Tagging")
    }

    func putObjectTagging(_ request: S3Request) async throws -> Response {
        try Self.checkVersionId(request)
        let tagging = try await Self.xmlBody(S3Tagging.self, request, limit: 64 * 1024, root: "Tagging")
        let tags = try ObjectTagging.validate(tagging.tagSet.tags.map { ObjectTag(key: $0.key, value: $0.value) })
        try await setTags(tags, request)
        return Response(status: .ok, headers: [.contentLength: "0"])
    }

    func deleteObjectTagging(_ request: S3Request) async throws -> Response {
        try Self.checkVersionId(request)
        try await setTags([], request)
        return Response(status: .noContent)
    }

    /// Sets the tags of the object the key holds now: looked up again, as a read is, when the key was overwritten
    /// between the look-up and the change (the change names the version it saw).
    private func setTags(_ tags: [ObjectTag], _ request: S3Request) async throws {
        _ = try await Self.retryingChanges {
            let object = try await store.object(bucket: request.bucket, key: request.key)
            do {
                try await store.setObjectTags(tags, bucket: request.bucket, key: request.key, etag: object.etag)
            } catch let error as FerryDomainError where error.code == .objectNotFound {
                // Not that version any more: the next look-up finds the one there is, or answers NoSuchKey.
                throw ObjectChangedError()
            }
            return Response(status: .ok)
        }
    }

    // MARK: Attributes

    /// GetObjectAttributes: the attributes named in `x-amz-object-attributes` (ETag, Checksum, ObjectParts,
    /// StorageClass, ObjectSize) without the object's bytes.
    func getObjectAttributes(_ request: S3Request) async throws -> Response {
        try Self.checkVersionId(request)
        let headers = request.request.headers
        let names = Set(
            headers[values: .amzObjectAttributes].flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) })
        let known: Set<String> = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
        guard !names.isEmpty, names.isSubset(of: known) else {
            throw S3Error(
                .invalidArgument, "Invalid attribute name specified.",
                details: ["ArgumentName": "x-amz-object-attributes"])
        }
        let maxParts = try headers[.amzMaxParts].map { text -> Int in
            guard let value = Int(text), value >= 0 else {
                throw S3Error(.invalidArgument, "max-parts must be an integer of at least 0.", details: ["ArgumentName": "x-amz-max-parts"])
            }
            return min(value, 1000)
        } ?? 1000
        let marker = try headers[.amzPartNumberMarker].map { text -> Int in
            guard let value = Int(text), (0...10_000).contains(value) else {
                throw S3Error(.invalidArgument, "part-number-marker must be an integer from 0 to 10000.", details: ["ArgumentName": "x-amz-part-number-marker"])
            }
            return value
        } ?? 0
        let object = try await store.object(bucket: request.bucket, key: request.key)
        try Self.checkConditions(headers, object: object)
        var result = S3ObjectAttributesResult()
        if names.contains("ETag") { result.eTag = object.etag }
        if names.contains("StorageClass") { result.storageClass = "STANDARD" }
        if names.contains("ObjectSize") { result.objectSize = object.size }
        if names.contains("Checksum"), !object.checksums.isEmpty {
            result.checksum = .init(values: S3ChecksumFields(object.checksums), checksumType: object.checksumType)
        }
        if names.contains("ObjectParts"), let count = object.partCount {
            let parts = (object.parts ?? []).filter { $0.number > marker }
            let page = parts.prefix(maxParts)
            result.objectParts = .init(
                totalPartsCount: count, partNumberMarker: marker, nextPartNumberMarker: page.last?.number ?? marker,
                maxParts: maxParts, isTruncated: maxParts > 0 && parts.count > page.count,
                parts: page.map { .init(partNumber: $0.number, size: $0.size, checksums: S3ChecksumFields($0.checksums)) })
        }
        var response = try Self.xmlResponse(result, root: "GetObjectAttributesResponse")
        response.headers[.lastModified] = S3Date.http(object.lastModified)
        return response
    }
}

/// S3 object tags as requests carry them: the `x-amz-tagging` header (URL query syntax) or a `Tagging` document.
enum ObjectTagging {
    /// Most tags an object may carry.
    static let maxTags = 10

    /// Parses `key1=value1&key2=value2`.
    static func parse(header: String) throws -> [ObjectTag] {
        guard !header.isEmpty else { return [] }
        let decode = { (text: Substring) in SigV4.percentDecode(text.replacingOccurrences(of: "+", with: " ")) }
        return try validate(
            header.split(separator: "&", omittingEmptySubsequences: false).map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return ObjectTag(key: decode(parts[0]), value: parts.count > 1 ? decode(parts[1]) : "")
            })
    }

    /// Checks S3's limits: at most 10 tags, unique keys of 1–128 characters not beginning `aws:`, values of at most
    /// 256, and only letters, digits, spaces and `+ - = . _ : / @`. Returns the tags ordered by key.
    static func validate(_ tags: [ObjectTag]) throws -> [ObjectTag] {
        guard tags.count <= maxTags else {
            throw S3Error(.invalidTag, "Object tags cannot be greater than \(maxTags)")
        }
        var seen: Set<String> = []
        for tag in tags {
            guard (1...128).contains(tag.key.count) else {
                throw S3Error(.invalidTag, "The TagKey you have provided is invalid")
            }
            guard tag.value.count <= 256 else {
                throw S3Error(.invalidTag, "The TagValue you have provided is invalid")
            }
            guard allowed(tag.key), allowed(tag.value) else {
                throw S3Error(.invalidTag, "The TagKey or TagValue you have provided contains characters that are not allowed")
            }
            // S3 keeps the `aws:` prefix for its own system tags.
            guard !tag.key.lowercased().hasPrefix("aws:") else {
                throw S3Error(.invalidTag, "Your TagKey cannot be prefixed with aws:")
            }
            guard seen.insert(tag.key).inserted else {
                throw S3Error(.invalidTag, "Cannot provide multiple Tags with the same key")
            }
        }
        return tags.sorted { $0.key < $1.key }
    }

    private static func allowed(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy {
            $0.properties.isAlphabetic || $0.properties.numericType != nil || $0 == " " || "+-=._:/@".unicodeScalars.contains($0)
        }
    }
}

/// Counts work admitted to a shared resource, in all and per credential, refusing what passes either limit.
final class AdmissionCount: Sendable {
    private let limit: Int
    private let perCredential: Int
    private let counts = NIOLockedValueBox((total: 0, byCredential: [String: Int]()))

    init(limit: Int, perCredential: Int) {
        self.limit = limit
        self.perCredential = perCredential
    }

    /// Counts one more for `credential`; throws `requestRateExceeded` (503 `SlowDown`, `Retry-After: 1`) and counts
    /// nothing when the total or the credential's own count is at its limit.
    func admit(_ credential: String) throws {
        let admitted = counts.withLockedValue { counts in
            let own = counts.byCredential[credential, default: 0]
            guard counts.total < limit, own < perCredential else { return false }
            counts.total += 1
            counts.byCredential[credential] = own + 1
            return true
        }
        guard admitted else {
            throw FerryDomainError(
                .requestRateExceeded, "The server is reading as many large XML bodies as it can; send this one again.",
                retryAfterSeconds: 1)
        }
    }

    /// Counts one less for `credential` (admitted before).
    func leave(_ credential: String) {
        counts.withLockedValue { counts in
            counts.total -= 1
            let own = counts.byCredential[credential, default: 1] - 1
            counts.byCredential[credential] = own > 0 ? own : nil
        }
    }
}
