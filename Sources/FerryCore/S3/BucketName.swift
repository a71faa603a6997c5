/// Bucket names as requests give them.
public enum BucketName {
    /// Whether `name` could name a bucket: 1 to 255 bytes of ASCII letters, digits, `.`, `-` and `_` (every name S3
    /// ever allowed; a new bucket's name is held to S3's stricter rules). Anything else names none: a NUL in
    /// particular, which SQLite's text binding would cut the name at, so that `ferry-media<NUL>` would be read as
    /// `ferry-media` past every check made on the whole name.
    public static func isPlausible(_ name: some StringProtocol) -> Bool {
        (1...255).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default: false
                }
            }
    }
}
