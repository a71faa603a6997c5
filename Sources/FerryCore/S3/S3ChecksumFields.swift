/// The `Checksum<ALGORITHM>` elements S3 puts beside a part or an object (`ChecksumCRC32`, `ChecksumCRC32C`,
/// `ChecksumCRC64NVME`, `ChecksumSHA1`, `ChecksumSHA256`), keyed by the algorithm's S3 name (`CRC32`, …).
public struct S3ChecksumFields: Hashable, Sendable {
    /// The S3 names of the algorithms these elements can carry, in S3's order.
    public static let algorithmNames = ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]

    /// Base64 checksum values (a composite value ends in `-N`) by algorithm name (`CRC32`, …).
    public var values: [String: String]

    /// Creates fields from values keyed by algorithm name.
    public init(_ values: [String: String] = [:]) {
        self.values = values
    }

    /// Whether no checksum is present.
    public var isEmpty: Bool { values.isEmpty }

    /// The value for an algorithm name such as `CRC32`.
    public subscript(name: String) -> String? {
        get { values[name.uppercased()] }
        set { values[name.uppercased()] = newValue }
    }

    /// A coding key for any element name, used by documents that mix fixed elements with `Checksum*` ones.
    public struct Key: CodingKey {
        /// The element name.
        public var stringValue: String
        /// Always nil.
        public var intValue: Int? { nil }
        /// Creates a key for an element name.
        public init(stringValue: String) { self.stringValue = stringValue }
        /// Integer keys are not used.
        public init?(intValue: Int) { nil }
    }

    /// Reads the `Checksum*` elements from the decoder of the element that holds them.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        var values: [String: String] = [:]
        for name in Self.algorithmNames {
            if let value = try container.decodeIfPresent(String.self, forKey: Key(stringValue: "Checksum" + name)) {
                values[name] = value
            }
        }
        self.values = values
    }

    /// Writes the present values as `Checksum*` elements into the given container.
    public func encode<K: CodingKey>(into container: inout KeyedEncodingContainer<K>) throws {
        for name in Self.algorithmNames {
            if let value = values[name], let key = K(stringValue: "Checksum" + name) {
                try container.encode(value, forKey: key)
            }
        }
    }
}
