"""A tensor-parallel lane through the server (engine/worker/tensor_parallel.py): the server's limits take TP lanes
(3 ranks at most), a run's ranks end with it, and a rank that dies ends its run with run_error naming the rank while
the server goes on to the next run. On the tiny model (4 query heads, 2 KV heads: TP=2), in-process."""
import json
import multiprocessing
import time

import pytest

from engine import Engine
from tests.kit import ROOT
from tests.kit.tiny import tiny_model_folder

pytestmark = pytest.mark.slow
MIXED = json.loads((ROOT / "demos" / "mixed.json").read_text())
TP2 = {"name": "TP=2", "policy": "continuous", "tensor_parallel_size": 2}


def ranks() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("tp-rank")]


def test_a_rank_that_dies_ends_its_run_with_an_error_naming_it_and_the_server_goes_on(make_app, connect, tmp_path):
    app = make_app(engine=Engine(tiny_model_folder(tmp_path / "tiny")))
    probe = connect(app)
    probe.emit("submit", {"workload": {**MIXED, "lanes": ["continuous", TP2]}})
    run_id = probe.wait_for("run_started")["run_id"]
    deadline = time.monotonic() + 120
    while not any(p.name == "tp-rank1" for p in ranks()):  # the run's ranks, spawned as it starts
        assert not probe.named("run_error") and time.monotonic() < deadline, probe.events
        time.sleep(0.01)
    next(p for p in ranks() if p.name == "tp-rank1").kill()
    error = probe.wait_for("run_error", run_id)
    assert "tensor-parallel rank 1" in error["message"] and "the lane's run ends" in error["message"], error
    assert not any(p.is_alive() for p in ranks())  # the other rank was stopped with it: nothing left hanging
    probe.emit("submit", {"workload": {**MIXED, "lanes": ["continuous"]}})  # the server goes on
    while len(probe.named("run_started")) < 2:
        assert time.monotonic() < deadline + 60, probe.events
        time.sleep(0.02)
    second = probe.named("run_started")[1]["run_id"]
    assert probe.wait_for("run_finished", second)["metrics"]["continuous"]["steps"] == 9
