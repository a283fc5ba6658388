"""Fairness and failure on the real model: the bounded queue and its positions, busy, one run per client, the
submit rate limit, cancelling runs nobody watches, spectators keeping a run alive, rejoining by id, an
exception inside a run (and inside one replica of a fleet, on the simulator), and the model loading in the background."""
import threading
import time

import pytest

import app.runs.loader
from app.protocol import RunStatus
from engine import Engine
from tests.kit.faults import fail_from

TINY = {"name": "tiny", "slots": 2, "requests": [{"id": "A", "prompt": "Say hi.", "max_new_tokens": 2},
                                                 {"id": "B", "prompt": "Name a fruit.", "max_new_tokens": 3}]}


class GatedEngine(Engine):
    """The real engine, whose `start` waits until the test opens `gate`: runs stay queued behind it."""

    def __init__(self, lm):
        super().__init__(lm)
        self.gate, self.entered = threading.Event(), threading.Event()

    def start(self, workload, lanes=None):
        self.entered.set()
        assert self.gate.wait(300), "the test never opened the gate"
        return super().start(workload, lanes)


class FaultyEngine(Engine):
    """The real engine; a workload named "boom" raises inside its continuous lane's third step."""

    def start(self, workload, lanes=None):
        run = super().start(workload, lanes)
        if workload.name == "boom":
            fail_from(run.lanes["continuous"], 3, "forced failure in step 3")
        return run


def wait_until(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.fixture
def gated(make_app, smol):
    engine = GatedEngine(smol)
    app = make_app({"MAX_QUEUED_RUNS": 2, "CANCEL_GRACE_S": 0}, engine=engine)
    yield app, engine, app.extensions["book"]
    engine.gate.set()


def submit(probe, workload=TINY) -> str:
    queued, errors = len(probe.named("run_queued")), len(probe.named("run_error"))
    probe.emit("submit", {"workload": workload})
    wait_until(lambda: len(probe.named("run_queued")) > queued or len(probe.named("run_error")) > errors)
    assert len(probe.named("run_error")) == errors, probe.named("run_error")
    return probe.named("run_queued")[-1]["run_id"]


@pytest.mark.model
def test_queue_positions_busy_when_full_and_positions_move_up(gated, connect):
    app, engine, worker = gated
    a, b, c, d = (connect(app) for _ in range(4))
    run_a = submit(a)
    assert engine.entered.wait(60)                       # A is with the engine; the queue is empty
    run_b, run_c = submit(b), submit(c)
    assert [p["position"] for p in b.named("run_queued")] == [1]
    assert [p["position"] for p in c.named("run_queued")] == [2]
    d.emit("submit", {"workload": TINY})
    busy = d.wait_for("run_error")
    assert busy["code"] == "busy" and "limit is 2" in busy["message"] and "try again" in busy["message"]
    assert worker.queue_length() == 2

    engine.gate.set()
    for probe, run_id in ((a, run_a), (b, run_b), (c, run_c)):
        assert probe.wait_for("run_finished", run_id)["metrics"]["static"]["tokens"] == 5
    assert [p["position"] for p in c.named("run_queued", run_c)] == [2, 1]   # moved up when A finished
    d.emit("submit", {"workload": TINY})                 # not busy any more
    assert d.wait_for("run_queued")["position"] == 1


@pytest.mark.model
def test_one_active_run_per_client(gated, connect):
    app, engine, worker = gated
    a = connect(app)
    run_a = submit(a)
    a.emit("submit", {"workload": TINY})
    refused = a.wait_for("run_error")
    assert refused["code"] == "active_run" and refused["run_id"] == run_a and "one run per client" in refused["message"]
    engine.gate.set()
    a.wait_for("run_finished", run_a)
    run_next = submit(a)                                 # finished: the client may submit again
    assert a.wait_for("run_finished", run_next)


@pytest.mark.model
def test_submit_rate_limit_per_client(make_app, connect, smol):
    app = make_app({"SUBMITS_PER_MINUTE": 3, "WATCHES_PER_MINUTE": 2}, engine=Engine(smol))
    a, b = connect(app), connect(app)
    for _ in range(3):
        a.emit("submit", {"workload": {}})
    a.emit("submit", {"workload": TINY})
    errors = a.named("run_error")
    assert [e["code"] for e in errors] == ["invalid", "invalid", "invalid", "rate_limited"]
    assert "3 per minute" in errors[-1]["message"]
    run_b = submit(b)                                    # another client is not limited by a's submits
    for _ in range(3):
        b.emit("watch", {"run_id": run_b})
    assert b.named("run_error")[-1]["code"] == "rate_limited"
    assert b.wait_for("run_finished", run_b)


@pytest.mark.model
def test_a_running_run_nobody_watches_is_cancelled_and_the_engine_serves_the_next(gated, connect):
    app, engine, worker = gated
    a, b = connect(app), connect(app)
    run_a = submit(a)
    assert engine.entered.wait(60)
    a.disconnect()                                       # the lid closes; no spectator
    engine.gate.set()
    run_b = submit(b)
    assert b.wait_for("run_finished", run_b)
    live_a = worker.runs[run_a]
    assert live_a.status is RunStatus.CANCELLED and live_a.log == [] and worker.active == {}
    assert app.extensions["store"].load(run_a) is None and app.extensions["store"].load(run_b) is not None
    b.emit("watch", {"run_id": run_a})
    assert b.wait_for("run_error", run_a)["code"] == "cancelled"


@pytest.mark.model
def test_a_queued_run_nobody_watches_leaves_the_queue_at_once(gated, connect):
    app, engine, worker = gated
    a, b, c = connect(app), connect(app), connect(app)
    run_a = submit(a)
    assert engine.entered.wait(60)
    run_b, run_c = submit(b), submit(c)
    b.disconnect()
    assert [entry.job.run_id for entry in worker.queue] == [run_c]
    assert worker.runs[run_b].status is RunStatus.CANCELLED
    assert [p["position"] for p in c.named("run_queued", run_c)] == [2, 1]
    engine.gate.set()
    a.wait_for("run_finished", run_a)
    c.wait_for("run_finished", run_c)
    assert app.extensions["store"].count() == 2


@pytest.mark.model
def test_a_run_with_a_spectator_goes_on_after_its_submitter_leaves(gated, connect):
    app, engine, worker = gated
    a, spectator = connect(app), connect(app)
    run_a = submit(a)
    assert engine.entered.wait(60)
    spectator.emit("watch", {"run_id": run_a})
    spectator.wait_for("run_started", run_a)
    a.disconnect()
    engine.gate.set()
    finished = spectator.wait_for("run_finished", run_a)
    assert [t["t"] for t in spectator.named("tick", run_a)] == [1, 2, 3]
    assert finished["metrics"]["continuous"]["tokens"] == 5 and worker.runs[run_a].status is RunStatus.FINISHED


@pytest.mark.model
def test_a_reconnecting_page_rejoins_its_run_by_id(make_app, connect, smol):
    engine = GatedEngine(smol)
    app = make_app({"CANCEL_GRACE_S": 600}, engine=engine)
    first = connect(app)
    run_id = submit(first)
    assert engine.entered.wait(60)
    first.disconnect()                                   # a reload: a new socket, the same run id
    again = connect(app)
    again.emit("watch", {"run_id": run_id})
    again.wait_for("run_started", run_id)
    engine.gate.set()
    assert again.wait_for("run_finished", run_id)["metrics"]["static"]["steps"] == 3
    assert [t["t"] for t in again.named("tick", run_id)] == [1, 2, 3]


@pytest.mark.model
def test_an_exception_inside_a_run_ends_it_with_run_error_and_the_worker_serves_the_next(make_app, connect, smol):
    app = make_app(engine=FaultyEngine(smol))
    probe = connect(app)
    run_id = submit(probe, dict(TINY, name="boom"))
    error = probe.wait_for("run_error", run_id)
    assert error["code"] == "failed" and "RuntimeError: forced failure in step 3" in error["message"]
    assert [t["t"] for t in probe.named("tick", run_id)] == [1, 2] and probe.named("run_finished") == []
    assert app.extensions["book"].runs[run_id].status is RunStatus.FAILED
    next_id = submit(probe)                              # the same client, the same worker, a clean run
    assert probe.wait_for("run_finished", next_id)["metrics"]["continuous"]["tokens"] == 5


@pytest.mark.model
def test_the_page_is_served_while_the_model_loads_and_model_status_reports_progress(make_app, connect, monkeypatch):
    gate, real_load = threading.Event(), app.runs.loader.load_model

    def load_after_gate(*args, **kwargs):
        assert gate.wait(300)
        return real_load(*args, **kwargs)
    monkeypatch.setattr(app.runs.loader, "load_model", load_after_gate)
    flask_app = make_app()
    http = flask_app.test_client()
    assert http.get("/healthz").get_json()["ready"] is False
    assert [p["name"] for p in http.get("/api/presets").get_json()["presets"]][:3] == ["mixed", "same", "one-long"]
    probe = connect(flask_app)
    assert probe.named("model_status")[0]["ready"] is False
    probe.emit("submit", {"workload": TINY})
    assert probe.wait_for("run_error")["code"] == "loading"

    gate.set()
    wait_until(lambda: any(s["ready"] for s in probe.named("model_status")))
    statuses = probe.named("model_status")
    assert statuses[-1]["ready"] is True and statuses[-1]["device"] == "cpu" and statuses[-1]["error"] is None
    progress = [s["progress"] for s in statuses]
    assert progress == sorted(progress) and progress[-1] == 1.0
    health = http.get("/healthz").get_json()
    assert health.pop("storage")["ok"] is True
    assert health | {"queued": 0} == {
        "status": "ok", "ready": True, "model": statuses[-1]["model"], "device": "cpu", "progress": 1.0, "queued": 0}
    run_id = submit(probe)
    assert probe.wait_for("run_finished", run_id)["metrics"]["static"]["tokens"] == 5


def test_a_model_that_cannot_load_is_reported_on_healthz_and_to_submitters(make_app, connect, tmp_path):
    flask_app = make_app({"MODEL": str(tmp_path / "missing-model")})
    probe = connect(flask_app)
    wait_until(lambda: any(s["error"] for s in probe.named("model_status")))
    response = flask_app.test_client().get("/healthz")
    assert response.status_code == 503 and response.get_json()["status"] == "error"
    assert "model not found" in response.get_json()["error"]
    probe.emit("submit", {"workload": TINY})
    refused = probe.wait_for("run_error")
    assert refused["code"] == "loading" and "could not be loaded: model not found" in refused["message"]


class FailingReplicaEngine(Engine):
    """The simulator; in a run named "fleet-boom" replica 1 of its fleet raises from its second step on."""

    def start(self, workload, lanes=None):
        run = super().start(workload, lanes)
        if workload.name == "fleet-boom":
            fail_from(run.lanes["fleet"].replicas[1], 2, "forced replica failure")
        return run


def test_a_fleet_replica_that_fails_ends_its_run_with_run_error_naming_it_and_the_next_run_runs(make_app, connect):
    app = make_app({"BACKEND": "sim"}, engine=FailingReplicaEngine(None))
    probe = connect(app)
    fleet = {"name": "fleet-boom", "slots": 2, "requests": [{"id": f"R{i}", "prompt": "Hi there.", "max_new_tokens": 6}
                                                            for i in range(4)],
             "lanes": [{"name": "fleet", "policy": "continuous", "data_parallel_size": 2, "router": "round_robin"}]}
    run_id = submit(probe, fleet)
    error = probe.wait_for("run_error", run_id)
    assert error["code"] == "failed" and "replica 1 (fleet/1) of fleet 'fleet' failed in fleet step 2: " \
        "RuntimeError: forced replica failure" in error["message"]
    assert app.extensions["book"].runs[run_id].status is RunStatus.FAILED
    next_id = submit(probe, {**fleet, "name": "fleet-fine"})   # the same worker goes on with the next run
    done = probe.wait_for("run_finished", next_id)
    assert done["metrics"]["fleet"]["tokens"] == 24
