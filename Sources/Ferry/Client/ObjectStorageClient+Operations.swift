import FerryCore
import Foundation

/// An object's metadata, from HeadObject or a completed upload.
public struct ObjectMetadata: Sendable, Hashable {
    /// Size in bytes.
    public var size: Int64
    /// ETag without quotes.
    public var etag: String
    /// Content type.
    public var contentType: String?
    /// User metadata (`x-amz-meta-*`), names without the prefix.
    public var userMetadata: [String: String]
    /// Checksums the server holds, by S3 algorithm name (`CRC32C`, …), when asked for.
    public var checksums: [String: String]
}

/// A part as the server lists it.
public struct UploadedPart: Sendable, Hashable, Codable {
    /// Part number.
    public var number: Int
    /// Size in bytes.
    public var size: Int64
    /// ETag without quotes.
    public var etag: String
    /// The part's checksum (base64) when the upload uses one.
    public var checksum: String?

    /// Creates a part.
    public init(number: Int, size: Int64, etag: String, checksum: String? = nil) {
        self.number = number
        self.size = size
        self.etag = etag
        self.checksum = checksum
    }
}

extension ObjectStorageClient {
    func source() -> CredentialSource { CredentialSource(provider: credentialProvider, now: configuration.now) }

    /// Creates a bucket; succeeds when the caller already owns it.
    public func createBucket(_ bucket: String) async throws(FerryError) {
        try await FerryError.catching(.network, "CreateBucket") {
            do {
                _ = try await execute(S3Request(method: "PUT", bucket: bucket), credentials: source())
            } catch let error as FerryError where error.serverCode == "BucketAlreadyOwnedByYou" {}
        }
    }

    /// Stores small data in one PUT.
    @discardableResult
    public func putObject(
        _ data: [UInt8], bucket: String, key: String, contentType: String? = nil, metadata: [String: String] = [:],
        checksumAlgorithm: ChecksumAlgorithm? = .crc32c
    ) async throws(FerryError) -> ObjectMetadata {
        try await FerryError.catching(.network, "PutObject") {
            try await putObject(
                data, bucket: bucket, key: key, contentType: contentType, metadata: metadata,
                checksumAlgorithm: checksumAlgorithm, credentials: source(), observer: .init())
        }
    }

    func putObject(
        _ data: [UInt8], bucket: String, key: String, contentType: String?, metadata: [String: String],
        checksumAlgorithm: ChecksumAlgorithm?, credentials: CredentialSource, observer: RequestObserver
    ) async throws -> ObjectMetadata {
        var headers = Self.objectHeaders(contentType: contentType, metadata: metadata)
        var checksum: String?
        if let checksumAlgorithm {
            var hasher = Checksummer(checksumAlgorithm)
            hasher.update(data)
            checksum = hasher.finalizeBase64()
            headers.append((checksumAlgorithm.headerName, checksum!))
        }
        let response = try await execute(
            S3Request(method: "PUT", bucket: bucket, key: key, headers: headers, body: HeapBodyBuffer(bytes: data)),
            credentials: credentials,
            observer: observer)
        if let checksumAlgorithm, checksumAlgorithm != .md5,
            let returned = response.header(checksumAlgorithm.headerName), returned != checksum
        {
            throw FerryError(
                .checksumMismatch, "The server stored a different \(checksumAlgorithm.s3Name) than was sent.",
                requestId: response.header("x-amz-request-id"))
        }
        // An answer without an ETag stored nothing (a captive portal or a proxy's page answers 200 too).
        let etag = try Self.etag(of: response, "PutObject")
        return ObjectMetadata(
            size: Int64(data.count), etag: etag, contentType: contentType,
            userMetadata: metadata,
            checksums: checksumAlgorithm.flatMap { algorithm in
                response.header(algorithm.headerName).map { [algorithm.s3Name: $0] }
            } ?? [:])
    }

    /// The unquoted ETag an upload's answer carries: present, at most ``longestServerValue`` characters, without
    /// control characters; else the answer is no storage service's and the upload failed.
    static func etag(of response: TransportResponse, _ operation: String) throws -> String {
        guard let etag = response.header("ETag"), !etag.isEmpty else {
            throw FerryError(.server, "\(operation) answered without an ETag.", httpStatus: response.status)
        }
        guard isPlausible(etag) else {
            throw FerryError(.server, "\(operation) answered with an ETag no storage service makes.", httpStatus: response.status)
        }
        return unquote(etag)
    }

    /// The longest ETag or upload id taken from a server: S3's are tens of characters. Longer ones would grow every
    /// checkpoint and request the client writes.
    static let longestServerValue = 1024

    /// Whether a value a server names an upload or a part by is one a client can keep and send back: not empty, at
    /// most ``longestServerValue`` bytes, no control characters.
    static func isPlausible(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= longestServerValue
            && !value.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    static func objectHeaders(contentType: String?, metadata: [String: String]) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) { headers.append(("x-amz-meta-" + name.lowercased(), value)) }
        return headers
    }

    /// Whether `bucket` exists, as HeadBucket answers: true (200), false (404), or nil when the service does not say
    /// (403 for a key that may not list the bucket, or a gateway that does not answer HeadBucket).
    public func bucketExists(_ bucket: String) async throws(FerryError) -> Bool? {
        do {
            _ = try await execute(S3Request(method: "HEAD", bucket: bucket), credentials: source())
            return true
        } catch let error as FerryError where error.httpStatus == 404 {
            return false
        } catch let error as FerryError where error.httpStatus != nil {
            return nil
        } catch {
            throw FerryError(error, fallback: .network, "HeadBucket")
        }
    }

    /// The object's metadata with its checksums; `FerryError` with server code `NotFound` when absent.
    public func headObject(bucket: String, key: String) async throws(FerryError) -> ObjectMetadata {
        try await FerryError.catching(.network, "HeadObject") {
            try await headObject(bucket: bucket, key: key, credentials: source())
        }
    }

    /// What a HEAD says the server stored at `key`, for checking an upload: its size when the answer gives one, and
    /// its checksums. Nil when the HEAD fails (a key that may write but not read, a store slow to show a new object):
    /// the upload is then not checked this way.
    func storedObject(bucket: String, key: String, credentials: CredentialSource) async -> (size: Int64?, checksums: [String: String])? {
        guard let response = try? await execute(
            S3Request(method: "HEAD", bucket: bucket, key: key, headers: [("x-amz-checksum-mode", "ENABLED")]),
            credentials: credentials)
        else { return nil }
        return (response.header("Content-Length").flatMap { Int64($0) }, Self.checksums(of: response.headers))
    }

    /// The `x-amz-checksum-*` values of an answer, by S3 algorithm name.
    static func checksums(of headers: [(name: String, value: String)]) -> [String: String] {
        var checksums: [String: String] = [:]
        for header in headers {
            let name = header.name.lowercased()
            if name.hasPrefix("x-amz-checksum-"), let algorithm = ChecksumAlgorithm(headerName: name) {
                checksums[algorithm.s3Name] = header.value
            }
        }
        return checksums
    }

    func headObject(bucket: String, key: String, credentials: CredentialSource) async throws -> ObjectMetadata {
        let response = try await execute(
            S3Request(method: "HEAD", bucket: bucket, key: key, headers: [("x-amz-checksum-mode", "ENABLED")]),
            credentials: credentials)
        var metadata: [String: String] = [:]
        for header in response.headers {
            let name = header.name.lowercased()
            if name.hasPrefix("x-amz-meta-") { metadata[String(name.dropFirst(11))] = header.value }
        }
        return ObjectMetadata(
            size: Int64(response.header("Content-Length") ?? "0") ?? 0, etag: Self.unquote(response.header("ETag") ?? ""),
            contentType: response.header("Content-Type"), userMetadata: metadata, checksums: Self.checksums(of: response.headers))
    }

    /// Downloads an object (or a byte range of it) into memory.
    public func getObject(bucket: String, key: String, range: ClosedRange<Int64>? = nil) async throws(FerryError)
        -> [UInt8]
    {
        var headers: [(name: String, value: String)] = []
        if let range { headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        return try await FerryError.catching(.network, "GetObject") {
            try await execute(S3Request(method: "GET", bucket: bucket, key: key, headers: headers), credentials: source())
                .body
        }
    }

    /// Downloads an object to a file, streaming it to disk.
    public func download(bucket: String, key: String, to file: URL) async throws(FerryError) {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw FerryError(.invalidArgument, "The file \(file.path) cannot be created.")
        }
        try await FerryError.catching(.invalidArgument, "Writing \(file.path)") {
            let handle = try FileHandle(forWritingTo: file)
            defer { try? handle.close() }
            let writer = FileSink(handle: handle)
            var request = S3Request(method: "GET", bucket: bucket, key: key)
            request.responseSink = { bytes in try writer.write(bytes) }
            _ = try await execute(request, credentials: source())
        }
    }

    /// Deletes an object.
    public func deleteObject(bucket: String, key: String) async throws(FerryError) {
        try await FerryError.catching(.network, "DeleteObject") {
            _ = try await execute(S3Request(method: "DELETE", bucket: bucket, key: key), credentials: source())
        }
    }

    // MARK: Multipart

    func createMultipartUpload(
        bucket: String, key: String, contentType: String?, metadata: [String: String],
        checksumAlgorithm: ChecksumAlgorithm?, credentials: CredentialSource, observer: RequestObserver
    ) async throws -> String {
        var headers = Self.objectHeaders(contentType: contentType, metadata: metadata)
        if let checksumAlgorithm, checksumAlgorithm != .md5 {
            headers.append(("x-amz-checksum-algorithm", checksumAlgorithm.s3Name))
            headers.append(("x-amz-checksum-type", Self.checksumType(checksumAlgorithm)))
        }
        let response = try await execute(
            S3Request(method: "POST", bucket: bucket, key: key, query: [("uploads", "")], headers: headers),
            credentials: credentials, observer: observer)
        let uploadId: String
        do {
            uploadId = try S3XML.decode(InitiateMultipartUploadResult.self, from: Data(response.body)).uploadId
        } catch {
            throw FerryError(.server, "The server's CreateMultipartUpload answer could not be read.", httpStatus: response.status)
        }
        guard Self.isPlausible(uploadId) else {
            throw FerryError(
                .server, "The server's CreateMultipartUpload answer named an upload id no storage service makes.",
                httpStatus: response.status)
        }
        return uploadId
    }

    /// CRCs combine into a full-object checksum the server can verify without the parts; hashes are composite.
    static func checksumType(_ algorithm: ChecksumAlgorithm) -> String {
        algorithm.supportsCombine ? "FULL_OBJECT" : "COMPOSITE"
    }

    func uploadPart(
        bucket: String, key: String, uploadId: String, number: Int, body: any BodyBuffer, checksumHeader: (String, String)?,
        credentials: CredentialSource, observer: RequestObserver, answerWaits: AnswerWaits? = nil
    ) async throws -> String {
        var headers: [(name: String, value: String)] = []
        if let checksumHeader { headers.append(checksumHeader) }
        let response = try await execute(
            S3Request(
                method: "PUT", bucket: bucket, key: key, query: [("partNumber", String(number)), ("uploadId", uploadId)],
                headers: headers, body: body, answerWaits: answerWaits), credentials: credentials, observer: observer)
        return try Self.etag(of: response, "UploadPart")
    }

    /// Every part of an upload, following all pages of ListParts.
    public func listParts(bucket: String, key: String, uploadId: String) async throws(FerryError) -> [UploadedPart] {
        try await FerryError.catching(.network, "ListParts") {
            try await listParts(bucket: bucket, key: key, uploadId: uploadId, credentials: source(), observer: .init())
        }
    }

    func listParts(
        bucket: String, key: String, uploadId: String, credentials: CredentialSource, observer: RequestObserver
    ) async throws -> [UploadedPart] {
        var parts: [UploadedPart] = []
        var marker = 0
        while true {
            var query: [(name: String, value: String)] = [("uploadId", uploadId)]
            if marker > 0 { query.append(("part-number-marker", String(marker))) }
            let response = try await execute(
                S3Request(method: "GET", bucket: bucket, key: key, query: query), credentials: credentials,
                observer: observer)
            guard let page = try? S3XML.decode(ListPartsResult.self, from: Data(response.body)) else {
                throw FerryError(.server, "The server's ListParts answer could not be read.", httpStatus: response.status)
            }
            parts += page.parts.map {
                UploadedPart(
                    number: $0.partNumber, size: $0.size, etag: Self.unquote($0.eTag),
                    checksum: $0.checksums.values.values.first)
            }
            guard page.isTruncated, let next = page.nextPartNumberMarker, next > marker else { return parts }
            // Part numbers end at 10,000: a listing past them is not of an upload's parts.
            guard parts.count <= 10_000 else {
                throw FerryError(.cannotResumeUpload, "The server's ListParts answer goes on past 10,000 parts.")
            }
            guard next < 10_000 else { return parts }
            marker = next
        }
    }

    /// Multipart uploads in progress in a bucket (first 1000), as (key, upload id).
    public func listMultipartUploads(bucket: String, prefix: String? = nil) async throws(FerryError)
        -> [(key: String, uploadId: String)]
    {
        var query: [(name: String, value: String)] = [("uploads", "")]
        if let prefix { query.append(("prefix", prefix)) }
        let response = try await FerryError.catching(.network, "ListMultipartUploads") {
            try await execute(S3Request(method: "GET", bucket: bucket, query: query), credentials: source())
        }
        guard let result = try? S3XML.decode(ListMultipartUploadsResult.self, from: Data(response.body)) else {
            throw FerryError(.server, "The server's ListMultipartUploads answer could not be read.")
        }
        return result.uploads.map { ($0.key, $0.uploadId) }
    }

    /// The multipart uploads in progress of exactly `key` (among the first 1000 under it), with when each began.
    func multipartUploads(of key: String, bucket: String, credentials: CredentialSource) async throws
        -> [(uploadId: String, initiated: Date?)]
    {
        let response = try await execute(
            S3Request(method: "GET", bucket: bucket, query: [("uploads", ""), ("prefix", key)]), credentials: credentials)
        guard let result = try? S3XML.decode(ListMultipartUploadsResult.self, from: Data(response.body)) else {
            throw FerryError(.server, "The server's ListMultipartUploads answer could not be read.")
        }
        return result.uploads.filter { $0.key == key }.map { upload in
            let initiated =
                (try? Date(upload.initiated, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)))
                ?? (try? Date(upload.initiated, strategy: .iso8601))
            return (upload.uploadId, initiated)
        }
    }

    /// The least time a CompleteMultipartUpload and its answer are given.
    static let completionTimeout: Duration = .seconds(900)

    func completeMultipartUpload(
        bucket: String, key: String, uploadId: String, parts: [UploadedPart], checksumAlgorithm: ChecksumAlgorithm?,
        fullObjectChecksum: String?, credentials: CredentialSource, observer: RequestObserver
    ) async throws -> CompleteMultipartUploadResult {
        let body = CompleteMultipartUpload(
            parts: parts.map { part in
                var fields = S3ChecksumFields()
                if let algorithm = checksumAlgorithm, algorithm != .md5, let checksum = part.checksum {
                    fields[algorithm.s3Name] = checksum
                }
                return .init(partNumber: part.number, eTag: "\"\(part.etag)\"", checksums: fields)
            })
        let xml = try S3XML.encode(body, root: "CompleteMultipartUpload")
        var headers: [(name: String, value: String)] = []
        if let checksumAlgorithm, let fullObjectChecksum { headers.append((checksumAlgorithm.headerName, fullObjectChecksum)) }
        // S3 may take minutes to complete a large upload, sending its answer's head at once and then whitespace to keep
        // the connection open until the result: the answer is given that long.
        var request = S3Request(
            method: "POST", bucket: bucket, key: key, query: [("uploadId", uploadId)], headers: headers, body: HeapBodyBuffer(bytes: xml))
        request.timeout = max(configuration.timeoutIntervalForRequest, Self.completionTimeout)
        let response = try await execute(request, credentials: credentials, observer: observer)
        // S3 may answer 200 with an error document when the completion fails late.
        if let error = try? S3XML.decode(S3ErrorDocument.self, from: Data(response.body)), !error.code.isEmpty {
            throw FerryError(.server, error.message, httpStatus: response.status, serverCode: error.code, requestId: error.requestId)
        }
        guard let result = try? S3XML.decode(CompleteMultipartUploadResult.self, from: Data(response.body)) else {
            throw FerryError(.server, "The server's CompleteMultipartUpload answer could not be read.", httpStatus: response.status)
        }
        return result
    }

    /// Aborts a multipart upload, deleting its parts on the server.
    public func abortMultipartUpload(bucket: String, key: String, uploadId: String) async throws(FerryError) {
        try await FerryError.catching(.network, "AbortMultipartUpload") {
            try await abortMultipartUpload(bucket: bucket, key: key, uploadId: uploadId, credentials: source())
        }
    }

    func abortMultipartUpload(bucket: String, key: String, uploadId: String, credentials: CredentialSource) async throws {
        _ = try await execute(
            S3Request(method: "DELETE", bucket: bucket, key: key, query: [("uploadId", uploadId)]), credentials: credentials)
    }

    static func unquote(_ etag: String) -> String {
        etag.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
    }
}

/// Appends downloaded pieces to a file.
final class FileSink: @unchecked Sendable {
    // Used by one download's response loop, one piece at a time.
    let handle: FileHandle
    init(handle: FileHandle) { self.handle = handle }
    func write(_ bytes: [UInt8]) throws { try handle.write(contentsOf: bytes) }
}
