"""OpenTelemetry spans of the serving API, as vLLM makes them: where an OTLP endpoint is configured
(`--otlp-traces-endpoint`, else $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), each completion request (POST
/v1/chat/completions, /v1/completions) is one span `llm_request` of kind SERVER, a child of the client's
`traceparent` where it sends one, exported in batches over OTLP: gRPC, or HTTP/protobuf when
$OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is `http/protobuf` (vLLM's rule; the endpoint is taken as given).

Its attributes are vLLM's `gen_ai.*` (vllm/tracing.py's SpanAttributes): the request's id (its id on the live lane,
as the access line and /api/live name it), the model, max_tokens, temperature, top_p, n, prompt and completion
tokens; its end-to-end latency and TTFT on this process's clock (as the access line times them); its time in queue,
in the model's prefill, decode and both (inference), on the lane clock, from its choices' DoneEvents (the step
records' moments, app.live.gateway.summary_times: over several choices, from the first admission and the first
token to the last token; the simulator's are simulated ms). Beside them, OpenTelemetry's HTTP names: method, path,
status code. A 5xx, or a stream that ended with an engine error, has status ERROR; a 4xx is the client's and leaves
it unset, as OpenTelemetry's HTTP conventions ask of a server span. With no endpoint nothing here runs and the
opentelemetry packages are never imported (they are in requirements.txt, and optional at import).

This module knows Flask's request hooks and OpenTelemetry, and reads what the handler leaves (app.web.requestlog's
facts, `describe`); nothing of the engine.
"""
import os
import time
from importlib.util import find_spec

from flask import Flask, current_app, g, request

from . import requestlog

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
PROTOCOLS = ("grpc", "http/protobuf")
TRACED = ("/v1/chat/completions", "/v1/completions")
TRACE_HEADERS = ("traceparent", "tracestate")
SPAN_NAME = "llm_request"        # vLLM's
SCOPE = "batch_lanes.serving"    # the instrumentation scope (vLLM's: vllm.llm_engine)
DESCRIBED = "batch_lanes.span"   # the environ key `describe` fills


def endpoint(flag: str | None) -> str | None:
    """The OTLP endpoint: the flag's, else $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's, else None (no tracing)."""
    return flag or os.environ.get(ENDPOINT_ENV) or None


def protocol() -> str:
    return os.environ.get(PROTOCOL_ENV, "grpc")


def unusable() -> str | None:
    """Why spans cannot be exported here (a missing package, an unknown protocol), or None: asked at start, without
    importing the packages."""
    if protocol() not in PROTOCOLS:
        return f"${PROTOCOL_ENV} is {protocol()!r}; known: {', '.join(PROTOCOLS)}"
    module = "opentelemetry.exporter.otlp.proto." + ("grpc" if protocol() == "grpc" else "http")
    if find_spec("opentelemetry") is None or find_spec("opentelemetry.sdk") is None or find_spec(module) is None:
        return "the opentelemetry packages are not installed: pip install -r requirements.txt"
    return None


def init_app(app: Flask) -> None:
    """Spans for `app`'s completion requests, if its OTLP_TRACES_ENDPOINT is set (its provider in
    `app.extensions["tracing"]`: `force_flush()` exports what is pending)."""
    if not app.config["OTLP_TRACES_ENDPOINT"]:
        return
    app.extensions["tracing"] = provider(app.config["OTLP_TRACES_ENDPOINT"])
    app.before_request(_begin)
    app.after_request(_end)


def provider(url: str):
    """A tracer provider that exports to `url` in batches, over the protocol $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL names
    (its batching as the OTEL_BSP_* variables say; its service.name $OTEL_SERVICE_NAME's, else batch-lanes)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol() == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    else:
        raise ValueError(f"${PROTOCOL_ENV} is {protocol()!r}; known: {', '.join(PROTOCOLS)}")
    made = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "batch-lanes")}))
    made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return made


def describe(model: str, params, bodies: list) -> None:
    """What the handler knows of a request it accepted: the model it reports, its checked parameters
    (app.web.openai_params.Params) and its choices' bodies, whose lane times arrive with their DoneEvents."""
    request.environ[DESCRIBED] = (model, params, bodies)


def _begin() -> None:
    if request.method == "POST" and request.path in TRACED:
        g.span_started = (time.time_ns(), time.monotonic())


def _end(response):
    if not hasattr(g, "span_started"):
        return response
    carrier = {h: request.headers[h] for h in TRACE_HEADERS if h in request.headers}
    http = {"http.request.method": request.method, "url.path": request.path,
            "http.response.status_code": response.status_code}
    tracer = current_app.extensions["tracing"].get_tracer(SCOPE)
    found, described, started = requestlog.facts(), request.environ.get(DESCRIBED), g.span_started
    request_id = g.request_id
    response.call_on_close(lambda: _export(tracer, carrier, started, request_id, http, found, described))
    return response


def _export(tracer, carrier: dict, started: tuple[int, float], request_id: str, http: dict, found: dict,
            described: tuple | None) -> None:
    """The request's span, once its response closed (a stream: once its last byte left)."""
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    wall_ns, mono = started
    elapsed = time.monotonic() - mono
    attributes = {"gen_ai.request.id": request_id, **http, "gen_ai.latency.e2e": elapsed}
    if "first_token_at" in found:
        attributes["gen_ai.latency.time_to_first_token"] = found["first_token_at"] - mono
    if described is not None:
        model, params, bodies = described
        attributes.update({"gen_ai.response.model": model, "gen_ai.request.max_tokens": params.max_tokens,
                           "gen_ai.request.temperature": params.temperature, "gen_ai.request.top_p": params.top_p,
                           "gen_ai.request.n": params.n, "gen_ai.usage.prompt_tokens": found.get("prompt_tokens"),
                           "gen_ai.usage.completion_tokens": found.get("output_tokens"),
                           **lane_seconds([b.times for b in bodies])})
    span = tracer.start_span(SPAN_NAME, context=TraceContextTextMapPropagator().extract(carrier),
                             kind=SpanKind.SERVER, start_time=wall_ns,
                             attributes={k: v for k, v in attributes.items() if v is not None})
    if http["http.response.status_code"] >= 500 or found.get("error"):
        span.set_status(Status(StatusCode.ERROR, found.get("error") or f"HTTP {http['http.response.status_code']}"))
    span.end(end_time=wall_ns + int(elapsed * 1e9))


def lane_seconds(times: list[dict]) -> dict[str, float]:
    """A request's time in queue, in prefill, decode and inference (vLLM's gen_ai.latency.*, seconds), from its
    choices' lane times (ms since each one's arrival): from the first admission to the first token any choice wrote
    to the last token of all. A phase no choice reached is left out."""
    def earliest(key: str) -> float | None:
        got = [t[key] for t in times if t.get(key) is not None]
        return min(got) if got else None
    queue, first = earliest("queue_ms"), earliest("ttft_ms")
    last = max((t["latency_ms"] for t in times if t.get("latency_ms") is not None), default=None)
    phases = {"gen_ai.latency.time_in_queue": (0, queue), "gen_ai.latency.time_in_model_prefill": (queue, first),
              "gen_ai.latency.time_in_model_decode": (first, last),
              "gen_ai.latency.time_in_model_inference": (queue, last)}
    return {name: round((b - a) / 1000, 6) for name, (a, b) in phases.items() if a is not None and b is not None}
