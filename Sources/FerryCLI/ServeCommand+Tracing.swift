import ArgumentParser
import FerryCore
import Foundation
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
