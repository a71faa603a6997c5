import FerryCore
import Foundation

/// Request bodies of the JSON routes (media, publish, console, part signing), decoded into their Codable types after
/// their shape is checked (``DocumentShape``): a body too deep or too large is `InvalidParameter`, one that is not JSON
/// `MalformedJSON`, a field of the wrong type (or a number its type cannot hold), or one a quota or a policy statement
/// does not take, `InvalidParameter` naming the field, and a field a nested object needs and lacks `MissingParameter`.
/// An empty body is `{}`. A string holding NUL (`\u0000`), or a body holding a NUL byte (UTF-16 or UTF-32, which the
/// decoder would take), is `InvalidParameter`: no field takes NUL, and the SQLite catalog would read text only up to
/// it (an id cut there names another record).
enum JSONBody {
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let data = data.isEmpty ? Data("{}".utf8) : data
        do {
            try DocumentShape.checkJSON(data)
        } catch {
            throw MediaError("InvalidParameter", "The request body \(error.reason).")
        }
        guard !data.contains(0) else {
            throw MediaError(
                "InvalidParameter", "The request body holds a NUL byte: JSON bodies are UTF-8, without NUL.")
        }
        guard !holdsEscapedNUL(data) else {
            throw MediaError(
                "InvalidParameter", "The request body holds a NUL character (\\u0000), which no field takes.")
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as UnknownFieldError {
            throw MediaError.invalid(error.path, "is not a field it takes; it takes \(error.takes).")
        } catch DecodingError.keyNotFound(let key, let context) {
            // A nested object without a field it needs (a policy statement without Effect): named, not MalformedJSON.
            throw MediaError.missing(String(fieldPath(context.codingPath + [key]).prefix(128)))
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let name = fieldPath(context.codingPath)
            throw MediaError.invalid(name.isEmpty ? "The body" : String(name.prefix(128)), "has the wrong type.")
        } catch DecodingError.dataCorrupted(let context)
            where !context.codingPath.isEmpty || (try? JSONSerialization.jsonObject(with: data)) != nil
        {
            // JSON, but a number its field cannot hold (1.5 or 1e30 for an integer); some decoders name no field.
            let name = fieldPath(context.codingPath)
            throw MediaError.invalid(
                name.isEmpty ? unfitNumber(in: data) ?? "A number in the body" : String(name.prefix(128)),
                "has the wrong type.")
        } catch {
            throw MediaError("MalformedJSON", "The request body is not a valid JSON object.")
        }
    }

    /// Whether a string in `data` spells NUL (`\u0000`); a raw NUL is not JSON, and the decoder refuses it.
    private static func holdsEscapedNUL(_ data: Data) -> Bool {
        var index = data.startIndex
        while let slash = data[index...].firstIndex(of: UInt8(ascii: "\\")) {
            let escape = data[(slash + 1)...].prefix(5)
            if escape.elementsEqual("u0000".utf8) { return true }
            // Past the escaped character: `\\u0000` is a backslash and the text u0000.
            index = min(slash + 2, data.endIndex)
        }
        return false
    }

    /// A field's path as the body spells it: `Policy.statements[0].actions`.
    private static func fieldPath(_ path: [any CodingKey]) -> String {
        path.reduce(into: "") { name, key in
            if let index = key.intValue, key.stringValue.hasPrefix("Index ") {
                name += "[\(index)]"
            } else {
                name += (name.isEmpty ? "" : ".") + key.stringValue
            }
        }
    }

    /// The one top-level field holding a number no integer field can take (a fraction, or beyond 64 bits), if only
    /// one does.
    private static func unfitNumber(in data: Data) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        let unfit = object.filter { _, value in
            guard let number = value as? NSNumber else { return false }
            return Int64(exactly: number.doubleValue) == nil || number.stringValue.contains(".")
        }
        return unfit.count == 1 ? unfit.first.map { String($0.key.prefix(128)) } : nil
    }
}
