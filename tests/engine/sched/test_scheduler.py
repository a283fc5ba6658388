"""Scheduler behaviour on the step-clock simulator (no model): exact per-step slot states."""
import json

import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.step import SlotState
from tests.kit import ROOT

DEMOS = ROOT / "demos"
CODE = {SlotState.PREFILL: "P", SlotState.DECODE: "D", SlotState.PADDING: "pad", SlotState.PREEMPTED: "X"}


def simulate(workload: dict, lanes=("static", "continuous"), **overrides):
    engine = Engine(None)
    wl = engine.prepare(parse_workload(workload, **overrides))
    run = engine.start(wl, list(lanes))
    run.run_to_end()
    return run


def grid(records) -> list[str]:
    """One line per step: each slot as `P R1`, `D R1`, `pad R2`, or `-` when idle."""
    return [" | ".join("-" if c.state is SlotState.IDLE else f"{CODE[c.state]} {c.request}" for c in r.slots)
            for r in records]


def workload(*reqs, slots=4) -> dict:
    """reqs: (id, max_new_tokens, arrival) tuples."""
    return {"name": "t", "slots": slots, "requests": [
        {"id": i, "prompt": f"prompt {i}", "max_new_tokens": n, "ignore_eos": True, "arrival": a} for i, n, a in reqs]}


def demo(name: str) -> dict:
    return json.loads((DEMOS / f"{name}.json").read_text())


def test_continuous_lane_refills_slot_the_step_after_a_finish():
    run = simulate(demo("mixed"))
    assert grid(run.lanes["continuous"].records) == [
        "P R1 | P R2 | P R3 | P R4",
        "D R1 | D R2 | D R3 | D R4",
        "D R1 | P R5 | D R3 | P R6",
        "D R1 | D R5 | P R7 | D R6",
        "D R1 | D R5 | D R7 | P R8",
        "D R1 | D R5 | D R7 | D R8",
        "D R1 | D R5 | - | -",
        "D R1 | D R5 | - | -",
        "- | D R5 | - | -",
    ]


def test_static_lane_keeps_finished_rows_as_padding_until_the_group_ends():
    g = grid(simulate(demo("mixed")).lanes["static"].records)
    assert len(g) == 15
    assert g[0] == "P R1 | P R2 | P R3 | P R4"
    assert g[1] == "D R1 | D R2 | D R3 | D R4"
    assert g[2] == "D R1 | pad R2 | D R3 | pad R4"
    assert g[3:8] == ["D R1 | pad R2 | pad R3 | pad R4"] * 5
    assert g[8] == "P R5 | P R6 | P R7 | P R8"
    assert g[9] == "D R5 | D R6 | D R7 | D R8"
    assert g[10] == "D R5 | pad R6 | D R7 | pad R8"
    assert g[11:] == ["D R5 | pad R6 | pad R7 | pad R8"] * 4


@pytest.mark.parametrize("name, steps, tps, use, ttft", [
    ("mixed", (15, 9), (1.93, 3.22), (0.48, 0.81), (5.0, 2.375)),
    ("same", (8, 8), (4.00, 4.00), (1.00, 1.00), (3.0, 3.0)),
    ("one-long", (14, 12), (1.86, 2.17), (0.46, 0.54), (7.0, 2.25)),
])
def test_classroom_table_on_the_step_clock(name, steps, tps, use, ttft):
    run = simulate(demo(name))
    for i, lane in enumerate(("static", "continuous")):
        m = lane_metrics(run.lanes[lane].records, run.workload)
        assert m["steps"] == steps[i]
        assert round(m["tokens_per_step"], 2) == tps[i]
        assert round(m["slot_use"], 2) == use[i]
        assert m["mean_ttft_steps"] == pytest.approx(ttft[i])
        assert m["simulated"] is True and m["wall_s"] == pytest.approx(sum(r.ms for r in run.lanes[lane].records) / 1000)


def test_static_group_waits_for_all_members_and_continuous_for_nothing():
    run = simulate(workload(("A", 3, 0), ("B", 2, 2), ("C", 1, 5), slots=2))
    assert grid(run.lanes["continuous"].records) == [
        "P A | -", "D A | -", "D A | P B", "- | D B", "- | -", "P C | -"]
    assert grid(run.lanes["static"].records) == [
        "- | -", "- | -", "P A | P B", "D A | D B", "D A | pad B", "P C | -"]
    waits = [r for r in run.lanes["continuous"].records if r.step == 5][0]
    computed = sorted(r.ms for r in run.lanes["continuous"].records[:4])
    # a step that computes nothing lasts the lane's median measured step so far: waiting is not free
    assert waits.forward == "none" and waits.ms == pytest.approx((computed[1] + computed[2]) / 2)


def test_dynamic_lane_starts_a_partial_group_after_max_wait():
    wl = workload(("R1", 2, 0), ("R2", 2, 0), ("R3", 2, 10), ("R4", 2, 10))
    run = simulate(wl, lanes=("static", "dynamic"), max_wait=3)
    dyn, sta = run.lanes["dynamic"].records, run.lanes["static"].records
    assert grid(dyn)[:5] == ["- | - | - | -"] * 3 + ["P R1 | P R2 | - | -", "D R1 | D R2 | - | -"]
    assert dyn[3].admitted == ("R1", "R2")
    # static waits for the full group: R3 and R4 arrive at step 11
    assert grid(sta)[10] == "P R1 | P R2 | P R3 | P R4"
    m = lane_metrics(dyn, run.workload)["requests"]
    assert (m["R1"]["first_token_step"], m["R1"]["return_step"]) == (4, 5)


def test_dynamic_lane_starts_a_full_group_without_waiting():
    wl = workload(*[(f"R{i}", 2, 0) for i in range(1, 6)])
    run = simulate(wl, lanes=("dynamic",), max_wait=50)
    g = grid(run.lanes["dynamic"].records)
    assert g[0] == "P R1 | P R2 | P R3 | P R4"
    # R5 is alone and waits max_wait steps from its arrival at step 1: it may start at step 51
    assert g[2:50] == ["- | - | - | -"] * 48 and g[50] == "P R5 | - | - | -"


def test_static_returns_the_whole_group_when_its_longest_member_is_done():
    run = simulate(demo("mixed"))
    m = lane_metrics(run.lanes["static"].records, run.workload)["requests"]
    assert {rid: (q["finish_step"], q["return_step"]) for rid, q in m.items()} == {
        "R1": (8, 8), "R2": (2, 8), "R3": (3, 8), "R4": (2, 8),
        "R5": (15, 15), "R6": (10, 15), "R7": (11, 15), "R8": (10, 15)}
    c = lane_metrics(run.lanes["continuous"].records, run.workload)["requests"]
    assert all(q["return_step"] == q["finish_step"] for q in c.values())


def test_every_busy_slot_writes_one_token_per_step():
    run = simulate(demo("mixed"))
    for lane in run.lanes.values():
        for r in lane.records:
            for c in r.slots:
                assert (c.token_id is not None) == (c.state in (SlotState.PREFILL, SlotState.DECODE))


def test_kv_use_counts_prompt_and_fed_back_tokens():
    run = simulate(workload(("A", 3, 0), slots=1))
    prompt = len(run.workload.requests[0].prompt_ids)
    assert [r.kv_used for r in run.lanes["continuous"].records] == [prompt, prompt + 1, prompt + 2]
