"""A tiny OTLP trace collector in the test's process: it receives what an exporter sends, over gRPC or HTTP/protobuf,
and keeps every span as a plain dict.

    with Collector("grpc") as otlp:            # or Collector("http/protobuf")
        ...  # a server exporting to otlp.endpoint
        span = otlp.wait(1)[0]                  # {"name", "kind", "trace_id", "span_id", "parent_span_id",
                                                #  "start_ns", "end_ns", "status", "status_message", "attributes",
                                                #  "resource"}

`kind` and `status` are OTLP's names ("SPAN_KIND_SERVER", "STATUS_CODE_ERROR"); ids are lowercase hex. This module
knows OTLP's protobuf messages (the opentelemetry-proto package) and nothing of the server it listens to.
"""
import gzip
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2


def value_of(any_value):
    """An OTLP AnyValue as Python: str, bool, int, float, or a list of them."""
    which = any_value.WhichOneof("value")
    if which == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, which) if which else None


def span_dict(span, resource: dict) -> dict:
    return {"name": span.name, "kind": trace_pb2.Span.SpanKind.Name(span.kind), "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(), "parent_span_id": span.parent_span_id.hex(),
            "start_ns": span.start_time_unix_nano, "end_ns": span.end_time_unix_nano,
            "status": trace_pb2.Status.StatusCode.Name(span.status.code), "status_message": span.status.message,
            "attributes": {a.key: value_of(a.value) for a in span.attributes}, "resource": resource}


class Collector:
    """Receives OTLP trace exports on 127.0.0.1 (a free port) until closed; `spans` in the order they came."""

    def __init__(self, protocol: str = "grpc"):
        assert protocol in ("grpc", "http/protobuf"), protocol
        self.protocol, self.spans, self.exports = protocol, [], 0
        self._lock = threading.Lock()

    def record(self, message: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            self.exports += 1
            for resource_spans in message.resource_spans:
                resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
                self.spans += [span_dict(s, resource) for scope in resource_spans.scope_spans for s in scope.spans]

    def wait(self, count: int, timeout: float = 10.0) -> list[dict]:
        """The spans received, once there are at least `count` (AssertionError after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        raise AssertionError(f"the collector got {len(self.spans)} spans in {timeout} s, expected {count}")

    def __enter__(self) -> "Collector":
        if self.protocol == "grpc":
            self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self._server)
            port = self._server.add_insecure_port("127.0.0.1:0")
            self._server.start()
            self.endpoint = f"http://127.0.0.1:{port}"
        else:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
            threading.Thread(target=self._server.serve_forever, daemon=True).start()
            self.endpoint = f"http://127.0.0.1:{self._server.server_port}/v1/traces"
        return self

    def __exit__(self, *exc) -> None:
        if self.protocol == "grpc":
            self._server.stop(grace=None)
        else:
            self._server.shutdown()
            self._server.server_close()


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, collector: Collector):
        self.collector = collector

    def Export(self, request, context):  # noqa: N802 (gRPC's name)
        self.collector.record(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def _handler(collector: Collector):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            collector.record(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args) -> None:   # quiet
            pass
    return Handler
