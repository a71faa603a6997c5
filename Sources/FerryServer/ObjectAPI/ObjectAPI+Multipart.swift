import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    func createMultipartUpload(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        try Self.refuseUnimplementedHeaders(headers)
        let attributes = try Self.attributes(from: headers)
        let tags = try headers[.amzTagging].map(ObjectTagging.parse(header:)) ?? []
        var algorithm: ChecksumAlgorithm?
        if let name = headers[.amzChecksumAlgorithm] {
            guard let parsed = ChecksumAlgorithm(name: name), ChecksumAlgorithm.s3Algorithms.contains(parsed) else {
                throw S3Error(.invalidRequest, "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]")
            }
            algorithm = parsed
        }
        var type = headers[.amzChecksumType]?.uppercased()
        if let type, type != "COMPOSITE" && type != "FULL_OBJECT" {
            throw S3Error(.invalidRequest, "Value for x-amz-checksum-type header is invalid.")
        }
        if type != nil && algorithm == nil {
            throw S3Error(.invalidRequest, "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
        }
        if let algorithm {
            if type == nil { type = algorithm == .crc64nvme ? "FULL_OBJECT" : "COMPOSITE" }
            if type == "FULL_OBJECT" && !algorithm.supportsCombine {
                throw S3Error(.invalidRequest, "The FULL_OBJECT checksum type cannot be used with the \(algorithm.s3Name) checksum algorithm.")
            }
            if type == "COMPOSITE" && algorithm == .crc64nvme {
                throw S3Error(.invalidRequest, "The COMPOSITE checksum type cannot be used with the CRC64NVME checksum algorithm.")
            }
        }
        // A stored video's or image's file is checked at completion: only the same parts may complete there (an
        // upload sent again after a client lost its checkpoint).
        _ = try await writeAllowed(request.bucket, request.key)
        let upload = try await store.createMultipartUpload(
            bucket: request.bucket, key: request.key, attributes: attributes, tags: tags,
            checksumAlgorithm: algorithm, checksumType: type, charge: StorageCharge(principal: request.principal))
        var response = try Self.xmlResponse(
            InitiateMultipartUploadResult(bucket: request.bucket, key: request.key, uploadId: upload.uploadId),
            root: "InitiateMultipartUploadResult")
        if let algorithm {
            response.headers[.amzChecksumAlgorithm] = algorithm.s3Name
            if let type { response.headers[.amzChecksumType] = type }
        }
        return response
    }

    static func partNumber(_ request: S3Request) throws -> Int {
        guard let raw = request.queryValue("partNumber"), let number = Int(raw), (1...10_000).contains(number) else {
            throw S3Error(
                .invalidArgument, "Part number must be an integer between 1 and 10000, inclusive",
                details: ["ArgumentName": "partNumber", "ArgumentValue": String((request.queryValue("partNumber") ?? "").prefix(32))])
        }
        return number
    }

    /// What a part of `upload` counts against: the upload's owner and its quota as it is now, whoever sends the part (a
    /// key writing into another key's upload fills that key's quota).
    func partCharge(_ charge: StorageCharge, upload: MultipartUploadInfo) async throws -> StorageCharge {
        guard let owner = upload.owner, owner != charge.owner else { return charge }
        return StorageCharge(
            owner: owner, quota: try await credentials.ownerQuota(owner), declaredBytes: charge.declaredBytes)
    }

    /// The multipart upload a request names. One that holds a resumable upload's bytes is appended to and completed
    /// at its upload URL only (so its offset always describes the object it becomes): here it may be listed and
    /// aborted (`resumable`), nothing else.
    func upload(for request: S3Request, resumable: Bool = false) async throws -> MultipartUploadInfo {
        guard let uploadId = request.queryValue("uploadId"), !uploadId.isEmpty else {
            throw CatalogObjectStore.noSuchUpload
        }
        let upload = try await store.multipartUpload(uploadId, bucket: request.bucket, key: request.key)
        guard resumable || !uploadId.hasPrefix(ResumableUpload.multipartIdPrefix) else { throw Self.resumableRefusal }
        return upload
    }

    /// The refusal of an append to, or completion of, a resumable upload's multipart upload through the S3 API.
    static let resumableRefusal = S3Error(
        .invalidRequest,
        "This multipart upload holds the bytes of a resumable upload: append to it and complete it at its upload URL.")

    func uploadPart(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        try Self.refuseUnimplementedHeaders(headers)
        let number = try Self.partNumber(request)
        let upload = try await upload(for: request)
        let expectation = try ChecksumExpectation(headers: headers)
        // A part's checksum is of the upload's algorithm, when it has one (a part may also come without one).
        if let expected = upload.checksumAlgorithm, let sent = expectation.algorithms.first, sent.s3Name != expected {
            throw S3Error(
                .invalidRequest,
                "Checksum Type mismatch occurred, expected checksum Type: \(expected.lowercased()), actual checksum Type: \(sent.s3Name.lowercased())")
        }
        let (body, trailers) = try body(of: request)
        let part = try await store.uploadPart(
            upload, partNumber: number, body: body, checksums: expectation.algorithms,
            verify: { digests in try expectation.verify(digests, trailers: trailers.values) },
            charge: try await partCharge(Self.charge(request), upload: upload))
        var response: HTTPFields = [.eTag: "\"\(part.etag)\"", .contentLength: "0"]
        Self.addChecksumHeaders(part.checksums, type: nil, to: &response)
        return Response(status: .ok, headers: response)
    }

    /// UploadPartCopy: part N of an upload from a stored object or a range of it (`x-amz-copy-source-range`),
    /// sharing its bytes; the part's MD5 and checksums are computed from them.
    func uploadPartCopy(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        try Self.refuseUnimplementedHeaders(headers)
        try Self.refuseCopyBody(headers)
        let number = try Self.partNumber(request)
        let upload = try await upload(for: request)
        return try await Self.retryingChanges {
            let source = try await copySource(request)
            var range: ClosedRange<Int64>?
            if let text = headers[.amzCopySourceRange] {
                range = try Self.parseCopySourceRange(text, size: source.size)
            }
            let length = range.map { $0.upperBound - $0.lowerBound + 1 } ?? source.size
            guard length <= Self.maxCopySize else { throw Self.copySourceTooLarge }
            let part = try await store.uploadPartCopy(
                upload, partNumber: number, source: source, range: range, checksums: [],
                charge: try await partCharge(StorageCharge(principal: request.principal), upload: upload))
            let result = S3CopyResult(
                eTag: "\"\(part.etag)\"", lastModified: S3Date.xml(part.lastModified),
                checksums: S3ChecksumFields(part.checksums))
            return try Self.xmlResponse(result, root: "CopyPartResult")
        }
    }

    /// `bytes=first-last` of a copy source, both present and inside the object (S3 is strict here).
    static func parseCopySourceRange(_ text: String, size: Int64) throws -> ClosedRange<Int64> {
        let invalid = S3Error(
            .invalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy",
            details: ["ArgumentName": "x-amz-copy-source-range"])
        guard text.hasPrefix("bytes=") else { throw invalid }
        let parts = text.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let first = Int64(parts[0]), let last = Int64(parts[1]), first <= last
        else { throw invalid }
        guard last < size else {
            throw S3Error(
                .invalidRange, "The requested range is not satisfiable",
                details: ["RangeRequested": String(text.prefix(64)), "ActualObjectSize": String(size)])
        }
        return first...last
    }

    func listParts(_ request: S3Request) async throws -> Response {
        let upload = try await upload(for: request, resumable: true)
        let maxParts = try Self.intQuery(request, "max-parts", default: 1000, range: 0...Int.max).clamped(to: 0...1000)
        let marker = try Self.intQuery(request, "part-number-marker", default: 0, range: 0...10_000)
        let (parts, more) = try await store.listParts(upload, after: marker, maxParts: maxParts)
        // `max-parts=0` answers an empty, untruncated page, as `max-uploads=0` does: its marker would never move.
        let truncated = maxParts > 0 && more
        let result = ListPartsResult(
            bucket: request.bucket, key: request.key, uploadId: upload.uploadId, partNumberMarker: marker,
            nextPartNumberMarker: parts.last?.number ?? marker, maxParts: maxParts, isTruncated: truncated,
            checksumAlgorithm: upload.checksumAlgorithm, checksumType: upload.checksumType,
            parts: parts.map {
                .init(
                    partNumber: $0.number, lastModified: S3Date.xml($0.lastModified), eTag: "\"\($0.etag)\"",
                    size: $0.size, checksums: S3ChecksumFields($0.checksums))
            })
        return try Self.xmlResponse(result, root: "ListPartsResult")
    }

    func listMultipartUploads(_ request: S3Request) async throws -> Response {
        let maxUploads = try Self.intQuery(request, "max-uploads", default: 1000, range: 0...Int.max).clamped(to: 0...1000)
        let prefix = request.queryValue("prefix") ?? ""
        try Self.checkListingScope(request, action: "s3:ListBucketMultipartUploads", prefix: prefix)
        let keyMarker = request.queryValue("key-marker") ?? ""
        // S3 reads an upload-id marker only with a key marker.
        let uploadIdMarker = keyMarker.isEmpty ? "" : request.queryValue("upload-id-marker") ?? ""
        let delimiter = request.queryValue("delimiter").flatMap { $0.isEmpty ? nil : $0 }
        let url = try ListingQuery.encodesURL(request)
        let encode = { ListingQuery.encode($0, url: url) }
        let listing = try await store.listMultipartUploads(
            bucket: request.bucket, prefix: prefix, delimiter: delimiter, keyMarker: keyMarker,
            uploadIdMarker: uploadIdMarker, maxUploads: maxUploads)
        // `max-uploads=0` answers an empty, untruncated page, as `max-keys=0` does: a truncated page without
        // markers would send a paginator round for ever.
        let truncated = maxUploads > 0 && listing.isTruncated
        let result = ListMultipartUploadsResult(
            bucket: request.bucket, keyMarker: encode(keyMarker), uploadIdMarker: uploadIdMarker,
            nextKeyMarker: truncated ? listing.nextKeyMarker.map(encode) : nil,
            nextUploadIdMarker: truncated ? listing.nextUploadIdMarker : nil,
            prefix: prefix.isEmpty ? nil : encode(prefix), maxUploads: maxUploads, isTruncated: truncated,
            uploads: listing.uploads.map {
                .init(key: encode($0.key), uploadId: $0.uploadId, initiated: S3Date.xml($0.initiated), checksumAlgorithm: $0.checksumAlgorithm)
            },
            delimiter: delimiter.map(encode), commonPrefixes: listing.commonPrefixes.map { S3CommonPrefix(prefix: encode($0)) },
            encodingType: url ? "url" : nil)
        return try Self.xmlResponse(result, root: "ListMultipartUploadsResult")
    }

    /// Largest CompleteMultipartUpload body accepted (10,000 parts with every checksum fit well inside).
    static let maxCompleteBody = 4 * 1024 * 1024

    func completeMultipartUpload(_ request: S3Request) async throws -> Response {
        guard let uploadId = request.queryValue("uploadId"), !uploadId.isEmpty else { throw CatalogObjectStore.noSuchUpload }
        // Its x-amz-checksum-* headers are the object's checksum, not the body's.
        let body = try await Self.xmlBody(
            CompleteMultipartUpload.self, request, limit: Self.maxCompleteBody, root: "CompleteMultipartUpload",
            checksumHeadersDescribeBody: false)
        if let unread = body.parts.lazy.flatMap(\.unreadChecksums).first {
            throw ChecksumExpectation.unsupported("The part element \(unread.prefix(64))")
        }
        let upload: MultipartUploadInfo
        do {
            upload = try await store.multipartUpload(uploadId, bucket: request.bucket, key: request.key)
        } catch let error as FerryDomainError where error.code == .uploadNotFound {
            // A retry of a Complete whose answer was lost gets the same answer while the object is unchanged.
            return try await answerForGoneUpload(error, uploadId, request, body)
        }
        guard !uploadId.hasPrefix(ResumableUpload.multipartIdPrefix) else { throw Self.resumableRefusal }
        // A declared checksum type must be the upload's, and a declared size the parts' total (checked by the store).
        if let type = request.header(.amzChecksumType), type.uppercased() != upload.checksumType {
            throw S3Error(.badDigest, "The upload was created with \(upload.checksumType.map { "the \($0)" } ?? "no") checksum type.")
        }
        var objectSize: Int64?
        if let text = request.header(.amzMpObjectSize) {
            guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let size = Int64(text) else {
                throw S3Error(.invalidArgument, "The x-amz-mp-object-size header must be a whole number of bytes.")
            }
            objectSize = size
        }
        let stored = try await MediaLibrary.StoredFile.forCompletion(bucket: request.bucket, key: request.key, check: writeAllowed)
        try stored?.checkCompletion(partETags: body.parts.map(\.eTag))
        var fullObjectChecksums: [String: String] = [:]
        for algorithm in ChecksumAlgorithm.s3Algorithms {
            if let field = algorithm.headerField, let value = request.header(field) {
                fullObjectChecksums[algorithm.s3Name] = value
            }
        }
        let object: ObjectInfo
        do {
            object = try await store.completeMultipartUpload(
                upload, parts: body.parts, fullObjectChecksums: fullObjectChecksums, objectSize: objectSize,
                condition: Self.writeCondition(request.request.headers).forFile(stored))
        } catch let error as FerryDomainError where [.uploadNotFound, .partNotFound].contains(error.code) {
            // The same Complete sent again while the first was under way (a client that timed out and retried) finds
            // the upload completed by it: the same answer.
            return try await answerForGoneUpload(error, uploadId, request, body)
        }
        await objectStored(object)
        return try await completionResponse(request, etag: object.etag, object: object)
    }

    /// CompleteMultipartUpload's answer for the object with `etag`; its checksums and expiration from `object`, the
    /// version the key holds, when there is one.
    private func completionResponse(_ request: S3Request, etag: String, object: ObjectInfo?) async throws -> Response {
        let result = CompleteMultipartUploadResult(
            location: "\(request.endpoint.base)/\(SigV4.uriEncode(request.bucket, encodeSlash: true))/\(SigV4.uriEncode(request.key, encodeSlash: false))",
            bucket: request.bucket, key: request.key, eTag: "\"\(etag)\"",
            checksums: S3ChecksumFields(object?.checksums ?? [:]),
            checksumType: object.flatMap { $0.checksums.isEmpty ? nil : $0.checksumType })
        var response = try Self.xmlResponse(result, root: "CompleteMultipartUploadResult")
        if let object { response.headers[.amzExpiration] = await expirationHeader(for: object) }
        return response
    }

    /// The answer to a Complete whose upload (or its parts) is gone: the completion again when it was this same
    /// Complete that made it (``repeatedCompletion(_:_:_:)``); NoSuchBucket when a DeleteBucket took the upload with
    /// its bucket meanwhile; NoSuchUpload when an abort took the upload while its parts were read; else `error`.
    private func answerForGoneUpload(
        _ error: FerryDomainError, _ uploadId: String, _ request: S3Request, _ body: CompleteMultipartUpload
    ) async throws -> Response {
        if let response = try await repeatedCompletion(uploadId, request, body) { return response }
        _ = try await store.bucket(request.bucket)
        if error.code == .partNotFound {
            do {
                _ = try await store.multipartUpload(uploadId, bucket: request.bucket, key: request.key)
            } catch let gone as FerryDomainError where gone.code == .uploadNotFound {
                throw gone
            }
        }
        throw error
    }

    /// The answer to a Complete for an upload that completed already with the same parts (remembered for a day): the
    /// same object. While the key still holds it, the media library hears of it again (a server stopped between the
    /// first completion and telling it left its video or image `Uploading`); once the key holds another version the
    /// answer is the completion's ETag alone.
    private func repeatedCompletion(_ uploadId: String, _ request: S3Request, _ body: CompleteMultipartUpload)
        async throws -> Response?
    {
        guard let completed = try await store.repeatedCompletion(
            uploadId, bucket: request.bucket, key: request.key, parts: body.parts)
        else { return nil }
        if let object = completed.object { await objectStored(object) }
        return try await completionResponse(request, etag: completed.etag, object: completed.object)
    }

    func abortMultipartUpload(_ request: S3Request) async throws -> Response {
        let upload = try await upload(for: request, resumable: true)
        try await store.abortMultipartUpload(upload)
        return Response(status: .noContent)
    }
}
