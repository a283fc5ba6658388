"""Redis restarting under a running deployment (issue 22): nobody's run is lost in silence.

Two web processes, one engine worker on the paced simulator; a run in flight with its submitter on web 0 and a
spectator on web 1, a second run queued behind it. Redis is killed mid-run and started again on the same port
after 0.1 s or 2 s: with persistence (an append-only file) everything goes on; without it, Redis comes back
empty and the engine worker writes its running run back (docs/scale-out.md). Each test checks that every
watcher got every tick exactly once, that no engine worker exited, and what became of the queued run."""
import pytest

from tests.kit.scale import deployment, ticks
from tests.kit.server import get_health
from tests.app.scale.test_scale import LONG, MIXED, get_json, submit, wait_until

pytestmark = pytest.mark.redis


def every_tick_once(client, run_id: str, steps: int) -> None:
    got = ticks(client, run_id)
    assert got == list(range(1, steps + 1)), f"missing {sorted(set(range(1, steps + 1)) - set(got))}, " \
                                             f"{len(got) - len(set(got))} twice"


def run_in_flight(d):
    """The submitter (web 0), a spectator (web 1) a few ticks in, a queued run (web 1): all before Redis blinks."""
    a, b, c = d.client(0), d.client(1), d.client(1)
    run_id = submit(a, LONG)
    wait_until(lambda: len(a.named("tick", run_id)) >= 3, what="three ticks")
    b.emit("watch", {"run_id": run_id})
    queued = submit(c, MIXED)
    wait_until(lambda: len(b.named("tick", run_id)) >= 6, what="the spectator's ticks")
    return a, b, c, run_id, queued


@pytest.mark.parametrize("down_s", [0.1, 2.0, 12.0])   # 12 s: longer than a heartbeat lasts (ALIVE_S)
def test_with_persistence_a_redis_restart_mid_run_loses_no_tick_and_the_queued_run_runs(tmp_path, down_s):
    with deployment(tmp_path, workers=1, persist=True) as d:
        a, b, c, run_id, queued = run_in_flight(d)
        d.restart_redis(down_s)
        done_a, done_b = a.wait_for("run_finished", run_id, timeout=90), b.wait_for("run_finished", run_id, timeout=30)
        status, stored = get_json(f"{d.webs[1][0]}/api/runs/{run_id}")
        assert status == 200 and done_a["metrics"] == done_b["metrics"] == stored["metrics"]
        steps = max(len(records) for records in stored["records"].values())
        every_tick_once(a, run_id, steps)
        every_tick_once(b, run_id, steps)
        assert not a.named("run_error", run_id) and not b.named("run_error", run_id)
        assert c.wait_for("run_finished", queued, timeout=90)["metrics"]["continuous"]["tokens"] == 29
        assert all(w.poll() is None for w in d.workers), d.logs()
        assert all(get_health(url)["delivery"] == "ok" for url, _ in d.webs)   # green, and delivering


@pytest.mark.parametrize("down_s", [0.1, 2.0])
def test_without_persistence_the_running_run_is_written_back_and_the_lost_queued_run_is_said(tmp_path, down_s):
    with deployment(tmp_path, workers=1, web_args=((), ("--async-mode", "eventlet"))) as d:   # web 1: eventlet
        a, b, c, run_id, queued = run_in_flight(d)
        d.restart_redis(down_s)
        done_a, done_b = a.wait_for("run_finished", run_id, timeout=90), b.wait_for("run_finished", run_id, timeout=30)
        assert done_a["metrics"] == done_b["metrics"] and done_a["metrics"]["continuous"]["tokens"] == 120
        status, stored = get_json(f"{d.webs[0][0]}/api/runs/{run_id}")
        steps = max(len(records) for records in stored["records"].values())
        every_tick_once(a, run_id, steps)
        every_tick_once(b, run_id, steps)
        lost = c.wait_for("run_error", queued, timeout=30)       # Redis forgot the queue: said, not silence
        assert lost["code"] == "failed" and "lost" in lost["message"]
        assert all(w.poll() is None for w in d.workers), d.logs()
        resubmitter = d.client(1)                                # and the deployment takes runs again
        again = submit(resubmitter, MIXED)
        assert resubmitter.wait_for("run_finished", again, timeout=60)["metrics"]["continuous"]["tokens"] == 29


def test_stored_runs_replay_from_sqlite_while_redis_is_down(tmp_path):
    with deployment(tmp_path, workers=1) as d:
        a = d.client(0)
        run_id = submit(a, MIXED)
        done = a.wait_for("run_finished", run_id, timeout=60)
        d.redis_proc.kill()
        d.redis_proc.wait()
        web = d.webs[1][0]
        status, stored = get_json(f"{web}/api/runs/{run_id}")
        assert status == 200 and stored["metrics"] == done["metrics"]
        late = d.client(1)
        late.emit("watch", {"run_id": run_id})
        assert late.wait_for("run_finished", run_id, timeout=30)["metrics"] == done["metrics"]
        assert ticks(late, run_id) == ticks(a, run_id)
