import FerryCore
import Foundation

/// The W3C trace (`traceparent`) an upload's requests carry, so that one upload is one trace from the device through
/// the service's requests, into its media jobs and on to the app server's webhooks, in whatever tracing backend the
/// service exports to.
///
/// A ``ResumableUploadTask`` starts a trace of its own unless one is current (``current``): set one around related
/// calls (creating a video, uploading its file) to make them one trace. Every request of the SDK sends `traceparent`
/// with the current trace's id and a new span id.
public struct UploadTrace: Sendable, Hashable, CustomStringConvertible {
    /// The trace id: 32 lowercase hexadecimal digits, not all zero.
    public let traceId: String

    /// A new trace with a random id.
    public init() {
        var generator = SystemRandomNumberGenerator()
        traceId = Self.hex(count: 16, using: &generator)
    }

    /// The trace with this id; nil unless it is 32 lowercase hexadecimal digits, not all zero.
    public init?(traceId: String) {
        guard traceId.utf8.count == 32, traceId.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
            traceId.contains(where: { $0 != "0" })
        else { return nil }
        self.traceId = traceId
    }

    /// The trace the SDK's requests in this task carry; nil when there is none.
    @TaskLocal public static var current: UploadTrace?

    /// A `traceparent` header value for one request of this trace: version 00, the trace id, a new span id, sampled.
    public func traceparent() -> String {
        var generator = SystemRandomNumberGenerator()
        return "00-\(traceId)-\(Self.hex(count: 8, using: &generator))-01"
    }

    /// The trace id.
    public var description: String { traceId }

    private static func hex(count: Int, using generator: inout some RandomNumberGenerator) -> String {
        while true {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            guard bytes.contains(where: { $0 != 0 }) else { continue }
            return Hex.encode(bytes)
        }
    }
}
