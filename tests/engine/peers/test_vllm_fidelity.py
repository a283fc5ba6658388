"""Fidelity, measured: in float32 and greedy, the vLLM lane (a real vLLM V1 engine, its own scheduler and model)
writes the same tokens as solo `generate()` and as our continuous lane, request by request, on the seed classroom
workloads (demos/) and a held set of requests; its records are step records like any lane's; a vLLM process that
dies ends the run with a clear error. One vLLM start for the whole module (its bridge is reused between runs: every
run here has the same vLLM lane), since a start is ~60 s on 2 cores. Needs `make vllm` (.venv-vllm): skipped
without it, a failure under CI=true or BATCH_LANES_REQUIRE_VLLM=1."""
import json

import pytest

from engine import parse_workload
from engine.step import SlotState
from engine.peers.vllm_process import VllmError
from tests.kit.reference import PROMPTS, outputs, solo_generate
from tests.kit import ROOT

pytestmark = [pytest.mark.vllm, pytest.mark.model]
DEMOS = sorted(ROOT.joinpath("demos").glob("*.json"))
# what a demo says and shows, not what it runs here: this module sets the lanes; the engine runs both clocks alike
LESSON_ONLY = ("name", "description", "claims", "clock", "lanes", "slo")  # "slo": targets judged after the run


def distinct_runs(paths) -> dict[str, list]:
    """The demos grouped by the run they make here (their requests and workload options): demos that differ only in
    their lanes or their lesson (swap-vs-recompute is memory-pressure's mix) are one run, named by every demo in it."""
    groups: dict[str, list] = {}
    for path in paths:
        obj = json.loads(path.read_text())
        groups.setdefault(json.dumps({k: v for k, v in obj.items() if k not in LESSON_ONLY}, sort_keys=True), []).append(path)
    return {"+".join(p.stem for p in group): group for group in groups.values()}


RUNS = distinct_runs(DEMOS)
VLLM_LANE = {"name": "vLLM", "engine": "vllm"}
SLOTS = 4  # every run here: one vLLM configuration (max_num_seqs 4), so one vLLM start


def run_beside(engine, workload: dict):
    wl = engine.prepare(parse_workload(workload, slots=SLOTS, lanes=["continuous", VLLM_LANE]))
    run = engine.start(wl)
    run.run_to_end()
    return run


def differences(lm, run, where: str) -> list[str]:
    """Every request whose tokens differ between solo generate(), our continuous lane and the vLLM lane, with the
    first differing position."""
    got, found = outputs(run), []
    for spec in run.workload.requests:
        ref = solo_generate(lm, spec.prompt_ids, spec.max_new_tokens, () if spec.ignore_eos else lm.eos_ids)
        for lane in ("continuous", "vLLM"):
            out = got[lane][spec.id]
            if out != ref:
                pos = next((i for i, (a, b) in enumerate(zip(out, ref)) if a != b), min(len(out), len(ref)))
                found.append(f"{where}: request {spec.id}, token {pos}: the {lane} lane wrote "
                             f"{out[pos:pos + 3]}, generate() {ref[pos:pos + 3]} ({len(out)} vs {len(ref)} tokens)")
    return found


@pytest.mark.parametrize("name", RUNS)  # one item per distinct run: the durations say which costs
def test_the_vllm_lane_writes_what_generate_and_our_continuous_lane_write_on_every_demo(engine, smol, name):
    path = RUNS[name][0]
    found = differences(smol, run_beside(engine, json.loads(path.read_text())), name)
    assert not found, "\n".join(found)


def test_every_demo_is_in_one_run_and_demos_in_one_run_run_alike():
    assert sorted(p for group in RUNS.values() for p in group) == DEMOS
    assert {"memory-pressure+swap-vs-recompute", "long-prompt+vllm", "mixed+tensor-parallel"} <= set(RUNS)
    for group in RUNS.values():
        workloads = [parse_workload(json.loads(p.read_text()), slots=SLOTS, lanes=["continuous"]) for p in group]
        assert len({json.dumps([s.__dict__ for s in w.requests], sort_keys=True, default=str) for w in workloads}) == 1


def test_the_vllm_lane_matches_on_a_held_set_with_eos_stops_and_late_arrivals(engine, smol):
    requests = [{"id": f"H{i}", "prompt": p, "max_new_tokens": [40, 6, 24, 10, 32, 40, 12, 8][i],
                 "ignore_eos": i in (1, 7), "arrival": [0, 0, 0, 1, 2, 2, 5, 9][i]} for i, p in enumerate(PROMPTS)]
    run = run_beside(engine, {"name": "held", "requests": requests})
    assert not differences(smol, run, "held set")
    records = run.lanes["vLLM"].records
    assert any(c.stop is not None and c.stop.value == "eos" for r in records for c in r.slots)
    # its cells are our vocabulary: every request prefilled in a stable slot, then decoded there
    slot_of = {}
    for r in records:
        for i, c in enumerate(r.slots):
            if c.request is not None:
                assert slot_of.setdefault(c.request, i) == i, f"{c.request} moved slots"
    assert {c.state for r in records for c in r.slots} >= {SlotState.PREFILL, SlotState.DECODE, SlotState.IDLE}
    assert sorted(slot_of) == sorted(s["id"] for s in requests)
    assert all(r.ms > 0 for r in records) and round(records[-1].start_ms + records[-1].ms, 3) == run.lanes["vLLM"].clock


def test_arrivals_in_ms_reach_vllm_when_the_lane_clock_does(engine, smol):
    requests = [{"id": "A", "prompt": PROMPTS[1], "max_new_tokens": 6, "arrival_ms": 0},
                {"id": "B", "prompt": PROMPTS[3], "max_new_tokens": 4, "arrival_ms": 60000}]
    run = run_beside(engine, {"name": "timed", "requests": requests})
    lane = run.lanes["vLLM"]
    b_first = next(r for r in lane.records if any(c.request == "B" for c in r.slots))
    assert b_first.start_ms >= 60000  # the lane waited on its clock (a gap), not a step early
    assert not differences(smol, run, "ms arrivals")


def test_a_vllm_process_that_dies_mid_run_ends_the_run_with_a_clear_error(engine):
    """Last in the module: it kills the warm bridge."""
    requests = [{"id": f"K{i}", "prompt": p, "max_new_tokens": 30} for i, p in enumerate(PROMPTS[:3])]
    run = engine.start(engine.prepare(parse_workload({"name": "kill", "requests": requests}, slots=SLOTS,
                                                     lanes=["continuous", VLLM_LANE])))
    run.tick()
    run.tick()
    run.lanes["vLLM"].bridge.proc.kill()
    with pytest.raises(VllmError, match="the vLLM process exited"):
        run.tick()
