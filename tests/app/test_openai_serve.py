"""The OpenAI endpoint's lifecycle as serving clients meet it: clients that leave (non-streamed requests that time
out, hundreds of streams dropped at once) free the live lane and a fresh request is answered; /metrics reads the
lane's state when scraped (zero when idle), ends counted by finished_reason, promtool-clean; the routes clients
probe (/health, /version, /tokenize, /detokenize, /v1/models/{id}) and OpenAI's error object for every /v1 error.

The lifecycle tests run `python -m app --backend sim --pace 1` (its live steps take their simulated time, so a
256-token request lasts seconds) with the official `openai` client; the tokenizer's shapes on the real model."""
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.server import live_server


def scrape(url: str) -> dict:
    """/metrics as {name: value}, a labelled family summed over its labels but `finished_reason` kept apart."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.name + (f"{{{s.labels['finished_reason']}}}" if "finished_reason" in s.labels else "")
            out[key] = out.get(key, 0) + s.value
    return out


def get(url: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post(url: str, path: str, body) -> tuple[int, dict]:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_idle(url: str, timeout: float = 30) -> dict:
    """/metrics once the lane holds nothing (running and waiting zero); fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(url)
        if m["batch_lanes:num_requests_running"] == 0 and m["batch_lanes:num_requests_waiting"] == 0:
            return m
        assert time.monotonic() < deadline, {k: v for k, v in m.items() if "num_requests" in k}
        time.sleep(0.05)


def live_requests(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/live", timeout=30) as r:
        return json.loads(r.read())["requests"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with live_server("--backend", "sim", "--pace", "1", data_dir=tmp_path_factory.mktemp("serve")) as url:
        yield url


def client(url: str, timeout: float = 60) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=timeout)


def fresh_answer(url: str) -> openai.types.Completion:
    return client(url, timeout=20).completions.create(model="simulator", prompt="fresh", max_tokens=4)


def thirty_who_give_up(ask) -> list[openai.APITimeoutError]:
    """`ask(i)` for i = 0..29 at once, each on its own thread: the timeouts they raised."""
    failures = []

    def one(i: int) -> None:
        try:
            ask(i)
        except openai.APITimeoutError as e:
            failures.append(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return failures


@pytest.mark.slow
def test_thirty_timed_out_non_streamed_clients_free_the_lane_and_a_fresh_request_is_answered(sim):
    before = scrape(sim)
    impatient = client(sim, timeout=0.5)
    failures = thirty_who_give_up(lambda i: impatient.completions.create(
        model="simulator", prompt=f"abandoned {i}", max_tokens=256, extra_body={"ignore_eos": True}))
    assert len(failures) == 30                              # every client gave up after 0.5 s
    after = wait_idle(sim)                                  # the lane let them all go
    assert after["batch_lanes:request_success_total{abort}"] - before["batch_lanes:request_success_total{abort}"] == 30
    ended = [s for s in live_requests(sim) if s["prompt"].startswith("abandoned ")]
    assert len(ended) == 30 and {s["stop"] for s in ended} == {"cancelled"}
    assert all(s["tokens"] < 256 for s in ended)             # none ran to its end
    answer = fresh_answer(sim)
    assert answer.usage.completion_tokens == 4 and answer.choices[0].finish_reason == "length"


@pytest.mark.slow
def test_timed_out_non_streamed_clients_free_the_lane_under_eventlet_too(tmp_path):
    with live_server("--backend", "sim", "--pace", "1", "--async-mode", "eventlet", data_dir=tmp_path) as url:
        impatient = client(url, timeout=0.5)
        for i in range(3):
            with pytest.raises(openai.APITimeoutError):
                impatient.completions.create(model="simulator", prompt=f"abandoned {i}", max_tokens=256,
                                             extra_body={"ignore_eos": True})
        assert wait_idle(url)["batch_lanes:request_success_total{abort}"] == 3
        assert fresh_answer(url).usage.completion_tokens == 4


@pytest.mark.slow
def test_two_hundred_streams_dropped_at_once_leave_a_true_queue_count_and_a_fresh_request_is_answered(sim):
    u = urlparse(sim)
    body = json.dumps({"model": "simulator", "messages": [{"role": "user", "content": "dropped"}], "max_tokens": 256,
                       "stream": True, "ignore_eos": True}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    socks = []
    for _ in range(200):
        s = socket.create_connection((u.hostname, u.port), timeout=30)
        s.sendall(request)
        socks.append(s)
    statuses = [s.recv(12)[9:12] for s in socks]            # each answered at once: 200 (its role chunk) or 429
    assert set(statuses) <= {b"200", b"429"} and b"200" in statuses
    for s in socks:
        s.close()
    wait_idle(sim)                                          # the queue count came back to zero by itself
    answer = fresh_answer(sim)
    assert answer.usage.completion_tokens == 4


@pytest.mark.slow
def test_an_idle_server_reads_zero_running_right_after_its_last_request(sim):
    """Issue 20: /metrics kept reporting one running request after the last one finished (the gauges were the
    last step's, taken while the finishing request still held its slot)."""
    fresh_answer(sim)
    m = scrape(sim)
    assert m["batch_lanes:num_requests_running"] == 0 and m["batch_lanes:num_requests_waiting"] == 0
    assert m["batch_lanes:kv_cache_usage_perc"] == 0


@pytest.mark.slow
def test_metrics_count_ends_by_reason_and_the_new_families(sim):
    before = scrape(sim)
    c = client(sim)
    c.completions.create(model="simulator", prompt="short", max_tokens=3)
    stream = c.chat.completions.create(model="simulator", messages=[{"role": "user", "content": "left"}],
                                       max_tokens=200, stream=True, extra_body={"ignore_eos": True})
    next(iter(stream))                                      # its role chunk: it is on the lane
    stream.close()
    after = wait_idle(sim)
    delta = {k: after[k] - before.get(k, 0) for k in after}
    assert delta["batch_lanes:request_success_total{length}"] == 1
    assert delta["batch_lanes:request_success_total{abort}"] == 1
    assert delta["batch_lanes:e2e_request_latency_seconds_count"] == 1          # an abort is not a served request
    assert delta["batch_lanes:request_generation_tokens_sum"] == 3
    assert delta["batch_lanes:request_prompt_tokens_count"] == 1
    for name in ("request_prefill_time_seconds_count", "request_decode_time_seconds_count",
                 "request_inference_time_seconds_count"):
        assert delta[f"batch_lanes:{name}"] == 1, name
    assert delta["batch_lanes:iteration_tokens_total_count"] >= 3
    assert delta["batch_lanes:request_time_per_output_token_seconds_count"] == 1           # 3 tokens: a decode
    assert delta["batch_lanes:request_params_max_tokens_sum"] == 3 + 200                # both asked
    assert delta["batch_lanes:request_num_preemptions_count"] == 1
    assert delta["batch_lanes:request_prefill_kv_computed_tokens_count"] == 1
    assert delta["batch_lanes:prompt_tokens_cached_total"] == delta["batch_lanes:prefix_cache_hits_total"]
    assert delta["batch_lanes:prefix_cache_queries_total"] >= delta["batch_lanes:prefix_cache_hits_total"] >= 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_promtool_finds_nothing_but_the_colon_and_vllms_own_iteration_tokens_total(sim):
    """vLLM's names have a colon, and its `iteration_tokens_total` histogram a `_total` promtool frowns on: kept, so a
    vLLM dashboard reads them unchanged. Nothing else."""
    with urllib.request.urlopen(f"{sim}/metrics", timeout=30) as r:
        text = r.read()
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
    problems = [line for line in (out.stdout + out.stderr).decode().splitlines()
                if line.strip() and "should not contain ':'" not in line
                and not line.startswith("batch_lanes:iteration_tokens_total non-counter")]
    assert problems == []


@pytest.mark.slow
def test_the_routes_clients_probe(sim):
    assert get(sim, "/health") == (200, b"")
    status, body = get(sim, "/version")
    assert status == 200 and json.loads(body)["version"]
    status, body = get(sim, "/v1/models/simulator")
    assert status == 200 and json.loads(body)["id"] == "simulator"
    with pytest.raises(openai.NotFoundError) as e:
        client(sim).models.retrieve("gpt-9")
    assert e.value.code == "model_not_found" and "does not exist" in e.value.message
    status, body = post(sim, "/tokenize", {"prompt": "four words right here"})
    assert status == 200 and body["count"] == len(body["tokens"]) and body["max_model_len"] > 0
    status, body = post(sim, "/tokenize", {"prompt": 5})
    assert status == 400 and body["error"]["param"] == "prompt"
    status, body = post(sim, "/detokenize", {"tokens": "x"})
    assert status == 400 and body["error"]["param"] == "tokens"


@pytest.mark.slow
@pytest.mark.parametrize("method, path, status", [("GET", "/v1/nowhere", 404), ("POST", "/v1/models", 405),
                                                  ("GET", "/v1/completions", 405)])
def test_every_v1_error_is_openais_error_object(sim, method, path, status):
    req = urllib.request.Request(f"{sim}{path}", method=method, data=b"{}" if method == "POST" else None)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == status
    error = json.loads(e.value.read())["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"


def test_a_body_over_the_limit_under_v1_is_a_413_in_openais_object(make_app):
    app = make_app({"BACKEND": "sim"})
    r = app.test_client().post("/v1/completions", data=b"x" * (app.config["MAX_CONTENT_LENGTH"] + 1),
                               content_type="application/json")
    assert r.status_code == 413 and r.get_json()["error"]["code"] == "request_entity_too_large"
    assert app.test_client().get("/nowhere").get_json() == {"error": "not found"}   # the page's own shape stays


def test_health_is_503_while_the_model_loads_and_when_the_engine_loop_died(make_app, monkeypatch):
    import app.runs.loader
    from engine.worker.model import ModelLoadError

    gate = threading.Event()

    def slow_load(*args, **kwargs):
        gate.wait(60)
        raise ModelLoadError("the test ends the load here")
    monkeypatch.setattr(app.runs.loader, "load_model", slow_load)
    loading = make_app()
    try:
        r = loading.test_client().get("/health")
        assert r.status_code == 503 and r.get_json()["error"]["code"] == "model_loading"
    finally:
        gate.set()
    served = make_app({"BACKEND": "sim"})
    served.extensions["worker"].stop()
    r = served.test_client().get("/health")
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "engine_dead"


@pytest.fixture(scope="module")
def real(model_server):
    """The session's real-model server (tests/conftest.py's shared_server): the test counts only its own requests."""
    return model_server


@pytest.mark.model
def test_thirty_timed_out_non_streamed_clients_free_the_real_models_lane(real):
    c = client(real)
    model = c.models.list().data[0].id
    impatient = client(real, timeout=0.5)
    failures = thirty_who_give_up(lambda i: impatient.chat.completions.create(
        model=model, messages=[{"role": "user", "content": f"Story {i}"}], max_tokens=256,
        extra_body={"ignore_eos": True}))
    assert len(failures) == 30
    after = wait_idle(real, timeout=60)
    assert after["batch_lanes:request_success_total{abort}"] >= 30
    ended = [q for q in live_requests(real) if q["prompt"].startswith("Story ")]
    assert len(ended) == 30 and {q["stop"] for q in ended} == {"cancelled"} and all(q["tokens"] < 256 for q in ended)
    answer = c.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                       timeout=30, extra_body={"ignore_eos": True})
    assert answer.usage.completion_tokens == 4


@pytest.mark.model
def test_tokenize_and_detokenize_follow_vllms_shapes_on_the_real_model(real, smol):
    text = "The quick brown fox"
    status, plain = post(real, "/tokenize", {"prompt": text, "add_special_tokens": False})
    assert status == 200 and plain["tokens"] == smol.tokenizer.encode(text, add_special_tokens=False)
    assert plain["count"] == len(plain["tokens"]) and plain["max_model_len"] > plain["count"]
    messages = [{"role": "user", "content": text}]
    status, chat = post(real, "/tokenize", {"messages": messages})
    assert status == 200 and chat["tokens"] == smol.encode_messages(messages)
    status, back = post(real, "/detokenize", {"tokens": plain["tokens"]})
    assert status == 200 and back["prompt"] == text
    status, bad = post(real, "/detokenize", {"tokens": [10 ** 9]})
    assert status == 400 and bad["error"]["param"] == "tokens"


def test_metrics_prefix_vllm_serves_vllms_own_names_and_a_bad_prefix_is_refused(make_app):
    from app.cli import build_parser, config_from_args

    app = make_app({"BACKEND": "sim", "METRICS_PREFIX": "vllm"})
    text = app.test_client().get("/metrics").get_data(as_text=True)
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert {"vllm:num_requests_running", "vllm:request_success_total", "vllm:iteration_tokens_total_count"} <= names
    assert not any(n.startswith("batch_lanes:") for n in names)
    parser = build_parser()
    assert config_from_args(parser.parse_args(["--metrics-prefix", "vllm"]), parser)["METRICS_PREFIX"] == "vllm"
    with pytest.raises(SystemExit):
        config_from_args(parser.parse_args(["--metrics-prefix", "9 bad"]), parser)


def test_the_live_lanes_counts_come_from_its_state_and_return_to_zero_when_every_request_left():
    """The wedge of issue 21: the queue count was a counter kept beside the lane, recomputed only after a step that
    computed something, so cancellations drained by a step with nothing left to compute left it stuck (429 for
    good). Now: handed in and not heard to end, less those holding a slot, after each step or drain."""
    from engine import Engine
    from engine.spec import RequestSpec
    from app.runs.live_driver import LiveDriver

    engine = Engine(None)
    driver = LiveDriver(2, lambda: engine, lambda: {"ready": True}, lambda: None, lambda fn, *a, **k: fn(*a, **k),
                        threading.Lock())
    assert driver.ready()
    heard = []
    specs = [RequestSpec(id=f"r{i}", prompt="x", max_new_tokens=50, prompt_ids=(1, 2, 3)) for i in range(10)]
    for spec in specs:
        driver.submit(spec, lambda record, cell, rid=spec.id: heard.append((rid, record is None)))
    assert driver.queued() == 10 and driver.load()["running"] == 0       # waiting in the inbox
    driver.step()
    load = driver.load()
    assert (load["running"], load["waiting"]) == (2, 8) and load["kv_used"] > 0
    for spec in specs:
        driver.cancel(spec.id)
    driver.step()                                                      # drains the cancellations; nothing to compute
    assert driver.load() == {"running": 0, "waiting": 0, "kv_used": 0, "kv_capacity": driver.load()["kv_capacity"]}
    assert sorted(i for i, cancelled in heard if cancelled) == sorted(s.id for s in specs)


def test_an_internal_error_under_v1_is_a_500_in_openais_object(make_app):
    app = make_app({"BACKEND": "sim"})

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")
    app.extensions["live"].open = broken
    deadline = time.monotonic() + 30
    while app.test_client().get("/health").status_code != 200:       # the simulator is ready at once, nearly
        assert time.monotonic() < deadline
        time.sleep(0.02)
    r = app.test_client().post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert r.status_code == 500
    assert r.get_json()["error"]["type"] == "server_error" and set(r.get_json()["error"]) == {"message", "type",
                                                                                              "param", "code"}


def test_the_grafana_dashboard_queries_only_what_metrics_serves_under_either_prefix(make_app):
    """docs/grafana-dashboard.json (ours): every metric its panels and variables name, with its `prefix` variable set
    to either prefix, is a series /metrics serves; every label it groups or filters by is one those series carry."""
    import re
    from pathlib import Path

    dashboard = json.loads((Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    assert len(queries) > 20 and all("${prefix}:" in q for q in queries)
    for prefix in ("batch_lanes", "vllm"):
        app = make_app({"BACKEND": "sim", "METRICS_PREFIX": prefix})
        text = app.test_client().get("/metrics").get_data(as_text=True)
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        served = {s.name for s in samples}
        labels = {k for s in samples for k in s.labels}
        named = set()
        for q in queries:
            q = q.replace("${prefix}", prefix)
            named |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*:[A-Za-z0-9_:]*", q))
            grouped = {g.strip() for by in re.findall(r"by \(([^)]*)\)", q) for g in by.split(",")}
            filtered = set(re.findall(r"([A-Za-z_]+)=~?\"", q)) | set(re.findall(r", ([a-z_]+)\)$", q))
            assert grouped | filtered <= labels, (q, (grouped | filtered) - labels)
        assert named and named <= served, named - served
    assert {"vllm:request_time_per_output_token_seconds_bucket", "vllm:num_requests_waiting_by_reason",
            "vllm:prompt_tokens_cached_total", "vllm:request_num_preemptions_count", "vllm:cache_config_info",
            "vllm:kv_cache_usage_perc"} <= served
    assert {s.labels["engine"] for s in samples} == {"0"}
