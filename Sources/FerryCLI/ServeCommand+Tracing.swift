import ArgumentParser
import FerryCore
import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

extension ServeCommand {
    /// Bootstraps trace export when `--otel-endpoint` or the standard `OTEL_*` variables ask for it: spans go over
    /// OTLP/HTTP (protobuf) in batches, W3C `traceparent` is read from requests and written into media jobs and
    /// webhooks, and log records carry the current trace and span ids. Returns the exporter's service, which runs
    /// with the server; nil (and nothing bootstrapped) when tracing is off. Only traces: Ferry's metrics are its own
    /// Prometheus registry, its logs go to standard error.
    static func bootstrapTracing(endpoint: String?, environment env: [String: String]) throws -> (any Service)? {
        let asked = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"]
            .contains { !(env[$0] ?? "").isEmpty }
        guard endpoint != nil || asked, env["OTEL_SDK_DISABLED"] != "true" else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "ferry"
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // swift-otel logs each `OTEL_*` variable it reads with its value, and `OTEL_EXPORTER_OTLP_HEADERS` carries
        // the collector's credential: its log says which variable, not what it holds.
        configuration.diagnosticLogger = .custom(
            Logger(label: "swift-otel") { OTelDiagnosticLogHandler(StreamLogHandler.standardError(label: $0)) })
        if let endpoint {
            guard HTTPTarget.components(endpoint) != nil else {
                throw ValidationError("--otel-endpoint must be an http:// or https:// URL (port 1-65535).")
            }
            configuration.traces.otlpExporter.endpoint =
                endpoint.hasSuffix("/") ? endpoint + "v1/traces" : endpoint + "/v1/traces"
        }
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        return backend.service
    }
}

/// swift-otel's diagnostic log on standard error, without the values of the variables it reads or what its errors
/// quote.
struct OTelDiagnosticLogHandler: LogHandler {
    /// The metadata keys under which swift-otel logs a variable's value, and what it replaced.
    static let valueKeys: Set<String> = ["environment_value", "previous_value", "new_value"]
    private var handler: StreamLogHandler

    init(_ handler: StreamLogHandler) { self.handler = handler }

    var metadataProvider: Logger.MetadataProvider? {
        get { handler.metadataProvider }
        set { handler.metadataProvider = newValue }
    }
    var logLevel: Logger.Level {
        get { handler.logLevel }
        set { handler.logLevel = newValue }
    }
    var metadata: Logger.Metadata {
        get { handler.metadata }
        set { handler.metadata = Self.redacted(newValue) }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { handler[metadataKey: key] }
        set { handler[metadataKey: key] = newValue == nil || !Self.valueKeys.contains(key) ? newValue : "<redacted>" }
    }

    func log(event: LogEvent) {
        var event = event
        event.metadata = event.metadata.map(Self.redacted)
        // An export's error may quote a header value (a collector credential with a stray line break): its type only.
        if let error = event.error { event.error = ErrorKind(description: "\(type(of: error))") }
        handler.log(event: event)
    }

    /// An error said by its type alone.
    struct ErrorKind: Error, CustomStringConvertible {
        let description: String
    }

    private static func redacted(_ metadata: Logger.Metadata) -> Logger.Metadata {
        metadata.reduce(into: [:]) { $0[$1.key] = valueKeys.contains($1.key) ? "<redacted>" : $1.value }
    }
}
