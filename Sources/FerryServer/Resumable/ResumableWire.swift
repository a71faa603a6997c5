import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension HTTPField.Name {
    static let tusResumable = Self("Tus-Resumable")!
    static let tusVersion = Self("Tus-Version")!
    static let tusExtension = Self("Tus-Extension")!
    static let tusMaxSize = Self("Tus-Max-Size")!
    static let tusChecksumAlgorithm = Self("Tus-Checksum-Algorithm")!
    static let uploadOffset = Self("Upload-Offset")!
    static let uploadLength = Self("Upload-Length")!
    static let uploadDeferLength = Self("Upload-Defer-Length")!
    static let uploadMetadata = Self("Upload-Metadata")!
    static let uploadExpires = Self("Upload-Expires")!
    static let uploadConcat = Self("Upload-Concat")!
    static let uploadChecksum = Self("Upload-Checksum")!
    static let uploadDraftInteropVersion = Self("Upload-Draft-Interop-Version")!
    static let uploadComplete = Self("Upload-Complete")!
    static let uploadIncomplete = Self("Upload-Incomplete")!
    static let uploadLimit = Self("Upload-Limit")!
    static let httpMethodOverride = Self("X-HTTP-Method-Override")!
    /// Ferry's own: the CRC64NVME (base64) of the bytes an unfinished upload holds, on its `HEAD`, so that a client
    /// resuming it checks they are still its file's before it sends the rest.
    static let ferryReceivedCRC64NVME = Self("Ferry-Received-CRC64NVME")!
}

/// Which resumable-upload protocol a request speaks, from its headers: `Upload-Draft-Interop-Version` for the IETF
/// draft (interop versions 3, 5 and 6, as URLSession sends them), `Tus-Resumable` for tus 1.0.
enum ResumableWire: Sendable, Equatable {
    /// tus 1.0.0.
    case tus
    /// The IETF draft at one interop version.
    case ietf(version: Int)

    /// The interop versions served: 3 (iOS 17), 5 (iOS 18.0) and 6 (iOS 18.1 and later).
    static let ietfVersions = [3, 5, 6]
    /// The tus version served.
    static let tusVersion = "1.0.0"
    /// The tus extensions served.
    static let tusExtensions = [
        "creation", "creation-with-upload", "creation-defer-length", "termination", "checksum", "expiration",
        "concatenation",
    ]
    /// The `Upload-Checksum` algorithms served.
    static let tusChecksums: [(name: String, algorithm: ChecksumAlgorithm)] = [("sha1", .sha1), ("md5", .md5), ("crc32", .crc32)]

    /// The protocol of `request`; nil when it names neither (an `OPTIONS` discovery, or a request for neither).
    /// Throws the refusal of a version it names but that is not served.
    ///
    /// A request that names both is tus: only a tus client writes `Tus-Resumable`, while URLSession (iOS 17 and
    /// later) can add the draft's headers to the upload tasks an app makes, which tus clients send their appends as.
    /// Taken as the draft, such an append would be refused (its content type is tus's) or taken as the upload's last.
    static func of(_ headers: HTTPFields) throws -> ResumableWire? {
        if let value = headers[.tusResumable] {
            guard value.trimmingCharacters(in: .whitespaces) == tusVersion else {
                throw ResumableRefusal(
                    .preconditionFailed, "Tus-Resumable \(value.prefix(16)) is not served; use 1.0.0.", wire: .tus,
                    headers: [.tusVersion: tusVersion])
            }
            return .tus
        }
        if let value = headers[.uploadDraftInteropVersion] {
            // As the draft writes it: `6`, not `06` or `+6`.
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            guard let version = ietfVersions.first(where: { String($0) == trimmed }) else {
                throw ResumableRefusal(
                    .badRequest, "Upload-Draft-Interop-Version \(value.prefix(16)) is not served; use 3, 5 or 6.",
                    wire: .ietf(version: ietfVersions.last ?? 6))
            }
            return .ietf(version: version)
        }
        return nil
    }

    /// Whether `headers` ask for a plain creation: an `Upload-Draft-Interop-Version` of a later draft than those
    /// served (a number past the newest, written as the draft writes it), no `Tus-Resumable`, and `Upload-Complete:
    /// ?1`, the whole file in one request. The draft has a server that does not match the version send no 104 and
    /// answer the request as it would without resumption: the file is stored, where refusing it would fail every
    /// upload of a client newer than this server.
    static func isPlainCreation(_ headers: HTTPFields) -> Bool {
        let newest = ietfVersions.last ?? 6
        guard headers[.tusResumable] == nil,
            let value = headers[.uploadDraftInteropVersion]?.trimmingCharacters(in: .whitespaces),
            let version = Int(value), String(version) == value, version > newest
        else { return false }
        return (try? ResumableWire.ietf(version: newest).declaredComplete(headers)) == true
    }

    /// The headers every answer in this protocol carries.
    var headers: HTTPFields {
        switch self {
        case .tus: [.tusResumable: Self.tusVersion]
        case .ietf(let version): [.uploadDraftInteropVersion: String(version)]
        }
    }

    /// Sets the completion flag of an IETF answer as its version spells it (`Upload-Complete` from version 5,
    /// `Upload-Incomplete` before).
    func setComplete(_ complete: Bool, in headers: inout HTTPFields) {
        guard case .ietf(let version) = self else { return }
        if version >= 5 {
            headers[.uploadComplete] = complete ? "?1" : "?0"
        } else {
            headers[.uploadIncomplete] = complete ? "?0" : "?1"
        }
    }

    /// The completion flag an IETF request declares (`Upload-Complete`, or the inverse of `Upload-Incomplete` in
    /// version 3); nil when it declares none. Throws on a value that is not a structured-field boolean.
    func declaredComplete(_ headers: HTTPFields) throws -> Bool? {
        guard case .ietf(let version) = self else { return nil }
        let field: HTTPField.Name = version >= 5 ? .uploadComplete : .uploadIncomplete
        guard let raw = headers[field] else { return nil }
        let value = raw.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard value == "?1" || value == "?0" else {
            throw ResumableRefusal(.badRequest, "\(field.rawName) must be ?0 or ?1.", wire: self)
        }
        return (value == "?1") == (version >= 5)
    }

    /// A non-negative integer header (`Upload-Offset`, `Upload-Length`): digits only, at most 5 TiB (an offset may be
    /// more: no upload reaches it, so the caller answers it as a conflict); nil when absent. The IETF draft's fields
    /// are structured-field integers (RFC 8941): at most 15 digits, parameters allowed and ignored.
    func integer(_ field: HTTPField.Name, in headers: HTTPFields) throws -> Int64? {
        guard let raw = headers[field] else { return nil }
        var value = Substring(raw.trimmingCharacters(in: .whitespaces))
        var digits = 19
        if case .ietf = self, field != .contentLength {
            value = value.prefix { $0 != ";" }
            digits = 15
        }
        guard (1...digits).contains(value.utf8.count), value.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let number = Int64(value)
        else {
            let rule = digits == 15 ? " of at most 15 digits" : ""
            throw ResumableRefusal(.badRequest, "\(field.rawName) must be a non-negative integer\(rule).", wire: self)
        }
        guard number <= CatalogObjectStore.Limits.maxObjectSize || field == .uploadOffset else {
            throw ResumableRefusal(.contentTooLarge, "\(field.rawName) is larger than 5 TiB.", wire: self)
        }
        return number
    }
}

/// A refusal in a resumable-upload protocol: its status, a plain-text reason, and the protocol's headers (with an
/// upload's offset where the protocols say the client needs it, as on a 409).
struct ResumableRefusal: Error, HTTPResponseError {
    var status: HTTPResponse.Status
    var message: String
    var headers: HTTPFields
    /// Whether the upload keeps what the request stored (a body cut short), so the client resumes it.
    var keepsUpload = false
    /// The draft's problem type of this refusal, its body (`application/problem+json`) at interop version 6.
    var problem: UploadProblem?

    init(
        _ status: HTTPResponse.Status, _ message: String, wire: ResumableWire?, headers extra: HTTPFields = [:],
        problem: UploadProblem? = nil
    ) {
        self.status = status
        self.message = message
        // A request that names no protocol is answered as tus answers (tus: every answer but discovery's carries
        // `Tus-Resumable`).
        var headers = (wire ?? .tus).headers
        headers.append(contentsOf: extra)
        self.headers = headers
        if case .ietf(let version) = wire, version >= 6 { self.problem = problem }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.cacheControl] = "no-store"
        // An IETF request that says more is to come hears in every answer, refusals too, that the upload is not
        // complete, as the draft asks; a refusal of a completed upload's content says it is complete where it is made.
        if headers[.uploadComplete] == nil, headers[.uploadIncomplete] == nil,
            let wire = try? ResumableWire.of(request.headers), (try? wire.declaredComplete(request.headers)) == false
        {
            wire.setComplete(false, in: &headers)
        }
        if request.method == .head {
            headers[.contentLength] = "0"
            return Response(status: status, headers: headers)
        }
        if let problem {
            headers[.contentType] = "application/problem+json"
            return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: problem.json)))
        }
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
    }
}

/// A problem type the IETF draft defines (RFC 9457 problem details), with its members.
struct UploadProblem: Sendable, Equatable {
    var type: String
    var title: String
    var members: [String: Int64] = [:]

    /// An append at another offset than the upload's.
    static func mismatchingOffset(expected: Int64, provided: Int64) -> Self {
        Self(
            type: "https://iana.org/assignments/http-problem-types#mismatching-upload-offset",
            title: "offset from request does not match offset of resource",
            members: ["expected-offset": expected, "provided-offset": provided])
    }
    /// An append to an upload that is complete.
    static let completedUpload = Self(
        type: "https://iana.org/assignments/http-problem-types#completed-upload", title: "upload is already completed")
    /// A length that disagrees with one indicated before, or with the bytes received.
    static let inconsistentLength = Self(
        type: "https://iana.org/assignments/http-problem-types#inconsistent-upload-length",
        title: "inconsistent length values for upload")

    /// The problem as JSON (its strings are constants, its members integers).
    var json: String {
        let fields = [("type", "\"\(type)\""), ("title", "\"\(title)\"")]
            + members.sorted { $0.key < $1.key }.map { ($0.key, String($0.value)) }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}

extension HTTPResponse.Status {
    /// tus's `460 Checksum Mismatch`.
    static let checksumMismatch = HTTPResponse.Status(code: 460, reasonPhrase: "Checksum Mismatch")
    /// The IETF draft's `104 Upload Resumption Supported`.
    static let uploadResumptionSupported = HTTPResponse.Status(code: 104, reasonPhrase: "Upload Resumption Supported")
}
