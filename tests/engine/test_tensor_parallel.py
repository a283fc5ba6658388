"""Tensor-parallel lanes (engine/worker/tensor_parallel.py): the model's weights sharded over rank processes by
transformers' TP plan, each rank's KV pool holding its own K/V heads. The tiny model (4 query heads, 2 KV heads) at
TP=2 writes the plain continuous lane's tokens, its records carry compute and all-reduce time, its ranks end with the
lane; a rank that dies ends the run with an error naming it; sizes the heads do not divide, and options it cannot
combine with, are refused naming the field."""
import json

import pytest

from engine import Engine
from engine.report.metrics import run_metrics
from engine.worker.tensor_parallel import TensorParallelError, TensorParallelRunner
from engine.workload.workload import CLI_LIMITS, WorkloadError, parse_workload
from tests.kit import ROOT

TP2 = {"name": "TP=2", "policy": "continuous", "tensor_parallel_size": 2}


def workload(lanes: list, demo: str = "mixed", **changes):
    return {**json.loads((ROOT / "demos" / f"{demo}.json").read_text()), "lanes": lanes, **changes}


@pytest.mark.slow
def test_tp2_lane_writes_the_plain_lanes_tokens_and_splits_its_steps(tiny_folder):
    engine = Engine(tiny_folder)
    wl = engine.prepare(parse_workload(workload(["continuous", TP2]), CLI_LIMITS))
    run = engine.start(wl)
    lane = run.lanes["TP=2"]
    procs = list(lane.runner.procs)
    assert lane.runner.shard == (2 * 16, 64)  # 2 of the 4 query heads (head_dim 16) of a 64-wide model
    assert lane.runner.kv_bytes == run.lanes["continuous"].runner.kv_bytes  # each rank's pool: half the K/V heads
    run.run_to_end()
    tokens = {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}
    assert tokens["TP=2"] == tokens["continuous"]
    computed = [r for r in lane.records if r.forward_ms]
    assert computed and all(r.allreduces == 2 * 2 * (1 + (r.forward.value == "split")) for r in computed)
    assert all(r.compute_ms > 0 and r.allreduce_ms > 0 for r in computed)
    for r in computed:  # per layer, measured in the ranks: the layers' all-reduces are the step's, their time within it
        assert len(r.layer_ms) == 2 and all(c > 0 and a > 0 for c, a in r.layer_ms)
        assert sum(a for _, a in r.layer_ms) == pytest.approx(r.allreduce_ms, rel=1e-6)
        assert sum(c + a for c, a in r.layer_ms) < r.forward_ms
    placed = lane.records[0].placement
    assert [p["role"] for p in placed["processes"]] == ["driver", "tp rank 0", "tp rank 1"]
    assert [p["pid"] for p in placed["processes"][1:]] == [p.pid for p in procs]
    assert placed["transport"] == "gloo all-reduce over loopback TCP" and placed["says"].startswith("2 rank processes")
    assert all(r.placement is None for r in lane.records[1:])
    assert all(r.compute_ms is None for r in run.lanes["continuous"].records)
    metrics = run_metrics(run.records(), wl)
    assert metrics["TP=2"]["mean_allreduce_ms"] > 0 and "mean_allreduce_ms" not in metrics["continuous"]
    assert metrics["TP=2"]["placement"] == placed and "placement" not in metrics["continuous"]
    assert not any(p.is_alive() for p in procs)  # the ranks ended with the lane


@pytest.mark.slow
def test_a_rank_that_dies_ends_the_run_naming_it(tiny_folder):
    runner = TensorParallelRunner(tiny_folder, 2, slots=2, num_blocks=8, block_size=8)
    runner.procs[1].kill()
    with pytest.raises(TensorParallelError, match="rank 1"):
        runner.reference_ms()
    assert not any(p.is_alive() for p in runner.procs)


def test_sizes_the_heads_do_not_divide_and_options_it_cannot_combine_with_are_refused(tiny):
    engine = Engine(tiny)
    with pytest.raises(WorkloadError, match=r"lanes\[1\]\.tensor_parallel_size.*4 query heads and 2 KV heads.*: 2"):
        engine.prepare(parse_workload(workload(["continuous", {**TP2, "tensor_parallel_size": 3}]), CLI_LIMITS))
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.data_parallel_size.*tensor_parallel_size"):
        parse_workload(workload([{**TP2, "data_parallel_size": 2, "router": "round_robin"}]), CLI_LIMITS)
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.tensor_parallel_size.*integer from 1 to 9"):
        parse_workload(workload([{**TP2, "tensor_parallel_size": 0}]), CLI_LIMITS)
    with pytest.raises(WorkloadError, match="speculative"):
        parse_workload(workload([{**TP2, "speculative": {"method": "prompt_lookup"}}]), CLI_LIMITS)
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.tensor_parallel_size.*at most 3"):
        parse_workload(workload([{**TP2, "tensor_parallel_size": 9}]))  # the server's limits: 3 ranks at most
    assert parse_workload(workload([{**TP2, "tensor_parallel_size": 3}])).lanes  # the preset's size runs there
    with pytest.raises(WorkloadError, match=r"tensor_parallel_size.*simulator"):
        Engine(None).prepare(parse_workload(workload([TP2]), CLI_LIMITS))


@pytest.mark.model
@pytest.mark.slow
def test_smollm2_at_tp3_writes_the_plain_lanes_tokens_on_the_mixed_demo(smol):
    engine = Engine(smol)
    wl = engine.prepare(parse_workload(workload(["continuous", {**TP2, "name": "TP=3", "tensor_parallel_size": 3}]),
                                       CLI_LIMITS))
    run = engine.start(wl)
    lane = run.lanes["TP=3"]
    assert lane.runner.shard == (3 * 64, 576)  # 3 of the 9 query heads
    run.run_to_end()
    tokens = {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}
    assert tokens["TP=3"] == tokens["continuous"]
    calls = {"decode": 1, "prefill": 1, "split": 2}
    assert all(r.allreduces == 60 * calls[r.forward.value] for r in lane.records if r.forward_ms)  # 2 a layer
