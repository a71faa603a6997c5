/// A value that carries a secret (a key's secret, a session token, a private key, a password) and prints, debug-prints
/// and dumps without it.
///
/// A conforming type gives its `description` and ``redactedFields``, the fields a mirror shows with each secret
/// replaced by `<redacted>`. `debugDescription` is the `description`, and the mirror shows only ``redactedFields``, so
/// `dump`, `String(reflecting:)` and the interpolation of a container reveal no more than `print` does.
public protocol SecretRedacting: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The fields a mirror shows: every secret replaced by `<redacted>` (or `nil` when it is absent).
    var redactedFields: KeyValuePairs<String, Any> { get }
}

extension SecretRedacting {
    /// Same as `description`: no secret.
    public var debugDescription: String { description }

    /// A mirror of ``redactedFields`` only.
    public var customMirror: Mirror { Mirror(self, children: redactedFields, displayStyle: .struct) }
}
