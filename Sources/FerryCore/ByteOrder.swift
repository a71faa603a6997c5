/// Keys compared as S3 compares them: by their UTF-8 bytes. Swift's `String` comparisons (`==`, `hasPrefix`) follow
/// Unicode canonical equivalence, under which `é` and `e` + U+0301 are one string and `/` + U+0301 is one character,
/// so they would make two keys one and hide a key from its own prefix.
extension StringProtocol {
    /// Whether the UTF-8 bytes of this string begin with those of `prefix`.
    public func hasBytePrefix(_ prefix: some StringProtocol) -> Bool { utf8.starts(with: prefix.utf8) }

    /// Whether this string and `other` have the same UTF-8 bytes.
    public func isByteEqual(to other: some StringProtocol) -> Bool { utf8.elementsEqual(other.utf8) }
}

extension String {
    /// The least string greater, in byte order, than every string that begins with `prefix`: `prefix` with its last
    /// scalar below U+10FFFF raised by one and what follows dropped; nil when every scalar is U+10FFFF (nothing is
    /// greater). UTF-8's byte order is the order of scalars.
    public static func byteOrderSuccessor(of prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            // The next scalar, past the surrogates (which are not scalars).
            if let next = Unicode.Scalar(last.value == 0xD7FF ? 0xE000 : last.value + 1) {
                scalars.append(next)
                var view = String.UnicodeScalarView()
                view.append(contentsOf: scalars)
                return String(view)
            }
        }
        return nil
    }
}
