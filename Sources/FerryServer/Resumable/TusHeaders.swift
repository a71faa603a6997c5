import FerryCore
import Foundation
import HTTPTypes

/// Constants of tus's wire.
enum TusWire {
    /// The content type of a tus append.
    static let offsetOctetStream = "application/offset+octet-stream"

    /// Whether `contentType` is ``offsetOctetStream`` (``isMediaType(_:_:)``): a creation's body is then its first
    /// append, as a PATCH's is.
    static func isAppend(_ contentType: String?) -> Bool {
        isMediaType(contentType, offsetOctetStream)
    }
}

/// Constants of the IETF draft's wire.
enum IETFWire {
    /// The content type of an append from interop version 6.
    static let partialUpload = "application/partial-upload"

    /// Whether `contentType` is ``partialUpload`` (``isMediaType(_:_:)``).
    static func isAppend(_ contentType: String?) -> Bool {
        isMediaType(contentType, partialUpload)
    }
}

/// Whether `contentType` is the media type `type`, in any case and with any parameters (`; charset=binary`).
private func isMediaType(_ contentType: String?, _ type: String) -> Bool {
    guard let given = contentType?.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first
    else { return false }
    return given.trimmingCharacters(in: .whitespaces).lowercased() == type
}

/// tus's `Upload-Metadata`: comma-separated pairs of a key and an optional base64 value.
enum TusMetadata {
    /// The largest header accepted, and the most pairs.
    static let maxBytes = 4096
    static let maxPairs = 32

    /// The pairs of `header` (values decoded as UTF-8); empty when absent.
    static func parse(_ header: String?, wire: ResumableWire) throws -> [String: String] {
        guard let header, !header.trimmingCharacters(in: .whitespaces).isEmpty else { return [:] }
        let invalid = ResumableRefusal(
            .badRequest, "Upload-Metadata is comma-separated pairs of a key and a base64 value (at most 32, 4 KiB).",
            wire: wire)
        guard header.utf8.count <= maxBytes else { throw invalid }
        let pairs = header.split(separator: ",", omittingEmptySubsequences: false)
        guard pairs.count <= maxPairs else { throw invalid }
        var metadata: [String: String] = [:]
        for pair in pairs {
            let pieces = pair.trimmingCharacters(in: .whitespaces).split(separator: " ", omittingEmptySubsequences: false)
            guard (1...2).contains(pieces.count), let key = pieces.first, !key.isEmpty, key.utf8.count <= 128,
                key.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "," }), metadata[String(key)] == nil
            else { throw invalid }
            var value = ""
            if pieces.count == 2 {
                guard let data = Data(base64Encoded: String(pieces[1])), let text = String(data: data, encoding: .utf8) else {
                    throw invalid
                }
                value = text
            }
            metadata[String(key)] = value
        }
        return metadata
    }

    /// `Upload-Metadata` for `metadata`, keys in order.
    static func encode(_ metadata: [String: String]) -> String {
        metadata.keys.sorted().map { key in
            let value = metadata[key] ?? ""
            return value.isEmpty ? key : key + " " + Data(value.utf8).base64EncodedString()
        }.joined(separator: ",")
    }
}

/// tus's `Upload-Concat` on creation.
enum TusConcat: Equatable {
    /// A partial upload.
    case partial
    /// A final upload of the partial uploads at these URLs, in order.
    case final([String])

    /// The header's meaning; nil when absent.
    static func parse(_ header: String?, wire: ResumableWire) throws -> TusConcat? {
        guard let header = header?.trimmingCharacters(in: .whitespaces) else { return nil }
        if header == "partial" { return .partial }
        guard header.hasPrefix("final;") else {
            throw ResumableRefusal(.badRequest, "Upload-Concat is partial, or final; and the partial uploads' URLs.", wire: wire)
        }
        // The HTTP layer takes at most 80 KiB of header fields in all; this bounds the split below whatever it takes.
        guard header.utf8.count <= 80 * 1024 else {
            throw ResumableRefusal(.badRequest, "Upload-Concat is longer than 80 KiB.", wire: wire)
        }
        let urls = header.dropFirst("final;".count).split(separator: " ").map(String.init)
        guard (1...1000).contains(urls.count) else {
            throw ResumableRefusal(.badRequest, "A final upload names 1 to 1000 partial uploads.", wire: wire)
        }
        return .final(urls)
    }
}

/// tus's `Upload-Checksum`: an algorithm (`sha1`, `md5`, `crc32`) and the chunk's base64 digest.
struct TusChecksum: Sendable {
    var algorithm: ChecksumAlgorithm
    var digest: [UInt8]

    /// The request's checksum (its `Upload-Checksum` header); nil when absent. One announced as a trailer
    /// (checksum-trailer, not served) is refused before a byte is read, rather than the bytes kept unverified.
    static func parse(_ headers: HTTPFields) throws -> TusChecksum? {
        let trailers = headers[values: .trailer].flatMap { $0.split(separator: ",") }
        if trailers.contains(where: { $0.trimmingCharacters(in: .whitespaces).lowercased() == "upload-checksum" }) {
            throw ResumableRefusal(
                .badRequest, "Upload-Checksum in a trailer (checksum-trailer) is not served; send it as a header.",
                wire: .tus)
        }
        guard let header = headers[.uploadChecksum] else { return nil }
        let pieces = header.trimmingCharacters(in: .whitespaces).split(separator: " ")
        guard pieces.count == 2,
            let algorithm = ResumableWire.tusChecksums.first(where: { $0.name == pieces[0].lowercased() })?.algorithm
        else {
            throw ResumableRefusal(
                .badRequest, "Upload-Checksum is an algorithm (sha1, md5 or crc32) and a base64 digest.", wire: .tus)
        }
        guard let data = Data(base64Encoded: String(pieces[1])), data.count == algorithm.digestLength else {
            throw ResumableRefusal(.badRequest, "The Upload-Checksum digest is not a base64 \(pieces[0]) digest.", wire: .tus)
        }
        return TusChecksum(algorithm: algorithm, digest: [UInt8](data))
    }

    /// Whether the chunk's digests match.
    func matches(_ digests: BodyDigests) -> Bool {
        let actual = algorithm == .md5 ? digests.md5 : digests.checksums[algorithm.s3Name]
        return actual == digest
    }

    /// 460: the chunk's checksum did not match; nothing of it was kept.
    static let mismatch = ResumableRefusal(
        .checksumMismatch, "The chunk does not match its Upload-Checksum; nothing of it was kept.", wire: .tus)
    /// A checksummed chunk that did not arrive whole.
    static let cutShort = ResumableRefusal(
        .badRequest, "The chunk ended early and cannot be verified against its Upload-Checksum; nothing of it was kept.",
        wire: .tus)
}
