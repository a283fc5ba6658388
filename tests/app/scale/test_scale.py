"""Scale-out over a real Redis: web processes share rooms, engine workers share the run queue, and each fault
(a web process or an engine worker killed with -9, Redis restarting or missing) ends as docs/scale-out.md says.
The simulator paces its steps in real time (60 ms and up) here, so runs last long enough to join mid-way;
one test runs the real model."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.kit.server import ROOT, get_health, free_port
from tests.kit.scale import deployment, ticks

pytestmark = pytest.mark.redis

LONG = {"slots": 2, "requests": [{"id": f"R{i}", "prompt": "Count slowly.", "max_new_tokens": 40, "ignore_eos": True}
                                 for i in range(3)]}
MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())


def wait_until(check, timeout: float = 60, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} not reached in {timeout} s"
        time.sleep(0.05)
    return value


def submit(client, workload=MIXED) -> str:
    client.emit("submit", {"workload": workload})
    return client.wait_for("run_queued", timeout=30)["run_id"]


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_a_run_submitted_on_web_a_is_watched_tick_by_tick_on_web_b_running_eventlet(tmp_path):
    with deployment(tmp_path, web_args=((), ("--async-mode", "eventlet"))) as d:
        a, b = d.client(0), d.client(1)
        run_id = submit(a, LONG)
        a.wait_for("tick", run_id)
        wait_until(lambda: len(a.named("tick", run_id)) >= 5, what="five ticks on A")
        b.emit("watch", {"run_id": run_id})                    # a late spectator on the other web process
        done_a, done_b = a.wait_for("run_finished", run_id), b.wait_for("run_finished", run_id)
        steps = ticks(a, run_id)
        assert steps == list(range(1, len(steps) + 1)) and ticks(b, run_id) == steps   # each tick once, none lost
        replayed = [t["t"] for t in b.named("tick", run_id) if t.get("replay")]
        assert 5 <= len(replayed) < len(steps)                 # a backlog first, then live ticks
        assert done_a["metrics"] == done_b["metrics"] and done_a["metrics"]["continuous"]["tokens"] == 120
        status, stored = get_json(f"{d.webs[1][0]}/api/runs/{run_id}")   # stored runs: readable from every web
        assert status == 200 and stored["metrics"] == done_a["metrics"]


def test_both_engine_workers_take_runs_and_every_spectator_sees_every_tick_once(tmp_path):
    with deployment(tmp_path) as d:
        submitters = [d.client(i % 2) for i in range(4)]
        spectators = [d.client(i % 2) for i in range(10)]
        run_ids = [submit(c, LONG) for c in submitters]
        for i, s in enumerate(spectators):
            s.emit("watch", {"run_id": run_ids[i % 4]})
        finished = {run_id: c.wait_for("run_finished", run_id, timeout=120) for c, run_id in zip(submitters, run_ids)}
        for i, s in enumerate(spectators):
            run_id = run_ids[i % 4]
            assert s.wait_for("run_finished", run_id, timeout=60)["metrics"] == finished[run_id]["metrics"]
            assert ticks(s, run_id) == ticks(submitters[run_ids.index(run_id)], run_id)
        took = {d.redis().hget(f"batch-lanes:job:{run_id}", "worker") for run_id in run_ids}
        assert len(took) == 2, took


def test_killing_a_web_process_mid_run_its_clients_rejoin_on_another_losing_no_tick(tmp_path):
    with deployment(tmp_path, workers=1) as d:
        a = d.client(0)
        run_id = submit(a, LONG)
        wait_until(lambda: len(a.named("tick", run_id)) >= 3, what="three ticks")
        d.webs[0][1].kill()                                    # kill -9 web A, the submitter's
        again = d.client(1)                                    # the page reconnects (to web B) and rejoins
        again.emit("watch", {"run_id": run_id})
        done = again.wait_for("run_finished", run_id, timeout=60)
        steps = ticks(again, run_id)
        assert steps == list(range(1, len(steps) + 1)) and len(steps) > 40
        assert set(ticks(a, run_id)) < set(steps) and done["metrics"]["continuous"]["tokens"] == 120


def test_killing_an_engine_worker_mid_run_ends_its_run_and_the_queue_goes_to_the_survivor(tmp_path):
    with deployment(tmp_path) as d:
        clients = [d.client(i % 2) for i in range(3)]
        run_ids = [submit(c, LONG) for c in clients]           # two run, the third waits
        wait_until(lambda: all(c.named("tick", r) for c, r in zip(clients[:2], run_ids[:2])), what="two running")
        r = d.redis()
        victim = r.hget(f"batch-lanes:job:{run_ids[0]}", "worker")
        pid = int(victim.rsplit("-", 1)[1])
        os.kill(pid, 9)
        error = clients[0].wait_for("run_error", run_ids[0], timeout=40)
        assert error["code"] == "failed" and "engine worker running it stopped" in error["message"]
        for c, run_id in zip(clients[1:], run_ids[1:]):        # the survivor finishes its run and the queued one
            assert c.wait_for("run_finished", run_id, timeout=120)["metrics"]["static"]["tokens"] == 120
        assert r.hget(f"batch-lanes:job:{run_ids[2]}", "worker") != victim
        wait_until(lambda: get_health(d.webs[0][0]).get("workers") == 1, timeout=30, what="one worker left")


def test_redis_restarting_shows_on_healthz_and_the_processes_reconnect(tmp_path):
    with deployment(tmp_path, workers=1) as d:
        web = d.webs[0][0]
        d.redis_proc.kill()
        d.redis_proc.wait()
        status, health = get_json(f"{web}/healthz")
        assert status == 503 and health["redis"] == "unreachable" and health["ready"] is False
        d.start_redis()                                        # the same port, empty
        wait_until(lambda: (get_health(web) or {}).get("ready"), timeout=60, what="ready again")
        c = d.client(1)
        run_id = submit(c)
        assert c.wait_for("run_finished", run_id, timeout=60)["metrics"]["continuous"]["tokens"] == 29


def test_a_client_keeps_its_rate_limit_across_web_processes(tmp_path):
    with deployment(tmp_path, workers=1, web_args=("--limit", "submits_per_minute=2")) as d:
        me = {"auth": {"client": "student-0042"}}
        a = d.client(0, **me)
        run_id = submit(a)
        a.wait_for("run_finished", run_id, timeout=60)
        a.emit("submit", {"workload": {"requests": []}})      # refused as invalid, but counted
        a.wait_for("run_error")
        b = d.client(1, **me)                                  # the same page, reconnected elsewhere
        b.emit("submit", {"workload": MIXED})
        assert b.wait_for("run_error")["code"] == "rate_limited"
        other = d.client(1)
        assert submit(other)


def test_redis_unreachable_at_start_is_a_clear_error_not_a_hang(tmp_path):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    for module, args in (("app", ["--port", str(free_port())]), ("app.engine_worker", ["--backend", "sim"])):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", module, "--message-queue", closed, "--data", str(tmp_path), *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "cannot reach Redis at " + closed in out.stderr, out.stderr
        assert time.monotonic() - t0 < 30


def test_a_web_process_never_imports_torch(tmp_path):
    with deployment(tmp_path, webs=0, workers=0) as d:
        code = ("import sys; from app.web.factory import create_app; "
                f"app = create_app({{'MESSAGE_QUEUE': {d.url!r}, 'DATA_DIR': {str(tmp_path)!r}}}); "
                "app.test_client().get('/healthz'); print('torch' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "False", out.stderr


def test_runs_stored_in_redis_replay_from_any_web_process(tmp_path):
    with deployment(tmp_path, workers=1, worker_args=("--backend", "sim", "--store", "redis"),
                    web_args=("--store", "redis")) as d:
        a = d.client(0)
        run_id = submit(a)
        done = a.wait_for("run_finished", run_id, timeout=60)
        d.redis().delete(f"batch-lanes:log:{run_id}")          # as when the book's copy expires (60 s)
        late = d.client(1)
        late.emit("watch", {"run_id": run_id})
        assert late.wait_for("run_finished", run_id)["metrics"] == done["metrics"]
        assert ticks(late, run_id) == ticks(a, run_id)
        assert not (d.data / "runs.sqlite3").exists()


@pytest.mark.model
def test_the_real_model_runs_on_an_engine_worker_and_streams_to_two_web_processes(tmp_path):
    with deployment(tmp_path, workers=1, worker_args=()) as d:
        a, b = d.client(0), d.client(1)
        run_id = submit(a)
        b.emit("watch", {"run_id": run_id})
        done_a, done_b = a.wait_for("run_finished", run_id, timeout=300), b.wait_for("run_finished", run_id)
        assert done_a["metrics"] == done_b["metrics"] and ticks(a, run_id) == ticks(b, run_id) == list(range(1, 16))
        text = {t["t"]: t["lanes"] for t in a.named("tick", run_id)}
        assert text == {t["t"]: t["lanes"] for t in b.named("tick", run_id)}
        assert a.named("run_started", run_id)[0]["model"].startswith("SmolLM2")
