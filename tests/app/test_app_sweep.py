"""Load sweeps through the socket on the simulator: queued like a run, one point per rate whose run is stored and
replayable, progress, the end; cancelling by its submitter; bad sweeps name their field."""
import threading
import time

import pytest

from engine import Engine

GENERATED = {"name": "poisson", "slots": 2, "lanes": ["static", "continuous"],
             "generate": {"n": 6, "rate": 2, "seed": 3, "output_tokens": [2, 4], "prompt_words": [4]}}


class SlowSim(Engine):
    """The simulator, whose every tick sleeps a little so that a sweep is still running when the test acts."""

    def __init__(self, delay_s: float = 0.05):
        super().__init__(None)
        self.delay_s = delay_s
        self.ticking = threading.Event()

    def start(self, workload, lanes=None):
        run = super().start(workload, lanes)
        real_tick = run.tick

        def tick():
            self.ticking.set()
            time.sleep(self.delay_s)
            return real_tick()
        run.tick = tick
        return run


def test_a_sweep_sends_one_point_per_rate_whose_run_replays(make_app, connect):
    app = make_app(engine=Engine(None))
    probe = connect(app)
    probe.emit("sweep", {"workload": GENERATED, "rates": [4, 1], "slo_ttft_ms": 500})
    sweep_id = probe.wait_for("run_queued")["run_id"]
    started = probe.wait_for("sweep_started", sweep_id)
    assert started["rates"] == [1.0, 4.0] and started["lanes"] == ["static", "continuous"]
    finished = probe.wait_for("sweep_finished", sweep_id, timeout=60)
    points = probe.named("sweep_point", sweep_id)
    assert [p["rate"] for p in points] == [1.0, 4.0] and [p["done"] for p in points] == [1, 2]
    assert finished["points"] == [{k: v for k, v in p.items() if k not in ("run_id", "done", "total", "seq")} for p in points]
    for point in points:
        for lane in ("static", "continuous"):
            s = point["lanes"][lane]
            assert s["completed"] == 6 and s["request_throughput"] > 0 and s["p99_ttft_ms"] >= s["median_ttft_ms"]
            assert 0 <= s["request_goodput"] <= s["request_throughput"]
        stored = app.test_client().get(f"/api/runs/{point['point_run_id']}").get_json()
        assert stored["lanes"] == ["static", "continuous"]
        arrivals = [r["arrival_ms"] for r in stored["workload"]["requests"]]
        assert arrivals[0] == 0 and arrivals == sorted(arrivals) and len(arrivals) == 6
    fractions = [p["fraction"] for p in probe.named("sweep_progress", sweep_id)]
    assert fractions == sorted(fractions) and all(0 <= f <= 1 for f in fractions)
    assert app.test_client().get(f"/runs/{sweep_id}").status_code == 404  # a sweep is no run to replay
    # a second client watching the finished sweep gets its points again
    late = connect(app)
    late.emit("watch", {"run_id": sweep_id})
    assert late.wait_for("sweep_finished", sweep_id)["points"] == finished["points"]


def test_the_submitter_cancels_a_running_sweep_and_others_cannot(make_app, connect):
    engine = SlowSim()
    app = make_app(engine=engine)
    probe, other = connect(app), connect(app)
    probe.emit("sweep", {"workload": GENERATED, "rates": [1, 2, 4]})
    sweep_id = probe.wait_for("run_queued")["run_id"]
    assert engine.ticking.wait(30)
    other.emit("cancel", {"run_id": sweep_id})
    assert other.wait_for("run_error")["code"] == "not_found"
    probe.emit("cancel", {"run_id": sweep_id})
    error = probe.wait_for("run_error", sweep_id)
    assert error["code"] == "cancelled" and "cancelled by its submitter" in error["message"]
    assert not probe.named("sweep_finished", sweep_id)
    probe.emit("submit", {"workload": {"name": "x", "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 2}]}})
    deadline = time.monotonic() + 30  # the client may submit again at once: its sweep no longer holds its turn
    while len(probe.named("run_queued")) < 2:
        assert time.monotonic() < deadline, probe.events
        time.sleep(0.02)
    assert probe.named("run_queued")[1]["run_id"] != sweep_id


def test_a_queued_run_is_cancelled_by_its_submitter_and_leaves_the_queue(make_app, connect):
    engine = SlowSim(delay_s=0.2)
    app = make_app(engine=engine)
    first, second = connect(app), connect(app)
    first.emit("sweep", {"workload": GENERATED, "rates": [1, 2]})
    first.wait_for("run_queued")
    assert engine.ticking.wait(30)
    second.emit("submit", {"workload": GENERATED})
    queued = second.wait_for("run_queued")
    assert queued["position"] == 1
    second.emit("cancel", {"run_id": queued["run_id"]})
    assert second.wait_for("run_error", queued["run_id"])["code"] == "cancelled"
    assert app.test_client().get("/healthz").get_json()["queued"] == 0


@pytest.mark.parametrize("payload, field", [
    ({"workload": GENERATED}, "rates"),
    ({"workload": GENERATED, "rates": []}, "rates"),
    ({"workload": GENERATED, "rates": [1] * 9}, "rates"),
    ({"workload": GENERATED, "rates": [0]}, "rates[0]"),
    ({"workload": GENERATED, "rates": [1], "slo_ttft_ms": "fast"}, "slo_ttft_ms"),
    ({"workload": GENERATED, "rates": [1], "burstiness": 0}, "burstiness"),
    ({"workload": GENERATED, "rates": [1], "turbo": True}, "turbo"),
    ({"workload": dict(GENERATED, generate={"n": 99}), "rates": [1]}, "generate.n"),
    ({"workload": GENERATED, "rates": [1], "lanes": ["static", "warp"]}, "lanes[1]"),
    ({"workload": [], "rates": [1]}, "workload"),
])
def test_a_bad_sweep_is_a_run_error_naming_the_field(make_app, connect, payload, field):
    probe = connect(make_app(engine=Engine(None)))
    probe.emit("sweep", payload)
    assert probe.wait_for("run_error")["field"] == field


def test_the_sweep_page_is_served(make_app):
    http = make_app(engine=Engine(None)).test_client()
    assert http.get("/sweep").status_code == 200
    assert http.get("/sweep/not%20an%20id").status_code == 404


LESSON = "Twelve requests arrive at 2 per second: the preset's own lesson."


def test_a_sweep_points_run_carries_a_lesson_true_of_the_point_not_the_presets(make_app, connect):
    app = make_app(engine=Engine(None))
    probe = connect(app)
    workload = {**GENERATED, "description": LESSON, "generate": {**GENERATED["generate"], "n": 4}}
    probe.emit("sweep", {"workload": workload, "rates": [1]})
    sweep_id = probe.wait_for("run_queued")["run_id"]
    point = probe.wait_for("sweep_point", sweep_id, timeout=60)
    stored = app.test_client().get(f"/api/runs/{point['point_run_id']}").get_json()["workload"]
    assert stored["name"] == "poisson" and len(stored["requests"]) == 4
    assert LESSON not in stored["description"]
    assert "4 requests arriving at 1 per second" in stored["description"]


def test_a_sweep_on_the_simulator_backend_beside_a_model_is_marked_simulated_and_runs_no_model(make_app, connect, tiny):
    app = make_app(engine=Engine(tiny))
    results = {}
    for backend in ("model", "sim"):
        probe = connect(app)  # a fresh client: wait_for answers its first run_queued
        probe.emit("sweep", {"workload": GENERATED, "rates": [2], "backend": backend})
        sweep_id = probe.wait_for("run_queued")["run_id"]
        started = probe.wait_for("sweep_started", sweep_id)
        point = probe.wait_for("sweep_point", sweep_id, timeout=120)
        probe.wait_for("sweep_finished", sweep_id, timeout=60)
        stored = app.test_client().get(f"/api/runs/{point['point_run_id']}").get_json()
        results[backend] = started, stored
    started, stored = results["model"]
    assert started["simulated"] is False and started["model"] != "simulator"
    assert not stored["workload"]["description"].startswith("SIMULATED")
    assert stored["metrics"]["static"]["simulated"] is False
    started, stored = results["sim"]
    assert started["simulated"] is True and started["model"] == "simulator"
    assert stored["workload"]["description"].startswith("SIMULATED") and stored["model"] == "simulator"
    assert stored["metrics"]["static"]["simulated"] is True
    assert all(r["simulated"] for r in stored["records"]["static"])


def test_a_sweep_backend_other_than_model_or_sim_is_refused_by_name(make_app, connect):
    probe = connect(make_app(engine=Engine(None)))
    probe.emit("sweep", {"workload": GENERATED, "rates": [2], "backend": "gpu"})
    error = probe.wait_for("run_error")
    assert error["field"] == "backend" and '"sim"' in error["message"]
