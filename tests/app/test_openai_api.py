"""The OpenAI-compatible endpoint with the official `openai` client against `python -m app` on the real model:
texts token-exact with solo greedy generate(), concurrent streams batched on the live lane, usage, stop
strings, seeded sampling that ignores its batch mates, OpenAI error bodies naming the param, SSE framing byte
for byte, a client that goes away freeing its slot, a full queue (429), and /metrics matching what was served."""
import http.client
import json
import socket
import threading
import time
import urllib.request
from urllib.parse import urlparse

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.report.metrics import request_times
from tests.kit.reference import solo_generate
from tests.kit.server import live_server

PROMPTS = ["What is the capital of France?", "Say hi.", "Name three colours.", "What is 2 + 2?",
           "Write one word about the sea.", "Who wrote Hamlet?", "Count to five.", "What colour is grass?"]


@pytest.fixture(scope="module")
def server(model_server):
    """The session's real-model server (tests/conftest.py's shared_server): these tests read only their own requests."""
    return model_server


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client) -> str:
    return client.models.list().data[0].id


def chat(client, model, prompt, stream=False, **kw):
    """The text, finish reason and usage of one chat completion (streamed or whole)."""
    messages = [{"role": "user", "content": prompt}]
    if not stream:
        r = client.chat.completions.create(model=model, messages=messages, **kw)
        return r.choices[0].message.content, r.choices[0].finish_reason, r.usage
    text, finish, usage = [], None, None
    for chunk in client.chat.completions.create(model=model, messages=messages, stream=True,
                                                stream_options={"include_usage": True}, **kw):
        if chunk.choices:
            text.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    return "".join(text), finish, usage


def live(server) -> dict:
    with urllib.request.urlopen(f"{server}/api/live", timeout=30) as r:
        return json.loads(r.read())


def reference(smol, prompt: str, max_tokens: int) -> tuple[str, int, int]:
    ids = smol.encode_prompt(prompt)
    out = solo_generate(smol, ids, max_tokens, smol.eos_ids)
    return smol.decode(out, skip_special_tokens=True), len(ids), len(out)


@pytest.mark.model
def test_whole_and_streamed_completions_equal_solo_greedy_generate_with_right_usage(client, model, smol):
    text, prompt_tokens, tokens = reference(smol, PROMPTS[0], 24)
    for stream in (False, True):
        got, finish, usage = chat(client, model, PROMPTS[0], stream=stream, max_tokens=24, temperature=0)
        assert got == text and finish == ("stop" if tokens < 24 else "length")
        assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (prompt_tokens, tokens,
                                                                                      prompt_tokens + tokens)
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=5, temperature=0)
    ids = smol.tokenizer.encode("The capital of France is")
    assert r.choices[0].text == smol.decode(solo_generate(smol, ids, 5, smol.eos_ids), skip_special_tokens=True)


@pytest.mark.model
def test_characters_split_across_tokens_arrive_whole(client, model, smol):
    prompt = "Repeat exactly: \U0001F431\U0001F436\U0001F42D h\u00e9llo \u65e5\u672c\u8a9e \u2713"
    text, _, _ = reference(smol, prompt, 40)
    for stream in (False, True):
        assert chat(client, model, prompt, stream=stream, max_tokens=40, temperature=0)[0] == text


@pytest.mark.model
def test_eight_concurrent_streams_share_steps_and_each_equals_solo_generate(client, model, server, smol):
    prompts = [f"{p} ({i})" for i, p in enumerate(PROMPTS)]
    results = {}

    def one(p):
        results[p] = chat(client, model, p, stream=True, max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
    threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for p in prompts:
        ids = smol.encode_prompt(p)
        assert results[p][0] == smol.decode(solo_generate(smol, ids, 24), skip_special_tokens=True)
        assert results[p][2].completion_tokens == 24
    snap = live(server)
    ids = {s["id"] for s in snap["requests"] if s["prompt"] in prompts}
    assert len(ids) == 8
    together = max(len(ids & {c["request"] for c in r["slots"]}) for r in snap["records"])
    assert together == 8                                    # one step computed all eight: they were batched


@pytest.mark.model
def test_stop_strings_cut_the_text_whole_and_streamed(client, model):
    for stream in (False, True):
        text, finish, _ = chat(client, model, PROMPTS[0], stream=stream, max_tokens=24, temperature=0, stop=[" Paris"])
        assert text == "The capital of France is" and finish == "stop"


@pytest.mark.model
def test_a_seeded_sampled_request_writes_the_same_text_whatever_it_is_batched_with(client, model):
    kw = dict(max_tokens=20, temperature=1.0, top_p=0.9, seed=7, extra_body={"ignore_eos": True})
    alone = chat(client, model, PROMPTS[2], **kw)[0]
    results = {}

    def one(i, p, **extra):
        results[i] = chat(client, model, p, **extra)[0]
    threads = [threading.Thread(target=one, args=(0, PROMPTS[2]), kwargs=kw)] + [
        threading.Thread(target=one, args=(i, PROMPTS[i]), kwargs=dict(max_tokens=12 + i, temperature=0.8))
        for i in range(3, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert results[0] == alone and len(alone) > 0


@pytest.mark.model
@pytest.mark.parametrize("change, param", [
    ({"messages": []}, "messages"), ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": "many"}, "max_tokens"), ({"max_completion_tokens": 10 ** 6},
                                                                                "max_completion_tokens"),
    ({"temperature": 3}, "temperature"), ({"top_p": 0}, "top_p"), ({"n": 99}, "n"), ({"seed": "s"}, "seed"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"), ({"stream": "yes"}, "stream"), ({"logprobs": "yes"}, "logprobs"),
    ({"stream_options": {"include_usage": "yes"}}, "stream_options"), ({"ignore_eos": 1}, "ignore_eos")])
def test_every_bad_field_is_a_400_naming_its_param(server, model, change, param):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **change}
    status, error = post(server, "/v1/chat/completions", body)
    assert status == 400 and error["error"]["param"] == param and error["error"]["type"] == "invalid_request_error"


@pytest.mark.model
def test_a_wrong_model_is_a_404_and_a_bad_completions_prompt_a_400(server, model):
    status, error = post(server, "/v1/chat/completions", {"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]})
    assert status == 404 and error["error"]["code"] == "model_not_found" and error["error"]["param"] == "model"
    status, error = post(server, "/v1/completions", {"model": model, "prompt": 5})
    assert status == 400 and error["error"]["param"] == "prompt"


def post(server, path: str, body) -> tuple[int, dict]:
    req = urllib.request.Request(f"{server}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def raw_stream(server, body: dict) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    u = urlparse(server)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    return conn, conn.getresponse()


@pytest.mark.model
def test_the_sse_stream_is_framed_byte_for_byte(server, model):
    conn, r = raw_stream(server, {"model": model, "messages": [{"role": "user", "content": PROMPTS[1]}],
                                  "max_tokens": 6, "temperature": 0, "stream": True,
                                  "stream_options": {"include_usage": True}})
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
    body = r.read()
    conn.close()
    assert body.endswith(b"data: [DONE]\n\n")
    events = body.split(b"\n\n")
    assert events[-1] == b"" and all(e.startswith(b"data: ") and b"\n" not in e for e in events[:-1])
    chunks = [json.loads(e[6:]) for e in events[:-2]]
    assert len({c["id"] for c in chunks}) == 1 and {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1
    assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.model
def test_a_client_that_disconnects_mid_stream_frees_its_slot_within_a_step(server, model):
    u = urlparse(server)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Tell me a long story."}],
                       "max_tokens": 200, "temperature": 0, "stream": True, "ignore_eos": True}).encode()
    sock = socket.create_connection((u.hostname, u.port), timeout=120)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    lines, seen = sock.makefile("rb"), 0
    while seen < 5:                                         # five pieces of text, then the client goes away
        line = lines.readline()
        seen += line.startswith(b"data: ") and b'"content": "' in line and b'"content": ""' not in line
    sock.shutdown(socket.SHUT_RDWR)
    lines.close()
    sock.close()
    deadline = time.monotonic() + 30
    while True:
        mine = [s for s in live(server)["requests"] if s["prompt"] == "Tell me a long story."][-1]
        if mine["status"] == "finished":
            break
        assert time.monotonic() < deadline, mine
        time.sleep(0.05)
    assert mine["stop"] == "cancelled" and mine["tokens"] <= seen + 3   # at most the steps in flight


@pytest.mark.model
def test_metrics_parse_and_count_what_was_served(server, client, model):
    def counters() -> dict:
        with urllib.request.urlopen(f"{server}/metrics", timeout=30) as r:
            text = r.read().decode()
        out = {}                                            # each family summed over its labels (finished_reason)
        for s in (s for f in text_string_to_metric_families(text) for s in f.samples):
            out[s.name] = out.get(s.name, 0) + s.value
        return out
    before = counters()
    usages = [chat(client, model, p, max_tokens=8, temperature=0)[2] for p in PROMPTS[:3]]
    after = counters()
    assert after["batch_lanes:request_success_total"] - before["batch_lanes:request_success_total"] == 3
    assert after["batch_lanes:prompt_tokens_total"] - before["batch_lanes:prompt_tokens_total"] == \
        sum(u.prompt_tokens for u in usages)
    assert after["batch_lanes:generation_tokens_total"] - before["batch_lanes:generation_tokens_total"] == \
        sum(u.completion_tokens for u in usages)
    assert after["batch_lanes:time_to_first_token_seconds_count"] - \
        before["batch_lanes:time_to_first_token_seconds_count"] == 3
    for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "num_preemptions_total",
                 "e2e_request_latency_seconds_count", "request_queue_time_seconds_count",
                 "inter_token_latency_seconds_count"):
        assert f"batch_lanes:{name}" in after
    # the histograms hold the lane metrics' own request times (engine.report.metrics.request_times) of these requests
    served = live(server)["requests"][-3:]
    assert [q["prompt"] for q in served] == PROMPTS[:3]
    for histogram, key in (("request_queue_time_seconds", "queue_ms"), ("time_to_first_token_seconds", "ttft_ms"),
                           ("e2e_request_latency_seconds", "latency_ms")):
        times = [request_times(q["arrival_ms"], q["admitted_ms"], q["first_token_ms"], q["finish_ms"],
                               q["finish_ms"], q["tokens"])[key] for q in served]
        delta = after[f"batch_lanes:{histogram}_sum"] - before[f"batch_lanes:{histogram}_sum"]
        assert delta == pytest.approx(sum(times) / 1000, abs=1e-6) and all(t >= 0 for t in times)


@pytest.mark.slow
def test_a_full_live_queue_answers_429(tmp_path):
    """On the paced simulator: the queue's bookkeeping is the point, not the model's tokens."""
    with live_server("--backend", "sim", "--pace", "0.2", "--limit", "live_slots=1", "--limit", "live_max_waiting=1",
                     data_dir=tmp_path) as url:
        c = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        model = c.models.list().data[0].id
        long = dict(model=model, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=120,
                    extra_body={"ignore_eos": True})

        def until(status: str, count: int) -> None:
            deadline = time.monotonic() + 30
            while sum(s["status"] == status for s in live(url)["requests"]) < count:
                assert time.monotonic() < deadline, live(url)["requests"]
                time.sleep(0.02)
        first = iter(c.chat.completions.create(stream=True, **long))
        next(first)
        until("running", 1)                                 # it holds the one slot
        answers = []
        second = threading.Thread(target=lambda: answers.append(c.chat.completions.create(**long)))
        second.start()                                      # it waits for the slot
        until("waiting", 1)
        with pytest.raises(openai.RateLimitError) as e:
            c.chat.completions.create(**long)
        assert e.value.code == "queue_full" and e.value.response.headers["Retry-After"] == "1"
        first.close()
        second.join(120)
        assert answers[0].usage.completion_tokens == 120      # the waiting one was served once the slot freed


def test_the_api_answers_503_while_the_model_loads(make_app, monkeypatch):
    import app.runs.loader
    from engine.worker.model import ModelLoadError

    gate = threading.Event()

    def slow_load(*args, **kwargs):
        gate.wait(60)
        raise ModelLoadError("the test ends the load here")
    monkeypatch.setattr(app.runs.loader, "load_model", slow_load)
    flask_app = make_app()
    try:
        r = flask_app.test_client().post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 503 and r.get_json()["error"]["code"] == "model_loading"
        assert r.get_json()["error"]["type"] == "server_error"
    finally:
        gate.set()


@pytest.mark.model
def test_the_endpoint_streams_under_eventlet_too(tmp_path, smol):
    text, _, tokens = reference(smol, PROMPTS[3], 12)
    with live_server("--async-mode", "eventlet", data_dir=tmp_path) as url:
        c = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        model = c.models.list().data[0].id
        got, finish, usage = chat(c, model, PROMPTS[3], stream=True, max_tokens=12, temperature=0)
        assert got == text and usage.completion_tokens == tokens
