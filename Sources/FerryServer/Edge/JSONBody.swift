import FerryCore
import Foundation

/// Request bodies of the JSON routes (media, publish, console, part signing), decoded into their Codable types after
/// their shape is checked (``DocumentShape``): a body too deep or too large is `InvalidParameter`, one that is not JSON
/// `MalformedJSON`, a field of the wrong type `InvalidParameter` naming the field. An empty body is `{}`.
enum JSONBody {
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let data = data.isEmpty ? Data("{}".utf8) : data
        do {
            try DocumentShape.checkJSON(data)
        } catch {
            throw MediaError("InvalidParameter", "The request body \(error.reason).")
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            let name = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw MediaError.invalid(name.isEmpty ? "The body" : String(name.prefix(128)), "has the wrong type.")
        } catch {
            throw MediaError("MalformedJSON", "The request body is not a valid JSON object.")
        }
    }
}
