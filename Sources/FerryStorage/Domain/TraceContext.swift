import Foundation
import Tracing

/// The W3C trace context (`traceparent`) that crosses from a request into the work it leaves behind (media jobs,
/// webhook events), kept with that work in the catalog, so that an upload is one trace from the device through the
/// service and on to the app server. Without a tracer (no `--otel-endpoint`) there is no context: nothing is kept
/// and spans cost nothing.
package enum TraceContext {
    /// The `traceparent` of the current span; nil when nothing is traced.
    package static func current() -> String? {
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(ServiceContext.current ?? .topLevel, into: &carrier, using: Carrier())
        return carrier["traceparent"]
    }

    /// Runs `body` in a span named `name` whose parent is the span `traceParent` names (a new trace when nil).
    package static func withSpan<T>(
        _ name: String, parent traceParent: String?, ofKind kind: SpanKind = .internal,
        _ body: () async throws -> T
    ) async throws -> T {
        var context = ServiceContext.topLevel
        if let traceParent {
            InstrumentationSystem.instrument.extract(["traceparent": traceParent], into: &context, using: Carrier())
        }
        return try await Tracing.withSpan(name, context: context, ofKind: kind) { _ in try await body() }
    }

    /// Reads and writes a dictionary of header-like fields.
    private struct Carrier: Injector, Extractor {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }
}
