"""The OpenAI endpoint's accounting, exact (issue 39, items 4 and 5), on the tiny model in this process: a streamed
chat's role chunk leaves with the first token (a client's TTFT is the server's); prompts x n over the documented 32
is a 400 naming `n`; usage and every /metrics counter agree on echo with max_tokens 0, on n > 1 (the prompt counted
once) and on stop strings; logprobs describe exactly the returned text. And requests you can follow (item 3): an
X-Request-Id taken or made, echoed and naming the request on the lane, one access line per request, the stats line."""
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine import Engine

CHAT = {"messages": [{"role": "user", "content": "Say hi."}], "temperature": 0}


@pytest.fixture(scope="module")
def app(tiny, tmp_path_factory):
    from app.web.factory import create_app

    flask_app = create_app({"DATA_DIR": tmp_path_factory.mktemp("exact"), "LIVE_SLOTS": 4}, engine=Engine(tiny))
    yield flask_app
    flask_app.extensions["worker"].stop()


@pytest.fixture
def c(app):
    return app.test_client()


def scrape(c) -> dict:
    """/metrics as {sample name (with `finished_reason` kept apart): value}, summed over other labels."""
    out: dict = {}
    for family in text_string_to_metric_families(c.get("/metrics").get_data(as_text=True)):
        for s in family.samples:
            key = s.name + (f"{{{s.labels['finished_reason']}}}" if "finished_reason" in s.labels else "")
            out[key] = out.get(key, 0) + s.value
    return out


def ended(m: dict) -> float:
    return sum(v for k, v in m.items() if k.startswith("batch_lanes:request_success_total{"))


def counted(c, before: dict, requests: int) -> dict:
    """/metrics' change once `requests` more requests were counted as ended (the worker counts after it streams)."""
    deadline = time.monotonic() + 10
    while ended(after := scrape(c)) < ended(before) + requests:
        assert time.monotonic() < deadline, "the requests' ends were never counted"
        time.sleep(0.01)
    return {k: after[k] - before.get(k, 0) for k in after}


def test_a_streamed_chats_role_chunk_leaves_with_its_first_token(app, c):
    r = c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 5, "stream": True}, buffered=False)
    chunks = (chunk for chunk in r.response if chunk)   # (the first write is empty: the headers leave on acceptance)
    role = json.loads(next(chunks)[6:])
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    latest = list(app.extensions["live"].requests.values())[-1].summary
    assert latest.first_token_ms is not None and latest.tokens >= 1   # the token existed before the role chunk left
    rest = b"".join(chunks).decode()
    assert '"content":' in rest.split("\n\n")[0] and rest.endswith("data: [DONE]\n\n")


def test_prompts_times_n_over_the_documented_32_is_a_400_naming_n(c):
    r = c.post("/v1/completions", json={"prompt": ["a", "b", "c", "d", "e"], "n": 8, "max_tokens": 1})
    assert r.status_code == 400 and r.json["error"]["param"] == "n" and "40 choices" in r.json["error"]["message"]
    r = c.post("/v1/completions", json={"prompt": ["a", "b", "c", "d"], "n": 8, "max_tokens": 1})
    assert r.status_code == 200 and len(r.json["choices"]) == 32


def test_echo_with_max_tokens_0_counts_no_generated_token_in_usage_or_metrics(c):
    before = scrape(c)
    r = c.post("/v1/completions", json={"prompt": "Say hi. Name a colour.", "echo": True, "max_tokens": 0,
                                        "logprobs": 1})
    assert r.status_code == 200, r.json
    usage, choice = r.json["usage"], r.json["choices"][0]
    assert usage["completion_tokens"] == 0 and choice["finish_reason"] == "length"
    assert choice["text"] == "Say hi. Name a colour." and len(choice["logprobs"]["tokens"]) == usage["prompt_tokens"]
    d = counted(c, before, 1)
    assert d["batch_lanes:generation_tokens_total"] == 0 and d["batch_lanes:request_generation_tokens_sum"] == 0
    assert d["batch_lanes:prompt_tokens_total"] == usage["prompt_tokens"]
    assert d["batch_lanes:request_success_total{length}"] == 1


def test_n_samples_count_their_prompt_once_in_metrics_as_usage_does(c):
    before = scrape(c)
    r = c.post("/v1/chat/completions", json={**CHAT, "n": 3, "max_tokens": 4, "temperature": 1, "seed": 7})
    assert r.status_code == 200, r.json
    usage = r.json["usage"]
    d = counted(c, before, 3)
    assert d["batch_lanes:prompt_tokens_total"] == usage["prompt_tokens"]
    assert d["batch_lanes:generation_tokens_total"] == usage["completion_tokens"] == 12


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_cuts_text_and_logprobs_alike_and_usage_equals_metrics(c, stream):
    body = {"prompt": "Tell a story.", "max_tokens": 12, "temperature": 0, "logprobs": 0, "ignore_eos": True}
    tokens = c.post("/v1/completions", json=body).json["choices"][0]["logprobs"]["tokens"]
    k = next(k for k in range(2, len(tokens)) if tokens[k].strip() and tokens[k] not in "".join(tokens[:k]))
    before = scrape(c)
    r = c.post("/v1/completions", json={**body, "stop": [tokens[k]], "stream": stream,
                                        **({"stream_options": {"include_usage": True}} if stream else {})})
    if stream:
        chunks = [json.loads(e[6:]) for e in r.get_data(as_text=True).split("\n\n") if e.startswith("data: {")]
        text = "".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"])
        shown = [t for ch in chunks if ch["choices"] and ch["choices"][0]["logprobs"]
                 for t in ch["choices"][0]["logprobs"]["tokens"]]
        usage = chunks[-1]["usage"]
    else:
        choice, usage = r.json["choices"][0], r.json["usage"]
        text, shown = choice["text"], choice["logprobs"]["tokens"]
    assert text == "".join(tokens[:k]) and shown == tokens[:k]       # the stop's token is written, never shown
    assert usage["completion_tokens"] == k + 1
    d = counted(c, before, 1)
    assert d["batch_lanes:generation_tokens_total"] == usage["completion_tokens"]
    assert d["batch_lanes:request_generation_tokens_sum"] == usage["completion_tokens"]
    assert d["batch_lanes:prompt_tokens_total"] == usage["prompt_tokens"]
    assert d["batch_lanes:request_success_total{stop}"] == 1


def test_a_request_id_is_taken_or_made_echoed_named_on_the_lane_and_logged_once(app, c, caplog):
    caplog.set_level("INFO", logger="batch_lanes.access")
    r = c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 3}, headers={"X-Request-Id": "trace-42"})
    assert r.headers["X-Request-Id"] == "trace-42" and r.json["id"] == "chatcmpl-trace-42"
    again = c.post("/v1/chat/completions", json={**CHAT, "max_tokens": 3, "n": 2}, headers={"X-Request-Id": "trace-42"})
    taken = again.headers["X-Request-Id"]
    assert taken.startswith("trace-42~")                                   # in use: made unique, and said so
    made = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2, "stream": True})
    made.get_data()
    for response in (r, again, made):
        response.close()                              # as a server does once the last byte left: the line is written
    live = c.get("/api/live")
    ids = [s["id"] for s in live.json["requests"]]
    live.close()
    assert "trace-42" in ids and {f"{taken}·1", f"{taken}·2"} <= set(ids) and made.headers["X-Request-Id"] in ids
    lines = [rec.fields for rec in caplog.records if rec.name == "batch_lanes.access"]
    first = next(f for f in lines if f["request_id"] == "trace-42")
    assert first["route"] == "/v1/chat/completions" and first["status"] == 200 and first["output_tokens"] == 3
    assert first["prompt_tokens"] == r.json["usage"]["prompt_tokens"] and 0 < first["ttft_ms"] <= first["latency_ms"]
    streamed = next(f for f in lines if f["request_id"] == made.headers["X-Request-Id"])
    assert streamed["stream"] is True and streamed["output_tokens"] == 2
    assert len([f for f in lines if f["route"] == "/api/live"]) == 1


def test_the_stats_line_reads_the_lanes_metrics_and_is_silent_when_idle(app, c):
    from app.live.stats import StatsLine

    metrics = app.extensions["metrics"]
    stats = StatsLine(metrics)
    assert stats.line() is None                                             # idle: no line
    before = scrape(c)
    usage = c.post("/v1/completions", json={"prompt": "Say hi.", "max_tokens": 5, "ignore_eos": True}).json["usage"]
    counted(c, before, 1)
    line = stats.line()
    assert line.startswith("live: prompt ") and "running 0, waiting 0, KV 0.0%" in line, line
    assert stats.last["generation"] - int(before["batch_lanes:generation_tokens_total"]) == usage["completion_tokens"]
    assert stats.line() is None


def test_an_apps_stats_thread_ends_when_its_engine_worker_stops(make_app):
    """The stats line's thread looks each second whether its app's worker stopped, and ends then: an app that is
    done (a test's, a server's at exit) is not held alive by it (a leak that grew pytest past 20 GB in CI)."""
    import threading
    import time

    from app.live.stats import StatsLine

    def stats_threads():
        targets = (getattr(getattr(t, "_target", None), "__func__", None) for t in threading.enumerate())
        return [f for f in targets if f is StatsLine.run]

    before = len(stats_threads())
    app = make_app({"BACKEND": "sim"})
    assert len(stats_threads()) == before + 1
    app.extensions["worker"].stop()
    deadline = time.monotonic() + 5
    while len(stats_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(stats_threads()) == before
