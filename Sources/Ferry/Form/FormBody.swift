import FerryCore
import Foundation

/// The `multipart/form-data` body of a form upload: the fields in the order Qiniu clients send them (`token`, `key`,
/// `crc32`, `x:` variables, `x-qn-meta-` metadata) and the file last, its bytes read from disk as the body is sent.
struct FormBody {
    let boundary: String
    let body: StreamedBody

    init(token: String, key: String?, file: URL, size: Int64, extraParams: FormUploader.ExtraParameters, chunkSize: Int)
    {
        boundary = "FerryFormBoundary" + Hex.randomId()
        var fields: [(String, String)] = [(FormUploadFields.token, token)]
        if let key { fields.append((FormUploadFields.key, key)) }
        if let crc32 = extraParams.crc32 { fields.append((FormUploadFields.crc32, String(crc32))) }
        for (name, value) in extraParams.callbackParams.sorted(by: { $0.key < $1.key }) {
            let prefixed =
                name.hasPrefix(FormUploadFields.customVariablePrefix)
                ? name : FormUploadFields.customVariablePrefix + name
            fields.append((prefixed, value))
        }
        for (name, value) in extraParams.customMeta.sorted(by: { $0.key < $1.key }) {
            fields.append((FormUploadFields.metadataPrefix + name.lowercased(), value))
        }
        var head = ""
        for (name, value) in fields {
            head += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quote(name))\"\r\n\r\n\(value)\r\n"
        }
        // Without one given, the type of the file's extension (as the seed's service detects it), else bytes.
        let guessed = MediaKind.contentType(forExtension: file.pathExtension)
        let mimeType = Self.headerSafe(extraParams.mimeType ?? guessed ?? "application/octet-stream")
        head +=
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(FormUploadFields.file)\"; "
            + "filename=\"\(Self.quote(file.lastPathComponent))\"\r\nContent-Type: \(mimeType)\r\n\r\n"
        let tail = "\r\n--\(boundary)--\r\n"
        body = StreamedBody(
            [.bytes(Array(head.utf8)), .file(path: file.path, length: size), .bytes(Array(tail.utf8))],
            chunkSize: chunkSize)
    }

    /// A quoted-string's content: `"` and `\` escaped, line breaks dropped.
    static func quote(_ text: String) -> String {
        var output = ""
        for character in headerSafe(text) {
            if character == "\"" || character == "\\" { output.append("\\") }
            output.append(character)
        }
        return output
    }

    /// Text without the line breaks that would end a header.
    static func headerSafe(_ text: String) -> String {
        text.filter { $0 != "\r" && $0 != "\n" && $0 != "\r\n" }
    }
}
