import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    /// The decoded body of a PUT, with its framing and payload-hash checks.
    func body(of request: S3Request) throws -> (
        RequestBodyStream<RequestBody>, RequestBodyStream<RequestBody>.Trailers
    ) {
        let headers = request.request.headers
        let mode = request.verified.chunkedDecoderMode
        let expectedLength: Int64?
        if mode != nil {
            guard let decoded = headers[.amzDecodedContentLength].flatMap({ Int64($0) }) else {
                throw S3Error(.missingContentLength, "You must provide the x-amz-decoded-content-length HTTP header.")
            }
            expectedLength = decoded
        } else if let length = headers[.contentLength] {
            guard let value = Int64(length), value >= 0 else {
                throw S3Error(.invalidArgument, "Content-Length is not a valid number.")
            }
            expectedLength = value
        } else {
            throw S3Error(.missingContentLength, "You must provide the Content-Length HTTP header.")
        }
        let hash = request.verified.payloadHash
        let trailers = RequestBodyStream<RequestBody>.Trailers()
        let stream = RequestBodyStream(
            base: request.request.body, chunked: mode, expectedSHA256: SigV4.isHex64(hash) ? hash : nil,
            expectedLength: expectedLength, trailers: trailers)
        return (stream, trailers)
    }

    /// The attributes and `x-amz-meta-*` metadata a PUT or CreateMultipartUpload carries.
    static func attributes(from headers: HTTPFields) -> ObjectAttributes {
        var attributes = ObjectAttributes()
        attributes.contentType = headers[.contentType]
        attributes.contentDisposition = headers[.contentDisposition]
        attributes.cacheControl = headers[.cacheControl]
        attributes.contentLanguage = headers[.contentLanguage]
        attributes.expires = headers[.expires]
        if let encoding = headers[.contentEncoding] {
            let remaining = encoding.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { $0.lowercased() != "aws-chunked" && !$0.isEmpty }
            attributes.contentEncoding = remaining.isEmpty ? nil : remaining.joined(separator: ",")
        }
        for field in headers where field.name.canonicalName.hasPrefix("x-amz-meta-") {
            let name = String(field.name.canonicalName.dropFirst("x-amz-meta-".count))
            attributes.userMetadata[name] = attributes.userMetadata[name].map { $0 + "," + field.value } ?? field.value
        }
        return attributes
    }

    func putObject(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        if headers[HTTPField.Name("x-amz-copy-source")!] != nil {
            throw S3Error(.notImplemented, "CopyObject is not implemented.")
        }
        let expectation = try ChecksumExpectation(headers: headers)
        let ifNoneMatch = headers[.ifNoneMatch]
        if let ifNoneMatch, ifNoneMatch != "*" {
            throw S3Error(.notImplemented, "If-None-Match on PUT supports only '*'.")
        }
        let (body, trailers) = try body(of: request)
        let object = try await store.putObject(
            bucket: request.bucket, key: request.key, attributes: Self.attributes(from: headers), body: body,
            checksums: expectation.algorithms, ifNoneMatch: ifNoneMatch == "*",
            verify: { digests in try expectation.verify(digests, trailers: trailers.values) })
        await objectStored(object)
        var responseHeaders: HTTPFields = [.eTag: "\"\(object.etag)\"", .contentLength: "0"]
        for (name, value) in object.checksums {
            if let algorithm = ChecksumAlgorithm(name: name) {
                responseHeaders[HTTPField.Name(algorithm.headerName)!] = value
            }
        }
        if object.checksumType != nil { responseHeaders[.amzChecksumType] = object.checksumType }
        return Response(status: .ok, headers: responseHeaders)
    }

    func getObject(_ request: S3Request, head: Bool) async throws -> Response {
        if request.hasQuery("partNumber") {
            throw S3Error(.notImplemented, "GetObject by partNumber is not implemented.")
        }
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
            if let field = HTTPField.Name("x-amz-meta-" + name) { response[field] = value }
        }
        let overrides: [(String, HTTPField.Name)] = [
            ("response-content-type", .contentType), ("response-content-disposition", .contentDisposition),
            ("response-cache-control", .cacheControl), ("response-content-encoding", .contentEncoding),
            ("response-content-language", .contentLanguage), ("response-expires", .expires),
        ]
        for (parameter, field) in overrides {
            if let value = request.queryValue(parameter) { response[field] = value }
        }
        if let parts = object.partCount { response[.amzMPPartsCount] = String(parts) }

        let range = try headers[.range].flatMap { try Self.parseRange($0, size: object.size) }
        if range == nil, headers[.amzChecksumMode]?.uppercased() == "ENABLED", !object.checksums.isEmpty {
            for (name, value) in object.checksums {
                if let algorithm = ChecksumAlgorithm(name: name) {
                    response[HTTPField.Name(algorithm.headerName)!] = value
                }
            }
            if let type = object.checksumType { response[.amzChecksumType] = type }
        }
        let status: HTTPResponse.Status
        let length: Int64
        if let range {
            status = .partialContent
            length = range.upperBound - range.lowerBound + 1
            response[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(object.size)"
        } else {
            status = .ok
            length = object.size
        }
        response[.contentLength] = String(length)
        if head {
            return Response(status: status, headers: response)
        }
        let bytes = store.readObject(object, range: range)
        return Response(
            status: status, headers: response, body: ResponseBody(contentLength: Int(length)) { writer in
                for try await buffer in bytes { try await writer.write(buffer) }
                try await writer.finish(nil)
            })
    }

    /// `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`, evaluated in S3's order.
    static func checkConditions(_ headers: HTTPFields, object: ObjectInfo) throws {
        func matches(_ list: String) -> Bool {
            list.split(separator: ",").contains { candidate in
                let tag = candidate.trimmingCharacters(in: .whitespaces)
                return tag == "*" || tag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) == object.etag
            }
        }
        let modified = object.lastModified.timeIntervalSince1970.rounded(.down)
        let failed = S3Error(.preconditionFailed, "At least one of the pre-conditions you specified did not hold")
        let notModified = S3Error(.notModified, "Not Modified")
        if let ifMatch = headers[.ifMatch] {
            guard matches(ifMatch) else { throw failed }
        } else if let since = headers[.ifUnmodifiedSince].flatMap(S3Date.parseHTTP),
            modified > since.timeIntervalSince1970
        {
            throw failed
        }
        if let ifNoneMatch = headers[.ifNoneMatch] {
            if matches(ifNoneMatch) { throw notModified }
        } else if let since = headers[.ifModifiedSince].flatMap(S3Date.parseHTTP),
            modified <= since.timeIntervalSince1970
        {
            throw notModified
        }
    }

    /// Parses a single `bytes=` range; nil means "serve the whole object" (as S3 does for syntax it ignores).
    static func parseRange(_ header: String, size: Int64) throws -> ClosedRange<Int64>? {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return nil }
        let spec = value.dropFirst("bytes=".count)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        let unsatisfiable = S3Error(
            .invalidRange, "The requested range is not satisfiable",
            details: ["RangeRequested": value, "ActualObjectSize": String(size)])
        if first.isEmpty {
            guard let suffix = Int64(last) else { return nil }
            guard suffix > 0, size > 0 else { throw unsatisfiable }
            return max(0, size - suffix)...(size - 1)
        }
        guard let start = Int64(first) else { return nil }
        let end: Int64
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = Int64(last), value >= start else { return nil }
            end = min(value, size - 1)
        }
        guard start < size else { throw unsatisfiable }
        return start...end
    }

    func deleteObject(_ request: S3Request) async throws -> Response {
        try await store.deleteObject(bucket: request.bucket, key: request.key)
        return Response(status: .noContent)
    }
}
