import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The S3-compatible object API: path-style addressing (`/bucket/key`), S3 XML bodies and S3 error documents.
///
/// Every request is authenticated with SigV4 and authorized against the principal's policy before it touches the
/// store; nothing is allowed by default.
public struct ObjectAPI: Sendable {
    let store: any ObjectStore
    /// Keys and temporary credentials, for the signed policies of POST uploads.
    let credentials: CredentialStore
    let region: String
    /// Told about every object stored (PutObject, CompleteMultipartUpload), so the media catalog follows storage.
    var objectStored: @Sendable (ObjectInfo) async -> Void = { _ in }
    /// Asked before an object is written (PutObject, PostObject, CreateMultipartUpload); throws to refuse the write (the
    /// media library refuses files of a video that is gone), or names the stored file of a video or image, which only
    /// the same bytes in one request may write again.
    var writeAllowed: @Sendable (_ bucket: String, _ key: String) async throws -> MediaLibrary.StoredFile? = { _, _ in nil }
    /// Takes a turn of the request-rate quota of a principal found in a request's body (a POST upload's policy
    /// signature), which the edge's rate middleware cannot see.
    var takeRequestTurn: @Sendable (Principal) throws -> Void = { _ in }
    /// The buckets' lifecycle rules, parsed, for the `x-amz-expiration` of object answers.
    let lifecycleRules = LifecycleRulesCache()
    /// The configured public endpoint, which the object URLs of answers (a completed upload's or a POST upload's
    /// `Location`) name; nil names the endpoint each request reached.
    var publicEndpoint: PublicEndpoint?

    /// A request as the operations see it.
    struct S3Request: Sendable {
        var request: Request
        var bucket: String
        var key: String
        var query: [(name: String, value: String)]
        var principal: Principal
        var verified: SigV4VerifiedRequest
        /// The endpoint object URLs name: the public endpoint, else the one the request reached (its validated
        /// `Host`).
        var endpoint: PublicEndpoint

        func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
        func hasQuery(_ name: String) -> Bool { query.contains { $0.name == name } }
        func header(_ name: HTTPField.Name) -> String? { request.headers[name] }
    }

    /// Answers one request of the S3 catch-all group: chooses the operation from method, path and sub-resource,
    /// authorizes the caller ``S3AuthenticationMiddleware`` established, then performs it. Refusals are thrown, for
    /// the group's ``S3Dialect``.
    ///
    /// A client waiting with `Expect: 100-continue` is told to send its body when the operation first reads it, once
    /// the request is authenticated and allowed and the operation has made the checks it can make without the body
    /// (the bucket, the quota the declared length would pass), so a refused upload never sends its bytes.
    func respond(to request: Request, context: FerryRequestContext) async throws -> Response {
        let rawPath = request.uri.path
        let query = SigV4.parseQueryString(request.uri.query ?? "")
        let (bucket, key) = try Self.splitPath(rawPath)
        // Browsers send preflights without credentials, and form uploads carry their own signed policy.
        if request.method == .options {
            guard !bucket.isEmpty else { throw Self.methodNotAllowed }
            return try await preflight(request, bucket: bucket)
        }
        let operation = try Self.operation(
            method: request.method, bucket: bucket, key: key, query: query, headers: request.headers)
        context.observation.operation = operation.rawValue
        let caller = try context.requireCaller()
        let logger = context.logger
        if operation == .postObject, caller.credential == .anonymous {
            logger.debug("request", metadata: ["ferry.operation": .string(operation.rawValue), "ferry.bucket": .string(bucket)])
            // The form carries its own signature: it has to be read to be checked.
            await context.sendContinue()
            return try await postObject(request, bucket: bucket, endpoint: try publicEndpoint ?? context.endpoint())
        }
        let principal = try caller.requirePrincipal()
        guard let verified = caller.signedRequest else { throw Self.anonymous }
        logger.debug(
            "request",
            metadata: [
                "ferry.operation": .string(operation.rawValue), "ferry.bucket": .string(bucket),
                "ferry.access-key-id": .string(principal.accessKeyId),
            ])
        for action in operation.actions + Self.taggingActions(operation, request.headers) {
            // ListBuckets names no bucket: a key granted it on any bucket may ask, and sees the buckets it may list.
            guard operation == .listBuckets
                ? principal.allowsSomewhere(action: action)
                : principal.allows(action: action, bucket: bucket.isEmpty ? nil : bucket, key: key.isEmpty ? nil : key)
            else {
                throw S3Error(.accessDenied, "Access Denied")
            }
        }
        // Ferry is one account, whose id is `ferry` (the owner its listings name): a request that expects its bucket,
        // or its copy's source bucket, to be another account's is refused before anything is done, as S3 refuses it.
        for name in [HTTPField.Name.amzExpectedBucketOwner, .amzSourceExpectedBucketOwner] {
            if let expected = request.headers[name], !expected.isEmpty, expected != Self.owner.id {
                throw S3Error(.accessDenied, "Access Denied")
            }
        }
        if operation == .postObject {
            throw S3Error(.malformedPOSTRequest, "A POST upload is authenticated by its signed policy, not by an Authorization header.")
        }
        if !key.isEmpty { try Self.validateKey(key) }
        // A character XML 1.0 cannot hold names no key (keys cannot hold one) and cannot be written back in an XML
        // answer (a listing's Prefix or Marker). Tab, line feed and carriage return can (s3-tests list with them).
        if let parameter = query.first(where: { Self.hasXMLForbiddenCharacter($0.name) || Self.hasXMLForbiddenCharacter($0.value) }) {
            throw S3Error(
                .invalidArgument, "A query parameter holds a character XML cannot carry.",
                details: ["ArgumentName": String(parameter.name.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }.prefix(64))])
        }
        // Whatever the operation (CompleteMultipartUpload's checksum headers are the object's, not its body's).
        try ChecksumExpectation.refuseUnsupported(request.headers)
        var request = request
        if request.headers[.expect]?.lowercased() == "100-continue" {
            request.body = RequestBody(
                asyncSequence: ContinueOnFirstRead(base: request.body, sendContinue: { await context.sendContinue() }))
        }
        let s3 = S3Request(
            request: request, bucket: bucket, key: key, query: query, principal: principal, verified: verified,
            endpoint: try publicEndpoint ?? context.endpoint())
        var response = try await perform(operation, s3)
        response.headers[.amzId2] = context.requestId
        return response
    }

    static let anonymous = S3Error(.accessDenied, "Anonymous access is forbidden; sign the request with AWS Signature Version 4.")

    func perform(_ operation: Operation, _ request: S3Request) async throws -> Response {
        switch operation {
        case .listBuckets: try await listBuckets(request)
        case .createBucket: try await createBucket(request)
        case .headBucket: try await headBucket(request)
        case .deleteBucket: try await deleteBucket(request)
        case .getBucketLocation: try await getBucketLocation(request)
        case .getBucketVersioning: try await getBucketVersioning(request)
        case .getBucketCors: try await getBucketCors(request)
        case .putBucketCors: try await putBucketCors(request)
        case .deleteBucketCors: try await deleteBucketCors(request)
        case .getBucketLifecycleConfiguration: try await getBucketLifecycle(request)
        case .putBucketLifecycleConfiguration: try await putBucketLifecycle(request)
        case .deleteBucketLifecycle: try await deleteBucketLifecycle(request)
        case .listObjects: try await listObjects(request)
        case .listObjectsV2: try await listObjectsV2(request)
        case .listObjectVersions: try await listObjectVersions(request)
        case .listMultipartUploads: try await listMultipartUploads(request)
        case .deleteObjects: try await deleteObjects(request)
        case .postObject: throw Self.methodNotAllowed
        case .putObject: try await putObject(request)
        case .copyObject: try await copyObject(request)
        case .getObject: try await getObject(request, head: false)
        case .headObject: try await getObject(request, head: true)
        case .deleteObject: try await deleteObject(request)
        case .getObjectAttributes: try await getObjectAttributes(request)
        case .getObjectTagging: try await getObjectTagging(request)
        case .putObjectTagging: try await putObjectTagging(request)
        case .deleteObjectTagging: try await deleteObjectTagging(request)
        case .createMultipartUpload: try await createMultipartUpload(request)
        case .uploadPart: try await uploadPart(request)
        case .uploadPartCopy: try await uploadPartCopy(request)
        case .listParts: try await listParts(request)
        case .completeMultipartUpload: try await completeMultipartUpload(request)
        case .abortMultipartUpload: try await abortMultipartUpload(request)
        }
    }

    /// Splits a raw path into a bucket and a decoded key; a `%` not followed by two hex digits is InvalidURI, a bucket
    /// no bucket could be called (``BucketName/isPlausible(_:)``) InvalidBucketName.
    static func splitPath(_ rawPath: String) throws -> (bucket: String, key: String) {
        let bytes = Array(rawPath.utf8)
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "%") {
            guard index + 2 < bytes.count, Hex.value(bytes[index + 1]) != nil, Hex.value(bytes[index + 2]) != nil
            else { throw S3Error(.invalidURI, "Couldn't parse the specified URI.") }
        }
        var path = Substring(rawPath)
        if path.hasPrefix("/") { path = path.dropFirst() }
        let slash = path.firstIndex(of: "/")
        let parts: [Substring] = slash.map { [path[..<$0], path[path.index(after: $0)...]] } ?? [path, ""]
        let decoded = try parts.map { (part: Substring) throws -> String in
            // Escapes of bytes that are not UTF-8 would be repaired into U+FFFD: two names would be one key.
            guard let text = SigV4.percentDecodeValidating(String(part)) else {
                throw S3Error(.invalidURI, "Couldn't parse the specified URI: its escapes are not UTF-8.")
            }
            return text
        }
        // A bucket that could not exist is named as such, before a catalog reads a cut name (a NUL) for another.
        if !decoded[0].isEmpty, !BucketName.isPlausible(decoded[0]) {
            throw S3Error(.invalidBucketName, "The specified bucket is not valid.")
        }
        return (decoded[0], decoded[1])
    }

    /// InvalidURI for a query whose escapes spell bytes that are not UTF-8: decoded, they would be repaired into
    /// U+FFFD, and neither the signature nor the operation would see what the client sent.
    static func validateQuery(_ rawQuery: String) throws {
        for part in rawQuery.split(whereSeparator: { $0 == "&" || $0 == "=" })
        where SigV4.percentDecodeValidating(String(part)) == nil {
            throw S3Error(.invalidURI, "Couldn't parse the specified URI: its query's escapes are not UTF-8.")
        }
    }

    /// Keys are at most 1024 bytes of UTF-8, carry no `.` or `..` path segment and no control character.
    static func validateKey(_ key: String) throws {
        guard key.utf8.count <= 1024 else {
            throw S3Error(.keyTooLong, "Your key is too long", details: ["MaxSizeAllowed": "1024"])
        }
        for segment in key.split(separator: "/", omittingEmptySubsequences: false) where segment == "." || segment == ".." {
            throw S3Error(
                .invalidArgument, "Object keys must not contain '.' or '..' path segments.",
                details: ["ArgumentName": "key"])
        }
        // U+FFFE and U+FFFF: XML cannot carry them, so no listing could name the key.
        if hasControlCharacter(key) || hasXMLForbiddenCharacter(key) {
            throw S3Error(.invalidURI, "Couldn't parse the specified URI.", details: ["ArgumentName": "key"])
        }
    }

    /// Checks the key of an upload through another endpoint (a form, a resumable upload): not empty, and by the object
    /// API's rules (``validateKey(_:)``), so that every stored key can be read and deleted there; a refusal is thrown
    /// as `refusal` makes it of its message.
    static func validateUploadKey(_ key: String, refusal: (String) -> any Error) throws {
        guard !key.isEmpty else { throw refusal("The key must be 1 to 1024 bytes long.") }
        do {
            try validateKey(key)
        } catch let error as S3Error {
            // Said of the key, not of a URI: it came in a form field or a header.
            throw refusal(
                error.code == .invalidURI ? "The key must not contain a control character, U+FFFE or U+FFFF." : error.message)
        }
    }

    /// Whether `text` holds a C0 or C1 control character (but tab) or DEL, as S3 refuses them in a request URI.
    static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || (0x7F...0x9F).contains($0.value) }
    }

    /// Whether `text` holds a character XML 1.0 cannot carry: a C0 control but tab, line feed and carriage return,
    /// U+FFFE or U+FFFF.
    static func hasXMLForbiddenCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { ($0.value < 0x20 && !["\t", "\n", "\r"].contains($0)) || $0.value == 0xFFFE || $0.value == 0xFFFF }
    }

    /// Bucket names as S3 allows them: 3–63 characters of lowercase letters, digits, dots and hyphens, starting and
    /// ending with a letter or digit; no `..`, `.-` or `-.`; not an IP address; none of S3's reserved prefixes
    /// (`xn--`, `sthree-`, `amzn-s3-demo-`) or suffixes (`-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`, `--table-s3`).
    static func validateBucketName(_ name: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-")
        let reservedPrefixes = ["xn--", "sthree-", "amzn-s3-demo-"]
        let reservedSuffixes = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"]
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        let isIPAddress = octets.count == 4 && octets.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) }
        guard (3...63).contains(name.count), name.allSatisfy({ allowed.contains($0) }),
            let first = name.first, let last = name.last, first.isLetter || first.isNumber,
            last.isLetter || last.isNumber, !name.contains(".."), !name.contains(".-"), !name.contains("-."),
            !isIPAddress, !reservedPrefixes.contains(where: name.hasPrefix),
            !reservedSuffixes.contains(where: name.hasSuffix)
        else {
            throw S3Error(.invalidBucketName, "The specified bucket is not valid.", details: ["BucketName": String(name.prefix(64))])
        }
        // `/console/` is the web console's path, so no bucket may be called that.
        if name == "console" {
            throw S3Error(
                .invalidBucketName, "The bucket name console is reserved for Ferry's web console.",
                details: ["BucketName": name])
        }
    }

    // MARK: Responses

    static func xmlResponse<T: Encodable>(_ value: T, root: String, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try S3XML.encode(value, root: root)
        return Response(
            status: status, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
