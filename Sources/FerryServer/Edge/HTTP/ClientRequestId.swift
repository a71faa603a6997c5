import HTTPTypes

extension HTTPField.Name {
    /// The id a client gives its call, the same on every retry (AWS SDKs and Ferry's client send it).
    static let amzSDKInvocationId = Self("amz-sdk-invocation-id")!
}

extension HTTPFields {
    /// The id the client gave its call (`amz-sdk-invocation-id`), when it is a plausible one: 1–64 letters, digits,
    /// `-`, `.` or `_`. Anything else is ignored rather than logged.
    var clientRequestId: String? {
        guard let value = self[.amzSDKInvocationId], (1...64).contains(value.utf8.count),
            value.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2D || byte == 0x2E || byte == 0x5F
            })
        else { return nil }
        return value
    }
}
