"""Pipeline-parallel lanes (engine/worker/pipeline_parallel.py): the model's layers cut into stage processes joined by
torch.distributed.pipelining, each stage's KV pool holding its own layers, every forward call split into
micro-batches. The tiny model (2 layers) at PP=2 writes the plain continuous lane's tokens for the requests of the
mixed and long-prompt demos (in one run, both demos' requests together: one pair of stage processes to pay for, on
a CI budget); its records carry the stage x time grid (the activations flow: a micro-batch starts on stage 1
only after it ended on stage 0) with the measured bubble fraction beside GPipe's formula; its stages end with the
lane (or, killed, end the run naming the stage); sizes the layers do not divide, and what it cannot combine with, are
refused naming the field. (SmolLM2 at PP=2: scripts/bench_pp.py, figures in docs/parallelism.md.)"""
import json

import pytest

from engine import Engine
from engine.report.metrics import run_metrics
from engine.worker.pipeline_parallel import PipelineParallelError
from engine.workload.workload import CLI_LIMITS, WorkloadError, parse_workload
from tests.kit import ROOT

PP2 = {"name": "PP=2", "policy": "continuous", "pipeline_parallel_size": 2, "micro_batches": 2}


def workload(lanes: list, demo: str = "mixed", **changes):
    return {**json.loads((ROOT / "demos" / f"{demo}.json").read_text()), "lanes": lanes, **changes}


def both_demos() -> dict:
    """The mixed demo with the long-prompt demo's requests beside its own (both count arrivals in steps)."""
    long_prompt = json.loads((ROOT / "demos" / "long-prompt.json").read_text())["requests"]
    mixed = workload(["continuous", PP2])
    return {**mixed, "requests": mixed["requests"] + long_prompt}


@pytest.mark.slow
def test_pp2_lane_writes_the_plain_lanes_tokens_and_times_its_stages(tiny_folder):
    engine = Engine(tiny_folder)
    wl = engine.prepare(parse_workload(both_demos(), CLI_LIMITS))
    run = engine.start(wl)
    lane = run.lanes["PP=2"]
    procs = list(lane.runner.procs)
    lane.runner.close = lambda: None  # keep the stages past the run: its stage 1 is then killed
    assert lane.runner.layers == [(0, 1), (1, 2)]  # one of the tiny model's 2 layers a stage
    assert lane.runner.kv_bytes == run.lanes["continuous"].runner.kv_bytes  # each stage's pool: its own layer's K/V
    run.run_to_end()
    tokens = {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}
    assert tokens["PP=2"] == tokens["continuous"] and {"R8", "LONG"} <= set(tokens["PP=2"])
    computed = [r for r in lane.records if r.forward_ms]
    for r in computed:
        assert len(r.micro_batches) == (2 if r.forward.value == "split" else 1) and max(r.micro_batches) <= 2
        first, second = r.stage_grid
        assert [s[:2] for s in first] == [s[:2] for s in second] == \
            [(c, mb) for c, m in enumerate(r.micro_batches) for mb in range(m)]
        assert all(b[2] >= a[3] for a, b in zip(first, second))  # stage 1 starts a micro-batch after stage 0 ends it
        assert all(s[2] < s[3] for s in first + second)
        assert 0 <= r.bubble_fraction < 1
        assert r.bubble_formula == round(len(r.micro_batches) / sum(m + 1 for m in r.micro_batches), 4)
    assert any(r.micro_batches == (2,) and r.bubble_formula == round(1 / 3, 4) for r in computed)
    assert all(r.stage_grid is None for r in run.lanes["continuous"].records)
    metrics = run_metrics(run.records(), wl)
    assert 0 < metrics["PP=2"]["mean_bubble_fraction"] < 1 and "mean_bubble_fraction" not in metrics["continuous"]
    place = lane.records[0].placement  # where it ran: the lane's first record, and its metrics
    assert [(p["role"], p["pid"]) for p in place["processes"][:2]] == [("pp stage 0", procs[0].pid),
                                                                        ("pp stage 1", procs[1].pid)]
    assert place["processes"][2]["role"] == "driver" and "pipelining" in place["transport"]
    assert metrics["PP=2"]["placement"] == place and lane.records[1].placement is None
    assert "stage_grid" in computed[0].to_dict() and "stage_grid" not in run.lanes["continuous"].records[0].to_dict()
    procs[1].kill()  # a stage that dies ends the run naming it, and the other stage is stopped
    lane.runner._reference_ms = None
    with pytest.raises(PipelineParallelError, match=r"pipeline stage 1 \(pid \d+\) died"):
        lane.runner.reference_ms()
    assert not any(p.is_alive() for p in procs)  # the error stopped the other stage too


def test_sizes_the_layers_do_not_divide_and_options_it_cannot_combine_with_are_refused(tiny):
    engine = Engine(tiny)
    with pytest.raises(WorkloadError, match=r"lanes\[1\]\.pipeline_parallel_size.*2 layers.*3 does not.*: 2"):
        engine.prepare(parse_workload(workload(["continuous", {**PP2, "pipeline_parallel_size": 3,
                                                               "micro_batches": 1}]), CLI_LIMITS))
    refusals = {"micro_batches": ({"micro_batches": 0}, "from 1 to the lane's slots"),
                "micro_batches ": ({"micro_batches": 5}, r"from 1 to the lane's slots \(4\)"),
                "tensor_parallel_size": ({"tensor_parallel_size": 2}, "tensor_parallel_size does not combine"),
                "speculative": ({"speculative": {"method": "prompt_lookup"}}, "speculative does not combine"),
                "fused": ({"fused": True}, "fused does not combine"),
                "policy": ({"policy": "static"}, "policy.*continuous"),
                "data_parallel_size": ({"data_parallel_size": 2, "router": "round_robin"}, "fleet"),
                "micro_batches  ": ({"engine": "vllm"}, "not an option of a vLLM lane.*micro-batches")}
    for field, (change, why) in refusals.items():
        with pytest.raises(WorkloadError, match=rf"lanes\[0\]\.{field.strip()}.*{why}"):
            parse_workload(workload([{**PP2, **change}]), CLI_LIMITS)
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.micro_batches.*pipeline_parallel_size"):
        parse_workload(workload([{"name": "m", "policy": "continuous", "micro_batches": 2}]), CLI_LIMITS)
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.pipeline_parallel_size.*at most 2"):
        parse_workload(workload([{**PP2, "pipeline_parallel_size": 3}]))  # the server's limits
    with pytest.raises(WorkloadError, match=r"pipeline_parallel_size.*simulator"):
        Engine(None).prepare(parse_workload(workload([PP2]), CLI_LIMITS))
