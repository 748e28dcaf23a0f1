"""An OTLP receiver for the tests: decodes what it is sent with the official protobuf
definitions (PyPI `opentelemetry-proto`), as a collector would, and keeps it.

HTTP: POST /v1/traces, /v1/metrics and /v1/logs, in `application/x-protobuf` or
`application/json`. Anything it cannot decode is answered 400 and kept in `errors`, so a
test fails on an export a real collector would refuse. gRPC: the three OTLP services
(`grpc_url`), through grpcio and the service definitions of the same package."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest, ExportLogsServiceResponse)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

SIGNALS = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
}


class Receiver:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests: dict[str, list] = {path: [] for path in SIGNALS}
        self.content_types: list[str] = []
        self.headers: list[dict] = []
        self.errors: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                path = self.path.split("?")[0]
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                kind = (self.headers.get("content-type") or "").split(";")[0].strip()
                if path not in SIGNALS:
                    receiver._error(f"POST to unknown path {path}")
                    self.send_response(404)
                    self.end_headers()
                    return
                request_type, response_type = SIGNALS[path]
                message = request_type()
                try:
                    if kind == "application/x-protobuf":
                        message.ParseFromString(body)
                    elif kind == "application/json":
                        json_format.ParseDict(otlp_json_ids(json.loads(body)), message)
                    else:
                        raise ValueError(f"content-type {kind!r}")
                except Exception as error:  # noqa: BLE001 - any decode failure fails the test
                    receiver._error(f"{path}: cannot decode ({error})")
                    self.send_response(400)
                    self.end_headers()
                    return
                with receiver.lock:
                    receiver.requests[path].append(message)
                    receiver.content_types.append(kind)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                answer = response_type()
                if kind == "application/json":
                    payload = json_format.MessageToJson(answer).encode()
                else:
                    payload = answer.SerializeToString()
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.grpc_server, grpc_port = self._start_grpc()
        self.grpc_url = f"http://127.0.0.1:{grpc_port}"

    def _start_grpc(self):
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        receiver = self

        def keep(path, response_type):
            def export(request, context):
                with receiver.lock:
                    receiver.requests[path].append(request)
                    receiver.content_types.append("application/grpc")
                    receiver.headers.append(dict(context.invocation_metadata()))
                return response_type()
            return export

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            Export = staticmethod(keep("/v1/traces", ExportTraceServiceResponse))

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            Export = staticmethod(keep("/v1/metrics", ExportMetricsServiceResponse))

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            Export = staticmethod(keep("/v1/logs", ExportLogsServiceResponse))

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server, port

    def _error(self, text):
        with self.lock:
            self.errors.append(text)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.grpc_server.stop(grace=None)

    def clear(self):
        with self.lock:
            for requests in self.requests.values():
                requests.clear()
            self.content_types.clear()
            self.headers.clear()

    # ---- what was received, as plain dicts (the proto's JSON mapping: hex ids) ----

    def spans(self):
        out = []
        with self.lock:
            for request in self.requests["/v1/traces"]:
                for resource_spans in request.resource_spans:
                    resource = attributes(resource_spans.resource.attributes)
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            out.append({
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "kind": span.kind,
                                "attributes": attributes(span.attributes),
                                "events": [e.name for e in span.events],
                                "status": span.status.code,
                                "resource": resource,
                                "scope": scope_spans.scope.name,
                            })
        return out

    def metric_names(self):
        names = set()
        with self.lock:
            for request in self.requests["/v1/metrics"]:
                for resource_metrics in request.resource_metrics:
                    for scope_metrics in resource_metrics.scope_metrics:
                        for metric in scope_metrics.metrics:
                            names.add(metric.name)
        return names

    def metrics(self):
        out = []
        with self.lock:
            for request in self.requests["/v1/metrics"]:
                for resource_metrics in request.resource_metrics:
                    for scope_metrics in resource_metrics.scope_metrics:
                        for metric in scope_metrics.metrics:
                            out.append(MessageToDict(metric))
        return out

    def logs(self):
        out = []
        with self.lock:
            for request in self.requests["/v1/logs"]:
                for resource_logs in request.resource_logs:
                    for scope_logs in resource_logs.scope_logs:
                        for record in scope_logs.log_records:
                            out.append({
                                "body": MessageToDict(record.body),
                                "trace_id": record.trace_id.hex(),
                                "span_id": record.span_id.hex(),
                                "attributes": attributes(record.attributes),
                                "severity": record.severity_text,
                            })
        return out

    def everything_as_text(self):
        """Every received message rendered as text, to look for content that must not be
        there."""
        with self.lock:
            return "\n".join(str(message) for requests in self.requests.values()
                             for message in requests)


ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def otlp_json_ids(value):
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping expects
    base64 for bytes; a collector converts them, and so does this receiver. A value that
    is not hex fails the decode, as a collector would refuse it."""
    if isinstance(value, dict):
        return {key: (base64.b64encode(bytes.fromhex(item)).decode()
                      if key in ID_KEYS and isinstance(item, str) else otlp_json_ids(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [otlp_json_ids(item) for item in value]
    return value


def attributes(pairs):
    out = {}
    for pair in pairs:
        value = pair.value
        which = value.WhichOneof("value")
        if which == "array_value":
            out[pair.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        elif which is not None:
            out[pair.key] = getattr(value, which)
    return out
