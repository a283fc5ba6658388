"""The OpenAI endpoint in a scale-out deployment over a real Redis: two web processes, two engine workers on the
simulator (each step taking its simulated time), every request served by a worker's live lane (app.live.remote,
app.runs.live_link): answered through either web process, routed to the worker with the fewest in flight,
cancelled on the worker when its client leaves, ended with an error event and [DONE] when its worker dies; traced with
the worker's lane times (app.web.tracing)."""
import json
import os
import signal
import socket
import threading
import time

import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from app.live.remote import INFLIGHT, WORKERS, RemoteLane, alive_key
from app.runs.redis_book import P
from app.runs.worker_book import WorkerBook
from app.settings import DEFAULTS
from tests.kit.otlp import Collector
from tests.kit.scale import Deployment, deployment

pytestmark = pytest.mark.redis
LONG = {"model": "simulator", "messages": [{"role": "user", "content": "Count slowly."}], "max_tokens": 250, "ignore_eos": True, "stream": True}


def wait_until(check, timeout: float = 30, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        time.sleep(0.05)
    return value


def beats(d) -> dict[str, dict]:
    r = d.redis()
    return {w: json.loads(b) for w in r.smembers(WORKERS) if (b := r.get(alive_key(w)))}


def running(d) -> dict[str, int]:
    return {w: b["running"] for w, b in beats(d).items()}


def scrape(url: str) -> dict[str, float]:
    """A web process's /metrics as {name{label values}: value}, model_name left out, the engines summed."""
    text = requests.get(url + "/metrics", timeout=10).text
    out: dict[str, float] = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            key = s.name + "{" + ",".join(v for k, v in s.labels.items() if k not in ("model_name", "engine")) + "}"
            out[key] = out.get(key, 0) + s.value
    return out


def worker_name(proc) -> str:
    return f"worker-{socket.gethostname()}-{proc.pid}"


class SseReader:
    """A streamed chat request (its role chunk comes at once) read on a thread: its `data:` lines as they come."""

    def __init__(self, url: str, body: dict):
        self.response = requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=60)
        assert self.response.status_code == 200, self.response.text
        self.lines: list[str] = []
        self.ended_at: float | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines(decode_unicode=True):
                if line.startswith("data: "):
                    self.lines.append(line[6:])
        except (requests.RequestException, AttributeError):   # closed by the test (urllib3 drops its file)
            pass
        self.ended_at = time.monotonic()

    def chunks(self) -> list[dict]:
        return [json.loads(x) for x in self.lines if x != "[DONE]"]


@pytest.fixture(scope="module")
def otlp():
    """A trace collector the module's web processes export their spans to (tests/kit/otlp.py)."""
    with Collector() as collector:
        yield collector


@pytest.fixture(scope="module")
def d(tmp_path_factory, otlp):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")   # spans leave within 50 ms, not 5 s
        with deployment(tmp_path_factory.mktemp("v1scale"), webs=2, workers=2,
                        web_args=("--otlp-traces-endpoint", otlp.endpoint)) as d:
            wait_until(lambda: sum(b["ready"] for b in beats(d).values()) == 2, what="two live lanes ready")
            yield d


def test_both_web_processes_answer_streamed_and_whole_requests(d):
    for url, _ in d.webs:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=30)
        whole = client.completions.create(model="simulator", prompt="Hello", max_tokens=5,
                                          extra_body={"ignore_eos": True})
        assert whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 5
        chunks = list(client.chat.completions.create(model="simulator", messages=[{"role": "user", "content": "Hi"}],
                                                     max_tokens=4, stream=True, stream_options={"include_usage": True},
                                                     extra_body={"ignore_eos": True}))
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert chunks[-1].usage.completion_tokens == 4
        tokens = requests.post(url + "/tokenize", json={"prompt": "Hello there"}, timeout=10).json()
        assert tokens["count"] == len(tokens["tokens"]) > 0
    names = sorted(beats(d))
    for url, _ in d.webs:   # the Live view's snapshot: one worker's lane (the first by default), every worker named
        first = requests.get(url + "/api/live", timeout=10).json()
        assert first["worker"] == names[0] and [w["worker"] for w in first["workers"]] == names
        assert first["ready"] and first["slots"] == DEFAULTS["LIVE_SLOTS"] and len(first["requests"]) >= 1
        capture = requests.get(url + "/api/live/capture?last=2", timeout=10).json()
        assert len(capture["requests"]) == 2   # the first worker's finished requests, as a workload
    # /metrics on either web process: the workers' live lanes summed (each beat carries its worker's numbers)
    wait_until(lambda: all(scrape(url).get("batch_lanes:request_success_total{length}") == 4 for url, _ in d.webs),
               timeout=10, what="four served requests on both web processes' /metrics")
    for url, _ in d.webs:
        m = scrape(url)
        assert m["batch_lanes:generation_tokens_total{}"] == 2 * (5 + 4)
        assert m["batch_lanes:num_requests_running{}"] == 0 and m["batch_lanes:e2e_request_latency_seconds_count{}"] == 4


def test_a_web_process_traces_a_request_with_its_workers_lane_times(d, otlp):
    url = d.webs[1][0]
    r = requests.post(url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 6}, timeout=30,
                      headers={"X-Request-Id": "traced-1", "traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"})
    assert r.status_code == 200
    span = wait_until(lambda: next((s for s in otlp.spans if s["attributes"]["gen_ai.request.id"] == "traced-1"), None),
                      timeout=10, what="the request's span")
    a = span["attributes"]
    assert span["trace_id"] == "ab" * 16 and a["gen_ai.usage.completion_tokens"] == 6
    lanes = [RemoteLane(d.redis()).call("snapshot", worker=w) for w in beats(d)]   # each worker's Live view
    m = next(s for lane in lanes for s in lane["requests"] if s["id"] == "traced-1")   # the DoneEvent crossed Redis
    assert a["gen_ai.latency.time_in_queue"] == pytest.approx((m["admitted_ms"] - m["arrival_ms"]) / 1000)
    assert a["gen_ai.latency.time_in_model_decode"] == pytest.approx((m["finish_ms"] - m["first_token_ms"]) / 1000)


def test_requests_spread_over_both_workers_and_a_disconnect_cancels_on_the_worker(d):
    streams = [SseReader(d.webs[i % 2][0], LONG) for i in range(4)]
    try:
        assert wait_until(lambda: running(d) if sorted(running(d).values()) == [2, 2] else None,
                          what="two requests on each worker")
        assert sorted(int(v) for v in d.redis().hgetall(INFLIGHT).values()) == [2, 2]
    finally:
        for s in streams:
            s.response.close()   # the clients leave mid-stream
    wait_until(lambda: set(running(d).values()) == {0}, timeout=10, what="both lanes emptied by the cancels")
    wait_until(lambda: {int(v) for v in d.redis().hgetall(INFLIGHT).values()} <= {0}, timeout=10,
               what="nothing in flight")
    # a non-streamed client that leaves: its request leaves the worker too
    host, port = d.webs[1][0].removeprefix("http://").split(":")
    body = json.dumps({"prompt": "Count slowly.", "max_tokens": 250, "ignore_eos": True}).encode()
    conn = socket.create_connection((host, int(port)))
    conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    wait_until(lambda: sum(running(d).values()) == 1, what="the non-streamed request running")
    conn.close()
    wait_until(lambda: sum(running(d).values()) == 0, timeout=10, what="the non-streamed request cancelled")


def test_a_worker_killed_mid_stream_ends_its_streams_with_an_error_and_done(tmp_path):
    with deployment(tmp_path, webs=2, workers=2) as d:
        wait_until(lambda: sum(b["ready"] for b in beats(d).values()) == 2, what="two live lanes ready")
        body = {**LONG, "max_tokens": 120}
        streams = [SseReader(d.webs[i][0], body) for i in range(2)]
        wait_until(lambda: sorted(running(d).values()) == [1, 1], what="one request on each worker")
        first = min(worker_name(p) for p in d.workers)      # the first stream went to it (ties go by name)
        answers = []   # a non-streamed request, on the same worker (a tie again)
        whole = threading.Thread(target=lambda: answers.append(requests.post(
            d.webs[0][0] + "/v1/completions", json={"prompt": "Hi", "max_tokens": 120, "ignore_eos": True}, timeout=60)))
        whole.start()
        wait_until(lambda: running(d).get(first) == 2, what="the non-streamed request on the first worker")
        victim = next(p for p in d.workers if worker_name(p) == first)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        streams[0].thread.join(timeout=20)      # a bound against a hang, not a timing check
        assert streams[0].ended_at is not None, "the dead worker's stream did not end"
        print(f"the dead worker's stream ended {streams[0].ended_at - killed_at:.1f} s after the kill")
        assert streams[0].lines[-1] == "[DONE]"
        assert "error" in json.loads(streams[0].lines[-2]), streams[0].lines[-3:]
        whole.join(timeout=20)
        assert answers[0].status_code == 500 and answers[0].json()["error"]["code"] == "engine_error", answers[0].text
        streams[1].thread.join(timeout=60)
        assert streams[1].lines[-1] == "[DONE]", (running(d), d.logs())
        assert [c["choices"][0]["finish_reason"] for c in streams[1].chunks()][-1] == "length"
        for url, _ in d.webs:   # the next requests go to the survivor
            r = requests.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "ignore_eos": True},
                              timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == 3
        assert list(beats(d)) == [w for w in map(worker_name, d.workers) if w != first]
        for url, _ in d.webs:   # its two failed requests counted, on every web process, under its engine
            assert scrape(url)["batch_lanes:request_success_total{error}"] == 2


def test_a_worker_with_live_work_takes_from_the_run_queue_without_blocking(tmp_path):
    """take(0) (the live lane has work) must not wait in BLMOVE: a one-second wait between live steps."""
    d = Deployment(tmp_path)
    d.start_redis()
    try:
        r = d.redis()
        book = WorkerBook(r, "w1", 10, 5.0)
        assert book.take(0) == (None, [])
        r.rpush(P + "queue", "R1")
        r.hset(P + "job:R1", mapping={"status": "cancelled"})
        assert book.take(0) == (None, [])
        stats = r.info("commandstats")
        assert stats["cmdstat_lmove"]["calls"] == 2 and "cmdstat_blmove" not in stats
    finally:
        d.stop()


@pytest.mark.model
def test_the_real_model_answers_through_a_web_process_with_text_and_logprobs(tmp_path):
    with deployment(tmp_path, webs=1, workers=1, worker_args=()) as d:
        wait_until(lambda: any(b["ready"] for b in beats(d).values()), timeout=300, what="the live lane ready")
        client = openai.OpenAI(base_url=d.webs[0][0] + "/v1", api_key="none", max_retries=0, timeout=120)
        model = client.models.list().data[0].id
        ask = dict(model=model, prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=2)
        whole = client.completions.create(**ask)
        streamed = list(client.completions.create(**ask, stream=True))
        text = "".join(c.choices[0].text for c in streamed if c.choices)
        assert whole.choices[0].text == text and text.strip()
        lp = whole.choices[0].logprobs
        assert len(lp.tokens) == whole.usage.completion_tokens == 8
        assert all(p <= 0 for p in lp.token_logprobs) and all(len(t) >= 1 for t in lp.top_logprobs)
        echoed = client.completions.create(**{**ask, "max_tokens": 1}, echo=True)
        assert echoed.choices[0].logprobs.token_logprobs[0] is None   # the first prompt token has no logprob
        schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                  "required": ["name", "age"]}
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
        person = client.chat.completions.create(model=model, max_tokens=40, temperature=0, response_format=fmt, messages=[
            {"role": "user", "content": "Describe a person as JSON."}]).choices[0].message.content
        assert set(json.loads(person)) >= {"name", "age"}   # the schema's text crossed Redis; the worker compiled it
        bad = requests.post(d.webs[0][0] + "/v1/completions", json={"prompt": "hi", "structured_outputs": {"regex": "("}})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "structured_outputs"


@pytest.mark.browser
def test_the_live_view_on_a_web_process_shows_each_workers_lane_by_its_picker(tmp_path, browser):
    from tests.kit.browser import ARTIFACTS, watched_context, watched_page
    with deployment(tmp_path, webs=1, workers=2) as d:
        wait_until(lambda: sum(b["ready"] for b in beats(d).values()) == 2, what="two live lanes ready")
        names = sorted(beats(d))
        context = watched_context(browser, viewport={"width": 1280, "height": 900})
        page = watched_page(context)
        page.goto(f"{d.webs[0][0]}/live")
        page.wait_for_function("() => window.__live && window.__live.lane && window.__live.lane.ready")
        assert page.evaluate("() => [...document.querySelectorAll('#live-worker option')].map((o) => o.value)") == names
        assert page.evaluate("() => window.__live.lane.worker") == names[0]
        streams = [SseReader(d.webs[0][0], {**LONG, "max_tokens": 40,
                                            "messages": [{"role": "user", "content": f"prompt {i}"}]}) for i in range(2)]
        page.wait_for_function("() => window.__live.requests.some((q) => q.prompt === 'prompt 0')")
        assert all(q["prompt"] != "prompt 1" for q in page.evaluate("() => window.__live.requests"))  # the other lane's
        page.select_option("#live-worker", names[1])
        page.wait_for_function(f"() => window.__live.lane.worker === {names[1]!r}")
        page.wait_for_function("() => window.__live.requests.some((q) => q.prompt === 'prompt 1')")
        assert all(q["prompt"] != "prompt 0" for q in page.evaluate("() => window.__live.requests"))
        page.wait_for_function("() => window.__live.stepsDrawn > 0")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "scale-live-worker.png"))
        for s in streams:
            s.thread.join(timeout=60)
        context.close()
