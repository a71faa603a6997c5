"""A small OTLP/HTTP trace collector for the tracing test: decodes every ExportTraceServiceRequest (protobuf) posted to
/v1/traces with the OpenTelemetry project's own message definitions (PyPI opentelemetry-proto) and appends one JSON
line per span to OUT: trace id, span id, parent span id (hex), name, kind and attributes.

Usage: otlp_collector.py PORT OUT   (listens on 127.0.0.1:PORT)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PORT = int(sys.argv[1])
OUT = sys.argv[2]


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with open(OUT, "a") as out:
            for resource_spans in request.resource_spans:
                service = {a.key: value(a.value) for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(json.dumps({
                            "service": service,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                        }) + "\n")
        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", PORT), Collector).serve_forever()
