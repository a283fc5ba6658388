"""OpenTelemetry spans of the serving API (issue 39, item 3; app.web.tracing): with an OTLP endpoint each completion
request is one `llm_request` span of kind SERVER, as vLLM makes it, carrying vLLM's gen_ai.* attributes, its lane
times equal to the step records' (GET /api/live's moments), a child of the client's `traceparent`; a 5xx or an
engine error in a stream has status ERROR, a 4xx leaves it unset. Received by a collector in this process
(tests/kit/otlp.py), over gRPC (the default) and HTTP/protobuf; the command line and one server subprocess too."""
import json

import pytest

from engine import Engine

from app.cli import build_parser, config_from_args
from app.web import tracing
from tests.kit.faults import fail_from
from tests.kit.otlp import Collector

TRACE_ID, PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
CHAT = {"messages": [{"role": "user", "content": "Tell me about batching."}], "max_tokens": 5, "temperature": 0.5,
        "top_p": 0.9}


@pytest.fixture(scope="module")
def otlp():
    with Collector() as collector:
        yield collector


def traced_app(make_app, otlp: Collector):
    """An app on the simulator exporting its spans to `otlp`, and its test client."""
    app = make_app({"LIVE_SLOTS": 2, "OTLP_TRACES_ENDPOINT": otlp.endpoint}, engine=Engine(None))
    return app, app.test_client()


@pytest.fixture(scope="module")
def served(tmp_path_factory, otlp):
    """One traced app for the tests that only add requests of their own (their ids tell their spans apart)."""
    from app.web.factory import create_app

    app = create_app({"DATA_DIR": tmp_path_factory.mktemp("data"), "LIVE_SLOTS": 2,
                      "OTLP_TRACES_ENDPOINT": otlp.endpoint}, engine=Engine(None))
    yield app, app.test_client()
    app.extensions["worker"].stop()


def post(c, path: str, **kwargs):
    """A request whose response is read and closed, as a server closes it once its last byte left (the span ends
    then)."""
    r = c.post(path, **kwargs)
    r.get_data()
    r.close()
    return r


def span_of(app, otlp: Collector, request_id: str) -> dict:
    """The one span of the request `request_id`, once exported."""
    app.extensions["tracing"].force_flush()
    otlp.wait(1)
    spans = [s for s in otlp.spans if s["attributes"]["gen_ai.request.id"] == request_id]
    assert len(spans) == 1, spans
    return spans[0]


def moments(client, request_id: str) -> dict:
    return next(r for r in client.get("/api/live").json["requests"] if r["id"] == request_id)


def test_a_streamed_chat_is_one_server_span_with_vllms_attributes_and_the_lanes_own_times(served, otlp):
    app, c = served
    r = post(c, "/v1/chat/completions", json={**CHAT, "stream": True, "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in r.get_data(as_text=True).split("\n\n") if line.startswith("data: {")]
    usage, rid = chunks[-1]["usage"], r.headers["X-Request-Id"]
    span = span_of(app, otlp, rid)
    a = span["attributes"]
    assert span["name"] == "llm_request" and span["kind"] == "SPAN_KIND_SERVER" and span["parent_span_id"] == ""
    assert span["status"] == "STATUS_CODE_UNSET" and span["resource"]["service.name"] == "batch-lanes"
    assert a["gen_ai.request.id"] == rid and a["gen_ai.response.model"] == c.get("/v1/models").json["data"][0]["id"]
    assert (a["gen_ai.request.max_tokens"], a["gen_ai.request.temperature"], a["gen_ai.request.top_p"],
            a["gen_ai.request.n"]) == (5, 0.5, 0.9, 1)
    assert (a["gen_ai.usage.prompt_tokens"], a["gen_ai.usage.completion_tokens"]) == (
        usage["prompt_tokens"], usage["completion_tokens"]) and usage["completion_tokens"] == 5
    assert (a["http.request.method"], a["url.path"], a["http.response.status_code"]) == (
        "POST", "/v1/chat/completions", 200)
    m = moments(c, rid)   # the step records' moments on the lane clock, ms
    assert a["gen_ai.latency.time_in_queue"] == pytest.approx((m["admitted_ms"] - m["arrival_ms"]) / 1000)
    assert a["gen_ai.latency.time_in_model_prefill"] == pytest.approx((m["first_token_ms"] - m["admitted_ms"]) / 1000)
    assert a["gen_ai.latency.time_in_model_decode"] == pytest.approx((m["finish_ms"] - m["first_token_ms"]) / 1000)
    assert a["gen_ai.latency.time_in_model_inference"] == pytest.approx((m["finish_ms"] - m["admitted_ms"]) / 1000)
    assert 0 < a["gen_ai.latency.time_to_first_token"] <= a["gen_ai.latency.e2e"]
    assert span["end_ns"] - span["start_ns"] == pytest.approx(a["gen_ai.latency.e2e"] * 1e9, abs=1e3)


def test_a_traceparent_makes_the_span_a_child_and_n_choices_are_one_span(served, otlp):
    app, c = served
    r = post(c, "/v1/completions", json={"prompt": "Hello", "max_tokens": 3, "n": 2},
               headers={"traceparent": f"00-{TRACE_ID}-{PARENT}-01", "X-Request-Id": "mine-7"})
    assert r.status_code == 200
    span = span_of(app, otlp, "mine-7")
    a = span["attributes"]
    assert (span["trace_id"], span["parent_span_id"]) == (TRACE_ID, PARENT) and span["span_id"] != PARENT
    assert a["gen_ai.request.id"] == "mine-7" and a["gen_ai.request.n"] == 2
    assert a["gen_ai.usage.completion_tokens"] == r.json["usage"]["completion_tokens"] == 6
    first, second = moments(c, "mine-7·1"), moments(c, "mine-7·2")   # from the first admission to the last token
    admitted = min(first["admitted_ms"] - first["arrival_ms"], second["admitted_ms"] - second["arrival_ms"])
    last = max(first["finish_ms"] - first["arrival_ms"], second["finish_ms"] - second["arrival_ms"])
    assert a["gen_ai.latency.time_in_queue"] == pytest.approx(admitted / 1000)
    assert a["gen_ai.latency.time_in_model_inference"] == pytest.approx((last - admitted) / 1000)


def test_a_4xx_leaves_the_status_unset_and_an_engine_error_whole_or_streamed_is_an_error(make_app, otlp):
    app, c = traced_app(make_app, otlp)

    def sent(rid: str, path: str, body: dict) -> int:
        return post(c, path, json=body, headers={"X-Request-Id": rid}).status_code
    assert sent("f-ok", "/v1/completions", {"prompt": "Hello", "max_tokens": 2}) == 200   # (the lane exists now)
    assert sent("f-bad", "/v1/completions", {"prompt": "Hello", "temperature": -1}) == 400
    fail_from(app.extensions["worker"].live.lane, 1, "forced live failure")
    assert sent("f-whole", "/v1/completions", {"prompt": "Hello", "max_tokens": 2}) == 500
    streamed = post(c, "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"X-Request-Id": "f-stream"})
    assert streamed.status_code == 200 and "engine_error" in streamed.get_data(as_text=True)
    ok, bad, whole, stream = (span_of(app, otlp, rid) for rid in ("f-ok", "f-bad", "f-whole", "f-stream"))
    assert ok["status"] == bad["status"] == "STATUS_CODE_UNSET"
    assert bad["attributes"]["http.response.status_code"] == 400 and "gen_ai.request.max_tokens" not in bad["attributes"]
    assert (whole["status"], whole["attributes"]["http.response.status_code"]) == ("STATUS_CODE_ERROR", 500)
    assert (stream["status"], stream["status_message"]) == ("STATUS_CODE_ERROR", "engine_error")
    assert stream["attributes"]["http.response.status_code"] == 200   # the status line had gone: the error is an event
    assert "gen_ai.latency.time_in_queue" not in stream["attributes"]   # it never ended on the lane


def test_http_protobuf_goes_where_the_protocol_variable_says(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "lanes-a")
    with Collector("http/protobuf") as otlp:
        made = tracing.provider(otlp.endpoint)   # what an app with this endpoint exports through
        made.get_tracer(tracing.SCOPE).start_span(tracing.SPAN_NAME).end()
        made.shutdown()   # (exports what is pending)
        [span] = otlp.wait(1)
    assert span["name"] == "llm_request" and span["resource"]["service.name"] == "lanes-a"


def test_the_command_line_takes_vllms_flag_or_variable_and_refuses_an_unknown_protocol(monkeypatch):
    parser = build_parser()
    args = ["--backend", "sim"]
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert config_from_args(parser.parse_args(args), parser)["OTLP_TRACES_ENDPOINT"] is None
    flagged = parser.parse_args([*args, "--otlp-traces-endpoint", "http://collector:4317"])
    assert config_from_args(flagged, parser)["OTLP_TRACES_ENDPOINT"] == "http://collector:4317"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env:4317")
    assert config_from_args(parser.parse_args(args), parser)["OTLP_TRACES_ENDPOINT"] == "http://env:4317"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(SystemExit):
        config_from_args(parser.parse_args(args), parser)


@pytest.mark.slow
def test_python_m_app_exports_a_span_per_request_from_its_gunicorn_worker(tmp_path):
    import requests

    from tests.kit.server import live_server
    with Collector() as otlp, live_server("--backend", "sim", "--otlp-traces-endpoint", otlp.endpoint,
                                          data_dir=tmp_path, env={"OTEL_BSP_SCHEDULE_DELAY": "50"}) as url:
        streamed = requests.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, timeout=30,
                                 headers={"traceparent": f"00-{TRACE_ID}-{PARENT}-01"})
        assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
        whole = requests.post(f"{url}/v1/completions", json={"prompt": "Hi", "max_tokens": 3}, timeout=30)
        bad = requests.post(f"{url}/v1/completions", json={"prompt": "Hi", "n": 0}, timeout=30)
        assert (whole.status_code, bad.status_code) == (200, 400)
        spans = {s["attributes"]["gen_ai.request.id"]: s for s in otlp.wait(3)}
    first = spans[streamed.headers["X-Request-Id"]]
    assert (first["name"], first["kind"], first["trace_id"], first["parent_span_id"]) == (
        "llm_request", "SPAN_KIND_SERVER", TRACE_ID, PARENT)
    assert first["attributes"]["gen_ai.usage.completion_tokens"] == 5
    assert spans[whole.headers["X-Request-Id"]]["attributes"]["gen_ai.usage.completion_tokens"] == 3
    assert spans[bad.headers["X-Request-Id"]]["attributes"]["http.response.status_code"] == 400
    assert len({s["trace_id"] for s in spans.values()}) == 3   # no traceparent: a trace of its own
