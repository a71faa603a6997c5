import FerryCore
import Foundation
import HTTPTypes
import Hummingbird

extension ObjectAPI {
    func createMultipartUpload(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
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
        let upload = try await store.createMultipartUpload(
            bucket: request.bucket, key: request.key, attributes: Self.attributes(from: headers),
            checksumAlgorithm: algorithm, checksumType: type)
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

    func upload(for request: S3Request) async throws -> MultipartUploadInfo {
        guard let uploadId = request.queryValue("uploadId"), !uploadId.isEmpty else {
            throw LocalDiskStore.noSuchUpload
        }
        return try await store.multipartUpload(uploadId, bucket: request.bucket, key: request.key)
    }

    func uploadPart(_ request: S3Request) async throws -> Response {
        let headers = request.request.headers
        if headers[HTTPField.Name("x-amz-copy-source")!] != nil {
            throw S3Error(.notImplemented, "UploadPartCopy is not implemented.")
        }
        let number = try Self.partNumber(request)
        let upload = try await upload(for: request)
        let expectation = try ChecksumExpectation(headers: headers)
        let (body, trailers) = try body(of: request)
        let part = try await store.uploadPart(
            upload, partNumber: number, body: body, checksums: expectation.algorithms,
            verify: { digests in try expectation.verify(digests, trailers: trailers.values) })
        var response: HTTPFields = [.eTag: "\"\(part.etag)\"", .contentLength: "0"]
        for (name, value) in part.checksums {
            if let algorithm = ChecksumAlgorithm(name: name) { response[HTTPField.Name(algorithm.headerName)!] = value }
        }
        return Response(status: .ok, headers: response)
    }

    func listParts(_ request: S3Request) async throws -> Response {
        let upload = try await upload(for: request)
        let maxParts = try Self.intQuery(request, "max-parts", default: 1000, range: 0...Int.max).clamped(to: 0...1000)
        let marker = try Self.intQuery(request, "part-number-marker", default: 0, range: 0...10_000)
        let (parts, truncated) = try await store.listParts(upload, after: marker, maxParts: maxParts)
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
        let keyMarker = request.queryValue("key-marker") ?? ""
        let uploadIdMarker = request.queryValue("upload-id-marker") ?? ""
        let (uploads, truncated) = try await store.listMultipartUploads(
            bucket: request.bucket, prefix: prefix, keyMarker: keyMarker, uploadIdMarker: uploadIdMarker,
            maxUploads: maxUploads)
        let result = ListMultipartUploadsResult(
            bucket: request.bucket, keyMarker: keyMarker, uploadIdMarker: uploadIdMarker,
            nextKeyMarker: truncated ? uploads.last?.key : nil, nextUploadIdMarker: truncated ? uploads.last?.uploadId : nil,
            prefix: prefix.isEmpty ? nil : prefix, maxUploads: maxUploads, isTruncated: truncated,
            uploads: uploads.map {
                .init(key: $0.key, uploadId: $0.uploadId, initiated: S3Date.xml($0.initiated), checksumAlgorithm: $0.checksumAlgorithm)
            })
        return try Self.xmlResponse(result, root: "ListMultipartUploadsResult")
    }

    /// Largest CompleteMultipartUpload body accepted (10,000 parts with every checksum fit well inside).
    static let maxCompleteBody = 4 * 1024 * 1024

    func completeMultipartUpload(_ request: S3Request) async throws -> Response {
        let upload = try await upload(for: request)
        var httpRequest = request.request
        let buffer: ByteBuffer
        do {
            buffer = try await httpRequest.collectBody(upTo: Self.maxCompleteBody)
        } catch {
            throw S3Error(.malformedXML, "The XML you provided was too large or could not be read.")
        }
        let data = Data(buffer: buffer)
        if SigV4.isHex64(request.verified.payloadHash), SigV4.hexSHA256(data) != request.verified.payloadHash.lowercased() {
            throw S3Error(.xAmzContentSHA256Mismatch, "The provided 'x-amz-content-sha256' header does not match what was computed.")
        }
        let body: CompleteMultipartUpload
        do {
            body = try S3XML.decode(CompleteMultipartUpload.self, from: data)
        } catch {
            throw S3Error(.malformedXML, "The XML you provided was not well-formed or did not validate against our published schema.")
        }
        var fullObjectChecksum: String?
        if let name = upload.checksumAlgorithm, let algorithm = ChecksumAlgorithm(name: name) {
            fullObjectChecksum = request.header(HTTPField.Name(algorithm.headerName)!)
        }
        let object = try await store.completeMultipartUpload(upload, parts: body.parts, fullObjectChecksum: fullObjectChecksum)
        await objectStored(object)
        let host = request.request.head.authority ?? "localhost"
        let result = CompleteMultipartUploadResult(
            location: "http://\(host)/\(SigV4.uriEncode(request.bucket, encodeSlash: true))/\(SigV4.uriEncode(request.key, encodeSlash: false))",
            bucket: request.bucket, key: request.key, eTag: "\"\(object.etag)\"",
            checksums: S3ChecksumFields(object.checksums), checksumType: object.checksumType)
        return try Self.xmlResponse(result, root: "CompleteMultipartUploadResult")
    }

    func abortMultipartUpload(_ request: S3Request) async throws -> Response {
        let upload = try await upload(for: request)
        try await store.abortMultipartUpload(upload)
        return Response(status: .noContent)
    }
}
